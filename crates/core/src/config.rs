//! The agent's configuration (`SESSION_CONFIG`): its context blocks and policies. Parsed from
//! JSON or built in code with [`SessionConfig::builder`], then validated once, so a bad config
//! is reported when the Durable Object starts rather than in the middle of a turn.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};
use crate::store::spill::SPILL_PREFIX;

/// Where skills live when a skills block names no `prefix`.
pub const DEFAULT_SKILLS_PREFIX: &str = "skills/";
/// The description of the `searchableHistory` block (docs/REFERENCE.md#block-kinds).
pub const HISTORY_DESCRIPTION: &str = "Cross-session conversation history";

/// The four kinds of block (`kind` in the config and the API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockKind {
    /// Static text, or text read from R2 (`r2Key`). The model cannot write it.
    Readonly,
    /// Per-session text the model writes with `set_context`, within `maxTokens`.
    Writable,
    /// Keyed entries in SQLite FTS5, shared by the agent's sessions; `search_context` reads them.
    Search,
    /// Documents in R2 under a prefix, listed in the prompt, loaded on demand.
    Skills,
}

impl BlockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::Readonly => "readonly",
            BlockKind::Writable => "writable",
            BlockKind::Search => "search",
            BlockKind::Skills => "skills",
        }
    }
}

/// Who may see and write a skills block's objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `<prefix><agent>/<key>`: this agent's own skills, which its model may write.
    #[default]
    Agent,
    /// `<prefix><key>`: a library common to all agents, readonly to the model.
    Shared,
}

/// One context block as configured (in `SESSION_CONFIG`, a builder, or `POST …/context`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockConfig {
    pub label: String,
    pub kind: BlockKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Token budget of a writable block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// Readonly: the text. Writable: the initial text of every session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Readonly: read the text from this R2 key instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r2_key: Option<String>,
    /// Skills: the R2 key prefix (default `skills/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Skills: `agent` (default) or `shared`. Writable: `agent` for one text shared by all the
    /// agent's sessions (default: one per session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
}

impl BlockConfig {
    /// A block of `kind` with nothing else set.
    pub fn new(label: impl Into<String>, kind: BlockKind) -> Self {
        BlockConfig {
            label: label.into(),
            kind,
            description: None,
            max_tokens: None,
            content: None,
            r2_key: None,
            prefix: None,
            scope: None,
        }
    }

    /// The skills prefix in effect.
    pub fn skills_prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or(DEFAULT_SKILLS_PREFIX)
    }

    /// Checks one block on its own (labels against each other: [`SessionConfig::validate`]).
    pub fn validate(&self) -> Result<()> {
        check_label(&self.label)?;
        let l = &self.label;
        let only = |what: &str, set: bool, kinds: &str| {
            if set {
                Err(Error::invalid(format!("block \"{l}\": {what} is only for {kinds} blocks")))
            } else {
                Ok(())
            }
        };
        let k = self.kind;
        only("maxTokens", self.max_tokens.is_some() && k != BlockKind::Writable, "writable")?;
        only(
            "content",
            self.content.is_some() && !matches!(k, BlockKind::Readonly | BlockKind::Writable),
            "readonly and writable",
        )?;
        only("r2Key", self.r2_key.is_some() && k != BlockKind::Readonly, "readonly")?;
        only("prefix", self.prefix.is_some() && k != BlockKind::Skills, "skills")?;
        only(
            "scope",
            self.scope.is_some() && !matches!(k, BlockKind::Skills | BlockKind::Writable),
            "skills and writable",
        )?;
        if k == BlockKind::Writable && self.scope == Some(Scope::Shared) {
            return Err(Error::invalid(format!(
                "block \"{l}\": a writable block's scope is \"agent\" (one text shared by the agent's sessions) or absent \
                 (one per session)"
            )));
        }
        if self.content.is_some() && self.r2_key.is_some() {
            return Err(Error::invalid(format!("block \"{l}\": give content or r2Key, not both")));
        }
        if let Some(max) = self.max_tokens {
            if max < 1 {
                return Err(Error::invalid(format!("block \"{l}\": maxTokens must be a positive integer")));
            }
        }
        if let Some(key) = &self.r2_key {
            if key.is_empty() || key.len() > 1024 {
                return Err(Error::invalid(format!("block \"{l}\": r2Key must be 1-1024 bytes")));
            }
        }
        if self.prefix.as_ref().is_some_and(|p| p.len() > 512) {
            return Err(Error::invalid(format!("block \"{l}\": prefix is longer than 512 bytes")));
        }
        Ok(())
    }
}

