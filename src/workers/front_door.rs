//! The front door Worker: `GET /healthz`, and `/agents/{agent}/…` forwarded to that agent's
//! `SessionAgent` after the bearer-token check. Another Worker that binds the class calls the
//! DO directly and skips this (a binding is already a capability).

use subtle::ConstantTimeEq;
use worker::{event, Context, Env, Method, Request, RequestInit, Response, Result};

use super::convert;
use crate::api::http::{check_name, decode_segment};
use crate::core::error::{Error, ErrorKind};

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let path = req.path();
    if path == "/healthz" {
        return Response::ok("ok");
    }
    if path == "/" && req.method() == Method::Get && chat_page_enabled(&env) {
        let mut resp = Response::from_html(CHAT_PAGE)?;
        resp.headers_mut().set("cache-control", "no-store")?;
        return Ok(resp);
    }
    let Some(rest) = path.strip_prefix("/agents/") else {
        return convert::error(&Error::not_found(format!("no route for {path}; the API lives under /agents/{{agent}}/")));
    };
    let (agent_raw, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let agent = match decode_segment("agent", agent_raw).and_then(|a| check_name("agent", &a).map(|_| a)) {
        Ok(a) => a,
        Err(e) => return convert::error(&e),
    };
    if let Err(e) = authorize(&req, &env) {
        let mut resp = convert::error(&e)?;
        if e.kind == ErrorKind::Unauthorized {
            resp.headers_mut().set("www-authenticate", "Bearer")?;
        }
        return Ok(resp);
    }
    if convert::declared_too_large(&req) {
        return convert::error(&Error::too_large("request body is over 32 MiB"));
    }
    forward(req, &env, &agent, if tail.is_empty() { "/" } else { tail }).await
}

/// The minimal chat page (`GET /`): talks to an agent over its WebSocket with a token the user
/// types in; it holds no secret itself.
const CHAT_PAGE: &str = include_str!("chat_page.html");

/// The page is served unless the var `CHAT_PAGE` is `off` (or `false`, `0`).
fn chat_page_enabled(env: &Env) -> bool {
    let v = env.var("CHAT_PAGE").map(|v| v.to_string()).unwrap_or_default();
    !matches!(v.trim(), "off" | "false" | "0")
}

/// The token from `Authorization: Bearer …`, or `?token=` on a WebSocket upgrade (browsers
/// cannot set headers there).
fn presented_token(req: &Request) -> Option<String> {
    if let Some(h) = req.headers().get("authorization").ok().flatten() {
        return h.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
    }
    let upgrade = req.headers().get("upgrade").ok().flatten();
    if upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        let url = req.url().ok()?;
        return url.query_pairs().find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    }
    None
}

fn authorize(req: &Request, env: &Env) -> std::result::Result<(), Error> {
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
    let given = presented_token(req).unwrap_or_default();
    let same = given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()));
    if same {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::Unauthorized, "missing or wrong bearer token"))
    }
}

/// Sends the request to the agent's Durable Object with the `/agents/{agent}` prefix removed.
async fn forward(req: Request, env: &Env, agent: &str, tail: &str) -> Result<Response> {
    let mut url = req.url()?;
    url.set_path(tail);
    // A WebSocket's `?token=` stops here too.
    let kept: Vec<(String, String)> = url.query_pairs().filter(|(k, _)| k != "token").map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    let stub = env.durable_object("SESSION_AGENT")?.id_from_name(agent)?.get_stub()?;
    let method = req.method();
    let mut init = RequestInit::new();
    // The token stops here: the DO never sees it (nor logs it).
    let headers = req.headers().clone();
    headers.delete("authorization")?;
    init.with_method(method.clone()).with_headers(headers);
    if !matches!(method, Method::Get | Method::Head) {
        init.with_body(req.inner().body().map(Into::into));
    }
    stub.fetch_with_request(Request::new_with_init(url.as_str(), &init)?).await
}
