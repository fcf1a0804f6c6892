//! The front door Worker: `GET /healthz`, the console (static assets), the directory's reads
//! (`GET /directory…`, admin only, in `directory`), and `/agents/{agent}/…` forwarded to
//! that agent's `SessionAgent` after the bearer-token check. Another Worker that binds the class
//! calls the DO directly and skips this (a binding is already a capability).
//!
//! The path it sees is the one workerd already normalized (`..`, `%2e%2e` and `;/../` resolved),
//! so `{agent}` is the agent that is actually served: every check that depends on the agent is
//! made against that name, here or in the DO (which knows its own `idFromName` name).

use worker::web_sys;
use worker::{console_log, event, Context, Date, Env, Request, Response, Result};

use super::convert::{self, split_url};
use super::crypto;
use super::directory;
use session_agent_api::access::{Claims, CLAIMS_HEADER};
use session_agent_api::front::{
    self, AgentCall, Caller, Cors, DirectoryCall, Door, Incoming, Listed, Next, Presented, Sent, Settings, Upgrade,
};
use session_agent_api::template as route_of;
use session_agent_core::access::RateLimit;
use session_agent_core::ids::Role;

use super::spaces::SPACE_BINDING;
use session_agent_core::error::{Error, ErrorKind};

/// The route template of `tail` (a path of an agent or a space) for the log line.
fn template(role: Role, tail: &str) -> &'static str {
    match tail {
        "/tokens" => "/tokens",
        _ => route_of(role, tail).unwrap_or("(no route)"),
    }
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let started = Date::now().as_millis();
    let method = req.inner().method();
    let url = req.inner().url();
    let (path, query) = split_url(&url);
    let (cors_origins, chat_page) = (var(&env, "CORS_ORIGINS"), var(&env, "CHAT_PAGE"));
    let settings = Settings { cors_origins: &cors_origins, chat_page: &chat_page };
    let (cors, door) = {
        let header = |name: &str| req.headers().get(name).ok().flatten();
        let body = if req.inner().body().is_some() { Sent::Body } else { Sent::Nothing };
        let inc = Incoming { method: &method, path, query, header: &header, body };
        (Cors::of(&inc, &settings), front::door(&inc, &settings))
    };
    let (agent, route, answer) = match door {
        Door::Agent(call) => {
            let (route, answer) = agent_call(&mut req, &env, &method, &url, query, &call).await;
            (call.agent, route, answer)
        }
        Door::Directory(call) => {
            let (agent, route) = front::log_route(path);
            (agent, route, read_directory(&mut req, &env, query, &call).await)
        }
        Door::Console => {
            let (agent, route) = front::log_route(path);
            (agent, route, console(&req, &env, path).await)
        }
        Door::Answer(answer) => {
            // An unread body makes workerd drop the connection, and a client that reuses it
            // for its next request gets a reset: read what was sent (up to the body limit).
            if !convert::declared_too_large(&req) {
                convert::drain(&mut req).await;
            }
            let (agent, route) = front::log_route(path);
            (agent, route, convert::write(answer))
        }
    };
    let answer = answer.and_then(|resp| with_cors(resp, &cors));
    let status = answer.as_ref().map_or(500, Response::status_code);
    log_request(&agent, &method, route, status, Date::now().as_millis().saturating_sub(started));
    answer
}

/// A var's text (empty when unset).
fn var(env: &Env, name: &str) -> String {
    env.var(name).map(|v| v.to_string()).unwrap_or_default()
}

/// A read of the directory (`GET /directory…`): the admin token only, then the shards asked.
async fn read_directory(req: &mut Request, env: &Env, query: &str, call: &DirectoryCall) -> Result<Response> {
    convert::drain(req).await;
    let caller = authorize(env, call.token.as_deref()).await;
    if let Err(e) = caller.and_then(|c| front::directory_caller(&c)) {
        return convert::error(&e);
    }
    match call.what {
        Listed::Entries => directory::list(env, query).await,
        Listed::Usage => directory::usage(env, query).await,
        Listed::Export => directory::export(env, query).await,
    }
}

/// A request for an agent: its caller (the token), then issued, refused or forwarded; with the
/// route its log line names.
async fn agent_call(
    req: &mut Request,
    env: &Env,
    method: &str,
    url: &str,
    query: &str,
    call: &AgentCall<'_>,
) -> (&'static str, Result<Response>) {
    let caller = match authorize(env, call.token.as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            convert::drain(req).await;
            return (
                template(call.role, call.tail),
                convert::write(session_agent_api::openai::error_at(call.tail, &e)),
            );
        }
    };
    let length = req.headers().get("content-length").ok().flatten().and_then(|v| v.trim().parse::<u64>().ok());
    match front::next(call, &caller, method, Date::now().as_millis() as i64, length) {
        Next::Issue => ("/tokens", issue(req, env, &call.agent, call.role).await),
        Next::Answer(answer) => {
            if !convert::declared_too_large(req) {
                convert::drain(req).await;
            }
            (template(call.role, call.tail), convert::write(answer))
        }
        Next::Forward => {
            let route = template(call.role, call.tail);
            let claims = match caller {
                Caller::Admin => None,
                Caller::Scoped(c) => Some(c),
            };
            // A space's key cannot be an agent's name (`/` is in neither).
            let key = match call.role {
                Role::Agent => call.agent.clone(),
                Role::Space => format!("spaces/{}", call.agent),
            };
            let answer = match limited(env, &key).await {
                Some(e) => {
                    convert::drain(req).await;
                    convert::write(session_agent_api::openai::error_at(call.tail, &e))
                }
                None => forward(req, env, method, url, query, call, claims.as_ref()).await,
            };
            (route, answer)
        }
    }
}

