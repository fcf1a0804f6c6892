//! Compaction overlays: summaries stored beside the original messages and laid over a path at
//! read time. Nothing is ever deleted by compaction; `raw` reads show the originals.

use serde::Serialize;
use serde_json::json;

use crate::error::{Error, Result};
use crate::ids::new_id;
use crate::sql::{Row, Sql, Value};
use crate::store::message::MAX_MESSAGE_BYTES;
use crate::store::message::{raw, RawMessage};
use crate::store::tree::Tree;

/// Ids of synthetic overlay messages start with this.
const COMPACTION_PREFIX: &str = "compaction_";

/// Whether `message_id` is the id of a synthetic overlay message (`compaction_<overlay id>`): such a
/// message stands in a history read for a summary and is never stored.
pub(crate) fn is_synthetic_id(message_id: &str) -> bool {
    message_id.starts_with(COMPACTION_PREFIX)
}

/// The overlay id in `id`, which may be a synthetic message's id (`compaction_<overlay id>`) or the
/// overlay id itself.
pub(crate) fn overlay_id(id: &str) -> &str {
    id.strip_prefix(COMPACTION_PREFIX).unwrap_or(id)
}

/// The id of the synthetic message that stands for overlay `overlay_id`.
pub(crate) fn synthetic_id(overlay_id: &str) -> String {
    format!("{COMPACTION_PREFIX}{overlay_id}")
}

/// One stored overlay: `summary` stands for the messages `from..=to` of a path.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    pub(crate) id: String,
    pub(crate) summary: String,
    pub(crate) from_message_id: String,
    pub(crate) to_message_id: String,
    pub(crate) created_at: String,
}

fn compaction(r: &Row) -> Result<Compaction> {
    Ok(Compaction {
        id: r.text(0)?,
        summary: r.text(1)?,
        from_message_id: r.text(2)?,
        to_message_id: r.text(3)?,
        created_at: r.text(4)?,
    })
}

/// Every overlay of the session, oldest first (insertion order).
pub fn list(sql: &dyn Sql, session: &str) -> Result<Vec<Compaction>> {
    sql.query(
        "SELECT id, summary, from_message_id, to_message_id, created_at
           FROM compactions WHERE session_id = ? ORDER BY seq",
        &[session.into()],
    )?
    .iter()
    .map(compaction)
    .collect()
}

/// Whether the session has any overlay (without reading their summaries).
pub(crate) fn exists(sql: &dyn Sql, session: &str) -> Result<bool> {
    Ok(sql.query_row("SELECT 1 FROM compactions WHERE session_id = ? LIMIT 1", &[session.into()])?.is_some())
}

/// Whether an overlay of `session` begins or ends at one of `ids`. An overlay whose end was
/// deleted stays stored, and lies over a path again once a message with that id is appended
/// to it.
pub(crate) fn names_any(sql: &dyn Sql, session: &str, ids: &[&str]) -> Result<bool> {
    let ids = serde_json::to_string(ids).map_err(|e| Error::internal(e.to_string()))?;
    Ok(sql
        .query_row(
            "SELECT 1 FROM compactions WHERE session_id = ?1
                AND (from_message_id IN (SELECT value FROM json_each(?2)) OR to_message_id IN (SELECT value FROM json_each(?2)))
              LIMIT 1",
            &[session.into(), ids.into()],
        )?
        .is_some())
}

/// Stores an overlay after checking that both ids are messages of the session and that `from`
/// is `to` or one of its ancestors (an overlay that could never apply is refused, not stored).
pub(crate) fn add(sql: &dyn Sql, session: &str, summary: &str, from: &str, to: &str, now: &str) -> Result<Compaction> {
    if summary.trim().is_empty() {
        return Err(Error::invalid("summary must not be blank"));
    }
    if summary.len() > MAX_MESSAGE_BYTES {
        return Err(Error::too_large(format!("summary is over {MAX_MESSAGE_BYTES} bytes")));
    }
    let tree = Tree::new(sql, session);
    for id in [from, to] {
        if !tree.contains(id)? {
            return Err(Error::invalid(format!("message {id} is not in session {session}")));
        }
    }
    if !tree.path(to)?.iter().any(|r| r.id == from) {
        return Err(Error::invalid(format!("{from} is not an ancestor of (or equal to) {to}")));
    }
    let c = Compaction {
        id: new_id()?,
        summary: summary.to_owned(),
        from_message_id: from.to_owned(),
        to_message_id: to.to_owned(),
        created_at: now.to_owned(),
    };
    crate::store::estimate::invalidate(sql, session)?;
    sql.execute(
        "INSERT INTO compactions (id, session_id, from_message_id, to_message_id, created_at, summary)
         VALUES (?, ?, ?, ?, ?, ?)",
        &[c.id.as_str().into(), session.into(), from.into(), to.into(), now.into(), Value::Text(c.summary.clone())],
    )?;
    Ok(c)
}

