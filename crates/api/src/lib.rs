//! The Durable Object's HTTP contract (`docs/openapi.yaml`) as plain functions: a [`Request`]
//! and an [`Env`] in, a [`Response`] out. Runtime independent, so every route is tested
//! natively; the Workers layer only converts requests and responses.
//!
//! Each handler parses its request, calls one operation of the core and answers. One file per
//! resource: [`sessions`], [`messages`], [`search`], [`compactions`] (overlays, the originals
//! behind one, and `POST …/compact`), [`context`] (blocks, prompt, tools), [`chat`] (the agent
//! turn), [`ws`] (WebSocket frames mapped onto routes), [`mcp`] (the tools as an MCP server),
//! [`access`] and [`tokens`] (scoped tokens), [`transfer`] (export, import, erase, split). The routes are data (`ROUTES`): the
//! methods each path allows, and with them every `405`, come from that table.

pub mod access;
pub mod chat;
pub mod compactions;
pub mod context;
pub mod http;
pub mod mcp;
pub mod memories;
pub mod messages;
pub mod search;
pub mod sessions;
pub mod socket_tags;
pub mod tokens;
pub mod transfer;
pub mod ui_stream;
pub mod ws;

use std::sync::OnceLock;

pub use http::{Request, Response};

use http::{decode_segment, message_param, method_not_allowed, session_param};
use session_agent_core::access::{revoked_before, Reach};
use session_agent_core::after::{self, After};
use session_agent_core::config::check_label;
use session_agent_core::env::Env;
use session_agent_core::error::{Error, Result};
use session_agent_core::session::Session;

/// What a path stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    Entries,
    Entry,
    Prompt,
    PromptRefresh,
    Tools,
    Tool,
    Chat,
    Socket,
    Memories,
    MemoryBatch,
    MemorySearch,
    Memory,
    MemoryHistory,
    Extract,
    Revoke,
    Erase,
    Export,
    Import,
    SessionExport,
    SessionImport,
    Split,
    Mcp,
}

impl Route {
    /// Routes only the admin token (or a Worker binding) may use.
    fn admin_only(self) -> bool {
        matches!(self, Revoke | Erase | Export | Import)
    }
}

use Route::*;

