//! Message tree routes: append (one or a batch), read, update, delete, clear, branches,
//! history (whole, or a recent window), latest leaf and path length.

use serde::Serialize;
use serde_json::{json, Map, Value as Json};

use super::compact::{self, AutoReport};
use super::http::{flag_param, int_param, Request, Response};
use super::Ctx;
use crate::core::compaction::truncate::{truncate_older_messages, TruncateOptions};
use crate::core::context::skills;
use crate::core::context::Context;
use crate::core::error::{Error, Result};
use crate::core::sql::atomically;
use crate::core::store::history;
use crate::core::store::message::{check_id, NewMessage};
use crate::core::store::message::{parse_all, raw, RawMessage};
use crate::core::store::overlay::COMPACTION_PREFIX;
use crate::core::store::sessions;
use crate::core::store::spill;
use crate::core::store::tree::{Parent, Tree};

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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Appended<'a> {
    message: RawMessage,
    parent_id: Option<String>,
    inserted: bool,
    /// Auto-compaction's report, when it ran (or failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    compaction: Option<&'a AutoReport>,
}

/// A failed auto-compaction goes to the operator's log too.
fn warn_failed(resp: Response, sid: &str, auto: Option<&AutoReport>) -> Response {
    match auto.and_then(|a| a.error.as_ref()) {
        Some(e) => resp.warn(format!("auto-compaction of session {sid} failed: {e}")),
        None => resp,
    }
}

/// `{"messages": [...]}` written straight from the stored JSON, without re-parsing it.
#[derive(Serialize)]
struct Messages<'a> {
    messages: &'a [RawMessage],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecentOut<'a> {
    messages: &'a [RawMessage],
    truncated: bool,
    total_content_bytes: i64,
}

/// `POST /sessions/{sid}/messages` `{message, parentId?}`: 201 when stored, 200 with
/// `inserted:false` (and the stored message) when the id already exists.
///
/// A `compaction_…` message is the synthetic stand-in for a summary that history reads put in
/// place of the originals; a client that sends its history back would otherwise store the
/// summary as a real message (agents issue #1984). It is never stored: 200 with
/// `inserted:false, synthetic:true`.
pub async fn append(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let msg = NewMessage::from_json(body.get("message").ok_or_else(|| Error::invalid("message is required"))?)?;
    let parent = parent(&body)?;
    if is_synthetic(&msg) {
        let echo = json!({"message": serde_json::from_str::<Json>(&msg.json).unwrap_or(Json::Null),
            "parentId": null, "inserted": false, "synthetic": true});
        return Ok(Response::json(200, &echo));
    }
    let mut msg = msg;
    let tree = Tree::new(ctx.sql, sid);
    if !tree.contains(&msg.id)? {
        spill::prepare(ctx.sql, ctx.blobs, ctx.agent, sid, &mut msg).await?;
    }
    let done = atomically(ctx.sql, || {
        let done = tree.append(&msg, &parent, &ctx.now)?;
        if done.inserted {
            sessions::ensure(ctx.sql, sid, &ctx.now)?;
            sessions::touch(ctx.sql, sid, &ctx.now)?;
        }
        Ok(done)
    });
    let unused = release(ctx, std::slice::from_ref(&msg));
    let done = done?;
    let message =
        if done.inserted { raw(msg.client_json().to_owned())? } else { stored_whole(ctx, sid, &msg.id).await? };
    let status = if done.inserted { 201 } else { 200 };
    if done.inserted {
        publish_message(ctx, sid, msg.client_json());
    }
    let auto = if done.inserted { compact::after_append(ctx, sid, &msg.id).await } else { None };
    let resp = Response::json(
        status,
        &Appended { message, parent_id: done.parent_id, inserted: done.inserted, compaction: auto.as_ref() },
    );
    Ok(with_warnings(warn_failed(resp, sid, auto.as_ref()), unused))
}

/// Tells the session's listeners about a stored message (`{type:"message", sessionId, message}`).
pub fn publish_message(ctx: &Ctx<'_>, sid: &str, json: &str) {
    if !ctx.events.has_listeners(sid) {
        return;
    }
    if let Ok(message) = serde_json::from_str::<Json>(json) {
        ctx.events.publish(sid, &json!({"type": "message", "sessionId": sid, "message": message}));
    }
}

