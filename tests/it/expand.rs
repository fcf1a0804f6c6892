//! Nothing is lost to compaction: the originals behind a summary, paged, through
//! `GET /sessions/{sid}/compactions/{cid}/messages` and the `expand_compaction` tool.

use crate::support::{msg, Api};
use serde_json::{json, Value as Json};

fn api(compaction: Json) -> Api {
    Api::with_config(json!({"compaction": compaction})).with_model()
}

/// `m1`…`mn`, alternating user/assistant, then a manual overlay over `from..=to`.
fn session_with_overlay(api: &Api, n: usize, from: &str, to: &str) -> String {
    let msgs: Vec<Json> = (1..=n)
        .map(|i| msg(&format!("m{i}"), if i % 2 == 1 { "user" } else { "assistant" }, &format!("original text {i}")))
        .collect();
    assert_eq!(api.post("/sessions/s/messages/batch", json!({"messages": msgs})).status, 201);
    let r = api.post(
        "/sessions/s/compactions",
        json!({"summary": "## Topic\nA summary", "fromMessageId": from, "toMessageId": to}),
    );
    assert_eq!(r.status, 201);
    r.body_json()["id"].as_str().unwrap().to_owned()
}

fn ids(v: &Json) -> Vec<String> {
    v["messages"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

fn tool(api: &Api, input: Json) -> (u16, Json) {
    let r = api.post("/sessions/s/tools/expand_compaction", json!({ "input": input }));
    (r.status, r.body_json())
}

#[test]
fn the_route_pages_through_the_originals() {
    let api = Api::new();
    let cid = session_with_overlay(&api, 30, "m2", "m26");
    let page = api.get(&format!("/sessions/s/compactions/{cid}/messages?limit=10")).body_json();
    assert_eq!(page["total"], 25);
    assert_eq!(page["offset"], 0);
    assert_eq!(page["nextOffset"], 10);
    assert_eq!(page["compaction"]["id"], json!(cid));
    assert_eq!(ids(&page), (2..=11).map(|i| format!("m{i}")).collect::<Vec<_>>());
    assert_eq!(page["messages"][0], msg("m2", "assistant", "original text 2"), "stored whole");

    let last = api.get(&format!("/sessions/s/compactions/{cid}/messages?offset=20&limit=10")).body_json();
    assert_eq!(ids(&last), ["m22", "m23", "m24", "m25", "m26"]);
    assert_eq!(last["nextOffset"], Json::Null);
    let past = api.get(&format!("/sessions/s/compactions/{cid}/messages?offset=99")).body_json();
    assert_eq!(past["messages"], json!([]));
    // Default page size 20.
    assert_eq!(ids(&api.get(&format!("/sessions/s/compactions/{cid}/messages")).body_json()).len(), 20);
    // The synthetic message's id names the same overlay (the history shows that id).
    let by_message = api.get(&format!("/sessions/s/compactions/compaction_{cid}/messages?limit=10")).body_json();
    assert_eq!(by_message["compaction"]["id"], json!(cid));
    assert_eq!(ids(&by_message).len(), 10);
}

#[test]
fn the_route_checks_its_input() {
    let api = Api::new();
    let cid = session_with_overlay(&api, 5, "m2", "m3");
    assert_eq!(api.get("/sessions/s/compactions/nope/messages").status, 404);
    assert_eq!(
        api.get(&format!("/sessions/other/compactions/{cid}/messages")).status,
        404,
        "another session's overlay"
    );
    for q in ["limit=0", "limit=101", "offset=-1", "limit=x"] {
        assert_eq!(api.get(&format!("/sessions/s/compactions/{cid}/messages?{q}")).status, 400, "{q}");
    }
    assert_eq!(api.post(&format!("/sessions/s/compactions/{cid}/messages"), json!({})).status, 405);
    // Its end deleted: 409, not a 5xx.
    assert_eq!(api.delete("/sessions/s/messages/m3").status, 204);
    assert_eq!(api.get(&format!("/sessions/s/compactions/{cid}/messages")).status, 409);
}

#[test]
fn the_tool_is_offered_when_compaction_can_happen() {
    let without = Api::new();
    let names = |api: &Api| api.tool_names("s");
    assert_eq!(names(&without), ["session_search"]);
    assert_eq!(without.post("/sessions/s/tools/expand_compaction", json!({"input": {}})).status, 404);
    // Once the session has an overlay, it is offered.
    session_with_overlay(&without, 4, "m1", "m2");
    assert_eq!(names(&without), ["session_search", "expand_compaction"]);
    // With compaction configured, always.
    let with = api(json!({"after": 100000}));
    assert_eq!(names(&with), ["session_search", "expand_compaction"]);
    let tools = with.get("/sessions/s/tools").body_json();
    let schema = &tools["tools"][1]["inputSchema"];
    assert_eq!(schema["properties"]["limit"]["maximum"], 100);
    assert_eq!(schema["required"], json!([]));
}

#[test]
fn the_tool_reads_the_newest_visible_summary_by_default() {
    let api = api(json!({"after": 100000}));
    assert_eq!(tool(&api, json!({})).1["output"], "Error: there is no summary in this conversation to expand");
    let cid = session_with_overlay(&api, 8, "m2", "m7");
    let (status, out) = tool(&api, json!({"limit": 2}));
    assert_eq!(status, 200);
    assert_eq!(
        out["output"],
        format!(
            "Original messages 1-2 of 6 behind compaction {cid}:\n\n[assistant]\noriginal text 2\n\n---\n\n[user]\noriginal text 3\n\n(4 more: call expand_compaction with offset 2.)"
        )
    );
    // By id, with or without the synthetic message's prefix, at an offset.
    for id in [cid.clone(), format!("compaction_{cid}")] {
        let (_, out) = tool(&api, json!({"compactionId": id, "offset": 4, "limit": 5}));
        assert_eq!(
            out["output"],
            format!("Original messages 5-6 of 6 behind compaction {cid}:\n\n[assistant]\noriginal text 6\n\n---\n\n[user]\noriginal text 7")
        );
    }
    let (_, past) = tool(&api, json!({"offset": 6}));
    assert_eq!(past["output"], format!("No messages at offset 6 of compaction {cid} (6 messages in all)."));
    assert_eq!(
        tool(&api, json!({"compactionId": "nope"})).1["output"],
        "Error: compaction nope not found in session s"
    );
}

#[test]
fn the_tool_prefers_the_summary_on_the_active_branch() {
    let api = api(json!({"after": 100000}));
    let first = session_with_overlay(&api, 6, "m1", "m3");
    // A sibling branch from m2 with its own overlay, appended later: the active branch.
    let b =
        vec![msg("b1", "assistant", "branch one"), msg("b2", "user", "branch two"), msg("b3", "assistant", "three")];
    assert_eq!(api.post("/sessions/s/messages/batch", json!({"messages": b, "parentId": "m2"})).status, 201);
    let second = api
        .post(
            "/sessions/s/compactions",
            json!({"summary": "branch summary", "fromMessageId": "m1", "toMessageId": "b1"}),
        )
        .body_json();
    let (_, out) = tool(&api, json!({}));
    let text = out["output"].as_str().unwrap().to_owned();
    assert!(
        text.starts_with(&format!("Original messages 1-3 of 3 behind compaction {}:", second["id"].as_str().unwrap())),
        "{text}"
    );
    assert!(text.contains("branch one") && !text.contains("original text 3"));
    // The first overlay is still readable by id.
    let (_, out) = tool(&api, json!({"compactionId": first}));
    assert!(out["output"].as_str().unwrap().contains("original text 3"));
}

#[test]
fn the_tool_cuts_long_texts_and_tool_outputs_but_the_route_does_not() {
    let api = api(json!({"after": 100000}));
    let big = json!({"id": "t", "role": "assistant", "parts": [
        {"type": "text", "text": "y".repeat(20_000)},
        {"type": "dynamic-tool", "toolName": "fetch", "toolCallId": "c", "state": "output-available", "input": {"u": 1}, "output": "z".repeat(5000)}]});
    let msgs = vec![msg("a", "user", "hi"), big.clone(), msg("c", "user", "bye")];
    api.post("/sessions/s/messages/batch", json!({"messages": msgs}));
    let cid = api
        .post("/sessions/s/compactions", json!({"summary": "s", "fromMessageId": "a", "toMessageId": "t"}))
        .body_json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, out) = tool(&api, json!({}));
    let text = out["output"].as_str().unwrap();
    assert!(text.contains("... [truncated 20000 chars]"), "text cut at 10000");
    assert!(text.contains("[Tool: fetch]\nInput: {\"u\":1}\nOutput: zzz"));
    assert!(text.len() < 12_000, "{}", text.len());
    let page = api.get(&format!("/sessions/s/compactions/{cid}/messages")).body_json();
    assert_eq!(page["messages"][1], big);
}

#[test]
fn the_tool_checks_its_input() {
    let api = api(json!({"after": 100000}));
    session_with_overlay(&api, 4, "m1", "m2");
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 101}),
        json!({"offset": -1}),
        json!({"offset": "1"}),
        json!({"compactionId": 3}),
        json!([]),
    ] {
        assert_eq!(tool(&api, bad.clone()).0, 400, "{bad}");
    }
}
