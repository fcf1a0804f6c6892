//! The route table: every path of the Durable Object's API, once. A row names its path, who may
//! use it (the whole agent, one session, the admin), and for each method its handler, the query
//! parameters that handler reads and whether it reads a body. Everything else follows from the
//! table: routing, `405` with `Allow`, what a scoped token may do, the route templates of the
//! logs, and `tests/it/routes.rs`, which checks the table against `docs/openapi.yaml`.
//!
//! Three paths are also names: a message may be called `batch` or `delete` and a session
//! `import`, so `GET /sessions/{sid}/messages/batch` reads the message `batch` and `GET
//! /sessions/import` the session `import`; their rows say so with handlers of their own.

use std::sync::OnceLock;

use super::access::{Needs, Who};
use super::call::{Call, Handler, Pending};
use super::http::Method::{self, Delete, Get, Patch, Post, Put};
use super::http::Response;
use super::{
    chat, compactions, context, directory, mcp, memories, messages, openai, schedules, search, sessions, spaces,
    tokens, transfer,
};
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::Role;

/// What a handler does with the request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// It reads it (and refuses what it cannot take).
    Read,
    /// It reads none; a body that is not a JSON object is still refused, as every other write
    /// refuses one, so that no write takes garbage silently.
    Unread,
    /// A read: the body is ignored.
    Ignored,
}

/// What an operation answers with. A handler always answers whole ([`super::handle`], a
/// socket's frame, the native tests); the Durable Object ([`super::object::Object::fetch`])
/// answers the others as they say, after the same one route match and admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A whole answer.
    Whole,
    /// A body written as it comes.
    Stream(Stream),
    /// A WebSocket accepted for the route's session.
    Upgrade,
}

/// The bodies the Durable Object writes as they come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// A turn as server-sent events, when its request asks for them (`chat::Dialect::of`);
    /// answered whole otherwise.
    Chat,
    /// The AI SDK's resume request: the session's running turn, replayed then followed.
    Resume,
    /// The agent's NDJSON export, read chunk by chunk as the client takes it.
    Export,
    /// An OpenAI-compatible turn as OpenAI's server-sent events, when its body says `stream`
    /// (`openai::dialect`); answered whole otherwise.
    OpenAi,
}

/// One method of a route.
pub struct Op {
    pub method: Method,
    /// How it answers (the Durable Object's way; its handler answers whole).
    pub delivery: Delivery,
    pub(crate) handler: Handler,
    /// The query parameters the handler reads (what the spec lists for this operation).
    pub query: &'static [&'static str],
    pub(crate) body: Body,
    /// Who may use it, when it differs from its route's.
    pub(crate) who: Option<Who>,
}

/// A path that is also the name of what its methods act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    Nothing,
    /// The session of this id (`/sessions/import`).
    Session(&'static str),
    /// The message of this id (`/sessions/{sid}/messages/batch`, `…/delete`).
    Message(&'static str),
}

/// One path and its methods.
pub struct Route {
    /// The path template, as the Durable Object sees it (`/sessions/{sid}/messages`).
    pub path: &'static str,
    pub who: Who,
    /// What the path names besides its parameters.
    pub names: Names,
    /// The scope a token needs for the methods other than `GET` (and `HEAD`), listed or not.
    pub writes: Needs,
    pub ops: &'static [Op],
}

impl Route {
    /// The operation for `method`, if the route has one.
    pub(crate) fn op(&self, method: Method) -> Option<&'static Op> {
        self.ops.iter().find(|o| o.method == method)
    }

    /// Who may use it with `method`.
    pub(crate) fn who(&self, method: Method) -> Who {
        self.op(method).and_then(|o| o.who).unwrap_or(self.who)
    }

    /// The scope a token needs for `method`.
    pub(crate) fn needs(&self, method: Method) -> Needs {
        if method.reads() {
            Needs::Read
        } else {
            self.writes
        }
    }

    /// The methods it allows, for a `405`'s `Allow`.
    pub(crate) fn methods(&self) -> Vec<Method> {
        self.ops.iter().map(|o| o.method).collect()
    }
}

