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

/// The kinds of block (`kind` in the config and the API).
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
    /// Text (and, as `ops` says, search, writes and loads) from the operator's own service at
    /// `url`, one JSON POST per operation (`crate::context::http`). `SESSION_CONFIG` only.
    Http,
    /// The rows of the operator's query on a D1 database the Worker binds and, with `search`,
    /// a search of named columns (`crate::context::d1`). `SESSION_CONFIG` only.
    D1,
}

impl BlockKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BlockKind::Readonly => "readonly",
            BlockKind::Writable => "writable",
            BlockKind::Search => "search",
            BlockKind::Skills => "skills",
            BlockKind::Http => "http",
            BlockKind::D1 => "d1",
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

/// What an `http` block's service answers besides `get` (`ops` in the config, by these names),
/// each the `op` of its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpOp {
    /// `search`: `search_context` asks it (the block is `[searchable]`).
    Search,
    /// `set`: `set_context` writes through it (the block is writable).
    Set,
    /// `load`: `load_context` loads a document by key from it (the block is `[loadable]`).
    Load,
}

impl HttpOp {
    /// Its name in `ops` and in a request's `op`.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpOp::Search => "search",
            HttpOp::Set => "set",
            HttpOp::Load => "load",
        }
    }
}

/// Default time an `http` block's call may take, answer read included (`timeoutMs`).
pub const DEFAULT_HTTP_TIMEOUT_MS: u64 = 5_000;
/// Most time an `http` block's call may be given.
pub const MAX_HTTP_TIMEOUT_MS: u64 = 30_000;
/// Longest `url` of an `http` block.
pub const MAX_URL_BYTES: usize = 2048;

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
    /// Http: where its service takes the block's requests (`http://` or `https://`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Http: the name of the Worker secret (or var) sent as `Authorization: Bearer <value>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Http: the time one call may take, answer read included (default 5,000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Http: what the service answers besides `get`: names of [`HttpOp`]s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<String>>,
    /// D1: the name of the Worker's D1 binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// D1: the operator's query whose rows are the block's text (a `SELECT` or `WITH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// D1: the table and columns `search_context` looks in, `{table, columns, key?}`
    /// (read by `BlockConfig::d1_search`; kept as JSON, which every config already reads, rather than
    /// a struct of its own: a smaller wasm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<serde_json::Value>,
}

/// What `search_context` searches in a `d1` block: rows of `table` with every word of the query
/// in one of `columns` (`LIKE`, the words bound as parameters).
#[derive(Clone, Debug, PartialEq)]
pub struct D1Search {
    pub table: String,
    /// 1–8 columns, searched and shown in this order.
    pub columns: Vec<String>,
    /// A column shown as each hit's `[key]`.
    pub key: Option<String>,
}

