//! The context blocks of one session: which blocks it has (configured, added at run time,
//! removed), their content (SQLite, R2, search entries, the sessions registry), writes within
//! budgets, and the frozen system prompt rendered from them.
//!
//! # Its modules
//!
//! | module | what it is for |
//! |---|---|
//! | `mod.rs` | `Context` of one session: its blocks (configured, runtime, removed, the history block), their content (SQLite, R2, entries), writes within budgets, add/remove, the frozen prompt |
//! | `prompt.rs` | system-prompt rendering, byte for byte as the reference (blocks, header, usage percent) |
//! | `entries.rs` | entries of searchable blocks (FTS5, and by meaning through `vectors`, fused), shared by the agent's sessions |
//! | `entry_key.rs` | stable keys of keyed entries (slug + FNV-1a base-36 hash) |
//! | `fetched.rs` | what the blocks that read from outside share: the `Caller`, the last text each was given |
//! | `http.rs` | blocks kept by the operator's own service: the JSON protocol, bounded calls |
//! | `d1.rs` | blocks read from the operator's D1 database: the query's rows, a search of named columns |
//! | `skills.rs` | skills listing, persisted load state, the unload rewrite of `load_context` outputs |
//! | `tools.rs` | the `Tool` enum: definitions (names, descriptions, JSON Schemas) and execution |
//! | `mcp.rs` | the tools of remote MCP servers: a Streamable HTTP client over the LLM `Transport`, each server's session and tool list kept in the object's instance |
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 12. **The frozen prompt changes only on refresh, clear (and compaction)**; block writes and
//!     runtime add/remove never touch it. It lives in SQLite only, so eviction cannot lose it.
//! 14. **Loaded-skill state is in SQLite** and an unload rewrites the stored `load_context`
//!     output in the same transaction; clear and session delete forget it.
//! 15. **Search entries and skills belong to the agent**, writable texts and runtime blocks to a
//!     session; deleting a session deletes only the latter.

pub mod d1;
pub mod entries;
pub mod entry_key;
pub(crate) mod fetched;
pub mod http;
pub mod mcp;
pub mod prompt;
pub mod skills;
pub mod tools;

use serde::Serialize;

use crate::access::Reach;
use crate::blobs::{Blob, Blobs, BoxFuture};
use crate::config::{check_scopes, BlockConfig, BlockKind, BlockScope, HttpOp, SessionConfig, HISTORY_DESCRIPTION};
use crate::context::prompt::{render, BlockView};
use crate::databases::Databases;
use crate::error::{Error, ErrorKind, Result};
use crate::secrets::Secrets;
use crate::space::{self, choice, Operation, Spaces};
use crate::sql::{Sql, Value};
use crate::store::spill;
use crate::tokens::estimate_str;
use crate::vectors::Meaning;

/// Where a block comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `SESSION_CONFIG` (or the builder).
    Config,
    /// The `searchableHistory` block.
    History,
    /// `POST /sessions/{sid}/context`, stored with the session.
    Runtime,
}

/// One block of a session, as configured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Block {
    pub(crate) cfg: BlockConfig,
    pub(crate) origin: Origin,
}

