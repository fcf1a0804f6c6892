//! Compaction with the configured LLM: `POST /sessions/{sid}/compact`, and auto-compaction after
//! an append once the branch's estimate passes `compaction.after`.

use serde::Serialize;
use serde_json::{json, Value as Json};

use super::http::{opt_str, Request, Response};
use super::Ctx;
use crate::core::compaction::plan as compact;
use crate::core::config::CompactionConfig;
use crate::core::context::Context;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::llm::{complete, ChatRequest};
use crate::core::sql::atomically;
use crate::core::store::history::{self, history};
use crate::core::store::message::parse_all;
use crate::core::store::overlay::{self, Compaction};
use crate::core::store::sessions;
use crate::core::store::tree::Tree;
use crate::core::tokens::estimate_str;

/// The compaction settings of the agent (`SESSION_CONFIG.compaction`).
pub fn settings(ctx: &Ctx) -> Result<CompactionConfig> {
    Ok(ctx.config.compaction.unwrap_or_default())
}

/// `POST /sessions/{sid}/compact` `{leafId?}` → `{compaction}` (the stored overlay) or
/// `{compaction: null}` when there is nothing to compact. The model failing, or answering a
/// blank or skeleton summary, is `503 llm_unavailable` and nothing is stored.
///
/// The session's sockets hear it as an automatic compaction: `status` `compacting`, then `idle`
/// with `compacted: {tokensBefore}` (or `error`, or neither when there was nothing to compact);
/// nothing for an empty session.
pub async fn route(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let leaf = opt_str(&body, "leafId")?;
    let cfg = settings(ctx)?;
    let Some(leaf) = Tree::new(ctx.sql, sid).resolve_leaf(leaf.as_deref())? else {
        return Ok(Response::json(200, &json!({ "compaction": null })));
    };
    // The estimate is for the frames only: nobody listening, nobody needs it.
    let estimate = match ctx.events.has_listeners(sid) {
        true => estimate_with_prompt(ctx, sid, &leaf).await.unwrap_or(0),
        false => 0,
    };
    let c = run_framed(ctx, sid, &leaf, &cfg, estimate).await?;
    Ok(Response::json(200, &json!({ "compaction": c })))
}

/// After a write that changed the session's messages (update, delete, clear): `{type:"status",
/// phase:"idle"}` with the estimate of the latest leaf's branch (the system prompt alone when
/// the session is empty), if anyone listens.
pub async fn publish_idle(ctx: &Ctx<'_>, sid: &str) {
    if !ctx.events.has_listeners(sid) {
        return;
    }
    let threshold = settings(ctx).ok().and_then(|c| c.after);
    let estimate = match Tree::new(ctx.sql, sid).latest_leaf_id() {
        Ok(Some(leaf)) => estimate_with_prompt(ctx, sid, &leaf).await,
        Ok(None) => prompt_tokens(ctx, sid).await,
        Err(e) => Err(e),
    };
    if let Ok(estimate) = estimate {
        publish_status(ctx, sid, "idle", estimate, threshold, None);
    }
}

/// Tells the session's listeners about a change that is not a stored message: `deleted`,
/// `cleared` or `context` (the frame's other fields in `fields`).
pub fn publish_change(ctx: &Ctx<'_>, sid: &str, kind: &str, fields: Json) {
    if !ctx.events.has_listeners(sid) {
        return;
    }
    let mut frame = json!({"type": kind, "sessionId": sid});
    if let (Some(f), Json::Object(extra)) = (frame.as_object_mut(), fields) {
        f.extend(extra);
    }
    ctx.events.publish(sid, &frame);
}

