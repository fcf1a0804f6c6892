//! The Durable Object's HTTP contract (`docs/openapi.yaml`) as plain functions: a [`Request`]
//! and a SQL database in, a [`Response`] out. Runtime independent, so every route is tested
//! natively; the Workers layer only converts requests and responses.
//!
//! One file per resource: [`sessions`], [`messages`], [`search`], [`compactions`] (stored
//! overlays), [`compact`] (the summarizer), [`context`] (blocks, prompt, tools).

pub mod chat;
pub mod compact;
pub mod compactions;
pub mod context;
pub mod events;
pub mod http;
pub mod messages;
pub mod search;
pub mod sessions;
pub mod ws;

use std::sync::OnceLock;

pub use http::{Request, Response};

use crate::core::blobs::Blobs;
use crate::core::config::{check_label, SessionConfig};
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::llm::{LlmConfig, Transport};
use crate::core::sql::Sql;
use crate::core::store::schema;
use crate::core::store::spill;
use crate::core::time::iso_millis;
use events::Events;
use http::{decode_segment, message_param, method_not_allowed, session_param};

/// A block label from the path, decoded and checked.
fn label_param(raw: &str) -> Result<String> {
    let label = decode_segment("block label", raw)?;
    check_label(&label)?;
    Ok(label)
}

/// What the Durable Object gives the API: its database, its object store, its configuration
/// and its name.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub sql: &'a dyn Sql,
    pub blobs: &'a dyn Blobs,
    pub config: &'a SessionConfig,
    /// The agent's name (`idFromName`), under which its own skills are kept.
    pub agent: &'a str,
    /// The configured model (compaction's summarizer) and how to reach it.
    pub llm: &'a LlmConfig,
    pub transport: &'a dyn Transport,
    /// The session's listeners (WebSocket clients).
    pub events: &'a dyn Events,
}

/// What every handler gets: the [`Env`] and the time of this request.
pub struct Ctx<'a> {
    pub sql: &'a dyn Sql,
    pub blobs: &'a dyn Blobs,
    pub config: &'a SessionConfig,
    pub agent: &'a str,
    pub llm: &'a LlmConfig,
    pub transport: &'a dyn Transport,
    pub events: &'a dyn Events,
    /// The request's timestamp (ISO-8601 ms), used for every write it makes.
    pub now: String,
}

#[derive(Clone, Copy, Debug)]
enum Route {
    Sessions,
    Session,
    Fork,
    Usage,
    Search,
    Messages,
    Batch,
    Message,
    Branches,
    History,
    Recent,
    Leaf,
    PathLength,
    SessionSearch,
    Compactions,
    Expand,
    Compact,
    Context,
    Block,
    BlockAppend,
    Prompt,
    PromptRefresh,
    Tools,
    Tool,
    Chat,
    Socket,
}

const ROUTES: &[(&str, Route)] = &[
    ("/sessions", Route::Sessions),
    ("/sessions/{sid}", Route::Session),
    ("/sessions/{sid}/fork", Route::Fork),
    ("/sessions/{sid}/usage", Route::Usage),
    ("/search", Route::Search),
    ("/sessions/{sid}/messages", Route::Messages),
    ("/sessions/{sid}/messages/batch", Route::Batch),
    ("/sessions/{sid}/messages/{mid}", Route::Message),
    ("/sessions/{sid}/messages/{mid}/branches", Route::Branches),
    ("/sessions/{sid}/history", Route::History),
    ("/sessions/{sid}/history/recent", Route::Recent),
    ("/sessions/{sid}/leaf", Route::Leaf),
    ("/sessions/{sid}/path-length", Route::PathLength),
    ("/sessions/{sid}/search", Route::SessionSearch),
    ("/sessions/{sid}/compactions", Route::Compactions),
    ("/sessions/{sid}/compactions/{cid}/messages", Route::Expand),
    ("/sessions/{sid}/compact", Route::Compact),
    ("/sessions/{sid}/context", Route::Context),
    ("/sessions/{sid}/context/{label}", Route::Block),
    ("/sessions/{sid}/context/{label}/append", Route::BlockAppend),
    ("/sessions/{sid}/prompt", Route::Prompt),
    ("/sessions/{sid}/prompt/refresh", Route::PromptRefresh),
    ("/sessions/{sid}/tools", Route::Tools),
    ("/sessions/{sid}/tools/{name}", Route::Tool),
    ("/sessions/{sid}/chat", Route::Chat),
    ("/sessions/{sid}/ws", Route::Socket),
];

