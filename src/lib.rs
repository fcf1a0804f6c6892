//! SessionAgent's Workers layer: the memory layer for LLM agents as a Cloudflare Durable Object.
//! This crate is the one `worker-build` builds (wasm32 only); it only adapts the runtime to the
//! layers below it:
//!
//! - `session_agent_core`: conversation trees, search, compaction overlays, sessions, memory and
//!   the agent turn over a small SQL trait, runtime independent and tested natively;
//! - `session_agent_api`: the HTTP contract of the Durable Object, as plain functions from a
//!   request to a response over the core.
//!
//! Here (wasm32 only):
//! - `front_door`: the Worker's `fetch`: what `session_agent_api::front` decides (CORS, health,
//!   names, the token), with the secrets, WebCrypto, the rate-limiting binding, the console's
//!   assets and the agent's stub;
//! - `agent`: the `SessionAgent` Durable Object, which builds the API layer's object
//!   (`session_agent_api::object::Object`) with the platform's parts and forwards each request,
//!   socket message and alarm to it, and `MemorySpace`, the same code as a memory space;
//! - `directory`: the `AgentDirectory` Durable Object (a shard of the directory of agents and
//!   spaces), an object's report to it, and the front door's `GET /directory…` reads;
//! - `do_sql`: the core's SQL trait over the DO's `SqlStorage`;
//! - `d1`: the operator's D1 databases (what `d1` blocks read) over the Worker's D1 bindings;
//! - `crypto`: HMAC-SHA-256 of scoped tokens through WebCrypto;
//! - `convert`: requests and responses between `worker` types and the API layer's;
//! - `llm`: the LLM transport (fetch with a timeout, the AI binding);
//! - `r2`: the core's object store over the `SKILLS_BUCKET` R2 binding;
//! - `sockets`: hibernatable WebSockets, tagged by session, as the API's event hub;
//! - `spaces`: requests to memory spaces (the `MEMORY_SPACE` binding), with a timeout.

#[cfg(target_arch = "wasm32")]
pub mod agent;
#[cfg(target_arch = "wasm32")]
mod convert;
#[cfg(target_arch = "wasm32")]
mod crypto;
#[cfg(target_arch = "wasm32")]
mod d1;
#[cfg(target_arch = "wasm32")]
mod directory;
#[cfg(target_arch = "wasm32")]
mod do_sql;
#[cfg(target_arch = "wasm32")]
mod front_door;
#[cfg(target_arch = "wasm32")]
mod llm;
#[cfg(target_arch = "wasm32")]
mod r2;
#[cfg(target_arch = "wasm32")]
mod sockets;
#[cfg(target_arch = "wasm32")]
mod spaces;

/// The layers below, for a Durable Object of your own that embeds `agent::Agent` with a
/// configuration built in code.
pub use session_agent_api as api;
pub use session_agent_core as agent_core;
