//! The cache of a session's branch estimate (`token_estimates`): one leaf and the tokens of its
//! path as the model sees it. The writes of the tree and of overlays keep it right: an append
//! under the cached leaf adds one message's tokens; anything else that could change the sum
//! (update, delete, clear, a new overlay) drops it. [`crate::store::history::branch_tokens`]
//! reads it, or walks the path once and fills it, so an append costs the same at depth 10 and
//! 10,000 (the reference re-reads the whole path, docs/REFERENCE.md#branch-estimate).

use serde_json::Value as Json;

use crate::error::Result;
use crate::sql::{Sql, Value};
use crate::tokens::estimate_message;

/// Tokens of one stored message JSON.
pub(crate) fn message_tokens(json: &str) -> i64 {
    serde_json::from_str::<Json>(json).map(|m| estimate_message(&m)).unwrap_or(0)
}

/// Called in the append's transaction: if the cache is for `parent`, it now covers `id` too.
pub(crate) fn note_append(sql: &dyn Sql, session: &str, parent: Option<&str>, id: &str, json: &str) -> Result<()> {
    let Some(parent) = parent else { return Ok(()) };
    sql.execute(
        "UPDATE token_estimates SET leaf_id = ?, tokens = tokens + ? WHERE session_id = ? AND leaf_id = ?",
        &[id.into(), Value::Int(message_tokens(json)), session.into(), parent.into()],
    )
}

/// Drops the cached estimate of `session` (its messages or overlays changed).
pub fn invalidate(sql: &dyn Sql, session: &str) -> Result<()> {
    sql.execute("DELETE FROM token_estimates WHERE session_id = ?", &[session.into()])
}

/// The cached estimate of the path to `leaf`, if the cache is for that leaf.
pub(crate) fn cached(sql: &dyn Sql, session: &str, leaf: &str) -> Result<Option<i64>> {
    sql.query_row(
        "SELECT tokens FROM token_estimates WHERE session_id = ? AND leaf_id = ?",
        &[session.into(), leaf.into()],
    )?
    .map(|r| r.int(0))
    .transpose()
}

/// Caches `tokens` as the estimate of the path to `leaf` (replacing any other leaf's).
pub(crate) fn remember(sql: &dyn Sql, session: &str, leaf: &str, tokens: i64) -> Result<()> {
    sql.execute(
        "INSERT INTO token_estimates (session_id, leaf_id, tokens) VALUES (?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET leaf_id = excluded.leaf_id, tokens = excluded.tokens",
        &[session.into(), leaf.into(), Value::Int(tokens)],
    )
}
