//! `SESSION_CONFIG.schedules`: the limits of scheduled tasks (how many schedules, how long a
//! prompt, how many runs each keeps).

use serde::Deserialize;

use crate::error::{Error, Result};

/// `SESSION_CONFIG.schedules` `{maxSchedules?, maxPromptChars?, maxRuns?}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SchedulesConfig {
    /// Most schedules of the agent (default 100); one more is `422 over_budget`.
    pub max_schedules: i64,
    /// Most characters of a schedule's prompt (default 8,000).
    pub max_prompt_chars: usize,
    /// Runs kept per schedule, newest first (default 100); older ones go as new ones end.
    pub max_runs: i64,
}

impl Default for SchedulesConfig {
    fn default() -> Self {
        SchedulesConfig { max_schedules: 100, max_prompt_chars: 8_000, max_runs: 100 }
    }
}

impl SchedulesConfig {
    /// The values within their ranges (`schedules.…` otherwise).
    pub(crate) fn check(&self) -> Result<()> {
        if !(1..=10_000).contains(&self.max_schedules) {
            return Err(Error::invalid("schedules.maxSchedules must be from 1 to 10000"));
        }
        if !(1..=100_000).contains(&self.max_prompt_chars) {
            return Err(Error::invalid("schedules.maxPromptChars must be from 1 to 100000"));
        }
        if !(1..=10_000).contains(&self.max_runs) {
            return Err(Error::invalid("schedules.maxRuns must be from 1 to 10000"));
        }
        Ok(())
    }
}
