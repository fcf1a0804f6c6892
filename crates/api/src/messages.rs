//! Message tree routes: append (one or a batch), read, update, delete (one or several), clear, branches,
//! history (whole, or a recent window), latest leaf and path length.

use super::call::{Call, Pending};

use serde::Serialize;
use serde_json::{json, Map, Value as Json};

use super::http::{Query, Response};
use session_agent_core::compaction::truncate::{truncate_older_messages, TruncateOptions};
use session_agent_core::error::{Error, Result, Warned};
use session_agent_core::session::{AutoReport, Outcome};
use session_agent_core::store::history::{self, Overlays, PageAt};
use session_agent_core::store::message::{check_id, parse_all, NewMessage, RawMessage};
use session_agent_core::store::tree::Parent;

/// `parentId` of an append body: absent → latest leaf, `null` → new root, a string → that id.
pub(crate) fn parent(body: &Map<String, Json>) -> Result<Parent> {
    match body.get("parentId") {
        None => Ok(Parent::Latest),
        Some(Json::Null) => Ok(Parent::Root),
        Some(Json::String(id)) => {
            check_id("parentId", id)?;
            Ok(Parent::Id(id.clone()))
        }
        Some(_) => Err(Error::invalid("parentId must be a string or null")),
    }
}

/// The `message` of a body, validated.
fn message_of(body: &Map<String, Json>) -> Result<NewMessage> {
    NewMessage::from_json(body.get("message").ok_or_else(|| Error::invalid("message is required"))?)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Appended<'a> {
    message: &'a RawMessage,
    parent_id: &'a Option<String>,
    inserted: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    synthetic: bool,
    /// Auto-compaction's report, when it ran (or failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    compaction: Option<&'a AutoReport>,
}

fn with_warnings(mut resp: Response, warnings: Vec<String>) -> Response {
    resp.warnings.extend(warnings);
    resp
}

/// `POST /sessions/{sid}/messages` `{message, parentId?}`: 201 when stored, 200 with
/// `inserted:false` (and the stored message) when the id already exists, or when the message
/// is a synthetic `compaction_…` one (never stored, `synthetic:true`: the stand-in for a
/// summary that history reads put in place of the originals, which a client sending its
/// history back would otherwise store; docs/REFERENCE.md#synthetic-messages).
pub(crate) fn append<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        let body = req.json_object()?;
        let msg = message_of(&body)?;
        let a = s.append(msg, parent(&body)?).await?;
        let inserted = a.outcome == Outcome::Inserted;
        let out = Appended {
            message: &a.message,
            parent_id: &a.parent_id,
            inserted,
            synthetic: a.outcome == Outcome::Synthetic,
            compaction: a.compaction.as_ref(),
        };
        Ok(with_warnings(Response::json(if inserted { 201 } else { 200 }, &out), a.warnings))
    })
}

/// `POST /sessions/{sid}/messages/batch` `{messages, parentId?}`: appends in order, each the
/// child of the one before; all or nothing. `201 {ids, lastId, inserted}`.
pub(crate) fn batch<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        let body = req.json_object()?;
        let list =
            body.get("messages").and_then(Json::as_array).ok_or_else(|| Error::invalid("messages must be an array"))?;
        let msgs = list
            .iter()
            .enumerate()
            .map(|(i, m)| {
                NewMessage::from_json(m).map_err(|e| Error::new(e.kind, format!("messages[{i}]: {}", e.message)))
            })
            .collect::<Result<Vec<_>>>()?;
        let b = s.append_batch(msgs, parent(&body)?).await?;
        let mut out = json!({ "ids": b.ids, "lastId": b.last_id, "inserted": b.inserted });
        if let Some(a) = &b.compaction {
            out["compaction"] = serde_json::to_value(a).map_err(|e| Error::internal(e.to_string()))?;
        }
        Ok(with_warnings(Response::json(201, &out), b.warnings))
    })
}

/// `GET /sessions/{sid}/messages/{mid}`.
pub(crate) fn get<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let mid = c.params.mid.as_str();
        Ok(Response::json(200, &s.message(mid).await?))
    })
}

