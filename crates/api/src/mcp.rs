//! `POST /sessions/{sid}/mcp`: a Model Context Protocol server over the session's tools (the
//! Streamable HTTP transport, JSON-RPC 2.0), so MCP clients (Claude Desktop, the official SDKs,
//! IDE agents) can use what `GET …/tools` lists. Stateless: no `Mcp-Session-Id`, answers are
//! `application/json`, notifications get `202`, and `GET` (a server-to-client stream) is `405`
//! from the route table.
//!
//! Methods: `initialize`, `ping`, `tools/list`, `tools/call` (`content: [{type: "text", text:
//! output}]`, `isError` when the output is the tool's `Error: …`). A token of scope `read` may
//! initialize and list; `tools/call` needs `write` (`403 forbidden`). A body that is not one
//! JSON-RPC 2.0 object is `400 invalid_request`, as on every route.

use super::call::{Call, Pending};
use serde_json::{json, Map, Value as Json};

use super::access::{claims_of, Scope};
use super::http::Response;
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::session::Session;

// The protocol versions this server speaks (the core's MCP client speaks the same), newest
// first: a client asking for one of them gets it, any other client the newest.
use session_agent_core::context::mcp::PROTOCOL_VERSIONS;

// JSON-RPC error codes.
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

fn rpc_error(id: &Json, code: i64, message: &str) -> Json {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn rpc_result(id: &Json, result: Json) -> Json {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Answers one JSON-RPC message.
pub(crate) fn handle<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        // A message that cannot be taken is an HTTP 400 with the API's error body (the transport
        // allows any body there), like every other route's.
        let msg = req.json_object().map_err(|e| match req.body.first() {
            Some(b'[') => Error::invalid("JSON-RPC batches are not supported: send one message per request"),
            _ => e,
        })?;
        if msg.get("jsonrpc").and_then(Json::as_str) != Some("2.0") {
            return Err(Error::invalid("not a JSON-RPC 2.0 message (jsonrpc must be \"2.0\")"));
        }
        // We send no requests, so a client has no responses to send us: every message has a method.
        let method =
            msg.get("method").and_then(Json::as_str).ok_or_else(|| Error::invalid("method must be a string"))?;
        let params = match msg.get("params") {
            None => Map::new(),
            Some(Json::Object(p)) => p.clone(),
            Some(_) => return Err(Error::invalid("params must be an object")),
        };
        let id = match msg.get("id") {
            // A notification (or a client's response): nothing to answer.
            None => return Ok(Response { status: 202, ..Response::no_content() }),
            Some(id) if id.is_string() || id.is_i64() || id.is_u64() => id,
            Some(_) => return Err(Error::invalid("id must be a string or an integer")),
        };
        let answer = match method {
            "initialize" => rpc_result(id, initialize(&params)),
            "ping" => rpc_result(id, json!({})),
            "tools/list" => rpc_result(id, json!({"tools": s.tools()?})),
            "tools/call" => {
                if claims_of(req)?.is_some_and(|c| c.scope == Scope::Read) {
                    return Err(Error::forbidden(
                        "the token may only read (scope \"read\"): tools/call needs \"write\"",
                    ));
                }
                call(s, id, &params).await?
            }
            other => rpc_error(id, METHOD_NOT_FOUND, &format!("method not found: {other}")),
        };
        Ok(Response::json(200, &answer))
    })
}

fn initialize(params: &Map<String, Json>) -> Json {
    let asked = params.get("protocolVersion").and_then(Json::as_str);
    let version = asked.filter(|v| PROTOCOL_VERSIONS.contains(v)).unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "session-agent", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "The tools of one session of a session-agent memory: its context blocks, \
                         its history search and, when configured, long-term memory.",
    })
}

/// `tools/call {name, arguments}`: the tool's output as text content. A tool's own failure is a
/// result with `isError`; an unknown tool or bad arguments a JSON-RPC error.
async fn call(s: &Session<'_>, id: &Json, params: &Map<String, Json>) -> Result<Json> {
    let Some(name) = params.get("name").and_then(Json::as_str) else {
        return Ok(rpc_error(id, INVALID_PARAMS, "tools/call needs a tool name"));
    };
    let input = params.get("arguments").cloned().unwrap_or_else(|| Json::Object(Map::new()));
    Ok(match s.run_tool(name, &input).await {
        Ok(ran) => {
            let failed = ran.output.starts_with("Error:");
            rpc_result(id, json!({"content": [{"type": "text", "text": ran.output}], "isError": failed}))
        }
        Err(e) if e.kind == ErrorKind::NotFound => rpc_error(id, INVALID_PARAMS, &format!("unknown tool: {name}")),
        Err(e) if e.kind == ErrorKind::InvalidRequest => rpc_error(id, INVALID_PARAMS, &e.message),
        Err(e) if e.kind.status() < 500 => return Err(e),
        Err(e) => rpc_error(id, INTERNAL_ERROR, &e.message),
    })
}
