//! The front door Worker: `GET /healthz`, the console (static assets), and `/agents/{agent}/…` forwarded to
//! that agent's `SessionAgent` after the bearer-token check. Another Worker that binds the class
//! calls the DO directly and skips this (a binding is already a capability).
//!
//! The path it sees is the one workerd already normalized (`..`, `%2e%2e` and `;/../` resolved),
//! so `{agent}` is the agent that is actually served: every check that depends on the agent is
//! made against that name, here or in the DO (which knows its own `idFromName` name).

use subtle::ConstantTimeEq;
use worker::web_sys;
use worker::{console_log, event, Context, Date, Env, Request, Response, Result};

use super::convert::{self, split_url};
use super::cors::Cors;
use super::crypto;
use session_agent_api::access::{self, Claims, CLAIMS_HEADER};
use session_agent_api::http::{check_name, decode_segment, parse_query};
use session_agent_api::{route_template, socket_session};
use session_agent_core::access::RateLimit;
use session_agent_core::error::{Error, ErrorKind};

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let started = Date::now().as_millis();
    let method = req.inner().method();
    let url = req.inner().url();
    let (path, query) = split_url(&url);
    let cors = Cors::of(&req, &env);
    let (agent, route, answer) = match admit(&req, &env, &method, path, query, &cors).await {
        Admit::Forward(target) => {
            let route = route_template(target.tail).unwrap_or("(no route)");
            let answer = match limited(&env, &target.agent).await {
                Some(e) => {
                    convert::drain(&mut req).await;
                    convert::error(&e)
                }
                None => forward(&req, &env, &method, &url, query, &target).await,
            };
            (target.agent, route, answer)
        }
        Admit::Issue(agent) => {
            let answer = issue(req, &env, &agent).await;
            (agent, "/tokens", answer)
        }
        Admit::Answer(answer) => {
            // An unread body makes workerd drop the connection, and a client that reuses it
            // for its next request gets a reset: read what was sent (up to the body limit).
            if !convert::declared_too_large(&req) {
                convert::drain(&mut req).await;
            }
            let (agent, route) = front_route(path);
            (agent, route, answer)
        }
    };
    let answer = answer.and_then(|resp| cors.apply(resp));
    let status = answer.as_ref().map_or(500, Response::status_code);
    log_request(&agent, &method, route, status, Date::now().as_millis().saturating_sub(started));
    answer
}

/// One line per request for the operator (Workers Logs / `wrangler tail`): the agent, the
/// method, the route template (never the path's ids, a token or a body), the status and the
/// milliseconds until the answer's head (a streamed body goes on after it).
fn log_request(agent: &str, method: &str, route: &str, status: u16, ms: u64) {
    let line = serde_json::json!({"agent": agent, "method": method, "route": route, "status": status, "ms": ms});
    console_log!("{line}");
}

/// The agent (when its name is valid) and the route of a request the front door answers itself
/// (a refused token, a bad name, health, the console), as a log names them.
fn front_route(path: &str) -> (String, &'static str) {
    let Some(rest) = path.strip_prefix("/agents/") else {
        return (String::new(), if path == "/healthz" { "/healthz" } else { "(console)" });
    };
    let (agent, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let agent = decode_segment("agent", agent).ok().filter(|a| check_name("agent", a).is_ok()).unwrap_or_default();
    let route = match tail {
        "/tokens" => "/tokens",
        "" => "/",
        _ => route_template(tail).unwrap_or("(no route)"),
    };
    (agent, route)
}

/// What the front door does with a request: answer it itself, issue a token for an agent (with
/// the admin token), or hand it to an agent.
enum Admit<'a> {
    Answer(Result<Response>),
    Issue(String),
    Forward(Target<'a>),
}

/// Where an admitted request goes: the agent, the path below `/agents/{agent}`, whether it is a
/// WebSocket handshake, and the claims of the scoped token it came with (none: the admin token).
struct Target<'a> {
    agent: String,
    tail: &'a str,
    upgrade: Upgrade,
    claims: Option<Claims>,
}

/// Whether a request opens a session's WebSocket (see [`handshake`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upgrade {
    /// An ordinary request (any `Upgrade` header is dropped before it is forwarded).
    None,
    /// A genuine WebSocket handshake of `…/sessions/{sid}/ws`.
    WebSocket,
}