/// `PUT /sessions/{sid}/messages/{mid}` `{message}`: replaces the message's content; its id
/// must equal `mid` and its place in the tree stays.
pub(crate) fn update<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let mid = c.params.mid.as_str();
        let req = c.req;
        let msg = message_of(&req.json_object()?)?;
        if msg.id != mid {
            return Err(Error::invalid(format!("message.id {} does not match the path's {mid}", msg.id)));
        }
        let Warned { value: message, warnings } = s.update(msg).await?;
        Ok(with_warnings(Response::json(200, &message), warnings))
    })
}

/// `DELETE /sessions/{sid}/messages/{mid}`: 204; its children stay (orphaned).
pub(crate) fn delete<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let mid = c.params.mid.as_str();
        s.delete_message(mid).await?;
        Ok(Response::no_content())
    })
}

/// Most ids one `POST …/messages/delete` names.
pub(crate) const MAX_DELETE: usize = 1000;

/// `POST /sessions/{sid}/messages/delete` `{ids}` (1 to 1,000 message ids; one named twice is
/// deleted once): all or nothing, an unknown id is 404 and nothing is deleted. `200 {deleted}`,
/// the ids in the order first named; their children stay (orphaned), as for one delete.
pub(crate) fn delete_many<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let body = c.req.json_object()?;
        if let Some(k) = body.keys().find(|k| *k != "ids") {
            return Err(Error::invalid(format!("unknown field {k:?}: expected ids")));
        }
        let shape = || Error::invalid(format!("ids must be an array of 1 to {MAX_DELETE} message ids"));
        let list = body.get("ids").and_then(Json::as_array).ok_or_else(shape)?;
        if list.is_empty() || list.len() > MAX_DELETE {
            return Err(shape());
        }
        let ids = list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let id = v.as_str().ok_or_else(|| Error::invalid(format!("ids[{i}] must be a string")))?;
                check_id(&format!("ids[{i}]"), id)?;
                Ok(id.to_owned())
            })
            .collect::<Result<Vec<_>>>()?;
        let deleted = s.delete_messages(&ids).await?;
        Ok(Response::json(200, &json!({ "deleted": deleted })))
    })
}

/// `DELETE /sessions/{sid}/messages`: every message and compaction of the session.
pub(crate) fn clear<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let warnings = s.clear().await?;
        Ok(with_warnings(Response::no_content(), warnings))
    })
}

/// `GET /sessions/{sid}/messages/{mid}/branches?limit=&before=`: the children, oldest first;
/// with `limit` or `before` (a child), a page of them and its `nextBefore` cursor, as history
/// pages (100 children unless `limit` says otherwise).
pub(crate) fn branches<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let _req = c.req;
        let mid = c.params.mid.as_str();
        let q = &c.query;
        let limit = q.int("limit", 1, MAX_PAGE)?;
        let before = q.id("before")?;
        let paged = limit.is_some() || before.is_some();
        let limit = if paged { Some(limit.unwrap_or(DEFAULT_PAGE)) } else { None };
        let (messages, next_before) = s.tree().children(mid, before.as_deref(), limit)?;
        let Warned { value: messages, warnings } = s.whole(messages).await?;
        let next_before = paged.then_some(next_before.as_deref());
        Ok(with_warnings(Response::json(200, &PageOut { messages: &messages, next_before }), warnings))
    })
}