/// Every path of the DO API and the methods it allows (`405` with that `Allow` otherwise).
const ROUTES: &[(&str, Route, &[&str])] = &[
    ("/sessions", Sessions, &["GET", "POST"]),
    ("/sessions/{sid}", Session, &["GET", "PATCH", "DELETE"]),
    ("/sessions/{sid}/fork", Fork, &["POST"]),
    ("/sessions/{sid}/usage", Usage, &["POST"]),
    ("/search", Search, &["GET"]),
    ("/sessions/{sid}/messages", Messages, &["POST", "DELETE"]),
    // A message may be called "batch": GET, PUT and DELETE reach it as a message.
    ("/sessions/{sid}/messages/batch", Batch, &["GET", "POST", "PUT", "DELETE"]),
    ("/sessions/{sid}/messages/{mid}", Message, &["GET", "PUT", "DELETE"]),
    ("/sessions/{sid}/messages/{mid}/branches", Branches, &["GET"]),
    ("/sessions/{sid}/history", History, &["GET"]),
    ("/sessions/{sid}/history/recent", Recent, &["GET"]),
    ("/sessions/{sid}/leaf", Leaf, &["GET"]),
    ("/sessions/{sid}/path-length", PathLength, &["GET"]),
    ("/sessions/{sid}/search", SessionSearch, &["GET"]),
    ("/sessions/{sid}/compactions", Compactions, &["GET", "POST"]),
    ("/sessions/{sid}/compactions/{cid}/messages", Expand, &["GET"]),
    ("/sessions/{sid}/compact", Compact, &["POST"]),
    ("/sessions/{sid}/context", Context, &["GET", "POST"]),
    ("/sessions/{sid}/context/{label}", Block, &["GET", "PUT", "DELETE"]),
    ("/sessions/{sid}/context/{label}/append", BlockAppend, &["POST"]),
    ("/sessions/{sid}/context/{label}/entries", Entries, &["GET", "POST"]),
    ("/sessions/{sid}/context/{label}/entries/{key}", Entry, &["GET", "DELETE"]),
    ("/sessions/{sid}/prompt", Prompt, &["GET"]),
    ("/sessions/{sid}/prompt/refresh", PromptRefresh, &["POST"]),
    ("/sessions/{sid}/tools", Tools, &["GET"]),
    ("/sessions/{sid}/tools/{name}", Tool, &["POST"]),
    ("/sessions/{sid}/chat", Chat, &["POST"]),
    ("/sessions/{sid}/ws", Socket, &["GET"]),
    ("/sessions/{sid}/memories/extract", Extract, &["POST"]),
    ("/memories", Memories, &["GET", "POST", "DELETE"]),
    ("/memories/search", MemorySearch, &["GET"]),
    // A memory id is never "batch" (ids are mem_…), so only POST is routed here.
    ("/memories/batch", MemoryBatch, &["POST"]),
    ("/memories/{memory}", Memory, &["GET", "PATCH", "DELETE"]),
    ("/memories/{memory}/history", MemoryHistory, &["GET"]),
    ("/tokens/revoke", Revoke, &["POST"]),
    ("/", Erase, &["DELETE"]),
    ("/export", Export, &["GET"]),
    ("/import", Import, &["POST"]),
    // A session may be called "import": GET, PATCH and DELETE reach it as a session.
    ("/sessions/import", SessionImport, &["GET", "POST", "PATCH", "DELETE"]),
    ("/sessions/{sid}/export", SessionExport, &["GET"]),
    ("/sessions/{sid}/split", Split, &["POST"]),
    ("/sessions/{sid}/mcp", Mcp, &["POST"]),
];

fn router() -> &'static matchit::Router<(Route, &'static [&'static str])> {
    static ROUTER: OnceLock<matchit::Router<(Route, &'static [&'static str])>> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let mut r = matchit::Router::new();
        for &(path, route, methods) in ROUTES {
            // The table above is static and conflict-free; a clash is a bug caught by tests.
            if let Err(e) = r.insert(path, (route, methods)) {
                panic!("route table: {path}: {e}");
            }
        }
        r
    })
}

/// The session id of a `/sessions/{sid}/…` request, decoded and checked.
pub fn session_of(req: &Request) -> Result<String> {
    let matched = router().at(&req.path).map_err(|_| Error::not_found(format!("no route for {}", req.path)))?;
    let raw = matched.params.get("sid").ok_or_else(|| Error::not_found(format!("no session in {}", req.path)))?;
    session_param(raw)
}

/// The route template a DO path matches (`/sessions/{sid}/messages`), for logs that must not
/// carry ids; `None` when no route matches.
pub fn route_template(path: &str) -> Option<&'static str> {
    let route = router().at(path).ok()?.value.0;
    ROUTES.iter().find(|r| r.1 == route).map(|r| r.0)
}

/// Whether `req` is the agent's export (`GET /export`), which the Durable Object streams.
pub fn is_agent_export(req: &Request) -> bool {
    req.method == "GET" && router().at(&req.path).is_ok_and(|m| m.value.0 == Export)
}

/// Refuses a request whose token (the claims the front door passed) is expired, revoked, for
/// another agent, or outside its sessions or scope, and answers the environment the request
/// runs in: `env` reaching only the token's sessions when it is limited to some. Every way into
/// the agent runs this first.
pub fn admit<'a>(env: &Env<'a>, req: &Request) -> Result<Env<'a>> {
    let claims = access::check(req, env.agent, &env.now, || revoked_before(env.sql))?;
    Ok(env.reaching(claims.map_or(Reach::All, |c| c.reach())))
}