impl Block {
    pub(crate) fn label(&self) -> &str {
        &self.cfg.label
    }
    pub(crate) fn kind(&self) -> BlockKind {
        self.cfg.kind
    }
    /// Skills: the scope in effect.
    pub(crate) fn scope(&self) -> BlockScope {
        self.cfg.scope.unwrap_or_default()
    }
    /// Whether the model may write it (`set_context`): writable and search blocks,
    /// agent-scoped skills, and http blocks whose service takes `set`. Readonly, shared skills
    /// and the history block are not.
    pub(crate) fn writable(&self) -> bool {
        match self.kind() {
            BlockKind::Writable => true,
            BlockKind::Search => self.origin != Origin::History,
            BlockKind::Skills => self.scope() == BlockScope::Agent,
            BlockKind::Readonly => false,
            BlockKind::Http => self.cfg.answers(HttpOp::Set),
            BlockKind::D1 => false,
        }
    }
    /// A skills block (its documents in R2).
    pub(crate) fn is_skill(&self) -> bool {
        self.kind() == BlockKind::Skills
    }
    /// Whether `load_context` loads from it: a skills block, or an http block whose service
    /// takes `load`.
    pub(crate) fn loadable(&self) -> bool {
        self.is_skill() || self.cfg.answers(HttpOp::Load)
    }
    /// Whether `search_context` searches it: a search block (the history block too), or an
    /// http block whose service takes `search`.
    pub(crate) fn is_searchable(&self) -> bool {
        self.kind() == BlockKind::Search
            || self.cfg.answers(HttpOp::Search)
            || (self.kind() == BlockKind::D1 && self.cfg.search.is_some())
    }
    /// A block kept by the operator's service (`crate::context::http`).
    pub(crate) fn is_http(&self) -> bool {
        self.kind() == BlockKind::Http
    }
    /// Keyed blocks (search, skills) take entries (`set_context` with a key), not whole-text
    /// writes.
    pub(crate) fn keyed(&self) -> bool {
        matches!(self.kind(), BlockKind::Skills | BlockKind::Search)
    }
    /// Whether it keeps a text in `context_blocks` (a writable block not kept in a space).
    pub(crate) fn holds_text(&self) -> bool {
        self.kind() == BlockKind::Writable
    }
    /// Whether what the model writes is shared by all the agent's sessions: keyed blocks, and
    /// writable blocks with `scope: "agent"` (a writable block is per session by default).
    pub(crate) fn agent_wide(&self) -> bool {
        match self.kind() {
            BlockKind::Writable => matches!(self.cfg.scope, Some(BlockScope::Agent | BlockScope::Space)),
            _ => true,
        }
    }
    /// Whether it is a writable block kept in the agent's memory space (`scope: "space"`).
    pub(crate) fn in_space(&self) -> bool {
        self.kind() == BlockKind::Writable && self.cfg.scope == Some(BlockScope::Space)
    }
}

/// The blocks of a session of `agent` whose stored definitions (`context_defs` rows, oldest
/// first: label, removed, the added block's JSON) are `defs`, in prompt order: configured ones
/// (minus those removed from this session or replaced by an added block of the same label), the
/// history block, then those added at run time, oldest first.
pub(crate) fn compose(
    config: &SessionConfig,
    agent: &str,
    defs: &[(String, bool, Option<String>)],
) -> Result<Vec<Block>> {
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for (label, gone, def) in defs {
        if *gone {
            removed.push(label.clone());
        } else if let Some(def) = def {
            let cfg: BlockConfig =
                serde_json::from_str(def).map_err(|e| Error::internal(format!("stored block {label}: {e}")))?;
            // A block stored before the config changed (or before confinement was checked)
            // never reaches outside the agent's space: it is left out.
            if config.check_runtime(&cfg, agent).is_ok() {
                added.push(Block { cfg, origin: Origin::Runtime });
            }
        }
    }
    removed.extend(added.iter().map(|b| b.cfg.label.clone()));
    let mut out: Vec<Block> = config
        .context
        .iter()
        .filter(|c| !removed.contains(&c.label))
        .map(|c| Block { cfg: c.clone(), origin: Origin::Config })
        .collect();
    if let Some(label) = config.searchable_history.as_ref().filter(|l| !removed.contains(l)) {
        let mut cfg = BlockConfig::new(label.clone(), BlockKind::Search);
        cfg.description = Some(HISTORY_DESCRIPTION.to_owned());
        out.push(Block { cfg, origin: Origin::History });
    }
    out.extend(added);
    Ok(out)
}

/// The labels of the search blocks that keep entries (configured ones, and blocks added at run
/// time whose definitions are `defs`, as JSON): the history block keeps none.
pub(crate) fn entry_labels<'d>(
    config: &SessionConfig,
    agent: &str,
    defs: impl IntoIterator<Item = &'d str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |b: &BlockConfig| {
        if b.kind == BlockKind::Search && !out.contains(&b.label) {
            out.push(b.label.clone());
        }
    };
    config.context.iter().for_each(&mut add);
    for def in defs {
        if let Ok(b) = serde_json::from_str::<BlockConfig>(def) {
            if config.check_runtime(&b, agent).is_ok() {
                add(&b);
            }
        }
    }
    out
}

/// How a block kept in the agent's space is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedWrite {
    /// Its text replaced, if its version is still the one given (else the one this session
    /// last read).
    Replace(Option<i64>),
    Append,
}

