//! Long-term memory routes: `/memories` (store, list, recall, get, store or replace by id, change, history, forget,
//! forget all) and `POST /sessions/{sid}/memories/extract`.

use super::call::{Call, Pending};

use serde_json::{json, Map, Value as Json};

use super::http::{self, check_name, opt_str, Response};
use super::sessions::body_metadata;
use session_agent_core::error::{Error, Result};
use session_agent_core::memory::extract;
use session_agent_core::memory::recall::{Query, DEFAULT_LIMIT, MAX_LIMIT};
use session_agent_core::memory::store::{self, Span, MAX_PAGE, MAX_TAG_CHARS};
use session_agent_core::memory::{By, Category, Filter, Held, Memories, NewMemory, Patch, Stored};
use session_agent_core::metadata;
use session_agent_core::time;

/// Default page of `GET /memories`.
const DEFAULT_PAGE: i64 = 50;

fn category(v: Option<&str>) -> Result<Option<Category>> {
    v.map(Category::parse).transpose()
}

/// The memory filters but `metadata.<key>` (a family of names), each taking one value but
/// `category` (also a comma list), `tag` and `anyTag`, which may be repeated.
const FILTERS: [&str; 8] =
    ["category", "tag", "anyTag", "createdAfter", "createdBefore", "updatedAfter", "updatedBefore", "sessionId"];

/// Most values of `tag`, and of `anyTag` (a memory holds at most 16 tags).
const MAX_TAG_FILTERS: usize = 16;

/// The memory filters as `values` gives them (every value of a name: a query parameter each
/// time it is repeated, or a body field's), with the `metadata.<key>` pairs. Each is checked:
/// `category` one or a comma list of categories, `tag` and `anyTag` tags (compared exactly),
/// the four times ISO-8601, `sessionId` a session id, and the metadata pairs.
fn filter(values: &dyn Fn(&str) -> Vec<String>, metadata: Vec<(String, String)>) -> Result<Filter> {
    let one = |name: &str| -> Result<Option<String>> {
        let mut v = values(name);
        match v.len() {
            0 | 1 => Ok(v.pop()),
            _ => Err(Error::invalid(format!("{name} is given more than once (it takes one value)"))),
        }
    };
    let mut categories: Vec<Category> = Vec::new();
    for list in values("category") {
        for c in list.split(',') {
            let c = Category::parse(c.trim())
                .map_err(|_| Error::invalid("category must be core, daily or conversation, or a comma list of them"))?;
            if !categories.contains(&c) {
                categories.push(c);
            }
        }
    }
    let tags = |name: &str| -> Result<Vec<String>> {
        let given = values(name);
        if given.len() > MAX_TAG_FILTERS {
            return Err(Error::invalid(format!("{name} is given at most {MAX_TAG_FILTERS} times")));
        }
        for t in &given {
            let n = t.chars().count();
            if n == 0 || n > MAX_TAG_CHARS || t.chars().any(char::is_control) {
                return Err(Error::invalid(format!(
                    "{name} must be a tag: 1-{MAX_TAG_CHARS} characters without control characters"
                )));
            }
        }
        Ok(given)
    };
    let span = |after: &str, before: &str| -> Result<Span> {
        Ok(Span {
            after: one(after)?.map(|t| time::instant(after, &t)).transpose()?,
            before: one(before)?.map(|t| time::instant(before, &t)).transpose()?,
        })
    };
    let session_id = one("sessionId")?;
    if let Some(s) = &session_id {
        check_name("sessionId", s)?;
    }
    Ok(Filter {
        categories,
        tags: tags("tag")?,
        any_tags: tags("anyTag")?,
        created: span("createdAfter", "createdBefore")?,
        updated: span("updatedAfter", "updatedBefore")?,
        metadata: metadata::Filter::new(metadata)?,
        session_id,
        ..Filter::default()
    })
}

/// The filter of a read's query string, with the facts it reads: those that hold now, or `asOf`
/// a time, or with `includeSuperseded=1` all of them.
fn query_filter(q: &http::Query) -> Result<Filter> {
    let held = match (q.get("asOf"), q.get("includeSuperseded")) {
        (Some(_), Some(_)) => return Err(Error::invalid("asOf and includeSuperseded cannot be used together")),
        (Some(at), None) => Held::At(store::check_as_of(at)?),
        (None, Some("1" | "true")) => Held::Ever,
        (None, Some("0" | "false") | None) => Held::Now,
        (None, Some(v)) => return Err(Error::invalid(format!("includeSuperseded must be 1 or 0 (got {v:?})"))),
    };
    Ok(Filter { held, ..filter(&|k| q.all(k), q.family("metadata."))? })
}

