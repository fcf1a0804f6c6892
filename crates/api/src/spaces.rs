//! Memory spaces over HTTP: the routes a space has of its own (its shared blocks, and the
//! `/link/…` routes its agents' Durable Objects call: extraction into the space, block writes
//! that name the agent), and the agent's admin route `/space` (which space it uses). A space's
//! memory routes are the agent's (`memories`), in the space's own route table
//! (`routes::SPACE_ROUTES`). [`request`] is the one place an agent's typed
//! [`Operation`] on its space meets the path of the route that answers it.

use serde_json::{json, Map, Value as Json};

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::call::{Call, Pending};
use super::http::{req_str, Method, Request, Response};
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::check_name;
use session_agent_core::memory::extract::{distill, Exchange, Source};
use session_agent_core::memory::Memories;
use session_agent_core::space::blocks::{self, Write};
use session_agent_core::space::{choice, Operation};
use session_agent_core::sql::atomically;

/// What a path segment keeps as it is (RFC 3986's unreserved characters); the rest is
/// percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The request to a space's Durable Object that performs `op`: a route of
/// `routes::SPACE_ROUTES` (the admin's `/link/…` ones for what an agent writes). The Workers
/// layer sends it to the space's stub; the native tests to the space's `handle`.
pub fn request(op: &Operation) -> Request {
    let seg = |label: &str| utf8_percent_encode(label, SEGMENT).to_string();
    match op {
        Operation::Recall { text, limit, categories, tags } => {
            let mut q = form_urlencoded::Serializer::new(String::new());
            q.append_pair("q", text).append_pair("limit", &limit.to_string());
            for t in tags {
                q.append_pair("anyTag", t);
            }
            for c in categories {
                q.append_pair("category", c.as_str());
            }
            Request::new(Method::Get, &format!("/memories/search?{}", q.finish()))
        }
        Operation::ReadBlock { label } => Request::new(Method::Get, &format!("/blocks/{}", seg(label))),
        Operation::AppendBlock { label, content, agent, max_tokens, initial } => {
            Request::new(Method::Post, &format!("/link/blocks/{}/append", seg(label))).json(&json!({
                "content": content, "agent": agent, "maxTokens": max_tokens, "initial": initial,
            }))
        }
        Operation::ReplaceBlock { label, content, version, agent, max_tokens } => {
            Request::new(Method::Put, &format!("/link/blocks/{}", seg(label))).json(&json!({
                "content": content, "version": version, "agent": agent, "maxTokens": max_tokens,
            }))
        }
        Operation::Extract { agent, session, exchange, tags } => Request::new(Method::Post, "/link/extract")
            .json(&json!({ "agent": agent, "sessionId": session, "exchange": exchange, "tags": tags })),
    }
}

/// `GET /space` (an agent's): which space it uses, from where, and how.
pub(crate) fn get(c: &Call<'_>) -> Result<Response> {
    let e = c.env;
    Ok(Response::json(200, &choice::of(e.sql, e.config, e.agent)?))
}

/// `PUT /space` `{space}`: an admin's choice (`null`: none, whatever the rule says).
pub(crate) fn choose(c: &Call<'_>) -> Result<Response> {
    let body = c.req.json_object()?;
    if let Some(k) = body.keys().find(|k| *k != "space") {
        return Err(Error::invalid(format!("unknown field {k:?}: the body is {{\"space\": <name or null>}}")));
    }
    let space = match body.get("space") {
        Some(Json::Null) => None,
        Some(Json::String(s)) => {
            check_name("space", s)?;
            Some(s.as_str())
        }
        _ => return Err(Error::invalid("space must be a space name (1-128 characters of [A-Za-z0-9._:-]) or null")),
    };
    let e = c.env;
    choice::choose(e.sql, space, e.now.iso())?;
    get(c)
}

/// `DELETE /space`: the admin's choice forgotten; the rule decides again.
pub(crate) fn forget(c: &Call<'_>) -> Result<Response> {
    choice::forget(c.env.sql)?;
    get(c)
}

/// `GET /blocks` (a space's): its shared blocks.
pub(crate) fn list_blocks(c: &Call<'_>) -> Result<Response> {
    Ok(Response::json(200, &json!({ "blocks": blocks::list(c.env.sql)? })))
}

/// `GET /blocks/{label}`: empty (`updatedAt` null) when never written or deleted, at the label's
/// last version.
pub(crate) fn get_block(c: &Call<'_>) -> Result<Response> {
    Ok(Response::json(200, &blocks::get(c.env.sql, &c.params.label)?))
}

/// `DELETE /blocks/{label}` → 204 (the delete counts a version); 404 when it holds no text.
pub(crate) fn delete_block(c: &Call<'_>) -> Result<Response> {
    let label = &c.params.label;
    match atomically(c.env.sql, || blocks::delete(c.env.sql, label, c.env.now.iso()))? {
        true => Ok(Response::no_content()),
        false => Err(Error::not_found(format!("Block \"{label}\" not found"))),
    }
}