fn router() -> &'static matchit::Router<Route> {
    static ROUTER: OnceLock<matchit::Router<Route>> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let mut r = matchit::Router::new();
        for (path, route) in ROUTES {
            // The table above is static and conflict-free; a clash is a bug caught by tests.
            if let Err(e) = r.insert(*path, *route) {
                panic!("route table: {path}: {e}");
            }
        }
        r
    })
}

/// Brings the schema up to date; the Durable Object calls this once when it starts.
/// Also recovers from a crash mid-write: spilled objects of writes that never committed become
/// garbage for the next sweep.
pub fn open(sql: &dyn Sql, now_ms: i64) -> Result<Vec<i64>> {
    let applied = schema::migrate(sql, &iso_millis(now_ms))?;
    spill::recover(sql)?;
    Ok(applied)
}

/// The handler context of a request at `now_ms`.
fn context_of<'a>(env: Env<'a>, now_ms: i64) -> Ctx<'a> {
    Ctx {
        sql: env.sql,
        blobs: env.blobs,
        config: env.config,
        agent: env.agent,
        llm: env.llm,
        transport: env.transport,
        events: env.events,
        now: iso_millis(now_ms),
    }
}

/// The session id of a `/sessions/{sid}/…` request, decoded and checked.
pub fn session_of(req: &Request) -> Result<String> {
    let matched = router().at(&req.path).map_err(|_| Error::not_found(format!("no route for {}", req.path)))?;
    let raw = matched.params.get("sid").ok_or_else(|| Error::not_found(format!("no session in {}", req.path)))?;
    session_param(raw)
}

/// Whether `req` is an agent turn asking for server-sent events (the Durable Object streams
/// those itself with [`chat::stream`]).
pub fn is_chat_stream(req: &Request) -> bool {
    req.method == "POST"
        && req.wants_event_stream()
        && router().at(&req.path).is_ok_and(|m| matches!(m.value, Route::Chat))
}

/// The session of a WebSocket upgrade request (`GET /sessions/{sid}/ws`), if it is one.
pub fn socket_session(method: &str, path: &str) -> Option<Result<String>> {
    let matched = router().at(path).ok()?;
    if !matches!(matched.value, Route::Socket) || method != "GET" {
        return None;
    }
    Some(matched.params.get("sid").map_or_else(|| Err(Error::not_found("no session")), session_param))
}

/// Answers one request. Never panics on input; every failure is a JSON error answer.
pub async fn handle(env: Env<'_>, now_ms: i64, req: &Request) -> Response {
    let ctx = context_of(env, now_ms);
    let resp = dispatch(&ctx, req).await.unwrap_or_else(|e| Response::error(&e));
    if req.method == "GET" {
        return resp;
    }
    // After a write: delete spilled objects that lost their last reference.
    match spill::sweep(ctx.sql, ctx.blobs, SWEEP_BATCH).await {
        Ok((_, errors)) if errors.is_empty() => resp,
        Ok((_, errors)) => errors.into_iter().fold(resp, Response::warn),
        Err(e) => resp.warn(format!("spill sweep: {}", e.message)),
    }
}

/// Unreferenced spilled objects deleted after one write request, at most.
const SWEEP_BATCH: i64 = 100;

