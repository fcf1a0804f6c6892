//! Routes of context blocks, the system prompt and the tools: `/sessions/{sid}/context…`,
//! `…/prompt`, `…/prompt/refresh`, `…/tools`, `…/tools/{name}`.

use super::call::{Call, Pending};
use serde_json::{json, Map, Value as Json};

use super::http::{opt_str, req_str, Response};
use session_agent_core::config::BlockConfig;
use session_agent_core::context::entries::MAX_PAGE;
use session_agent_core::error::{Error, Result};
use session_agent_core::session::blocks::Write;
use session_agent_core::store::message::{check_id, MAX_INDEXED_BYTES};

/// `GET /sessions/{sid}/context`: every block with its content, in prompt order.
pub(crate) fn list<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        Ok(Response::json(200, &json!({ "blocks": s.blocks().await? })))
    })
}

/// `GET /sessions/{sid}/context/{label}`.
pub(crate) fn get<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let label = c.params.label.as_str();
        Ok(Response::json(200, &s.block(label).await?))
    })
}

/// `PUT /sessions/{sid}/context/{label}` `{content}`.
pub(crate) fn replace<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let label = c.params.label.as_str();
        let req = c.req;
        let body = req.json_object()?;
        let content = req_str(&body, "content")?;
        let version = match body.get("version") {
            None | Some(Json::Null) => None,
            Some(v) => Some(v.as_i64().filter(|v| *v >= 0).ok_or_else(|| {
                Error::invalid("version must be a non-negative integer (the version of the text you read)")
            })?),
        };
        Ok(Response::json(200, &s.write_block(label, &content, Write::Replace(version)).await?))
    })
}

/// `POST /sessions/{sid}/context/{label}/append` `{content}`.
pub(crate) fn append<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let label = c.params.label.as_str();
        let req = c.req;
        let content = req_str(&req.json_object()?, "content")?;
        Ok(Response::json(200, &s.write_block(label, &content, Write::Append).await?))
    })
}

/// `POST /sessions/{sid}/context` `{label, kind, …}`: adds a block to this session → 201.
pub(crate) fn add<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        let cfg: BlockConfig = serde_json::from_value(Json::Object(req.json_object()?))
            .map_err(|e| Error::invalid(format!("block: {e}")))?;
        Ok(Response::json(201, &s.add_block(cfg).await?))
    })
}

/// `DELETE /sessions/{sid}/context/{label}` → 204, 404 when the session has no such block.
pub(crate) fn remove(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let label = c.params.label.as_str();
    s.remove_block(label)?;
    Ok(Response::no_content())
}

/// Most entries of one `POST …/entries`.
pub(crate) const MAX_INGEST: usize = 1000;

/// `GET /sessions/{sid}/context/{label}/entries?limit=&cursor=` → `{entries, nextCursor}`.
pub(crate) fn entries(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let label = c.params.label.as_str();
    let _req = c.req;
    let q = &c.query;
    let limit = q.int("limit", 1, MAX_PAGE)?.unwrap_or(MAX_PAGE);
    let (entries, next) = s.entries(label, limit, q.get("cursor"))?;
    Ok(Response::json(200, &json!({"entries": entries, "nextCursor": next})))
}

/// `POST /sessions/{sid}/context/{label}/entries` `{entries: [{key?, title?, content}]}` → 201
/// `{keys}`: all written, or none.
pub(crate) fn ingest(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let label = c.params.label.as_str();
    let req = c.req;
    let body = req.json_object()?;
    let list =
        body.get("entries").and_then(Json::as_array).ok_or_else(|| Error::invalid("entries must be an array"))?;
    if list.is_empty() || list.len() > MAX_INGEST {
        return Err(Error::invalid(format!("entries must hold 1 to {MAX_INGEST} entries")));
    }
    let mut items = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let e = e.as_object().ok_or_else(|| Error::invalid(format!("entries[{i}] must be an object")))?;
        let at = |err: Error| Error::invalid(format!("entries[{i}].{}", err.message));
        let key = opt_str(e, "key").map_err(at)?;
        if let Some(k) = &key {
            check_id("key", k).map_err(at)?;
        }
        let title = opt_str(e, "title").map_err(at)?;
        let content = req_str(e, "content").map_err(at)?;
        if content.len() > MAX_INDEXED_BYTES {
            return Err(Error::too_large(format!(
                "entries[{i}].content has {} bytes; an entry holds at most {MAX_INDEXED_BYTES}",
                content.len()
            )));
        }
        items.push((key, title, content));
    }
    Ok(Response::json(201, &json!({ "keys": s.ingest(label, &items)? })))
}

/// `GET /sessions/{sid}/context/{label}/entries/{key}`.
pub(crate) fn entry(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let label = c.params.label.as_str();
    let key = c.params.key.as_str();
    Ok(Response::json(200, &s.entry(label, key)?))
}

/// `DELETE /sessions/{sid}/context/{label}/entries/{key}` → 204.
pub(crate) fn delete_entry(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let label = c.params.label.as_str();
    let key = c.params.key.as_str();
    s.delete_entry(label, key)?;
    Ok(Response::no_content())
}

/// `GET /sessions/{sid}/prompt` → `{prompt, frozen}`: the stored copy, rendered and stored the
/// first time.
pub(crate) fn prompt<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let (prompt, frozen) = s.prompt().await?;
        Ok(Response::json(200, &json!({ "prompt": prompt, "frozen": frozen })))
    })
}

/// `POST /sessions/{sid}/prompt/refresh` → `{prompt}` rendered now and stored.
pub(crate) fn refresh<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        Ok(Response::json(200, &json!({ "prompt": s.refresh_prompt().await? })))
    })
}

/// `GET /sessions/{sid}/tools` → `{tools: [{name, description, inputSchema}]}`.
pub(crate) fn tools(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    Ok(Response::json(200, &json!({ "tools": s.tools()? })))
}

/// `POST /sessions/{sid}/tools/{name}` `{input}` → `{output}`, the string the model sees.
pub(crate) fn run_tool<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let name = c.params.name.as_str();
        let req = c.req;
        let input = req.json_object()?.remove("input").unwrap_or_else(|| Json::Object(Map::new()));
        Ok(Response::json(200, &json!({ "output": s.run_tool(name, &input).await?.output })))
    })
}