/// The `session_id` under which agent-wide writable blocks keep their text.
pub(crate) const AGENT_OWNER: &str = "";

/// A block with its content, as `GET …/context` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedBlock {
    pub(crate) label: String,
    pub(crate) description: Option<String>,
    pub(crate) content: String,
    pub(crate) tokens: i64,
    pub(crate) max_tokens: Option<i64>,
    pub(crate) kind: &'static str,
    pub(crate) writable: bool,
    /// A block kept in the agent's memory space: the version of the text shown, which a
    /// replace names (`PUT …/context/{label}` `{content, version}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<i64>,
}

impl LoadedBlock {
    fn view(&self, b: &Block) -> BlockView {
        BlockView {
            label: self.label.clone(),
            description: self.description.clone(),
            content: self.content.clone(),
            tokens: self.tokens,
            max_tokens: self.max_tokens,
            writable: self.writable,
            is_skill: b.loadable(),
            is_searchable: b.is_searchable(),
        }
    }
}

/// The context of one session of one agent.
pub(crate) struct Context<'a> {
    pub(crate) sql: &'a dyn Sql,
    pub(crate) blobs: &'a dyn Blobs,
    pub(crate) config: &'a SessionConfig,
    /// The agent's name (its Durable Object name): agent-scoped skills live under it.
    pub(crate) agent: &'a str,
    pub(crate) session: &'a str,
    /// The sessions the request may search beyond this one (the history block, `session_search`).
    pub(crate) reach: &'a Reach,
    /// Search by meaning (search entries, the history block, `session_search`).
    pub(crate) meaning: Meaning<'a>,
    /// How blocks kept in the agent's memory space are reached (`scope: "space"`).
    pub(crate) spaces: &'a dyn Spaces,
    /// The Worker's secrets an http block's config names.
    pub(crate) secrets: &'a dyn Secrets,
    /// The D1 databases `d1` blocks read.
    pub(crate) databases: &'a dyn Databases,
}

impl<'a> Context<'a> {
    /// The session's blocks in prompt order: configured ones (minus those removed from this
    /// session or replaced by an added block of the same label), the history block, then those
    /// added at run time, oldest first.
    pub(crate) fn blocks(&self) -> Result<Vec<Block>> {
        let rows = self.sql.query(
            "SELECT label, removed, def FROM context_defs WHERE session_id = ? ORDER BY seq",
            &[self.session.into()],
        )?;
        let defs = rows.iter().map(|r| Ok((r.text(0)?, r.int(1)? != 0, r.opt_text(2)?))).collect::<Result<Vec<_>>>()?;
        compose(self.config, self.agent, &defs)
    }