/// The front door's checks, in order (see docs/openapi.yaml): a CORS preflight, the WebSocket
/// handshake, health, the console, the `/agents/{agent}` prefix and the agent's name, the token
/// (admin or scoped, and then what it may do), the declared size.
async fn admit<'a>(req: &Request, env: &Env, method: &str, path: &'a str, query: &str, cors: &Cors) -> Admit<'a> {
    if let Some(answer) = cors.preflight(req, method) {
        return Admit::Answer(answer);
    }
    let upgrade = match handshake(req, method, path) {
        Ok(upgrade) => upgrade,
        Err(e) => return Admit::Answer(refuse(&e, "GET")),
    };
    let reads = method == "GET" || method == "HEAD";
    let not_read = || Error::new(ErrorKind::MethodNotAllowed, "allowed methods: GET, HEAD");
    if path == "/healthz" {
        return Admit::Answer(if reads { Response::ok("ok") } else { refuse(&not_read(), "GET, HEAD") });
    }
    if console_path(path) && chat_page_enabled(env) {
        return Admit::Answer(if reads { console(req, env, path).await } else { refuse(&not_read(), "GET, HEAD") });
    }
    let Some(rest) = path.strip_prefix("/agents/") else {
        let e = Error::not_found(format!("no route for {path}; the API lives under /agents/{{agent}}/"));
        return Admit::Answer(convert::error(&e));
    };
    // The DO refuses a query that is not UTF-8 too; this also covers the `token` it never sees.
    if let Err(e) = parse_query(query) {
        return Admit::Answer(convert::error(&e));
    }
    let (agent_raw, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let agent = match decode_segment("agent", agent_raw).and_then(|a| check_name("agent", &a).map(|_| a)) {
        Ok(a) => a,
        Err(e) => return Admit::Answer(convert::error(&e)),
    };
    let tail = if tail.is_empty() { "/" } else { tail };
    let claims = match authorize(req, env, query, upgrade).await {
        Ok(Caller::Admin) => None,
        Ok(Caller::Scoped(claims)) => Some(claims),
        Err(e) => return Admit::Answer(convert::error(&e)),
    };
    if let Some(c) = &claims {
        // The DO checks again (with the revocation time only it knows); refusing here spares it
        // the request.
        let now = Date::now().as_millis() as i64;
        if let Err(e) = c.admit(&agent, now, None).and_then(|_| session_agent_api::permits(c, method, tail)) {
            return Admit::Answer(convert::error(&e));
        }
    }
    if tail == "/tokens" {
        return match (&claims, method) {
            (Some(_), _) => Admit::Answer(convert::error(&Error::forbidden("only the admin token issues tokens"))),
            (None, "POST") => Admit::Issue(agent),
            (None, _) => {
                Admit::Answer(refuse(&Error::new(ErrorKind::MethodNotAllowed, "allowed methods: POST"), "POST"))
            }
        };
    }
    if convert::declared_too_large(req) {
        return Admit::Answer(convert::error(&Error::too_large("request body is over 32 MiB")));
    }
    Admit::Forward(Target { agent, tail, upgrade, claims })
}

/// `rate_limited` when the Workers rate-limiting binding `RATE_LIMITER` (if the Worker has one)
/// says the agent is over its limit; the limit is the binding's, and `Retry-After` is the period
/// of `RATE_LIMIT` when that is set too (else 60 s, the binding's longest period). `RATE_LIMIT`
/// itself is counted by the agent (see `Agent`): with both set, both apply.
async fn limited(env: &Env, agent: &str) -> Option<Error> {
    use worker::js_sys::{Function, Object, Promise, Reflect};
    use worker::wasm_bindgen::JsCast;
    let binding = Reflect::get(env.as_ref(), &"RATE_LIMITER".into()).ok().filter(|b| b.is_object())?;
    let limit: Function = Reflect::get(&binding, &"limit".into()).ok()?.dyn_into().ok()?;
    let arg = Object::new();
    Reflect::set(&arg, &"key".into(), &agent.into()).ok()?;
    let promise: Promise = limit.call1(&binding, &arg).ok()?.dyn_into().ok()?;
    let outcome = worker::wasm_bindgen_futures::JsFuture::from(promise).await.ok()?;
    if Reflect::get(&outcome, &"success".into()).ok()?.as_bool() != Some(false) {
        return None;
    }
    let period =
        env.var("RATE_LIMIT").ok().and_then(|v| RateLimit::parse(&v.to_string()).ok()).map_or(60, |r| r.period_secs());
    Some(
        Error::new(ErrorKind::RateLimited, format!("over this agent's request limit; retry in {period} s"))
            .with_retry(period),
    )
}

