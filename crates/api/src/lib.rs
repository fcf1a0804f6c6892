//! The Durable Object's HTTP contract (`docs/openapi.yaml`) as plain functions: a [`Request`]
//! and an [`Env`] in, a [`Response`] out. Runtime independent, so every route is tested
//! natively; the Workers layer only converts requests and responses.
//!
//! Each handler parses its request, calls one operation of the core and answers. One file per
//! resource: [`sessions`], [`messages`], [`search`], [`compactions`] (overlays, the originals
//! behind one, and `POST …/compact`), [`context`] (blocks, prompt, tools), [`chat`] (the agent
//! turn), [`memories`], [`spaces`] (a memory space's own routes, an agent's choice of space), [`schedules`] (scheduled turns and their runs), [`mcp`] (the tools as an MCP server), [`tokens`] (revocation),
//! [`transfer`] (export, import, erase, split), [`directory`] (the usage ledger's route, the directory shards' API and what the front door's `/directory` routes need). [`routes`] is the table of every route, with the
//! handler ([`call`]) of each method and how it is answered (whole, a stream, an upgrade);
//! [`object`] is the Durable Object itself (its state and policy between requests; a request
//! is matched to its route and admitted once, by `enter`); [`access`] says what a scoped token may do; [`ws`] maps
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
pub mod object;
pub mod openai;
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
use routes::{router, Body, Delivery, Names, Op, Route};
use session_agent_core::access::{revoked_before, Reach};
use session_agent_core::after::{self, After};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::config::check_label;
use session_agent_core::env::Env;
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::Role;

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

/// The route template a DO path matches (`/sessions/{sid}/messages`), for logs that must not
/// carry ids; `None` when no route matches.
pub fn route_template(path: &str) -> Option<&'static str> {
    template(Role::Agent, path)
}

/// The route template a path of a Durable Object of `role` matches (see [`route_template`]).
pub fn template(role: Role, path: &str) -> Option<&'static str> {
    Some(router(role).at(path).ok()?.value.path)
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
/// another agent, or outside its sessions or scope (on `found`, its route: `None` when it has
/// none, allowed here and answered `404` after), and answers the environment the request runs
/// in: `env` reaching only the token's sessions when it is limited to some. Every way into the
/// agent runs this first ([`enter`]).
pub(crate) fn admit<'a>(env: &Env<'a>, req: &Request, found: Option<&Matched>) -> Result<Env<'a>> {
    let Some(claims) = claims_of(req)? else { return Ok(env.reaching(Reach::All)) };
    let now_ms = env.now.ms();
    claims.valid_for(env.agent, env.role, now_ms, revoked_before(env.sql)?)?;
    if let Some(m) = found {
        let sid = (!m.params.sid.is_empty()).then_some(m.params.sid.as_str());
        permit(&claims, m.route.who(req.method), sid, m.route.needs(req.method))?;
    }
    Ok(env.reaching(claims.reach()))
}

/// Whether `method` on `path` (a Durable Object path of an agent) is answered with a WebSocket
/// upgrade, as the route table says: the front door accepts a handshake there only.
pub fn upgrades(method: &str, path: &str) -> bool {
    let op = router(Role::Agent).at(path).ok().and_then(|m| m.value.op(Method::parse(method)));
    op.is_some_and(|op| op.delivery == Delivery::Upgrade)
}

/// One request on its way in: its route matched once, the request admitted once. (Taken apart
/// at once, never kept: the size of its largest variant costs nothing.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Entry<'a> {
    /// Refused before anything ran (its token): nothing to sweep after it.
    Refused(Response),
    /// Answered by the route table itself (a query that is not UTF-8, no route, no such
    /// method, a write whose body is not a JSON object).
    Answered(Response),
    /// Admitted to one operation of its route.
    Admitted { env: Env<'a>, op: &'static Op, params: Params, query: Query },
}

/// Matches `req` to its route and operation and admits it ([`admit`]): the one route match and
/// the one admission of a request, whatever its answer is (whole, a stream or an upgrade).
pub(crate) fn enter<'a>(env: &Env<'a>, req: &Request) -> Entry<'a> {
    let found = matched(env.role, &req.path);
    let env = match admit(env, req, found.as_ref().ok()) {
        Ok(env) => env,
        Err(e) => return Entry::Refused(Response::error(&e)),
    };
    let checked = (|| {
        // Every route refuses a query that is not UTF-8, whether it reads the query or not.
        http::parse_query(&req.query)?;
        let Matched { route, params } = found?;
        let Some(op) = route.op(req.method) else { return Ok(Err(method_not_allowed(&route.methods()))) };
        if op.body == Body::Unread {
            req.json_object()?;
        }
        Ok(Ok((op, params, Query::parse(&req.query, op.query)?)))
    })();
    match checked {
        Ok(Ok((op, params, query))) => Entry::Admitted { env, op, params, query },
        Ok(Err(resp)) => Entry::Answered(resp),
        Err(e) => Entry::Answered(Response::error(&e)),
    }
}

/// Answers one request whole: a stream is answered as one body, an upgrade refused (the
/// Durable Object answers those itself, through [`object::Object::fetch`]). Never panics on
/// input; every failure is a JSON error answer. Boxed here: the futures this crate hands the
/// Workers layer are boxed, so the code of every future below them is made once, in this crate
/// (a future awaited in another crate would be compiled there too: the same turn twice in the
/// wasm).
pub fn handle<'a>(env: &'a Env<'a>, req: &'a Request) -> BoxFuture<'a, Response> {
    Box::pin(async move {
        let resp = match enter(env, req) {
            Entry::Refused(resp) => resp,
            Entry::Answered(resp) => written(env, req, resp),
            Entry::Admitted { env: admitted, op, params, query } => {
                let call = Call { env: &admitted, req, params, query };
                let resp = op.handler.run(&call).await.unwrap_or_else(|e| Response::error(&e));
                written(env, req, resp)
            }
        };
        match openai::is_openai(&req.path) {
            true => openai::shaped(resp),
            false => resp,
        }
    })
}

/// `resp` with the work every write leaves: objects a write left unreferenced go after the
/// answer, and, with embeddings, the vectors of what it stored (and of what waits since a
/// failure), last.
pub(crate) fn written(env: &Env<'_>, req: &Request, mut resp: Response) -> Response {
    if req.method != Method::Get {
        resp.after.insert(0, After::Sweep);
        if env.embeddings.is_on() {
            resp.after.push(After::Embed);
        }
    }
    resp
}

/// Runs the work answers leave for after they are sent (`Response::after`, `ws::Answer::after`):
/// the Workers layer calls it once the answer is out; failures are logged, never answered.
/// (Boxed here: see [`handle`].)
pub fn after<'a>(env: &'a Env<'a>, work: &'a [After]) -> BoxFuture<'a, ()> {
    Box::pin(after::run(env, work))
}