/// `resp` with the CORS headers its origin gets (the headers of an answer from the Durable
/// Object are immutable: they are copied).
fn with_cors(resp: Response, cors: &Cors) -> Result<Response> {
    let add = cors.headers(resp.status_code());
    if add.is_empty() {
        return Ok(resp);
    }
    let headers = worker::Headers::new();
    for (k, v) in resp.headers().entries() {
        headers.append(&k, &v)?;
    }
    for (k, v) in add {
        if k == "vary" {
            headers.append(k, &v)?;
        } else {
            headers.set(k, &v)?;
        }
    }
    Ok(resp.with_headers(headers))
}

/// One line per request for the operator (Workers Logs / `wrangler tail`): the agent, the
/// method, the route template (never the path's ids, a token or a body), the status and the
/// milliseconds until the answer's head (a streamed body goes on after it).
fn log_request(agent: &str, method: &str, route: &str, status: u16, ms: u64) {
    let line = serde_json::json!({"agent": agent, "method": method, "route": route, "status": status, "ms": ms});
    console_log!("{line}");
}

/// `rate_limited` when the Workers rate-limiting binding `RATE_LIMITER` (if the Worker has one)
/// says the agent is over its limit; the limit is the binding's, and `Retry-After` is the period
/// of `RATE_LIMIT` when that is set too (else 60 s, the binding's longest period). `RATE_LIMIT`
/// itself is counted by the agent (see `Agent`): with both set, both apply.
async fn limited(env: &Env, key: &str) -> Option<Error> {
    use worker::js_sys::{Function, Object, Promise, Reflect};
    use worker::wasm_bindgen::JsCast;
    let binding = Reflect::get(env.as_ref(), &"RATE_LIMITER".into()).ok().filter(|b| b.is_object())?;
    let limit: Function = Reflect::get(&binding, &"limit".into()).ok()?.dyn_into().ok()?;
    let arg = Object::new();
    Reflect::set(&arg, &"key".into(), &key.into()).ok()?;
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
async fn issue(req: &mut Request, env: &Env, agent: &str, role: Role) -> Result<Response> {
    let Some(secret) = token_secret(env) else {
        convert::drain(req).await;
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
    let claims = match Claims::issue(agent, role, &body, Date::now().as_millis() as i64) {
        Ok(c) => c,
        Err(e) => return convert::error(&e),
    };
    match crypto::sign(&secret, &claims.signing_input()).await {
        Ok(signature) => Ok(Response::from_json(&claims.answer(&signature))?.with_status(201)),
        Err(e) => convert::error(&e),
    }
}

/// A secret, or a plain var of that name (local dev), if set and not empty.
fn secret(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
        .filter(|t| !t.is_empty())
}

/// The secret that signs scoped tokens, if set.
fn token_secret(env: &Env) -> Option<String> {
    secret(env, "TOKEN_SECRET")
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

/// The caller of a request: the admin token, or a scoped token whose signature WebCrypto
/// verified (`front::presented` takes the token apart). Anything else is `401`.
async fn authorize(env: &Env, token: Option<&str>) -> std::result::Result<Caller, Error> {
    let admin = secret(env, "API_TOKEN");
    match front::presented(token, admin.as_deref())? {
        Presented::Admin => Ok(Caller::Admin),
        Presented::Scoped { signed, signature, claims } => {
            let wrong = || Error::unauthorized("missing or wrong bearer token");
            let key = token_secret(env).ok_or_else(wrong)?;
            match crypto::verify(&key, signed, &signature).await? {
                true => Ok(Caller::Scoped(claims)),
                false => Err(wrong()),
            }
        }
    }
}

/// Sends the request to the agent's Durable Object with the `/agents/{agent}` prefix removed,
/// with its own method (an unknown one stays unknown, and the DO refuses it), without the token,
/// and with `Upgrade` only on an actual socket upgrade: workerd fails a non-`GET` request that
/// carries one with an internal error instead of an answer.
async fn forward(
    req: &Request,
    env: &Env,
    method: &str,
    url: &str,
    query: &str,
    to: &AgentCall<'_>,
    claims: Option<&Claims>,
) -> Result<Response> {
    let AgentCall { agent, role, tail, upgrade, .. } = to;
    let origin = url.find("://").and_then(|i| url[i + 3..].find('/').map(|j| &url[..i + 3 + j])).unwrap_or(url);
    let query = front::forwarded_query(query);
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
    let namespace = match role {
        Role::Agent => "SESSION_AGENT",
        Role::Space => SPACE_BINDING,
    };
    let stub = match env.durable_object(namespace) {
        Ok(ns) => ns.id_from_name(agent)?.get_stub()?,
        Err(_) => {
            return convert::error(&Error::new(
                ErrorKind::NotConfigured,
                "memory spaces are not configured: the Worker has no MEMORY_SPACE binding (see the README)",
            ))
        }
    };
    stub.fetch_with_request(Request::from(inner)).await
}
