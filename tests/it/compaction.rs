//! Compaction overlays as storage: validation on write, branch-local application at read time,
//! newest-wins supersession, raw reads, and the recent window.

use crate::support::{code, ids, Api};
use serde_json::json;

fn linear(api: &Api, sid: &str, n: usize) {
    for i in 0..n {
        api.append(sid, &format!("m{i}"), None, &format!("text {i}"));
    }
}

fn overlay(api: &Api, sid: &str, from: &str, to: &str, summary: &str) -> String {
    let r = api.post(
        &format!("/sessions/{sid}/compactions"),
        json!({"summary": summary, "fromMessageId": from, "toMessageId": to}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["id"].as_str().unwrap().to_string()
}

// invariant 5 (docs/ARCHITECTURE.md)
#[test]
fn an_overlay_replaces_its_run_and_raw_shows_the_originals() {
    let api = Api::new();
    linear(&api, "s", 6);
    let id = overlay(&api, "s", "m1", "m3", "the middle");
    let h = api.get("/sessions/s/history").body_json();
    let c = format!("compaction_{id}");
    assert_eq!(ids(&h["messages"]), ["m0", c.as_str(), "m4", "m5"]);
    let synthetic = &h["messages"][1];
    assert_eq!(synthetic["role"], "assistant");
    assert_eq!(synthetic["parts"], json!([{"type": "text", "text": "the middle"}]));
    // Stable across reads: createdAt is the overlay's.
    assert_eq!(api.get("/sessions/s/history").body_json(), h);
    assert_eq!(api.history_ids("/sessions/s/history?raw=1"), ["m0", "m1", "m2", "m3", "m4", "m5"]);
    let list = api.get("/sessions/s/compactions").body_json();
    assert_eq!(list["compactions"][0]["fromMessageId"], "m1");
    assert_eq!(list["compactions"][0]["createdAt"], synthetic["createdAt"]);
}

#[test]
fn the_newest_overlay_from_the_same_start_wins() {
    let api = Api::new();
    linear(&api, "s", 6);
    overlay(&api, "s", "m0", "m2", "first");
    let second = overlay(&api, "s", "m0", "m4", "second");
    assert_eq!(api.history_ids("/sessions/s/history"), [format!("compaction_{second}"), "m5".into()]);
    assert_eq!(api.get("/sessions/s/compactions").body_json()["compactions"].as_array().unwrap().len(), 2);
}

#[test]
fn overlays_stay_on_their_own_branch() {
    let api = Api::new();
    linear(&api, "s", 3); // m0 m1 m2
    api.append("s", "b1", Some(Some("m1")), "branch one");
    api.append("s", "b2", Some(Some("m1")), "branch two");
    let on_m2 = overlay(&api, "s", "m0", "m2", "main line");
    let on_b1 = overlay(&api, "s", "m0", "b1", "branch one line");
    assert_eq!(api.history_ids("/sessions/s/history?leaf=m2"), [format!("compaction_{on_m2}")]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=b1"), [format!("compaction_{on_b1}")]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=b2"), ["m0", "m1", "b2"]);
}

#[test]
fn bad_overlays_are_refused_and_nothing_is_stored() {
    let api = Api::new();
    linear(&api, "s", 3);
    api.append("s", "b", Some(Some("m0")), "side");
    api.append("t", "m9", None, "other session");
    for (from, to) in [("m2", "m0"), ("m1", "b"), ("zz", "m1"), ("m0", "zz"), ("m9", "m9")] {
        let r = api.post("/sessions/s/compactions", json!({"summary": "s", "fromMessageId": from, "toMessageId": to}));
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{from}->{to}");
    }
    for body in [
        json!({"summary": " ", "fromMessageId": "m0", "toMessageId": "m1"}),
        json!({"fromMessageId": "m0", "toMessageId": "m1"}),
        json!({"summary": "x", "fromMessageId": 1, "toMessageId": "m1"}),
    ] {
        assert_eq!(api.post("/sessions/s/compactions", body).status, 400);
    }
    assert_eq!(api.get("/sessions/s/compactions").body_json(), json!({"compactions": []}));
    overlay(&api, "s", "m1", "m1", "one message");
}

#[test]
fn the_recent_window_applies_only_overlays_inside_it() {
    let api = Api::new();
    linear(&api, "s", 6);
    let inside = overlay(&api, "s", "m4", "m5", "tail");
    overlay(&api, "s", "m0", "m1", "head");
    let all = api.get("/sessions/s/history/recent?maxBytes=1&minMessages=3").body_json();
    assert_eq!(ids(&all["messages"]), ["m3".to_string(), format!("compaction_{inside}")]);
    assert_eq!(all["truncated"], true);
}
