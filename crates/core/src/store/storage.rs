//! A session's storage figures (`GET /sessions/{sid}/storage`), counted from its rows when
//! asked, so they are always those of the moment; SQLite counts them and writes the answer in
//! one statement (docs/openapi.yaml `SessionStorage`):
//!
//! - `kinds`: its rows by kind, each `{rows, bytes}` (the bytes of what they store): `messages`
//!   (every branch; their JSON as stored, a spilled field counting as its placeholder),
//!   `compactions` (their summaries), `context` (its writable blocks' texts, the blocks added
//!   or removed at run time with their definitions, the skills it has loaded), `prompt` (its
//!   frozen system prompt), `vectors` (those of its messages, with embeddings: codes and
//!   vectors), `spills` (the rows locating its spilled fields; their bytes are R2's);
//! - `rows` and `sqliteBytes`: the sums of `kinds` (indexes, the full-text index and the
//!   database's page overhead are not counted);
//! - `r2Bytes` and `r2Objects`: its messages' fields kept in R2 (`spill`; a fork shares its
//!   source's objects, counted in both sessions).

use crate::error::{Error, Result};
use crate::sql::Sql;

/// The figures, one row per kind of what the session holds, as one JSON object; no row for a
/// session that is not registered. A message's vectors are its first part's (kind 2, item =
/// its seq) and its further parts' (kind 4, items seq × 16 + 1 to 15; migration 0019).
const FIGURES: &str = "
WITH m AS (SELECT count(*) AS r, COALESCE(sum(bytes), 0) AS b FROM messages WHERE session_id = ?1),
     c AS (SELECT count(*) AS r, COALESCE(sum(length(CAST(summary AS BLOB))), 0) AS b
             FROM compactions WHERE session_id = ?1),
     x AS (SELECT (SELECT count(*) FROM context_blocks WHERE session_id = ?1)
                + (SELECT count(*) FROM context_defs WHERE session_id = ?1)
                + (SELECT count(*) FROM loaded_skills WHERE session_id = ?1) AS r,
                  (SELECT COALESCE(sum(length(CAST(content AS BLOB))), 0) FROM context_blocks WHERE session_id = ?1)
                + (SELECT COALESCE(sum(length(CAST(def AS BLOB))), 0) FROM context_defs WHERE session_id = ?1) AS b),
     p AS (SELECT count(*) AS r, COALESCE(sum(length(CAST(prompt AS BLOB))), 0) AS b FROM prompts WHERE session_id = ?1),
     v AS (SELECT count(*) AS r, COALESCE(sum(length(v.vector) + COALESCE(length(v.code), 0)), 0) AS b
             FROM messages m JOIN vectors v
               ON (v.kind = 2 AND v.item = m.seq) OR (v.kind = 4 AND v.item > m.seq * 16 AND v.item < m.seq * 16 + 16)
            WHERE m.session_id = ?1),
     s AS (SELECT count(*) AS r, count(DISTINCT key) AS o, COALESCE(sum(bytes), 0) AS b FROM spills WHERE session_id = ?1)
SELECT json_object(
  'sessionId', ?1,
  'rows', m.r + c.r + x.r + p.r + v.r + s.r,
  'sqliteBytes', m.b + c.b + x.b + p.b + v.b,
  'r2Bytes', s.b,
  'r2Objects', s.o,
  'kinds', json_object(
    'messages', json_object('rows', m.r, 'bytes', m.b),
    'compactions', json_object('rows', c.r, 'bytes', c.b),
    'context', json_object('rows', x.r, 'bytes', x.b),
    'prompt', json_object('rows', p.r, 'bytes', p.b),
    'vectors', json_object('rows', v.r, 'bytes', v.b),
    'spills', json_object('rows', s.r, 'bytes', 0)))
  FROM m, c, x, p, v, s
 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)";

/// The figures of session `id` as JSON text; `not_found` when no such session is registered.
pub fn of(sql: &dyn Sql, id: &str) -> Result<String> {
    let row = sql.query_row(FIGURES, &[id.into()])?;
    row.map(|r| r.text(0)).transpose()?.ok_or_else(|| Error::not_found(format!("session {id} not found")))
}
