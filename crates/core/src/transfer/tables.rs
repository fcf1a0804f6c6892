//! The kinds of row an export holds, as data: each kind's table, the column that ties it to a
//! session (if any), and its fields (JSON name, column, type). Export reads a row into a JSON
//! object with [`Table::to_json`]; import checks an object with [`Table::values`] and writes it
//! with [`Table::insert`]. Derived columns (indexes, counters, caches) are not here: the
//! importer computes them.

use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};
use crate::sql::{Row, Sql, Value};
use crate::store::sessions::MAX_TOKENS;
use crate::time::{iso_millis, parse_iso};

/// How a field is stored and written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Text,
    OptText,
    /// A timestamp (ISO-8601), stored as text.
    Time,
    OptTime,
    Int,
    OptReal,
    Real,
    /// 0 or 1, written as `false` / `true`.
    Bool,
    /// JSON text in the column, the JSON value itself in an export.
    Json,
    OptJson,
}

/// One field: its JSON name, its column, its type.
pub struct Col(pub &'static str, pub &'static str, pub Ty);

/// One kind of row.
pub struct Table {
    /// The `kind` of its NDJSON records (and, plural, its key in a session document).
    pub kind: &'static str,
    pub table: &'static str,
    /// The column holding the session id, for rows that belong to a session.
    pub session: Option<&'static str>,
    pub cols: &'static [Col],
}

use Ty::*;

pub const SESSIONS: Table = Table {
    kind: "session",
    table: "sessions",
    session: None,
    cols: &[
        Col("id", "id", Text),
        Col("name", "name", Text),
        Col("parentSessionId", "parent_session_id", OptText),
        Col("model", "model", OptText),
        Col("source", "source", OptText),
        Col("inputTokens", "input_tokens", Int),
        Col("outputTokens", "output_tokens", Int),
        Col("estimatedCost", "estimated_cost", Real),
        Col("endReason", "end_reason", OptText),
        Col("createdAt", "created_at", Time),
        Col("updatedAt", "updated_at", Time),
    ],
};

pub const COMPACTIONS: Table = Table {
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

pub const BLOCKS: Table = Table {
    kind: "contextBlock",
    table: "context_blocks",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("updatedAt", "updated_at", Time), Col("content", "content", Text)],
};

pub const DEFS: Table = Table {
    kind: "contextDef",
    table: "context_defs",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("removed", "removed", Bool), Col("def", "def", OptJson)],
};

pub const LOADED_SKILLS: Table = Table {
    kind: "loadedSkill",
    table: "loaded_skills",
    session: Some("session_id"),
    cols: &[Col("label", "label", Text), Col("key", "key", Text)],
};

pub const PROMPTS: Table = Table {
    kind: "prompt",
    table: "prompts",
    session: Some("session_id"),
    cols: &[Col("createdAt", "created_at", Time), Col("prompt", "prompt", Text)],
};

/// Every kind of row of one session besides its messages, in the order they are written.
pub const SESSION_TABLES: [&Table; 5] = [&COMPACTIONS, &BLOCKS, &DEFS, &LOADED_SKILLS, &PROMPTS];

pub const MEMORIES: Table = Table {
    kind: "memory",
    table: "memories",
    session: None,
    cols: &[
        Col("id", "id", Text),
        Col("content", "content", Text),
        Col("category", "category", Text),
        Col("tags", "tags", Json),
        Col("score", "score", OptReal),
        Col("sessionId", "session_id", OptText),
        Col("messageId", "message_id", OptText),
        Col("createdAt", "created_at", Time),
        Col("updatedAt", "updated_at", Time),
        Col("expiresAt", "expires_at", OptTime),
        Col("recalledAt", "recalled_at", OptTime),
        Col("recallCount", "recall_count", Int),
    ],
};

pub const MEMORY_VERSIONS: Table = Table {
    kind: "memoryVersion",
    table: "memory_versions",
    session: None,
    cols: &[
        Col("memoryId", "memory_id", Text),
        Col("content", "content", Text),
        Col("tags", "tags", Json),
        Col("score", "score", OptReal),
        Col("category", "category", Text),
        Col("at", "at", Time),
        Col("by", "by", Text),
    ],
};