/// Whether `name` is 1–64 characters of `[A-Za-z0-9_-]`: the shape of block labels and of
/// tool names (names a model and a URL path both carry safely).
pub fn is_label(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Block labels: 1–64 characters of `[A-Za-z0-9_-]` (they appear in paths and in `label:key`).
pub fn check_label(label: &str) -> Result<()> {
    if is_label(label) {
        Ok(())
    } else {
        Err(Error::invalid(format!("block label {label:?} must be 1-64 characters of [A-Za-z0-9_-]")))
    }
}

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
    #[serde(default, deserialize_with = "compaction_policy")]
    pub compaction: Option<CompactionConfig>,
    /// Agent-turn policy `{maxMessages, maxSteps, maxTokens}`.
    #[serde(default, deserialize_with = "chat_policy")]
    pub chat: ChatConfig,
    /// Long-term memory `{inject?, extract?, dailyTtlDays?, maxMemories?}`; `None` when not set
    /// (the memory routes work anyway; the tools, inject and extract need it).
    #[serde(default, deserialize_with = "memory_policy")]
    pub memory: Option<MemoryConfig>,
}

fn memory_policy<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<MemoryConfig>, D::Error> {
    match Option::<Json>::deserialize(d)? {
        None => Ok(None),
        Some(v) => MemoryConfig::from_json(&v).map_err(|e| serde::de::Error::custom(e.message)),
    }
}

fn compaction_policy<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<CompactionConfig>, D::Error> {
    match Option::<Json>::deserialize(d)? {
        None | Some(Json::Null) => Ok(None),
        Some(v) => CompactionConfig::from_json(Some(&v)).map(Some).map_err(|e| serde::de::Error::custom(e.message)),
    }
}

