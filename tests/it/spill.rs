//! Oversize messages: their largest fields go to the object store, the row stays under the
//! limit, every read returns the message whole, and objects go when their last message goes.

use crate::support::{msg, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_core::config::SessionConfig;
use session_agent_core::sql::Sql;
use session_agent_core::store::message::MAX_MESSAGE_BYTES;

/// An assistant message with a tool output of `n` bytes and a short text.
fn tool_msg(id: &str, n: usize) -> Json {
    json!({"id": id, "role": "assistant", "parts": [
        {"type": "text", "text": format!("the {id} report")},
        {"type": "dynamic-tool", "toolName": "fetch", "toolCallId": format!("call-{id}"), "state": "output-available",
         "input": {"url": "https://example.com"}, "output": {"body": "o".repeat(n), "status": 200}}]})
}

fn row_bytes(api: &Api, id: &str) -> i64 {
    let r = api
        .db
        .query_row("SELECT length(CAST(content AS BLOB)) FROM messages WHERE id = ?", &[id.into()])
        .unwrap()
        .unwrap();
    r.int(0).unwrap()
}

fn spill_keys(api: &Api) -> Vec<String> {
    api.blobs.keys().into_iter().filter(|k| k.starts_with("_spill/")).collect()
}

#[test]
fn a_5_mb_tool_output_is_stored_and_read_whole() {
    let api = Api::new();
    let big = tool_msg("big", 5_000_000);
    let r = api.post("/sessions/s/messages", json!({"message": big}));
    assert_eq!(r.status, 201);
    assert_eq!(r.body_json()["message"], big, "the answer echoes the message whole");
    assert!(row_bytes(&api, "big") < 2_000, "the row keeps a placeholder: {}", row_bytes(&api, "big"));
    let keys = spill_keys(&api);
    assert_eq!(keys.len(), 1);
    assert!(keys[0].starts_with("_spill/alice/s/"), "{keys:?}");

    api.post("/sessions/s/messages", json!({"message": msg("after", "user", "thanks")}));
    assert_eq!(api.get("/sessions/s/messages/big").body_json(), big);
    for path in ["/sessions/s/history", "/sessions/s/history?raw=1", "/sessions/s/history/recent?maxBytes=100000000"] {
        let h = api.get(path).body_json();
        assert_eq!(h["messages"][0], big, "{path}");
    }
    assert_eq!(api.get("/sessions/s/messages/big/branches").body_json()["messages"][0]["id"], "after");
    // The row stands for the message everywhere else: search finds its text.
    let hits = api.get("/sessions/s/search?q=report").body_json();
    assert_eq!(hits["results"][0]["id"], "big");
    // Truncated reads start from the whole message too.
    let t = api.get("/sessions/s/history?truncate=1&keepRecent=0").body_json();
    assert_eq!(t["messages"][0]["parts"][1]["output"]["status"], 200);
    assert!(t["messages"][0]["parts"][1]["output"]["body"].as_str().unwrap().ends_with("chars]"));
}

#[test]
fn the_largest_fields_move_first_and_only_as_many_as_needed() {
    let api = Api::new();
    let m = json!({"id": "m", "role": "user", "metadata": {"note": "n".repeat(100_000)}, "parts": [
        {"type": "text", "text": "a".repeat(1_000_000)},
        {"type": "text", "text": "b".repeat(1_200_000)},
        {"type": "file", "mediaType": "image/png", "url": format!("data:image/png;base64,{}", "c".repeat(900_000))}]});
    assert_eq!(api.post("/sessions/s/messages", json!({"message": m})).status, 201);
    // 3.2 MB: moving b (1.2 MB) leaves 2.0 MB, then a (1 MB) leaves 1.0 MB: two objects.
    assert_eq!(spill_keys(&api).len(), 2);
    let stored: Json = serde_json::from_str(
        &api.db.query_row("SELECT content FROM messages WHERE id = 'm'", &[]).unwrap().unwrap().text(0).unwrap(),
    )
    .unwrap();
    assert!(stored["parts"][1]["text"].as_str().unwrap().starts_with("[1200002 bytes stored in R2; starts: bbbb"));
    assert!(stored["parts"][0]["text"].as_str().unwrap().starts_with("[1000002 bytes stored in R2"));
    assert_eq!(stored["parts"][2], m["parts"][2], "the smaller file part stays in the row");
    assert_eq!(stored["metadata"], m["metadata"]);
    assert!(row_bytes(&api, "m") as usize <= MAX_MESSAGE_BYTES);
    assert_eq!(api.get("/sessions/s/messages/m").body_json(), m);
}

#[test]
fn objects_go_with_their_last_message() {
    let api = Api::new();
    api.post("/sessions/s/messages", json!({"message": tool_msg("a", 2_000_000)}));
    api.post("/sessions/s/messages", json!({"message": tool_msg("b", 2_000_000)}));
    api.post("/sessions/s/messages", json!({"message": tool_msg("c", 2_000_000)}));
    assert_eq!(spill_keys(&api).len(), 3);
    // Update: the old object goes, a new one comes; a small new version needs none.
    let before = spill_keys(&api);
    assert_eq!(api.put("/sessions/s/messages/a", json!({"message": tool_msg("a", 3_000_000)})).status, 200);
    let after = spill_keys(&api);
    assert_eq!(after.len(), 3);
    assert_ne!(before, after);
    assert_eq!(api.get("/sessions/s/messages/a").body_json(), tool_msg("a", 3_000_000));
    assert_eq!(api.put("/sessions/s/messages/a", json!({"message": tool_msg("a", 10)})).status, 200);
    assert_eq!(spill_keys(&api).len(), 2);
    // Delete one message, then clear the session. The object goes once the answer is sent:
    // the answer carries the sweep, which `send` runs after it, as the Durable Object does.
    let answer = futures::executor::block_on(session_agent_api::handle(
        &api.env(),
        &session_agent_api::Request::new(Method::Delete, "/sessions/s/messages/b"),
    ));
    assert_eq!(answer.status, 204);
    assert_eq!(answer.after, [session_agent_core::after::After::Sweep]);
    assert_eq!(spill_keys(&api).len(), 2, "not yet: the sweep runs after the answer");
    futures::executor::block_on(session_agent_api::after(&api.env(), &answer.after));
    assert_eq!(spill_keys(&api).len(), 1);
    assert_eq!(api.delete("/sessions/s/messages").status, 204);
    assert!(spill_keys(&api).is_empty());
    // Deleting a session.
    api.post("/sessions/t/messages", json!({"message": tool_msg("x", 2_000_000)}));
    assert_eq!(spill_keys(&api).len(), 1);
    assert_eq!(api.delete("/sessions/t").status, 204);
    assert!(spill_keys(&api).is_empty());
    assert_eq!(api.db.query_row("SELECT count(*) FROM spills", &[]).unwrap().unwrap().int(0).unwrap(), 0);
}

#[test]
fn a_fork_shares_the_objects_until_both_are_gone() {
    let api = Api::new();
    api.post("/sessions/s/messages", json!({"message": msg("q", "user", "fetch it")}));
    api.post("/sessions/s/messages", json!({"message": tool_msg("big", 2_500_000)}));
    let fork = api.post("/sessions/s/fork", json!({"atMessageId": "big", "name": "copy"})).body_json();
    let fid = fork["id"].as_str().unwrap().to_owned();
    assert_eq!(spill_keys(&api).len(), 1, "shared, not copied");
    let h = api.get(&format!("/sessions/{fid}/history")).body_json();
    let copy = &h["messages"][1];
    assert_ne!(copy["id"], "big");
    assert_eq!(copy["parts"], tool_msg("big", 2_500_000)["parts"]);
    let hits = api.get(&format!("/sessions/{fid}/search?q=report")).body_json();
    assert_eq!(hits["results"].as_array().unwrap().len(), 1);
    assert_eq!(api.delete("/sessions/s").status, 204);
    assert_eq!(spill_keys(&api).len(), 1, "the fork still uses it");
    assert_eq!(
        api.get(&format!("/sessions/{fid}/history")).body_json()["messages"][1]["parts"],
        tool_msg("big", 2_500_000)["parts"]
    );
    assert_eq!(api.delete(&format!("/sessions/{fid}")).status, 204);
    assert!(spill_keys(&api).is_empty());
}

#[test]
fn writes_that_store_nothing_leave_no_objects() {
    let api = Api::new();
    api.post("/sessions/s/messages", json!({"message": tool_msg("big", 2_000_000)}));
    // The same id again: inserted:false, no new object.
    let r = api.post("/sessions/s/messages", json!({"message": tool_msg("big", 3_000_000)}));
    assert_eq!((r.status, r.body_json()["inserted"].clone()), (200, json!(false)));
    assert_eq!(r.body_json()["message"], tool_msg("big", 2_000_000), "the stored one, whole");
    assert_eq!(spill_keys(&api).len(), 1);
    // A batch whose last message cannot fit: 413, and the first's object is gone again.
    let parts: Vec<Json> = (0..2000).map(|_| json!({"type": "text", "text": "x".repeat(1000)})).collect();
    let r = api.post(
        "/sessions/s/messages/batch",
        json!({"messages": [tool_msg("b1", 2_000_000), {"id": "b2", "role": "user", "parts": parts}]}),
    );
    assert_eq!(r.status, 413);
    assert!(r.body_json()["error"]["message"].as_str().unwrap().starts_with("messages[1]:"));
    assert_eq!(spill_keys(&api).len(), 1);
    assert_eq!(api.get("/sessions/s/messages/b1").status, 404);
    // A good batch of two oversize messages.
    let r = api.post(
        "/sessions/s/messages/batch",
        json!({"messages": [tool_msg("b1", 2_000_000), tool_msg("b2", 2_000_000)]}),
    );
    assert_eq!(r.status, 201);
    assert_eq!(spill_keys(&api).len(), 3);
    assert_eq!(api.get("/sessions/s/history").body_json()["messages"][2], tool_msg("b2", 2_000_000));
}

#[test]
fn a_missing_object_leaves_its_placeholder_and_a_warning() {
    let api = Api::new();
    api.post("/sessions/s/messages", json!({"message": tool_msg("big", 2_000_000)}));
    use session_agent_core::blobs::Blobs;
    let key = spill_keys(&api).remove(0);
    futures::executor::block_on(api.blobs.delete(&key)).unwrap();
    let r = api.get("/sessions/s/history");
    assert_eq!(r.status, 200);
    let body = r.body_json()["messages"][0]["parts"][1]["output"].clone();
    assert!(body.as_str().unwrap().starts_with("[2000024 bytes stored in R2; starts: {\"body\":\"ooo"), "{body}");
    assert!(r.warnings.iter().any(|w| w.contains(&key)), "{:?}", r.warnings);
}

#[test]
fn the_summarizer_reads_placeholders_and_expand_reads_whole() {
    let api = Api::with_config(json!({"compaction": {"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}}))
        .with_model();
    api.post("/sessions/s/messages", json!({"message": msg("m1", "user", "hello")}));
    api.post("/sessions/s/messages", json!({"message": tool_msg("m2", 3_000_000)}));
    api.post("/sessions/s/messages", json!({"message": msg("m3", "user", "and?")}));
    api.post("/sessions/s/messages", json!({"message": msg("m4", "assistant", "done")}));
    let r = api.post("/sessions/s/compact", json!({}));
    assert_eq!(r.status, 200);
    let c = r.body_json()["compaction"].clone();
    let prompt = api.model.prompts().remove(0);
    assert!(prompt.contains("bytes stored in R2"), "the 3 MB output is not sent to the summarizer");
    assert!(prompt.len() < 10_000);
    let page = api.get(&format!("/sessions/s/compactions/{}/messages", c["id"].as_str().unwrap())).body_json();
    let m2 = page["messages"].as_array().unwrap().iter().find(|m| m["id"] == "m2").unwrap().clone();
    assert_eq!(m2, tool_msg("m2", 3_000_000));
}

// invariant 13 (docs/ARCHITECTURE.md)
#[test]
fn skills_prefixes_may_not_reach_spilled_objects() {
    for (prefix, scope, ok) in [
        ("_spill/", "agent", false),
        ("_", "agent", false),
        ("", "shared", false),
        ("_spill/x/", "shared", false),
        ("", "agent", false),
        ("skills/", "shared", true),
        ("_skills/", "shared", true),
    ] {
        let cfg = json!({"context": [{"label": "sk", "kind": "skills", "prefix": prefix, "scope": scope}]}).to_string();
        assert_eq!(SessionConfig::from_json(&cfg).is_ok(), ok, "{prefix:?} {scope}");
    }
}

/// A crash after an oversize field is in the store but before its row commits: the key is still
/// pending when the Durable Object starts again, becomes garbage, and the next write request
/// deletes the object. Committed spills are never touched by that recovery.
// invariant 16 (docs/ARCHITECTURE.md)
#[test]
fn objects_of_a_write_cut_short_by_a_crash_are_swept_after_restart() {
    use session_agent_core::store::message::NewMessage;
    use session_agent_core::store::spill;
    let api = Api::new();
    api.post("/sessions/s/messages", json!({"message": tool_msg("kept", 3_000_000)}));
    // The write's first half, as the API runs it; then the "crash": no transaction follows.
    let mut m = NewMessage::from_json(&tool_msg("lost", 3_000_000)).unwrap();
    futures::executor::block_on(spill::prepare(&*api.db, &*api.blobs, "alice", "s", &mut m)).unwrap();
    assert_eq!(spill_keys(&api).len(), 2);
    let pending = api.db.query_row("SELECT count(*) FROM spill_pending", &[]).unwrap().unwrap().int(0).unwrap();
    assert_eq!(pending, 1);
    // A write before the restart does not touch a pending object (its write may be in flight).
    api.post("/sessions/s/messages", json!({"message": msg("x", "user", "x")}));
    assert_eq!(spill_keys(&api).len(), 2);
    // Restart: open the same database again.
    session_agent_core::store::open(&*api.db, 0).unwrap();
    api.post("/sessions/s/messages", json!({"message": msg("y", "user", "y")}));
    let keys = spill_keys(&api);
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(api.get("/sessions/s/messages/kept").body_json(), tool_msg("kept", 3_000_000));
    let left = api
        .db
        .query_row("SELECT (SELECT count(*) FROM spill_pending) + (SELECT count(*) FROM spill_garbage)", &[])
        .unwrap()
        .unwrap();
    assert_eq!(left.int(0).unwrap(), 0);
}
