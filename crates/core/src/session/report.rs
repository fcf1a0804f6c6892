//! [`AutoReport`]: what an automatic compaction did, in an append's or a turn's answer
//! (`compaction`). Compaction never fails the write that triggered it; this is its outcome.

use serde::Serialize;
use serde_json::Value as Json;

use crate::error::Result;
use crate::store::overlay::Compaction;

/// How an automatic compaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Status {
    Compacted,
    NothingToDo,
    Failed,
}

/// What an automatic compaction did (`compaction` in an append's answer).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoReport {
    pub(crate) status: Status,
    pub(crate) token_estimate: i64,
    pub(crate) token_threshold: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) compaction: Option<Compaction>,
    /// `{code, message}` of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Json>,
}

impl AutoReport {
    /// The report of a compaction's `outcome` (`None`: nothing to compact) at `estimate` tokens
    /// against `threshold`.
    pub(crate) fn of(outcome: Result<Option<Compaction>>, estimate: i64, threshold: i64) -> AutoReport {
        let (status, compaction, error) = match outcome {
            Ok(Some(c)) => (Status::Compacted, Some(c), None),
            Ok(None) => (Status::NothingToDo, None, None),
            Err(e) => (Status::Failed, None, Some(e.shown())),
        };
        AutoReport { status, token_estimate: estimate, token_threshold: threshold, compaction, error }
    }

    /// The operator's log line for a failed compaction of `session`.
    pub(crate) fn warning(&self, session: &str) -> Option<String> {
        self.error.as_ref().map(|e| format!("auto-compaction of session {session} failed: {e}"))
    }
}
