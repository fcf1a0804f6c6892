//! Search routes: `GET /sessions/{sid}/search` and `GET /search` (across sessions).

use super::http::{int_param, Request, Response};
use session_agent_core::env::Env;
use session_agent_core::error::{Error, Result};
use session_agent_core::reads;
use session_agent_core::session::Session;
use session_agent_core::store::search::{DEFAULT_LIMIT, MAX_LIMIT};

fn params(req: &Request) -> Result<(String, i64)> {
    let q = req.query_map()?;
    let text = q.get("q").cloned().ok_or_else(|| Error::invalid("q is required"))?;
    let limit = int_param(&q, "limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    Ok((text, limit))
}

/// `GET /sessions/{sid}/search?q=&limit=`.
pub async fn in_session(s: &Session<'_>, req: &Request) -> Result<Response> {
    let (q, limit) = params(req)?;
    Ok(Response::json_text(200, reads::search_in_session(s, &q, limit).await?))
}

/// `GET /search?q=&limit=`: every session of the agent; hits carry `sessionId`.
pub async fn across(env: &Env<'_>, req: &Request) -> Result<Response> {
    let (q, limit) = params(req)?;
    Ok(Response::json_text(200, reads::search_across(env, &q, limit).await?))
}
