//! `SESSION_CONFIG.compaction`: when a path is compacted on its own, and what a compaction keeps
//! (the reference's `createCompactFunction` knobs, docs/REFERENCE.md#compaction-options).

use serde::Deserialize;
use serde_json::Value as Json;

use crate::error::{Error, Result};

/// The knobs of the reference's `createCompactFunction` (docs/REFERENCE.md#compaction-options), with its defaults (3 /
/// 20000 / 2; the JSDoc's "protectHead = 2" is wrong, docs/REFERENCE.md#d-compaction-docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactOptions {
    /// Messages at the start of the path that are never summarized.
    pub protect_head: usize,
    /// Token budget of the protected tail (the newest message is kept even when it alone is over it).
    pub tail_token_budget: i64,
    /// At least this many newest messages are kept, whatever the budget.
    pub min_tail_messages: usize,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions { protect_head: 3, tail_token_budget: 20000, min_tail_messages: 2 }
    }
}

/// `SESSION_CONFIG.compaction`: `{"after"?, "protectHead"?, "tailTokenBudget"?, "minTailMessages"?, "model"?}`.
///
/// `after` is the auto-compaction threshold (the reference's `compactAfter(threshold)`,
/// docs/REFERENCE.md#auto-compaction: compact after a new message when the path's estimate is strictly greater); `None`
/// means never automatically. `model` is the summarizer (a cheaper model of the same provider; default:
/// the configured one), as `memory.extract.model` is extraction's. The other keys are
/// [`CompactOptions`], defaulted key by key. Unknown keys, negative numbers and non-integers are refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CompactionConfig {
    pub after: Option<i64>,
    #[serde(default)]
    protect_head: Option<usize>,
    #[serde(default)]
    tail_token_budget: Option<i64>,
    #[serde(default)]
    min_tail_messages: Option<usize>,
    #[serde(default)]
    model: Option<String>,
}

impl CompactionConfig {
    /// A policy with `after` and `options`.
    pub fn new(after: Option<i64>, options: CompactOptions) -> Self {
        CompactionConfig {
            after,
            protect_head: Some(options.protect_head),
            tail_token_budget: Some(options.tail_token_budget),
            min_tail_messages: Some(options.min_tail_messages),
            model: None,
        }
    }

    /// The same policy, summarized by `model` (`compaction.model`).
    pub fn with_model(self, model: &str) -> Self {
        CompactionConfig { model: Some(model.to_owned()), ..self }
    }

    /// The model that writes summaries (`compaction.model`), when it is not the configured one.
    pub(crate) fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// What a compaction keeps: the options given, the rest defaulted.
    pub fn options(&self) -> CompactOptions {
        let d = CompactOptions::default();
        CompactOptions {
            protect_head: self.protect_head.unwrap_or(d.protect_head),
            tail_token_budget: self.tail_token_budget.unwrap_or(d.tail_token_budget),
            min_tail_messages: self.min_tail_messages.unwrap_or(d.min_tail_messages),
        }
    }

    /// Reads `SESSION_CONFIG.compaction` (absent or `null`: the defaults, no auto-compaction), as
    /// [`SessionConfig::from_json`](super::SessionConfig::from_json) reads it; errors start
    /// `compaction: `.
    pub fn from_json(v: Option<&Json>) -> Result<Self> {
        let c: CompactionConfig = match v {
            None | Some(Json::Null) => Self::default(),
            Some(v @ Json::Object(_)) => {
                Self::deserialize(v).map_err(|e| Error::invalid(format!("compaction: {e}")))?
            }
            Some(_) => return Err(Error::invalid("compaction: must be an object")),
        };
        c.check()?;
        Ok(c)
    }

    /// The values within their ranges (`compaction: …` otherwise).
    pub(crate) fn check(&self) -> Result<()> {
        if self.after.is_some_and(|a| a < 0) {
            return Err(Error::invalid("compaction: after must be a non-negative integer (a token count)"));
        }
        if self.tail_token_budget.is_some_and(|b| b < 0) {
            return Err(Error::invalid("compaction: tailTokenBudget must be a non-negative integer"));
        }
        if self.model.as_ref().is_some_and(|m| m.trim().is_empty() || m.len() > 256) {
            return Err(Error::invalid("compaction: model must be a non-empty string of at most 256 bytes"));
        }
        Ok(())
    }
}
