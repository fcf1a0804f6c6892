//! Taking an agent's (or a memory space's) data out and putting it back: the export format
//! (`session-agent/3`), one session's export and import, the whole agent's or space's (NDJSON;
//! an agent's streamed), and the erase.
//!
//! The format names what is stored, not how: every row that is the agent's data (sessions,
//! messages with their parents and spilled fields put back, compaction overlays, context
//! blocks and runtime block definitions, loaded skills, frozen prompts, the shared-block
//! versions each session read, memories and every version of them, search-block entries,
//! schedules and their runs, the usage ledger, the admin's choice of space, agent-scoped R2
//! skills; in a space its memories, shared blocks and their floor), none of what is derived
//! from it (full-text indexes, token estimates, memory vectors, spill records), which the
//! import computes again. So an export imported into a fresh object exports byte for byte the
//! same, whatever the object is called. [`TABLES`] says, for every table of the schema, which
//! of the three it is (a test holds it to `sqlite_master`).
//!
//! - [`tables`]: the rows of each kind, as data: JSON field ↔ column, and their checks;
//! - [`export`]: a session's document, the agent's NDJSON in chunks;
//! - [`import`]: read and check everything first, oversize fields and skills to R2 (pending),
//!   then one transaction;
//! - [`erase`]: every row in one transaction, then the R2 objects through the spill sweep.
//!
//! # Where it sits
//!
//! Uses `store` (sessions, messages, trees, spill), `config` (block definitions, labels,
//! categories), `memory::store` (the memory checks), `space` (a space's blocks, their bounds),
//! `schedule::store` (a schedule's checks), `access` (the revocation an erase sets), `env`,
//! `sql`, `blobs`, `ids`, `time`; last in this order because it knows every table (the split,
//! which compacts, is a session operation: `session/split.rs`).
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 31. **An import writes nothing unless every record passed its checks, and takes only what the
//!     API could have written.** The whole document or NDJSON body is read and checked first
//!     (format and version, fields and types, ids, labels, messages by `NewMessage::from_json` as an
//!     append's, memories as `POST /memories` does, each parent an earlier message of its session,
//!     overlays on one path with unique ids, one prompt and one record per block label and loaded
//!     skill per session, block texts and loaded skills of blocks the session has
//!     (`context::compose`), agent-wide texts of shared writable blocks, `conversation` memories of
//!     imported sessions, versions of imported memories, entries of search blocks
//!     (`context::entry_labels`), nothing repeated, the `end` counts of an agent export); a refusal
//!     is a `400` naming the record, before any object is put or row written. The export leaves out
//!     entries no block reads, so what it writes always imports.
//! 32. **An import's rows go in one transaction, after its R2 objects are put under pending
//!     keys.** Oversize message fields (`spill::prepare`) and skills are put in R2 with their keys
//!     committed to `spill_pending` first; the rows (and the removal of those pending keys) commit
//!     together, and the conflict checks (`409`: the session exists, the agent holds data) run
//!     inside that transaction. A failed transaction hands the keys to `spill_garbage` (the
//!     request's sweep deletes the objects), a crash before the commit leaves them to
//!     `spill::recover`: a committed import never points at a missing object, and a failed one
//!     leaves none behind (invariant 16).
//! 33. **An export holds nothing derived**: no full-text rows, token estimates, memory vectors,
//!     `memory_count`, spill records, `touch_seq` or normalized memory texts, only the fields
//!     `tables.rs` lists (and messages with their spilled fields put back), read in write order.
//!     The importer computes the derived values again (or leaves them to be computed when needed),
//!     so **export → import → export is byte-identical**, whatever the agent (or space) is called
//!     (`tests/it/transfer.rs`, `tests/it/spaces.rs`, `tests/e2e/transfer.test.mjs`). Every table
//!     is classified in `transfer::TABLES` (exported, derived, local), checked against
//!     `sqlite_master`: a table added later cannot be left out of a move silently.
//! 34. **An erase deletes every table in `erase::ERASED`**, in one transaction that also hands
//!     every R2 object of the agent (spilled, pending, agent-scoped skills) to the sweep and sets
//!     the revocation time to the moment of the erase. A test (`tests/it/transfer.rs`) reads the
//!     tables from `sqlite_master` and checks that after an erase none holds a row but
//!     `schema_version`, `revocation`, `embedding_model` (a setting) and `sqlite_sequence` (so no
//!     `vector_log` seq is given twice; FTS shadow tables go with their tables), so a table
//!     added later cannot be forgotten here.

use crate::ids::Role;
use crate::sort;

pub mod erase;
pub mod export;
pub mod import;
pub mod tables;

/// What moving an object (export, then import elsewhere) does with a table's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// The object's data: in its export, written back by the import.
    Exported,
    /// Computed from exported rows (indexes, counters, estimates, vectors, spill records): the
    /// import (or the embedding after it) makes them again.
    Derived,
    /// The object's own bookkeeping, which does not travel: the schema's version, token
    /// revocation, R2 objects waiting for the sweep, the embedding model in use, when the
    /// maintenance last ran, the directory's rows and the object's report to it, the last texts
    /// of http blocks (their service is asked again).
    Local,
}