const fn now(f: fn(&Call<'_>) -> Result<Response>) -> Handler {
    Handler::Now(f)
}

const fn later(f: for<'c> fn(&'c Call<'c>) -> Pending<'c>) -> Handler {
    Handler::Later(f)
}

/// A WebSocket upgrade is answered by the Durable Object itself: a request answered whole is
/// none.
fn not_an_upgrade(_: &Call<'_>) -> Result<Response> {
    Err(Error::invalid("expected a WebSocket upgrade (Upgrade: websocket)"))
}

const fn op(method: Method, handler: Handler, query: &'static [&'static str], body: Body) -> Op {
    Op { method, delivery: Delivery::Whole, handler, query, body, who: None }
}

/// `op`, answered by the Durable Object as `delivery`.
const fn delivered(delivery: Delivery, op: Op) -> Op {
    Op { delivery, ..op }
}

/// A read (`GET`) of `handler` with `query`.
const fn get(handler: Handler, query: &'static [&'static str]) -> Op {
    op(Get, handler, query, Body::Ignored)
}

/// A write that reads its body.
const fn write(method: Method, handler: Handler) -> Op {
    op(method, handler, &[], Body::Read)
}

/// A write that reads no body.
const fn bare(method: Method, handler: Handler) -> Op {
    op(method, handler, &[], Body::Unread)
}

/// A `POST` that makes a session of a new id (a fork, a split) from the route's session:
/// agent-wide, since a token limited to some sessions could not open what it made.
const fn makes_session(handler: Handler) -> Op {
    Op { who: Some(Who::Agent), ..write(Post, handler) }
}

const fn route(path: &'static str, who: Who, ops: &'static [Op]) -> Route {
    Route { path, who, names: Names::Nothing, writes: Needs::Write, ops }
}

/// The memory filters (`memories::filter`), then `more`. A name ending in `<key>` is a family
/// of names (`metadata.<key>`: `metadata.user`, `metadata.plan`, …; `http::Query::family`),
/// which `docs/openapi.yaml` lists under `x-query-families`.
macro_rules! memory_filter {
    ($($more:literal),*) => {
        &[
            "category",
            "tag",
            "anyTag",
            "createdAfter",
            "createdBefore",
            "updatedAfter",
            "updatedBefore",
            "metadata.<key>",
            "sessionId",
            $($more),*
        ]
    };
}

/// `DELETE /memories`: the filters.
const MEMORY_FILTER: &[&str] = memory_filter!();

/// `GET /memories`: the filters, which facts (validity), then the page.
const MEMORY_LIST: &[&str] = memory_filter!("asOf", "includeSuperseded", "limit", "cursor");

/// `GET /memories/search`: the query, the filters, which facts (validity), the number of hits.
const MEMORY_SEARCH: &[&str] = memory_filter!("q", "asOf", "includeSuperseded", "limit");

/// The memory routes: the same rows in an agent's table and a memory space's.
const MEMORIES: Route = route(
    "/memories",
    Who::Agent,
    &[
        get(now(memories::list), MEMORY_LIST),
        write(Post, later(memories::create)),
        op(Delete, now(memories::delete_all), MEMORY_FILTER, Body::Unread),
    ],
);
const MEMORIES_SEARCH: Route = route("/memories/search", Who::Agent, &[get(later(memories::search), MEMORY_SEARCH)]);
// A memory is never called "batch" or "search" (a PUT there is 405), so only POST is routed here.
const MEMORIES_BATCH: Route = route("/memories/batch", Who::Agent, &[write(Post, later(memories::create_all))]);
const A_MEMORY: Route = route(
    "/memories/{memory}",
    Who::Agent,
    &[
        get(now(memories::get), &[]),
        write(Put, later(memories::put)),
        write(Patch, later(memories::patch)),
        bare(Delete, now(memories::delete)),
    ],
);
const A_MEMORY_HISTORY: Route = route("/memories/{memory}/history", Who::Agent, &[get(now(memories::history), &[])]);

