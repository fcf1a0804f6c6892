//! Compaction with the configured LLM: on request (`POST …/compact`), automatically after an
//! append once the branch's estimate passes `compaction.after`, and after a turn whose message
//! cap left messages out. The algorithm (what to summarize, the prompt) is
//! [`crate::compaction::plan`]; this runs it, stores the overlay, and reports.
//!
//! Invariant: nothing is stored unless the model produced a usable summary; the overlay and the
//! summarizer's usage go in one transaction, after the path is checked again. Compaction never
//! fails the write that triggered it: its outcome is an [`AutoReport`].

use super::report::AutoReport;
use super::Session;
use crate::compaction::plan;
use crate::config::CompactionConfig;
use crate::directory::usage::calibration;
use crate::error::{Error, ErrorKind, Result};
use crate::llm::{complete, ChatRequest};
use crate::parts::message_id;
use crate::sql::atomically;
use crate::store::history::{branch_tokens, history, Overlays};
use crate::store::message::parse_all;
use crate::store::overlay::{self, Compaction};
use crate::store::sessions;
use crate::tokens::estimate_str;
use crate::wire::{Compacted, CompactionOutcome, Failure, Phase};

impl Session<'_> {
    /// Compacts the branch of `leaf` (default: the latest leaf) now: `None` when there is
    /// nothing to compact. The sockets hear `compacting`, then `idle` with `compacted` or
    /// `error` (nothing for an empty session).
    pub async fn compact(&self, leaf: Option<&str>) -> Result<Option<Compaction>> {
        let Some(leaf) = self.tree().resolve_leaf(leaf)? else { return Ok(None) };
        let cfg = self.env.config.compaction.clone().unwrap_or_default();
        // The estimate is for the frames only: nobody listening, nobody needs it.
        let estimate = match self.env.events.has_listeners(self.id) {
            true => self.estimate_with_prompt(&leaf).await.unwrap_or(0),
            false => 0,
        };
        self.run_framed(&leaf, &cfg, estimate).await
    }

    /// Stores an overlay written by hand: `summary` stands for `from …= to` on one path.
    pub fn add_overlay(&self, summary: &str, from: &str, to: &str) -> Result<Compaction> {
        let e = self.env;
        atomically(e.sql, || {
            let c = overlay::add(e.sql, self.id, summary, from, to, e.now.iso())?;
            sessions::touch(e.sql, self.id, e.now.iso())?;
            Ok(c)
        })
    }

    /// The estimate auto-compaction compares with `after`: the branch's messages plus the
    /// system prompt, as the configured model counts (our estimate, calibrated by what it
    /// counted of the last turns: `directory::usage::calibration`).
    pub(crate) async fn estimate_with_prompt(&self, leaf: &str) -> Result<i64> {
        let estimate = branch_tokens(self.env.sql, self.id, leaf)? + self.prompt_tokens().await?;
        Ok(calibration(self.env.sql, &self.env.llm.model)?.billed(estimate))
    }

    /// The estimate of the system prompt (the stored frozen one, else rendered now, not stored).
    pub(super) async fn prompt_tokens(&self) -> Result<i64> {
        let c = self.context();
        let prompt = match c.stored_prompt()? {
            Some(p) => p,
            None => c.render().await?,
        };
        Ok(estimate_str(&prompt))
    }

    /// After an append that stored `leaf`: compacts when the estimate is over `after` (the reference's status frames
    /// (docs/REFERENCE.md#status-frames): `idle` with the estimate after every append; around a compaction `compacting`
    /// first, then `idle` with `compacted: {tokensBefore}` or `error`).
    pub(crate) async fn after_append(&self, leaf: &str) -> Option<AutoReport> {
        let Some((cfg, threshold)) = self.env.config.compaction.as_ref().and_then(|c| c.after.map(|t| (c, t))) else {
            if self.env.events.has_listeners(self.id) {
                if let Ok(estimate) = self.estimate_with_prompt(leaf).await {
                    self.publish_status(Phase::Idle, estimate, None, None);
                }
            }
            return None;
        };
        let estimate = match self.estimate_with_prompt(leaf).await {
            Ok(t) => t,
            Err(e) => return Some(AutoReport::of(Err(e), 0, threshold)),
        };
        if estimate <= threshold {
            self.publish_status(Phase::Idle, estimate, Some(threshold), None);
            return None;
        }
        Some(self.compact_now(leaf, cfg, estimate, threshold).await)
    }

    /// After a turn whose history the message cap cut: compacts now, whatever the estimate,
    /// when compaction is configured, so the next turn sees what was left out in a summary;
    /// else what any append does.
    pub(crate) async fn after_cap(&self, leaf: &str) -> Option<AutoReport> {
        let Some(cfg) = &self.env.config.compaction else { return self.after_append(leaf).await };
        let estimate = self.estimate_with_prompt(leaf).await.unwrap_or(0);
        Some(self.compact_now(leaf, cfg, estimate, cfg.after.unwrap_or(0)).await)
    }

    /// [`Session::run_framed`], reported instead of failing.
    async fn compact_now(&self, leaf: &str, cfg: &CompactionConfig, estimate: i64, threshold: i64) -> AutoReport {
        AutoReport::of(self.run_framed(leaf, cfg, estimate).await, estimate, threshold)
    }

    /// [`Session::run`] between a `compacting` and an `idle` status frame (`estimate` is the
    /// branch's before; the idle frame carries the new one and `compacted` or `error`).
    async fn run_framed(&self, leaf: &str, cfg: &CompactionConfig, estimate: i64) -> Result<Option<Compaction>> {
        self.publish_status(Phase::Compacting, estimate, cfg.after, None);
        let result = self.run(leaf, cfg).await;
        if self.env.events.has_listeners(self.id) {
            // Only listeners need the new estimate (after an overlay it walks the path again).
            let (after, outcome) = match &result {
                Ok(Some(_)) => (
                    self.estimate_with_prompt(leaf).await.unwrap_or(estimate),
                    Some(CompactionOutcome::Compacted(Compacted { tokens_before: estimate })),
                ),
                Ok(None) => (estimate, None),
                Err(e) => (estimate, Some(CompactionOutcome::Error(Failure { code: e.code(), message: &e.message }))),
            };
            self.publish_status(Phase::Idle, after, cfg.after, outcome);
        }
        result
    }

    /// Compacts the path to `leaf`: plans the cut, asks the model for the summary, stores one
    /// overlay that starts where this branch's earliest visible overlay starts (one growing
    /// overlay per branch), adds the call's usage to the session, and renders the frozen prompt
    /// again. A failing or unusable model answer is `llm_unavailable` and stores nothing.
    async fn run(&self, leaf: &str, cfg: &CompactionConfig) -> Result<Option<Compaction>> {
        let e = self.env;
        let messages = parse_all(&history(e.sql, self.id, Some(leaf), Overlays::Applied)?)?;
        // The tail's budget is the model's tokens: in our estimate's, as calibrated.
        let mut options = cfg.options();
        options.tail_token_budget = calibration(e.sql, &e.llm.model)?.estimated(options.tail_token_budget);
        let Some(plan) = plan::plan(&messages, &options) else { return Ok(None) };
        let mut prompt = ChatRequest::user(plan.prompt.clone());
        // Room for the summary the prompt asks for (~budget tokens), with slack.
        prompt.max_tokens = Some((plan.budget.saturating_mul(2)).clamp(512, 16_384) as u32);
        // The summarizer: `compaction.model` on the same provider, or the configured model.
        let mut llm = e.llm.clone();
        if let Some(m) = cfg.model() {
            llm.model = m.to_owned();
        }
        let done = complete(e.transport, &llm, &prompt).await?;
        let summary = plan::accept_summary(&done.text)
            .map_err(|why| Error::new(ErrorKind::LlmUnavailable, format!("the model's summary was refused: {why}")))?;
        let ids: Vec<&str> = messages.iter().map(message_id).collect();
        let existing: Vec<(String, String, String)> =
            overlay::list(e.sql, self.id)?.into_iter().map(|c| (c.id, c.from_message_id, c.to_message_id)).collect();
        let from = plan::iterative_from(&plan.from_message_id, &existing, &ids);
        let stored = atomically(e.sql, || {
            // The path may have changed while the model was writing: add() checks it again, and
            // a path that no longer holds the range is a conflict (retry), not bad input.
            let c =
                overlay::add(e.sql, self.id, &summary, &from, &plan.to_message_id, e.now.iso()).map_err(
                    |err| match err.kind {
                        ErrorKind::InvalidRequest => {
                            Error::conflict(format!("the path changed while the summary was written: {}", err.message))
                        }
                        _ => err,
                    },
                )?;
            sessions::add_usage(e.sql, self.id, done.usage.input_tokens, done.usage.output_tokens, 0.0, e.now.iso())?;
            Ok(c)
        })?;
        let c = self.context();
        if c.refresh_prompt(e.now.iso()).await.is_err() {
            // R2 unreachable: drop the stale prompt so the next use renders it.
            c.drop_prompt()?;
        }
        Ok(Some(stored))
    }
}
