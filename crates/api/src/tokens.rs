//! `POST /tokens/revoke`: revokes every scoped token of the agent issued before a time. (Tokens
//! are issued by the front door, which holds the signing secret: see [`super::access`].)

use super::call::Call;
use serde_json::json;

use super::http::{opt_str, Response};
use session_agent_core::access::revoke as store_revocation;
use session_agent_core::error::{Error, Result};
use session_agent_core::time::{iso_millis, parse_iso};

/// `POST /tokens/revoke` `{before?}` (ISO-8601; default: now) → `{before}`, the revocation time
/// in force (it only moves forward). Open sockets of revoked tokens are closed.
pub(crate) fn revoke(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let req = c.req;
    let body = req.json_object()?;
    if let Some(k) = body.keys().find(|k| k.as_str() != "before") {
        return Err(Error::invalid(format!("unknown field {k:?}: the body is {{before?}}")));
    }
    let before = match opt_str(&body, "before")? {
        Some(t) => parse_iso(&t).ok_or_else(|| Error::invalid("before must be an ISO-8601 timestamp"))?,
        None => env.now.ms(),
    };
    if before > env.now.ms() {
        return Err(Error::invalid("before may not lie in the future (it would revoke tokens not issued yet)"));
    }
    let in_force = store_revocation(env.sql, before)?;
    env.events.revoked(in_force);
    Ok(Response::json(200, &json!({"before": iso_millis(in_force)})))
}
