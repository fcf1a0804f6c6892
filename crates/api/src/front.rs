//! The front door's decisions, as plain data (the Workers layer only reads the request, the
//! secrets and the bindings, verifies a signature with WebCrypto, and forwards): CORS, the
//! WebSocket handshake rule, health and the console, the `/agents/{agent}` prefix and the
//! agent's name, where the token comes from and whether it is the admin token, what a known
//! caller may do with a path, the query the Durable Object gets, and how a request is logged.
//! In the order `docs/openapi.yaml` gives (its "Front door and Durable Object binding").

use subtle::ConstantTimeEq;

use super::access::{self, Claims};
use super::http::{check_name, decode_segment, parse_query, Method, Response, MAX_BODY_BYTES};
use super::{permits, template, upgrades};
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::ids::Role;

/// What the front door knows of a request before it reads the body.
pub struct Incoming<'a, 'h> {
    /// As sent (an unknown method stays unknown).
    pub method: &'a str,
    /// As workerd normalized it (`..` resolved), still percent-encoded.
    pub path: &'a str,
    /// Without `?`.
    pub query: &'a str,
    /// A request header by its lower-case name.
    pub header: &'h dyn Fn(&str) -> Option<String>,
    /// Whether it carries a body stream (workerd gives one to a request with a body).
    pub body: Sent,
}

/// Whether a request carries a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    Nothing,
    Body,
}

/// The front door's settings (vars).
pub struct Settings<'a> {
    /// `CORS_ORIGINS`: comma-separated origins, `*`, or empty.
    pub cors_origins: &'a str,
    /// `CHAT_PAGE`: the console is served unless `off`, `false` or `0`.
    pub chat_page: &'a str,
}

/// Whether a request opens a session's WebSocket (see `handshake`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upgrade {
    /// An ordinary request (any `Upgrade` header is dropped before it is forwarded).
    None,
    /// A genuine WebSocket handshake of `…/sessions/{sid}/ws`.
    WebSocket,
}

/// Where a request goes, before its token is looked at.
pub enum Door<'a> {
    /// Answered by the front door (a preflight, health, a refusal).
    Answer(Response),
    /// A file of the console (`GET`/`HEAD` outside `/agents/`).
    Console,
    /// A request for an agent, once its caller is known.
    Agent(AgentCall<'a>),
    /// A read of the directory (`GET /directory…`), the admin's once its caller is known.
    Directory(DirectoryCall),
}

/// What a read of the directory asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listed {
    /// `GET /directory`: a page of entries.
    Entries,
    /// `GET /directory/usage`: a page of agents with their usage over a range.
    Usage,
    /// `GET /directory/export`: every agent's export, streamed.
    Export,
}

/// A read of the directory.
#[derive(Debug)]
pub struct DirectoryCall {
    pub what: Listed,
    /// The token it presented (`Authorization: Bearer`).
    pub token: Option<String>,
}

/// The directory's path `path` names, if it is one.
fn listed(path: &str) -> Option<Listed> {
    match path {
        "/directory" => Some(Listed::Entries),
        "/directory/usage" => Some(Listed::Usage),
        "/directory/export" => Some(Listed::Export),
        _ => None,
    }
}

/// Whether `caller` may read the directory: the admin token only (a scoped token opens one
/// agent, never the list of all of them).
pub fn directory_caller(caller: &Caller) -> Result<()> {
    match caller {
        Caller::Admin => Ok(()),
        Caller::Scoped(_) => Err(Error::forbidden("only the admin token reads the directory")),
    }
}

/// A request for an agent (`/agents/{agent}/…`) or a memory space (`/spaces/{space}/…`).
#[derive(Debug)]
pub struct AgentCall<'a> {
    /// The agent's (or the space's) name.
    pub agent: String,
    /// Which of the two: the Durable Object namespace it goes to.
    pub role: Role,
    /// The path below `/agents/{agent}` (`/` for the agent itself).
    pub tail: &'a str,
    pub upgrade: Upgrade,
    /// The token it presented (`Authorization: Bearer`, or `?token=` on a handshake).
    pub token: Option<String>,
}

/// The answer of `e`; a `405` names the methods `allow`ed.
fn refusal(e: &Error, allow: &str) -> Response {
    let mut r = Response::error(e);
    if e.kind == ErrorKind::MethodNotAllowed {
        r.headers.push(("allow".into(), allow.into()));
    }
    r
}