fn chat_policy<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<ChatConfig, D::Error> {
    let v = Option::<Json>::deserialize(d)?.filter(|v| !v.is_null());
    ChatConfig::from_json(v.as_ref()).map_err(|e| serde::de::Error::custom(e.message))
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
    /// names. Only the operator's config opens a new space.
    pub fn check_runtime(&self, b: &BlockConfig, agent: &str) -> Result<()> {
        let l = &b.label;
        let skills = |scope: Scope| {
            self.context.iter().filter(move |c| c.kind == BlockKind::Skills && c.scope.unwrap_or_default() == scope)
        };
        let mut own: Vec<&str> = skills(Scope::Agent).map(BlockConfig::skills_prefix).collect();
        if own.is_empty() {
            own.push(DEFAULT_SKILLS_PREFIX);
        }
        let shared: Vec<&str> = skills(Scope::Shared).map(BlockConfig::skills_prefix).collect();
        if b.kind == BlockKind::Skills {
            let p = b.skills_prefix();
            let ok = match b.scope.unwrap_or_default() {
                Scope::Agent => own.contains(&p),
                Scope::Shared => shared.iter().any(|s| p.starts_with(s)),
            };
            if !ok {
                let allowed = match b.scope.unwrap_or_default() {
                    Scope::Agent => format!("agent-scoped skills use one of the configured prefixes {own:?}"),
                    Scope::Shared if shared.is_empty() => "no shared library is configured".to_owned(),
                    Scope::Shared => format!("shared skills must lie under one of the configured libraries {shared:?}"),
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

    /// Every block valid, labels unique (the history block included), skills prefixes safe.
    pub fn validate(&self) -> Result<()> {
        for b in &self.context {
            b.validate()?;
        }
        let mut labels: Vec<&str> = self.context.iter().map(|b| b.label.as_str()).collect();
        if let Some(h) = &self.searchable_history {
            check_label(h)?;
            labels.push(h);
        }
        let mut sorted = labels.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(format!("two blocks are labelled \"{}\"", w[0])));
        }
        check_scopes(&self.context.iter().collect::<Vec<_>>())?;
        Ok(())
    }
}

/// The bucket's key spaces stay apart (checked for the configured blocks, and again for every
/// block added at run time together with the session's others):
///
/// - no skills prefix is empty (an agent-scoped one would make `<agent>/` the agent's root, so an
///   agent named like another prefix would own it);
/// - agent-scoped prefixes are equal or disjoint: were `skills/` and `skills/x/` both used, the
///   agent named `x` would own every other agent's `skills/x/<agent>/`;
/// - a shared prefix does not cover (and is not covered by) an agent-scoped one, or a shared
///   library would list every agent's own skills;
/// - nothing reaches the objects of spilled messages (`_spill/`).
pub fn check_scopes(blocks: &[&BlockConfig]) -> Result<()> {
    let skills = || blocks.iter().filter(|b| b.kind == BlockKind::Skills);
    let overlap = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
    for b in skills() {
        let p = b.skills_prefix();
        if p.is_empty() {
            return Err(Error::invalid(format!("skills block \"{}\": prefix must not be empty", b.label)));
        }
        if overlap(p, SPILL_PREFIX) {
            return Err(Error::invalid(format!(
                "skills block \"{}\": prefix {p:?} overlaps {SPILL_PREFIX:?}, where oversize messages are kept",
                b.label
            )));
        }
    }
    for b in blocks {
        if b.r2_key.as_deref().is_some_and(|k| k.starts_with(SPILL_PREFIX)) {
            return Err(Error::invalid(format!("block \"{}\": r2Key may not be under {SPILL_PREFIX:?}", b.label)));
        }
    }
    let agent = || skills().filter(|b| b.scope.unwrap_or_default() == Scope::Agent);
    for a in agent() {
        for b in agent() {
            let (p, q) = (a.skills_prefix(), b.skills_prefix());
            if p != q && overlap(p, q) {
                return Err(Error::invalid(format!(
                    "skills blocks \"{}\" (prefix {p:?}) and \"{}\" (prefix {q:?}) are both agent-scoped and nested: \
                     one agent's own skills would lie inside another's",
                    a.label, b.label
                )));
            }
        }
    }
    for shared in skills().filter(|b| b.scope == Some(Scope::Shared)) {
        for own in agent() {
            let (s, a) = (shared.skills_prefix(), own.skills_prefix());
            if overlap(s, a) {
                return Err(Error::invalid(format!(
                    "skills blocks \"{}\" (shared, prefix {s:?}) and \"{}\" (agent, prefix {a:?}) overlap: \
                     a shared library would list every agent's own skills",
                    shared.label, own.label
                )));
            }
        }
    }
    Ok(())
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
    pub fn skills(self, label: &str, prefix: &str, scope: Scope) -> Self {
        let mut b = BlockConfig::new(label, BlockKind::Skills);
        b.prefix = Some(prefix.to_owned());
        b.scope = Some(scope);
        self.block(b)
    }
    /// Freeze the prompt in SQLite (the default) or not.
    pub fn cached_prompt(mut self, on: bool) -> Self {
        self.cfg.cached_prompt = on;
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
    /// The validated config.
    pub fn build(self) -> Result<SessionConfig> {
        self.cfg.validate()?;
        Ok(self.cfg)
    }
}

// ── Compaction policy ──────────────────────────────────────────────────────────────────────────────────────────

/// The knobs of the reference's `createCompactFunction` (docs/REFERENCE.md#compaction-options), with its defaults (3 /
/// 20000 / 2; the JSDoc's "protectHead = 2" is wrong, docs/REFERENCE.md#d-compaction-docs).
///
/// Deserializes from camelCase keys, each optional. Unknown keys are ignored here; the `SESSION_CONFIG.compaction`
/// object is read with [`CompactionConfig`], which rejects them.
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

/// `SESSION_CONFIG.compaction`: `{"after"?, "protectHead"?, "tailTokenBudget"?, "minTailMessages"?}`.
///
/// `after` is the auto-compaction threshold (the reference's `compactAfter(threshold)`,
/// docs/REFERENCE.md#auto-compaction: compact after a new message when the path's estimate is strictly greater); `None`
/// means never automatically. The other keys are [`CompactOptions`], defaulted field by field.
///
/// Unknown keys are rejected (`unknown field `x`, expected one of …`), as are negative numbers and non-integers.
/// (Serde's `deny_unknown_fields` does not work with `flatten`, so this goes through a private flat struct.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawCompactionConfig")]
pub struct CompactionConfig {
    pub after: Option<i64>,
    pub options: CompactOptions,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCompactionConfig {
    #[serde(default)]
    after: Option<i64>,
    protect_head: Option<usize>,
    tail_token_budget: Option<i64>,
    min_tail_messages: Option<usize>,
}

impl TryFrom<RawCompactionConfig> for CompactionConfig {
    type Error = String;

    fn try_from(raw: RawCompactionConfig) -> std::result::Result<Self, String> {
        if raw.after.is_some_and(|a| a < 0) {
            return Err("after must be a non-negative integer (a token count)".into());
        }
        if raw.tail_token_budget.is_some_and(|b| b < 0) {
            return Err("tailTokenBudget must be a non-negative integer".into());
        }
        let d = CompactOptions::default();
        Ok(CompactionConfig {
            after: raw.after,
            options: CompactOptions {
                protect_head: raw.protect_head.unwrap_or(d.protect_head),
                tail_token_budget: raw.tail_token_budget.unwrap_or(d.tail_token_budget),
                min_tail_messages: raw.min_tail_messages.unwrap_or(d.min_tail_messages),
            },
        })
    }
}

impl CompactionConfig {
    /// Reads `SESSION_CONFIG.compaction`; absent or `null` gives the defaults (no auto-compaction).
    /// Errors are `invalid_request` with a message starting `compaction: `.
    pub fn from_json(v: Option<&Json>) -> Result<Self> {
        match v {
            None | Some(Json::Null) => Ok(Self::default()),
            Some(v) => Self::deserialize(v).map_err(|e| Error::invalid(format!("compaction: {e}"))),
        }
    }
}

// ── Agent-turn policy ──────────────────────────────────────────────────────────────────────────────

/// Model messages sent per step, by default (a tool call is never separated from its result).
pub const DEFAULT_MAX_MESSAGES: usize = 50;
/// Model calls per turn, by default: a turn whose model keeps calling server tools stops there.
pub const DEFAULT_MAX_STEPS: usize = 8;

/// `SESSION_CONFIG.chat`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatConfig {
    /// Most model messages sent per step (0 = no cap).
    #[serde(default = "default_max_messages")]
    pub max_messages: usize,
    /// Most model calls per turn (1–50).
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// `max_tokens` of each call (default: the provider layer's).
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

fn default_max_messages() -> usize {
    DEFAULT_MAX_MESSAGES
}

fn default_max_steps() -> usize {
    DEFAULT_MAX_STEPS
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig { max_messages: DEFAULT_MAX_MESSAGES, max_steps: DEFAULT_MAX_STEPS, max_tokens: None }
    }
}

impl ChatConfig {
    /// Parses and checks `SESSION_CONFIG.chat` (absent = the defaults).
    pub fn from_json(v: Option<&Json>) -> Result<Self> {
        let Some(v) = v else { return Ok(ChatConfig::default()) };
        let cfg: ChatConfig = serde_json::from_value(v.clone()).map_err(|e| Error::invalid(format!("chat: {e}")))?;
        if !(1..=50).contains(&cfg.max_steps) {
            return Err(Error::invalid("chat.maxSteps must be from 1 to 50"));
        }
        if cfg.max_tokens == Some(0) {
            return Err(Error::invalid("chat.maxTokens must be positive"));
        }
        Ok(cfg)
    }
}

// ── Memory policy ────────────────────────────────────────────────────────────────────────────────────

/// `SESSION_CONFIG.memory`: `{inject?, extract?, dailyTtlDays?, maxMemories?}`. Present means the
/// memory tools are offered; `inject` and `extract` run unless set to `false`.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryConfig {
    pub inject: Option<InjectConfig>,
    pub extract: Option<ExtractConfig>,
    /// Lifetime of a `daily` memory without its own `expiresAt`.
    pub daily_ttl_days: u32,
    /// Most memories the agent keeps; a write beyond is 422 `over_budget`.
    pub max_memories: usize,
}

/// `memory.inject`: how many facts a turn is given, within how many tokens, of which categories.
#[derive(Clone, Debug, PartialEq)]
pub struct InjectConfig {
    pub limit: usize,
    pub token_budget: i64,
    pub categories: Vec<Category>,
}

/// `memory.extract`: the lowest confidence kept, and the model that distills (default: the
/// configured one).
#[derive(Clone, Debug, PartialEq)]
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
            max_memories: DEFAULT_MAX_MEMORIES,
        }
    }
}

