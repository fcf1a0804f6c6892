//! Search routes: `GET /sessions/{sid}/search` and `GET /search` (across sessions).

use super::call::{Call, Pending};
use super::http::{Query, Response};
use session_agent_core::error::Result;
use session_agent_core::metadata;
use session_agent_core::reads;
use session_agent_core::store::search::{DEFAULT_LIMIT, MAX_LIMIT};

fn params(q: &Query) -> Result<(String, i64)> {
    let text = q.require("q")?.to_owned();
    let limit = q.int("limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    Ok((text, limit))
}

/// `GET /sessions/{sid}/search?q=&limit=`.
pub(crate) fn in_session<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let _req = c.req;
        let (q, limit) = params(&c.query)?;
        Ok(Response::json_text(200, reads::search_in_session(s, &q, limit).await?))
    })
}

/// `GET /search?q=&limit=&metadata.<key>=`: every session of the agent (those whose metadata
/// matches every `metadata.<key>`); hits carry `sessionId`.
pub(crate) fn across<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let _req = c.req;
        let (q, limit) = params(&c.query)?;
        let metadata = metadata::Filter::new(c.query.family("metadata."))?;
        Ok(Response::json_text(200, reads::search_across(env, &q, limit, &metadata).await?))
    })
}
