//! Long-term memory routes: `/memories` (store, list, recall, get, change, history, forget,
//! forget all) and `POST /sessions/{sid}/memories/extract`.

use super::call::{Answer, Call};

use serde_json::{json, Map, Value as Json};

use super::http::{self, check_name, opt_str, Response};
use session_agent_core::error::{Error, Result};
use session_agent_core::memory::extract;
use session_agent_core::memory::recall::{Query, DEFAULT_LIMIT, MAX_LIMIT};
use session_agent_core::memory::store::{self, MAX_PAGE};
use session_agent_core::memory::{By, Category, Filter, Memories, NewMemory, Patch, Stored};

/// Default page of `GET /memories`.
const DEFAULT_PAGE: i64 = 50;

fn category(v: Option<&str>) -> Result<Option<Category>> {
    v.map(Category::parse).transpose()
}

/// `category`, `tag`, `sessionId`, as `value` gives them (from the query string, or a body).
fn filter(value: &dyn Fn(&str) -> Option<String>) -> Result<Filter> {
    let session_id = value("sessionId");
    if let Some(s) = &session_id {
        check_name("sessionId", s)?;
    }
    Ok(Filter { category: category(value("category").as_deref())?, tag: value("tag"), session_id, ..Filter::default() })
}

/// The filter of a query string.
fn query_filter(q: &http::Query) -> Result<Filter> {
    filter(&|k| q.get(k).map(str::to_owned))
}

fn tags(body: &Map<String, Json>) -> Result<Option<Vec<String>>> {
    match body.get("tags") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Array(a)) => a
            .iter()
            .map(|t| t.as_str().map(str::to_owned).ok_or_else(|| Error::invalid("tags must be an array of strings")))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(_) => Err(Error::invalid("tags must be an array of strings")),
    }
}

/// `score`: a number in [0, 1], `null` (`Some(None)`), or absent (`None`).
fn score(body: &Map<String, Json>) -> Result<Option<Option<f64>>> {
    match body.get("score") {
        None => Ok(None),
        Some(Json::Null) => Ok(Some(None)),
        Some(v) => match v.as_f64() {
            Some(s) if (0.0..=1.0).contains(&s) => Ok(Some(Some(s))),
            _ => Err(Error::invalid("score must be a number from 0 to 1, or null")),
        },
    }
}

fn known(body: &Map<String, Json>, keys: &[&str]) -> Result<()> {
    match body.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(Error::invalid(format!("unknown field {k:?}: expected one of {}", keys.join(", ")))),
        None => Ok(()),
    }
}

/// Most memories of one `POST /memories/batch`.
pub(crate) const MAX_BATCH: usize = 1000;

/// `POST /memories`: 201 with the new memory, or 200 with the one it was merged into.
pub(crate) fn create<'c>(c: &'c Call<'c>) -> Answer<'c> {
    Box::pin(async move {
        let env = c.env;
        let req = c.req;
        let new = new_memory(&req.json_object()?)?;
        let (m, stored) = Memories::new(env).remember(new, By::Api).await?;
        Ok(Response::json(if stored == Stored::Created { 201 } else { 200 }, &m))
    })
}

/// `POST /memories/batch` `{memories: [...]}` (each as for `POST /memories`, up to 1,000):
/// 201 `{memories}` in order, all stored (or merged) or none.
pub(crate) fn create_all<'c>(c: &'c Call<'c>) -> Answer<'c> {
    Box::pin(async move {
        let env = c.env;
        let req = c.req;
        let body = req.json_object()?;
        known(&body, &["memories"])?;
        let list =
            body.get("memories").and_then(Json::as_array).ok_or_else(|| Error::invalid("memories must be an array"))?;
        if list.is_empty() || list.len() > MAX_BATCH {
            return Err(Error::invalid(format!("memories must hold 1 to {MAX_BATCH} memories")));
        }
        let all = list
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let m = m.as_object().ok_or_else(|| Error::invalid(format!("memories[{i}] must be an object")))?;
                new_memory(m).map_err(|e| Error::new(e.kind, format!("memories[{i}]: {}", e.message)))
            })
            .collect::<Result<Vec<_>>>()?;
        let done = Memories::new(env).remember_all(&all, By::Api).await?;
        let memories: Vec<_> = done.into_iter().map(|(m, _)| m).collect();
        Ok(Response::json(201, &json!({ "memories": memories })))
    })
}