impl MemoryConfig {
    /// Reads `SESSION_CONFIG.memory` (an object, or `true` for the defaults). Unknown keys and
    /// values out of range are `invalid_request` starting `memory`.
    pub fn from_json(v: &Json) -> Result<Option<MemoryConfig>> {
        let obj = match v {
            Json::Null | Json::Bool(false) => return Ok(None),
            Json::Bool(true) => return Ok(Some(MemoryConfig::default())),
            Json::Object(o) => o,
            _ => return Err(Error::invalid("memory must be an object")),
        };
        known(obj, "memory", &["inject", "extract", "dailyTtlDays", "maxMemories"])?;
        let d = MemoryConfig::default();
        let daily_ttl_days = match obj.get("dailyTtlDays") {
            None => d.daily_ttl_days,
            Some(v) => int_in(v, "memory.dailyTtlDays", 1, 3650)? as u32,
        };
        let max_memories = match obj.get("maxMemories") {
            None => d.max_memories,
            Some(v) => int_in(v, "memory.maxMemories", 1, 1_000_000)? as usize,
        };
        Ok(Some(MemoryConfig {
            inject: section(obj.get("inject"), "memory.inject", inject_config)?,
            extract: section(obj.get("extract"), "memory.extract", extract_config)?,
            daily_ttl_days,
            max_memories,
        }))
    }
}

