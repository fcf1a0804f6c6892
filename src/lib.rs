//! SessionAgent: the memory layer for LLM agents as a Cloudflare Durable Object.
//!
//! - [`core`]: conversation trees, search, compaction overlays and sessions over a small SQL
//!   trait, runtime independent and tested natively.
//! - [`api`]: the HTTP contract of the Durable Object, as plain functions from a request to a
//!   response over the core.
//! - `workers` (wasm32 only): the thin Workers layer, the front door Worker and the
//!   `SessionAgent` Durable Object.

pub mod api;
pub mod core;
#[cfg(target_arch = "wasm32")]
pub mod workers;