/// `POST /agents/{agent}/tokens` (admin token only): signs the claims asked for with
/// `TOKEN_SECRET` → 201 `{token, expiresAt, agent, scope, sessions}`.
async fn issue(mut req: Request, env: &Env, agent: &str) -> Result<Response> {
    let Some(secret) = token_secret(env) else {
        convert::drain(&mut req).await;
        return convert::error(&Error::new(
            ErrorKind::NotConfigured,
            "TOKEN_SECRET is not set, so no scoped token can be issued. Set it with `npx wrangler secret put \
             TOKEN_SECRET` (locally: a line TOKEN_SECRET=... in .dev.vars); use 32 random bytes or more.",
        ));
    };
    let body = match convert::read(req).await.and_then(|r| r.json_object()) {
        Ok(b) => b,
        Err(e) => return convert::error(&e),
    };
    let claims = match Claims::issue(agent, &body, Date::now().as_millis() as i64) {
        Ok(c) => c,
        Err(e) => return convert::error(&e),
    };
    match crypto::sign(&secret, &claims.signing_input()).await {
        Ok(signature) => Ok(Response::from_json(&claims.answer(&signature))?.with_status(201)),
        Err(e) => convert::error(&e),
    }
}

/// The secret that signs scoped tokens, if set (a secret, or a plain var in local dev).
fn token_secret(env: &Env) -> Option<String> {
    env.secret("TOKEN_SECRET")
        .map(|s| s.to_string())
        .or_else(|_| env.var("TOKEN_SECRET").map(|v| v.to_string()))
        .ok()
        .filter(|t| !t.is_empty())
}

/// The error answer of `e`; a `405` names the `allow`ed methods.
fn refuse(e: &Error, allow: &str) -> Result<Response> {
    let mut r = convert::error(e)?;
    if e.kind == ErrorKind::MethodNotAllowed {
        r.headers_mut().set("allow", allow)?;
    }
    Ok(r)
}

/// Whether `path` belongs to the console (the static assets of `build/console/`, bound as
/// `ASSETS`): everything but the API, `/healthz` and the WebSocket routes. The console talks to
/// an agent with a scoped token the user gives it and holds no secret itself.
fn console_path(path: &str) -> bool {
    !path.starts_with("/agents/") && path != "/agents"
}

/// What the page may do: run its own script and style, talk to this origin (HTTP and
/// WebSocket), and nothing else; no other site may frame it.
const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A file of the console from the `ASSETS` binding, with the page's security headers; a path
/// that is no file is the API's JSON 404, and a deployment without the binding says so.
async fn console(req: &Request, env: &Env, path: &str) -> Result<Response> {
    let Ok(assets) = env.assets("ASSETS") else {
        let e = Error::not_found(format!(
            "no route for {path}: the console is served from static assets, and this deployment has no ASSETS binding \
             (see README, \"The console\")"
        ));
        return convert::error(&e);
    };
    let file = assets.fetch_request(req.clone()?).await?;
    if file.status_code() == 404 {
        let e = Error::not_found(format!("no route for {path}; the API lives under /agents/{{agent}}/"));
        return convert::error(&e);
    }
    let headers = file.headers().clone();
    headers.set("cache-control", "no-store")?;
    headers.set("content-security-policy", PAGE_CSP)?;
    headers.set("x-frame-options", "DENY")?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    Ok(file.with_headers(headers))
}

/// The page is served unless the var `CHAT_PAGE` is `off` (or `false`, `0`).
fn chat_page_enabled(env: &Env) -> bool {
    let v = env.var("CHAT_PAGE").map(|v| v.to_string()).unwrap_or_default();
    !matches!(v.trim(), "off" | "false" | "0")
}