/// Every table of the schema (FTS5's shadow tables and SQLite's own aside) and what a move does
/// with it. `tests/it/transfer.rs` checks it against `sqlite_master` and against the kinds of
/// row the export writes: a new table nobody classified fails the test.
pub const TABLES: &[(&str, Transfer)] = &[
    ("sessions", Transfer::Exported),
    ("messages", Transfer::Exported),
    ("compactions", Transfer::Exported),
    ("context_blocks", Transfer::Exported),
    ("context_defs", Transfer::Exported),
    ("prompts", Transfer::Exported),
    ("loaded_skills", Transfer::Exported),
    ("space_block_seen", Transfer::Exported),
    ("search_entries", Transfer::Exported),
    ("memories", Transfer::Exported),
    ("memory_versions", Transfer::Exported),
    ("schedules", Transfer::Exported),
    ("schedule_runs", Transfer::Exported),
    ("usage_ledger", Transfer::Exported),
    ("space_choice", Transfer::Exported),
    ("space_blocks", Transfer::Exported),
    ("space_block_floor", Transfer::Exported),
    ("messages_fts", Transfer::Derived),
    ("search_entries_fts", Transfer::Derived),
    ("memories_fts", Transfer::Derived),
    ("memory_count", Transfer::Derived),
    ("token_estimates", Transfer::Derived),
    ("session_versions", Transfer::Derived),
    ("spills", Transfer::Derived),
    ("vectors", Transfer::Derived),
    ("unembedded", Transfer::Derived),
    ("vector_log", Transfer::Derived),
    ("schema_version", Transfer::Local),
    ("revocation", Transfer::Local),
    ("spill_garbage", Transfer::Local),
    ("spill_pending", Transfer::Local),
    ("embedding_model", Transfer::Local),
    ("maintenance", Transfer::Local),
    ("directory_entries", Transfer::Local),
    ("directory_report", Transfer::Local),
    ("fetched_block_texts", Transfer::Local),
];

/// The tables whose rows the export writes (each kind of record's, and the messages'): what
/// [`TABLES`] must call [`Transfer::Exported`].
pub fn exported() -> Vec<&'static str> {
    use tables::*;
    let kinds = [&SESSIONS, &BLOCKS].into_iter().chain(SESSION_TABLES).chain(AGENT_ROWS).chain(SPACE_ROWS);
    let mut out: Vec<&str> = kinds.chain(AGENT_SINGLES).chain(SPACE_SINGLES).map(|t| t.table).collect();
    out.push("messages");
    sort::ascending(&mut out);
    out.dedup();
    out
}

/// How many records of each kind an agent's (or a space's) export holds: its `end` record says
/// it, and an import answers what it wrote ([`Counts::to_json`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub(crate) sessions: usize,
    pub(crate) messages: usize,
    pub memories: usize,
    pub(crate) memory_versions: usize,
    pub(crate) entries: usize,
    pub(crate) skills: usize,
    pub(crate) schedules: usize,
    pub(crate) schedule_runs: usize,
    pub(crate) usage: usize,
    pub(crate) shared_blocks: usize,
}

impl Counts {
    /// The counts of what an object of `role` holds, as the `end` record and the import's
    /// answer say them.
    pub fn to_json(&self, role: Role) -> serde_json::Value {
        match role {
            Role::Agent => serde_json::json!({
                "sessions": self.sessions, "messages": self.messages, "memories": self.memories,
                "memoryVersions": self.memory_versions, "entries": self.entries, "skills": self.skills,
                "schedules": self.schedules, "scheduleRuns": self.schedule_runs, "usage": self.usage,
            }),
            Role::Space => serde_json::json!({
                "memories": self.memories, "memoryVersions": self.memory_versions, "sharedBlocks": self.shared_blocks,
            }),
        }
    }

    /// One more record of kind `kind` (a kind that is not counted: nothing).
    pub(crate) fn add(&mut self, kind: &str, n: usize) {
        let count = match kind {
            "session" => &mut self.sessions,
            "message" => &mut self.messages,
            "memory" => &mut self.memories,
            "memoryVersion" => &mut self.memory_versions,
            "entry" => &mut self.entries,
            "skill" => &mut self.skills,
            "schedule" => &mut self.schedules,
            "scheduleRun" => &mut self.schedule_runs,
            "usage" => &mut self.usage,
            "sharedBlock" => &mut self.shared_blocks,
            _ => return,
        };
        *count += n;
    }
}

/// What the first record of an export says it is (`kind`): an agent's or a space's.
pub(crate) fn kind_of(role: Role) -> &'static str {
    match role {
        Role::Agent => "agent",
        Role::Space => "space",
    }
}

/// The format this build writes. An export names it in its first record. Version 2 added
/// `metadata` to session, memory and memoryVersion records; version 3 the `schedule`,
/// `scheduleRun`, `usage`, `spaceChoice` and `sharedBlockRead` records, and a space's export
/// (`sharedBlock`, `sharedBlockFloor`).
pub(crate) const FORMAT: &str = "session-agent/3";

/// The earlier formats this build still reads: version 2, without what version 3 added (an
/// agent of version 2 had no schedules, ledger, choice of space or shared-block reads in its
/// export: they import as none), and version 1, also without `metadata` (which then is `{}`).
const FORMAT_2: &str = "session-agent/2";
const FORMAT_1: &str = "session-agent/1";

/// The format's name without its version.
const FORMAT_NAME: &str = "session-agent/";

/// Refuses a `format` this build does not read, saying why (newer version, or not an export).
pub(crate) fn check_format(format: Option<&str>) -> crate::error::Result<()> {
    use crate::error::Error;
    match format {
        Some(FORMAT | FORMAT_2 | FORMAT_1) => Ok(()),
        Some(f) => match f.strip_prefix(FORMAT_NAME).and_then(|v| v.parse::<u32>().ok()) {
            Some(v) if v > 3 => Err(Error::invalid(format!(
                "this export has format {f:?}, newer than this service reads ({FORMAT}): update the service first"
            ))),
            _ => {
                Err(Error::invalid(format!("unknown export format {f:?} (this service reads {FORMAT_1} to {FORMAT})")))
            }
        },
        None => Err(Error::invalid(format!("not an export: the format field ({FORMAT:?}) is missing"))),
    }
}
