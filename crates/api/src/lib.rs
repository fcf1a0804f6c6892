//! The Durable Object's HTTP contract (`docs/openapi.yaml`) as plain functions: a [`Request`]
//! and an [`Env`] in, a [`Response`] out. Runtime independent, so every route is tested
//! natively; the Workers layer only converts requests and responses.
//!
//! Each handler parses its request, calls one operation of the core and answers. One file per
//! resource: [`sessions`], [`messages`], [`search`], [`compactions`] (overlays, the originals
//! behind one, and `POST …/compact`), [`context`] (blocks, prompt, tools), [`chat`] (the agent
//! turn), [`memories`], [`spaces`] (a memory space's own routes, an agent's choice of space), [`schedules`] (scheduled turns and their runs), [`mcp`] (the tools as an MCP server), [`tokens`] (revocation),
//! [`transfer`] (export, import, erase, split), [`directory`] (the usage ledger's route, the directory shards' API and what the front door's `/directory` routes need). [`routes`] is the table of every route, with the
//! handler ([`call`]) of each method; [`access`] says what a scoped token may do; [`ws`] maps
//! WebSocket frames onto routes; [`socket_tags`] is what a socket is accepted with; [`front`]
//! is what the front door Worker decides before a request reaches an agent; [`running`] keeps
//! the flags a socket's `cancel` frame sets.

pub mod access;
pub mod call;
pub mod chat;
pub mod compactions;
pub mod context;
pub mod directory;
pub mod front;
pub mod http;
pub mod mcp;
pub mod memories;
pub mod messages;
pub mod routes;
pub mod running;
pub mod schedules;
pub mod search;
pub mod sessions;
pub mod socket_tags;
pub mod spaces;
pub mod tokens;
pub mod transfer;
pub mod ui_stream;
pub mod ws;

pub use http::{Request, Response};

use access::{claims_of, permit, Claims};
use call::{Call, Params};
use http::{decode_segment, message_param, method_not_allowed, session_param, Method, Query};
use routes::{router, Body, Names, Route};
use session_agent_core::access::{revoked_before, Reach};
use session_agent_core::after::{self, After};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::config::check_label;
use session_agent_core::env::Env;
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::Role;
use session_agent_core::live::stop::Stop;
use session_agent_core::session::Session;

/// A request matched to its route: the row, the decoded path parameters.
struct Matched {
    route: &'static Route,
    params: Params,
}

/// The route of `req`'s path and its path parameters (decoded and checked); `not_found` for a
/// path no route has.
fn matched(role: Role, path: &str) -> Result<Matched> {
    let m = router(role).at(path).map_err(|_| Error::not_found(format!("no route for {path}")))?;
    let route: &'static Route = m.value;
    let get = |key: &str, decode: &dyn Fn(&str) -> Result<String>| -> Result<String> {
        m.params.get(key).map(decode).transpose().map(Option::unwrap_or_default)
    };
    let mut params = Params {
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
        chat: get("chatId", &|raw| decode_segment("chat id", raw))?,
        schedule: get("schedule", &|raw| checked("schedule id", raw))?,
    };
    match route.names {
        Names::Session(sid) => params.sid = sid.to_owned(),
        Names::Message(mid) => params.mid = mid.to_owned(),
        Names::Nothing => {}
    }
    Ok(Matched { route, params })
}

/// A path segment decoded and checked as an id (1–256 characters, no control characters).
fn checked(what: &str, raw: &str) -> Result<String> {
    let id = decode_segment(what, raw)?;
    session_agent_core::store::message::check_id(what, &id)?;
    Ok(id)
}

/// The session id of a `/sessions/{sid}/…` request, decoded and checked.
pub(crate) fn session_of(req: &Request) -> Result<String> {
    let m = matched(Role::Agent, &req.path)?;
    match m.params.sid.is_empty() {
        true => Err(Error::not_found(format!("no session in {}", req.path))),
        false => Ok(m.params.sid),
    }
}

/// The route template a DO path matches (`/sessions/{sid}/messages`), for logs that must not
/// carry ids; `None` when no route matches.
pub fn route_template(path: &str) -> Option<&'static str> {
    template(Role::Agent, path)
}

/// The route template a path of a Durable Object of `role` matches (see [`route_template`]).
pub fn template(role: Role, path: &str) -> Option<&'static str> {
    Some(router(role).at(path).ok()?.value.path)
}

/// Whether `req` is the agent's export (`GET /export`), which the Durable Object streams.
pub fn is_agent_export(req: &Request) -> bool {
    req.method == Method::Get && route_template(&req.path) == Some("/export")
}

/// Whether `claims` allow `method` on DO path `path` (see `access::permit`), as the front
/// door asks before forwarding. An unknown path is allowed here (and answered `404` by the
/// Durable Object).
pub fn permits(claims: &Claims, method: Method, path: &str) -> Result<()> {
    let Ok(m) = matched(claims.role(), path) else { return Ok(()) };
    let who = m.route.who(method);
    let sid = (!m.params.sid.is_empty()).then_some(m.params.sid.as_str());
    permit(claims, who, sid, m.route.needs(method))
}

