//! The MCP endpoint through the DO API: JSON-RPC framing, initialize's version choice, the tool
//! list (the same as `GET …/tools`), calls that write and calls that fail, notifications, and the
//! read scope. (The official SDK client is driven against the Worker in tests/e2e/mcp.test.mjs.)

use crate::support::{code, Api};
use serde_json::{json, Value as Json};
use session_agent_api::access::{Claims, CLAIMS_HEADER};
use session_agent_api::http::Method;
use session_agent_api::Request;
use session_agent_core::ids::Role;

fn api() -> Api {
    Api::with_config(json!({"context": [
        {"label": "notes", "kind": "writable", "maxTokens": 50},
        {"label": "kb", "kind": "search"}
    ]}))
}

fn rpc(api: &Api, body: Json) -> (u16, Json) {
    let r = api.post("/sessions/s1/mcp", body);
    (r.status, r.body_json())
}

#[test]
fn initialize_picks_a_version_both_speak() {
    let api = api();
    let (status, r) = rpc(
        &api,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(status, 200);
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(r["result"]["capabilities"]["tools"]["listChanged"], false);
    let (_, r) = rpc(
        &api,
        json!({"jsonrpc": "2.0", "id": "a", "method": "initialize", "params": {"protocolVersion": "1999-01-01"}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(r["id"], "a");
    assert_eq!(api.get("/sessions/s1").status, 404, "initializing registers nothing");
}

#[test]
fn tools_are_listed_and_called() {
    let api = api();
    let (_, r) = rpc(&api, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = &r["result"]["tools"];
    assert_eq!(*listed, api.get("/sessions/s1/tools").body_json()["tools"]);
    assert!(listed[0]["inputSchema"].is_object());
    let (_, r) = rpc(
        &api,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "set_context", "arguments": {"label": "notes", "content": "likes tea"}}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["content"][0]["type"], "text");
    assert_eq!(api.get("/sessions/s1/context/notes").body_json()["content"], "likes tea");
    // The tool's own failure is a result with isError; an unknown tool a JSON-RPC error.
    let (_, r) = rpc(
        &api,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "set_context", "arguments": {"label": "notes", "content": "x ".repeat(500)}}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().starts_with("Error:"));
    let (_, r) = rpc(&api, json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope"}}));
    assert_eq!(r["error"]["code"], -32602);
    let (_, r) = rpc(&api, json!({"jsonrpc": "2.0", "id": 6, "method": "resources/list"}));
    assert_eq!(r["error"]["code"], -32601);
    let (_, r) = rpc(&api, json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn framing_errors_and_notifications() {
    let api = api();
    let r = api.post("/sessions/s1/mcp", json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!((r.status, r.body.len()), (202, 0));
    let mut bad = Request::new(Method::Post, "/sessions/s1/mcp");
    bad.body = b"{not json".to_vec();
    let r = api.send(bad);
    assert_eq!((r.status, code(&r)), (400, "invalid_request".into()));
    let (status, r) = rpc(&api, json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]));
    assert_eq!(status, 400);
    assert!(r["error"]["message"].as_str().unwrap().contains("batches"));
    let (status, _) = rpc(&api, json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}));
    assert_eq!(status, 400);
    assert_eq!(api.get("/sessions/s1/mcp").status, 405, "no server-to-client stream");
}

#[test]
fn a_read_token_lists_but_does_not_call() {
    let api = api();
    let c = Claims::issue(
        "alice",
        Role::Agent,
        json!({"scope": "read", "ttlSeconds": 60}).as_object().unwrap(),
        api.now.get(),
    )
    .unwrap();
    let send = |body: Json| {
        api.send(
            Request::new(Method::Post, "/sessions/s1/mcp")
                .json(&body)
                .header(CLAIMS_HEADER, &serde_json::to_string(&c).unwrap()),
        )
    };
    assert_eq!(send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).status, 200);
    let r = send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "set_context", "arguments": {"label": "notes", "content": "x"}}}));
    assert_eq!((r.status, code(&r)), (403, "forbidden".into()));
    assert_eq!(api.get("/sessions/s1/context/notes").body_json()["content"], "");
}