/// Where `inc` goes (see [`Door`]): a CORS preflight, the handshake rule, health, the console,
/// the `/agents/{agent}` prefix, a query that is UTF-8, the agent's name, the token presented.
pub fn door<'a>(inc: &Incoming<'a, '_>, settings: &Settings<'_>) -> Door<'a> {
    let cors = Cors::of(inc, settings);
    if let Some(answer) = cors.preflight(inc) {
        return Door::Answer(answer);
    }
    let upgrade = match handshake(inc) {
        Ok(u) => u,
        Err(e) => return Door::Answer(refusal(&e, "GET")),
    };
    let reads = matches!(inc.method, "GET" | "HEAD");
    let not_read = || refusal(&Error::new(ErrorKind::MethodNotAllowed, "allowed methods: GET, HEAD"), "GET, HEAD");
    if inc.path == "/healthz" {
        return Door::Answer(if reads { Response::text(200, "ok") } else { not_read() });
    }
    if let Some(what) = listed(inc.path) {
        if !reads {
            return Door::Answer(not_read());
        }
        if let Err(e) = parse_query(inc.query) {
            return Door::Answer(Response::error(&e));
        }
        return Door::Directory(DirectoryCall { what, token: presented_token(inc, Upgrade::None) });
    }
    let console = !matches!(settings.chat_page.trim(), "off" | "false" | "0");
    let api = ["/agents", "/spaces"].iter().any(|p| inc.path == *p || inc.path.starts_with(&format!("{p}/")));
    if console && !api {
        return if reads { Door::Console } else { Door::Answer(not_read()) };
    }
    let (role, rest) = match (inc.path.strip_prefix("/agents/"), inc.path.strip_prefix("/spaces/")) {
        (Some(rest), _) => (Role::Agent, rest),
        (None, Some(rest)) => (Role::Space, rest),
        (None, None) => {
            let e = Error::not_found(format!(
                "no route for {}; the API lives under /agents/{{agent}}/, /spaces/{{space}}/ and /directory",
                inc.path
            ));
            return Door::Answer(Response::error(&e));
        }
    };
    let (agent_raw, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    // The DO refuses a query that is not UTF-8 too; this also covers the `token` it never sees.
    if let Err(e) = parse_query(inc.query) {
        return Door::Answer(super::openai::error_at(tail, &e));
    }
    let what = role.as_str();
    let agent = match decode_segment(what, agent_raw).and_then(|a| check_name(what, &a).map(|_| a)) {
        Ok(a) => a,
        Err(e) => return Door::Answer(super::openai::error_at(tail, &e)),
    };
    let tail = if tail.is_empty() { "/" } else { tail };
    // A space's `/link/…` routes are for its agents' Durable Objects only.
    if role == Role::Space && (tail == "/link" || tail.starts_with("/link/")) {
        return Door::Answer(Response::error(&Error::not_found(format!("no route for {}", inc.path))));
    }
    Door::Agent(AgentCall { agent, role, tail, upgrade, token: presented_token(inc, upgrade) })
}

/// Whether the request is an actual WebSocket upgrade of a session's socket, or no upgrade at
/// all; anything else with `Upgrade: websocket` is refused.
///
/// workerd shows every request carrying `Upgrade: websocket` to JavaScript as a `GET`, whatever
/// its real method, and fails with an internal error if a non-`GET` one is answered with a
/// socket. So the method cannot be trusted on such a request: only a real handshake (no body,
/// `Sec-WebSocket-Key` and `Sec-WebSocket-Version`) of `…/sessions/{sid}/ws` is one. The same
/// header anywhere else is `400`, on the socket route `405`, and never acted on as a `GET`.
pub(crate) fn handshake(inc: &Incoming<'_, '_>) -> Result<Upgrade> {
    let h = |name: &str| (inc.header)(name);
    if !h("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Ok(Upgrade::None);
    }
    let socket = inc
        .path
        .strip_prefix("/agents/")
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .is_some_and(|tail| upgrades(inc.method, tail));
    let bodiless = h("content-length").is_none() && h("transfer-encoding").is_none() && inc.body == Sent::Nothing;
    let genuine =
        inc.method == "GET" && bodiless && h("sec-websocket-key").is_some() && h("sec-websocket-version").is_some();
    match (socket, genuine) {
        (true, true) => Ok(Upgrade::WebSocket),
        (true, false) => Err(Error::new(
            ErrorKind::MethodNotAllowed,
            "a session's socket opens with a WebSocket handshake: GET without a body, with Upgrade: websocket, \
             Sec-WebSocket-Key and Sec-WebSocket-Version",
        )),
        (false, _) => {
            Err(Error::invalid("Upgrade: websocket is only accepted on GET /agents/{agent}/sessions/{sid}/ws"))
        }
    }
}