/// Tells the session's listeners about stored message `id` as it reads now (whole), e.g. after
/// a tool rewrote it; nothing when it cannot be read.
pub async fn publish_stored(ctx: &Ctx<'_>, sid: &str, id: &str) {
    if !ctx.events.has_listeners(sid) {
        return;
    }
    if let Ok(m) = stored_whole(ctx, sid, id).await {
        publish_message(ctx, sid, m.get());
    }
}

/// Hands the spilled objects of `msgs` that no row took (a duplicate, a failed write) to the
/// sweep that follows every write request; returns a warning if that could not be recorded.
pub(crate) fn release(ctx: &Ctx<'_>, msgs: &[NewMessage]) -> Vec<String> {
    let keys: Vec<String> = msgs.iter().flat_map(|m| m.spills.iter().map(|s| s.key.clone())).collect();
    if keys.is_empty() {
        return Vec::new();
    }
    match spill::release_unused(ctx.sql, &keys) {
        Ok(()) => Vec::new(),
        Err(e) => vec![format!("could not release unused R2 objects {keys:?}: {}", e.message)],
    }
}

fn with_warnings(mut resp: Response, warnings: Vec<String>) -> Response {
    resp.warnings.extend(warnings);
    resp
}

/// Stored messages with their spilled fields put back (a missing object is logged).
async fn whole(ctx: &Ctx<'_>, sid: &str, messages: Vec<RawMessage>) -> Result<(Vec<RawMessage>, Vec<String>)> {
    spill::rehydrate(ctx.sql, ctx.blobs, sid, messages).await
}

async fn stored_whole(ctx: &Ctx<'_>, sid: &str, id: &str) -> Result<RawMessage> {
    let m = stored(&Tree::new(ctx.sql, sid), id)?;
    let (mut v, _) = whole(ctx, sid, vec![m]).await?;
    v.pop().ok_or_else(|| Error::internal("rehydrate lost a message"))
}

fn stored(tree: &Tree, id: &str) -> Result<RawMessage> {
    tree.get(id)?.ok_or_else(|| Error::not_found(format!("message {id} not found")))
}

/// Whether `msg` is a synthetic compaction message (id prefix `compaction_`), never stored.
fn is_synthetic(msg: &NewMessage) -> bool {
    msg.id.starts_with(COMPACTION_PREFIX)
}

/// `POST /sessions/{sid}/messages/batch` `{messages, parentId?}`: appends in order, each the
/// child of the one before. An id that already exists is skipped, and the chain continues
/// from it. Synthetic `compaction_…` messages are left out (not stored, not in `ids`), and
/// the chain goes on from the message before them. All or nothing: one invalid message and
/// nothing is stored.
pub async fn batch(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let list =
        body.get("messages").and_then(Json::as_array).ok_or_else(|| Error::invalid("messages must be an array"))?;
    let mut msgs = list
        .iter()
        .enumerate()
        .map(|(i, m)| NewMessage::from_json(m).map_err(|e| Error::new(e.kind, format!("messages[{i}]: {}", e.message))))
        .collect::<Result<Vec<_>>>()?;
    let first_parent = parent(&body)?;
    let tree = Tree::new(ctx.sql, sid);
    tree.check_parent(&first_parent)?;
    for i in 0..msgs.len() {
        if is_synthetic(&msgs[i]) || tree.contains(&msgs[i].id)? {
            continue;
        }
        if let Err(e) = spill::prepare(ctx.sql, ctx.blobs, ctx.agent, sid, &mut msgs[i]).await {
            release(ctx, &msgs);
            return Err(Error::new(e.kind, format!("messages[{i}]: {}", e.message)));
        }
    }
    let done = atomically(ctx.sql, || {
        tree.check_parent(&first_parent)?; // also for an empty batch
        let mut parent = first_parent.clone();
        let mut ids = Vec::with_capacity(msgs.len());
        let mut inserted = 0;
        let mut stored = Vec::new();
        for (i, m) in msgs.iter().enumerate().filter(|(_, m)| !is_synthetic(m)) {
            if tree.append(m, &parent, &ctx.now)?.inserted {
                inserted += 1;
                stored.push(i);
            }
            ids.push(m.id.clone());
            parent = Parent::Id(m.id.clone());
        }
        if inserted > 0 {
            sessions::ensure(ctx.sql, sid, &ctx.now)?;
            sessions::touch(ctx.sql, sid, &ctx.now)?;
        }
        let last = tree.parent_id(&parent)?;
        Ok((ids, last, inserted, stored))
    });
    let unused = release(ctx, &msgs);
    let (ids, last, inserted, stored) = done?;
    for i in stored {
        publish_message(ctx, sid, msgs[i].client_json());
    }
    let auto = match (&last, inserted > 0) {
        (Some(leaf), true) => compact::after_append(ctx, sid, leaf).await,
        _ => None,
    };
    let mut out = json!({ "ids": ids, "lastId": last, "inserted": inserted });
    if let Some(a) = &auto {
        out["compaction"] = serde_json::to_value(a).map_err(|e| Error::internal(e.to_string()))?;
    }
    Ok(with_warnings(warn_failed(Response::json(201, &out), sid, auto.as_ref()), unused))
}

