//! A session's storage figures (`GET /sessions/{sid}/storage`): the rows it holds in SQLite and
//! the bytes of what they store, by kind, and the bytes of its messages' fields kept in R2
//! (`spill`). Counted from the rows when asked, so they are always those of the moment.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::sql::{Sql, Value};

/// Rows, and the bytes of what they store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Figures {
    pub rows: i64,
    pub bytes: i64,
}

/// The session's rows by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Kinds {
    /// Its messages, every branch: their JSON as stored (a spilled field counts as its placeholder).
    pub messages: Figures,
    /// Its summary overlays: their summaries.
    pub compactions: Figures,
    /// Its writable blocks' texts, the blocks added or removed at run time (their definitions),
    /// the skills it has loaded.
    pub context: Figures,
    /// Its frozen system prompt.
    pub prompt: Figures,
    /// The vectors of its messages (with embeddings): their codes and vectors.
    pub vectors: Figures,
    /// Where its spilled fields are (the bytes are R2's: `r2Bytes`).
    pub spills: Figures,
}

/// A session's storage figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    pub session_id: String,
    /// Every row of [`Kinds`].
    pub rows: i64,
    /// The bytes of what those rows store (their texts and vectors; indexes, the full-text
    /// index and the database's page overhead not counted).
    pub sqlite_bytes: i64,
    /// The bytes of its messages' fields kept in R2 (a fork's share counted in both sessions).
    pub r2_bytes: i64,
    /// The R2 objects holding them.
    pub r2_objects: i64,
    pub kinds: Kinds,
}

/// The figures of session `id`; `not_found` when no such session is registered.
pub fn of(sql: &dyn Sql, id: &str) -> Result<Storage> {
    if super::sessions::get(sql, id)?.is_none() {
        return Err(Error::not_found(format!("session {id} not found")));
    }
    let row = |q: &str| -> Result<Vec<i64>> {
        let r = sql.query_row(q, &[id.into()])?.ok_or_else(|| Error::internal("an aggregate returned no row"))?;
        (0..r.0.len()).map(|i| if matches!(r.0[i], Value::Null) { Ok(0) } else { r.int(i) }).collect()
    };
    let two = |q: &str| -> Result<Figures> {
        let v = row(q)?;
        Ok(Figures { rows: v[0], bytes: v[1] })
    };
    let messages = two("SELECT count(*), sum(bytes) FROM messages WHERE session_id = ?1")?;
    let compactions =
        two("SELECT count(*), sum(length(CAST(summary AS BLOB))) FROM compactions WHERE session_id = ?1")?;
    let context = two("SELECT (SELECT count(*) FROM context_blocks WHERE session_id = ?1)
              + (SELECT count(*) FROM context_defs WHERE session_id = ?1)
              + (SELECT count(*) FROM loaded_skills WHERE session_id = ?1),
                (SELECT COALESCE(sum(length(CAST(content AS BLOB))), 0) FROM context_blocks WHERE session_id = ?1)
              + (SELECT COALESCE(sum(length(CAST(def AS BLOB))), 0) FROM context_defs WHERE session_id = ?1)")?;
    let prompt = two("SELECT count(*), sum(length(CAST(prompt AS BLOB))) FROM prompts WHERE session_id = ?1")?;
    // A message's vectors: its first part (kind 2, item = its seq) and its further parts (kind 4,
    // items seq × 16 + 1 to 15; migration 0019).
    let vectors = two("SELECT count(*), sum(length(v.vector) + COALESCE(length(v.code), 0))
           FROM messages m JOIN vectors v
             ON (v.kind = 2 AND v.item = m.seq) OR (v.kind = 4 AND v.item > m.seq * 16 AND v.item < m.seq * 16 + 16)
          WHERE m.session_id = ?1")?;
    let r2 = row("SELECT count(*), count(DISTINCT key), sum(bytes) FROM spills WHERE session_id = ?1")?;
    let spills = Figures { rows: r2[0], bytes: 0 };
    let kinds = Kinds { messages, compactions, context, prompt, vectors, spills };
    let all = [messages, compactions, context, prompt, vectors, spills];
    Ok(Storage {
        session_id: id.to_owned(),
        rows: all.iter().map(|f| f.rows).sum(),
        sqlite_bytes: all.iter().map(|f| f.bytes).sum(),
        r2_bytes: r2[2],
        r2_objects: r2[1],
        kinds,
    })
}
