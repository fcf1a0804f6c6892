//! The tools of remote MCP servers (`SESSION_CONFIG.tools.mcp`; docs/REFERENCE.md#mcp-tools):
//! a client of MCP's Streamable HTTP transport over the LLM [`Transport`], and [`McpServers`],
//! what the object's instance keeps of each server (its MCP session, its tool list).
//!
//! The exchange: `initialize` (the answer's `mcp-session-id` header names the session) →
//! `notifications/initialized` → `tools/list` (followed through `nextCursor`) → `tools/call`, each
//! one JSON-RPC message POSTed to the configured URL, answered as `application/json` or as a
//! `text/event-stream` carrying the answer. The list is kept for [`LIST_TTL_MS`] (a turn then
//! costs no request before its first tool call); a server that could not list is asked again
//! after [`RETRY_MS`], its tools absent meanwhile. A session the server forgot (`404`) is opened
//! again, once per call.
//!
//! Only the configured URL is ever sent to, with the header value of the secret the
//! configuration names; a failure of any kind (late, unreachable, an HTTP or JSON-RPC error, an
//! `isError` result, an output over `maxOutputBytes`) is the text of a tool error the model
//! reads, never a failed turn.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;

use futures::future::{select, Either};
use serde_json::Value as Json;

use crate::blobs::BoxFuture;
use crate::config::tools::SEPARATOR;
use crate::config::{is_label, McpServerConfig};
use crate::events::Events;
use crate::llm::sse::SseDecoder;
use crate::llm::{HttpRequest, ToolSpec, Transport};

/// The protocol versions we speak (as a server, `api::mcp`, and as a client), newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// How long a server's tool list is kept in the object's instance.
pub const LIST_TTL_MS: i64 = 300_000;
/// How long a server whose list failed is left alone (its tools absent) before it is asked again.
pub const RETRY_MS: i64 = 30_000;
/// The most bytes of a `tools/list` answer read (a page).
const MAX_LIST_BYTES: usize = 1 << 20;
/// The most pages of a tool list followed.
const MAX_PAGES: usize = 10;
/// Bytes of a `tools/call` answer read beyond four times `maxOutputBytes` (the JSON-RPC
/// envelope, escapes, `structuredContent` beside the text).
const ENVELOPE_BYTES: usize = 65_536;

/// How a turn reaches the servers: the transport, the Worker's secrets by name, where warnings
/// go, and the time now (ms).
pub struct Peer<'a> {
    pub transport: &'a dyn Transport,
    pub secret: &'a dyn Fn(&str) -> Option<String>,
    pub events: &'a dyn Events,
    pub now_ms: i64,
}

/// What the object's instance keeps of each configured server (by name), and the JSON-RPC ids.
#[derive(Default)]
pub struct McpServers {
    kept: RefCell<HashMap<String, Kept>>,
    last_id: Cell<u64>,
}

#[derive(Clone)]
enum Kept {
    /// Listed at `at` (ms), over `link`.
    Listed { link: Link, tools: Vec<Listed>, at: i64 },
    /// The last listing failed at `at`.
    Failed { at: i64 },
}

/// An MCP session with a server: its id (none for a stateless server) and the protocol version
/// it answered.
#[derive(Clone, Debug, Default)]
struct Link {
    session: Option<String>,
    version: String,
}

/// One tool of a server: its own name, and its spec as the model is offered it.
#[derive(Clone)]
struct Listed {
    tool: String,
    spec: ToolSpec,
}

/// One remote tool a turn offers.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTool {
    /// Which configured server (its index in `tools.mcp`).
    server: usize,
    /// Its name on the server.
    tool: String,
    /// As the model is offered it (`<server>__<tool>`).
    pub spec: ToolSpec,
}

/// The remote tools of one turn, fixed when it starts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Offered {
    tools: Vec<RemoteTool>,
}

impl Offered {
    /// Their specs, in the order of the servers, then of each server's list.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().map(|t| &t.spec)
    }

    /// The tool the model calls `name`, if this turn offers it.
    pub fn find(&self, name: &str) -> Option<&RemoteTool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }
}

/// Why an exchange with a server failed, in words the model reads.
#[derive(Clone, Debug, PartialEq)]
enum Failure {
    Late(u64),
    Unreachable,
    Status(u16),
    /// `404` to a request in a session: the server forgot it.
    Expired,
    Rpc(i64, String),
    TooLarge(usize),
    Unreadable(String),
    NoSecret(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Late(ms) => write!(f, "no answer within {ms} ms"),
            Failure::Unreachable => write!(f, "the server could not be reached"),
            Failure::Status(s) => write!(f, "the server answered HTTP {s}"),
            Failure::Expired => write!(f, "the server forgot the session"),
            Failure::Rpc(code, m) => write!(f, "the server answered error {code}: {m}"),
            Failure::TooLarge(n) => write!(f, "the answer is over {n} bytes"),
            Failure::Unreadable(why) => write!(f, "the answer is not readable: {why}"),
            Failure::NoSecret(s) => write!(f, "the secret {s} is not set"),
        }
    }
}