/// Refuses a request whose token (the claims the front door passed) is expired, revoked, for
/// another agent, or outside its sessions or scope, and answers the environment the request
/// runs in: `env` reaching only the token's sessions when it is limited to some. Every way into
/// the agent runs this first.
pub fn admit<'a>(env: &Env<'a>, req: &Request) -> Result<Env<'a>> {
    let Some(claims) = claims_of(req)? else { return Ok(env.reaching(Reach::All)) };
    let now_ms = env.now.ms();
    claims.valid_for(env.agent, env.role, now_ms, revoked_before(env.sql)?)?;
    permits(&claims, req.method, &req.path)?;
    Ok(env.reaching(claims.reach()))
}

/// The dialect of `req` when it is an agent turn answered with server-sent events (`Accept:
/// text/event-stream`, or the AI SDK's `useChat` body): the Durable Object streams those itself
/// with [`stream_chat`].
pub fn chat_stream(req: &Request) -> Option<chat::Dialect> {
    let route = route_template(&req.path);
    let chat = req.method == Method::Post && matches!(route, Some("/sessions/{sid}/chat" | "/chat"));
    chat.then(|| chat::Dialect::of(req)).flatten()
}

/// Whether `req` is the AI SDK's resume request (`GET …/chat/{chatId}/stream`), which the
/// Durable Object streams with [`resume`].
pub fn is_resume(req: &Request) -> bool {
    let route = route_template(&req.path);
    req.method == Method::Get && matches!(route, Some("/sessions/{sid}/chat/{chatId}/stream" | "/chat/{chatId}/stream"))
}

/// The resume request (see [`is_resume`]) after admitting it: the session's running turn to
/// stream, or `None` (`204`) when none runs.
pub fn resume(env: &Env<'_>, req: &Request) -> Result<Option<chat::Resume>> {
    let env = admit(env, req)?;
    let sid = chat::resumed_session(req, &matched(Role::Agent, &req.path)?.params)?;
    Ok(env.live.follow(&sid).map(chat::Resume::new))
}

/// Runs a streamed turn (see [`chat_stream`]) after admitting it, handing each event to `send`
/// (see `chat::stream`; `gone` is set when the client went away); answers the work left for
/// after the stream ends.
///
/// The futures this crate hands the Workers layer are boxed here, so the code of every future
/// below them is made once, in this crate (a future awaited in another crate would be compiled
/// there too: the same turn twice in the wasm).
pub fn stream_chat<'a>(
    env: &'a Env<'a>,
    req: &'a Request,
    dialect: chat::Dialect,
    gone: &'a Stop,
    send: &'a mut dyn FnMut(chat::Streamed) -> Result<()>,
) -> BoxFuture<'a, Vec<After>> {
    Box::pin(async move {
        let session = |req: &Request| match route_template(&req.path) {
            Some("/chat") => chat::named_session(req),
            _ => session_of(req),
        };
        let admitted = admit(env, req).and_then(|env| Ok((env, session(req)?)));
        match admitted {
            Ok((env, sid)) => chat::stream(&Session::new(&env, &sid), req, dialect, gone, send).await,
            Err(e) => {
                let _ = send(chat::Streamed::Fail(e));
                vec![After::Sweep]
            }
        }
    })
}

/// The session of a WebSocket upgrade request (`GET /sessions/{sid}/ws`), if it is one.
pub fn socket_session(method: &str, path: &str) -> Option<Result<String>> {
    if method != "GET" || route_template(path) != Some("/sessions/{sid}/ws") {
        return None;
    }
    Some(matched(Role::Agent, path).map(|m| m.params.sid))
}

/// Answers one request. Never panics on input; every failure is a JSON error answer. (Boxed
/// here: see [`stream_chat`].)
pub fn handle<'a>(env: &'a Env<'a>, req: &'a Request) -> BoxFuture<'a, Response> {
    Box::pin(async move {
        let env = match admit(env, req) {
            Ok(env) => env,
            Err(e) => return Response::error(&e),
        };
        let mut resp = dispatch(&env, req).await.unwrap_or_else(|e| Response::error(&e));
        if req.method != Method::Get {
            // Objects a write left unreferenced go after the answer, and, with embeddings, the
            // vectors of what it stored (and of what waits since a failure), last.
            resp.after.insert(0, After::Sweep);
            if env.embeddings.is_on() {
                resp.after.push(After::Embed);
            }
        }
        resp
    })
}

/// Runs the work answers leave for after they are sent (`Response::after`, `ws::Handled::after`):
/// the Workers layer calls it once the answer is out; failures are logged, never answered.
/// (Boxed here: see [`stream_chat`].)
pub fn after<'a>(env: &'a Env<'a>, work: &'a [After]) -> BoxFuture<'a, ()> {
    Box::pin(after::run(env, work))
}

async fn dispatch(env: &Env<'_>, req: &Request) -> Result<Response> {
    // Every route refuses a query that is not UTF-8, whether it reads the query or not.
    http::parse_query(&req.query)?;
    let Matched { route, params } = matched(env.role, &req.path)?;
    let Some(op) = route.op(req.method) else { return Ok(method_not_allowed(&route.methods())) };
    if op.body == Body::Unread {
        req.json_object()?;
    }
    let call = Call { env, req, params, query: Query::parse(&req.query, op.query)? };
    op.handler.run(&call).await
}