/// Whether the request is an actual WebSocket upgrade of a session's socket
/// (`Ok(Upgrade::WebSocket)`), or no upgrade at all (`Ok(Upgrade::None)`); anything else with
/// `Upgrade: websocket` is refused here.
///
/// workerd shows every request carrying `Upgrade: websocket` to JavaScript as a `GET`, whatever
/// its real method, and fails with an internal error if a non-`GET` one is answered with a
/// socket. So the method cannot be trusted on such a request: only a real handshake (no body,
/// `Sec-WebSocket-Key` and `Sec-WebSocket-Version`) of `…/sessions/{sid}/ws` is one. The same
/// header anywhere else is `400`, on the socket route `405`, and never acted on as a `GET`.
fn handshake(req: &Request, method: &str, path: &str) -> std::result::Result<Upgrade, Error> {
    let h = |name: &str| req.headers().get(name).ok().flatten();
    if !h("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Ok(Upgrade::None);
    }
    let socket = path
        .strip_prefix("/agents/")
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .is_some_and(|tail| socket_session(method, tail).is_some());
    let bodiless = h("content-length").is_none() && h("transfer-encoding").is_none() && req.inner().body().is_none();
    let genuine =
        method == "GET" && bodiless && h("sec-websocket-key").is_some() && h("sec-websocket-version").is_some();
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
/// URLs end up in logs and browser histories.
fn presented_token(req: &Request, query: &str, upgrade: Upgrade) -> Option<String> {
    if let Some(h) = req.headers().get("authorization").ok().flatten() {
        return h.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
    }
    if upgrade != Upgrade::WebSocket {
        return None;
    }
    parse_query(query).ok()?.into_iter().find(|(k, _)| k == "token").map(|(_, v)| v)
}

/// Who presented the request's token.
enum Caller {
    /// `API_TOKEN`: everything.
    Admin,
    /// A scoped token with a valid signature (its expiry, agent and scope are checked next).
    Scoped(Claims),
}

/// The caller of a request: the admin token (compared in constant time), or a scoped token whose
/// signature WebCrypto verified. Anything else is `401`.
async fn authorize(req: &Request, env: &Env, query: &str, upgrade: Upgrade) -> std::result::Result<Caller, Error> {
    let expected = env
        .secret("API_TOKEN")
        .map(|s| s.to_string())
        .or_else(|_| env.var("API_TOKEN").map(|v| v.to_string()))
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NotConfigured,
                "API_TOKEN is not set, so the API is closed. Set it with `npx wrangler secret put API_TOKEN` \
                 (locally: a line API_TOKEN=... in .dev.vars).",
            )
        })?;
    let given = presented_token(req, query, upgrade).unwrap_or_default();
    let same = given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()));
    if same {
        return Ok(Caller::Admin);
    }
    let wrong = || Error::unauthorized("missing or wrong bearer token");
    let secret = token_secret(env).ok_or_else(wrong)?;
    let (signed, signature, claims) = access::read(&given)?;
    if crypto::verify(&secret, signed, &signature).await? {
        Ok(Caller::Scoped(claims))
    } else {
        Err(wrong())
    }
}

/// `query` without its `token` parameters, the rest byte for byte as sent (so the DO still sees,
/// and refuses, a value that is not UTF-8).
fn without_token(query: &str) -> String {
    let is_token = |pair: &&str| {
        let key = pair.split('=').next().unwrap_or_default();
        parse_query(key).ok().and_then(|p| p.into_iter().next()).is_some_and(|(k, _)| k == "token")
    };
    query.split('&').filter(|p| !p.is_empty() && !is_token(p)).collect::<Vec<_>>().join("&")
}

/// Sends the request to the agent's Durable Object with the `/agents/{agent}` prefix removed,
/// with its own method (an unknown one stays unknown, and the DO refuses it), without the token,
/// and with `Upgrade` only on an actual socket upgrade: workerd fails a non-`GET` request that
/// carries one with an internal error instead of an answer.
async fn forward(req: &Request, env: &Env, method: &str, url: &str, query: &str, to: &Target<'_>) -> Result<Response> {
    let Target { agent, tail, upgrade, claims } = to;
    let origin = url.find("://").and_then(|i| url[i + 3..].find('/').map(|j| &url[..i + 3 + j])).unwrap_or(url);
    let query = without_token(query);
    let target = if query.is_empty() { format!("{origin}{tail}") } else { format!("{origin}{tail}?{query}") };
    let headers = req.headers().clone();
    headers.delete("authorization")?;
    // Only the front door speaks for a token: a client's own claims header never passes.
    headers.delete(CLAIMS_HEADER)?;
    if let Some(c) = claims {
        headers.set(CLAIMS_HEADER, &serde_json::to_string(c)?)?;
    }
    if *upgrade == Upgrade::None {
        headers.delete("upgrade")?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_headers(headers.as_ref());
    if method != "GET" && method != "HEAD" {
        if let Some(body) = req.inner().body() {
            init.set_body(&body);
        }
    }
    let inner = web_sys::Request::new_with_str_and_init(&target, &init)?;
    let stub = env.durable_object("SESSION_AGENT")?.id_from_name(agent)?.get_stub()?;
    stub.fetch_with_request(Request::from(inner)).await
}