/// Longest `query` of a `d1` block.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Most columns a `d1` block's search looks in.
pub const MAX_SEARCH_COLUMNS: usize = 8;

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
            url: None,
            secret: None,
            timeout_ms: None,
            ops: None,
            binding: None,
            query: None,
            search: None,
        }
    }

    /// Http: whether its service answers `op`.
    pub(crate) fn answers(&self, op: HttpOp) -> bool {
        self.kind == BlockKind::Http && self.ops.as_ref().is_some_and(|ops| ops.iter().any(|o| o == op.as_str()))
    }

    /// D1: its `search`, read (`None` without one, or one of another shape, which
    /// [`BlockConfig::validate`] refuses).
    pub(crate) fn d1_search(&self) -> Option<D1Search> {
        let s = self.search.as_ref()?.as_object()?;
        let name = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        if s.keys().any(|k| !matches!(k.as_str(), "table" | "columns" | "key")) {
            return None;
        }
        let columns = s.get("columns")?.as_array()?.iter().map(name).collect::<Option<Vec<_>>>()?;
        let key = match s.get("key") {
            None => None,
            Some(k) => Some(name(k)?),
        };
        Some(D1Search { table: name(s.get("table")?)?, columns, key })
    }

    /// Http and d1: the time one call may take.
    pub(crate) fn http_timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_HTTP_TIMEOUT_MS)
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
        let http = k == BlockKind::Http;
        only("url", self.url.is_some() && !http, "http")?;
        only("secret", self.secret.is_some() && !http, "http")?;
        let d1 = k == BlockKind::D1;
        only("timeoutMs", self.timeout_ms.is_some() && !(http || d1), "http and d1")?;
        only("ops", self.ops.is_some() && !http, "http")?;
        only("binding", self.binding.is_some() && !d1, "d1")?;
        only("query", self.query.is_some() && !d1, "d1")?;
        only("search", self.search.is_some() && !d1, "d1")?;
        if http {
            self.validate_http()?;
        }
        if d1 {
            self.validate_d1()?;
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

impl BlockConfig {
    /// An `http` block's own fields: a `url` of `http://` or `https://` without spaces or control
    /// characters, a secret named as an environment variable is, a timeout in range, no `op` twice.
    fn validate_http(&self) -> Result<()> {
        let l = &self.label;
        let url = self.url.as_deref().unwrap_or_default();
        let scheme = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
        if scheme.is_none_or(str::is_empty)
            || url.len() > MAX_URL_BYTES
            || url.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(Error::invalid(format!(
                "block \"{l}\": an http block needs a url of http:// or https://, at most {MAX_URL_BYTES} bytes, \
                 without spaces"
            )));
        }
        if let Some(name) = &self.secret {
            if !is_env_name(name) {
                return Err(Error::invalid(format!(
                    "block \"{l}\": secret names a Worker secret: 1-128 characters of [A-Za-z0-9_], not starting with a digit"
                )));
            }
        }
        let ops = self.ops.as_deref().unwrap_or_default();
        let known = |o: &String| [HttpOp::Search, HttpOp::Set, HttpOp::Load].iter().any(|k| k.as_str() == o);
        if !ops.iter().all(known) || ops.iter().enumerate().any(|(i, op)| ops[..i].contains(op)) {
            return Err(Error::invalid(format!(
                "block \"{l}\": ops holds \"search\", \"set\" and \"load\", each at most once"
            )));
        }
        self.validate_timeout()
    }

    fn validate_timeout(&self) -> Result<()> {
        if self.timeout_ms.is_some_and(|t| !(1..=MAX_HTTP_TIMEOUT_MS).contains(&t)) {
            return Err(Error::invalid(format!(
                "block \"{}\": timeoutMs must be 1 to {MAX_HTTP_TIMEOUT_MS}",
                self.label
            )));
        }
        Ok(())
    }

    /// A `d1` block's own fields: a binding named as an environment variable is, a query that
    /// reads (`SELECT` or `WITH`, at most [`MAX_QUERY_BYTES`]), a search of plain identifiers.
    fn validate_d1(&self) -> Result<()> {
        let l = &self.label;
        if !self.binding.as_deref().is_some_and(is_env_name) {
            return Err(Error::invalid(format!(
                "block \"{l}\": a d1 block needs a binding: the name of a D1 binding, 1-128 characters of \
                 [A-Za-z0-9_], not starting with a digit"
            )));
        }
        let query = self.query.as_deref().unwrap_or_default().trim_start();
        let first: String = query.chars().take_while(char::is_ascii_alphabetic).collect();
        if !(first.eq_ignore_ascii_case("select") || first.eq_ignore_ascii_case("with"))
            || query.len() > MAX_QUERY_BYTES
        {
            return Err(Error::invalid(format!(
                "block \"{l}\": a d1 block needs a query that reads (SELECT or WITH), at most {MAX_QUERY_BYTES} bytes"
            )));
        }
        if self.search.is_some() {
            let s = self.d1_search().ok_or_else(|| {
                Error::invalid(format!("block \"{l}\": search is {{table, columns, key?}}, each a name"))
            })?;
            let names = std::iter::once(&s.table).chain(&s.columns).chain(&s.key);
            let dup = s.columns.iter().enumerate().any(|(i, c)| s.columns[..i].contains(c));
            if !names.into_iter().all(|n| is_identifier(n))
                || s.columns.is_empty()
                || s.columns.len() > MAX_SEARCH_COLUMNS
                || dup
            {
                return Err(Error::invalid(format!(
                    "block \"{l}\": search names a table and 1-{MAX_SEARCH_COLUMNS} distinct columns (and a key column), \
                     each 1-64 characters of [A-Za-z0-9_], not starting with a digit"
                )));
            }
        }
        self.validate_timeout()
    }
}

/// Whether `name` could be an environment variable's: 1–128 characters of `[A-Za-z0-9_]`, not
/// starting with a digit (a Worker secret's or binding's name).
fn is_env_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
}

/// Whether `name` is a plain SQL identifier (1–64 characters of `[A-Za-z0-9_]`, not starting
/// with a digit), safe to write double-quoted into a statement.
pub(crate) fn is_identifier(name: &str) -> bool {
    name.len() <= 64 && is_env_name(name)
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
