//! The runtime-independent core: everything the agent remembers, over the small [`sql::Sql`]
//! trait. Nothing here knows about Workers; it is tested natively against real SQLite.
//!
//! Leaves first: each folder uses only the ones above it. The order is the folder map of
//! `docs/ARCHITECTURE.md` (the one place it is written: `tests/it/layout.rs` reads it there and
//! fails on an import that names a module at the same place or below); in short:
//! - leaf modules: [`error`], [`sort`] (the one stable sort), [`sql`], [`ids`] (ids, names, [`Role`](ids::Role): agent or space), [`time`], [`page`] (cursors of newest-first
//!   pages), [`metadata`] (a caller's flat JSON object on sessions and memories, and the filters
//!   by it), [`table`] (a kind of row as data), `sqlite` (native only), [`blobs`], [`databases`]
//!   (the operator's D1 databases), [`js`], [`parts`], [`wire`] (the WebSocket frames, typed),
//!   [`tokens`], [`events`], [`secrets`] (the Worker's secrets by name), [`access`] (the token
//!   revocation time), [`query`] (user text → the terms of a safe FTS5 query) and `rank` (FTS5
//!   rows ranked for a query at a bounded cost);
//! - [`store`]: the message store of one agent (schema, messages, trees, oversize fields in
//!   R2, compaction overlays, history, estimates, sessions, search);
//! - [`cache`]: texts kept between writes;
//! - [`directory`]: the directory of agents and spaces (shards, an object's report, the usage
//!   ledger);
//! - [`config`]: `SESSION_CONFIG` and the policies it carries;
//! - [`llm`]: the one LLM client (providers, streaming) over a transport;
//! - [`compaction`]: what to summarize and the summary prompt, the originals behind a summary,
//!   read-time truncation (pure, or reads only);
//! - [`vectors`]: the vectors of memories, messages and search entries, the index of them kept
//!   in memory, search of messages by words and meaning;
//! - [`space`]: memory spaces (which one an agent uses, a space's shared blocks, how a request
//!   reaches one);
//! - [`context`]: context blocks, the frozen system prompt, the generated tools;
//! - [`live`]: the turns running now (their events, their stop signals);
//! - [`env`](mod@env): what an operation runs against;
//! - [`memory`]: long-term memory of the agent's user (store, ranked recall, inject, extract,
//!   the memory tools);
//! - [`session`]: one session's operations and the one write path of its messages, compaction
//!   with the LLM;
//! - [`after`]: the work an answer leaves for after it is sent;
//! - [`reads`]: search answers and session counts, kept between writes;
//! - [`turn`]: the agent turn;
//! - [`schedule`]: scheduled turns and the one alarm (due runs, maintenance);
//! - [`transfer`]: export, import and erase of a session, the whole agent or a memory space
//!   (last: it knows every table, schedules included).

pub mod access;
pub mod after;
pub mod blobs;
pub mod cache;
pub mod compaction;
pub mod config;
pub mod context;
pub mod databases;
pub mod directory;
pub mod env;
pub mod error;
pub mod events;
pub mod ids;
pub mod js;
pub mod live;
pub mod llm;
pub mod memory;
pub mod metadata;
pub mod page;
pub mod parts;
pub mod query;
pub(crate) mod rank;
pub mod reads;
pub mod schedule;
pub mod secrets;
pub mod session;
pub mod sort;
pub mod space;
pub mod sql;
#[cfg(not(target_arch = "wasm32"))]
pub mod sqlite;
pub mod store;
pub mod table;
pub mod time;
pub mod tokens;
pub mod transfer;
pub mod turn;
pub mod vectors;
pub mod wire;
