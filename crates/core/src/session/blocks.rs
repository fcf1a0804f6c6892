//! The session's context blocks, prompt and tools as operations: each write registers the
//! session and tells its sockets (`context` frames); reads register nothing.

use serde_json::Value as Json;

use super::Session;
use crate::blobs::BoxFuture;
use crate::config::{BlockConfig, BlockKind};
use crate::context::entries::{self, Entry};
use crate::context::entry_key::entry_key;
use crate::context::mcp::{Offered, Peer, RemoteTool};
use crate::context::tools::{self, Ran, Tool};
use crate::context::{Block, LoadedBlock, Origin, SharedWrite};
use crate::error::{Error, Result};
use crate::llm::ToolSpec;
use crate::memory::{self, Memories};
use crate::sql::atomically;

/// How a block write treats the text already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// Replaces it; for a block kept in the agent's memory space, only if its version is still
    /// the one given (else the one this session last read).
    Replace(Option<i64>),
    Append,
}

impl Session<'_> {
    /// Every block with its content, in prompt order.
    pub async fn blocks(&self) -> Result<Vec<LoadedBlock>> {
        Ok(self.context().load_all().await?.into_iter().map(|(_, l)| l).collect())
    }

    /// One block with its content; `not_found` when the session has none of that label.
    pub async fn block(&self, label: &str) -> Result<LoadedBlock> {
        let c = self.context();
        c.load(&c.require(label)?).await
    }

    /// Writes `content` into a writable block, within its budget.
    pub async fn write_block(&self, label: &str, content: &str, how: Write) -> Result<LoadedBlock> {
        let (c, now) = (self.context(), self.env.now.iso());
        let b = c.require(label)?;
        if b.in_space() {
            let shared = match how {
                Write::Replace(read) => SharedWrite::Replace(read),
                Write::Append => SharedWrite::Append,
            };
            let (text, version) = c.write_shared(&b, content, shared).await?;
            atomically(self.env.sql, || self.register())?;
            self.publish_context(label);
            return Ok(c.loaded(&b, text, Some(version)));
        }
        if let Write::Replace(Some(_)) = how {
            return Err(Error::invalid(format!(
                "Block \"{label}\" is not kept in a memory space: a replace of it names no version"
            )));
        }
        let b = atomically(self.env.sql, || {
            let b = match how {
                Write::Replace(_) => c.set(label, content, now)?,
                Write::Append => c.append(label, content, now)?,
            };
            self.register()?;
            Ok(b)
        })?;
        self.publish_context(label);
        c.load(&b).await
    }

    /// Adds a block to this session (the reference's `addContext`, docs/REFERENCE.md#block-writes). Its content is read
    /// (R2 for skills and `r2Key` blocks) before it is stored, so a store that cannot be read refuses the add instead
    /// of failing after it.
    pub async fn add_block(&self, cfg: BlockConfig) -> Result<LoadedBlock> {
        let c = self.context();
        c.check_add(&cfg)?;
        let view = c.load(&Block { cfg: cfg.clone(), origin: Origin::Runtime }).await?;
        atomically(self.env.sql, || {
            c.add(cfg.clone())?;
            self.register()
        })?;
        self.publish_context(&cfg.label);
        Ok(view)
    }

    /// Removes a block from this session (the reference's `removeContext`, docs/REFERENCE.md#block-writes): an added
    /// block is deleted, a configured one hidden here.
    pub fn remove_block(&self, label: &str) -> Result<()> {
        let c = self.context();
        atomically(self.env.sql, || {
            if !c.remove(label)? {
                return Err(Error::not_found(format!("Block \"{label}\" not found")));
            }
            self.register()
        })?;
        self.publish_context(label);
        Ok(())
    }

    /// The searchable block `label` whose entries the API manages (not the history block).
    fn entry_block(&self, label: &str) -> Result<Block> {
        let b = self.context().require(label)?;
        if b.kind() != BlockKind::Search || b.origin == Origin::History {
            return Err(Error::invalid(format!("Block \"{label}\" has no entries: only search blocks do")));
        }
        Ok(b)
    }

    /// A page of a search block's entries (shared by the agent's sessions).
    pub fn entries(&self, label: &str, limit: i64, cursor: Option<&str>) -> Result<(Vec<Entry>, Option<String>)> {
        self.entry_block(label)?;
        entries::list(self.env.sql, label, limit, cursor)
    }

    /// One entry of a search block; `not_found` when there is none.
    pub fn entry(&self, label: &str, key: &str) -> Result<Entry> {
        self.entry_block(label)?;
        entries::get(self.env.sql, label, key)?
            .ok_or_else(|| Error::not_found(format!("entry {key:?} not found in block \"{label}\"")))
    }

    /// Deletes one entry of a search block.
    pub fn delete_entry(&self, label: &str, key: &str) -> Result<()> {
        self.entry_block(label)?;
        atomically(self.env.sql, || {
            if !entries::delete(self.env.sql, label, key)? {
                return Err(Error::not_found(format!("entry {key:?} not found in block \"{label}\"")));
            }
            self.register()
        })?;
        self.publish_context(label);
        Ok(())
    }

    /// Writes many entries of a search block in one transaction (`key`, or the key `set_context`
    /// would derive from `title` and `content`); returns their keys in order.
    pub fn ingest(&self, label: &str, items: &[(Option<String>, Option<String>, String)]) -> Result<Vec<String>> {
        self.entry_block(label)?;
        let keys: Vec<String> = items
            .iter()
            .map(|(key, title, content)| key.clone().unwrap_or_else(|| entry_key(title.as_deref(), content)))
            .collect();
        atomically(self.env.sql, || {
            for (key, (_, _, content)) in keys.iter().zip(items) {
                entries::set(self.env.sql, label, key, content, self.env.now.iso())?;
            }
            self.register()
        })?;
        self.publish_context(label);
        Ok(keys)
    }

    /// The frozen prompt and whether it is frozen (stored the first time; that does not
    /// register the session).
    pub async fn prompt(&self) -> Result<(String, bool)> {
        self.context().frozen_prompt(self.env.now.iso()).await
    }

    /// Renders the prompt again, stores it, and registers the session.
    pub async fn refresh_prompt(&self) -> Result<String> {
        let prompt = self.context().refresh_prompt(self.env.now.iso()).await?;
        atomically(self.env.sql, || self.register())?;
        Ok(prompt)
    }

    /// The tools the session offers the model: its blocks' tools, then the memory tools when
    /// `SESSION_CONFIG.memory` is set.
    pub fn tools(&self) -> Result<Vec<ToolSpec>> {
        let mut all = tools::for_session(&self.context())?;
        if self.env.config.memory.is_some() {
            all.extend(memory::tools::definitions());
        }
        Ok(all)
    }

    /// Runs tool `name` with `input` as the model would, and the sockets hear what it changed
    /// (the agent turn's way: the turn registers the session when it commits). Boxed: the turn
    /// and `run_tool` each held a copy of its code, every tool's inlined (wasm gzip -9: about −10 KB).
    pub(crate) fn execute_tool<'a>(&'a self, name: &'a str, input: &'a Json) -> BoxFuture<'a, Result<Ran>> {
        Box::pin(async move {
            tools::check_fields(name, input)?;
            let ran = match Tool::from_name(name).filter(|t| t.is_memory() && self.env.config.memory.is_some()) {
                Some(t) => memory::tools::execute(&Memories::new(self.env), self.id, t, input).await?,
                None => tools::execute(&self.context(), name, input, self.env.now.iso()).await?,
            };
            self.publish_tool_effects(input, &ran).await;
            Ok(ran)
        })
    }

    /// Runs tool `name` with `input` as the model would; a run that stored something registers
    /// the session, and the sockets hear what it changed.
    pub async fn run_tool(&self, name: &str, input: &Json) -> Result<Ran> {
        let ran = self.execute_tool(name, input).await?;
        if ran.wrote {
            atomically(self.env.sql, || self.register())?;
        }
        Ok(ran)
    }
}

impl Session<'_> {
    /// The tools of the configured MCP servers a turn offers now (their lists as the object's
    /// instance keeps them, or listed now; a server that cannot list is left out, with a
    /// warning).
    pub(crate) async fn remote_tools(&self) -> Offered {
        if self.env.config.tools.mcp.is_empty() {
            return Offered::default();
        }
        let secret = |name: &str| self.env.secrets.secret(name);
        self.env.mcp.offer(&self.env.config.tools.mcp, &self.peer(&secret)).await
    }

    /// Runs the remote tool `tool` with `input`: its output, or the text of the tool error the
    /// model reads instead (never a failed turn).
    pub(crate) async fn call_remote(&self, tool: &RemoteTool, input: &Json) -> std::result::Result<String, String> {
        let secret = |name: &str| self.env.secrets.secret(name);
        self.env.mcp.call(&self.env.config.tools.mcp, tool, input, &self.peer(&secret)).await
    }

    fn peer<'p>(&'p self, secret: &'p dyn Fn(&str) -> Option<String>) -> Peer<'p> {
        Peer { transport: self.env.transport, secret, events: self.env.events, now_ms: (self.env.clock)() }
    }
}
