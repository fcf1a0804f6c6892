//! The message tree of one session: append, paths, branches, updates, deletes, and the latest
//! leaf. Messages are rows linked by `parent_id`; the JSON of each is stored verbatim.

use crate::error::{Error, Result};
use crate::sort;
use crate::sql::{Sql, Value};
use crate::store::estimate;
use crate::store::message::{raw, NewMessage, RawMessage};
use crate::store::search;
use crate::store::spill;

/// Most rows a path walk returns: the reference's recursion guard (`depth < 10000`, docs/REFERENCE.md#paths). A deeper
/// path yields its newest 10,001 messages (the ones nearest the leaf).
pub const MAX_PATH_ROWS: i64 = 10_001;

/// History content is fetched in chunks of at most this many rows …
pub(crate) const CHUNK_ROWS: usize = 50;
/// … and at most this many bytes (a chunk always holds at least one row).
pub(crate) const CHUNK_BYTES: i64 = 4 * 1024 * 1024;

/// Most bytes of one piece of [`Tree::path_json`] (a single larger message is a piece of its
/// own; messages are at most 1.8 MB, larger fields are spilled): under 2 MB, the Durable
/// Object's limit for a string.
pub(crate) const JSON_PIECE_BYTES: i64 = 1024 * 1024;

/// A bound past every seq and depth: the largest integer a Workers runtime binds as an
/// INTEGER (it hands larger ones to SQLite as REALs, which `LIMIT` refuses).
const UNBOUNDED: i64 = (1 << 53) - 1;

/// Where a page of a path ends (see [`Tree::page`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PageEnd {
    /// At this message, which is in the page.
    At(String),
    /// Just before this message: the page is its ancestors.
    Before(String),
}

/// Where an appended message attaches.
#[derive(Clone, Debug, PartialEq)]
pub enum Parent {
    /// Child of the latest leaf (a root when the session is empty).
    Latest,
    /// A new root.
    Root,
    /// Child of this message, which must exist in the session.
    Id(String),
}

/// What an append did.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Appended {
    pub(crate) parent_id: Option<String>,
    /// `false` when the id already existed: nothing was changed.
    pub(crate) inserted: bool,
}

/// One message on a path, without its content.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PathRow {
    pub(crate) seq: i64,
    pub(crate) id: String,
    pub(crate) role: String,
    /// UTF-8 bytes of the stored JSON.
    pub(crate) bytes: i64,
}

/// What a walk up a path found.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Walk {
    /// The rows asked for, root side first.
    pub(crate) rows: Vec<PathRow>,
    /// How many messages the walk went through, and their stored bytes.
    pub(crate) count: i64,
    pub(crate) bytes: i64,
}

/// Which rows of a walk come back.
enum Keep {
    /// Those at least this many steps above where it starts.
    From(i64),
    /// The recent window (see [`Tree::window`]).
    Window { max_bytes: i64, min_messages: i64 },
}

/// The sessions holding a message `id`, oldest first (ids are unique per session only, so
/// there may be several). One scan of the messages: for the rare call that knows a message but
/// not its session (an OpenAI response id).
pub fn sessions_of(sql: &dyn Sql, id: &str) -> Result<Vec<String>> {
    let rows = sql.query("SELECT session_id FROM messages WHERE id = ? ORDER BY seq", &[id.into()])?;
    rows.iter().map(|r| r.text(0)).collect()
}

/// The tree of one session.
pub struct Tree<'a> {
    sql: &'a dyn Sql,
    session: &'a str,
}

impl<'a> Tree<'a> {
    pub fn new(sql: &'a dyn Sql, session: &'a str) -> Self {
        Tree { sql, session }
    }

    fn sid(&self) -> Value {
        self.session.into()
    }

    /// The latest leaf: the newest row of the session. A child is always inserted after its
    /// parent, so the newest row never has children; this is one index probe, cold or warm.
    pub fn latest_leaf_id(&self) -> Result<Option<String>> {
        self.sql
            .query_row("SELECT id FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1", &[self.sid()])?
            .map(|r| r.text(0))
            .transpose()
    }