/// `GET /sessions/{sid}/history?leaf=&raw=1&truncate=1&limit=&before=`.
///
/// `truncate=1` shrinks older messages as the agent turn does before sending them
/// ([`truncate_older_messages`]; `keepRecent`, `maxToolOutputChars`, `maxTextChars` override
/// the defaults 4, 500 and 10000). What is stored does not change. With `limit`, one page of
/// the path (see [`history::page`]) and its `nextBefore` cursor; `before` asks for the page
/// above an earlier one (100 messages unless `limit` says otherwise; `leaf` plays no part).
pub(crate) fn history<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let _req = c.req;
        let q = &c.query;
        let leaf = q.id("leaf")?;
        let truncation = truncate_options(q)?;
        let overlays = if q.flag("raw")? { Overlays::Raw } else { Overlays::Applied };
        let limit = q.int("limit", 1, MAX_PAGE)?;
        let before = q.id("before")?;
        let page = match (limit, before) {
            // `before` names the page's path itself: `leaf` does not matter then.
            (limit, Some(before)) => {
                let limit = limit.unwrap_or(DEFAULT_PAGE);
                Some(history::page(s.env.sql, s.id, PageAt::Before(before), limit, overlays)?)
            }
            (Some(limit), None) => Some(history::page(s.env.sql, s.id, PageAt::Leaf(leaf.clone()), limit, overlays)?),
            (None, None) => None,
        };
        if page.is_none() && truncation.is_none() {
            // The stored texts as they are (SQLite assembles them where it can).
            let Warned { value: list, warnings } = s.history_text(leaf.as_deref(), overlays).await?;
            return Ok(with_warnings(Response::json_text(200, format!("{{\"messages\":{list}}}")), warnings));
        }
        let (messages, next_before) = match page {
            Some(p) => (p.messages, Some(p.next_before)),
            None => (history::history(s.env.sql, s.id, leaf.as_deref(), overlays)?, None),
        };
        let Warned { value: messages, warnings } = s.whole(messages).await?;
        let next_before = next_before.as_ref().map(Option::as_deref);
        let resp = match truncation {
            None => Response::json(200, &PageOut { messages: &messages, next_before }),
            Some(opts) => {
                let shrunk = truncate_older_messages(parse_all(&messages)?, &opts);
                Response::json(200, &PageOut { messages: &shrunk, next_before })
            }
        };
        Ok(with_warnings(resp, warnings))
    })
}

/// A history answer: the messages, and with `limit` the cursor of the page above (`null` at
/// the root).
#[derive(Serialize)]
struct PageOut<'a, M: Serialize> {
    messages: &'a [M],
    #[serde(rename = "nextBefore", skip_serializing_if = "Option::is_none")]
    next_before: Option<Option<&'a str>>,
}

/// Most messages a history page holds …
const MAX_PAGE: i64 = 10_000;
/// … and how many a page asked for with `before` alone holds.
const DEFAULT_PAGE: i64 = 100;

/// The truncation a history read asked for, if any. The options are checked either way, and
/// only take effect with `truncate=1`.
fn truncate_options(q: &Query) -> Result<Option<TruncateOptions>> {
    let d = TruncateOptions::default();
    let keep = q.int("keepRecent", 0, 1_000_000)?;
    let tool = q.int("maxToolOutputChars", 1, 100_000_000)?;
    let text = q.int("maxTextChars", 1, 100_000_000)?;
    if !q.flag("truncate")? {
        return Ok(None);
    }
    Ok(Some(TruncateOptions {
        keep_recent: keep.map_or(d.keep_recent, |n| n as usize),
        max_tool_output_chars: tool.map_or(d.max_tool_output_chars, |n| n as usize),
        max_text_chars: text.map_or(d.max_text_chars, |n| n as usize),
    }))
}

/// `GET /sessions/{sid}/history/recent?maxBytes=&minMessages=&before=`: the window of the
/// active path, or with `before` of the path above that message; `nextBefore` pages on up.
///
/// Sizes are of the stored rows: a message with spilled fields counts as its row (placeholders).
pub(crate) fn recent<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let _req = c.req;
        let q = &c.query;
        let max = q.int("maxBytes", 0, i64::MAX)?.ok_or_else(|| Error::invalid("maxBytes is required"))?;
        let min = q.int("minMessages", 1, 100_000)?.unwrap_or(1);
        let before = q.id("before")?;
        let Warned { value: answer, warnings } = s.recent_text(before.as_deref(), max, min).await?;
        Ok(with_warnings(Response::json_text(200, answer), warnings))
    })
}

/// `GET /sessions/{sid}/leaf`: the latest leaf, 404 when the session is empty.
pub(crate) fn leaf<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let id =
            s.tree().latest_leaf_id()?.ok_or_else(|| Error::not_found(format!("session {} has no messages", s.id)))?;
        Ok(Response::json(200, &s.message(&id).await?))
    })
}

/// `GET /sessions/{sid}/path-length?leaf=`: messages on the raw path (0 when empty).
pub(crate) fn path_length(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let _req = c.req;
    let leaf = c.query.id("leaf")?;
    let tree = s.tree();
    let length = match tree.resolve_leaf(leaf.as_deref())? {
        Some(l) => tree.path_len(&l)?,
        None => 0,
    };
    Ok(Response::json(200, &json!({ "length": length })))
}
