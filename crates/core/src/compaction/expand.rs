//! Reading the original messages behind a compaction summary, page by page: compaction never
//! deletes anything, and this is how the model (tool `expand_compaction`) and clients (route
//! `GET /sessions/{sid}/compactions/{cid}/messages`) get the details a summary left out.

use crate::compaction::plan::render_message;
use crate::compaction::truncate::{truncate_older_messages, TruncateOptions};
use crate::error::{Error, Result};
use crate::sql::Sql;
use crate::store::message::{parse_all, RawMessage};
use crate::store::overlay::{self, Compaction, Piece};
use crate::store::tree::Tree;

/// Messages per page when the caller does not say.
pub const DEFAULT_LIMIT: usize = 20;
/// The most messages one page may hold.
pub const MAX_LIMIT: usize = 100;

/// One page of the messages an overlay stands for.
pub struct Page {
    pub compaction: Compaction,
    /// How many messages the overlay covers (`from..=to` on the path to `to`).
    pub total: usize,
    pub offset: usize,
    /// The stored messages, whole.
    pub messages: Vec<RawMessage>,
}

impl Page {
    /// Where the next page starts, if there is one.
    pub fn next_offset(&self) -> Option<usize> {
        let end = self.offset + self.messages.len();
        (end < self.total).then_some(end)
    }
}

/// The overlay `id` of the session (its own id, or its synthetic message's `compaction_<id>`),
/// `not_found` if there is none.
pub fn find(sql: &dyn Sql, session: &str, id: &str) -> Result<Compaction> {
    let id = overlay::overlay_id(id);
    overlay::list(sql, session)?
        .into_iter()
        .find(|c| c.id == id)
        .ok_or_else(|| Error::not_found(format!("compaction {id} not found in session {session}")))
}

/// The overlay that history shows last on the latest leaf's path (the newest summary the model
/// sees), if any.
pub(crate) fn latest_visible(sql: &dyn Sql, session: &str) -> Result<Option<Compaction>> {
    let tree = Tree::new(sql, session);
    let Some(leaf) = tree.latest_leaf_id()? else { return Ok(None) };
    let path = tree.path(&leaf)?;
    let ids: Vec<&str> = path.iter().map(|r| r.id.as_str()).collect();
    let overlays = overlay::list(sql, session)?;
    let last = overlay::overlay(&ids, &overlays).into_iter().rev().find_map(|p| match p {
        Piece::Summary(c) => Some(c.clone()),
        Piece::Message(_) => None,
    });
    Ok(last)
}

/// Messages `offset..offset+limit` of those `c` covers: the path to its `to` message, from its
/// `from` message on. If a covered message was deleted since, the walk stops at the hole and
/// the page holds what is still reachable (a `conflict` when `from` is no longer reachable).
pub fn page(sql: &dyn Sql, session: &str, c: Compaction, offset: usize, limit: usize) -> Result<Page> {
    let tree = Tree::new(sql, session);
    if !tree.contains(&c.to_message_id)? {
        return Err(Error::conflict(format!("message {} of compaction {} was deleted", c.to_message_id, c.id)));
    }
    let path = tree.path(&c.to_message_id)?;
    let Some(start) = path.iter().position(|r| r.id == c.from_message_id) else {
        return Err(Error::conflict(format!(
            "message {} of compaction {} is no longer on the path to {}",
            c.from_message_id, c.id, c.to_message_id
        )));
    };
    let covered = &path[start..];
    let from = offset.min(covered.len());
    let to = offset.saturating_add(limit).min(covered.len());
    let messages = tree.hydrate(&covered[from..to])?;
    Ok(Page { compaction: c, total: covered.len(), offset, messages })
}

/// The page as the model reads it: a header, each message as `[role]` + its text and tool calls
/// (long texts and tool outputs cut as read-time truncation cuts them), and how to go on.
pub(crate) fn render_for_model(p: &Page) -> Result<String> {
    if p.messages.is_empty() {
        return Ok(format!(
            "No messages at offset {} of compaction {} ({} messages in all).",
            p.offset, p.compaction.id, p.total
        ));
    }
    let parsed = parse_all(&p.messages)?;
    let cut = truncate_older_messages(parsed, &TruncateOptions { keep_recent: 0, ..TruncateOptions::default() });
    let body = cut.iter().map(render_message).collect::<Vec<_>>().join("\n\n---\n\n");
    let first = p.offset + 1;
    let last = p.offset + p.messages.len();
    let mut out =
        format!("Original messages {first}-{last} of {} behind compaction {}:\n\n{body}", p.total, p.compaction.id);
    if let Some(next) = p.next_offset() {
        out.push_str(&format!("\n\n({} more: call expand_compaction with offset {next}.)", p.total - next));
    }
    Ok(out)
}