/// Compacts the path to `leaf` (default: the latest leaf): plans the cut, asks the model for the
/// summary, stores one overlay that starts where this branch's earliest visible overlay starts
/// (one growing overlay per branch), adds the call's usage to the session, and renders the
/// frozen prompt again.
pub async fn run(ctx: &Ctx<'_>, sid: &str, leaf: Option<&str>, cfg: &CompactionConfig) -> Result<Option<Compaction>> {
    let Some(leaf) = Tree::new(ctx.sql, sid).resolve_leaf(leaf)? else { return Ok(None) };
    let messages = parse_all(&history(ctx.sql, sid, Some(&leaf), false)?)?;
    let Some(plan) = compact::plan(&messages, &cfg.options) else { return Ok(None) };
    let mut prompt = ChatRequest::user(plan.prompt.clone());
    // Room for the summary the prompt asks for (~budget tokens), with slack.
    prompt.max_tokens = Some((plan.budget.saturating_mul(2)).clamp(512, 16_384) as u32);
    let done = complete(ctx.transport, ctx.llm, &prompt).await?;
    let summary = compact::accept_summary(&done.text)
        .map_err(|why| Error::new(ErrorKind::LlmUnavailable, format!("the model's summary was refused: {why}")))?;
    let ids: Vec<&str> = messages.iter().filter_map(|m| m.get("id").and_then(Json::as_str)).collect();
    let existing: Vec<(String, String, String)> =
        overlay::list(ctx.sql, sid)?.into_iter().map(|c| (c.id, c.from_message_id, c.to_message_id)).collect();
    let from = compact::iterative_from(&plan.from_message_id, &existing, &ids);
    let stored = atomically(ctx.sql, || {
        // The path may have changed while the model was writing: add() checks it again, and a
        // path that no longer holds the range is a conflict (retry), not bad input.
        let c =
            overlay::add(ctx.sql, sid, &summary, &from, &plan.to_message_id, &ctx.now).map_err(|e| match e.kind {
                ErrorKind::InvalidRequest => {
                    Error::conflict(format!("the path changed while the summary was written: {}", e.message))
                }
                _ => e,
            })?;
        sessions::add_usage(ctx.sql, sid, done.usage.input_tokens, done.usage.output_tokens, 0.0, &ctx.now)?;
        Ok(c)
    })?;
    let c = Context { sql: ctx.sql, blobs: ctx.blobs, config: ctx.config, agent: ctx.agent, session: sid };
    if c.refresh_prompt(&ctx.now).await.is_err() {
        // R2 unreachable: drop the stale prompt so the next use renders it.
        ctx.sql.execute("DELETE FROM prompts WHERE session_id = ?", &[sid.into()])?;
    }
    Ok(Some(stored))
}

/// What an append reports about auto-compaction (`compaction` in its answer).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoReport {
    /// `compacted`, `nothing-to-do` or `failed`.
    pub status: &'static str,
    pub token_estimate: i64,
    pub token_threshold: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Json>,
}

/// The estimate auto-compaction compares with `after`: the branch's messages plus the system
/// prompt (the stored frozen one, else rendered now without storing it).
pub async fn estimate_with_prompt(ctx: &Ctx<'_>, sid: &str, leaf: &str) -> Result<i64> {
    Ok(history::branch_tokens(ctx.sql, sid, leaf)? + prompt_tokens(ctx, sid).await?)
}

/// The estimate of the system prompt (the stored frozen one, else rendered now without storing).
async fn prompt_tokens(ctx: &Ctx<'_>, sid: &str) -> Result<i64> {
    let c = Context { sql: ctx.sql, blobs: ctx.blobs, config: ctx.config, agent: ctx.agent, session: sid };
    let prompt = match c.stored_prompt()? {
        Some(p) => p,
        None => c.render().await?,
    };
    Ok(estimate_str(&prompt))
}

/// After an append that stored `leaf`: compacts when the estimate is over `after`. Never
/// fails the append: an error is reported (and logged by the caller) instead.
///
/// The session's sockets hear about it as the reference's status frames do:
/// `{type:"status", sessionId, phase:"idle", tokenEstimate, tokenThreshold}` after every append
/// (`tokenThreshold` null without `compaction.after`), and around a compaction `phase:
/// "compacting"` first, then `idle` with `compacted: {tokensBefore}` or `error`.
pub async fn after_append(ctx: &Ctx<'_>, sid: &str, leaf: &str) -> Option<AutoReport> {
    let listening = ctx.events.has_listeners(sid);
    let cfg = settings(ctx).ok();
    let Some((cfg, threshold)) = cfg.and_then(|c| c.after.map(|t| (c, t))) else {
        if listening {
            if let Ok(estimate) = estimate_with_prompt(ctx, sid, leaf).await {
                publish_status(ctx, sid, "idle", estimate, None, None);
            }
        }
        return None;
    };
    let estimate = match estimate_with_prompt(ctx, sid, leaf).await {
        Ok(t) => t,
        Err(e) => {
            let error = Some(json!({"code": e.code(), "message": e.message}));
            return Some(AutoReport {
                status: "failed",
                token_estimate: 0,
                token_threshold: threshold,
                compaction: None,
                error,
            });
        }
    };
    if estimate <= threshold {
        publish_status(ctx, sid, "idle", estimate, Some(threshold), None);
        return None;
    }
    Some(compact_now(ctx, sid, leaf, &cfg, estimate, threshold).await)
}

