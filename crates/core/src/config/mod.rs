//! The agent's configuration (`SESSION_CONFIG`): its context blocks and policies. Parsed from
//! JSON or built in code with [`SessionConfig::builder`], then validated once, so a bad config
//! is reported when the Durable Object starts rather than in the middle of a turn. One way to
//! read every part: serde (camelCase keys, unknown ones refused, each key optional), then each
//! part's `check` of its values.
//!
//! - [`blocks`]: the context blocks, their kinds and scopes, the bucket's key spaces;
//! - [`category`]: the three kinds of memory (`core`, `daily`, `conversation`);
//! - [`compaction`]: when and how a path is compacted;
//! - [`chat`]: the agent turn's policy;
//! - [`memory`]: long-term memory's policy;
//! - [`schedules`]: the limits of scheduled tasks;
//! - [`tools`]: tools the agent runs itself beside its own (remote MCP servers).
//!
//! # Where it sits
//!
//! `SessionConfig` (from the `SESSION_CONFIG` JSON or `SessionConfig::builder`), checked once, at
//! start. One way to read every part: serde (camelCase keys, unknown ones refused, each key
//! optional; `parts.rs` says how a part may be written: an object, `null`, or `true`/`false` for a
//! switch), then each part's `check` of its values.
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 13. **No tenant reads or writes another tenant's objects**: agent-scoped skills are
//!     under `<prefix><agent>/` (the agent is the DO's own `idFromName` name, i.e. the agent actually
//!     served, after workerd resolved `..` in the path); shared skills are readonly to the model. Key
//!     spaces are disjoint (`config::blocks::check_scopes`: no empty prefix, agent prefixes equal or
//!     disjoint, shared not over agent, nothing over `_spill/`), and a block added at run time stays
//!     inside the spaces the configuration opened (`SessionConfig::check_runtime`, checked on add and
//!     again whenever stored runtime blocks are read).

pub mod blocks;
pub mod category;
pub mod chat;
pub mod compaction;
pub mod memory;
mod parts;
pub mod schedules;
pub mod tools;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::sort;
pub use blocks::{
    check_label, check_scopes, is_label, BlockConfig, BlockKind, BlockScope, D1Search, HttpOp, DEFAULT_HTTP_TIMEOUT_MS,
    DEFAULT_SKILLS_PREFIX, HISTORY_DESCRIPTION, MAX_HTTP_TIMEOUT_MS, MAX_QUERY_BYTES, MAX_SEARCH_COLUMNS,
    MAX_URL_BYTES,
};
pub use chat::{CacheConfig, CacheTtl, ChatConfig, OnDisconnect, DEFAULT_MAX_MESSAGES, DEFAULT_MAX_STEPS};
pub use compaction::{CompactOptions, CompactionConfig};
pub use memory::{
    ExtractConfig, InjectConfig, MaintenanceConfig, MemoryConfig, SpaceConfig, SpaceMode, DEFAULT_MAX_MEMORIES,
};
use parts::{object, or_default, switch};
pub use schedules::SchedulesConfig;
pub use tools::{McpServerConfig, ToolsConfig};

/// Everything `SESSION_CONFIG` configures. Every key is optional.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionConfig {
    /// The agent's context blocks, in prompt order.
    #[serde(default)]
    pub context: Vec<BlockConfig>,
    /// Freeze the system prompt in SQLite (default true). When false, `GET …/prompt` renders
    /// afresh every time and says `frozen: false`.
    #[serde(default = "yes")]
    pub cached_prompt: bool,
    /// Label of a readonly, searchable block over all sessions' messages (rendered last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searchable_history: Option<String>,
    /// Compaction policy `{after, protectHead, tailTokenBudget, minTailMessages}`; `None` (absent
    /// or `null`) when compaction is not configured.
    #[serde(default, deserialize_with = "object")]
    pub compaction: Option<CompactionConfig>,
    /// Agent-turn policy `{maxMessages, maxSteps, maxTokens}`.
    #[serde(default, deserialize_with = "or_default")]
    pub chat: ChatConfig,
    /// Long-term memory `{inject?, extract?, dailyTtlDays?, maxMemories?}`, or `true` for its
    /// defaults; `None` when not set (the memory routes work anyway; the tools, inject and
    /// extract need it).
    #[serde(default, deserialize_with = "switch")]
    pub memory: Option<MemoryConfig>,
    /// Limits of scheduled tasks `{maxSchedules, maxPromptChars, maxRuns}`.
    #[serde(default, deserialize_with = "or_default")]
    pub schedules: SchedulesConfig,
    /// Tools the agent runs itself beside its own `{mcp?}`: remote MCP servers.
    #[serde(default, deserialize_with = "tools::read")]
    pub tools: ToolsConfig,
}

