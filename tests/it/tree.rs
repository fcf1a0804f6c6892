//! The message tree through the API on real SQLite: append rules, paths, branches, deletes,
//! chunked history, the recent window and the latest leaf.

use crate::support::{code, ids, msg, Api};
use serde_json::{json, Value as Json};
use session_agent_core::sqlite::SqliteDb;

#[test]
fn absent_parent_attaches_to_the_latest_leaf_and_null_starts_a_root() {
    let api = Api::new();
    assert_eq!(api.append("s", "a", None, "one")["parentId"], Json::Null);
    assert_eq!(api.append("s", "b", None, "two")["parentId"], "a");
    assert_eq!(api.append("s", "r", Some(None), "root")["parentId"], Json::Null);
    assert_eq!(api.append("s", "c", None, "after root")["parentId"], "r");
    assert_eq!(api.history_ids("/sessions/s/history"), ["r", "c"]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=b"), ["a", "b"]);
}

// invariant 2 (docs/ARCHITECTURE.md)
#[test]
fn unknown_parent_is_404_and_changes_nothing() {
    let api = Api::new();
    api.append("s", "a", None, "one");
    let r = api.post("/sessions/s/messages", json!({"message": msg("b", "user", "x"), "parentId": "nope"}));
    assert_eq!((r.status, code(&r).as_str()), (404, "not_found"));
    assert_eq!(api.get("/sessions/s/messages/b").status, 404);
    // A parent from another session is unknown here too.
    api.append("other", "o1", None, "elsewhere");
    let r = api.post("/sessions/s/messages", json!({"message": msg("b", "user", "x"), "parentId": "o1"}));
    assert_eq!(r.status, 404);
    assert_eq!(api.get("/sessions/s").body_json()["messageCount"], 1);
    // The parent is checked before the duplicate rule: a known id with a wrong parent is 404 too.
    let r = api.post("/sessions/s/messages", json!({"message": msg("a", "user", "one"), "parentId": "nope"}));
    assert_eq!(r.status, 404);
}

#[test]
fn duplicate_id_is_a_no_op_and_first_write_wins() {
    let api = Api::new();
    api.append("s", "a", None, "first");
    let r = api.post("/sessions/s/messages", json!({"message": msg("a", "user", "second"), "parentId": null}));
    assert_eq!(r.status, 200);
    let b = r.body_json();
    assert_eq!(b["inserted"], false);
    assert_eq!(b["message"]["parts"][0]["text"], "first");
    assert_eq!(api.get("/sessions/s/messages/a").body_json()["parts"][0]["text"], "first");
}

// invariant 1 (docs/ARCHITECTURE.md)
#[test]
fn ids_are_unique_per_session_not_per_agent() {
    let api = Api::new();
    api.append("s1", "same", None, "in s1");
    api.append("s2", "same", None, "in s2");
    assert_eq!(api.get("/sessions/s1/messages/same").body_json()["parts"][0]["text"], "in s1");
    assert_eq!(api.get("/sessions/s2/messages/same").body_json()["parts"][0]["text"], "in s2");
    api.delete("/sessions/s1/messages/same");
    assert_eq!(api.get("/sessions/s2/messages/same").status, 200);
}

#[test]
fn branches_are_oldest_first_and_a_branch_append_becomes_active() {
    let mut api = Api::new();
    api.frozen = true; // same millisecond: insertion order must still decide
    api.append("s", "q", None, "question");
    api.append("s", "a1", None, "answer one");
    api.append("s", "a2", Some(Some("q")), "answer two");
    api.append("s", "a3", Some(Some("q")), "answer three");
    let b = api.get("/sessions/s/messages/q/branches").body_json();
    assert_eq!(ids(&b["messages"]), ["a1", "a2", "a3"]);
    assert_eq!(api.get("/sessions/s/leaf").body_json()["id"], "a3");
    assert_eq!(api.history_ids("/sessions/s/history"), ["q", "a3"]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=a1"), ["q", "a1"]);
    assert_eq!(api.get("/sessions/s/messages/nope/branches").status, 404);
    assert_eq!(api.get("/sessions/s/messages/a1/branches").body_json()["messages"], json!([]));
}

// invariant 3 (docs/ARCHITECTURE.md)
#[test]
fn deleting_an_interior_message_orphans_its_children() {
    let api = Api::new();
    for (id, _) in [("a", 0), ("b", 1), ("c", 2), ("d", 3)] {
        api.append("s", id, None, id);
    }
    assert_eq!(api.delete("/sessions/s/messages/b").status, 204);
    assert_eq!(api.history_ids("/sessions/s/history"), ["c", "d"]);
    assert_eq!(api.get("/sessions/s/path-length").body_json()["length"], 2);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=a"), ["a"]);
    assert_eq!(api.delete("/sessions/s/messages/b").status, 404);
    // Deleting the leaf moves the latest leaf to the newest remaining message.
    api.delete("/sessions/s/messages/d");
    assert_eq!(api.get("/sessions/s/leaf").body_json()["id"], "c");
    // Re-using a deleted id does not adopt the orphans: "b" again is a new leaf of its own.
    api.append("s", "b", Some(None), "b again");
    assert_eq!(api.get("/sessions/s/messages/b/branches").body_json()["messages"], json!([]));
    assert_eq!(api.history_ids("/sessions/s/history?leaf=c"), ["c"]);
    assert_eq!(api.get("/sessions/s/leaf").body_json()["id"], "b");
}

// invariant 6 (docs/ARCHITECTURE.md)
#[test]
fn update_replaces_content_in_place_and_reindexes() {
    let api = Api::new();
    api.append("s", "a", None, "apples");
    api.append("s", "b", None, "bananas");
    let r = api.put(
        "/sessions/s/messages/a",
        json!({"message": {"id":"a","role":"user","parts":[{"type":"text","text":"cherries"}],"metadata":{"k":1}}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(api.history_ids("/sessions/s/history"), ["a", "b"]);
    assert_eq!(api.get("/sessions/s/messages/a").body_json()["metadata"]["k"], 1);
    assert_eq!(api.get("/sessions/s/search?q=apples").body_json()["results"], json!([]));
    assert_eq!(ids(&api.get("/sessions/s/search?q=cherries").body_json()["results"]), ["a"]);
    let r = api.put("/sessions/s/messages/a", json!({"message": msg("z", "user", "x")}));
    assert_eq!(r.status, 400);
    let r = api.put("/sessions/s/messages/zz", json!({"message": msg("zz", "user", "x")}));
    assert_eq!(r.status, 404);
    assert_eq!(api.get("/sessions/s/search?q=x").body_json()["results"], json!([]));
}

// invariant 6 (docs/ARCHITECTURE.md)
#[test]
fn clear_removes_messages_compactions_and_index_rows() {
    let api = Api::new();
    api.append("s", "a", None, "alpha");
    api.append("s", "b", None, "beta");
    api.post("/sessions/s/compactions", json!({"summary":"sum","fromMessageId":"a","toMessageId":"b"}));
    api.append("t", "a", None, "alpha elsewhere");
    assert_eq!(api.delete("/sessions/s/messages").status, 204);
    assert_eq!(api.history_ids("/sessions/s/history"), Vec::<String>::new());
    assert_eq!(api.get("/sessions/s/compactions").body_json()["compactions"], json!([]));
    assert_eq!(api.get("/sessions/s/leaf").status, 404);
    let hits = api.get("/search?q=alpha").body_json()["results"].clone();
    assert_eq!(hits.as_array().unwrap().len(), 1);
    assert_eq!(hits[0]["sessionId"], "t");
}

fn chain(api: &Api, sid: &str, n: usize, text: &dyn Fn(usize) -> String) -> Vec<String> {
    let msgs: Vec<Json> =
        (0..n).map(|i| msg(&format!("m{i:05}"), if i % 2 == 0 { "user" } else { "assistant" }, &text(i))).collect();
    let r = api.post(&format!("/sessions/{sid}/messages/batch"), json!({"messages": msgs}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    (0..n).map(|i| format!("m{i:05}")).collect()
}

// invariant 4 (docs/ARCHITECTURE.md)
#[test]
fn history_crosses_chunk_boundaries_in_order() {
    for n in [1, 49, 50, 51, 100, 120] {
        let api = Api::new();
        let want = chain(&api, "s", n, &|i| format!("message {i}"));
        assert_eq!(api.history_ids("/sessions/s/history"), want, "n={n}");
        assert_eq!(api.get("/sessions/s/path-length").body_json()["length"], n);
    }
}

// invariant 4 (docs/ARCHITECTURE.md)
#[test]
fn multi_megabyte_paths_come_back_whole() {
    let api = Api::new();
    // 7 messages of ~1.5 MB: chunks must split on the 4 MiB budget, not just on 50 rows.
    let want = chain(&api, "s", 7, &|i| format!("{i}").repeat(1_500_000));
    let r = api.get("/sessions/s/history");
    let h = r.body_json();
    assert_eq!(ids(&h["messages"]), want);
    for (i, m) in h["messages"].as_array().unwrap().iter().enumerate() {
        assert_eq!(m["parts"][0]["text"].as_str().unwrap().len(), 1_500_000 * format!("{i}").len());
    }
}

#[test]
fn recent_window_respects_budget_floor_and_leaf() {
    let api = Api::new();
    chain(&api, "s", 10, &|_| "x".repeat(100));
    let size = |i: usize| api.get(&format!("/sessions/s/messages/m{i:05}")).body.len() as i64;
    let last3 = size(7) + size(8) + size(9);
    let r = api.get(&format!("/sessions/s/history/recent?maxBytes={}", last3 + size(6) - 1)).body_json();
    assert_eq!(ids(&r["messages"]), ["m00007", "m00008", "m00009"]);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["totalContentBytes"], (0..10).map(size).sum::<i64>());
    // The leaf is always there, and the floor is honoured past the budget.
    let r = api.get("/sessions/s/history/recent?maxBytes=1").body_json();
    assert_eq!(ids(&r["messages"]), ["m00009"]);
    let r = api.get("/sessions/s/history/recent?maxBytes=1&minMessages=4").body_json();
    assert_eq!(ids(&r["messages"]).len(), 4);
    let r = api.get("/sessions/s/history/recent?maxBytes=100000000").body_json();
    assert_eq!((ids(&r["messages"]).len(), r["truncated"].clone()), (10, json!(false)));
    let r = api.get("/sessions/empty/history/recent?maxBytes=10").body_json();
    assert_eq!(r, json!({"messages": [], "truncated": false, "totalContentBytes": 0, "nextBefore": null}));
    assert_eq!(api.get("/sessions/s/history/recent").status, 400);
}

#[test]
fn unknown_leaf_is_404_and_empty_sessions_are_empty() {
    let api = Api::new();
    assert_eq!(api.get("/sessions/s/history").body_json(), json!({"messages": []}));
    assert_eq!(api.get("/sessions/s/path-length").body_json(), json!({"length": 0}));
    assert_eq!(api.get("/sessions/s/leaf").status, 404);
    api.append("s", "a", None, "x");
    assert_eq!(api.get("/sessions/s/history?leaf=zz").status, 404);
    assert_eq!(api.get("/sessions/s/path-length?leaf=zz").status, 404);
}

// invariant 2 (docs/ARCHITECTURE.md)
#[test]
fn latest_leaf_survives_a_reopen_without_scanning() {
    let dir = std::env::temp_dir().join(format!("sa-tree-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    {
        let api = Api::with_db(SqliteDb::open(&dir).unwrap());
        session_agent_core::store::open(&*api.db, 0).unwrap();
        chain(&api, "s", 120, &|i| format!("m {i}"));
        api.append("s", "branch", Some(Some("m00010")), "a branch");
    }
    let db = SqliteDb::open(&dir).unwrap();
    assert!(session_agent_core::store::open(&db, 0).unwrap().is_empty(), "already migrated");
    // The latest leaf is one index probe: the plan must not scan the messages table.
    use session_agent_core::sql::Sql;
    let plan = db
        .query(
            "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            &["s".into()],
        )
        .unwrap();
    let plan: Vec<String> = plan.iter().map(|r| r.text(3).unwrap()).collect();
    assert!(plan.iter().all(|p| !p.starts_with("SCAN messages") && !p.contains("TEMP B-TREE")), "{plan:?}");
    // A message found by its id alone (an OpenAI response id, in any session): an index probe.
    let plan = db
        .query("EXPLAIN QUERY PLAN SELECT session_id FROM messages WHERE id = ? ORDER BY seq", &["m".into()])
        .unwrap();
    let plan: Vec<String> = plan.iter().map(|r| r.text(3).unwrap()).collect();
    assert!(plan.iter().all(|p| !p.starts_with("SCAN messages")), "{plan:?}");
    let api = Api::with_db(db);
    assert_eq!(api.get("/sessions/s/leaf").body_json()["id"], "branch");
    assert_eq!(api.append("s", "next", None, "after reopen")["parentId"], "branch");
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn the_assembled_history_is_the_hydrated_one_byte_for_byte() {
    use session_agent_core::store::history::{history, history_json, Overlays};
    use session_agent_core::store::tree::Tree;
    let api = Api::new();
    let sql = &*api.db;
    let same = |leaf: Option<&str>, overlays: Overlays| {
        let (fast, rows) = history_json(sql, "s", leaf, overlays).unwrap().expect("no overlay, no spill: assembled");
        let slow = history(sql, "s", leaf, overlays).unwrap();
        assert_eq!(rows, slow.len(), "the messages counted");
        let slow = serde_json::to_string(&slow).unwrap();
        assert_eq!(fast, slow, "leaf {leaf:?}");
        fast
    };
    assert_eq!(same(None, Overlays::Applied), "[]");
    // Two branches, unicode and escapes, and enough bytes for more than one piece (1 MB each):
    // a message of 1 MB among 300 smaller ones.
    for i in 0..300 {
        let text = format!("message {i} é ✓ \"quoted\" \\ {}", "x".repeat(if i % 7 == 0 { 2_000 } else { 300 }));
        api.append("s", &format!("m{i}"), None, &text);
    }
    api.append("s", "big", Some(Some("m150")), &"y".repeat(1_000_000));
    api.append("s", "after-big", None, "after");
    let all: Json = serde_json::from_str(&same(Some("m299"), Overlays::Applied)).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 300);
    let branch: Json = serde_json::from_str(&same(None, Overlays::Raw)).unwrap();
    assert!(Tree::new(sql, "s").path_json("after-big").unwrap().0.len() >= 2, "more than one piece");
    assert_eq!(ids(&branch).last().map(String::as_str), Some("after-big"));
    assert_eq!(ids(&branch).len(), 153);
    // An overlay makes the read lay summaries: not assembled by SQLite.
    let r = api
        .post("/sessions/s/compactions", json!({"summary": "early part", "fromMessageId": "m0", "toMessageId": "m9"}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert!(history_json(sql, "s", None, Overlays::Applied).unwrap().is_none());
    same(None, Overlays::Raw);
    // And the answer over the API is the assembled one.
    let h = api.get("/sessions/s/history?raw=1");
    assert_eq!(String::from_utf8(h.body).unwrap(), format!("{{\"messages\":{}}}", same(None, Overlays::Raw)));
}

#[test]
fn history_pages_walk_up_from_the_leaf_with_a_cursor() {
    let api = Api::new();
    for i in 0..30 {
        api.append("s", &format!("m{i}"), None, &format!("text {i}"));
    }
    let page = |q: &str| {
        let r = api.get(&format!("/sessions/s/history?{q}"));
        assert_eq!(r.status, 200, "{q}: {}", String::from_utf8_lossy(&r.body));
        let b = r.body_json();
        (ids(&b["messages"]), b["nextBefore"].clone())
    };
    let range = |a: usize, b: usize| (a..b).map(|i| format!("m{i}")).collect::<Vec<_>>();
    assert_eq!(page("limit=10"), (range(20, 30), json!("m20")));
    assert_eq!(page("limit=10&before=m20"), (range(10, 20), json!("m10")));
    assert_eq!(page("limit=10&before=m10"), (range(0, 10), Json::Null));
    assert_eq!(page("limit=100"), (range(0, 30), Json::Null));
    assert_eq!(page("limit=1&before=m0"), (vec![], Json::Null));
    // Without limit: the whole path, no cursor (the answer as before pages existed).
    let whole = api.get("/sessions/s/history").body_json();
    assert_eq!(ids(&whole["messages"]).len(), 30);
    assert!(whole.get("nextBefore").is_none());
    // A branch: its own path.
    api.append("s", "b1", Some(Some("m4")), "branch");
    assert_eq!(page("limit=3&leaf=b1"), (vec!["m3".into(), "m4".into(), "b1".into()], json!("m3")));
    assert_eq!(page("limit=3"), (vec!["m3".into(), "m4".into(), "b1".into()], json!("m3")), "the latest leaf");
    // An overlay applies when both its ends are in the page.
    let r = api.post(
        "/sessions/s/compactions",
        json!({"summary": "twelve to fifteen", "fromMessageId": "m12", "toMessageId": "m15"}),
    );
    assert_eq!(r.status, 201);
    let (got, next) = page("limit=10&before=m20");
    assert_eq!(next, json!("m10"));
    assert_eq!(got.len(), 7, "{got:?}");
    assert!(got[2].starts_with("compaction_"), "{got:?}");
    assert_eq!(page("limit=5&before=m15").0, range(10, 15), "half an overlay: the stored messages");
    assert_eq!(page("limit=10&before=m20&raw=1").0, range(10, 20));
    // `before` alone: a page of 100; it names the path, so `leaf` does not matter.
    assert_eq!(page("before=m5"), (range(0, 5), Json::Null));
    assert_eq!(page("limit=2&before=m5&leaf=b1"), (range(3, 5), json!("m3")));
    // Bad asks change nothing and say why.
    for (q, status) in [("limit=0", 400), ("limit=10001", 400), ("limit=5&before=nope", 404), ("limit=x", 400)] {
        let r = api.get(&format!("/sessions/s/history?{q}"));
        assert_eq!(r.status, status, "{q}: {}", String::from_utf8_lossy(&r.body));
    }
}

#[test]
fn children_and_recent_windows_page_too() {
    let api = Api::new();
    api.append("s", "root", None, "root");
    for i in 0..25 {
        api.append("s", &format!("c{i}"), Some(Some("root")), &format!("child {i}"));
    }
    let kids = |q: &str| {
        let r = api.get(&format!("/sessions/s/messages/root/branches{q}"));
        assert_eq!(r.status, 200, "{q}: {}", String::from_utf8_lossy(&r.body));
        let b = r.body_json();
        (ids(&b["messages"]), b.get("nextBefore").cloned())
    };
    let range = |p: &str, a: usize, b: usize| (a..b).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
    assert_eq!(kids(""), (range("c", 0, 25), None), "no paging asked: every child, no cursor");
    assert_eq!(kids("?limit=10"), (range("c", 15, 25), Some(json!("c15"))));
    assert_eq!(kids("?limit=10&before=c15"), (range("c", 5, 15), Some(json!("c5"))));
    assert_eq!(kids("?limit=10&before=c5"), (range("c", 0, 5), Some(Json::Null)));
    assert_eq!(kids("?before=c3"), (range("c", 0, 3), Some(Json::Null)), "before alone: up to 100");
    for (q, status) in [("?before=root", 404), ("?before=nope", 404), ("?limit=0", 400), ("?limit=10001", 400)] {
        assert_eq!(api.get(&format!("/sessions/s/messages/root/branches{q}")).status, status, "{q}");
    }

    // Recent windows read a long path back from its leaf.
    let api = Api::new();
    for i in 0..40 {
        api.append("s", &format!("m{i}"), None, &format!("text {i}"));
    }
    let size = api.get("/sessions/s/messages/m39").body.len() as i64;
    let window = |q: &str| {
        let r = api.get(&format!("/sessions/s/history/recent?{q}"));
        assert_eq!(r.status, 200, "{q}: {}", String::from_utf8_lossy(&r.body));
        r.body_json()
    };
    let mut before: Option<String> = None;
    let mut seen: Vec<String> = Vec::new();
    loop {
        let q = format!("maxBytes={}{}", size * 7, before.as_ref().map(|b| format!("&before={b}")).unwrap_or_default());
        let w = window(&q);
        let mut got = ids(&w["messages"]);
        assert!(!got.is_empty() && got.len() <= 8, "{q}: {got:?}");
        assert_eq!(w["truncated"], json!(!w["nextBefore"].is_null()));
        let first = if w["truncated"] == json!(true) { json!(got[0]) } else { Json::Null };
        assert_eq!(w["nextBefore"], first);
        got.extend(seen);
        seen = got;
        match w["nextBefore"].as_str() {
            Some(b) => before = Some(b.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, range("m", 0, 40), "the windows cover the path once, in order");
    let w = window("maxBytes=1000000&before=m10");
    assert_eq!(ids(&w["messages"]), range("m", 0, 10));
    assert_eq!(
        w["totalContentBytes"].as_i64().unwrap(),
        w["messages"].as_array().unwrap().iter().map(|m| m.to_string().len() as i64).sum::<i64>()
    );
    assert_eq!(
        window("maxBytes=10&before=m0"),
        json!({"messages": [], "truncated": false, "totalContentBytes": 0, "nextBefore": null})
    );
    assert_eq!(api.get("/sessions/s/history/recent?maxBytes=10&before=nope").status, 404);
}