/// The dialect of `req` when it is an agent turn answered with server-sent events (`Accept:
/// text/event-stream`, or the AI SDK's `useChat` body): the Durable Object streams those itself
/// with [`chat::stream`].
pub fn chat_stream(req: &Request) -> Option<chat::Dialect> {
    let chat = req.method == "POST" && router().at(&req.path).is_ok_and(|m| m.value.0 == Chat);
    chat.then(|| chat::Dialect::of(req)).flatten()
}

/// The session of a WebSocket upgrade request (`GET /sessions/{sid}/ws`), if it is one.
pub fn socket_session(method: &str, path: &str) -> Option<Result<String>> {
    let matched = router().at(path).ok()?;
    if matched.value.0 != Socket || method != "GET" {
        return None;
    }
    Some(matched.params.get("sid").map_or_else(|| Err(Error::not_found("no session")), session_param))
}

/// Answers one request. Never panics on input; every failure is a JSON error answer.
pub async fn handle(env: &Env<'_>, req: &Request) -> Response {
    let env = match admit(env, req) {
        Ok(env) => env,
        Err(e) => return Response::error(&e),
    };
    let mut resp = dispatch(&env, req).await.unwrap_or_else(|e| Response::error(&e));
    if req.method != "GET" {
        // Objects a write left unreferenced go after the answer.
        resp.after.insert(0, After::Sweep);
    }
    resp
}

/// Runs the work answers leave for after they are sent (`Response::after`, `ws::Answer::after`):
/// the Workers layer calls it once the answer is out; failures are logged, never answered.
pub async fn after(env: &Env<'_>, work: &[After]) {
    after::run(env, work).await;
}

/// The decoded path parameters of a request.
#[derive(Default)]
struct Params {
    sid: String,
    mid: String,
    label: String,
    name: String,
    cid: String,
    memory: String,
    key: String,
}

impl Params {
    fn of(params: &matchit::Params) -> Result<Params> {
        let get = |key: &str, decode: &dyn Fn(&str) -> Result<String>| -> Result<String> {
            params.get(key).map(decode).transpose().map(Option::unwrap_or_default)
        };
        Ok(Params {
            sid: get("sid", &session_param)?,
            mid: get("mid", &message_param)?,
            label: get("label", &|raw| {
                let label = decode_segment("block label", raw)?;
                check_label(&label)?;
                Ok(label)
            })?,
            name: get("name", &|raw| decode_segment("tool name", raw))?,
            cid: get("cid", &|raw| decode_segment("compaction id", raw))?,
            memory: get("memory", &|raw| checked("memory id", raw))?,
            key: get("key", &|raw| checked("entry key", raw))?,
        })
    }
}

/// A path segment decoded and checked as an id (1–256 characters, no control characters).
fn checked(what: &str, raw: &str) -> Result<String> {
    let id = decode_segment(what, raw)?;
    session_agent_core::store::message::check_id(what, &id)?;
    Ok(id)
}