/// The token from `Authorization: Bearer …`, or from `?token=` on an actual WebSocket upgrade
/// (browsers cannot set headers there). Anywhere else a token in the URL counts for nothing:
/// URLs end up in logs and browser histories. An `Authorization` header that is present wins,
/// even one that is not `Bearer`.
fn presented_token(inc: &Incoming<'_, '_>, upgrade: Upgrade) -> Option<String> {
    if let Some(h) = (inc.header)("authorization") {
        return h.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
    }
    if upgrade != Upgrade::WebSocket {
        return None;
    }
    parse_query(inc.query).ok()?.into_iter().find(|(k, _)| k == "token").map(|(_, v)| v)
}

/// Who presented a request's token.
pub enum Caller {
    /// `API_TOKEN`: everything.
    Admin,
    /// A scoped token whose signature is valid (its expiry, agent and scope are checked next).
    Scoped(Claims),
}

/// What a presented token is, before its signature is verified.
pub enum Presented<'t> {
    Admin,
    /// A scoped token: what its signature covers, the signature, the claims.
    Scoped {
        signed: &'t str,
        signature: Vec<u8>,
        claims: Claims,
    },
}

/// The token `given` taken apart against the admin token `admin` (`API_TOKEN`; compared in
/// constant time): the admin token, or a scoped token to verify. `API_TOKEN` unset is `503`
/// (the API is never open by accident); anything that is neither is `401`.
pub fn presented<'t>(given: Option<&'t str>, admin: Option<&str>) -> Result<Presented<'t>> {
    let admin = admin.filter(|t| !t.is_empty()).ok_or_else(|| {
        Error::new(
            ErrorKind::NotConfigured,
            "API_TOKEN is not set, so the API is closed. Set it with `npx wrangler secret put API_TOKEN` \
             (locally: a line API_TOKEN=... in .dev.vars).",
        )
    })?;
    let given = given.unwrap_or_default();
    if given.len() == admin.len() && bool::from(given.as_bytes().ct_eq(admin.as_bytes())) {
        return Ok(Presented::Admin);
    }
    let (signed, signature, claims) = access::read(given)?;
    Ok(Presented::Scoped { signed, signature, claims })
}

/// What the front door does with a request for an agent once its caller is known.
pub enum Next {
    /// `POST /agents/{agent}/tokens` with the admin token: sign the claims asked for.
    Issue,
    /// Hand it to the agent's Durable Object.
    Forward,
    /// Refused here.
    Answer(Response),
}

/// What `caller` may do with `call` (`method` as sent, `now_ms` the time, `length` the declared
/// `Content-Length`): a scoped token is checked for expiry, agent and route here too (the DO
/// checks again, with the revocation time only it knows: refusing here spares it the request);
/// `/tokens` is the admin's; a declared body over the limit is `413` before it is read.
pub fn next(call: &AgentCall<'_>, caller: &Caller, method: &str, now_ms: i64, length: Option<u64>) -> Next {
    if let Caller::Scoped(c) = caller {
        if let Err(e) =
            c.valid_for(&call.agent, call.role, now_ms, None).and_then(|_| permits(c, Method::parse(method), call.tail))
        {
            return Next::Answer(super::openai::error_at(call.tail, &e));
        }
    }
    if call.tail == "/tokens" {
        return match (caller, method) {
            (Caller::Scoped(_), _) => Next::Answer(super::openai::error_at(
                call.tail,
                &Error::forbidden("only the admin token issues tokens"),
            )),
            (Caller::Admin, "POST") => Next::Issue,
            (Caller::Admin, _) => {
                Next::Answer(refusal(&Error::new(ErrorKind::MethodNotAllowed, "allowed methods: POST"), "POST"))
            }
        };
    }
    if length.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Next::Answer(super::openai::error_at(call.tail, &Error::too_large("request body is over 32 MiB")));
    }
    Next::Forward
}

/// `query` without its `token` parameters, the rest byte for byte as sent (so the DO still sees,
/// and refuses, a value that is not UTF-8).
pub fn forwarded_query(query: &str) -> String {
    let is_token = |pair: &&str| {
        let key = pair.split('=').next().unwrap_or_default();
        parse_query(key).ok().and_then(|p| p.into_iter().next()).is_some_and(|(k, _)| k == "token")
    };
    query.split('&').filter(|p| !p.is_empty() && !is_token(p)).collect::<Vec<_>>().join("&")
}

