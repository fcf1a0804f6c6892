//! What an operation of the agent runs against: its database (and what is cached of it), its object store, its
//! configuration and name, the model and how to reach it, who hears about changes, and the time
//! of the request (taken once: every write of a request carries the same timestamp).

use crate::access::Reach;
use crate::blobs::Blobs;
use crate::cache::ReadCache;
use crate::config::SessionConfig;
use crate::events::Events;
use crate::ids::Role;
use crate::live::Live;
use crate::llm::embeddings::EmbeddingsConfig;
use crate::llm::rerank::RerankConfig;
use crate::llm::{LlmConfig, Transport};
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
    /// The sessions the request may see beyond its own (its token's sessions, if it is limited).
    pub reach: Reach,
    /// What this Durable Object is: an agent, or a memory space.
    pub role: Role,
    /// How the agent reaches its memory space (`crate::space`).
    pub spaces: &'a dyn Spaces,
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
            reach,
            role: self.role,
            spaces: self.spaces,
        }
    }
}
