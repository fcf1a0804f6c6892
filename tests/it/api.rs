//! The DO's HTTP contract as plain functions: routing, methods, path decoding, body limits,
//! batch appends, and the rule that a rejected request changes nothing.

use crate::support::{code, ids, msg, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_api::{self as api, Request};
use session_agent_core::sql::Sql;
use session_agent_core::store::schema;

#[test]
fn unknown_routes_and_wrong_methods() {
    let api = Api::new();
    let r = api.get("/nope");
    assert_eq!((r.status, code(&r).as_str()), (404, "not_found"));
    let r = api.send(Request::new(Method::Put, "/sessions"));
    assert_eq!((r.status, code(&r).as_str()), (405, "method_not_allowed"));
    assert_eq!(r.header("allow"), Some("GET, POST"));
    assert_eq!(api.send(Request::new(Method::Get, "/sessions/s/fork")).status, 405);
    assert_eq!(api.send(Request::new(Method::Post, "/sessions/s/history")).status, 405);
    assert_eq!(api.send(Request::new(Method::Patch, "/sessions/s/messages/m")).status, 405);
    // `batch` is a route for POST and a message id for the rest, so its Allow names all of them.
    let b = api.send(Request::new(Method::Patch, "/sessions/s/messages/batch"));
    assert_eq!((b.status, b.header("allow")), (405, Some("GET, POST, PUT, DELETE")));
    assert_eq!(r.header("content-type"), Some("application/json; charset=utf-8"));
}

#[test]
fn path_names_are_checked_after_decoding() {
    let api = Api::new();
    for bad in
        ["/sessions/a%20b", "/sessions/%FF", &format!("/sessions/{}", "x".repeat(129)), "/sessions/a%2Fb/history"]
    {
        let r = api.get(bad);
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{bad}");
    }
    assert_eq!(api.get(&format!("/sessions/{}/history", "x".repeat(128))).status, 200);
    assert_eq!(api.get("/sessions/A-z_0.9:x/history").status, 200);
}

#[test]
fn message_ids_with_slashes_and_unicode_are_percent_encoded() {
    let api = Api::new();
    for id in ["a/b", "ünï cødé", "batch", "100%", "?x=1#y"] {
        api.append("s", id, None, "hi");
        let enc: String = percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC).collect();
        let r = api.get(&format!("/sessions/s/messages/{enc}"));
        assert_eq!(r.status, 200, "{id}");
        assert_eq!(r.body_json()["id"], id);
    }
    assert_eq!(api.get("/sessions/s/messages/batch").body_json()["id"], "batch");
    assert_eq!(api.delete("/sessions/s/messages/batch").status, 204);
}

#[test]
fn bad_bodies_are_400_and_change_nothing() {
    let api = Api::new();
    api.append("s", "a", None, "hello");
    let before = api.get("/sessions/s").body_json();
    let bodies: Vec<Vec<u8>> = vec![b"{".to_vec(), b"[]".to_vec(), b"\"x\"".to_vec(), vec![0xff, 0xfe]];
    for body in bodies {
        let mut req = Request::new(Method::Post, "/sessions/s/messages");
        req.body = body;
        assert_eq!(api.send(req).status, 400);
    }
    for body in [
        json!({}),
        json!({"message": msg("b", "user", "x"), "parentId": 5}),
        json!({"message": {"id": "b", "role": "user"}}),
        json!({"message": msg("b", "user", "x"), "parentId": ""}),
    ] {
        let r = api.post("/sessions/s/messages", body.clone());
        assert_eq!(r.status, 400, "{body}");
    }
    // Routes that read no body refuse one that is not a JSON object too, and change nothing.
    for (method, path) in [
        ("DELETE", "/sessions/s/messages"),
        ("DELETE", "/sessions/s/messages/a"),
        ("DELETE", "/sessions/s"),
        ("POST", "/sessions/s/prompt/refresh"),
    ] {
        let mut req = Request::new(Method::parse(method), path);
        req.body = b"[1, 2]".to_vec();
        assert_eq!(api.send(req).status, 400, "{method} {path}");
    }
    let after = api.get("/sessions/s").body_json();
    assert_eq!(before["messageCount"], after["messageCount"]);
    assert_eq!(before["updatedAt"], after["updatedAt"]);
}

// invariant 16 (docs/ARCHITECTURE.md)
#[test]
fn unspillable_messages_and_oversize_bodies_are_413() {
    let api = Api::new();
    // 2,000 parts of 1 KB: over the row limit, and no field is big enough to move to R2.
    let parts: Vec<serde_json::Value> = (0..2000).map(|_| json!({"type": "text", "text": "x".repeat(1000)})).collect();
    let r = api.post("/sessions/s/messages", json!({"message": {"id": "big", "role": "user", "parts": parts}}));
    assert_eq!((r.status, code(&r).as_str()), (413, "too_large"));
    assert_eq!(api.get("/sessions/s").status, 404, "nothing registered");
    assert!(api.blobs.keys().is_empty(), "nothing left in R2");
    let mut req = Request::new(Method::Post, "/sessions/s/messages");
    req.body = vec![b' '; api::http::MAX_BODY_BYTES + 1];
    assert_eq!(api.send(req).status, 413);
    // Just under the limit is stored whole, in the row.
    let fits = "y".repeat(1_799_900);
    let r = api.post("/sessions/s/messages", json!({"message": msg("fits", "user", &fits)}));
    assert_eq!(r.status, 201);
    assert_eq!(
        api.get("/sessions/s/messages/fits").body_json()["parts"][0]["text"].as_str().unwrap().len(),
        fits.len()
    );
    assert!(api.blobs.keys().is_empty());
}