/// The filters of a `DELETE /memories` body.
struct BodyFilters {
    /// The values of each field given (a string is one value).
    values: Vec<(&'static str, Vec<String>)>,
    /// The `metadata` object's pairs, if given.
    metadata: Option<Vec<(String, String)>>,
}

/// The filters of a `DELETE /memories` body, as `filter` reads them: the values of a field (a
/// string, or for `category`, `tag` and `anyTag` an array of strings; `null` is absent), and the
/// `metadata` object's pairs (a string's text, a number's or a boolean's JSON text). Fields of
/// the wrong shape are refused here.
fn body_filters(body: &Map<String, Json>) -> Result<BodyFilters> {
    let mut values = Vec::new();
    for name in FILTERS {
        match body.get(name) {
            None | Some(Json::Null) => {}
            Some(Json::String(s)) => values.push((name, vec![s.clone()])),
            Some(Json::Array(a)) if matches!(name, "category" | "tag" | "anyTag") && a.iter().all(Json::is_string) => {
                values.push((name, a.iter().filter_map(Json::as_str).map(str::to_owned).collect()));
            }
            Some(_) if matches!(name, "category" | "tag" | "anyTag") => {
                return Err(Error::invalid(format!("{name} must be a string or an array of strings")))
            }
            Some(_) => return Err(Error::invalid(format!("{name} must be a string"))),
        }
    }
    let metadata = match body.get("metadata") {
        None | Some(Json::Null) => None,
        Some(Json::Object(o)) => {
            let mut pairs = Vec::with_capacity(o.len());
            for (k, v) in o {
                let text = metadata::filter_text(v)
                    .ok_or_else(|| Error::invalid(format!("metadata.{k} must be a string, a number or a boolean")))?;
                pairs.push((k.clone(), text));
            }
            Some(pairs)
        }
        Some(_) => return Err(Error::invalid("metadata must be an object of metadata.<key> filters")),
    };
    Ok(BodyFilters { values, metadata })
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

/// `POST /memories`: 201 with the new memory, or 200 with the one it was merged into (with
/// `consolidate: true`, the one the model found already saying it).
pub(crate) fn create<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let req = c.req;
        let mut body = req.json_object()?;
        let consolidate = match body.remove("consolidate") {
            None | Some(Json::Null) | Some(Json::Bool(false)) => false,
            Some(Json::Bool(true)) => true,
            Some(_) => return Err(Error::invalid("consolidate must be a boolean")),
        };
        let new = new_memory(&body)?;
        let memories = Memories::new(env);
        let (m, stored) = match consolidate {
            true => extract::consolidate(&memories, new, By::Api).await?,
            false => memories.remember(new, By::Api).await?,
        };
        Ok(Response::json(if stored == Stored::Created { 201 } else { 200 }, &m))
    })
}

/// `POST /memories/batch` `{memories: [...]}` (each as for `POST /memories`, up to 1,000):
/// 201 `{memories}` in order, all stored (or merged) or none.
pub(crate) fn create_all<'c>(c: &'c Call<'c>) -> Pending<'c> {
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

/// Most ids one memory may supersede.
const MAX_SUPERSEDES: usize = 100;

fn new_memory(body: &Map<String, Json>) -> Result<NewMemory> {
    known(
        body,
        &[
            "content",
            "category",
            "tags",
            "metadata",
            "score",
            "sessionId",
            "messageId",
            "expiresAt",
            "validFrom",
            "supersedes",
        ],
    )?;
    let supersedes: Vec<String> = match body.get("supersedes") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(a)) if a.len() <= MAX_SUPERSEDES => a
            .iter()
            .map(|v| match v.as_str() {
                Some(id) => check_name("supersedes[]", id).map(|()| id.to_owned()),
                None => Err(Error::invalid("supersedes must be an array of memory ids")),
            })
            .collect::<Result<_>>()?,
        Some(_) => {
            return Err(Error::invalid(format!("supersedes must be an array of at most {MAX_SUPERSEDES} memory ids")))
        }
    };
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
        metadata: body_metadata(body)?.unwrap_or_default(),
        score: score(body)?.flatten(),
        session_id,
        message_id,
        expires_at: opt_str(body, "expiresAt")?,
        valid_from: opt_str(body, "validFrom")?,
        supersedes,
    })
}

