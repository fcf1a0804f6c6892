//! What an operation of the agent runs against: its database (and what is cached of it), its object store, its
//! configuration and name, the model and how to reach it, who hears about changes, and the time
//! of the request (taken once: every write of a request carries the same timestamp).
//!
//! # Where it sits
//!
//! `Env`: what an operation runs against (sql and its read cache, blobs, config, agent name, LLM
//! and embeddings config and transport, events, the request's time). Built by the Workers layer per
//! request (the cache lives as long as the DO instance), and by `tests/it/support.rs` natively.
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 36. **A kept read is never stale.** Every text in the `ReadCache` is stamped with the
//!     version of what it was read from, and a lookup names the version now: for a session's texts
//!     (history, recent windows, search in the session, its counts), the seq of its newest message (an
//!     insert moves it) and its row of `session_versions`, counted by triggers on every other row
//!     written to its `messages` and `compactions` (migration 0009), whoever writes it; for a search
//!     across sessions, `Sql::changes` (any row written). No version comes back (between two deletes
//!     the newest seq only grows). A text is kept only if the version did not move while it was read (a
//!     read that waited on R2 let other requests in), and never with warnings (an object that could not
//!     be read back). No write path invalidates anything, so none can forget to. Two writes touch the
//!     cache on purpose: an append at the end of a kept path (`Session::follow`, from
//!     `Session::write`'s versions just before and after its transaction: nothing else ran in between)
//!     keeps the grown text at the new version, byte for byte what a fresh read answers: not for
//!     messages with spilled fields, not in the view with overlays laid when an overlay names one of
//!     the new ids (one left from a deleted message lies over its id appended again), not past
//!     `MAX_PATH_ROWS` (where a walk stops). The erase, which deletes the versions, clears it (a read
//!     begun before the clear keeps nothing).

use crate::access::Reach;
use crate::blobs::Blobs;
use crate::cache::ReadCache;
use crate::config::SessionConfig;
use crate::context::mcp::McpServers;
use crate::databases::Databases;
use crate::events::Events;
use crate::ids::Role;
use crate::live::Live;
use crate::llm::embeddings::EmbeddingsConfig;
use crate::llm::rerank::RerankConfig;
use crate::llm::{LlmConfig, Transport};
pub use crate::secrets::{NoSecrets, Secrets};
use crate::space::Spaces;
use crate::sql::Sql;
use crate::time::Now;
use crate::vectors::{Meaning, Vectors};

/// The agent, as one request sees it.
pub struct Env<'a> {
    pub sql: &'a dyn Sql,
    /// Texts read from `sql` and kept while it is not written (the Durable Object's instance).
    pub cache: &'a ReadCache,
    pub blobs: &'a dyn Blobs,
    pub config: &'a SessionConfig,
    /// The agent's name (its `idFromName` name), under which its own skills are kept.
    pub agent: &'a str,
    /// The configured model (turns and summaries) and how to reach it.
    pub llm: &'a LlmConfig,
    pub transport: &'a dyn Transport,
    /// The embeddings model: memories, messages and search entries get vectors, and searches
    /// rank by meaning too (off unless `EMBEDDINGS_PROVIDER` is set).
    pub embeddings: &'a EmbeddingsConfig,
    /// The re-ranker: the best hits of history search, `search_context` and memory recall
    /// re-ordered by a model's scores (off unless `RERANK_PROVIDER` is set).
    pub rerank: &'a RerankConfig,
    /// The vector indexes kept in memory (the Durable Object's instance).
    pub vectors: &'a Vectors,
    /// The sessions' listeners (WebSocket clients).
    pub events: &'a dyn Events,
    /// The turns running now (the Durable Object's instance): followed by resume requests,
    /// stopped by `POST …/chat/stop`.
    pub live: &'a Live,
    /// The request's moment (milliseconds, and their ISO-8601 text), used for every write it
    /// makes.
    pub now: Now,
    /// The time now (ms since the epoch), for what outlasts a request's moment: when a
    /// scheduled run ended, how long an alarm's wake-up has run.
    pub clock: &'a dyn Fn() -> i64,
    /// A clock for spans (`Events::spans`): milliseconds with their fractions, only the
    /// differences mean anything (`performance.now()` in Workers).
    pub timer: &'a dyn Fn() -> f64,
    /// The sessions the request may see beyond its own (its token's sessions, if it is limited).
    pub reach: Reach,
    /// What this Durable Object is: an agent, or a memory space.
    pub role: Role,
    /// How the agent reaches its memory space (`crate::space`).
    pub spaces: &'a dyn Spaces,
    /// The Worker's secrets (and plain vars) that the config names by name: the header an
    /// operator's endpoint expects, never a value a request carries.
    pub secrets: &'a dyn Secrets,
    /// What the object's instance keeps of the configured MCP servers (their sessions and
    /// tool lists).
    pub mcp: &'a McpServers,
    /// The operator's D1 databases, by the binding names the config gives (`d1` blocks).
    pub databases: &'a dyn Databases,
}

impl<'a> Env<'a> {
    /// What a search by meaning runs against.
    pub(crate) fn meaning(&self) -> Meaning<'a> {
        Meaning {
            sql: self.sql,
            vectors: self.vectors,
            embeddings: self.embeddings,
            rerank: self.rerank,
            transport: self.transport,
            events: self.events,
        }
    }

    /// The same agent at the same moment, seen by a request that reaches only `reach`.
    pub fn reaching(&self, reach: Reach) -> Env<'a> {
        Env {
            sql: self.sql,
            cache: self.cache,
            blobs: self.blobs,
            config: self.config,
            agent: self.agent,
            llm: self.llm,
            transport: self.transport,
            embeddings: self.embeddings,
            rerank: self.rerank,
            vectors: self.vectors,
            events: self.events,
            live: self.live,
            now: self.now.clone(),
            clock: self.clock,
            timer: self.timer,
            reach,
            role: self.role,
            spaces: self.spaces,
            secrets: self.secrets,
            mcp: self.mcp,
            databases: self.databases,
        }
    }

    /// This agent with `llm` as its model: a turn that names another model `chat.models`
    /// allows (see [`crate::turn::run::TurnRequest::model`]).
    pub fn with_llm<'b>(&'b self, llm: &'b LlmConfig) -> Env<'b> {
        Env { llm, ..self.reaching(self.reach.clone()) }
    }
}