fn yes() -> bool {
    true
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            context: Vec::new(),
            cached_prompt: true,
            searchable_history: None,
            compaction: None,
            chat: ChatConfig::default(),
            memory: None,
            schedules: SchedulesConfig::default(),
            tools: ToolsConfig::default(),
        }
    }
}

impl SessionConfig {
    /// Parses and validates `SESSION_CONFIG`. An empty string is the default config.
    pub fn from_json(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let cfg: SessionConfig =
            serde_json::from_str(text).map_err(|e| Error::invalid(format!("SESSION_CONFIG: {e}")))?;
        cfg.validate().map_err(|e| Error::invalid(format!("SESSION_CONFIG: {}", e.message)))?;
        Ok(cfg)
    }

    /// Starts a config in code, for a Durable Object of your own.
    pub fn builder() -> SessionConfigBuilder {
        SessionConfigBuilder { cfg: SessionConfig::default() }
    }

    /// Confines a block added at run time (`POST …/context`) to what this agent may reach in
    /// the bucket, whichever session adds it: its own skills under a configured agent-scoped
    /// prefix (or the default `skills/` when none is configured), a configured shared library
    /// (or a part of one), and for `r2Key` an object in one of those or a key the config itself
    /// names. Only the operator's config opens a new space, and only it makes the agent call
    /// out: no block added at run time is an `http` block.
    pub(crate) fn check_runtime(&self, b: &BlockConfig, agent: &str) -> Result<()> {
        let l = &b.label;
        if matches!(b.kind, BlockKind::Http | BlockKind::D1) {
            return Err(Error::invalid(format!(
                "block \"{l}\": {} block reads from outside the agent (the operator's service or database), so only \
                 SESSION_CONFIG configures one; a block added at run time cannot be one",
                if b.kind == BlockKind::Http { "an http" } else { "a d1" }
            )));
        }
        let skills = |scope: BlockScope| {
            self.context.iter().filter(move |c| c.kind == BlockKind::Skills && c.scope.unwrap_or_default() == scope)
        };
        let mut own: Vec<&str> = skills(BlockScope::Agent).map(BlockConfig::skills_prefix).collect();
        if own.is_empty() {
            own.push(DEFAULT_SKILLS_PREFIX);
        }
        let shared: Vec<&str> = skills(BlockScope::Shared).map(BlockConfig::skills_prefix).collect();
        if b.kind == BlockKind::Skills {
            let p = b.skills_prefix();
            let ok = match b.scope.unwrap_or_default() {
                BlockScope::Agent => own.contains(&p),
                BlockScope::Shared => shared.iter().any(|s| p.starts_with(s)),
                BlockScope::Space => false,
            };
            if !ok {
                let allowed = match b.scope.unwrap_or_default() {
                    BlockScope::Agent => format!("agent-scoped skills use one of the configured prefixes {own:?}"),
                    BlockScope::Shared if shared.is_empty() => "no shared library is configured".to_owned(),
                    BlockScope::Shared => {
                        format!("shared skills must lie under one of the configured libraries {shared:?}")
                    }
                    BlockScope::Space => "a skills block's scope is \"agent\" or \"shared\"".to_owned(),
                };
                return Err(Error::invalid(format!(
                    "block \"{l}\": prefix {p:?} is outside this agent's space: {allowed}"
                )));
            }
        }
        if let Some(key) = &b.r2_key {
            let configured = self.context.iter().any(|c| c.r2_key.as_ref() == Some(key));
            let in_own = own
                .iter()
                .any(|p| key.strip_prefix(p).and_then(|k| k.strip_prefix(agent)).is_some_and(|k| k.starts_with('/')));
            let in_shared = shared.iter().any(|s| key.starts_with(s));
            if !(configured || in_own || in_shared) {
                return Err(Error::invalid(format!(
                    "block \"{l}\": r2Key {key:?} is outside this agent's space: a block added at run time reads \
                     this agent's own skills, a configured shared library, or an r2Key the config names"
                )));
            }
        }
        Ok(())
    }

