//! Compaction with the configured LLM: `POST /sessions/{sid}/compact`, and auto-compaction after
//! an append once the branch's estimate passes `compaction.after`.

use serde::Serialize;
use serde_json::{json, Value as Json};

use super::http::{opt_str, Request, Response};
use super::Ctx;
use crate::core::compact::{self, CompactionConfig};
use crate::core::compaction::{self, Compaction};
use crate::core::context::Context;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::estimate;
use crate::core::history::history;
use crate::core::llm::{complete, Prompt};
use crate::core::sessions;
use crate::core::sql::atomically;
use crate::core::tokens::estimate_str;
use crate::core::tree::{parse_all, Tree};

/// The compaction settings of the agent (`SESSION_CONFIG.compaction`).
pub fn settings(ctx: &Ctx) -> Result<CompactionConfig> {
    CompactionConfig::from_json(ctx.config.compaction.as_ref())
}

/// `POST /sessions/{sid}/compact` `{leafId?}` → `{compaction}` (the stored overlay) or
/// `{compaction: null}` when there is nothing to compact. The model failing, or answering a
/// blank or skeleton summary, is `503 llm_unavailable` and nothing is stored.
pub async fn route(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let leaf = opt_str(&body, "leafId")?;
    let cfg = settings(ctx)?;
    let c = run(ctx, sid, leaf.as_deref(), &cfg).await?;
    Ok(Response::json(200, &json!({ "compaction": c })))
}

/// Compacts the path to `leaf` (default: the latest leaf): plans the cut, asks the model for the
/// summary, stores one overlay that starts where this branch's earliest visible overlay starts
/// (one growing overlay per branch), adds the call's usage to the session, and renders the
/// frozen prompt again.
pub async fn run(ctx: &Ctx<'_>, sid: &str, leaf: Option<&str>, cfg: &CompactionConfig) -> Result<Option<Compaction>> {
    let Some(leaf) = Tree::new(ctx.sql, sid).resolve_leaf(leaf)? else { return Ok(None) };
    let messages = parse_all(&history(ctx.sql, sid, Some(&leaf), false)?)?;
    let Some(plan) = compact::plan(&messages, &cfg.options) else { return Ok(None) };
    let mut prompt = Prompt::user(plan.prompt.clone());
    // Room for the summary the prompt asks for (~budget tokens), with slack.
    prompt.max_tokens = Some((plan.budget.saturating_mul(2)).clamp(512, 16_384) as u32);
    let done = complete(ctx.transport, ctx.llm, &prompt).await?;
    let summary = compact::accept_summary(&done.text)
        .map_err(|why| Error::new(ErrorKind::LlmUnavailable, format!("the model's summary was refused: {why}")))?;
    let ids: Vec<&str> = messages.iter().filter_map(|m| m.get("id").and_then(Json::as_str)).collect();
    let existing: Vec<(String, String, String)> = compaction::list(ctx.sql, sid)?
        .into_iter()
        .map(|c| (c.id, c.from_message_id, c.to_message_id))
        .collect();
    let from = compact::iterative_from(&plan.from_message_id, &existing, &ids);
    let stored = atomically(ctx.sql, || {
        // The path may have changed while the model was writing: add() checks it again, and a
        // path that no longer holds the range is a conflict (retry), not bad input.
        let c = compaction::add(ctx.sql, sid, &summary, &from, &plan.to_message_id, &ctx.now).map_err(|e| match e.kind {
            ErrorKind::InvalidRequest => Error::conflict(format!("the path changed while the summary was written: {}", e.message)),
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
    let c = Context { sql: ctx.sql, blobs: ctx.blobs, config: ctx.config, agent: ctx.agent, session: sid };
    let prompt = match c.stored_prompt()? {
        Some(p) => p,
        None => c.render().await?,
    };
    Ok(estimate::branch_tokens(ctx.sql, sid, leaf)? + estimate_str(&prompt))
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
    let report = |status, token_estimate, compaction, error| {
        Some(AutoReport { status, token_estimate, token_threshold: threshold, compaction, error })
    };
    let err = |e: &Error| Some(json!({"code": e.code(), "message": e.message}));
    let estimate = match estimate_with_prompt(ctx, sid, leaf).await {
        Ok(t) => t,
        Err(e) => return report("failed", 0, None, err(&e)),
    };
    if estimate <= threshold {
        publish_status(ctx, sid, "idle", estimate, Some(threshold), None);
        return None;
    }
    publish_status(ctx, sid, "compacting", estimate, Some(threshold), None);
    let out = match run(ctx, sid, Some(leaf), &cfg).await {
        Ok(Some(c)) => report("compacted", estimate, Some(c), None),
        Ok(None) => report("nothing-to-do", estimate, None, None),
        Err(e) => report("failed", estimate, None, err(&e)),
    };
    if let (Some(r), true) = (&out, listening) {
        // Only listeners need the new estimate (after an overlay it walks the path again).
        let after = if r.status == "compacted" { estimate_with_prompt(ctx, sid, leaf).await.unwrap_or(estimate) } else { estimate };
        let extra = match (&r.error, r.status) {
            (Some(e), _) => Some(("error", e.clone())),
            (None, "compacted") => Some(("compacted", json!({"tokensBefore": estimate}))),
            _ => None,
        };
        publish_status(ctx, sid, "idle", after, Some(threshold), extra);
    }
    out
}

/// `{type:"status", sessionId, phase, tokenEstimate, tokenThreshold, …extra}` to the session's
/// listeners.
fn publish_status(ctx: &Ctx<'_>, sid: &str, phase: &str, estimate: i64, threshold: Option<i64>, extra: Option<(&str, Json)>) {
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
