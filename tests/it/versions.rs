//! Reads kept between writes on real SQLite: each session's version (migration 0009) moves with
//! every write to its messages and overlays and with nothing else; a kept history grows with the
//! appends at its end (single, batch, an agent turn), and what is served always equals a fresh
//! read.

use crate::support::{completion, db_at, ids, msg, Api, Rng};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_core::sql::{Sql, Value};
use session_agent_core::store::schema;

fn history(api: &Api, q: &str) -> Json {
    let r = api.get(&format!("/sessions/s/history{q}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

/// The history as a read with nothing kept answers it.
fn fresh(api: &Api, q: &str) -> Json {
    api.cache().clear();
    history(api, q)
}

/// The session's version: its newest seq and the count of its other writes.
/// The versions a database at schema version `v` (the first `v` migrations) is migrated through.
pub fn after(v: usize) -> Vec<i64> {
    schema::MIGRATIONS[v..].iter().map(|m| m.0).collect()
}

fn version(api: &Api, sid: &str) -> (i64, i64) {
    (
        api.count(&format!("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = '{sid}'")),
        api.count(&format!("SELECT COALESCE((SELECT n FROM session_versions WHERE session_id = '{sid}'), 0)")),
    )
}

#[test]
fn a_version_moves_with_its_sessions_messages_and_overlays_only() {
    let api = Api::new();
    let mut seen = vec![version(&api, "s")];
    let mut moved = |why: &str| {
        let v = version(&api, "s");
        assert!(!seen.contains(&v), "{why}: {v:?} again");
        seen.push(v);
    };
    api.append("s", "m0", None, "zero");
    moved("an append");
    api.append("s", "m1", None, "one");
    moved("an append");
    let v = version(&api, "s");
    api.append("other", "o0", None, "elsewhere");
    // Neither a memory, a context write, a read nor a duplicate append is a write to the history.
    assert_eq!(api.post("/memories", json!({"content": "The user likes tea."})).status, 201);
    api.get("/sessions/s/history");
    let r = api.post("/sessions/s/messages", json!({"message": msg("m1", "user", "one")}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(version(&api, "s"), v);
    let r = api.put("/sessions/s/messages/m0", json!({"message": msg("m0", "user", "edited")}));
    assert_eq!(r.status, 200);
    moved("an edit");
    let r =
        api.post("/sessions/s/compactions", json!({"summary": "early", "fromMessageId": "m0", "toMessageId": "m0"}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    moved("an overlay");
    // The newest message deleted, then one appended: its seq is the same again, the count not.
    assert_eq!(api.delete("/sessions/s/messages/m1").status, 204);
    moved("a delete");
    api.append("s", "m2", None, "two");
    moved("an append after a delete");
    assert_eq!(api.delete("/sessions/s/messages/m0").status, 204);
    moved("a delete that makes a root");
    assert_eq!(api.delete("/sessions/s").status, 204);
    moved("the session's delete");
}

// invariant 36 (docs/ARCHITECTURE.md)
#[test]
fn reads_kept_follow_every_write_and_equal_a_fresh_read() {
    let api = Api::new();
    for i in 0..5 {
        api.append("s", &format!("m{i}"), None, &format!("text {i}"));
    }
    let recent = || api.get("/sessions/s/history/recent?maxBytes=100000").body_json();
    assert_eq!(api.cache().held(), 0);
    let first = history(&api, "");
    let held = api.cache().held();
    assert!(held > 0, "the history is kept");
    assert_eq!(history(&api, ""), first, "read twice: the same");
    assert_eq!(api.cache().hits(), 1, "the second read came from the cache");
    let _ = recent();
    assert!(api.cache().held() > held, "the window is kept too");
    // An append at the end grows the kept history: served from the cache, equal to a fresh read.
    api.append("s", "m5", None, "text 5");
    let grown = history(&api, "");
    assert_eq!(api.cache().hits(), 2, "the appended history came from the cache");
    assert_eq!(ids(&grown["messages"]).len(), 6);
    assert_eq!(grown, fresh(&api, ""));
    assert_eq!(ids(&recent()["messages"]).len(), 6, "a window is read again");
    // Writes to other sessions and memories leave it kept.
    let hits = api.cache().hits();
    api.append("other", "o0", None, "elsewhere");
    assert_eq!(api.post("/memories", json!({"content": "The user likes tea."})).status, 201);
    assert_eq!(history(&api, ""), grown);
    assert_eq!(api.cache().hits(), hits + 1);
    // An edit, an overlay, a delete, a clear: each read after it sees it.
    let r = api.put("/sessions/s/messages/m2", json!({"message": msg("m2", "user", "edited")}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(history(&api, "")["messages"][2]["parts"][0]["text"], "edited");
    assert_eq!(recent()["messages"][2]["parts"][0]["text"], "edited");
    let before_overlay = history(&api, "");
    let r =
        api.post("/sessions/s/compactions", json!({"summary": "early", "fromMessageId": "m0", "toMessageId": "m2"}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(ids(&history(&api, "")["messages"]).len(), 4, "the overlay's summary and m3..m5");
    assert_eq!(history(&api, "?raw=1"), before_overlay, "raw: the stored messages");
    // Appends under an overlay grow both views.
    api.append("s", "m6", None, "text 6");
    let hits = api.cache().hits();
    let (laid, raw) = (history(&api, ""), history(&api, "?raw=1"));
    assert_eq!(api.cache().hits(), hits + 2);
    assert_eq!(ids(&laid["messages"]).len(), 5);
    assert_eq!((laid, raw), (fresh(&api, ""), fresh(&api, "?raw=1")));
    assert_eq!(api.delete("/sessions/s/messages/m6").status, 204);
    assert_eq!(ids(&history(&api, "?raw=1")["messages"]).last().map(String::as_str), Some("m5"));
    assert_eq!(api.delete("/sessions/s/messages").status, 204);
    assert_eq!(history(&api, ""), json!({"messages": []}));
    assert_eq!(recent()["messages"], json!([]));
}

#[test]
fn only_appends_at_the_end_of_a_kept_path_grow_it() {
    let api = Api::new();
    for i in 0..4 {
        api.append("s", &format!("m{i}"), None, &format!("text {i}"));
    }
    let _ = history(&api, "?leaf=m1");
    // A branch under m1: its path is m1's and the new message.
    api.append("s", "b2", Some(Some("m1")), "a branch");
    let hits = api.cache().hits();
    let branch = history(&api, "?leaf=b2");
    assert_eq!((api.cache().hits(), ids(&branch["messages"])), (hits + 1, vec!["m0".into(), "m1".into(), "b2".into()]));
    assert_eq!(branch, fresh(&api, "?leaf=b2"));
    // A batch grows it by all of its messages, in order.
    let r = api.post(
        "/sessions/s/messages/batch",
        json!({"parentId": "b2", "messages": [msg("b3", "assistant", "three"), msg("b4", "user", "four")]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let hits = api.cache().hits();
    let batch = history(&api, "?leaf=b4");
    assert_eq!(api.cache().hits(), hits + 1);
    assert_eq!(batch, fresh(&api, "?leaf=b4"));
    // A batch that meets an id already stored does not grow it (that message may sit elsewhere).
    let r = api.post(
        "/sessions/s/messages/batch",
        json!({"parentId": "b4", "messages": [msg("m3", "user", "text 3"), msg("b5", "user", "five")]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let hits = api.cache().hits();
    let after = history(&api, "?leaf=b5");
    assert_eq!(api.cache().hits(), hits, "read, not grown");
    assert_eq!(ids(&after["messages"]), ["m0", "m1", "m2", "m3", "b5"]);
    // A message with a field moved to the object store is read whole, not grown from its row.
    let _ = history(&api, "?leaf=b5");
    let big = json!({"id": "big", "role": "assistant", "parts": [{"type": "text", "text": "o".repeat(2_100_000)}]});
    assert_eq!(api.post("/sessions/s/messages", json!({"message": big, "parentId": "b5"})).status, 201);
    let hits = api.cache().hits();
    let whole = history(&api, "?leaf=big");
    assert_eq!(api.cache().hits(), hits);
    assert_eq!(whole["messages"][5], big);
}

#[test]
fn an_overlay_left_from_a_deleted_message_lies_over_its_id_appended_again() {
    let api = Api::new();
    for i in 0..4 {
        api.append("s", &format!("m{i}"), None, &format!("text {i}"));
    }
    let r =
        api.post("/sessions/s/compactions", json!({"summary": "early", "fromMessageId": "m1", "toMessageId": "m3"}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.delete("/sessions/s/messages/m3").status, 204);
    assert_eq!(ids(&history(&api, "")["messages"]), ["m0", "m1", "m2"], "the overlay's end is gone");
    let _ = history(&api, "?raw=1");
    api.append("s", "m3", None, "again");
    let hits = api.cache().hits();
    assert_eq!(ids(&history(&api, "?raw=1")["messages"]), ["m0", "m1", "m2", "m3"]);
    assert_eq!(api.cache().hits(), hits + 1, "the raw view grew");
    let laid = history(&api, "");
    assert_eq!(api.cache().hits(), hits + 1, "the laid view was read, not grown");
    assert_eq!(laid["messages"].as_array().unwrap().len(), 2, "m0 and the summary over m1..m3: {laid}");
    assert_eq!(laid, fresh(&api, ""));
}

#[test]
fn a_path_grown_past_the_deepest_walk_is_read_again() {
    use session_agent_core::store::tree::MAX_PATH_ROWS;
    let api = Api::new();
    let n = MAX_PATH_ROWS as usize;
    for start in (0..n).step_by(1000) {
        let msgs: Vec<Json> = (start..n.min(start + 1000)).map(|i| msg(&format!("m{i}"), "user", "x")).collect();
        let r = api.post("/sessions/s/messages/batch", json!({"messages": msgs}));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let _ = history(&api, "");
    api.append("s", "last", None, "one more");
    let hits = api.cache().hits();
    let h = ids(&history(&api, "")["messages"]);
    assert_eq!(api.cache().hits(), hits, "read, not grown");
    assert_eq!((h.len(), h[0].as_str(), h[n - 1].as_str()), (n, "m1", "last"), "the newest {n}");
}

#[test]
fn a_turn_grows_the_branch_the_next_turn_reads() {
    let api = Api::new().with_model();
    api.append("s", "u0", None, "first question");
    api.model.reply(Ok(completion("First answer.")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "second question")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let kept = api.cache().hits();
    api.model.reply(Ok(completion("Second answer.")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u2", "user", "third question")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.cache().hits(), kept + 1, "the second turn's branch came from the cache");
    let sent = api.model.requests.borrow()[1].clone();
    let contents: Vec<&str> =
        sent["messages"].as_array().unwrap()[1..].iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(contents, ["first question", "second question", "First answer.", "third question"]);
    assert_eq!(history(&api, ""), fresh(&api, ""));
}

#[test]
fn an_erase_clears_what_is_kept() {
    let api = Api::new();
    api.append("s", "m0", None, "before");
    let old = history(&api, "");
    let r = api.send(session_agent_api::Request::new(Method::Delete, "/").header("confirm", "erase"));
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!((api.cache().held(), version(&api, "s")), (0, (0, 0)));
    // The same id at the same version again: read, not the text from before the erase.
    api.append("s", "m0", None, "after");
    let new = history(&api, "");
    assert_ne!(new, old);
    assert_eq!(new["messages"][0]["parts"][0]["text"], "after");
}

#[test]
fn version_8_data_migrates_and_its_sessions_start_at_version_0() {
    let db = db_at(8);
    let old = msg("m0", "user", "stored before 0009").to_string();
    db.execute(
        "INSERT INTO messages (session_id, id, role, bytes, created_at, content) VALUES ('s', 'm0', 'user', ?, 't', ?)",
        &[Value::Int(old.len() as i64), old.as_str().into()],
    )
    .unwrap();
    assert_eq!(schema::migrate(&db, "t").unwrap(), after(8));
    let api = Api::with_db(db);
    assert_eq!(version(&api, "s"), (1, 0), "no row: no other write yet");
    assert_eq!(ids(&history(&api, "")["messages"]), ["m0"]);
    api.append("s", "m1", None, "after");
    assert_eq!(version(&api, "s"), (2, 0));
    assert_eq!(ids(&history(&api, "")["messages"]), ["m0", "m1"]);
    assert_eq!(history(&api, ""), fresh(&api, ""));
}

#[test]
fn searches_are_kept_until_a_write_they_can_see() {
    let api = Api::new();
    api.append("s", "m0", None, "deploy the database");
    api.append("t", "n0", None, "deploy elsewhere");
    let search = |path: &str| {
        let r = api.get(path);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        ids(&r.body_json()["results"])
    };
    assert_eq!(search("/sessions/s/search?q=deploy"), ["m0"]);
    let hits = api.cache().hits();
    assert_eq!(search("/sessions/s/search?q=deploy"), ["m0"]);
    assert_eq!(search("/search?q=deploy").len(), 2);
    assert_eq!(search("/search?q=deploy").len(), 2);
    assert_eq!(api.cache().hits(), hits + 2, "each asked again came from the cache");
    assert_eq!(search("/sessions/s/search?q=deploy&limit=1"), ["m0"], "another limit: another answer");
    // Another session's write: the session's search stays kept, the one across sessions does not.
    api.append("t", "n1", None, "deploy once more");
    let hits = api.cache().hits();
    assert_eq!(search("/sessions/s/search?q=deploy"), ["m0"]);
    assert_eq!(search("/search?q=deploy").len(), 3);
    assert_eq!(api.cache().hits(), hits + 1);
    // The session's own write: read again.
    api.append("s", "m1", None, "deploy now");
    assert_eq!(search("/sessions/s/search?q=deploy").len(), 2);
    let r = api.put("/sessions/s/messages/m1", json!({"message": msg("m1", "user", "lunch")}));
    assert_eq!(r.status, 200);
    assert_eq!(search("/sessions/s/search?q=deploy"), ["m0"]);
    assert_eq!(search("/sessions/s/search?q=lunch"), ["m1"]);
}

#[test]
fn session_counts_are_kept_until_their_session_is_written() {
    let api = Api::new();
    for i in 0..3 {
        api.append("s", &format!("m{i}"), None, "x");
    }
    api.append("s", "b", Some(Some("m0")), "a branch");
    api.append("t", "n0", None, "y");
    let counts = |path: &str| {
        let r = api.get(path).body_json();
        let list = r.get("sessions").and_then(|l| l.as_array().cloned()).unwrap_or_else(|| vec![r.clone()]);
        list.iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["messageCount"].as_i64().unwrap(),
                    s["totalMessages"].as_i64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(counts("/sessions"), [("t".to_owned(), 1, 1), ("s".to_owned(), 2, 4)]);
    let hits = api.cache().hits();
    assert_eq!(counts("/sessions/s"), [("s".to_owned(), 2, 4)]);
    assert_eq!(api.cache().hits(), hits + 1, "counted once");
    api.append("t", "n1", None, "y");
    let hits = api.cache().hits();
    assert_eq!(counts("/sessions"), [("t".to_owned(), 2, 2), ("s".to_owned(), 2, 4)]);
    assert_eq!(api.cache().hits(), hits + 1, "s from the cache, t counted again");
    assert_eq!(api.delete("/sessions/s/messages/b").status, 204);
    assert_eq!(counts("/sessions/s"), [("s".to_owned(), 3, 3)], "m2 is the latest leaf again");
}

#[test]
fn texts_that_search_the_same_share_one_kept_answer() {
    let api = Api::new();
    api.append("s", "m0", None, "deploy the database");
    let r = api.get("/sessions/s/search?q=deploy%20database");
    let hits = api.cache().hits();
    assert_eq!(api.get("/sessions/s/search?q=%20deploy%20%20database%20").body, r.body);
    assert_eq!(api.cache().hits(), hits + 1);
    assert_eq!(api.get("/sessions/s/search?q=%20%20").body_json(), json!({"results": []}), "nothing to search for");
}

/// One of `ids`, if any.
fn pick(ids: &[String], rng: &mut Rng) -> Option<String> {
    ids.get(rng.below(ids.len().max(1))).cloned()
}

// invariant 36 (docs/ARCHITECTURE.md)
#[test]
fn kept_reads_equal_fresh_reads_through_random_writes() {
    let api = Api::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ids_seen: Vec<String> = Vec::new();
    let mut next = 0;
    let text = |rng: &mut Rng, i: usize| match rng.below(60) {
        0 => "z".repeat(2_100_000), // spilled to the object store (one append in 60)
        _ => format!("message {i} {}", "w".repeat(rng.below(50))),
    };
    for step in 0..300 {
        let stored: Vec<String> = ids(&api.get_fresh("/sessions/s/history?raw=1").body_json()["messages"]);
        match rng.below(12) {
            0..=3 => {
                // At the end of the latest path, or under any message (a branch), or an id used before.
                let id = if rng.below(8) == 0 && !ids_seen.is_empty() {
                    pick(&ids_seen, &mut rng).unwrap()
                } else {
                    format!("m{next}")
                };
                next += 1;
                let parent = if rng.below(3) == 0 { pick(&ids_seen, &mut rng) } else { None };
                let mut body = json!({"message": msg(&id, "user", &text(&mut rng, next))});
                if let Some(p) = &parent {
                    body["parentId"] = json!(p);
                }
                let r = api.post("/sessions/s/messages", body);
                assert!([200, 201, 404].contains(&r.status), "step {step}: {}", String::from_utf8_lossy(&r.body));
                ids_seen.push(id);
            }
            4 => {
                let msgs: Vec<Json> = (0..1 + rng.below(3))
                    .map(|_| {
                        next += 1;
                        ids_seen.push(format!("m{next}"));
                        msg(&format!("m{next}"), "assistant", &format!("batch {next}"))
                    })
                    .collect();
                let r = api.post("/sessions/s/messages/batch", json!({"messages": msgs}));
                assert_eq!(r.status, 201, "step {step}: {}", String::from_utf8_lossy(&r.body));
            }
            5 => {
                if let Some(id) = stored.get(rng.below(stored.len().max(1))) {
                    let r =
                        api.put(&format!("/sessions/s/messages/{id}"), json!({"message": msg(id, "user", "edited")}));
                    assert_eq!(r.status, 200, "step {step}");
                }
            }
            6 => {
                if let Some(id) = stored.get(rng.below(stored.len().max(1))) {
                    assert_eq!(api.delete(&format!("/sessions/s/messages/{id}")).status, 204, "step {step}");
                }
            }
            7 if stored.len() >= 2 => {
                // An overlay over part of the latest path.
                let a = rng.below(stored.len());
                let b = a + rng.below(stored.len() - a);
                let body =
                    json!({"summary": format!("summary {step}"), "fromMessageId": stored[a], "toMessageId": stored[b]});
                let r = api.post("/sessions/s/compactions", body);
                assert_eq!(r.status, 201, "step {step}: {}", String::from_utf8_lossy(&r.body));
            }
            8 => {
                api.append("t", &format!("t{step}"), None, "another session");
            }
            _ => {}
        }
        // Read some views (latest, raw, a random leaf, a window), searches and the sessions with
        // their counts: each kept read equals a fresh one.
        let leaf = pick(&ids_seen, &mut rng).map(|l| format!("?leaf={l}")).unwrap_or_default();
        let views = ["", "?raw=1", leaf.as_str(), "/recent?maxBytes=3000"].map(|q| format!("/sessions/s/history{q}"));
        let others = [
            "/sessions/s/search?q=message",
            "/sessions/s/search?q=edited",
            "/search?q=batch",
            "/sessions",
            "/sessions/s",
        ];
        for path in views.iter().map(String::as_str).chain(others) {
            let (kept, fresh) = (api.get(path), api.get_fresh(path));
            assert_eq!(kept.status, fresh.status, "step {step}: {path}");
            assert_eq!(
                String::from_utf8_lossy(&kept.body),
                String::from_utf8_lossy(&fresh.body),
                "step {step}: {path}"
            );
        }
    }
    assert!(api.cache().hits() > 100, "the walk exercised the cache: {} hits", api.cache().hits());
}