/// Every route of the Durable Object.
pub const ROUTES: &[Route] = &[
    route(
        "/sessions",
        Who::Agent,
        &[get(now(sessions::list), &["limit", "cursor", "metadata.<key>"]), write(Post, now(sessions::create))],
    ),
    route(
        "/sessions/{sid}",
        Who::Session,
        &[get(now(sessions::get), &[]), write(Patch, now(sessions::update)), bare(Delete, later(sessions::delete))],
    ),
    route("/sessions/{sid}/fork", Who::Session, &[makes_session(now(sessions::fork))]),
    route("/sessions/{sid}/usage", Who::Session, &[write(Post, now(sessions::usage))]),
    route("/sessions/{sid}/storage", Who::Session, &[get(now(sessions::storage), &[])]),
    route("/search", Who::Agent, &[get(later(search::across), &["q", "limit", "metadata.<key>"])]),
    route(
        "/sessions/{sid}/messages",
        Who::Session,
        &[write(Post, later(messages::append)), bare(Delete, later(messages::clear))],
    ),
    Route {
        path: "/sessions/{sid}/messages/batch",
        who: Who::Session,
        // GET, PUT and DELETE act on the message called "batch".
        names: Names::Message("batch"),
        writes: Needs::Write,
        ops: &[
            get(later(messages::get), &[]),
            write(Post, later(messages::batch)),
            write(Put, later(messages::update)),
            bare(Delete, later(messages::delete)),
        ],
    },
    Route {
        path: "/sessions/{sid}/messages/delete",
        who: Who::Session,
        // GET, PUT and DELETE act on the message called "delete".
        names: Names::Message("delete"),
        writes: Needs::Write,
        ops: &[
            get(later(messages::get), &[]),
            write(Post, later(messages::delete_many)),
            write(Put, later(messages::update)),
            bare(Delete, later(messages::delete)),
        ],
    },
    route(
        "/sessions/{sid}/messages/{mid}",
        Who::Session,
        &[get(later(messages::get), &[]), write(Put, later(messages::update)), bare(Delete, later(messages::delete))],
    ),
    route(
        "/sessions/{sid}/messages/{mid}/branches",
        Who::Session,
        &[get(later(messages::branches), &["limit", "before"])],
    ),
    route(
        "/sessions/{sid}/history",
        Who::Session,
        &[get(
            later(messages::history),
            &["leaf", "raw", "truncate", "keepRecent", "maxToolOutputChars", "maxTextChars", "limit", "before"],
        )],
    ),
    route(
        "/sessions/{sid}/history/recent",
        Who::Session,
        &[get(later(messages::recent), &["maxBytes", "minMessages", "before"])],
    ),
    route("/sessions/{sid}/leaf", Who::Session, &[get(later(messages::leaf), &[])]),
    route("/sessions/{sid}/path-length", Who::Session, &[get(now(messages::path_length), &["leaf"])]),
    route("/sessions/{sid}/search", Who::Session, &[get(later(search::in_session), &["q", "limit"])]),
    route(
        "/sessions/{sid}/compactions",
        Who::Session,
        &[get(now(compactions::list), &[]), write(Post, now(compactions::add))],
    ),
    route(
        "/sessions/{sid}/compactions/{cid}/messages",
        Who::Session,
        &[get(later(compactions::messages), &["offset", "limit"])],
    ),
    route("/sessions/{sid}/compact", Who::Session, &[write(Post, later(compactions::compact))]),
    route("/sessions/{sid}/context", Who::Session, &[get(later(context::list), &[]), write(Post, later(context::add))]),
    route(
        "/sessions/{sid}/context/{label}",
        Who::Session,
        &[get(later(context::get), &[]), write(Put, later(context::replace)), bare(Delete, now(context::remove))],
    ),
    route("/sessions/{sid}/context/{label}/append", Who::Session, &[write(Post, later(context::append))]),
    route(
        "/sessions/{sid}/context/{label}/entries",
        Who::Session,
        &[get(now(context::entries), &["limit", "cursor"]), write(Post, now(context::ingest))],
    ),
    route(
        "/sessions/{sid}/context/{label}/entries/{key}",
        Who::Session,
        &[get(now(context::entry), &[]), bare(Delete, now(context::delete_entry))],
    ),
    route("/sessions/{sid}/prompt", Who::Session, &[get(later(context::prompt), &[])]),
    route("/sessions/{sid}/prompt/refresh", Who::Session, &[bare(Post, later(context::refresh))]),
    route("/sessions/{sid}/tools", Who::Session, &[get(now(context::tools), &[])]),
    route("/sessions/{sid}/tools/{name}", Who::Session, &[write(Post, later(context::run_tool))]),
    route(
        "/sessions/{sid}/chat",
        Who::Session,
        &[delivered(Delivery::Stream(Stream::Chat), write(Post, later(chat::route)))],
    ),
    route("/sessions/{sid}/chat/stop", Who::Session, &[bare(Post, now(chat::stop))]),
    route(
        "/sessions/{sid}/chat/{chatId}/stream",
        Who::Session,
        &[delivered(Delivery::Stream(Stream::Resume), get(now(chat::resume_route), &[]))],
    ),
    // The default session: the session is named by the body (or `{chatId}`), and checked
    // against the token there (`chat::target`, `chat::resumed_session`).
    route("/chat", Who::Session, &[delivered(Delivery::Stream(Stream::Chat), write(Post, later(chat::agent_route)))]),
    route(
        "/chat/{chatId}/stream",
        Who::Session,
        &[delivered(Delivery::Stream(Stream::Resume), get(now(chat::resume_route), &[]))],
    ),
    // The Durable Object answers upgrades itself; a request answered whole is none.
    Route {
        path: "/sessions/{sid}/ws",
        who: Who::Session,
        names: Names::Nothing,
        writes: Needs::Read,
        ops: &[delivered(Delivery::Upgrade, get(now(not_an_upgrade), &[]))],
    },
    route("/sessions/{sid}/memories/extract", Who::Session, &[write(Post, later(memories::extract))]),
    MEMORIES,
    MEMORIES_SEARCH,
    MEMORIES_BATCH,
    A_MEMORY,
    A_MEMORY_HISTORY,
    route(
        "/schedules",
        Who::Agent,
        &[get(now(schedules::list), &["limit", "cursor"]), write(Post, now(schedules::create))],
    ),
    route(
        "/schedules/{schedule}",
        Who::Agent,
        &[get(now(schedules::get), &[]), write(Patch, now(schedules::update)), bare(Delete, now(schedules::delete))],
    ),
    route("/schedules/{schedule}/runs", Who::Agent, &[get(now(schedules::runs), &["limit", "cursor"])]),
    route("/schedules/{schedule}/run", Who::Agent, &[bare(Post, later(schedules::run))]),
    route("/usage", Who::Agent, &[get(now(directory::usage), &["from", "to"])]),
    route("/tokens/revoke", Who::Admin, &[write(Post, now(tokens::revoke))]),
    route(
        "/space",
        Who::Admin,
        &[get(now(spaces::get), &[]), write(Put, now(spaces::choose)), bare(Delete, now(spaces::forget))],
    ),
    route("/", Who::Admin, &[bare(Delete, later(transfer::erase))]),
    route(
        "/export",
        Who::Admin,
        &[delivered(Delivery::Stream(Stream::Export), get(later(transfer::export_agent), &[]))],
    ),
    route("/import", Who::Admin, &[write(Post, later(transfer::import_agent))]),
    Route {
        path: "/sessions/import",
        // The session called "import", but for POST: a session document imported.
        who: Who::Session,
        names: Names::Session("import"),
        writes: Needs::Write,
        ops: &[
            get(now(sessions::get), &[]),
            Op {
                method: Post,
                delivery: Delivery::Whole,
                handler: later(transfer::import_session),
                query: &["as"],
                body: Body::Read,
                who: Some(Who::Agent),
            },
            write(Patch, now(sessions::update)),
            bare(Delete, later(sessions::delete)),
        ],
    },
    route("/sessions/{sid}/export", Who::Session, &[get(later(transfer::export_session), &[])]),
    route("/sessions/{sid}/split", Who::Session, &[makes_session(later(transfer::split))]),
    // The OpenAI-compatible face: the session is named by the request and checked against the
    // token there (`openai::opened`).
    route("/v1/models", Who::Session, &[get(now(openai::models), &[])]),
    route(
        "/v1/chat/completions",
        Who::Session,
        &[delivered(Delivery::Stream(Stream::OpenAi), write(Post, later(openai::completions)))],
    ),
    route(
        "/v1/responses",
        Who::Session,
        &[delivered(Delivery::Stream(Stream::OpenAi), write(Post, later(openai::responses)))],
    ),
    route(
        "/v1/responses/{mid}",
        Who::Session,
        &[get(later(openai::response), &[]), bare(Delete, later(openai::delete_response))],
    ),
    route(
        "/v1/responses/{mid}/input_items",
        Who::Session,
        &[get(later(openai::input_items), &["limit", "order", "after"])],
    ),
    // A `read` token may initialize and list tools; `mcp` refuses its `tools/call`.
    Route {
        path: "/sessions/{sid}/mcp",
        who: Who::Session,
        names: Names::Nothing,
        writes: Needs::Read,
        ops: &[write(Post, later(mcp::handle))],
    },
];