/// After a turn whose history the message cap cut: compacts now, whatever the estimate, when
/// compaction is configured (`SESSION_CONFIG.compaction`), with the same `status` frames; else
/// just the `idle` status of any append.
pub async fn after_cap(ctx: &Ctx<'_>, sid: &str, leaf: &str) -> Option<AutoReport> {
    let cfg = match (&ctx.config.compaction, settings(ctx)) {
        (Some(_), Ok(cfg)) => cfg,
        _ => return after_append(ctx, sid, leaf).await,
    };
    let estimate = estimate_with_prompt(ctx, sid, leaf).await.unwrap_or(0);
    let threshold = cfg.after.unwrap_or(0);
    Some(compact_now(ctx, sid, leaf, &cfg, estimate, threshold).await)
}

/// Compacts the branch of `leaf` (its estimate is `estimate`) with [`run_framed`], and reports
/// the outcome instead of failing.
async fn compact_now(
    ctx: &Ctx<'_>,
    sid: &str,
    leaf: &str,
    cfg: &CompactionConfig,
    estimate: i64,
    threshold: i64,
) -> AutoReport {
    let report = |status, compaction, error| AutoReport {
        status,
        token_estimate: estimate,
        token_threshold: threshold,
        compaction,
        error,
    };
    match run_framed(ctx, sid, leaf, cfg, estimate).await {
        Ok(Some(c)) => report("compacted", Some(c), None),
        Ok(None) => report("nothing-to-do", None, None),
        Err(e) => report("failed", None, Some(json!({"code": e.code(), "message": e.message}))),
    }
}

/// [`run`] between a `compacting` and an `idle` status frame (the latter with `compacted:
/// {tokensBefore}` or `error`), as the session's sockets hear every compaction, manual or
/// automatic. `estimate` is the branch's estimate before.
async fn run_framed(
    ctx: &Ctx<'_>,
    sid: &str,
    leaf: &str,
    cfg: &CompactionConfig,
    estimate: i64,
) -> Result<Option<Compaction>> {
    publish_status(ctx, sid, "compacting", estimate, cfg.after, None);
    let result = run(ctx, sid, Some(leaf), cfg).await;
    if ctx.events.has_listeners(sid) {
        // Only listeners need the new estimate (after an overlay it walks the path again).
        let (after, extra) = match &result {
            Ok(Some(_)) => (
                estimate_with_prompt(ctx, sid, leaf).await.unwrap_or(estimate),
                Some(("compacted", json!({"tokensBefore": estimate}))),
            ),
            Ok(None) => (estimate, None),
            Err(e) => (estimate, Some(("error", json!({"code": e.code(), "message": e.message})))),
        };
        publish_status(ctx, sid, "idle", after, cfg.after, extra);
    }
    result
}

/// `{type:"status", sessionId, phase, tokenEstimate, tokenThreshold, …extra}` to the session's
/// listeners.
fn publish_status(
    ctx: &Ctx<'_>,
    sid: &str,
    phase: &str,
    estimate: i64,
    threshold: Option<i64>,
    extra: Option<(&str, Json)>,
) {
    if !ctx.events.has_listeners(sid) {
        return;
    }
    let mut frame = json!({"type": "status", "sessionId": sid, "phase": phase,
        "tokenEstimate": estimate, "tokenThreshold": threshold});
    if let Some((k, v)) = extra {
        frame[k] = v;
    }
    ctx.events.publish(sid, &frame);
}
