//! Reading a path as the model sees it: the tree's messages with compaction overlays applied,
//! whole or as a byte-budgeted recent window.

use crate::error::Result;
use crate::sql::Sql;
use crate::store::estimate;
use crate::store::message::RawMessage;
use crate::store::overlay::{self, Piece};
use crate::store::spill;
use crate::store::tree::{PageEnd, PathRow, Tree};

/// Whether a path is read with its compaction overlays laid over it or as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlays {
    /// As the model sees it: each applied overlay's run is one synthetic summary message.
    Applied,
    /// The stored messages (`raw=1`).
    Raw,
}

/// The messages from the root to `leaf` (default: the latest leaf), with `overlays`. An empty
/// session has an empty history; an unknown `leaf` is `not_found`.
pub fn history(sql: &dyn Sql, session: &str, leaf: Option<&str>, overlays: Overlays) -> Result<Vec<RawMessage>> {
    Ok(history_walked(sql, session, leaf, overlays)?.0)
}

/// [`history`], and how many stored messages the walk of its path found (before overlays).
pub(crate) fn history_walked(
    sql: &dyn Sql,
    session: &str,
    leaf: Option<&str>,
    overlays: Overlays,
) -> Result<(Vec<RawMessage>, usize)> {
    let tree = Tree::new(sql, session);
    let Some(leaf) = tree.resolve_leaf(leaf)? else { return Ok((Vec::new(), 0)) };
    let path = tree.path(&leaf)?;
    Ok((render(sql, &tree, session, &path, overlays)?, path.len()))
}

/// The messages of the path to `leaf` (the latest leaf without one) as the text of a JSON
/// array, assembled by SQLite, when nothing has to be laid over the stored texts: the session
/// has no overlay (or `overlays` is raw) and no spilled field. `None` otherwise: use
/// [`history`]. The same messages in the same order as [`history`], byte for byte; with their
/// number.
pub fn history_json(
    sql: &dyn Sql,
    session: &str,
    leaf: Option<&str>,
    overlays: Overlays,
) -> Result<Option<(String, usize)>> {
    let tree = Tree::new(sql, session);
    let laid = overlays == Overlays::Applied && overlay::exists(sql, session)?;
    if laid || spill::any(sql, session)? {
        return Ok(None);
    }
    let Some(leaf) = tree.resolve_leaf(leaf)? else { return Ok(Some(("[]".to_owned(), 0))) };
    let (pieces, rows) = tree.path_json(&leaf)?;
    let mut out = String::with_capacity(pieces.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, p) in pieces.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(p);
    }
    out.push(']');
    Ok(Some((out, rows)))
}

/// One page of a path: at most `limit` messages ending at (or just before) a message, overlays
/// laid only where both their ends are in the page, and the cursor of the page before it.
pub struct Page {
    pub messages: Vec<RawMessage>,
    /// The oldest stored message of the page when older ones are left above it: pass it as
    /// `before` for the previous page. `None` at the root.
    pub next_before: Option<String>,
}

/// A page of at most `limit` messages of a path: the newest ones up to `leaf` (default: the
/// latest leaf), or the ones before `before` on its path. An unknown id is `not_found`; an
/// empty session has an empty page.
pub fn page(sql: &dyn Sql, session: &str, end: PageAt, limit: i64, overlays: Overlays) -> Result<Page> {
    let tree = Tree::new(sql, session);
    let end = match end {
        PageAt::Leaf(leaf) => match tree.resolve_leaf(leaf.as_deref())? {
            Some(id) => PageEnd::At(id),
            None => return Ok(Page { messages: Vec::new(), next_before: None }),
        },
        PageAt::Before(id) => {
            tree.resolve_leaf(Some(&id))?;
            PageEnd::Before(id)
        }
    };
    let (rows, more) = tree.page(&end, limit)?;
    let next_before = rows.first().filter(|_| more).map(|r| r.id.clone());
    let messages = render(sql, &tree, session, &rows, overlays)?;
    Ok(Page { messages, next_before })
}

/// Where a page asked for ends.
pub enum PageAt {
    /// At this leaf (`None`: the latest leaf), included.
    Leaf(Option<String>),
    /// Just before this message.
    Before(String),
}

/// Hydrates `path` and lays the session's overlays over it (only overlays whose both ends lie
/// inside `path` can apply).
fn render(sql: &dyn Sql, tree: &Tree, session: &str, path: &[PathRow], overlays: Overlays) -> Result<Vec<RawMessage>> {
    let overlays = match overlays {
        Overlays::Raw => Vec::new(),
        Overlays::Applied => overlay::list(sql, session)?,
    };
    if overlays.is_empty() {
        return tree.hydrate(path);
    }
    let ids: Vec<&str> = path.iter().map(|r| r.id.as_str()).collect();
    let pieces = overlay::overlay(&ids, &overlays);
    // Fetch only the messages that stay visible.
    let visible: Vec<PathRow> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Message(i) => Some(path[*i].clone()),
            Piece::Summary(_) => None,
        })
        .collect();
    let mut contents = tree.hydrate(&visible)?.into_iter();
    let mut out = Vec::with_capacity(pieces.len());
    for p in pieces {
        match p {
            Piece::Message(_) => out.extend(contents.next()),
            Piece::Summary(c) => out.push(overlay::synthetic_message(c)?),
        }
    }
    Ok(out)
}

/// A recent window of a path.
pub(crate) struct Recent {
    pub(crate) messages: Vec<RawMessage>,
    /// Whether older messages were left out.
    pub(crate) truncated: bool,
    /// Stored bytes of the whole path.
    pub(crate) total_content_bytes: i64,
    /// The oldest stored message of the window when older ones were left out: pass it as
    /// `before` for the window above it.
    pub(crate) next_before: Option<String>,
}

/// The longest suffix of a path whose stored size fits `max_bytes`, always holding its last
/// message and at least `min_messages` messages (both even past the budget). The path is the
/// active one, or with `before` (404 when unknown) the one that ends just above that message.
/// Overlays apply inside the window only.
pub(crate) fn recent(
    sql: &dyn Sql,
    session: &str,
    before: Option<&str>,
    max_bytes: i64,
    min_messages: i64,
) -> Result<Recent> {
    let tree = Tree::new(sql, session);
    let none = || Recent { messages: Vec::new(), truncated: false, total_content_bytes: 0, next_before: None };
    let end = match before {
        None => tree.latest_leaf_id()?,
        Some(id) => tree.parent_of(id)?,
    };
    let Some(end) = end else { return Ok(none()) };
    let walk = tree.window(&end, max_bytes, min_messages)?;
    let truncated = (walk.rows.len() as i64) < walk.count;
    let next_before = walk.rows.first().filter(|_| truncated).map(|r| r.id.clone());
    let messages = render(sql, &tree, session, &walk.rows, Overlays::Applied)?;
    Ok(Recent { messages, truncated, total_content_bytes: walk.bytes, next_before })
}

/// The token estimate of the path to `leaf` as the model sees it (overlays applied, by the reference heuristic,
/// docs/REFERENCE.md#branch-estimate): the cached sum when it is for this leaf, else counted from the path once and
/// cached.
pub fn branch_tokens(sql: &dyn Sql, session: &str, leaf: &str) -> Result<i64> {
    if let Some(t) = estimate::cached(sql, session, leaf)? {
        return Ok(t);
    }
    let tokens =
        history(sql, session, Some(leaf), Overlays::Applied)?.iter().map(|m| estimate::message_tokens(m.get())).sum();
    estimate::remember(sql, session, leaf, tokens)?;
    Ok(tokens)
}