async fn dispatch(ctx: &Ctx<'_>, req: &Request) -> Result<Response> {
    // Every route refuses a query that is not UTF-8, whether it reads the query or not.
    http::parse_query(&req.query)?;
    let matched = router().at(&req.path).map_err(|_| Error::not_found(format!("no route for {}", req.path)))?;
    let sid = matched.params.get("sid").map(session_param).transpose()?;
    let mid = matched.params.get("mid").map(message_param).transpose()?;
    let label = matched.params.get("label").map(label_param).transpose()?;
    let name = matched.params.get("name").map(|n| decode_segment("tool name", n)).transpose()?;
    let cid = matched.params.get("cid").map(|c| decode_segment("compaction id", c)).transpose()?;
    let sid = sid.as_deref().unwrap_or_default();
    let mid = mid.as_deref().unwrap_or_default();
    let label = label.as_deref().unwrap_or_default();
    let name = name.as_deref().unwrap_or_default();
    let cid = cid.as_deref().unwrap_or_default();
    let m = req.method.as_str();
    use Route::*;
    // Routes that read no body still refuse one that is not a JSON object, as every other does.
    if m == "DELETE" || matches!(matched.value, PromptRefresh) {
        req.json_object()?;
    }
    match (matched.value, m) {
        (Sessions, "GET") => sessions::list(ctx),
        (Sessions, "POST") => sessions::create(ctx, req),
        (Sessions, _) => Ok(method_not_allowed(&["GET", "POST"])),
        (Session, "GET") => sessions::get(ctx, sid),
        (Session, "PATCH") => sessions::rename(ctx, sid, req),
        (Session, "DELETE") => sessions::delete(ctx, sid).await,
        (Session, _) => Ok(method_not_allowed(&["GET", "PATCH", "DELETE"])),
        (Fork, "POST") => sessions::fork(ctx, sid, req),
        (Usage, "POST") => sessions::usage(ctx, sid, req),
        (Search, "GET") => search::across(ctx, req),
        (Messages, "POST") => messages::append(ctx, sid, req).await,
        (Messages, "DELETE") => messages::clear(ctx, sid).await,
        (Messages, _) => Ok(method_not_allowed(&["POST", "DELETE"])),
        (Batch, "POST") => messages::batch(ctx, sid, req).await,
        // A message may be called "batch": its own methods reach it as a message.
        (Batch, "GET" | "PUT" | "DELETE") => message(ctx, sid, "batch", req).await,
        (Batch, _) => Ok(method_not_allowed(&["GET", "POST", "PUT", "DELETE"])),
        (Message, _) => message(ctx, sid, mid, req).await,
        (Branches, "GET") => messages::branches(ctx, sid, mid).await,
        (History, "GET") => messages::history(ctx, sid, req).await,
        (Recent, "GET") => messages::recent(ctx, sid, req).await,
        (Leaf, "GET") => messages::leaf(ctx, sid).await,
        (PathLength, "GET") => messages::path_length(ctx, sid, req),
        (SessionSearch, "GET") => search::in_session(ctx, sid, req),
        (Compactions, "GET") => compactions::list(ctx, sid),
        (Compactions, "POST") => compactions::add(ctx, sid, req),
        (Compactions, _) => Ok(method_not_allowed(&["GET", "POST"])),
        (Expand, "GET") => compactions::messages(ctx, sid, cid, req).await,
        (Compact, "POST") => compact::route(ctx, sid, req).await,
        (Context, "GET") => context::list(ctx, sid).await,
        (Context, "POST") => context::add(ctx, sid, req).await,
        (Context, _) => Ok(method_not_allowed(&["GET", "POST"])),
        (Block, "GET") => context::get(ctx, sid, label).await,
        (Block, "PUT") => context::write(ctx, sid, label, req, false).await,
        (Block, "DELETE") => context::remove(ctx, sid, label),
        (Block, _) => Ok(method_not_allowed(&["GET", "PUT", "DELETE"])),
        (BlockAppend, "POST") => context::write(ctx, sid, label, req, true).await,
        (Prompt, "GET") => context::prompt(ctx, sid).await,
        (PromptRefresh, "POST") => context::refresh(ctx, sid).await,
        (Tools, "GET") => context::list_tools(ctx, sid),
        (Tool, "POST") => context::run_tool(ctx, sid, name, req).await,
        (Chat, "POST") => chat::route(ctx, sid, req).await,
        // The Durable Object answers upgrades itself; anything else here is not one.
        (Socket, "GET") => {
            Err(Error::new(ErrorKind::InvalidRequest, "expected a WebSocket upgrade (Upgrade: websocket)"))
        }
        (Fork | Usage | BlockAppend | PromptRefresh | Tool | Compact | Chat, _) => Ok(method_not_allowed(&["POST"])),
        (
            Search | Branches | History | Recent | Leaf | PathLength | SessionSearch | Prompt | Tools | Expand | Socket,
            _,
        ) => Ok(method_not_allowed(&["GET"])),
    }
}

async fn message(ctx: &Ctx<'_>, sid: &str, mid: &str, req: &Request) -> Result<Response> {
    match req.method.as_str() {
        "GET" => messages::get(ctx, sid, mid).await,
        "PUT" => messages::update(ctx, sid, mid, req).await,
        "DELETE" => messages::delete(ctx, sid, mid).await,
        _ => Ok(method_not_allowed(&["GET", "PUT", "DELETE"])),
    }
}
