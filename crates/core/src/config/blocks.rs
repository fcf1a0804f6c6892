//! The context blocks an agent is configured with (`SESSION_CONFIG.context`, a builder, or a block
//! added at run time with `POST …/context`): their kinds and scopes, each block checked on its
//! own (`BlockConfig::validate`) and the bucket's key spaces kept apart ([`check_scopes`]).

use serde::{Deserialize, Serialize};

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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BlockKind::Readonly => "readonly",
            BlockKind::Writable => "writable",
            BlockKind::Search => "search",
            BlockKind::Skills => "skills",
        }
    }
}

/// Whose a block's content is (`scope` in the config): a skills block's objects, and a writable
/// block's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockScope {
    /// `<prefix><agent>/<key>`: this agent's own skills, which its model may write.
    #[default]
    Agent,
    /// `<prefix><key>`: a library common to all agents, readonly to the model.
    Shared,
    /// Writable only: one text kept in the agent's memory space, which every agent of the space
    /// reads and writes (`core::space::blocks`).
    Space,
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
    /// agent's sessions, `space` for one text shared by the agents of its memory space (default:
    /// one per session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<BlockScope>,
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
    pub(crate) fn skills_prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or(DEFAULT_SKILLS_PREFIX)
    }

    /// Checks one block on its own (labels against each other: [`SessionConfig::validate`]).
    pub(crate) fn validate(&self) -> Result<()> {
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
        if k == BlockKind::Writable && self.scope == Some(BlockScope::Shared) {
            return Err(Error::invalid(format!(
                "block \"{l}\": a writable block's scope is \"agent\" (one text shared by the agent's sessions), \
                 \"space\" (one text shared by the agents of its memory space) or absent (one per session)"
            )));
        }
        if k == BlockKind::Skills && self.scope == Some(BlockScope::Space) {
            return Err(Error::invalid(format!("block \"{l}\": a skills block's scope is \"agent\" or \"shared\"")));
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
    let agent = || skills().filter(|b| b.scope.unwrap_or_default() == BlockScope::Agent);
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
    for shared in skills().filter(|b| b.scope == Some(BlockScope::Shared)) {
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