    /// The insertion sequence number of `id`, if it is in this session.
    pub(crate) fn seq_of(&self, id: &str) -> Result<Option<i64>> {
        self.sql
            .query_row("SELECT seq FROM messages WHERE session_id = ? AND id = ?", &[self.sid(), id.into()])?
            .map(|r| r.int(0))
            .transpose()
    }

    /// Whether `id` is a message of this session.
    pub fn contains(&self, id: &str) -> Result<bool> {
        Ok(self.seq_of(id)?.is_some())
    }

    /// `leaf` if given (404 when it is not in the session), else the latest leaf (None when the
    /// session is empty).
    pub fn resolve_leaf(&self, leaf: Option<&str>) -> Result<Option<String>> {
        match leaf {
            Some(id) if !self.contains(id)? => {
                Err(Error::not_found(format!("message {id} not found in session {}", self.session)))
            }
            Some(id) => Ok(Some(id.to_owned())),
            None => self.latest_leaf_id(),
        }
    }

    /// One message, as stored.
    pub fn get(&self, id: &str) -> Result<Option<RawMessage>> {
        self.sql
            .query_row("SELECT content FROM messages WHERE session_id = ? AND id = ?", &[self.sid(), id.into()])?
            .map(|r| raw(r.text(0)?))
            .transpose()
    }

    /// Appends `msg`. An explicit parent that is not in this session is `not_found`, checked
    /// first so a retried append with a wrong parent fails the same way every time. The same id
    /// again is then a no-op (`inserted: false`, first write wins). Run inside a transaction:
    /// the row and its index entry are two writes.
    pub(crate) fn append(&self, msg: &NewMessage, parent: &Parent, now: &str) -> Result<Appended> {
        self.check_parent(parent)?;
        if self.contains(&msg.id)? {
            return Ok(Appended { parent_id: self.parent_of(&msg.id)?, inserted: false });
        }
        let parent_id = self.parent_id(parent)?;
        self.insert(msg, parent_id.as_deref(), now)?;
        estimate::note_append(self.sql, self.session, parent_id.as_deref(), &msg.id, &msg.json)?;
        Ok(Appended { parent_id, inserted: true })
    }

    /// The id a message attached at `parent` gets as its parent (`None`: a root).
    pub(crate) fn parent_id(&self, parent: &Parent) -> Result<Option<String>> {
        Ok(match parent {
            Parent::Latest => self.latest_leaf_id()?,
            Parent::Root => None,
            Parent::Id(id) => Some(id.clone()),
        })
    }

    /// The parent of `id` (404 when `id` is not in the session), `None` for a root.
    pub(crate) fn parent_of(&self, id: &str) -> Result<Option<String>> {
        self.sql
            .query_row("SELECT parent_id FROM messages WHERE session_id = ? AND id = ?", &[self.sid(), id.into()])?
            .ok_or_else(|| Error::not_found(format!("message {id} not found in session {}", self.session)))?
            .opt_text(0)
    }

