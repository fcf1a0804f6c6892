//! CORS for browsers on other origins (`CORS_ORIGINS`: comma-separated origins, or `*`):
//! preflights are answered here without a token, and every answer to an allowed origin, errors
//! included, carries the headers. Unset: no CORS headers at all (same-origin pages only).

use worker::{Env, Headers, Request, Response, Result};

/// What a request from a browser may be told.
pub struct Cors {
    /// The `Access-Control-Allow-Origin` value for this request, when its origin is allowed.
    allow: Option<String>,
    /// Whether `CORS_ORIGINS` is set at all.
    configured: bool,
}

/// Request headers a page may send: the token, JSON bodies, the erase confirmation, and what the
/// AI SDK's and MCP's clients add. (`*` would not cover `authorization`.)
const ALLOW_HEADERS: &str =
    "authorization, content-type, accept, confirm, mcp-session-id, mcp-protocol-version, last-event-id";
/// Answer headers a page may read: the AI SDK's stream marker, MCP's session, and rate limits.
const EXPOSE_HEADERS: &str = "x-vercel-ai-ui-message-stream, mcp-session-id, retry-after";
const ALLOW_METHODS: &str = "GET, HEAD, POST, PUT, PATCH, DELETE";

impl Cors {
    /// The CORS answer for `req` under the `CORS_ORIGINS` var.
    pub fn of(req: &Request, env: &Env) -> Cors {
        let list = env.var("CORS_ORIGINS").map(|v| v.to_string()).unwrap_or_default();
        let list = list.trim();
        let origin = req.headers().get("origin").ok().flatten();
        let allow = origin.and_then(|o| {
            if list == "*" {
                Some("*".to_owned())
            } else {
                list.split(',').map(str::trim).any(|a| !a.is_empty() && a.eq_ignore_ascii_case(&o)).then_some(o)
            }
        });
        Cors { allow, configured: !list.is_empty() }
    }

    /// The answer to a preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`)
    /// when CORS is configured: 204 with the headers for an allowed origin, 403 otherwise.
    pub fn preflight(&self, req: &Request, method: &str) -> Option<Result<Response>> {
        let asks = req.headers().get("access-control-request-method").ok().flatten().is_some();
        if !self.configured || method != "OPTIONS" || !asks {
            return None;
        }
        if self.allow.is_none() {
            let e = session_agent_core::error::Error::forbidden("this origin is not in CORS_ORIGINS");
            return Some(super::convert::error(&e));
        }
        Some((|| {
            let headers = Headers::new();
            headers.set("access-control-allow-methods", ALLOW_METHODS)?;
            headers.set("access-control-allow-headers", ALLOW_HEADERS)?;
            headers.set("access-control-max-age", "86400")?;
            Ok(Response::empty()?.with_status(204).with_headers(headers))
        })())
    }

    /// `resp` with the CORS headers when the origin is allowed (a WebSocket's `101` as it is:
    /// sockets are not subject to CORS).
    pub fn apply(&self, resp: Response) -> Result<Response> {
        let Some(allow) = &self.allow else { return Ok(resp) };
        if resp.status_code() == 101 {
            return Ok(resp);
        }
        // The headers of an answer that came from the Durable Object are immutable: copy them.
        let headers = Headers::new();
        for (k, v) in resp.headers().entries() {
            headers.append(&k, &v)?;
        }
        headers.set("access-control-allow-origin", allow)?;
        headers.set("access-control-expose-headers", EXPOSE_HEADERS)?;
        if allow != "*" {
            headers.append("vary", "Origin")?;
        }
        Ok(resp.with_headers(headers))
    }
}