    /// Every block valid, labels unique (the history block included), skills prefixes safe, each
    /// policy's values in range.
    pub(crate) fn validate(&self) -> Result<()> {
        self.compaction.as_ref().map_or(Ok(()), CompactionConfig::check)?;
        self.chat.check()?;
        self.memory.as_ref().map_or(Ok(()), MemoryConfig::check)?;
        self.schedules.check()?;
        self.tools.check()?;
        for b in &self.context {
            b.validate()?;
        }
        let mut labels: Vec<&str> = self.context.iter().map(|b| b.label.as_str()).collect();
        if let Some(h) = &self.searchable_history {
            check_label(h)?;
            labels.push(h);
        }
        let mut sorted = labels.clone();
        sort::ascending(&mut sorted);
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(format!("two blocks are labelled \"{}\"", w[0])));
        }
        check_scopes(&self.context.iter().collect::<Vec<_>>())?;
        Ok(())
    }
}

/// How the system prompt is kept (`cachedPrompt` in the config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptPolicy {
    /// Rendered once and stored (`cachedPrompt: true`, the default).
    Frozen,
    /// Rendered afresh every time (`cachedPrompt: false`).
    Fresh,
}

/// Builds a [`SessionConfig`] in code; `build` validates it like `SESSION_CONFIG`.
#[derive(Clone, Debug)]
pub struct SessionConfigBuilder {
    cfg: SessionConfig,
}

impl SessionConfigBuilder {
    /// Any block, as configured.
    pub fn block(mut self, block: BlockConfig) -> Self {
        self.cfg.context.push(block);
        self
    }
    /// A readonly block with static text.
    pub fn readonly(self, label: &str, description: Option<&str>, content: &str) -> Self {
        let mut b = BlockConfig::new(label, BlockKind::Readonly);
        b.description = description.map(str::to_owned);
        b.content = Some(content.to_owned());
        self.block(b)
    }
    /// A readonly block whose text is the R2 object `key`.
    pub fn readonly_r2(self, label: &str, description: Option<&str>, key: &str) -> Self {
        let mut b = BlockConfig::new(label, BlockKind::Readonly);
        b.description = description.map(str::to_owned);
        b.r2_key = Some(key.to_owned());
        self.block(b)
    }
    /// A per-session writable block, optionally with a token budget.
    pub fn writable(self, label: &str, description: Option<&str>, max_tokens: Option<i64>) -> Self {
        let mut b = BlockConfig::new(label, BlockKind::Writable);
        b.description = description.map(str::to_owned);
        b.max_tokens = max_tokens;
        self.block(b)
    }
    /// A searchable block of keyed entries.
    pub fn search(self, label: &str, description: Option<&str>) -> Self {
        let mut b = BlockConfig::new(label, BlockKind::Search);
        b.description = description.map(str::to_owned);
        self.block(b)
    }
    /// A skills block over R2 objects under `prefix`.
    pub fn skills(self, label: &str, prefix: &str, scope: BlockScope) -> Self {
        let mut b = BlockConfig::new(label, BlockKind::Skills);
        b.prefix = Some(prefix.to_owned());
        b.scope = Some(scope);
        self.block(b)
    }
    /// Whether the prompt is frozen in SQLite (the default) or rendered afresh every time.
    pub fn prompt(mut self, prompt: PromptPolicy) -> Self {
        self.cfg.cached_prompt = prompt == PromptPolicy::Frozen;
        self
    }
    /// A searchable block over every session's messages, labelled `label`.
    pub fn searchable_history(mut self, label: &str) -> Self {
        self.cfg.searchable_history = Some(label.to_owned());
        self
    }
    /// The compaction policy.
    pub fn compaction(mut self, policy: CompactionConfig) -> Self {
        self.cfg.compaction = Some(policy);
        self
    }
    /// The agent-turn policy.
    pub fn chat(mut self, policy: ChatConfig) -> Self {
        self.cfg.chat = policy;
        self
    }
    /// Long-term memory: the memory tools, inject and extract.
    pub fn memory(mut self, policy: MemoryConfig) -> Self {
        self.cfg.memory = Some(policy);
        self
    }
    /// The limits of scheduled tasks.
    pub fn schedules(mut self, limits: SchedulesConfig) -> Self {
        self.cfg.schedules = limits;
        self
    }
    /// Tools the agent runs itself (remote MCP servers).
    pub fn tools(mut self, tools: ToolsConfig) -> Self {
        self.cfg.tools = tools;
        self
    }
    /// The validated config.
    pub fn build(self) -> Result<SessionConfig> {
        self.cfg.validate()?;
        Ok(self.cfg)
    }
}