/// Who writes: the agent a `/link/…` body names; nobody for the space's own routes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    Caller,
    Agent,
}

/// The fields of a block write: `content`, `maxTokens?`, and on `/link/…` `agent` (and
/// `initial` for an append); `version` for a replace.
struct Fields {
    content: String,
    max_tokens: Option<i64>,
    agent: Option<String>,
    initial: Option<String>,
}

fn fields(body: &Map<String, Json>, writer: Writer, allowed: &[&str]) -> Result<Fields> {
    if let Some(k) = body.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::invalid(format!("unknown field {k:?}: a block write has {}", allowed.join(", "))));
    }
    let opt_str = |k: &str| match body.get(k) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{k} must be a string"))),
    };
    let max_tokens = match body.get("maxTokens") {
        None | Some(Json::Null) => None,
        Some(v) => {
            Some(v.as_i64().filter(|n| *n >= 1).ok_or_else(|| Error::invalid("maxTokens must be a positive integer"))?)
        }
    };
    let agent = match writer {
        Writer::Agent => Some(opt_str("agent")?.ok_or_else(|| Error::invalid("agent must be a string"))?),
        Writer::Caller => None,
    };
    Ok(Fields { content: req_str(body, "content")?, max_tokens, agent, initial: opt_str("initial")? })
}

fn replace_as(c: &Call<'_>, writer: Writer) -> Result<Response> {
    let body = c.req.json_object()?;
    let allowed: &[&str] = match writer {
        Writer::Caller => &["content", "version", "maxTokens"],
        Writer::Agent => &["content", "version", "maxTokens", "agent"],
    };
    let f = fields(&body, writer, allowed)?;
    let read = body.get("version").and_then(Json::as_i64).filter(|v| *v >= 0).ok_or_else(|| {
        Error::invalid("version must be the non-negative integer version of the text you read (0: never written)")
    })?;
    let w = Write { content: &f.content, by: f.agent.as_deref(), max_tokens: f.max_tokens, initial: None };
    Ok(Response::json(200, &blocks::replace(c.env.sql, &c.params.label, read, &w, c.env.now.iso())?))
}

fn append_as(c: &Call<'_>, writer: Writer) -> Result<Response> {
    let body = c.req.json_object()?;
    let allowed: &[&str] = match writer {
        Writer::Caller => &["content", "maxTokens"],
        Writer::Agent => &["content", "maxTokens", "agent", "initial"],
    };
    let f = fields(&body, writer, allowed)?;
    let w =
        Write { content: &f.content, by: f.agent.as_deref(), max_tokens: f.max_tokens, initial: f.initial.as_deref() };
    Ok(Response::json(200, &blocks::append(c.env.sql, &c.params.label, &w, c.env.now.iso())?))
}

/// `PUT /blocks/{label}` `{content, version, maxTokens?}`: `409 version_conflict` when another
/// write came after the version read.
pub(crate) fn replace(c: &Call<'_>) -> Result<Response> {
    replace_as(c, Writer::Caller)
}

/// `POST /blocks/{label}/append` `{content, maxTokens?}`.
pub(crate) fn append(c: &Call<'_>) -> Result<Response> {
    append_as(c, Writer::Caller)
}

/// `PUT /link/blocks/{label}`: an agent's replace (`agent` names it).
pub(crate) fn link_replace(c: &Call<'_>) -> Result<Response> {
    replace_as(c, Writer::Agent)
}

/// `POST /link/blocks/{label}/append`: an agent's append (`initial`: its block's configured text,
/// what a label never written starts from).
pub(crate) fn link_append(c: &Call<'_>) -> Result<Response> {
    append_as(c, Writer::Agent)
}

/// `POST /link/extract` `{agent, sessionId, exchange, tags?}`: an agent's exchange distilled into the
/// space's memories (as the agent would into its own), each tagged `metadata.agent` and given
/// the agent's scope `tags`.
pub(crate) fn extract<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let body = c.req.json_object()?;
        let agent = req_str(&body, "agent")?;
        check_name("agent", &agent)?;
        let session = req_str(&body, "sessionId")?;
        check_name("sessionId", &session)?;
        let x: Exchange = serde_json::from_value(body.get("exchange").cloned().unwrap_or(Json::Null))
            .map_err(|e| Error::invalid(format!("exchange: {e}")))?;
        let tags: Vec<String> = match body.get("tags") {
            None | Some(Json::Null) => Vec::new(),
            Some(t) => t
                .as_array()
                .and_then(|a| a.iter().map(|t| t.as_str().map(str::to_owned)).collect())
                .ok_or_else(|| Error::invalid("tags must be an array of strings"))?,
        };
        session_agent_core::config::memory::check_scope_tags("tags", &tags)?;
        let from = Source { agent: Some(&agent), tags: &tags };
        let out = distill(&Memories::new(c.env), &session, &x, from).await?;
        Ok(Response::json(200, &out))
    })
}
