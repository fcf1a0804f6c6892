//! `SESSION_CONFIG.memory`: long-term memory's policy (inject, extract, the agent's scope by tags and categories, how long a `daily`
//! memory lives, how many memories an agent keeps, sleep-time consolidation). `true` turns it on with the defaults; each of
//! `inject` and `extract` is on unless `false`.

use serde::Deserialize;

use super::category::Category;
use super::parts::switch;
use crate::error::{Error, Result};

/// Memories an agent may hold by default (`SESSION_CONFIG.memory.maxMemories`).
pub const DEFAULT_MAX_MEMORIES: usize = 10_000;

/// `SESSION_CONFIG.memory`: `{inject?, extract?, tags?, categories?, dailyTtlDays?, maxMemories?}`. Present means the
/// memory tools are offered; `inject` and `extract` run unless set to `false`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// On unless `false` or `null` (absent: the defaults).
    #[serde(deserialize_with = "switch")]
    pub inject: Option<InjectConfig>,
    /// On unless `false` or `null` (absent: the defaults).
    #[serde(deserialize_with = "switch")]
    pub extract: Option<ExtractConfig>,
    /// Lifetime of a `daily` memory without its own `expiresAt`.
    pub daily_ttl_days: i64,
    /// Most memories the agent keeps; a write beyond is 422 `over_budget`.
    pub max_memories: i64,
    /// Sleep-time consolidation on the alarm; off unless set (`true`: the defaults).
    #[serde(deserialize_with = "switch")]
    pub maintenance: Option<MaintenanceConfig>,
    /// The agent's scope by tags (the seeds' `remembers().tags`): when set, its turns inject and
    /// its tools recall only memories holding at least one of them, and what extraction and
    /// `memory_store` store gets them all. Empty: every memory.
    pub tags: Vec<String>,
    /// The agent's scope by category: its turns inject and its tools recall only these.
    pub categories: Vec<Category>,
    /// The memory space the agent shares with the others that serve its user (`true`: the
    /// defaults; absent: only an admin's choice, `PUT /agents/{agent}/space`, gives it one).
    #[serde(deserialize_with = "switch")]
    pub space: Option<SpaceConfig>,
}

/// `memory.space`: which space an agent's name maps it to (the part of the name before the
/// first `separator`: `alice:planner` → `alice`; `null`: no rule) and how it uses it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SpaceConfig {
    pub separator: Option<String>,
    pub mode: SpaceMode,
}

impl Default for SpaceConfig {
    fn default() -> Self {
        SpaceConfig { separator: Some(":".to_owned()), mode: SpaceMode::Alongside }
    }
}

/// How an agent with a space uses it. Either way extraction writes into the space, and the
/// agent's own memories (written through its API) stay private.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpaceMode {
    /// Recall and injection read the space and the agent's own memories.
    #[default]
    Alongside,
    /// Recall and injection read the space only.
    Instead,
}

/// `memory.maintenance`: how often the alarm consolidates the memories changed since its last
/// pass (`everyHours`), and how many it checks per wake-up (`batch`, one model call each).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MaintenanceConfig {
    pub every_hours: i64,
    pub batch: i64,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig { every_hours: 24, batch: 10 }
    }
}

/// `memory.inject`: how many facts a turn is given, within how many tokens, of which categories.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InjectConfig {
    pub limit: i64,
    pub token_budget: i64,
    pub categories: Vec<Category>,
}

/// `memory.extract`: the lowest confidence kept, and the model that distills (default: the
/// configured one).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ExtractConfig {
    pub min_score: f64,
    pub model: Option<String>,
}

impl Default for InjectConfig {
    fn default() -> Self {
        InjectConfig { limit: 5, token_budget: 400, categories: Category::ALL.to_vec() }
    }
}

impl Default for ExtractConfig {
    fn default() -> Self {
        ExtractConfig { min_score: 0.7, model: None }
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            inject: Some(InjectConfig::default()),
            extract: Some(ExtractConfig::default()),
            daily_ttl_days: 7,
            max_memories: DEFAULT_MAX_MEMORIES as i64,
            tags: Vec::new(),
            categories: Category::ALL.to_vec(),
            maintenance: None,
            space: None,
        }
    }
}

impl MemoryConfig {
    /// The values within their ranges (`memory.…` otherwise).
    pub(crate) fn check(&self) -> Result<()> {
        in_range(self.daily_ttl_days, "memory.dailyTtlDays", 1, 3650)?;
        in_range(self.max_memories, "memory.maxMemories", 1, 1_000_000)?;
        if let Some(i) = &self.inject {
            in_range(i.limit, "memory.inject.limit", 1, 50)?;
            in_range(i.token_budget, "memory.inject.tokenBudget", 1, 100_000)?;
            if i.categories.is_empty() {
                return Err(Error::invalid("memory.inject.categories must be a non-empty array"));
            }
        }
        if self.categories.is_empty() {
            return Err(Error::invalid("memory.categories must be a non-empty array"));
        }
        check_scope_tags("memory.tags", &self.tags)?;
        if let Some(m) = &self.maintenance {
            in_range(m.every_hours, "memory.maintenance.everyHours", 1, 720)?;
            in_range(m.batch, "memory.maintenance.batch", 1, 50)?;
        }
        if let Some(sep) = self.space.as_ref().and_then(|s| s.separator.as_ref()) {
            if sep.is_empty() || sep.chars().count() > 8 || sep.chars().any(char::is_control) {
                return Err(Error::invalid("memory.space.separator must be 1 to 8 characters (or null)"));
            }
        }
        if let Some(x) = &self.extract {
            if !(0.0..=1.0).contains(&x.min_score) {
                return Err(Error::invalid("memory.extract.minScore must be a number from 0 to 1"));
            }
            if x.model.as_ref().is_some_and(|m| m.trim().is_empty()) {
                return Err(Error::invalid("memory.extract.model must be a non-empty string"));
            }
        }
        Ok(())
    }

    /// The categories a turn injects: `inject.categories` within the agent's `categories`.
    pub(crate) fn inject_categories(&self, inject: &InjectConfig) -> Vec<Category> {
        inject.categories.iter().copied().filter(|c| self.categories.contains(c)).collect()
    }

    /// The memory cap, as a count.
    pub(crate) fn cap(&self) -> usize {
        self.max_memories as usize
    }
}

/// Most tags a scope names (as a memory holds at most 16).
pub const MAX_SCOPE_TAGS: usize = 16;

/// Checks the tags of a scope (`memory.tags`, a call's `memory.tags`): at most 16 tags of 1-64
/// characters (once trimmed) without control characters, as a memory's.
pub fn check_scope_tags(what: &str, tags: &[String]) -> Result<()> {
    let bad = |t: &String| {
        let t = t.trim();
        t.is_empty() || t.chars().count() > 64 || t.chars().any(char::is_control)
    };
    if tags.len() > MAX_SCOPE_TAGS || tags.iter().any(bad) {
        return Err(Error::invalid(format!(
            "{what} must be an array of at most {MAX_SCOPE_TAGS} tags of 1-64 characters without control characters"
        )));
    }
    Ok(())
}

pub(crate) fn in_range(n: i64, what: &str, min: i64, max: i64) -> Result<()> {
    match (min..=max).contains(&n) {
        true => Ok(()),
        false => Err(Error::invalid(format!("{what} must be an integer from {min} to {max}"))),
    }
}
