//! The kinds of row an export holds, as data (`Table`): each kind's table, the column that ties
//! it to a session (if any), and its fields. The memory row is the memories' store's own
//! (`crate::memory::store::ROW`); the rest are described here, with the order an agent's and a
//! space's export write them in.

pub(crate) use crate::table::{text_of, Col, Table, Ty};
use Ty::*;

pub(crate) const SESSIONS: Table = Table {
    kind: "session",
    table: "sessions",
    session: None,
    cols: &[
        Col("id", "id", Text),
        Col("name", "name", Text),
        Col("parentSessionId", "parent_session_id", OptText),
        Col("model", "model", OptText),
        Col("source", "source", OptText),
        Col("metadata", "metadata", Meta),
        Col("inputTokens", "input_tokens", Int),
        Col("outputTokens", "output_tokens", Int),
        Col("estimatedCost", "estimated_cost", Real),
        Col("endReason", "end_reason", OptText),
        Col("createdAt", "created_at", Time),
        Col("updatedAt", "updated_at", Time),
    ],
};

pub(crate) const COMPACTIONS: Table = Table {
    kind: "compaction",
    table: "compactions",
    session: Some("session_id"),
    cols: &[
        Col("id", "id", Text),
        Col("summary", "summary", Text),
        Col("fromMessageId", "from_message_id", Text),
        Col("toMessageId", "to_message_id", Text),
        Col("createdAt", "created_at", Time),
    ],
};

pub(crate) const BLOCKS: Table = Table {
    kind: "contextBlock",
    table: "context_blocks",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("updatedAt", "updated_at", Time), Col("content", "content", Text)],
};

pub(crate) const DEFS: Table = Table {
    kind: "contextDef",
    table: "context_defs",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("removed", "removed", Bool), Col("def", "def", OptJson)],
};

pub(crate) const LOADED_SKILLS: Table = Table {
    kind: "loadedSkill",
    table: "loaded_skills",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("key", "key", Text)],
};

pub(crate) const PROMPTS: Table = Table {
    kind: "prompt",
    table: "prompts",
    session: Some("session_id"),
    cols: &[Col("createdAt", "created_at", Time), Col("prompt", "prompt", Text)],
};

/// Every kind of row of one session besides its messages, in the order they are written.
pub(crate) const SESSION_TABLES: [&Table; 6] = [&COMPACTIONS, &BLOCKS, &DEFS, &LOADED_SKILLS, &PROMPTS, &BLOCK_READS];

pub(crate) use crate::memory::store::ROW as MEMORIES;

pub(crate) const MEMORY_VERSIONS: Table = Table {
    kind: "memoryVersion",
    table: "memory_versions",
    session: None,
    cols: &[
        Col("memoryId", "memory_id", Text),
        Col("content", "content", Text),
        Col("tags", "tags", Json),
        Col("metadata", "metadata", Meta),
        Col("score", "score", OptReal),
        Col("category", "category", Text),
        Col("at", "at", Time),
        Col("by", "by", Text),
    ],
};

pub(crate) const ENTRIES: Table = Table {
    kind: "entry",
    table: "search_entries",
    session: None,
    cols: &[
        Col("label", "label", Text),
        Col("key", "key", Text),
        Col("createdAt", "created_at", Time),
        Col("updatedAt", "updated_at", Time),
        Col("content", "content", Text),
    ],
};

/// The version of a shared block a session last read (`space_block_seen`): the model's next
/// replace names it, so a restored session is not refused for a version it never read.
pub(crate) const BLOCK_READS: Table = Table {
    kind: "sharedBlockRead",
    table: "space_block_seen",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("version", "version", Int)],
};

pub(crate) const SCHEDULES: Table = Table {
    kind: "schedule",
    table: "schedules",
    session: None,
    cols: &[
        Col("id", "id", Text),
        Col("name", "name", Text),
        Col("prompt", "prompt", Text),
        Col("timing", "kind", Text),
        Col("spec", "spec", Text),
        Col("sessionId", "session_id", OptText),
        Col("reach", "reach", Text),
        Col("paused", "paused", Bool),
        Col("nextRunAt", "next_run_at", OptTime),
        Col("lastRunAt", "last_run_at", OptTime),
        Col("createdAt", "created_at", Time),
    ],
};

pub(crate) const SCHEDULE_RUNS: Table = Table {
    kind: "scheduleRun",
    table: "schedule_runs",
    session: None,
    cols: &[
        Col("id", "id", Text),
        Col("scheduleId", "schedule_id", Text),
        Col("startedAt", "started_at", Time),
        Col("endedAt", "ended_at", OptTime),
        Col("status", "status", OptText),
        Col("reply", "reply", OptText),
        Col("usage", "usage", OptJson),
        Col("error", "error", OptText),
    ],
};

/// The usage ledger: one row per turn that called the model (`GET /usage` sums it).
pub(crate) const USAGE: Table = Table {
    kind: "usage",
    table: "usage_ledger",
    session: None,
    cols: &[
        Col("at", "at", Time),
        Col("sessionId", "session_id", Text),
        Col("model", "model", Text),
        Col("inputTokens", "input_tokens", Int),
        Col("outputTokens", "output_tokens", Int),
        Col("estimated", "estimated", Bool),
        Col("inputEstimate", "input_estimate", OptInt),
        Col("cachedInputTokens", "cached_input_tokens", Int),
    ],
};

/// The space an admin chose for the agent (one row at most; `space` null: none).
pub(crate) const SPACE_CHOICE: Table = Table {
    kind: "spaceChoice",
    table: "space_choice",
    session: None,
    cols: &[Col("space", "space", OptText), Col("setAt", "set_at", Time)],
};

/// A memory space's shared blocks, tombstones (`deletedAt` set, no text) included.
pub(crate) const SHARED_BLOCKS: Table = Table {
    kind: "sharedBlock",
    table: "space_blocks",
    session: None,
    cols: &[
        Col("label", "label", Text),
        Col("content", "content", Text),
        Col("version", "version", Int),
        Col("updatedAt", "updated_at", Time),
        Col("updatedBy", "updated_by", OptText),
        Col("deletedAt", "deleted_at", OptTime),
    ],
};

/// A memory space's floor: the version a label without a row reads as (one row at most).
pub(crate) const BLOCK_FLOOR: Table = Table {
    kind: "sharedBlockFloor",
    table: "space_block_floor",
    session: None,
    cols: &[Col("version", "version", Int)],
};

/// The agent-wide kinds of row an agent's export holds, in the order it writes them (paged).
pub(crate) const AGENT_ROWS: [&Table; 6] = [&MEMORIES, &MEMORY_VERSIONS, &ENTRIES, &SCHEDULES, &SCHEDULE_RUNS, &USAGE];

/// The kinds of row a space's export holds, in the order it writes them (paged).
pub(crate) const SPACE_ROWS: [&Table; 3] = [&MEMORIES, &MEMORY_VERSIONS, &SHARED_BLOCKS];

/// The kinds of which an object holds one row at most, written after the paged ones.
pub(crate) const AGENT_SINGLES: [&Table; 1] = [&SPACE_CHOICE];
pub(crate) const SPACE_SINGLES: [&Table; 1] = [&BLOCK_FLOOR];