/// The agent (when its name is valid) and the route template of a request, as a log line names
/// them: never the path's ids, a token or a body.
pub fn log_route(path: &str) -> (String, &'static str) {
    let (role, rest) = match (path.strip_prefix("/agents/"), path.strip_prefix("/spaces/")) {
        (Some(rest), _) => (Role::Agent, rest),
        (None, Some(rest)) => (Role::Space, rest),
        (None, None) => {
            let route = match path {
                "/healthz" => "/healthz",
                "/directory" => "/directory",
                "/directory/usage" => "/directory/usage",
                "/directory/export" => "/directory/export",
                _ => "(console)",
            };
            return (String::new(), route);
        }
    };
    let (agent, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let agent = decode_segment("agent", agent).ok().filter(|a| check_name("agent", a).is_ok()).unwrap_or_default();
    let route = match tail {
        "/tokens" => "/tokens",
        "" => "/",
        _ => template(role, tail).unwrap_or("(no route)"),
    };
    (agent, route)
}

/// Request headers a page may send: the token, JSON bodies, the erase confirmation, and what the
/// AI SDK's, MCP's and the `openai` package's clients add (`x-session-id` names an OpenAI
/// request's session). (`*` would not cover `authorization`.)
const ALLOW_HEADERS: &str = "authorization, content-type, accept, confirm, mcp-session-id, mcp-protocol-version, \
     last-event-id, x-session-id, openai-organization, openai-project, x-stainless-arch, x-stainless-helper-method, \
     x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, \
     x-stainless-runtime-version, x-stainless-timeout";
/// Answer headers a page may read: the AI SDK's stream marker, MCP's session, and rate limits.
const EXPOSE_HEADERS: &str = "x-vercel-ai-ui-message-stream, mcp-session-id, retry-after";
const ALLOW_METHODS: &str = "GET, HEAD, POST, PUT, PATCH, DELETE";

/// CORS for browsers on other origins (`CORS_ORIGINS`): what a request's origin may be told.
pub struct Cors {
    /// The `Access-Control-Allow-Origin` value for this request, when its origin is allowed.
    allow: Option<String>,
    configured: Configured,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Configured {
    No,
    Yes,
}

impl Cors {
    /// What the origin of `inc` may be told under `settings.cors_origins`.
    pub fn of(inc: &Incoming<'_, '_>, settings: &Settings<'_>) -> Cors {
        let list = settings.cors_origins.trim();
        let allow = (inc.header)("origin").and_then(|o| match list {
            "*" => Some("*".to_owned()),
            _ => list.split(',').map(str::trim).any(|a| !a.is_empty() && a.eq_ignore_ascii_case(&o)).then_some(o),
        });
        Cors { allow, configured: if list.is_empty() { Configured::No } else { Configured::Yes } }
    }

    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`) when CORS is
    /// configured: `204` with the headers for an allowed origin, `403` otherwise.
    fn preflight(&self, inc: &Incoming<'_, '_>) -> Option<Response> {
        let asks = (inc.header)("access-control-request-method").is_some();
        if self.configured == Configured::No || inc.method != "OPTIONS" || !asks {
            return None;
        }
        if self.allow.is_none() {
            return Some(Response::error(&Error::forbidden("this origin is not in CORS_ORIGINS")));
        }
        let mut r = Response::no_content();
        r.headers.extend([
            ("access-control-allow-methods".into(), ALLOW_METHODS.into()),
            ("access-control-allow-headers".into(), ALLOW_HEADERS.into()),
            ("access-control-max-age".into(), "86400".into()),
        ]);
        Some(r)
    }

    /// The headers an answer with `status` gets for this origin: none for an origin that is not
    /// allowed, nor for a WebSocket's `101` (sockets are not subject to CORS). `vary` is added to
    /// what the answer has; the others replace.
    pub fn headers(&self, status: u16) -> Vec<(&'static str, String)> {
        let Some(allow) = self.allow.clone().filter(|_| status != 101) else { return Vec::new() };
        let vary = allow != "*";
        let mut out =
            vec![("access-control-allow-origin", allow), ("access-control-expose-headers", EXPOSE_HEADERS.into())];
        if vary {
            out.push(("vary", "Origin".into()));
        }
        out
    }
}