/// Every route of a memory space's Durable Object: the memory routes of an agent, its shared
/// blocks, and the `/link/…` routes its agents' objects call (admin only, so no token reaches
/// them; the front door does not forward them either).
pub const SPACE_ROUTES: &[Route] = &[
    MEMORIES,
    MEMORIES_SEARCH,
    MEMORIES_BATCH,
    A_MEMORY,
    A_MEMORY_HISTORY,
    route("/blocks", Who::Agent, &[get(now(spaces::list_blocks), &[])]),
    route(
        "/blocks/{label}",
        Who::Agent,
        &[get(now(spaces::get_block), &[]), write(Put, now(spaces::replace)), bare(Delete, now(spaces::delete_block))],
    ),
    route("/blocks/{label}/append", Who::Agent, &[write(Post, now(spaces::append))]),
    route("/link/extract", Who::Admin, &[write(Post, later(spaces::extract))]),
    route("/link/blocks/{label}", Who::Admin, &[write(Put, now(spaces::link_replace))]),
    route("/link/blocks/{label}/append", Who::Admin, &[write(Post, now(spaces::link_append))]),
    route("/tokens/revoke", Who::Admin, &[write(Post, now(tokens::revoke))]),
    route("/", Who::Admin, &[bare(Delete, later(transfer::erase))]),
    route("/export", Who::Admin, &[get(later(transfer::export_agent), &[])]),
    route("/import", Who::Admin, &[write(Post, later(transfer::import_agent))]),
];

/// The routes of a Durable Object of `role`.
pub fn table(role: Role) -> &'static [Route] {
    match role {
        Role::Agent => ROUTES,
        Role::Space => SPACE_ROUTES,
    }
}

/// The router over the routes of `role` ([`table`]): a path to its row.
pub(crate) fn router(role: Role) -> &'static matchit::Router<&'static Route> {
    static AGENT: OnceLock<matchit::Router<&'static Route>> = OnceLock::new();
    static SPACE: OnceLock<matchit::Router<&'static Route>> = OnceLock::new();
    let cell = match role {
        Role::Agent => &AGENT,
        Role::Space => &SPACE,
    };
    cell.get_or_init(|| {
        let mut r = matchit::Router::new();
        for route in table(role) {
            // The table is static and conflict-free; a clash is a bug the tests catch.
            if let Err(e) = r.insert(route.path, route) {
                panic!("route table: {}: {e}", route.path);
            }
        }
        r
    })
}
