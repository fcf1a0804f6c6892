//! The runtime-independent core: everything the agent remembers, over the small [`sql::Sql`]
//! trait. Nothing here knows about Workers; it is tested natively against real SQLite.
//!
//! Leaves first (each folder uses only the ones above it in this list):
//! - leaf modules: [`error`], [`sql`], `sqlite` (native only), [`blobs`], [`ids`], [`time`],
//!   [`js`], [`parts`], [`tokens`];
//! - [`store`]: the message store of one agent (schema, messages, trees, oversize fields in
//!   R2, compaction overlays, history, estimates, sessions, search);
//! - [`config`]: `SESSION_CONFIG` and the policies it carries;
//! - [`llm`]: the one LLM client (providers, streaming) over a transport;
//! - [`context`]: context blocks, the frozen system prompt, the generated tools;
//! - [`events`], [`env`]: who hears about changes, and what an operation runs against;
//! - [`compaction`]: summaries with the LLM, automatic compaction, read-time truncation;
//! - [`session`]: the one write path of a session;
//! - [`turn`]: the agent turn.

pub mod blobs;
pub mod compaction;
pub mod config;
pub mod context;
pub mod env;
pub mod error;
pub mod events;
pub mod ids;
pub mod js;
pub mod llm;
pub mod parts;
pub mod session;
pub mod sql;
#[cfg(not(target_arch = "wasm32"))]
pub mod sqlite;
pub mod store;
pub mod time;
pub mod tokens;
pub mod turn;
