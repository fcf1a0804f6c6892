//! The Durable Object's HTTP contract (`../shared/API.md`) as plain functions: a [`Request`]
//! and a SQL database in, a [`Response`] out. Runtime independent, so every route is tested
//! natively; the Workers layer only converts requests and responses.
//!
//! One file per resource: [`sessions`], [`messages`], [`search`], [`compactions`].

pub mod compactions;
pub mod http;
pub mod messages;
pub mod search;
pub mod sessions;

use std::sync::OnceLock;

pub use http::{Request, Response};

use crate::core::error::{Error, Result};
use crate::core::schema;
use crate::core::sql::Sql;
use crate::core::time::iso_millis;
use http::{message_param, method_not_allowed, session_param};

/// What every handler gets: the database and the time of this request.
pub struct Ctx<'a> {
    pub sql: &'a dyn Sql,
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
pub fn open(sql: &dyn Sql, now_ms: i64) -> Result<Vec<i64>> {
    schema::migrate(sql, &iso_millis(now_ms))
}

/// Answers one request. Never panics on input; every failure is a JSON error answer.
pub fn handle(sql: &dyn Sql, now_ms: i64, req: &Request) -> Response {
    let ctx = Ctx { sql, now: iso_millis(now_ms) };
    dispatch(&ctx, req).unwrap_or_else(|e| Response::error(&e))
}

fn dispatch(ctx: &Ctx, req: &Request) -> Result<Response> {
    let matched = router()
        .at(&req.path)
        .map_err(|_| Error::not_found(format!("no route for {}", req.path)))?;
    let sid = matched.params.get("sid").map(session_param).transpose()?;
    let mid = matched.params.get("mid").map(message_param).transpose()?;
    let sid = sid.as_deref().unwrap_or_default();
    let mid = mid.as_deref().unwrap_or_default();
    let m = req.method.as_str();
    use Route::*;
    match (matched.value, m) {
        (Sessions, "GET") => sessions::list(ctx),
        (Sessions, "POST") => sessions::create(ctx, req),
        (Sessions, _) => Ok(method_not_allowed(&["GET", "POST"])),
        (Session, "GET") => sessions::get(ctx, sid),
        (Session, "PATCH") => sessions::rename(ctx, sid, req),
        (Session, "DELETE") => sessions::delete(ctx, sid),
        (Session, _) => Ok(method_not_allowed(&["GET", "PATCH", "DELETE"])),
        (Fork, "POST") => sessions::fork(ctx, sid, req),
        (Usage, "POST") => sessions::usage(ctx, sid, req),
        (Search, "GET") => search::across(ctx, req),
        (Messages, "POST") => messages::append(ctx, sid, req),
        (Messages, "DELETE") => messages::clear(ctx, sid),
        (Messages, _) => Ok(method_not_allowed(&["POST", "DELETE"])),
        (Batch, "POST") => messages::batch(ctx, sid, req),
        // A message may be called "batch": other methods reach it as a message.
        (Batch, m) if m != "PATCH" => message(ctx, sid, "batch", req),
        (Batch, _) => Ok(method_not_allowed(&["GET", "POST", "PUT", "DELETE"])),
        (Message, _) => message(ctx, sid, mid, req),
        (Branches, "GET") => messages::branches(ctx, sid, mid),
        (History, "GET") => messages::history(ctx, sid, req),
        (Recent, "GET") => messages::recent(ctx, sid, req),
        (Leaf, "GET") => messages::leaf(ctx, sid),
        (PathLength, "GET") => messages::path_length(ctx, sid, req),
        (SessionSearch, "GET") => search::in_session(ctx, sid, req),
        (Compactions, "GET") => compactions::list(ctx, sid),
        (Compactions, "POST") => compactions::add(ctx, sid, req),
        (Compactions, _) => Ok(method_not_allowed(&["GET", "POST"])),
        (Fork | Usage, _) => Ok(method_not_allowed(&["POST"])),
        (Search | Branches | History | Recent | Leaf | PathLength | SessionSearch, _) => {
            Ok(method_not_allowed(&["GET"]))
        }
    }
}

fn message(ctx: &Ctx, sid: &str, mid: &str, req: &Request) -> Result<Response> {
    match req.method.as_str() {
        "GET" => messages::get(ctx, sid, mid),
        "PUT" => messages::update(ctx, sid, mid, req),
        "DELETE" => messages::delete(ctx, sid, mid),
        _ => Ok(method_not_allowed(&["GET", "PUT", "DELETE"])),
    }
}