/// One element of an overlaid path.
#[derive(Debug, PartialEq)]
pub enum Piece<'c> {
    /// The path's message at this index.
    Message(usize),
    /// A summary standing for a run of the path.
    Summary(&'c Compaction),
}

/// Lays `overlays` (oldest first) over the path `ids` (root first), as the reference does (docs/REFERENCE.md#overlays):
/// at each position, the newest overlay that starts there and ends on this same path at or after
/// it replaces that run; scanning resumes after its end. Overlays of sibling branches, and ones
/// starting inside an applied run, do not apply.
pub(crate) fn overlay<'c>(ids: &[&str], overlays: &'c [Compaction]) -> Vec<Piece<'c>> {
    let index: std::collections::HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut out = Vec::with_capacity(ids.len());
    let mut i = 0;
    while i < ids.len() {
        let newest = overlays
            .iter()
            .rev()
            .find(|c| c.from_message_id == ids[i] && index.get(c.to_message_id.as_str()).is_some_and(|&to| to >= i));
        match newest {
            Some(c) => {
                out.push(Piece::Summary(c));
                i = index[c.to_message_id.as_str()] + 1;
            }
            None => {
                out.push(Piece::Message(i));
                i += 1;
            }
        }
    }
    out
}

/// The synthetic assistant message that shows an overlay in history. Its `createdAt` is the
/// overlay's, so repeated reads return identical JSON.
pub(crate) fn synthetic_message(c: &Compaction) -> Result<RawMessage> {
    let m = json!({
        "id": synthetic_id(&c.id),
        "role": "assistant",
        "parts": [{"type": "text", "text": c.summary}],
        "createdAt": c.created_at,
    });
    raw(m.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, from: &str, to: &str) -> Compaction {
        Compaction {
            id: id.into(),
            summary: format!("summary {id}"),
            from_message_id: from.into(),
            to_message_id: to.into(),
            created_at: "t".into(),
        }
    }

    fn show(ids: &[&str], cs: &[Compaction]) -> Vec<String> {
        overlay(ids, cs)
            .into_iter()
            .map(|p| match p {
                Piece::Message(i) => ids[i].to_string(),
                Piece::Summary(c) => format!("[{}]", c.id),
            })
            .collect()
    }

    #[test]
    fn replaces_a_run_and_newest_wins() {
        let ids = ["a", "b", "c", "d", "e"];
        assert_eq!(show(&ids, &[c("1", "b", "c")]), ["a", "[1]", "d", "e"]);
        assert_eq!(show(&ids, &[c("1", "b", "c"), c("2", "b", "d")]), ["a", "[2]", "e"]);
        assert_eq!(show(&ids, &[c("2", "b", "d"), c("1", "b", "c")]), ["a", "[1]", "d", "e"]);
    }

    #[test]
    fn ignores_overlays_off_the_path_or_backwards() {
        let ids = ["a", "b", "c"];
        assert_eq!(show(&ids, &[c("1", "b", "x")]), ["a", "b", "c"]);
        assert_eq!(show(&ids, &[c("1", "x", "c")]), ["a", "b", "c"]);
        assert_eq!(show(&ids, &[c("1", "c", "a")]), ["a", "b", "c"]);
        assert_eq!(show(&ids, &[c("1", "b", "b")]), ["a", "[1]", "c"]);
    }

    #[test]
    fn skips_overlays_starting_inside_an_applied_run() {
        let ids = ["a", "b", "c", "d"];
        assert_eq!(show(&ids, &[c("1", "a", "c"), c("2", "b", "d")]), ["[1]", "d"]);
    }
}
