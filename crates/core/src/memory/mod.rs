//! Long-term memory: facts about the agent's user that persist independently of any session
//! (docs/REFERENCE.md#memory). Stored, recalled, forgotten and distilled here; the sessions and
//! the turn only call in.
//!
//! - [`store`]: the memories in SQLite (limits, duplicates, expiry, versions, filters, pages);
//! - [`recall`]: ranked recall (full text, the memory's score, recency, recall frequency, and
//!   vector similarity fused in when embeddings are configured: the nearest vectors of the
//!   index `crate::vectors` keeps), with the reason of each rank;
//! - `current`: what holds now among recalled facts (the newer of two about one subject first);
//! - [`inject`]: the `<user-memory>` block a turn gives the model, within its token budget;
//! - [`extract`]: distilling facts from an exchange and consolidating them (add, update,
//!   delete, nothing: the model decides);
//! - [`tools`]: `memory_store`, `memory_recall`, `memory_forget`;
//! - `shared`: the agent's memory space beside its own memories (recall, inject and extract
//!   through `crate::space`);
//! - [`maintain`]: sleep-time consolidation on the alarm (`memory.maintenance`, off by default).
//!
//! - [`memories`]: [`Memories`], the one way in: every write goes through it, so each one purges
//!   what has expired, records its version, and tells the agent's sockets (`memory` frames);
//!   its vector is made after the answer (`crate::vectors::embed`);
//! - [`by`]: who made a version of a memory; [`Category`], what kind of fact it is, is
//!   `crate::config::category`'s (the memory policy names categories too).
//!
//! Invariants: an expired memory is never returned; a superseded one only when the past is
//! asked for (`asOf`, `includeSuperseded`); an outdated fact never ranks above its correction; `core`/`daily` memories outlive every
//! session, `conversation` memories go with theirs; no two memories of one category have the
//! same normalized text; a failed embedding never loses a memory (it waits for its vector).
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 41. **A superseded memory is kept, never shown as holding**: consolidation and `supersedes` set
//!     `invalid_at` and `superseded_by` (`store::invalidate`), never delete; every read of facts
//!     goes through `store::filter_sql`, whose `Held` is "now" unless the request asks for the past;
//!     recall puts the newer of two facts about one subject first (`current::newer_first`), so an
//!     outdated fact never ranks above its correction.
//! 27. **An expired memory is never returned** (every read filters on `expires_at`; every write
//!     purges first), and **a memory outlives every session** except a `conversation` memory,
//!     which goes with its session.
//! 28. **No two live memories of one category that hold now have the same normalized text** (for
//!     `conversation` memories: of one session): a store merges, a change that would duplicate is
//!     409 (the partial unique index of migration 0012 backs it; a superseded memory may say what a
//!     later one says again). A `conversation` memory registers its
//!     session in its write's transaction (`Memories::register_session`), however it is stored.
//! 38. **A request reaches only what its token opens, also through what it asks others to read.**
//!     `api::admit` turns a limited token's claims into `Env::reach`; cross-session search
//!     (`search::across_sessions`: the sessions' index tokens and `session_id IN`), the history
//!     block, and the memory `Filter` (`reach`: another session's `conversation` memory is not
//!     there) read through it, a list of any length (500 sessions) bound as one parameter
//!     (`json_each(?)`, as every list a request gives: a Durable Object binds at most 100), and `Memories::forget` refuses a memory outside it, so tools, MCP and
//!     turns keep to it alike. Cached answers across sessions are keyed by it (and by their
//!     metadata filter). Extraction's
//!     consolidation sees only its own session's `conversation` memories.
//! 29. **Memory work never fails a turn and never loses a memory**: inject failures are the turn's
//!     (it has not started), extraction runs after the answer with its failures logged, all its
//!     model calls come before its writes, and a failed embedding leaves the memory stored and
//!     queued in `unembedded` until a later write embeds it.

pub mod by;
pub(crate) mod current;
pub mod extract;
pub mod inject;
pub mod maintain;
pub mod memories;
pub mod recall;
pub(crate) mod shared;
pub mod store;
pub mod tools;

pub use crate::config::category::Category;
pub use crate::config::{ExtractConfig, InjectConfig, MemoryConfig, DEFAULT_MAX_MEMORIES};
pub use by::By;
pub use memories::{Memories, Op};
pub use store::{Filter, Held, Memory, NewMemory, Patch, Stored};
