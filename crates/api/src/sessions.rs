//! Routes of the sessions registry: `/sessions`, `/sessions/{sid}`, `…/fork`, `…/usage`, `…/storage`.

use super::call::{Call, Pending};
use serde_json::{json, Map, Value as Json};

use super::http::{check_name, opt_str, req_str, Response};
use session_agent_core::error::{Error, Result};
use session_agent_core::metadata::{self, Metadata};
use session_agent_core::page::Cursor;
use session_agent_core::reads;
use session_agent_core::sql::atomically;
use session_agent_core::store::sessions::{self, Change, NewSession};

/// `GET /sessions?limit=&cursor=&metadata.<key>=`: newest `updatedAt` first; a page of `limit`
/// (at most 100) with the `nextCursor` of the page after it (`null` at the end), or every
/// session without `limit`; only those whose metadata matches every `metadata.<key>`.
pub(crate) fn list(c: &Call<'_>) -> Result<Response> {
    let q = &c.query;
    let page = sessions::Page {
        limit: q.int("limit", 1, sessions::MAX_PAGE)?,
        after: q.get("cursor").map(Cursor::parse).transpose()?,
        metadata: metadata::Filter::new(q.family("metadata."))?,
    };
    let (list, next) = reads::sessions(c.env, &page)?;
    Ok(Response::json(200, &json!({ "sessions": list, "nextCursor": next.map(|c| c.text()) })))
}

/// `POST /sessions` `{name, parentSessionId?, model?, source?, metadata?}` → 201.
pub(crate) fn create(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let req = c.req;
    let body = req.json_object()?;
    let parent = opt_str(&body, "parentSessionId")?;
    if let Some(p) = &parent {
        check_name("parentSessionId", p)?;
    }
    let new = NewSession {
        name: req_str(&body, "name")?,
        parent_session_id: parent,
        model: short_str(&body, "model")?,
        source: short_str(&body, "source")?,
        metadata: body_metadata(&body)?.unwrap_or_default(),
    };
    let info = atomically(env.sql, || sessions::create(env.sql, &new, env.now.iso()))?;
    Ok(Response::json(201, &info))
}

/// The body's `metadata`, checked (`null` counts as absent).
pub(crate) fn body_metadata(body: &Map<String, Json>) -> Result<Option<Metadata>> {
    match body.get("metadata") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => metadata::check("metadata", v).map(Some),
    }
}

fn short_str(body: &Map<String, Json>, key: &str) -> Result<Option<String>> {
    let v = opt_str(body, key)?;
    if v.as_ref().is_some_and(|s| s.chars().count() > 256) {
        return Err(Error::invalid(format!("{key} must be at most 256 characters")));
    }
    Ok(v)
}

/// `GET /sessions/{sid}`.
pub(crate) fn get(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    Ok(Response::json(200, &reads::session(s.env, s.id)?))
}

/// `GET /sessions/{sid}/storage`: the rows the session holds, the bytes they store in SQLite
/// and the bytes of its messages' fields in R2 (`store::storage`).
pub(crate) fn storage(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    Ok(Response::json_text(200, session_agent_core::store::storage::of(s.env.sql, s.id)?))
}

/// `PATCH /sessions/{sid}` `{name?, metadata?}`: at least one of them.
pub(crate) fn update(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let req = c.req;
    let body = req.json_object()?;
    let change = Change { name: opt_str(&body, "name")?, metadata: body_metadata(&body)? };
    let info = atomically(s.env.sql, || sessions::update(s.env.sql, s.id, &change, s.env.now.iso()))?;
    Ok(Response::json(200, &info))
}

/// `DELETE /sessions/{sid}`: the session and everything stored for it. Its sockets get
/// `{type:"cleared"}` and an `idle` status, as for a clear.
pub(crate) fn delete<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        s.delete().await?;
        Ok(Response::no_content())
    })
}

/// `POST /sessions/{sid}/fork` `{atMessageId, name?}` → 201 with the new session.
pub(crate) fn fork(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let req = c.req;
    let body = req.json_object()?;
    let at = req_str(&body, "atMessageId")?;
    let name = opt_str(&body, "name")?;
    let info = atomically(s.env.sql, || sessions::fork(s.env.sql, s.id, &at, name.as_deref(), s.env.now.iso()))?;
    Ok(Response::json(201, &info))
}

/// `POST /sessions/{sid}/usage` `{inputTokens, outputTokens, cost}`: adds to the totals.
pub(crate) fn usage(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let req = c.req;
    let body = req.json_object()?;
    let input = count(&body, "inputTokens")?;
    let output = count(&body, "outputTokens")?;
    let cost = match body.get("cost") {
        None | Some(Json::Null) => 0.0,
        Some(v) => v
            .as_f64()
            .filter(|c| *c >= 0.0 && c.is_finite())
            .ok_or_else(|| Error::invalid("cost must be a number, not negative"))?,
    };
    let info = atomically(s.env.sql, || sessions::add_usage(s.env.sql, s.id, input, output, cost, s.env.now.iso()))?;
    Ok(Response::json(200, &info))
}

fn count(body: &Map<String, Json>, key: &str) -> Result<i64> {
    match body.get(key) {
        None | Some(Json::Null) => Ok(0),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64))
            .filter(|n| *n >= 0)
            .ok_or_else(|| Error::invalid(format!("{key} must be a whole number, not negative"))),
    }
}