/// `GET /sessions/{sid}/messages/{mid}`.
pub async fn get(ctx: &Ctx<'_>, sid: &str, mid: &str) -> Result<Response> {
    Ok(Response::json(200, &stored_whole(ctx, sid, mid).await?))
}

/// `PUT /sessions/{sid}/messages/{mid}` `{message}`: replaces the message's content; its id
/// must equal `mid` and its place in the tree stays.
pub async fn update(ctx: &Ctx<'_>, sid: &str, mid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let mut msg = NewMessage::from_json(body.get("message").ok_or_else(|| Error::invalid("message is required"))?)?;
    if msg.id != mid {
        return Err(Error::invalid(format!("message.id {} does not match the path's {mid}", msg.id)));
    }
    let tree = Tree::new(ctx.sql, sid);
    if !tree.contains(mid)? {
        return Err(Error::not_found(format!("message {mid} not found in session {sid}")));
    }
    spill::prepare(ctx.sql, ctx.blobs, ctx.agent, sid, &mut msg).await?;
    let done = atomically(ctx.sql, || {
        if !tree.update(&msg)? {
            return Err(Error::not_found(format!("message {mid} not found in session {sid}")));
        }
        sessions::touch(ctx.sql, sid, &ctx.now)
    });
    let unused = release(ctx, std::slice::from_ref(&msg));
    done?;
    publish_message(ctx, sid, msg.client_json());
    compact::publish_idle(ctx, sid).await;
    Ok(with_warnings(Response::json(200, &raw(msg.client_json().to_owned())?), unused))
}

/// `DELETE /sessions/{sid}/messages/{mid}`: 204; its children stay (orphaned). Sockets get
/// `{type:"deleted", ids:[mid]}` and an `idle` status.
pub async fn delete(ctx: &Ctx<'_>, sid: &str, mid: &str) -> Result<Response> {
    let tree = Tree::new(ctx.sql, sid);
    atomically(ctx.sql, || {
        if !tree.delete(mid)? {
            return Err(Error::not_found(format!("message {mid} not found in session {sid}")));
        }
        sessions::touch(ctx.sql, sid, &ctx.now)
    })?;
    compact::publish_change(ctx, sid, "deleted", json!({ "ids": [mid] }));
    compact::publish_idle(ctx, sid).await;
    Ok(Response::no_content())
}

/// `DELETE /sessions/{sid}/messages`: every message and compaction of the session. Sockets get
/// `{type:"cleared"}` and an `idle` status.
///
/// Loaded skills are forgotten and the frozen prompt is rendered again (as the reference). The
/// old prompt goes in the same transaction as the messages, so if the new one cannot be
/// rendered now (R2 unreachable) the next `GET …/prompt` renders it.
pub async fn clear(ctx: &Ctx<'_>, sid: &str) -> Result<Response> {
    atomically(ctx.sql, || {
        Tree::new(ctx.sql, sid).clear()?;
        skills::forget(ctx.sql, sid, None)?;
        ctx.sql.execute("DELETE FROM prompts WHERE session_id = ?", &[sid.into()])?;
        sessions::touch(ctx.sql, sid, &ctx.now)
    })?;
    compact::publish_change(ctx, sid, "cleared", json!({}));
    // Clearing never registers a session: an unregistered one gets no stored prompt either
    // (nothing could delete it).
    if sessions::get(ctx.sql, sid)?.is_none() {
        compact::publish_idle(ctx, sid).await;
        return Ok(Response::no_content());
    }
    let c = Context { sql: ctx.sql, blobs: ctx.blobs, config: ctx.config, agent: ctx.agent, session: sid };
    let resp = match c.refresh_prompt(&ctx.now).await {
        Ok(_) => Response::no_content(),
        Err(e) => Response::no_content()
            .warn(format!("clear {sid}: prompt not re-rendered now ({e}); the next GET prompt renders it")),
    };
    compact::publish_idle(ctx, sid).await;
    Ok(resp)
}

