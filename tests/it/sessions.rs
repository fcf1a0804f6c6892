//! The sessions registry through the API: create, list order, get, rename, delete (and what
//! it removes), fork, usage sums, and registration on first write.

use crate::support::{assert_near, code, ids, msg, Api};
use serde_json::{json, Value as Json};

fn create(api: &Api, body: Json) -> Json {
    let r = api.post("/sessions", body);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

#[test]
fn create_get_and_the_session_info_shape() {
    let api = Api::new();
    let s = create(&api, json!({"name": "Chat", "model": "gpt-x", "source": "web"}));
    let id = s["id"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "parentSessionId",
            "model",
            "source",
            "metadata",
            "inputTokens",
            "outputTokens",
            "estimatedCost",
            "endReason",
            "messageCount",
            "totalMessages",
            "createdAt",
            "updatedAt"
        ]
    );
    assert_eq!(s["messageCount"], 0);
    assert!(s["createdAt"].as_str().unwrap().ends_with('Z') && s["createdAt"].as_str().unwrap().len() == 24);
    assert_eq!(api.get(&format!("/sessions/{id}")).body_json(), s);
    assert_eq!(api.get("/sessions/nope").status, 404);
    for bad in [
        json!({}),
        json!({"name": ""}),
        json!({"name": 3}),
        json!({"name": "x", "parentSessionId": "a b"}),
        json!({"name": "x", "model": "m".repeat(300)}),
    ] {
        assert_eq!(api.post("/sessions", bad.clone()).status, 400, "{bad}");
    }
    assert_eq!(api.get("/sessions").body_json()["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn list_is_newest_update_first_with_insertion_tie_breaks() {
    let mut api = Api::new();
    api.frozen = true; // one millisecond for everything: ties everywhere
    let a = create(&api, json!({"name": "a"}))["id"].as_str().unwrap().to_string();
    let b = create(&api, json!({"name": "b"}))["id"].as_str().unwrap().to_string();
    let order = |api: &Api| ids(&api.get("/sessions").body_json()["sessions"]);
    assert_eq!(order(&api), [b.clone(), a.clone()]);
    api.append(&a, "m", None, "touch a");
    assert_eq!(order(&api), [a.clone(), b.clone()]);
    api.frozen = false;
    api.patch(&format!("/sessions/{b}"), json!({"name": "b2"}));
    assert_eq!(order(&api), [b.clone(), a.clone()]);
}

// invariant 9 (docs/ARCHITECTURE.md)
#[test]
fn writes_register_unknown_sessions_and_reads_do_not() {
    let api = Api::new();
    api.get("/sessions/ghost/history");
    api.get("/sessions/ghost/search?q=x");
    assert_eq!(api.get("/sessions/ghost").status, 404);
    api.append("chat-1", "m1", None, "hello");
    let s = api.get("/sessions/chat-1").body_json();
    assert_eq!((s["name"].as_str(), s["messageCount"].as_i64()), (Some("chat-1"), Some(1)));
    let r = api.post("/sessions/usage-only/usage", json!({"inputTokens": 1}));
    assert_eq!(r.status, 200);
    assert_eq!(api.get("/sessions").body_json()["sessions"].as_array().unwrap().len(), 2);
}

#[test]
fn rename_and_its_errors() {
    let api = Api::new();
    let id = create(&api, json!({"name": "old"}))["id"].as_str().unwrap().to_string();
    let r = api.patch(&format!("/sessions/{id}"), json!({"name": "new"}));
    assert_eq!(r.body_json()["name"], "new");
    assert_eq!(api.patch(&format!("/sessions/{id}"), json!({"name": ""})).status, 400);
    assert_eq!(api.patch("/sessions/nope", json!({"name": "x"})).status, 404);
    assert_eq!(api.get(&format!("/sessions/{id}")).body_json()["name"], "new");
}

// invariant 6 (docs/ARCHITECTURE.md)
#[test]
fn delete_removes_everything_of_that_session_only() {
    let api = Api::new();
    for sid in ["s", "keep"] {
        api.append(sid, "a", None, "shared words");
        api.append(sid, "b", None, "more words");
        api.post(
            &format!("/sessions/{sid}/compactions"),
            json!({"summary": "sum", "fromMessageId": "a", "toMessageId": "b"}),
        );
    }
    assert_eq!(api.delete("/sessions/s").status, 204);
    assert_eq!(api.get("/sessions/s").status, 404);
    assert_eq!(api.get("/sessions/s/history?raw=1").body_json(), json!({"messages": []}));
    assert_eq!(api.get("/sessions/s/compactions").body_json(), json!({"compactions": []}));
    let hits = api.get("/search?q=words").body_json()["results"].clone();
    assert!(hits.as_array().unwrap().iter().all(|h| h["sessionId"] == "keep"));
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(api.get("/sessions/keep").body_json()["messageCount"], 2);
    assert_eq!(api.delete("/sessions/s").status, 404);
}

#[test]
fn fork_copies_the_path_with_new_ids_and_its_overlays() {
    let api = Api::new();
    let src = create(&api, json!({"name": "orig", "model": "m1", "source": "cli"}))["id"].as_str().unwrap().to_string();
    for i in 0..5 {
        let mut m = msg(&format!("m{i}"), "user", &format!("fork text {i}"));
        m["metadata"] = json!({"n": i});
        api.post(&format!("/sessions/{src}/messages"), json!({"message": m}));
    }
    api.append(&src, "side", Some(Some("m1")), "a side branch");
    api.post(
        &format!("/sessions/{src}/compactions"),
        json!({"summary": "early", "fromMessageId": "m0", "toMessageId": "m1"}),
    );
    api.post(
        &format!("/sessions/{src}/compactions"),
        json!({"summary": "late", "fromMessageId": "m3", "toMessageId": "m4"}),
    );
    let r = api.post(&format!("/sessions/{src}/fork"), json!({"atMessageId": "m3", "name": "copy"}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let f = r.body_json();
    let fid = f["id"].as_str().unwrap();
    assert_eq!(
        (f["name"].as_str(), f["parentSessionId"].as_str(), f["model"].as_str(), f["source"].as_str()),
        (Some("copy"), Some(src.as_str()), Some("m1"), Some("cli"))
    );
    assert_eq!(f["messageCount"], 4);
    let raw = api.get(&format!("/sessions/{fid}/history?raw=1")).body_json()["messages"].clone();
    let raw = raw.as_array().unwrap();
    assert_eq!(raw.len(), 4);
    for (i, m) in raw.iter().enumerate() {
        assert!(!m["id"].as_str().unwrap().starts_with('m'), "new ids");
        assert_eq!(m["metadata"]["n"], i);
        assert_eq!(m["parts"][0]["text"], format!("fork text {i}"));
    }
    // The overlay that lies on the copied path comes along (remapped); the other does not.
    let h = api.get(&format!("/sessions/{fid}/history")).body_json()["messages"].clone();
    assert_eq!(h.as_array().unwrap().len(), 3);
    assert_eq!(h[0]["parts"][0]["text"], "early");
    let cs = api.get(&format!("/sessions/{fid}/compactions")).body_json()["compactions"].clone();
    assert_eq!(cs.as_array().unwrap().len(), 1);
    assert_eq!(cs[0]["fromMessageId"], raw[0]["id"]);
    // Search finds the copies in the fork.
    let hits = api.get(&format!("/sessions/{fid}/search?q=fork")).body_json()["results"].clone();
    assert_eq!(hits.as_array().unwrap().len(), 4);
    // Errors: unknown message, unknown session, missing field.
    assert_eq!(api.post(&format!("/sessions/{src}/fork"), json!({"atMessageId": "zz"})).status, 404);
    assert_eq!(api.post("/sessions/nope/fork", json!({"atMessageId": "m1"})).status, 404);
    assert_eq!(api.post(&format!("/sessions/{src}/fork"), json!({})).status, 400);
    assert_eq!(api.get("/sessions").body_json()["sessions"].as_array().unwrap().len(), 2);
    let unnamed = api.post(&format!("/sessions/{src}/fork"), json!({"atMessageId": "m0"})).body_json();
    assert_eq!(unnamed["name"], "orig (fork)");
}

#[test]
fn usage_sums_and_validation() {
    let api = Api::new();
    api.post("/sessions/s/usage", json!({"inputTokens": 100, "outputTokens": 20, "cost": 0.1}));
    let r = api.post("/sessions/s/usage", json!({"inputTokens": 1, "outputTokens": 2, "cost": 0.2}));
    let s = r.body_json();
    assert_eq!((s["inputTokens"].as_i64(), s["outputTokens"].as_i64()), (Some(101), Some(22)));
    // 0.1 + 0.2 is 0.30000000000000004 in f64: a sum is compared within a tolerance.
    assert_near(s["estimatedCost"].as_f64(), 0.3);
    for bad in [
        json!({"inputTokens": -1}),
        json!({"outputTokens": "3"}),
        json!({"cost": -0.1}),
        json!({"inputTokens": 1.5}),
        json!({"cost": "x"}),
    ] {
        let r = api.post("/sessions/s/usage", bad.clone());
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{bad}");
    }
    assert_eq!(api.get("/sessions/s").body_json()["inputTokens"], 101);
}

/// Sums that would overflow (an infinite cost, more tokens than a JSON number holds exactly)
/// are refused with 400 and leave the totals as they were.
#[test]
fn usage_sums_never_overflow() {
    let api = Api::new();
    assert_eq!(
        api.post("/sessions/s/usage", json!({"cost": 1e308, "inputTokens": 9_007_199_254_740_000i64})).status,
        200
    );
    let before = api.get("/sessions/s").body_json();
    for bad in [
        json!({"cost": 1e308}),
        json!({"inputTokens": 992}),
        json!({"outputTokens": 9_007_199_254_740_992i64}),
        json!({"outputTokens": i64::MAX}),
    ] {
        let r = api.post("/sessions/s/usage", bad.clone());
        assert_eq!(
            (r.status, code(&r).as_str()),
            (400, "invalid_request"),
            "{bad}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert_eq!(api.get("/sessions/s").body_json(), before);
    assert_eq!(before["estimatedCost"], 1e308);
    assert_eq!(
        api.post("/sessions/s/usage", json!({"inputTokens": 991})).body_json()["inputTokens"],
        9_007_199_254_740_991i64
    );
}

/// `messageCount` is the length of the active path (root to the latest leaf), `totalMessages`
/// counts every message on every branch; both follow deletes.
#[test]
fn message_count_is_the_active_path_and_total_messages_every_branch() {
    let api = Api::new();
    let counts = |api: &Api| {
        let s = api.get("/sessions/s").body_json();
        let listed = api.get("/sessions").body_json()["sessions"][0].clone();
        assert_eq!((&listed["messageCount"], &listed["totalMessages"]), (&s["messageCount"], &s["totalMessages"]));
        (s["messageCount"].as_i64().unwrap(), s["totalMessages"].as_i64().unwrap())
    };
    for id in ["a", "b", "c", "d"] {
        api.append("s", id, None, id);
    }
    assert_eq!(counts(&api), (4, 4));
    api.append("s", "b2", Some(Some("a")), "a branch"); // the latest leaf is now b2: a → b2
    assert_eq!(counts(&api), (2, 5));
    let length = api.get("/sessions/s/path-length").body_json()["length"].as_i64().unwrap();
    assert_eq!(length, 2);
    api.append("s", "r", Some(None), "a new root");
    assert_eq!(counts(&api), (1, 6));
    assert_eq!(api.delete("/sessions/s/messages/r").status, 204); // the latest leaf is b2 again
    assert_eq!(counts(&api), (2, 5));
    assert_eq!(api.delete("/sessions/s/messages/a").status, 204); // b2 is orphaned: its own root
    assert_eq!(counts(&api), (1, 4));
    assert_eq!(api.delete("/sessions/s/messages").status, 204);
    assert_eq!(counts(&api), (0, 0));
}

#[test]
fn the_list_pages_with_limit_and_cursor() {
    let api = Api::new();
    for i in 0..7 {
        api.append(&format!("s{i}"), "m", None, "hi");
    }
    // s3 written again: it moves to the front.
    api.append("s3", "m2", None, "again");
    let all = api.get("/sessions").body_json();
    assert_eq!(all["nextCursor"], Json::Null, "without limit: every session, no cursor");
    let order: Vec<String> =
        all["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(order, ["s3", "s6", "s5", "s4", "s2", "s1", "s0"]);
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/sessions?limit=3&cursor={c}"),
            None => "/sessions?limit=3".to_owned(),
        };
        let page = api.get(&q).body_json();
        let ids = page["sessions"].as_array().unwrap();
        assert!(ids.len() <= 3);
        paged.extend(ids.iter().map(|s| s["id"].as_str().unwrap().to_owned()));
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, order, "the pages, one after another, are the list");
    for bad in ["/sessions?limit=0", "/sessions?limit=101", "/sessions?cursor=nope", "/sessions?limit=x"] {
        let r = api.get(bad);
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{bad}");
    }
    let last = api.get("/sessions?limit=7").body_json();
    assert_eq!(
        (last["sessions"].as_array().unwrap().len(), &last["nextCursor"]),
        (7, &Json::Null),
        "an exact fit has no next page"
    );
}