type Exchange<T> = std::result::Result<T, Failure>;

/// One server as one operation reaches it.
struct Client<'a> {
    cfg: &'a McpServerConfig,
    peer: &'a Peer<'a>,
    ids: &'a Cell<u64>,
}

impl Client<'_> {
    /// The request carrying the JSON-RPC message `msg` in `link` (none: the `initialize`
    /// request).
    fn request(&self, link: Option<&Link>, msg: String) -> Exchange<HttpRequest> {
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "application/json, text/event-stream".to_owned()),
        ];
        if let Some(name) = &self.cfg.secret {
            let value = (self.peer.secret)(name).ok_or_else(|| Failure::NoSecret(name.clone()))?;
            headers.push(match &self.cfg.header {
                Some(h) => (h.to_ascii_lowercase(), value),
                None => ("authorization".to_owned(), format!("Bearer {value}")),
            });
        }
        if let Some(link) = link {
            if let Some(s) = &link.session {
                headers.push(("mcp-session-id".to_owned(), s.clone()));
            }
            headers.push(("mcp-protocol-version".to_owned(), link.version.clone()));
        }
        Ok(HttpRequest { url: self.cfg.url.clone(), headers, body: msg, timeout_ms: self.cfg.timeout_ms })
    }

    fn next_id(&self) -> u64 {
        self.ids.set(self.ids.get() + 1);
        self.ids.get()
    }

    /// Opens a session: `initialize`, then `notifications/initialized`.
    async fn connect(&self) -> Exchange<Link> {
        let id = self.next_id();
        // The messages are written as text: `json!` would cost the wasm more code than they.
        let params = format!(
            r#"{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"session-agent","version":"{}"}}}}"#,
            PROTOCOL_VERSIONS[0],
            env!("CARGO_PKG_VERSION")
        );
        let msg = message(id, "initialize", &params);
        let resp = self.peer.transport.send(self.request(None, msg)?).await.map_err(|_| Failure::Unreachable)?;
        if !(200..300).contains(&resp.status) {
            return Err(Failure::Status(resp.status));
        }
        let result = answer(&resp.body, id)?;
        let version = result.get("protocolVersion").and_then(Json::as_str).unwrap_or(PROTOCOL_VERSIONS[0]);
        let link = Link { session: resp.header("mcp-session-id").map(str::to_owned), version: version.to_owned() };
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned();
        let resp =
            self.peer.transport.send(self.request(Some(&link), note)?).await.map_err(|_| Failure::Unreachable)?;
        match resp.status {
            200..=299 => Ok(link),
            s => Err(Failure::Status(s)),
        }
    }

    /// A request of `method` with `params` (JSON text) in `link`, its answer read up to `limit`
    /// bytes: its `result`.
    async fn rpc(&self, link: &Link, method: &str, params: &str, limit: usize) -> Exchange<Json> {
        let id = self.next_id();
        let req = self.request(Some(link), message(id, method, params))?;
        let mut body = String::new();
        let mut over = false;
        let mut take = |piece: &str| {
            if body.len() + piece.len() > limit {
                over = true;
                return Err(crate::error::Error::invalid("over the limit"));
            }
            body.push_str(piece);
            Ok(())
        };
        let sent = self.peer.transport.send_stream(req, &mut take).await;
        let status = match sent {
            _ if over => return Err(Failure::TooLarge(limit)),
            Ok(s) => s,
            Err(_) => return Err(Failure::Unreachable),
        };
        match status {
            404 if link.session.is_some() => Err(Failure::Expired),
            200..=299 => answer(&body, id),
            s => Err(Failure::Status(s)),
        }
    }

    /// The server's tools the configuration allows, as the model is offered them.
    async fn list(&self, link: &Link) -> Exchange<Vec<Listed>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => format!(r#"{{"cursor":{}}}"#, Json::from(c.as_str())),
                None => "{}".to_owned(),
            };
            let page = self.rpc(link, "tools/list", &params, MAX_LIST_BYTES).await?;
            let tools =
                page.get("tools").and_then(Json::as_array).ok_or_else(|| Failure::Unreadable("no tools".into()))?;
            for t in tools {
                let Some(tool) = t.get("name").and_then(Json::as_str) else { continue };
                if !self.cfg.allows(tool) {
                    continue;
                }
                let name = format!("{}{SEPARATOR}{tool}", self.cfg.name);
                if !is_label(&name) {
                    let why = "not 1-64 characters of [A-Za-z0-9_-] with the server's name";
                    self.peer.events.warn(&format!("MCP server {}: tool {tool:?} left out: {why}", self.cfg.name));
                    continue;
                }
                let description = t.get("description").and_then(Json::as_str).unwrap_or_default().to_owned();
                let input_schema = match t.get("inputSchema") {
                    Some(s @ Json::Object(_)) => s.clone(),
                    // What providers take for no input.
                    _ => Json::Object([("type".to_owned(), Json::from("object"))].into_iter().collect()),
                };
                out.push(Listed { tool: tool.to_owned(), spec: ToolSpec { name, description, input_schema } });
            }
            cursor = page.get("nextCursor").and_then(Json::as_str).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// `link`, or a new session when there is none.
    async fn linked(&self, link: Option<Link>) -> Exchange<Link> {
        match link {
            Some(l) => Ok(l),
            None => self.connect().await,
        }
    }
}

