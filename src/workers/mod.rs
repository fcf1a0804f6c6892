//! The Workers layer (wasm32 only): thin adapters from the runtime to the core.
//!
//! - [`front_door`]: the Worker's `fetch` (health, token auth, name checks, routing to a DO).
//! - [`agent`]: the `SessionAgent` Durable Object, which hands each request to [`crate::api`].
//! - [`do_sql`]: the core's SQL trait over the DO's `SqlStorage`.
//! - [`cors`]: CORS headers and preflights (`CORS_ORIGINS`).
//! - [`crypto`]: HMAC-SHA-256 of scoped tokens through WebCrypto.
//! - [`convert`]: requests and responses between `worker` types and [`crate::api::http`].
//! - [`llm`]: the LLM transport (fetch with a timeout, the AI binding).
//! - [`r2`]: the core's object store over the `SKILLS_BUCKET` R2 binding.
//! - [`sockets`]: hibernatable WebSockets, tagged by session, as the API's event hub.

pub mod agent;
pub mod convert;
pub mod cors;
pub mod crypto;
pub mod do_sql;
pub mod front_door;
pub mod llm;
pub mod r2;
pub mod sockets;
