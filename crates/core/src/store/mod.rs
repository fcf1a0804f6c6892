//! The message store of one agent, in its SQLite database: the schema, validated messages,
//! the tree of each session, oversize fields kept in R2, compaction overlays, history and the
//! running token estimate, the sessions registry, search and a session's storage figures. [`open`]
//! is where it starts.
//!
//! # Its modules
//!
//! | module | what it is for |
//! |---|---|
//! | `mod.rs` | `open`: migrations, then `spill::recover` (the Durable Object then calls `schedule::run::recover`, above the store) |
//! | `schema.rs` | migration list and `migrate` (idempotent, one transaction per version, `schema_version`) |
//! | `message.rs` | `NewMessage` (validation of incoming `UIMessage`s, id rules, the 1,800,000-byte row limit, indexed text), `RawMessage` as stored, `SpillRef` |
//! | `tree.rs` | the message tree of one session: append, path walk (by `parent_seq`, one JSON text per walk), chunked hydration, `path_json` (SQLite walks the path and concatenates the stored texts in pieces under the 2 MB string limit), `page` (a walk that stops after `limit + 1` rows), `window` (the recent window selected inside the walk, with the whole path's count and bytes), `path_len` (the same walk keeping no row), branches, update, delete, clear, latest leaf |
//! | `spill.rs` | oversize messages: largest fields to R2 before the write (pending first), `spills` records, rehydration on read, garbage sweep, crash recovery |
//! | `storage.rs` | a session's storage figures (`GET …/storage`): its rows by kind, the bytes they store in SQLite, its spilled bytes in R2 |
//! | `overlay.rs` | compaction overlays: storage (validated), `overlay()` (the read-time application), the synthetic `compaction_…` message and its id |
//! | `history.rs` | a path as the model sees it (`Overlays::Applied` or `Raw`); `history_json`, the same answer assembled by SQLite when nothing is laid over the stored texts (no overlay, no spilled field); `page` (pages with a `nextBefore` cursor, overlays inside the page only); the byte-budgeted recent window, the branch estimate |
//! | `estimate.rs` | the cached branch estimate of one leaf per session (`token_estimates`) |
//! | `sessions.rs` | the registry: create, get, list (a `Page`, its metadata filter included), `update` (name, metadata), delete, usage, fork, registration on write; `counts` (a session's messages and its active path's `Tree::path_len`), `Version` (what a kept text was read at: a session's newest seq and its `session_versions` row, or `Sql::changes` across sessions) and `version_columns` (the one definition of a session's version, invariant 36), and `get_with` / `list_with`, which take the counts from the caller (`core::reads` keeps them) |
//! | `search.rs` | `index` (a message's text and its session's token), and bm25-ranked search (`core::rank` of a `core::query::Query`), per session (the session's token beside the words, so only its matches are ranked) and across (a metadata filter is the reach of the sessions it selects) |
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 1. **Ids are unique per session**, not per agent: `UNIQUE(session_id, id)`.
//! 2. **A child is inserted after its parent** (an append's explicit parent must exist; an update
//!    never changes a parent). So `seq` orders every path root → leaf, and **the newest row of a
//!    session is always childless: it is the latest leaf**. A row's `parent_seq` is its parent's
//!    `seq` (set by `Tree::insert`, cleared with `parent_id` when the parent is deleted), so a
//!    path walk follows primary keys. Finding it is one index probe; nothing
//!    is cached in memory, so there is nothing to go stale after eviction.
//! 3. **Deleting a message orphans its children** (they become roots; see
//!    `REFERENCE.md#d-orphans`): a path walk stops at the first missing parent.
//! 4. **History content is fetched in chunks** of ≤ 50 rows and ≤ 4 MiB (`tree::chunks`), after a
//!    path walk that reads only ids, roles and sizes. Paths are capped at 10,001 rows (the
//!    reference's guard); a deeper path yields the newest 10,001.
//! 5. **Overlays never delete anything.** They are applied at read time: at each position of the
//!    path the newest overlay that starts there and ends on the same path replaces the run
//!    (branch local; ones starting inside an applied run are skipped). A stored overlay always has
//!    `from` as an ancestor-or-self of `to` (checked on write). The synthetic message's
//!    `createdAt` is the overlay's, so reads are repeatable. `raw=1` shows the originals.
//! 6. **Every FTS row belongs to a live message** (`rowid = messages.seq`, written and deleted in
//!    the same transaction), so no search can return a ghost. Its `session` column holds the one
//!    token of its message's session (`search::session_token`, written only by `search::index`).
//! 7. **User text never reaches FTS5 unescaped**: `query::compile` quotes every term; operators
//!    are literal words; control characters (NUL included) separate words. Blank queries search
//!    nothing. Everything else reaches SQL as bound parameters, never as SQL text (a metadata
//!    filter's key too, inside the JSON path it binds: keys are checked to `[A-Za-z0-9_.-]`).
//! 16. **No row passes 1,800,000 bytes** (the DO limit is 2 MB): `Tree::insert`/`update` refuse
//!     one (`NewMessage::check_fits`), and `Session::write` spills the largest fields of an oversize message to R2 first.
//!     Objects are written **before** the transaction that records them, and objects no row took
//!     are deleted right after; so a committed row never points at a missing object, and an object
//!     is garbage only once its last `spills` row is gone (triggers), after which a write
//!     request's sweep deletes it (retried on failure). **No crash leaks an object**: a key is
//!     committed to `spill_pending` before its object is put and leaves it in the transaction
//!     that records it (or, unused, for `spill_garbage`); when the DO starts (`store::open` →
//!     `spill::recover`), keys still pending belong to writes a crash cut short and become
//!     garbage. Every read that returns messages to a client rehydrates; the compaction
//!     summarizer, token estimates, `expand_compaction` and `bytes` see the row (placeholders
//!     `[N bytes stored in R2; starts: …]`).
//!     The sweep also deletes what an erase hands it (an agent's skills). An object whose key waits
//!     in `spill_garbage` or `spill_pending` is never listed (`spill::live`: skills listings, the
//!     export, the import's emptiness check), and writing a skill under such a key first takes
//!     the key back from the sweep (`spill::reclaim`), so a crash between an erase's commit and its
//!     sweep can neither show an erased skill nor delete a new one.
//! 18. **The token estimate is incremental**: an append under the cached leaf adds its message's
//!     tokens; update, delete, clear and new overlays drop the cache, which the next read rebuilds
//!     from the path once.
//! 19. **Synthetic `compaction_…` messages are never stored**, however a client sends them
//!     (`overlay::is_synthetic_id` is the one check).

pub mod estimate;
pub mod history;
pub mod message;
pub mod overlay;
pub mod schema;
pub mod search;
pub mod sessions;
pub mod spill;
pub mod storage;
pub mod tree;

use crate::error::Result;
use crate::sql::Sql;
use crate::time::iso_millis;

/// Opens the store: brings the schema up to date (returns the versions applied now) and
/// recovers from a crash mid-write (spilled objects of writes that never committed become
/// garbage for the next sweep). The Durable Object calls this once when it starts, then
/// `schedule::run::recover` (the schedule runs a crash cut short), which sits above the store.
pub fn open(sql: &dyn Sql, now_ms: i64) -> Result<Vec<i64>> {
    let applied = schema::migrate(sql, &iso_millis(now_ms))?;
    spill::recover(sql)?;
    Ok(applied)
}
