//! The small rows users expect (issue 35): several messages deleted in one request (all or
//! nothing), a memory stored under a given id or replaced (`PUT /memories/{id}`), and a session's
//! storage figures (`GET /sessions/{sid}/storage`).

use crate::support::{code, msg, Api};
use serde_json::{json, Value as Json};

fn chain(api: &Api) {
    // a ─ b ─ c ─ d, and b ─ x (a second branch under b).
    for (id, parent) in [("a", None), ("b", Some("a")), ("c", Some("b")), ("d", Some("c")), ("x", Some("b"))] {
        api.append("s", id, parent.map(Some), id);
    }
}

fn stored_ids(api: &Api) -> Vec<String> {
    use session_agent_core::sql::Sql;
    let rows = api.db.query("SELECT id FROM messages WHERE session_id = 's' ORDER BY seq", &[]).unwrap();
    rows.iter().map(|r| r.text(0).unwrap()).collect()
}

#[test]
fn several_messages_go_in_one_request_and_their_children_become_roots() {
    let api = Api::new();
    chain(&api);
    api.events.take("s");
    let r = api.post("/sessions/s/messages/delete", json!({"ids": ["c", "b", "c"]}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body_json(), json!({"deleted": ["c", "b"]}), "each once, in the order first named");
    assert_eq!(stored_ids(&api), ["a", "d", "x"]);
    // The children of what went are roots: their paths start at them.
    assert_eq!(api.history_ids("/sessions/s/history?leaf=d"), ["d"]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=x"), ["x"]);
    let frames = api.events.take("s");
    let deleted: Vec<&Json> = frames.iter().filter(|f| f["type"] == "deleted").collect();
    assert_eq!(deleted.len(), 1, "one frame for the request: {frames:?}");
    assert_eq!(deleted[0]["ids"], json!(["c", "b"]));
    // Searches no longer find them.
    assert_eq!(api.get("/sessions/s/search?q=c").body_json()["results"], json!([]));
}

#[test]
fn an_unknown_id_deletes_nothing() {
    let api = Api::new();
    chain(&api);
    let r = api.post("/sessions/s/messages/delete", json!({"ids": ["a", "b", "nope"]}));
    assert_eq!((r.status, code(&r).as_str()), (404, "not_found"));
    assert!(r.body_json()["error"]["message"].as_str().unwrap().contains("nope"));
    assert_eq!(stored_ids(&api), ["a", "b", "c", "d", "x"], "all or nothing");
    assert_eq!(api.history_ids("/sessions/s/history?leaf=d"), ["a", "b", "c", "d"]);
    // Another session's message is unknown here.
    api.append("t", "t1", None, "elsewhere");
    assert_eq!(api.post("/sessions/s/messages/delete", json!({"ids": ["a", "t1"]})).status, 404);
    assert_eq!(stored_ids(&api).len(), 5);
}

#[test]
fn bad_batch_deletes_are_400_and_change_nothing() {
    let api = Api::new();
    chain(&api);
    let many: Vec<String> = (0..1001).map(|i| format!("m{i}")).collect();
    for body in [
        json!({}),
        json!({"ids": []}),
        json!({"ids": "a"}),
        json!({"ids": [1]}),
        json!({"ids": ["a", null]}),
        json!({"ids": [""]}),
        json!({"ids": ["a\u{0}"]}),
        json!({"ids": many}),
        json!({"ids": ["a"], "cascade": true}),
    ] {
        let r = api.post("/sessions/s/messages/delete", body.clone());
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{body}");
    }
    let mut req = session_agent_api::Request::new(session_agent_api::http::Method::Post, "/sessions/s/messages/delete");
    req.body = b"[\"a\"]".to_vec();
    assert_eq!(api.send(req).status, 400);
    assert_eq!(stored_ids(&api), ["a", "b", "c", "d", "x"]);
    // 1,000 ids is the limit, not past it (all unknown here: 404).
    assert_eq!(api.post("/sessions/s/messages/delete", json!({"ids": many[..1000]})).status, 404);
}

#[test]
fn a_message_called_delete_is_still_a_message() {
    let api = Api::new();
    api.append("s", "delete", None, "hi");
    assert_eq!(api.get("/sessions/s/messages/delete").body_json()["id"], "delete");
    let r = api.put("/sessions/s/messages/delete", json!({"message": msg("delete", "user", "edited")}));
    assert_eq!(r.status, 200);
    let r = api.post("/sessions/s/messages/delete", json!({"ids": ["delete"]}));
    assert_eq!(r.body_json(), json!({"deleted": ["delete"]}));
    api.append("s", "delete", None, "again");
    assert_eq!(api.delete("/sessions/s/messages/delete").status, 204);
    assert!(stored_ids(&api).is_empty());
}

fn memories(api: &Api) -> i64 {
    api.count("SELECT count(*) FROM memories")
}

#[test]
fn put_stores_a_memory_under_its_id_then_replaces_it() {
    let api = Api::new();
    let r =
        api.put("/memories/pref.editor", json!({"content": "The user edits in Vim.", "tags": ["tools"], "score": 0.9}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let m = r.body_json();
    assert_eq!((m["id"].as_str(), m["category"].as_str()), (Some("pref.editor"), Some("core")));
    assert_eq!(api.get("/memories/pref.editor").body_json()["content"], "The user edits in Vim.");
    // Again: a replacement. What the body leaves out takes its default (tags, score).
    let r = api.put("/memories/pref.editor", json!({"content": "The user edits in Helix.", "category": "daily"}));
    assert_eq!(r.status, 200);
    let m = r.body_json();
    assert_eq!(m["content"], "The user edits in Helix.");
    assert_eq!((m["tags"].clone(), m["score"].clone()), (json!([]), Json::Null));
    assert!(m["expiresAt"].is_string(), "a daily memory expires");
    assert_eq!(m["createdAt"], api.get("/memories/pref.editor/history").body_json()["versions"][0]["at"]);
    let versions = api.get("/memories/pref.editor/history").body_json()["versions"].as_array().unwrap().len();
    assert_eq!(versions, 2);
    assert_eq!(memories(&api), 1);
    // Found by recall, and a PATCH still changes it in place.
    let hits = api.get("/memories/search?q=helix").body_json()["results"].as_array().unwrap().len();
    assert_eq!(hits, 1);
    assert_eq!(api.patch("/memories/pref.editor", json!({"score": 0.5})).status, 200);
    // A PUT of a memory made by POST replaces it too.
    let id = api.post("/memories", json!({"content": "Likes tea."})).body_json()["id"].as_str().unwrap().to_owned();
    assert_eq!(api.put(&format!("/memories/{id}"), json!({"content": "Likes green tea."})).status, 200);
}

#[test]
fn put_refuses_what_it_cannot_store_and_changes_nothing() {
    let api = Api::new();
    api.put("/memories/m1", json!({"content": "Lives in Berlin.", "sessionId": "s1", "category": "conversation"}));
    let before = api.get("/memories/m1").body_json();
    let long = format!("/memories/{}", "x".repeat(129));
    let cases: Vec<(&str, Json, u16)> = vec![
        ("/memories/a%20b", json!({"content": "x"}), 400),
        ("/memories/%C3%A9", json!({"content": "x"}), 400),
        (&long, json!({"content": "x"}), 400),
        ("/memories/m2", json!({}), 400),
        ("/memories/m2", json!({"content": "  "}), 400),
        ("/memories/m2", json!({"content": "x", "supersedes": ["m1"]}), 400),
        ("/memories/m2", json!({"content": "x", "colour": "red"}), 400),
        ("/memories/m2", json!({"content": "x", "score": 2}), 400),
        ("/memories/m2", json!({"content": "x", "category": "conversation"}), 400),
        // The same text as m1 (same category and session): m1 holds it already.
        ("/memories/m2", json!({"content": "lives in  berlin.", "sessionId": "s1", "category": "conversation"}), 409),
        // m1's source and validFrom do not change.
        ("/memories/m1", json!({"content": "Lives in Paris.", "sessionId": "s2", "category": "conversation"}), 409),
        ("/memories/m1", json!({"content": "Lives in Paris.", "validFrom": "2020-01-01T00:00:00Z"}), 409),
        ("/memories/m1", json!({"content": "x", "expiresAt": "2001-01-01T00:00:00Z"}), 400),
    ];
    for (path, body, status) in cases {
        let r = api.put(path, body.clone());
        assert_eq!(r.status, status, "{path} {body}: {}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(memories(&api), 1);
    assert_eq!(api.get("/memories/m1").body_json(), before);
    // `batch` and `search` are routes, not memories.
    assert_eq!(api.put("/memories/search", json!({"content": "x"})).status, 405);
    assert_eq!(api.put("/memories/batch", json!({"content": "x"})).status, 405);
    assert_eq!(memories(&api), 1);
}

#[test]
fn put_keeps_to_the_memory_cap() {
    let api = Api::with_config(json!({"memory": {"maxMemories": 1}}));
    assert_eq!(api.put("/memories/one", json!({"content": "One."})).status, 201);
    let r = api.put("/memories/two", json!({"content": "Two."}));
    assert_eq!((r.status, code(&r).as_str()), (422, "over_budget"));
    assert_eq!(api.put("/memories/one", json!({"content": "Uno."})).status, 200, "a replacement adds none");
}

fn tool_msg(id: &str, n: usize) -> Json {
    json!({"id": id, "role": "assistant", "parts": [
        {"type": "dynamic-tool", "toolName": "fetch", "toolCallId": format!("call-{id}"), "state": "output-available",
         "input": {}, "output": {"body": "o".repeat(n)}}]})
}

#[test]
fn a_sessions_storage_figures() {
    let api = Api::new();
    let r = api.get("/sessions/s/storage");
    assert_eq!((r.status, code(&r).as_str()), (404, "not_found"));
    chain(&api);
    api.post("/sessions/s/messages", json!({"message": tool_msg("big", 3_000_000)}));
    api.post("/sessions/s/compactions", json!({"summary": "a and b", "fromMessageId": "a", "toMessageId": "b"}));
    let f = api.get("/sessions/s/storage").body_json();
    let sum = |q: &str| api.count(q);
    assert_eq!(f["sessionId"], "s");
    assert_eq!(f["kinds"]["messages"]["rows"], 6);
    assert_eq!(f["kinds"]["messages"]["bytes"], sum("SELECT sum(length(CAST(content AS BLOB))) FROM messages"));
    assert_eq!(f["kinds"]["compactions"], json!({"rows": 1, "bytes": 7}));
    assert_eq!(f["kinds"]["spills"]["rows"], 1);
    assert_eq!((f["r2Objects"].as_i64(), f["r2Bytes"].as_i64()), (Some(1), Some(sum("SELECT sum(bytes) FROM spills"))));
    assert!(f["r2Bytes"].as_i64().unwrap() > 3_000_000);
    assert!(f["kinds"]["messages"]["bytes"].as_i64().unwrap() < 10_000, "the row keeps a placeholder");
    let kinds = f["kinds"].as_object().unwrap();
    let rows: i64 = kinds.values().map(|k| k["rows"].as_i64().unwrap()).sum();
    let bytes: i64 = kinds.values().map(|k| k["bytes"].as_i64().unwrap()).sum();
    assert_eq!((f["rows"].as_i64(), f["sqliteBytes"].as_i64()), (Some(rows), Some(bytes)));
    // Another session's rows are not counted; a delete takes its rows and objects off.
    api.append("t", "t1", None, "elsewhere");
    assert_eq!(api.post("/sessions/s/messages/delete", json!({"ids": ["big", "a"]})).status, 200);
    let f = api.get("/sessions/s/storage").body_json();
    assert_eq!(f["kinds"]["messages"]["rows"], 4);
    assert_eq!((f["r2Bytes"].as_i64(), f["r2Objects"].as_i64()), (Some(0), Some(0)));
    let t = api.get("/sessions/t/storage").body_json();
    assert_eq!((t["rows"].as_i64(), t["kinds"]["messages"]["rows"].as_i64()), (Some(1), Some(1)));
}