/// The JSON-RPC request `id` of `method` with `params` (JSON text).
fn message(id: u64, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

/// The `result` of the JSON-RPC answer `id` in `body`: the answer itself (`application/json`),
/// or the event carrying it in a stream (`text/event-stream`; other messages are passed over).
fn answer(body: &str, id: u64) -> Exchange<Json> {
    let ours = |m: &Json| m.get("id").and_then(Json::as_u64) == Some(id);
    let trimmed = body.trim_start();
    let message = if trimmed.starts_with('{') {
        serde_json::from_str::<Json>(trimmed).map_err(|e| Failure::Unreadable(e.to_string()))?
    } else {
        let mut sse = SseDecoder::new();
        let mut events = sse.push(body);
        events.extend(sse.finish());
        let found = events.iter().filter_map(|e| serde_json::from_str::<Json>(&e.data).ok()).find(ours);
        found.ok_or_else(|| Failure::Unreadable("no answer to the request in the stream".into()))?
    };
    if !ours(&message) {
        return Err(Failure::Unreadable("an answer to another request".into()));
    }
    if let Some(e) = message.get("error") {
        let code = e.get("code").and_then(Json::as_i64).unwrap_or(0);
        let text = e.get("message").and_then(Json::as_str).unwrap_or_default();
        return Err(Failure::Rpc(code, text.to_owned()));
    }
    message.get("result").cloned().ok_or_else(|| Failure::Unreadable("neither result nor error".into()))
}

/// The text a `tools/call` result gives the model: its content (text items as they are, a
/// resource's text, a placeholder for anything else) joined by new lines, or its
/// `structuredContent` when it has no content; `Err` for an `isError` result or one over `max`
/// bytes.
fn output(result: &Json, max: usize) -> std::result::Result<String, String> {
    let items = result.get("content").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut texts: Vec<String> = Vec::new();
    for item in items {
        let kind = item.get("type").and_then(Json::as_str).unwrap_or_default();
        let s = |v: Option<&Json>| v.and_then(Json::as_str).unwrap_or_default().to_owned();
        texts.push(match kind {
            "text" => s(item.get("text")),
            "resource" => match item.get("resource").and_then(|r| r.get("text")) {
                Some(t) => s(Some(t)),
                None => format!("[resource {}]", s(item.get("resource").and_then(|r| r.get("uri")))),
            },
            "resource_link" => format!("[resource {}]", s(item.get("uri"))),
            other => format!("[{other} {}]", s(item.get("mimeType"))),
        });
    }
    let mut text = texts.join("\n");
    if items.is_empty() {
        if let Some(structured) = result.get("structuredContent") {
            text = structured.to_string();
        }
    }
    if result.get("isError").and_then(Json::as_bool) == Some(true) {
        return Err(format!("Error: {text}"));
    }
    if text.len() > max {
        return Err(format!("Error: the tool's output is {} bytes, more than the {max} allowed", text.len()));
    }
    Ok(text)
}

/// `work`, or [`Failure::Late`] once `ms` have passed.
async fn bounded<T>(t: &dyn Transport, ms: u64, work: impl std::future::Future<Output = Exchange<T>>) -> Exchange<T> {
    let work = std::pin::pin!(work);
    match select(work, t.sleep(ms)).await {
        Either::Left((done, _)) => done,
        Either::Right(_) => Err(Failure::Late(ms)),
    }
}

impl McpServers {
    fn client<'a>(&'a self, cfg: &'a McpServerConfig, peer: &'a Peer<'a>) -> Client<'a> {
        Client { cfg, peer, ids: &self.last_id }
    }

    fn link(&self, name: &str) -> Option<Link> {
        match self.kept.borrow().get(name) {
            Some(Kept::Listed { link, .. }) => Some(link.clone()),
            _ => None,
        }
    }

    /// The tools of `servers` a turn offers: each server's list as kept, or listed now (all
    /// servers one after the other, each within its `timeoutMs`). A server that cannot list is left out,
    /// with a warning.
    pub fn offer<'b>(&'b self, servers: &'b [McpServerConfig], peer: &'b Peer<'b>) -> BoxFuture<'b, Offered> {
        Box::pin(self.offering(servers, peer))
    }

    async fn offering(&self, servers: &[McpServerConfig], peer: &Peer<'_>) -> Offered {
        // One server after the other: what a kept list costs is nothing, and running them at
        // once (`join_all`) would cost the wasm 5 KB.
        let mut tools = Vec::new();
        for (server, cfg) in servers.iter().enumerate() {
            for l in self.tools_of(cfg, peer).await {
                tools.push(RemoteTool { server, tool: l.tool, spec: l.spec });
            }
        }
        Offered { tools }
    }

    async fn tools_of(&self, cfg: &McpServerConfig, peer: &Peer<'_>) -> Vec<Listed> {
        let kept = self.kept.borrow().get(&cfg.name).cloned();
        match kept {
            Some(Kept::Listed { tools, at, .. }) if peer.now_ms - at < LIST_TTL_MS => return tools,
            Some(Kept::Failed { at }) if peer.now_ms - at < RETRY_MS => return Vec::new(),
            _ => {}
        }
        let client = self.client(cfg, peer);
        let listed = bounded(peer.transport, cfg.timeout_ms, async {
            let link = client.linked(self.link(&cfg.name)).await?;
            match client.list(&link).await {
                Err(Failure::Expired) => {
                    let link = client.connect().await?;
                    Ok((client.list(&link).await?, link))
                }
                other => Ok((other?, link)),
            }
        })
        .await;
        let at = peer.now_ms;
        match listed {
            Ok((tools, link)) => {
                self.kept.borrow_mut().insert(cfg.name.clone(), Kept::Listed { link, tools: tools.clone(), at });
                tools
            }
            Err(f) => {
                peer.events.warn(&format!("MCP server {}: its tools are not offered: {f}", cfg.name));
                self.kept.borrow_mut().insert(cfg.name.clone(), Kept::Failed { at });
                Vec::new()
            }
        }
    }

    /// Calls `tool` (one `servers` offered) with `input`, within the server's `timeoutMs`: the
    /// output the model reads, or the text of the tool error it reads instead.
    pub fn call<'b>(
        &'b self,
        servers: &'b [McpServerConfig],
        tool: &'b RemoteTool,
        input: &'b Json,
        peer: &'b Peer<'b>,
    ) -> BoxFuture<'b, std::result::Result<String, String>> {
        Box::pin(self.calling(servers, tool, input, peer))
    }

    async fn calling(
        &self,
        servers: &[McpServerConfig],
        tool: &RemoteTool,
        input: &Json,
        peer: &Peer<'_>,
    ) -> std::result::Result<String, String> {
        let Some(cfg) = servers.get(tool.server) else {
            return Err(format!("Error: there is no tool named {:?}", tool.spec.name));
        };
        let client = self.client(cfg, peer);
        let params = format!(r#"{{"name":{},"arguments":{input}}}"#, Json::from(tool.tool.as_str()));
        let limit = cfg.max_output_bytes.saturating_mul(4).saturating_add(ENVELOPE_BYTES);
        let called = bounded(peer.transport, cfg.timeout_ms, async {
            let link = client.linked(self.link(&cfg.name)).await?;
            match client.rpc(&link, "tools/call", &params, limit).await {
                Err(Failure::Expired) => {
                    let link = client.connect().await?;
                    if let Some(Kept::Listed { link: kept, .. }) = self.kept.borrow_mut().get_mut(&cfg.name) {
                        *kept = link.clone();
                    }
                    client.rpc(&link, "tools/call", &params, limit).await
                }
                other => other,
            }
        })
        .await;
        match called {
            Ok(result) => output(&result, cfg.max_output_bytes),
            Err(Failure::TooLarge(_)) => {
                Err(format!("Error: the tool's output is more than the {} bytes allowed", cfg.max_output_bytes))
            }
            Err(f) => Err(format!("Error: MCP server {}: {f}", cfg.name)),
        }
    }
}