#[test]
fn messages_round_trip_verbatim() {
    let api = Api::new();
    let m = json!({"id": "v", "role": "assistant", "parts": [{"type": "dynamic-tool", "toolName": "t", "toolCallId": "c",
        "state": "output-available", "input": {"z": 1, "a": [1, 2.5, null]}, "output": {"ok": true}}],
        "createdAt": "2026-11-22T11:00:00.000Z", "metadata": {"zz": "last", "aa": "first"}, "custom": "kept"});
    api.post("/sessions/s/messages", json!({"message": m.clone()}));
    let back = api.get("/sessions/s/messages/v");
    assert_eq!(String::from_utf8(back.body).unwrap(), m.to_string());
}

// invariant 8 (docs/ARCHITECTURE.md)
#[test]
fn batch_chains_in_order_and_is_all_or_nothing() {
    let api = Api::new();
    api.append("s", "root", None, "r");
    let r = api
        .post("/sessions/s/messages/batch", json!({"messages": [msg("a", "user", "1"), msg("b", "assistant", "2")]}));
    assert_eq!(r.status, 201);
    assert_eq!(r.body_json(), json!({"ids": ["a", "b"], "lastId": "b", "inserted": 2}));
    assert_eq!(api.history_ids("/sessions/s/history"), ["root", "a", "b"]);
    // parentId null starts a new root; an existing id is skipped and the chain continues from it.
    let r = api.post(
        "/sessions/s/messages/batch",
        json!({"messages": [msg("x", "user", "1"), msg("a", "user", "dup"), msg("y", "user", "3")], "parentId": null}),
    );
    assert_eq!(r.body_json()["inserted"], 2);
    assert_eq!(api.history_ids("/sessions/s/history"), ["root", "a", "y"]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=x"), ["x"]);
    // One bad message: nothing stored.
    let r = api.post("/sessions/s/messages/batch", json!({"messages": [msg("p", "user", "1"), {"id": "q"}]}));
    assert_eq!(r.status, 400);
    assert!(r.body_json()["error"]["message"].as_str().unwrap().starts_with("messages[1]"));
    assert_eq!(api.get("/sessions/s/messages/p").status, 404);
    let r = api.post("/sessions/s/messages/batch", json!({"messages": [msg("p", "user", "1")], "parentId": "missing"}));
    assert_eq!(r.status, 404);
    assert_eq!(api.get("/sessions/s/messages/p").status, 404);
    assert_eq!(api.post("/sessions/s/messages/batch", json!({"messages": {}})).status, 400);
    let r = api.post("/sessions/e/messages/batch", json!({"messages": []}));
    assert_eq!(r.body_json(), json!({"ids": [], "lastId": null, "inserted": 0}));
    assert_eq!(api.get("/sessions/e").status, 404);
    // An unknown parentId is 404 also for an empty batch and for one made of known ids.
    assert_eq!(api.post("/sessions/s/messages/batch", json!({"messages": [], "parentId": "missing"})).status, 404);
    let r = api.post("/sessions/s/messages/batch", json!({"messages": [msg("a", "user", "1")], "parentId": "missing"}));
    assert_eq!(r.status, 404);
}

#[test]
fn migrations_are_recorded_and_idempotent() {
    let db = crate::support::db();
    assert_eq!(schema::current_version(&db).unwrap(), schema::latest_version());
    assert!(schema::migrate(&db, "t").unwrap().is_empty());
    let rows = db.query("SELECT version, name FROM schema_version ORDER BY version", &[]).unwrap();
    assert_eq!(rows.len(), schema::MIGRATIONS.len());
    assert_eq!(rows[0].text(1).unwrap(), "foundation");
}

// invariant 8 (docs/ARCHITECTURE.md)
#[test]
fn a_failing_write_rolls_back_completely() {
    // A fork whose copy cannot be written (a trigger makes the 3rd insert fail) leaves no
    // session and no messages behind: the transaction is all or nothing.
    let api = Api::new();
    for i in 0..5 {
        api.append("s", &format!("m{i}"), None, "text");
    }
    api.db
        .execute_batch(
            "CREATE TRIGGER fail_third BEFORE INSERT ON messages
             WHEN (SELECT COUNT(*) FROM messages WHERE session_id <> 's') >= 2
             BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
        )
        .unwrap();
    let r = api.post("/sessions/s/fork", json!({"atMessageId": "m4"}));
    assert_eq!(r.status, 500);
    let sessions: Json = api.get("/sessions").body_json();
    assert_eq!(ids(&sessions["sessions"]), ["s"]);
    let n = api.db.query("SELECT COUNT(*) FROM messages", &[]).unwrap()[0].int(0).unwrap();
    assert_eq!(n, 5);
}