/// `GET /memories?<filters>&limit=&cursor=`: newest first.
pub(crate) fn list(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let _req = c.req;
    let q = &c.query;
    let limit = q.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let (memories, next) = store::list(env.sql, &query_filter(q)?, limit, q.get("cursor"), env.now.iso())?;
    Ok(Response::json(200, &json!({"memories": memories, "nextCursor": next})))
}

/// `GET /memories/search?q=&<filters>&limit=`: ranked, with why.
pub(crate) fn search<'c>(c: &'c Call<'c>) -> Pending<'c> {
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
    let m = store::get(env.sql, id, env.now.iso())?.ok_or_else(|| missing(id))?;
    Ok(Response::json(200, &m))
}

/// `PATCH /memories/{mid}`: `{content?, tags?, metadata?, score?, category?, expiresAt?}`.
pub(crate) fn patch<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let id = c.params.memory.as_str();
        let req = c.req;
        let body = req.json_object()?;
        known(&body, &["content", "tags", "metadata", "score", "category", "expiresAt"])?;
        let expires_at = match body.get("expiresAt") {
            None => None,
            Some(Json::Null) => Some(None),
            Some(Json::String(s)) => Some(Some(s.clone())),
            Some(_) => return Err(Error::invalid("expiresAt must be a timestamp or null")),
        };
        let patch = Patch {
            content: opt_str(&body, "content")?,
            tags: tags(&body)?,
            metadata: body_metadata(&body)?,
            score: score(&body)?,
            category: category(opt_str(&body, "category")?.as_deref())?,
            expires_at,
        };
        Ok(Response::json(200, &Memories::new(env).patch(id, &patch, By::Api).await?))
    })
}

/// `PUT /memories/{mid}` (a body as for `POST /memories` without `supersedes`): an upsert. 201
/// with the memory stored under that id when none of it is stored, 200 with the memory it
/// replaced (every field the body's or its default, a new version) otherwise.
pub(crate) fn put<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let id = c.params.memory.as_str();
        let body = c.req.json_object()?;
        if body.contains_key("supersedes") {
            return Err(Error::invalid("supersedes is for POST /memories: a PUT stores or replaces one memory"));
        }
        let new = new_memory(&body)?;
        let (m, stored) = Memories::new(env).put(id, &new, By::Api).await?;
        Ok(Response::json(if stored == Stored::Created { 201 } else { 200 }, &m))
    })
}

/// `GET /memories/{mid}/history`: every version, oldest first.
pub(crate) fn history(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let id = c.params.memory.as_str();
    let versions = store::history(env.sql, id, env.now.iso())?.ok_or_else(|| missing(id))?;
    Ok(Response::json(200, &json!({ "versions": versions })))
}

/// `DELETE /memories/{mid}`.
pub(crate) fn delete(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let id = c.params.memory.as_str();
    Memories::new(env).forget(id)?;
    Ok(Response::no_content())
}

/// `DELETE /memories?<filters>` (the filters may also come as a JSON body, a field of which wins
/// over the query parameters of its name: `metadata` over every `metadata.<key>`): `forgetAll`,
/// `{deleted: n}`.
pub(crate) fn delete_all(c: &Call<'_>) -> Result<Response> {
    let env = c.env;
    let req = c.req;
    let q = &c.query;
    // The query is checked even where the body overrides it.
    filter(&|k| q.all(k), q.family("metadata."))?;
    let body = req.json_object()?;
    let mut fields = FILTERS.to_vec();
    fields.push("metadata");
    known(&body, &fields)?;
    let given = body_filters(&body)?;
    let value = |k: &str| match given.values.iter().find(|(name, _)| *name == k) {
        Some((_, values)) => values.clone(),
        None => q.all(k),
    };
    let meta = given.metadata.unwrap_or_else(|| q.family("metadata."));
    let n = Memories::new(env).forget_all(&filter(&value, meta)?)?;
    Ok(Response::json(200, &json!({ "deleted": n })))
}

/// `POST /sessions/{sid}/memories/extract` `{leafId?}`: `{added, updated, deleted}`.
pub(crate) fn extract<'c>(c: &'c Call<'c>) -> Pending<'c> {
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
        let tags = s.env.config.memory.as_ref().map(|m| m.tags.clone()).unwrap_or_default();
        let done = extract::run(&Memories::new(s.env), s.id, leaf.as_deref(), &tags).await?;
        Ok(Response::json(200, &done))
    })
}