    /// What calls the services of the session's http blocks.
    pub(crate) fn caller(&self) -> fetched::Caller<'a> {
        fetched::Caller {
            sql: self.sql,
            transport: self.meaning.transport,
            secrets: self.secrets,
            databases: self.databases,
            events: self.meaning.events,
            agent: self.agent,
            session: self.session,
        }
    }

    /// The block labelled `label`, if the session has it.
    pub(crate) fn block(&self, label: &str) -> Result<Option<Block>> {
        Ok(self.blocks()?.into_iter().find(|b| b.label() == label))
    }

    /// The block or `not_found` (`Block "<label>" not found`, the reference's wording, docs/REFERENCE.md#block-writes).
    pub(crate) fn require(&self, label: &str) -> Result<Block> {
        self.block(label)?.ok_or_else(|| Error::not_found(format!("Block \"{label}\" not found")))
    }

    /// The R2 key prefix of a skills block: `<prefix><agent>/` or `<prefix>`.
    pub(crate) fn skills_root(&self, b: &Block) -> String {
        match b.scope() {
            BlockScope::Agent | BlockScope::Space => format!("{}{}/", b.cfg.skills_prefix(), self.agent),
            BlockScope::Shared => b.cfg.skills_prefix().to_owned(),
        }
    }

    /// Whose text a writable block holds: this session's, or (`scope: "agent"`) the agent's,
    /// stored under the empty session id, which no session can have.
    fn owner(&self, b: &Block) -> &str {
        if b.agent_wide() {
            AGENT_OWNER
        } else {
            self.session
        }
    }

    /// The stored text of a writable block (its configured initial text until first written).
    fn writable_text(&self, b: &Block) -> Result<String> {
        let row = self.sql.query_row(
            "SELECT content FROM context_blocks WHERE session_id = ? AND label = ?",
            &[self.owner(b).into(), b.label().into()],
        )?;
        match row {
            Some(r) => r.text(0),
            None => Ok(b.cfg.content.clone().unwrap_or_default()),
        }
    }

    /// A block's current content, read from wherever it lives (a block kept in the agent's
    /// space: [`Context::load`], which reads its version with it).
    pub(crate) async fn content(&self, b: &Block) -> Result<String> {
        match (b.kind(), b.origin) {
            (BlockKind::Search, Origin::History) => {
                let n = self
                    .sql
                    .query_row("SELECT count(*) FROM sessions", &[])?
                    .map(|r| r.int(0))
                    .transpose()?
                    .unwrap_or(0);
                Ok(match n {
                    0 => String::new(),
                    1 => "1 session available for search.".to_owned(),
                    n => format!("{n} sessions available for search."),
                })
            }
            (BlockKind::Readonly, _) => match &b.cfg.r2_key {
                Some(key) => Ok(self.blobs.get(key).await?.map(|o| o.text).unwrap_or_default()),
                None => Ok(b.cfg.content.clone().unwrap_or_default()),
            },
            (BlockKind::Writable, _) => self.writable_text(b),
            (BlockKind::Http, _) => http::text(&self.caller(), &b.cfg).await,
            (BlockKind::D1, _) => d1::text(&self.caller(), &b.cfg).await,
            (BlockKind::Search, _) => entries::summary(self.sql, b.label()),
            (BlockKind::Skills, _) => {
                let root = self.skills_root(b);
                let objects = spill::live(self.sql, self.blobs.list(&root).await?)?;
                Ok(skills::listing(&objects, &root))
            }
        }
    }

    /// The agent's space, which keeps `b`.
    fn space_of(&self, b: &Block) -> Result<String> {
        choice::of(self.sql, self.config, self.agent)?.space.ok_or_else(|| {
            space::unavailable(format!(
                "Block \"{}\" is kept in the agent's memory space, and the agent has none",
                b.label()
            ))
        })
    }

    /// The text of a block kept in the agent's space (its configured text while the space holds
    /// none: never written, or deleted) and its version, which this session has now read
    /// (`space_block_seen`).
    fn shared<'s>(&'s self, b: &'s Block) -> BoxFuture<'s, Result<(String, i64)>> {
        Box::pin(async move {
            let space = self.space_of(b)?;
            let s =
                space::blocks::send(self.spaces, &space, &Operation::ReadBlock { label: b.label().to_owned() }).await?;
            self.seen(b, s.version)?;
            let text = if s.has_text() { s.content } else { b.cfg.content.clone().unwrap_or_default() };
            Ok((text, s.version))
        })
    }

    fn seen(&self, b: &Block, version: i64) -> Result<()> {
        self.sql.execute(
            "INSERT INTO space_block_seen (session_id, label, version) VALUES (?, ?, ?)
             ON CONFLICT (session_id, label) DO UPDATE SET version = excluded.version",
            &[self.session.into(), b.label().into(), version.into()],
        )
    }

    /// Writes a block kept in the agent's space: `Ok` with the text and version written, or
    /// the space's refusal (`409 version_conflict` when a replace's version is not the current
    /// one). A replace names `read`, else the version this session last read.
    /// (Boxed: the tool runs that await it stay small.)
    pub(crate) fn write_shared<'s>(
        &'s self,
        b: &'s Block,
        content: &'s str,
        how: SharedWrite,
    ) -> BoxFuture<'s, Result<(String, i64)>> {
        Box::pin(async move {
            if !b.writable() {
                return Err(Error::conflict(format!("Block \"{}\" is readonly", b.label())));
            }
            let space = self.space_of(b)?;
            let label = b.label();
            let op = match how {
                SharedWrite::Append => Operation::AppendBlock {
                    label: label.to_owned(),
                    content: content.to_owned(),
                    agent: self.agent.to_owned(),
                    max_tokens: b.cfg.max_tokens,
                    initial: b.cfg.content.clone(),
                },
                SharedWrite::Replace(read) => {
                    let read = match read {
                        Some(v) => v,
                        None => self
                            .sql
                            .query_row(
                                "SELECT version FROM space_block_seen WHERE session_id = ? AND label = ?",
                                &[self.session.into(), label.into()],
                            )?
                            .map(|r| r.int(0))
                            .transpose()?
                            .unwrap_or(0),
                    };
                    Operation::ReplaceBlock {
                        label: label.to_owned(),
                        content: content.to_owned(),
                        version: read,
                        agent: self.agent.to_owned(),
                        max_tokens: b.cfg.max_tokens,
                    }
                }
            };
            let s = space::blocks::send(self.spaces, &space, &op).await?;
            self.seen(b, s.version)?;
            Ok((s.content, s.version))
        })
    }

    /// A block with its content and token count. Boxed, so its code is made once for its
    /// callers (each held a copy: 3 KB of wasm).
    pub(crate) fn load<'b>(&'b self, b: &'b Block) -> BoxFuture<'b, Result<LoadedBlock>> {
        Box::pin(self.loaded_block(b))
    }

    async fn loaded_block(&self, b: &Block) -> Result<LoadedBlock> {
        if b.in_space() {
            let (content, version) = self.shared(b).await?;
            return Ok(self.loaded(b, content, Some(version)));
        }
        let content = self.content(b).await?;
        Ok(self.loaded(b, content, None))
    }

    /// `b` with `content` (and, kept in the space, its version).
    pub(crate) fn loaded(&self, b: &Block, content: String, version: Option<i64>) -> LoadedBlock {
        LoadedBlock {
            label: b.label().to_owned(),
            description: b.cfg.description.clone(),
            tokens: estimate_str(&content),
            content,
            max_tokens: b.cfg.max_tokens,
            kind: b.kind().as_str(),
            writable: b.writable(),
            version,
        }
    }

    /// Every block, loaded, in prompt order.
    pub(crate) async fn load_all(&self) -> Result<Vec<(Block, LoadedBlock)>> {
        let mut out = Vec::new();
        for b in self.blocks()? {
            let l = match self.load(&b).await {
                // A space that cannot be reached fails no prompt: the block shows its
                // configured text, as before its first write.
                Err(e) if e.kind == ErrorKind::SpaceUnavailable && b.in_space() => {
                    self.loaded(&b, b.cfg.content.clone().unwrap_or_default(), None)
                }
                l => l?,
            };
            out.push((b, l));
        }
        Ok(out)
    }

    /// Replaces a writable block's text. Unknown label: `not_found`; readonly: `conflict`
    /// (`Block "<label>" is readonly`); keyed: `conflict`; over budget: `over_budget`
    /// (`Block "<label>" exceeds maxTokens: <tokens> > <max>`). Never touches the frozen prompt.
    pub(crate) fn set(&self, label: &str, content: &str, now: &str) -> Result<Block> {
        let b = self.require(label)?;
        self.set_block(&b, content, now)?;
        Ok(b)
    }

    fn set_block(&self, b: &Block, content: &str, now: &str) -> Result<()> {
        let label = b.label();
        if !b.writable() {
            return Err(Error::conflict(format!("Block \"{label}\" is readonly")));
        }
        if b.keyed() {
            return Err(Error::conflict(format!(
                "Block \"{label}\" is a keyed block: write its entries with the set_context tool"
            )));
        }
        if b.is_http() {
            return Err(Error::conflict(format!(
                "Block \"{label}\" is kept by the operator's service: write it with the set_context tool"
            )));
        }
        let tokens = estimate_str(content);
        if let Some(max) = b.cfg.max_tokens.filter(|&m| tokens > m) {
            return Err(Error::new(
                ErrorKind::OverBudget,
                format!("Block \"{label}\" exceeds maxTokens: {tokens} > {max}"),
            ));
        }
        self.sql.execute(
            "INSERT INTO context_blocks (session_id, label, updated_at, content) VALUES (?, ?, ?, ?)
             ON CONFLICT (session_id, label) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
            &[self.owner(b).into(), label.into(), now.into(), content.into()],
        )
    }

    /// Appends to a writable block: a newline goes between the old and new text unless the old
    /// text is empty or the new one starts with one. The budget applies to the whole.
    pub(crate) fn append(&self, label: &str, content: &str, now: &str) -> Result<Block> {
        let b = self.require(label)?;
        if !b.holds_text() {
            self.set_block(&b, content, now)?; // reports readonly / keyed / http
        }
        let old = self.writable_text(&b)?;
        let sep = if !old.is_empty() && !content.starts_with('\n') { "\n" } else { "" };
        self.set_block(&b, &format!("{old}{sep}{content}"), now)?;
        Ok(b)
    }

    /// Adds a block to this session (runtime `addContext`). Its label must be new here; a
    /// configured block removed earlier may be replaced. Writable initial content must fit.
    pub(crate) fn add(&self, cfg: BlockConfig) -> Result<Block> {
        self.check_add(&cfg)?;
        let def = serde_json::to_string(&cfg).map_err(|e| Error::internal(e.to_string()))?;
        // A tombstone of a removed configured block gives way (and the new block goes last).
        self.sql.execute(
            "DELETE FROM context_defs WHERE session_id = ? AND label = ?",
            &[self.session.into(), cfg.label.as_str().into()],
        )?;
        self.drop_rows(&cfg.label)?;
        self.sql.execute(
            "INSERT INTO context_defs (session_id, label, removed, def) VALUES (?, ?, 0, ?)",
            &[self.session.into(), cfg.label.as_str().into(), def.into()],
        )?;
        Ok(Block { cfg, origin: Origin::Runtime })
    }

    /// Everything [`Context::add`] checks before it writes: a valid block, a new label, safe
    /// skills scopes, initial content within budget.
    pub(crate) fn check_add(&self, cfg: &BlockConfig) -> Result<()> {
        cfg.validate()?;
        self.config.check_runtime(cfg, self.agent)?;
        let blocks = self.blocks()?;
        if blocks.iter().any(|b| b.label() == cfg.label) {
            return Err(Error::conflict(format!("Block \"{}\" already exists", cfg.label)));
        }
        let mut all: Vec<&BlockConfig> = blocks.iter().map(|b| &b.cfg).collect();
        all.push(cfg);
        check_scopes(&all)?;
        if let (Some(max), Some(text)) = (cfg.max_tokens, &cfg.content) {
            let tokens = estimate_str(text);
            if tokens > max {
                return Err(Error::new(
                    ErrorKind::OverBudget,
                    format!("Block \"{}\" exceeds maxTokens: {tokens} > {max}", cfg.label),
                ));
            }
        }
        Ok(())
    }

    /// Removes a block from this session (runtime `removeContext`): an added block is deleted,
    /// a configured one hidden. Its writable text and loaded skills go; search entries and R2
    /// objects, which the agent's other sessions share, stay. `false` when unknown.
    pub(crate) fn remove(&self, label: &str) -> Result<bool> {
        let Some(b) = self.block(label)? else { return Ok(false) };
        self.sql.execute(
            "DELETE FROM context_defs WHERE session_id = ? AND label = ?",
            &[self.session.into(), label.into()],
        )?;
        if b.origin != Origin::Runtime {
            self.sql.execute(
                "INSERT INTO context_defs (session_id, label, removed, def) VALUES (?, ?, 1, NULL)",
                &[self.session.into(), label.into()],
            )?;
        }
        self.drop_rows(label)?;
        Ok(true)
    }

    fn drop_rows(&self, label: &str) -> Result<()> {
        self.sql.execute(
            "DELETE FROM context_blocks WHERE session_id = ? AND label = ?",
            &[self.session.into(), label.into()],
        )?;
        fetched::forget(self.sql, self.session, label)?;
        skills::forget(self.sql, self.session, Some(label))
    }

    /// Writes a skill object (agent scope only) with its description.
    pub(crate) async fn put_skill(&self, b: &Block, key: &str, content: &str, description: Option<&str>) -> Result<()> {
        if !b.writable() {
            return Err(Error::conflict(format!("Block \"{}\" does not support writes", b.label())));
        }
        let blob = Blob { text: content.to_owned(), description: description.map(str::to_owned) };
        let key = format!("{}{key}", self.skills_root(b));
        spill::reclaim(self.sql, &key)?;
        self.blobs.put(&key, blob).await
    }

    /// A skill's full text, or `None`.
    pub(crate) async fn skill_text(&self, b: &Block, key: &str) -> Result<Option<String>> {
        Ok(self.blobs.get(&format!("{}{key}", self.skills_root(b))).await?.map(|o| o.text))
    }

    /// The system prompt as the blocks stand now.
    pub(crate) async fn render(&self) -> Result<String> {
        let loaded = self.load_all().await?;
        Ok(render(&loaded.iter().map(|(b, l)| l.view(b)).collect::<Vec<_>>()))
    }

    /// The stored frozen prompt, if any.
    pub(crate) fn stored_prompt(&self) -> Result<Option<String>> {
        self.sql
            .query_row("SELECT prompt FROM prompts WHERE session_id = ?", &[self.session.into()])?
            .map(|r| r.text(0))
            .transpose()
    }

    /// The prompt a turn sends: the stored copy, else rendered now; with `to_freeze` set when
    /// it should be stored (by [`Context::freeze`]) once the turn succeeds.
    pub(crate) async fn prompt_for_turn(&self) -> Result<(String, bool)> {
        if let (true, Some(p)) = (self.config.cached_prompt, self.stored_prompt()?) {
            return Ok((p, false));
        }
        Ok((self.render().await?, self.config.cached_prompt))
    }

    /// Stores `prompt` as the frozen prompt unless one is stored already (the first copy wins).
    pub(crate) fn freeze(&self, prompt: &str, now: &str) -> Result<()> {
        self.sql.execute(
            "INSERT OR IGNORE INTO prompts (session_id, created_at, prompt) VALUES (?, ?, ?)",
            &[self.session.into(), now.into(), prompt.into()],
        )
    }

    /// The frozen prompt and whether it is frozen: the stored copy if there is one (an empty
    /// prompt counts), else rendered now and stored. With `cachedPrompt: false`, rendered
    /// afresh each time and not stored.
    pub(crate) async fn frozen_prompt(&self, now: &str) -> Result<(String, bool)> {
        if !self.config.cached_prompt {
            return Ok((self.render().await?, false));
        }
        if let Some(p) = self.stored_prompt()? {
            return Ok((p, true));
        }
        let rendered = self.render().await?;
        // Another request may have frozen it while R2 was being read: the first copy wins.
        self.freeze(&rendered, now)?;
        Ok((self.stored_prompt()?.unwrap_or_default(), true))
    }

    /// Forgets the frozen prompt: the next use renders it.
    pub(crate) fn drop_prompt(&self) -> Result<()> {
        self.sql.execute("DELETE FROM prompts WHERE session_id = ?", &[self.session.into()])
    }

    /// What clearing the session resets: the loaded skills and the frozen prompt.
    pub(crate) fn forget_session_state(&self) -> Result<()> {
        skills::forget(self.sql, self.session, None)?;
        self.drop_prompt()
    }

    /// Renders the prompt again and stores it (when prompts are cached).
    pub(crate) async fn refresh_prompt(&self, now: &str) -> Result<String> {
        let rendered = self.render().await?;
        if self.config.cached_prompt {
            self.sql.execute(
                "INSERT INTO prompts (session_id, created_at, prompt) VALUES (?, ?, ?)
                 ON CONFLICT (session_id) DO UPDATE SET prompt = excluded.prompt, created_at = excluded.created_at",
                &[self.session.into(), now.into(), rendered.as_str().into()],
            )?;
        }
        Ok(rendered)
    }
}

/// Forgets what reading `session`'s blocks recorded: the versions of shared blocks it read
/// (`space_block_seen`), the last texts its http blocks were given.
pub(crate) fn forget_reads(sql: &dyn Sql, session: &str) -> Result<()> {
    sql.execute("DELETE FROM space_block_seen WHERE session_id = ?", &[session.into()])?;
    sql.execute("DELETE FROM fetched_block_texts WHERE session_id = ?", &[session.into()])
}

/// Deletes everything of `session`'s context: writable texts, runtime blocks, the frozen
/// prompt, loaded skills, the versions of shared blocks it read, its http blocks' last texts. (Search entries and skills
/// belong to the agent and stay.)
pub(crate) fn delete_session(sql: &dyn Sql, session: &str) -> Result<()> {
    let sid = [Value::from(session)];
    sql.execute("DELETE FROM context_blocks WHERE session_id = ?", &sid)?;
    forget_reads(sql, session)?;
    sql.execute("DELETE FROM context_defs WHERE session_id = ?", &sid)?;
    sql.execute("DELETE FROM prompts WHERE session_id = ?", &sid)?;
    skills::forget(sql, session, None)
}
