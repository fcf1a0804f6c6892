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