fn new_memory(body: &Map<String, Json>) -> Result<NewMemory> {
    known(body, &["content", "category", "tags", "score", "sessionId", "messageId", "expiresAt"])?;
    let content = opt_str(body, "content")?.ok_or_else(|| Error::invalid("content is required"))?;
    let session_id = opt_str(body, "sessionId")?;
    if let Some(s) = &session_id {
        check_name("sessionId", s)?;
    }
    let message_id = opt_str(body, "messageId")?;
    if let Some(m) = &message_id {
        session_agent_core::store::message::check_id("messageId", m)?;
    }
    Ok(NewMemory {
        content,
        category: category(opt_str(body, "category")?.as_deref())?.unwrap_or_default(),
        tags: tags(body)?.unwrap_or_default(),
        score: score(body)?.flatten(),
        session_id,
        message_id,
        expires_at: opt_str(body, "expiresAt")?,
    })
}

/// `GET /memories?category=&tag=&sessionId=&limit=&cursor=`: newest first.
pub(crate) fn list(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let _req = c.req;
    let q = &c.query;
    let limit = q.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let (memories, next) = store::list(env.sql, &query_filter(q)?, limit, q.get("cursor"), &env.now)?;
    Ok(Response::json(200, &json!({"memories": memories, "nextCursor": next})))
}

/// `GET /memories/search?q=&category=&tag=&sessionId=&limit=`: ranked, with why.
pub(crate) fn search<'c>(c: &'c Call<'c>) -> Answer<'c> {
    Box::pin(async move {
        let env = c.env;
        let _req = c.req;
        let q = &c.query;
        let text = q.require("q")?.to_owned();
        let limit = q.int("limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
        let hits = Memories::new(env).recall(&Query { text, filter: query_filter(q)?, limit }).await?;
        Ok(Response::json(200, &json!({ "results": hits })))
    })
}

fn missing(id: &str) -> Error {
    Error::not_found(format!("memory {id} not found"))
}

/// `GET /memories/{mid}`.
pub(crate) fn get(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let id = c.params.memory.as_str();
    let m = store::get(env.sql, id, &env.now)?.ok_or_else(|| missing(id))?;
    Ok(Response::json(200, &m))
}

/// `PATCH /memories/{mid}`: `{content?, tags?, score?, category?, expiresAt?}`.
pub(crate) fn patch<'c>(c: &'c Call<'c>) -> Answer<'c> {
    Box::pin(async move {
        let env = c.env;
        let id = c.params.memory.as_str();
        let req = c.req;
        let body = req.json_object()?;
        known(&body, &["content", "tags", "score", "category", "expiresAt"])?;
        let expires_at = match body.get("expiresAt") {
            None => None,
            Some(Json::Null) => Some(None),
            Some(Json::String(s)) => Some(Some(s.clone())),
            Some(_) => return Err(Error::invalid("expiresAt must be a timestamp or null")),
        };
        let patch = Patch {
            content: opt_str(&body, "content")?,
            tags: tags(&body)?,
            score: score(&body)?,
            category: category(opt_str(&body, "category")?.as_deref())?,
            expires_at,
        };
        Ok(Response::json(200, &Memories::new(env).patch(id, &patch, By::Api).await?))
    })
}

/// `GET /memories/{mid}/history`: every version, oldest first.
pub(crate) fn history(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let id = c.params.memory.as_str();
    let versions = store::history(env.sql, id, &env.now)?.ok_or_else(|| missing(id))?;
    Ok(Response::json(200, &json!({ "versions": versions })))
}

/// `DELETE /memories/{mid}`.
pub(crate) fn delete(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let id = c.params.memory.as_str();
    Memories::new(env).forget(id)?;
    Ok(Response::no_content())
}

/// `DELETE /memories?category=&tag=&sessionId=` (the filters may also come as a JSON body):
/// `forgetAll`, `{deleted: n}`.
pub(crate) fn delete_all(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let req = c.req;
    let q = &c.query;
    query_filter(q)?; // the query is checked even where the body overrides it
    let body = req.json_object()?;
    known(&body, &["category", "tag", "sessionId"])?;
    for key in ["category", "tag", "sessionId"] {
        opt_str(&body, key)?;
    }
    let value = |k: &str| opt_str(&body, k).ok().flatten().or_else(|| q.get(k).map(str::to_owned));
    let n = Memories::new(env).forget_all(&filter(&value)?)?;
    Ok(Response::json(200, &json!({ "deleted": n })))
}

/// `POST /sessions/{sid}/memories/extract` `{leafId?}`: `{added, updated, deleted}`.
pub(crate) fn extract<'c>(c: &'c Call<'c>) -> Answer<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        let body = req.json_object()?;
        known(&body, &["leafId"])?;
        let leaf = opt_str(&body, "leafId")?;
        if let Some(l) = &leaf {
            if !s.tree().contains(l)? {
                return Err(Error::not_found(format!("message {l} not found in session {}", s.id)));
            }
        }
        let done = extract::run(&Memories::new(s.env), s.id, leaf.as_deref()).await?;
        Ok(Response::json(200, &done))
    })
}