pub const ENTRIES: Table = Table {
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

impl Table {
    /// Its columns, in field order, for a `SELECT`.
    pub fn columns(&self) -> String {
        self.cols.iter().map(|c| c.1).collect::<Vec<_>>().join(", ")
    }

    /// The rows of this kind (of session `sid` when the kind belongs to sessions; `where_`
    /// narrows further), in the order they were written, as JSON objects.
    pub fn rows(
        &self,
        sql: &dyn Sql,
        sid: Option<&str>,
        where_: &str,
        params: &[Value],
    ) -> Result<Vec<Map<String, Json>>> {
        let mut conds = Vec::new();
        let mut all: Vec<Value> = Vec::new();
        if let (Some(col), Some(sid)) = (self.session, sid) {
            conds.push(format!("{col} = ?"));
            all.push(sid.into());
        }
        if !where_.is_empty() {
            conds.push(where_.to_owned());
            all.extend_from_slice(params);
        }
        let cond = if conds.is_empty() { String::new() } else { format!(" WHERE {}", conds.join(" AND ")) };
        let q = format!("SELECT {} FROM {}{cond} ORDER BY rowid", self.columns(), self.table);
        sql.query(&q, &all)?.iter().map(|r| self.to_json(r)).collect()
    }

    /// A row (of this table's columns, in order) as a JSON object.
    pub fn to_json(&self, r: &Row) -> Result<Map<String, Json>> {
        let mut obj = Map::with_capacity(self.cols.len());
        for (i, Col(field, _, ty)) in self.cols.iter().enumerate() {
            let v = match (ty, &r.0[i]) {
                (_, Value::Null) => Json::Null,
                (Text | OptText | Time | OptTime, _) => Json::String(r.text(i)?),
                (Int, _) => Json::from(r.int(i)?),
                (Bool, _) => Json::Bool(r.int(i)? != 0),
                (Real | OptReal, _) => serde_json::Number::from_f64(r.real(i)?).map_or(Json::Null, Json::Number),
                (Json | OptJson, _) => serde_json::from_str(&r.text(i)?).map_err(|e| {
                    Error::internal(format!("a stored {} is not readable", self.kind))
                        .with_log(format!("{}.{field}: stored JSON: {e}", self.table))
                })?,
            };
            obj.insert((*field).to_owned(), v);
        }
        Ok(obj)
    }

    /// The column values of an imported object: every field present with its type (nullable
    /// ones may be `null` or left out), no other field but `extra`. `at` names the record in
    /// errors.
    pub fn values(&self, obj: &Map<String, Json>, extra: &[&str], at: &str) -> Result<Vec<Value>> {
        if let Some(k) =
            obj.keys().find(|k| !self.cols.iter().any(|c| c.0 == k.as_str()) && !extra.contains(&k.as_str()))
        {
            return Err(Error::invalid(format!("{at}: unknown field {k:?} in a {} record", self.kind)));
        }
        let bad = |field: &str, what: &str| Error::invalid(format!("{at}: {field} must be {what}"));
        self.cols
            .iter()
            .map(|Col(field, _, ty)| {
                let v = obj.get(*field).unwrap_or(&Json::Null);
                Ok(match (ty, v) {
                    (OptText | OptTime | OptReal | OptJson, Json::Null) => Value::Null,
                    (Text | OptText, Json::String(s)) => Value::Text(s.clone()),
                    // Exactly as stored: UTC with milliseconds, so the round trip keeps every byte.
                    (Time | OptTime, Json::String(s)) if parse_iso(s).map(iso_millis).as_deref() == Some(s) => {
                        Value::Text(s.clone())
                    }
                    (Time | OptTime, _) => return Err(bad(field, "a timestamp like 2026-11-22T11:00:00.000Z")),
                    (Int, Json::Number(n)) if n.as_i64().is_some_and(|n| (0..=MAX_TOKENS).contains(&n)) => {
                        Value::Int(n.as_i64().unwrap_or(0))
                    }
                    (Int, _) => return Err(bad(field, "a non-negative integer")),
                    (Real | OptReal, Json::Number(n)) if n.as_f64().is_some_and(|f| f.is_finite() && f >= 0.0) => {
                        Value::Real(n.as_f64().unwrap_or(0.0))
                    }
                    (Real | OptReal, _) => return Err(bad(field, "a non-negative number")),
                    (Bool, Json::Bool(b)) => Value::Int(i64::from(*b)),
                    (Bool, _) => return Err(bad(field, "true or false")),
                    (Json | OptJson, v) if !v.is_null() => Value::Text(v.to_string()),
                    (_, _) => return Err(bad(field, "a string")),
                })
            })
            .collect()
    }

    /// Writes one row: `values` (from [`Table::values`]) under session `sid` (for kinds that
    /// belong to sessions), plus derived `extra` columns. Returns its rowid.
    pub fn insert(&self, sql: &dyn Sql, sid: Option<&str>, values: Vec<Value>, extra: &[(&str, Value)]) -> Result<i64> {
        let mut cols: Vec<&str> = Vec::new();
        let mut all: Vec<Value> = Vec::new();
        if let (Some(col), Some(sid)) = (self.session, sid) {
            cols.push(col);
            all.push(sid.into());
        }
        cols.extend(self.cols.iter().map(|c| c.1));
        all.extend(values);
        for (c, v) in extra {
            cols.push(c);
            all.push(v.clone());
        }
        let marks = vec!["?"; cols.len()].join(", ");
        let q = format!("INSERT INTO {} ({}) VALUES ({marks}) RETURNING rowid", self.table, cols.join(", "));
        // The checks before the write leave no row that clashes; if one still does, the answer
        // names the record, never the storage's words.
        let row =
            sql.query_row(&q, &all).map_err(|e| match e.log.as_deref().is_some_and(|l| l.contains("UNIQUE")) {
                true => Error::invalid(format!("a {} record repeats one already imported", self.kind)),
                false => e,
            })?;
        row.ok_or_else(|| Error::internal("INSERT returned no row"))?.int(0)
    }
}

/// The text of field `field` of a row's values (for checks that read one).
pub fn text_of<'v>(table: &Table, values: &'v [Value], field: &str) -> Option<&'v str> {
    let i = table.cols.iter().position(|c| c.0 == field)?;
    match &values[i] {
        Value::Text(s) => Some(s),
        _ => None,
    }
}