    /// `not_found` when `parent` names a message that is not in this session.
    pub(crate) fn check_parent(&self, parent: &Parent) -> Result<()> {
        match parent {
            Parent::Id(id) if !self.contains(id)? => {
                Err(Error::not_found(format!("parent message {id} not found in session {}", self.session)))
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn insert(&self, msg: &NewMessage, parent_id: Option<&str>, now: &str) -> Result<i64> {
        msg.check_fits()?;
        let seq = self
            .sql
            .query_row(
                "INSERT INTO messages (session_id, id, parent_id, parent_seq, role, bytes, created_at, content)
                 VALUES (?1, ?2, ?3, (SELECT seq FROM messages WHERE session_id = ?1 AND id = ?3), ?4, ?5, ?6, ?7)
                 RETURNING seq",
                &[
                    self.sid(),
                    msg.id.as_str().into(),
                    parent_id.into(),
                    msg.role.as_str().into(),
                    Value::Int(msg.json.len() as i64),
                    now.into(),
                    msg.json.as_str().into(),
                ],
            )?
            .ok_or_else(|| Error::internal("INSERT returned no row"))?
            .int(0)?;
        search::index(self.sql, self.session, seq, &msg.text)?;
        spill::record(self.sql, self.session, seq, &msg.spills)?;
        Ok(seq)
    }

    /// The path from the root to `leaf` (which must exist), root first. The walk stops at a
    /// missing parent, so a deleted interior message cuts the path there.
    pub(crate) fn path(&self, leaf: &str) -> Result<Vec<PathRow>> {
        Ok(self.walk(leaf, MAX_PATH_ROWS, Keep::From(0))?.rows)
    }

    /// How many messages the path to `leaf` holds (as `Tree::path` walks it): the same walk,
    /// keeping no row.
    pub fn path_len(&self, leaf: &str) -> Result<i64> {
        Ok(self.walk(leaf, MAX_PATH_ROWS, Keep::From(UNBOUNDED))?.count)
    }

    /// The recent window of the path to `leaf` (as [`Tree::path`] walks it): its longest suffix
    /// whose stored size fits `max_bytes`, always holding the leaf and at least `min_messages`
    /// messages (both even past the budget; docs/REFERENCE.md#recent-history). One walk also
    /// counts the whole path's messages and bytes, and only the window's rows cross into the
    /// wasm.
    pub(crate) fn window(&self, leaf: &str, max_bytes: i64, min_messages: i64) -> Result<Walk> {
        self.walk(leaf, MAX_PATH_ROWS, Keep::Window { max_bytes, min_messages: min_messages.max(1) })
    }

    /// At most `limit` messages of the path that ends at `end`, root side first: the ones
    /// nearest `end` (it included when `end` is [`PageEnd::At`], only its ancestors when it is
    /// [`PageEnd::Before`]), and whether older messages are left above them. The walk stops
    /// after `limit + 1` rows, so a page costs the same on a path of any length.
    pub(crate) fn page(&self, end: &PageEnd, limit: i64) -> Result<(Vec<PathRow>, bool)> {
        let (id, skip) = match end {
            PageEnd::At(id) => (id, 0),
            PageEnd::Before(id) => (id, 1),
        };
        let mut page = self.walk(id, limit + skip + 1, Keep::From(skip))?.rows;
        let more = page.len() as i64 > limit;
        if more {
            page.remove(0);
        }
        Ok((page, more))
    }

    /// The walk up from `from` through the parents, at most `depth` steps (`from` itself is
    /// step 0): the rows `keep` says, root side first, and the count and bytes of all of them.
    /// Each step is a primary-key lookup (`parent_seq`), and SQLite hands the rows over as one
    /// JSON text: one string crosses into the wasm instead of four values per message. They are
    /// put in order here rather than by SQLite, which costs more: they come leaf first, as the
    /// walk finds them, so the sort is one pass over one run.
    fn walk(&self, from: &str, depth: i64, keep: Keep) -> Result<Walk> {
        // A row is kept when it is at least `skip` steps up and, in a window, within the first
        // `min` steps or the first `max` bytes (counted from `from`, which is always kept).
        let (skip, min, max) = match keep {
            Keep::From(skip) => (skip, UNBOUNDED, 0),
            Keep::Window { max_bytes, min_messages } => (0, min_messages, max_bytes),
        };
        let walk = self.sql.query_row(
            "WITH RECURSIVE path (seq, parent_seq, id, role, bytes, depth, used) AS (
               SELECT seq, parent_seq, id, role, bytes, 0, bytes FROM messages
                WHERE session_id = ? AND id = ?
               UNION ALL
               SELECT m.seq, m.parent_seq, m.id, m.role, m.bytes, p.depth + 1, p.used + m.bytes
                 FROM path p JOIN messages m ON m.seq = p.parent_seq
                WHERE p.depth + 1 < ?
             )
             SELECT count(*), COALESCE(sum(bytes), 0),
                    json_group_array(json_array(depth, seq, id, role, bytes))
                      FILTER (WHERE depth >= ? AND (depth < ? OR used <= ?))
               FROM path",
            &[self.sid(), from.into(), Value::Int(depth), Value::Int(skip), Value::Int(min), Value::Int(max)],
        )?;
        let Some(walk) = walk else { return Ok(Walk::default()) };
        let mut rows: Vec<(i64, i64, String, String, i64)> =
            serde_json::from_str(&walk.text(2)?).map_err(|e| Error::internal(format!("path walk: {e}")))?;
        sort::by_key(&mut rows, |r| std::cmp::Reverse(r.0));
        let rows = rows.into_iter().map(|(_, seq, id, role, bytes)| PathRow { seq, id, role, bytes }).collect();
        Ok(Walk { rows, count: walk.int(0)?, bytes: walk.int(1)? })
    }

    /// The stored JSON of the messages on the path to `leaf` (root first, at most
    /// [`MAX_PATH_ROWS`], as `Tree::path` walks it), joined with commas in pieces of at most
    /// `JSON_PIECE_BYTES` (or one message): after the walk, SQLite concatenates the texts of
    /// each piece, so a few strings cross from the database instead of one per message.
    /// Reading the contents by primary key in the walk's order is what keeps it cheap: SQLite
    /// sorting the contents themselves cost twice as much. With the number of messages walked.
    pub fn path_json(&self, leaf: &str) -> Result<(Vec<String>, usize)> {
        let rows = self.path(leaf)?;
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < rows.len() {
            let mut end = start + 1;
            let mut bytes = rows[start].bytes;
            while end < rows.len() && bytes + rows[end].bytes < JSON_PIECE_BYTES {
                bytes += rows[end].bytes + 1;
                end += 1;
            }
            let seqs: Vec<i64> = rows[start..end].iter().map(|r| r.seq).collect();
            let seqs = serde_json::to_string(&seqs).map_err(|e| Error::internal(e.to_string()))?;
            // CROSS JOIN keeps json_each as the outer loop: the texts come in the walk's order.
            let piece = self.sql.query_row(
                "SELECT group_concat(m.content, ',') FROM json_each(?) j CROSS JOIN messages m ON m.seq = j.value",
                &[seqs.into()],
            )?;
            // A message deleted between the walk and the read is left out, as in `hydrate`.
            if let Some(text) = piece.map(|r| r.opt_text(0)).transpose()?.flatten() {
                pieces.push(text);
            }
            start = end;
        }
        Ok((pieces, rows.len()))
    }

    /// The contents of `rows`, in their order, fetched in chunks of at most [`CHUNK_ROWS`] rows
    /// and [`CHUNK_BYTES`] bytes so that no single query result grows without bound.
    pub(crate) fn hydrate(&self, rows: &[PathRow]) -> Result<Vec<RawMessage>> {
        let mut out = Vec::with_capacity(rows.len());
        for chunk in chunks(rows) {
            let seqs: Vec<i64> = chunk.iter().map(|r| r.seq).collect();
            let ids = serde_json::to_string(&seqs).map_err(|e| Error::internal(e.to_string()))?;
            let fetched = self.sql.query(
                "SELECT seq, content FROM messages WHERE seq IN (SELECT value FROM json_each(?))",
                &[ids.into()],
            )?;
            let mut by_seq = std::collections::HashMap::with_capacity(fetched.len());
            for row in fetched {
                by_seq.insert(row.int(0)?, row.text(1)?);
            }
            for r in chunk {
                // A row deleted between the walk and the fetch is simply left out.
                if let Some(content) = by_seq.remove(&r.seq) {
                    out.push(raw(content)?);
                }
            }
        }
        Ok(out)
    }

    /// At most `limit` children of `id` (all without one), oldest first: the newest ones, or
    /// with `before` (a child of `id`, else 404) the newest ones older than it; and the oldest
    /// child of the page when older ones remain (the `before` of the page above). The index on
    /// `(session_id, parent_id)` holds each parent's children in `seq` order, so a page costs
    /// the same however many children there are.
    pub fn children(
        &self,
        id: &str,
        before: Option<&str>,
        limit: Option<i64>,
    ) -> Result<(Vec<RawMessage>, Option<String>)> {
        if !self.contains(id)? {
            return Err(Error::not_found(format!("message {id} not found in session {}", self.session)));
        }
        // Bounds when absent: past every seq, and -1 (no limit).
        let below = match before {
            None => Value::Int(UNBOUNDED),
            Some(b) => self
                .sql
                .query_row(
                    "SELECT seq FROM messages WHERE session_id = ? AND id = ? AND parent_id = ?",
                    &[self.sid(), b.into(), id.into()],
                )?
                .map(|r| r.int(0))
                .transpose()?
                .map(Value::Int)
                .ok_or_else(|| Error::not_found(format!("message {b} is not a child of {id}")))?,
        };
        let rows = self.sql.query(
            "SELECT id, content FROM messages WHERE session_id = ? AND parent_id = ? AND seq < ?
              ORDER BY seq DESC LIMIT ?",
            &[self.sid(), id.into(), below, Value::Int(limit.map_or(-1, |l| l + 1))],
        )?;
        let more = limit.is_some_and(|l| rows.len() as i64 > l);
        let mut page = rows.into_iter().take(limit.map_or(usize::MAX, |l| l as usize)).collect::<Vec<_>>();
        page.reverse();
        let next_before = if more { page.first().map(|r| r.text(0)).transpose()? } else { None };
        let messages = page.into_iter().map(|r| raw(r.text(1)?)).collect::<Result<Vec<_>>>()?;
        Ok((messages, next_before))
    }

    /// Replaces the stored JSON (and role) of an existing message and re-indexes it. Its place
    /// in the tree does not change. Returns `false` when the id is unknown (nothing changes).
    pub(crate) fn update(&self, msg: &NewMessage) -> Result<bool> {
        msg.check_fits()?;
        let Some(seq) = self.seq_of(&msg.id)? else { return Ok(false) };
        estimate::invalidate(self.sql, self.session)?;
        // The old version's spilled objects become garbage (trigger), the new one's are recorded.
        self.sql.execute("DELETE FROM spills WHERE message_seq = ?", &[Value::Int(seq)])?;
        spill::record(self.sql, self.session, seq, &msg.spills)?;
        self.sql.execute(
            "UPDATE messages SET role = ?, bytes = ?, content = ? WHERE seq = ?",
            &[msg.role.as_str().into(), Value::Int(msg.json.len() as i64), msg.json.as_str().into(), Value::Int(seq)],
        )?;
        self.sql.execute("DELETE FROM messages_fts WHERE rowid = ?", &[Value::Int(seq)])?;
        search::index(self.sql, self.session, seq, &msg.text)?;
        Ok(true)
    }

    /// Deletes one message and its index entry. Its children stay, orphaned (as the reference,
    /// docs/REFERENCE.md#message-writes; see docs/REFERENCE.md#d-orphans for what differs): paths through them now
    /// start at the child. The orphans become roots, so a message later appended under the deleted id does not adopt
    /// them (a child always stays newer than its parent). Returns `false` when the id is unknown.
    pub(crate) fn delete(&self, id: &str) -> Result<bool> {
        let Some(seq) = self.seq_of(id)? else { return Ok(false) };
        estimate::invalidate(self.sql, self.session)?;
        self.sql.execute("DELETE FROM messages_fts WHERE rowid = ?", &[Value::Int(seq)])?;
        self.sql.execute("DELETE FROM messages WHERE seq = ?", &[Value::Int(seq)])?;
        self.sql.execute(
            "UPDATE messages SET parent_id = NULL, parent_seq = NULL WHERE session_id = ? AND parent_id = ?",
            &[self.sid(), id.into()],
        )?;
        Ok(true)
    }

    /// Deletes every message of the session, its index entries and its compactions.
    pub(crate) fn clear(&self) -> Result<()> {
        estimate::invalidate(self.sql, self.session)?;
        self.sql.execute(
            "DELETE FROM messages_fts WHERE rowid IN (SELECT seq FROM messages WHERE session_id = ?)",
            &[self.sid()],
        )?;
        self.sql.execute("DELETE FROM messages WHERE session_id = ?", &[self.sid()])?;
        self.sql.execute("DELETE FROM compactions WHERE session_id = ?", &[self.sid()])
    }
}

/// Splits `rows` into content-fetch chunks: a new chunk starts when the current one is
/// non-empty and holds [`CHUNK_ROWS`] rows or would pass [`CHUNK_BYTES`] with the next row.
pub(crate) fn chunks(rows: &[PathRow]) -> Vec<&[PathRow]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0i64);
    for (i, r) in rows.iter().enumerate() {
        let n = i - start;
        if n > 0 && (n >= CHUNK_ROWS || bytes + r.bytes > CHUNK_BYTES) {
            out.push(&rows[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += r.bytes;
    }
    if start < rows.len() {
        out.push(&rows[start..]);
    }
    out
}
