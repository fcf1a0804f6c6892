//! The kinds of row an export holds, as data (`Table`): each kind's table, the column that ties
//! it to a session (if any), and its fields. The memory row is the memories' store's own
//! (`crate::memory::store::ROW`); the rest are described here.

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
pub(crate) const SESSION_TABLES: [&Table; 5] = [&COMPACTIONS, &BLOCKS, &DEFS, &LOADED_SKILLS, &PROMPTS];

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