async fn dispatch(env: &Env<'_>, req: &Request) -> Result<Response> {
    // Every route refuses a query that is not UTF-8, whether it reads the query or not.
    http::parse_query(&req.query)?;
    let matched = router().at(&req.path).map_err(|_| Error::not_found(format!("no route for {}", req.path)))?;
    let (route, methods) = *matched.value;
    let p = Params::of(&matched.params)?;
    let m = req.method.as_str();
    if !methods.contains(&m) {
        return Ok(method_not_allowed(methods));
    }
    // Routes that read no body still refuse one that is not a JSON object, as every other does.
    if m == "DELETE" || route == PromptRefresh {
        req.json_object()?;
    }
    let s = Session::new(env, &p.sid);
    match (route, m) {
        (Sessions, "GET") => sessions::list(env),
        (Sessions, _) => sessions::create(env, req),
        (Session, "GET") => sessions::get(&s),
        (Session, "PATCH") => sessions::rename(&s, req),
        (Session, _) => sessions::delete(&s).await,
        (Fork, _) => sessions::fork(&s, req),
        (Usage, _) => sessions::usage(&s, req),
        (Search, _) => search::across(env, req).await,
        (Messages, "POST") => messages::append(&s, req).await,
        (Messages, _) => messages::clear(&s).await,
        (Batch, "POST") => messages::batch(&s, req).await,
        (Batch, _) => message(&s, "batch", req).await,
        (Message, _) => message(&s, &p.mid, req).await,
        (Branches, _) => messages::branches(&s, req, &p.mid).await,
        (History, _) => messages::history(&s, req).await,
        (Recent, _) => messages::recent(&s, req).await,
        (Leaf, _) => messages::leaf(&s).await,
        (PathLength, _) => messages::path_length(&s, req),
        (SessionSearch, _) => search::in_session(&s, req).await,
        (Compactions, "GET") => compactions::list(&s),
        (Compactions, _) => compactions::add(&s, req),
        (Expand, _) => compactions::messages(&s, &p.cid, req).await,
        (Compact, _) => compactions::compact(&s, req).await,
        (Context, "GET") => context::list(&s).await,
        (Context, _) => context::add(&s, req).await,
        (Block, "GET") => context::get(&s, &p.label).await,
        (Block, "PUT") => context::replace(&s, &p.label, req).await,
        (Block, _) => context::remove(&s, &p.label),
        (BlockAppend, _) => context::append(&s, &p.label, req).await,
        (Entries, "GET") => context::entries(&s, &p.label, req),
        (Entries, _) => context::ingest(&s, &p.label, req),
        (Entry, "GET") => context::entry(&s, &p.label, &p.key),
        (Entry, _) => context::delete_entry(&s, &p.label, &p.key),
        (Prompt, _) => context::prompt(&s).await,
        (PromptRefresh, _) => context::refresh(&s).await,
        (Tools, _) => context::tools(&s),
        (Tool, _) => context::run_tool(&s, &p.name, req).await,
        (Chat, _) => chat::route(&s, req).await,
        (Memories, "GET") => memories::list(env, req),
        (Memories, "POST") => memories::create(env, req).await,
        (Memories, _) => memories::delete_all(env, req),
        (MemorySearch, _) => memories::search(env, req).await,
        (MemoryBatch, _) => memories::create_all(env, req).await,
        (Memory, "GET") => memories::get(env, &p.memory),
        (Memory, "PATCH") => memories::patch(env, &p.memory, req).await,
        (Memory, _) => memories::delete(env, &p.memory),
        (MemoryHistory, _) => memories::history(env, &p.memory),
        (Extract, _) => memories::extract(&s, req).await,
        (Revoke, _) => tokens::revoke(env, req),
        (Erase, _) => transfer::erase(env, req).await,
        (Export, _) => transfer::export_agent(env).await,
        (Import, _) => transfer::import_agent(env, req).await,
        (SessionImport, "POST") => transfer::import_session(env, req).await,
        (SessionImport, m) => {
            let s = Session::new(env, "import");
            match m {
                "GET" => sessions::get(&s),
                "PATCH" => sessions::rename(&s, req),
                _ => sessions::delete(&s).await,
            }
        }
        (SessionExport, _) => transfer::export_session(&s).await,
        (Split, _) => transfer::split(&s, req).await,
        (Mcp, _) => mcp::handle(&s, req).await,
        // The Durable Object answers upgrades itself; anything else here is not one.
        (Socket, _) => Err(Error::invalid("expected a WebSocket upgrade (Upgrade: websocket)")),
    }
}

async fn message(s: &Session<'_>, mid: &str, req: &Request) -> Result<Response> {
    match req.method.as_str() {
        "GET" => messages::get(s, mid).await,
        "PUT" => messages::update(s, mid, req).await,
        _ => messages::delete(s, mid).await,
    }
}