/// `GET /sessions/{sid}/messages/{mid}/branches`: the children, oldest first.
pub async fn branches(ctx: &Ctx<'_>, sid: &str, mid: &str) -> Result<Response> {
    let (messages, warnings) = whole(ctx, sid, Tree::new(ctx.sql, sid).branches(mid)?).await?;
    Ok(with_warnings(Response::json(200, &Messages { messages: &messages }), warnings))
}

/// `GET /sessions/{sid}/history?leaf=&raw=1&truncate=1`.
///
/// `truncate=1` shrinks older messages as the agent turn does before sending them
/// ([`truncate_older_messages`]; `keepRecent`, `maxToolOutputChars`, `maxTextChars` override
/// the defaults 4, 500 and 10000). What is stored does not change.
pub async fn history(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let q = req.query_map()?;
    let leaf = leaf_param(&q)?;
    let truncation = truncate_options(&q)?;
    let messages = history::history(ctx.sql, sid, leaf.as_deref(), flag_param(&q, "raw")?)?;
    let (messages, warnings) = whole(ctx, sid, messages).await?;
    let Some(opts) = truncation else {
        return Ok(with_warnings(Response::json(200, &Messages { messages: &messages }), warnings));
    };
    let parsed = parse_all(&messages)?;
    Ok(with_warnings(Response::json(200, &json!({ "messages": truncate_older_messages(parsed, &opts) })), warnings))
}

/// The truncation a history read asked for, if any. The options are checked either way, and
/// only take effect with `truncate=1`.
fn truncate_options(q: &std::collections::HashMap<String, String>) -> Result<Option<TruncateOptions>> {
    let d = TruncateOptions::default();
    let keep = int_param(q, "keepRecent", 0, 1_000_000)?;
    let tool = int_param(q, "maxToolOutputChars", 1, 100_000_000)?;
    let text = int_param(q, "maxTextChars", 1, 100_000_000)?;
    if !flag_param(q, "truncate")? {
        return Ok(None);
    }
    Ok(Some(TruncateOptions {
        keep_recent: keep.map_or(d.keep_recent, |n| n as usize),
        max_tool_output_chars: tool.map_or(d.max_tool_output_chars, |n| n as usize),
        max_text_chars: text.map_or(d.max_text_chars, |n| n as usize),
    }))
}

fn leaf_param(q: &std::collections::HashMap<String, String>) -> Result<Option<String>> {
    match q.get("leaf").filter(|l| !l.is_empty()) {
        Some(l) => {
            check_id("leaf", l)?;
            Ok(Some(l.clone()))
        }
        None => Ok(None),
    }
}

/// `GET /sessions/{sid}/history/recent?maxBytes=&minMessages=`.
///
/// Sizes are of the stored rows: a message with spilled fields counts as its row (placeholders).
pub async fn recent(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let q = req.query_map()?;
    let max = int_param(&q, "maxBytes", 0, i64::MAX)?.ok_or_else(|| Error::invalid("maxBytes is required"))?;
    let min = int_param(&q, "minMessages", 1, 100_000)?.unwrap_or(1);
    let r = history::recent(ctx.sql, sid, max, min)?;
    let (messages, warnings) = whole(ctx, sid, r.messages).await?;
    Ok(with_warnings(
        Response::json(
            200,
            &RecentOut { messages: &messages, truncated: r.truncated, total_content_bytes: r.total_content_bytes },
        ),
        warnings,
    ))
}

/// `GET /sessions/{sid}/leaf`: the latest leaf, 404 when the session is empty.
pub async fn leaf(ctx: &Ctx<'_>, sid: &str) -> Result<Response> {
    let tree = Tree::new(ctx.sql, sid);
    let id = tree.latest_leaf_id()?.ok_or_else(|| Error::not_found(format!("session {sid} has no messages")))?;
    Ok(Response::json(200, &stored_whole(ctx, sid, &id).await?))
}

/// `GET /sessions/{sid}/path-length?leaf=`: messages on the raw path (0 when empty).
pub fn path_length(ctx: &Ctx, sid: &str, req: &Request) -> Result<Response> {
    let q = req.query_map()?;
    let leaf = leaf_param(&q)?;
    let tree = Tree::new(ctx.sql, sid);
    let length = match tree.resolve_leaf(leaf.as_deref())? {
        Some(l) => tree.path(&l)?.len(),
        None => 0,
    };
    Ok(Response::json(200, &json!({ "length": length })))
}