/// A section that is on by default: absent or `true` → defaults, `false`/`null` → off.
fn section<T: Default>(v: Option<&Json>, what: &str, parse: fn(&Map<String, Json>) -> Result<T>) -> Result<Option<T>> {
    match v {
        None | Some(Json::Bool(true)) => Ok(Some(T::default())),
        Some(Json::Null | Json::Bool(false)) => Ok(None),
        Some(Json::Object(o)) => parse(o).map(Some),
        Some(_) => Err(Error::invalid(format!("{what} must be an object, true or false"))),
    }
}

fn inject_config(o: &Map<String, Json>) -> Result<InjectConfig> {
    known(o, "memory.inject", &["limit", "tokenBudget", "categories"])?;
    let d = InjectConfig::default();
    let categories = match o.get("categories") {
        None => d.categories,
        Some(Json::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|c| {
                c.as_str().ok_or_else(|| Error::invalid("memory.inject.categories: strings")).and_then(Category::parse)
            })
            .collect::<Result<_>>()?,
        Some(_) => return Err(Error::invalid("memory.inject.categories must be a non-empty array")),
    };
    Ok(InjectConfig {
        limit: o.get("limit").map_or(Ok(d.limit as i64), |v| int_in(v, "memory.inject.limit", 1, 50))? as usize,
        token_budget: o
            .get("tokenBudget")
            .map_or(Ok(d.token_budget), |v| int_in(v, "memory.inject.tokenBudget", 1, 100_000))?,
        categories,
    })
}

fn extract_config(o: &Map<String, Json>) -> Result<ExtractConfig> {
    known(o, "memory.extract", &["minScore", "model"])?;
    let min_score = match o.get("minScore") {
        None => ExtractConfig::default().min_score,
        Some(v) => v
            .as_f64()
            .filter(|s| (0.0..=1.0).contains(s))
            .ok_or_else(|| Error::invalid("memory.extract.minScore must be a number from 0 to 1"))?,
    };
    let model = match o.get("model") {
        None | Some(Json::Null) => None,
        Some(Json::String(m)) if !m.trim().is_empty() => Some(m.trim().to_owned()),
        Some(_) => return Err(Error::invalid("memory.extract.model must be a non-empty string")),
    };
    Ok(ExtractConfig { min_score, model })
}

fn known(o: &Map<String, Json>, what: &str, keys: &[&str]) -> Result<()> {
    match o.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(Error::invalid(format!("{what}: unknown field `{k}`, expected one of {}", keys.join(", ")))),
        None => Ok(()),
    }
}

fn int_in(v: &Json, what: &str, min: i64, max: i64) -> Result<i64> {
    v.as_i64()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| Error::invalid(format!("{what} must be an integer from {min} to {max}")))
}

/// Memories an agent may hold by default (`SESSION_CONFIG.memory.maxMemories`).
pub const DEFAULT_MAX_MEMORIES: usize = 10_000;

/// The three kinds of memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// A permanent fact (the default).
    #[default]
    Core,
    /// A note that expires (after `dailyTtlDays`, or at its `expiresAt`).
    Daily,
    /// Context of one session, deleted with it.
    Conversation,
}

impl Category {
    pub const ALL: [Category; 3] = [Category::Core, Category::Daily, Category::Conversation];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Core => "core",
            Category::Daily => "daily",
            Category::Conversation => "conversation",
        }
    }

    /// The category called `name`; anything else is `invalid_request`.
    pub fn parse(name: &str) -> Result<Category> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == name)
            .ok_or_else(|| Error::invalid(format!("category must be one of core, daily, conversation (got {name:?})")))
    }
}
