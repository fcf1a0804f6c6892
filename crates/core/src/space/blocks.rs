//! A space's shared writable blocks: one text per label that every agent of the space reads and
//! writes (a team's notes, a user's profile). Each write counts a version; an append keeps what
//! was there (two agents appending at once both land: the space's Durable Object runs one write
//! at a time); a replace names the version it read and is refused (`409`) when another write
//! came first. The budget (`maxTokens`) is the writing agent's block's, sent with the write.
//!
//! A label's versions never repeat, so a version read before a delete is never taken for the
//! new text's: a delete counts a version too and keeps the label's row as a tombstone (no
//! text), from which the next write goes on. Tombstones are bounded ([`MAX_TOMBSTONES`]): the
//! oldest go, and the space's floor (the version a label without a row reads as) rises to the
//! highest version they held; an erase of the space raises it past the highest it gave (the
//! erase counts a version, as a delete does).

use serde::{Deserialize, Serialize};

use super::{request, unavailable, Operation, Spaces};
use crate::error::{Error, ErrorKind, Result};
use crate::sql::{atomically, Sql};
use crate::tokens::estimate_str;

/// Longest text of a shared block, in bytes.
pub const MAX_BLOCK_BYTES: usize = 256 * 1024;
/// Most shared blocks of one space (tombstones not counted).
pub const MAX_BLOCKS: i64 = 100;
/// Most tombstones (deleted labels' versions) a space keeps; past it the oldest go.
pub const MAX_TOMBSTONES: i64 = 1000;

/// A shared block as the space holds it. A label without text (never written, or deleted)
/// reads empty, `updatedAt` and `updatedBy` null, at its last version (a label never written:
/// the space's floor, 0 unless tombstones were dropped or the space erased).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shared {
    pub label: String,
    pub content: String,
    pub version: i64,
    pub updated_at: Option<String>,
    /// The agent that wrote it last (`null` for a write through the space's own API).
    pub updated_by: Option<String>,
}

impl Shared {
    /// Whether the label holds a text (a write that no delete followed).
    pub fn has_text(&self) -> bool {
        self.updated_at.is_some()
    }
}

/// A write to a shared block.
pub struct Write<'a> {
    pub content: &'a str,
    /// Who writes (an agent's name), if an agent.
    pub by: Option<&'a str>,
    /// The writing block's budget, if it has one.
    pub max_tokens: Option<i64>,
    /// The text a label without text (never written, or deleted) starts from (the writing
    /// block's configured content).
    pub initial: Option<&'a str>,
}

/// The version a label without a row reads as.
fn floor(sql: &dyn Sql) -> Result<i64> {
    sql.query_row("SELECT version FROM space_block_floor", &[])?.map_or(Ok(0), |r| r.int(0))
}

/// The floor raised to `version`, if below.
fn raise_floor(sql: &dyn Sql, version: i64) -> Result<()> {
    sql.execute(
        "INSERT INTO space_block_floor (id, version) VALUES (1, ?)
         ON CONFLICT (id) DO UPDATE SET version = max(version, excluded.version)",
        &[version.into()],
    )
}

/// The block `label` (no text, at the floor's version, when it has no row).
pub fn get(sql: &dyn Sql, label: &str) -> Result<Shared> {
    let row = sql.query_row(
        "SELECT content, version, updated_at, updated_by, deleted_at IS NULL FROM space_blocks WHERE label = ?",
        &[label.into()],
    )?;
    let version = match row {
        Some(r) if r.int(4)? != 0 => {
            return Ok(Shared {
                label: label.to_owned(),
                content: r.text(0)?,
                version: r.int(1)?,
                updated_at: Some(r.text(2)?),
                updated_by: r.opt_text(3)?,
            });
        }
        Some(tombstone) => tombstone.int(1)?,
        None => floor(sql)?,
    };
    Ok(Shared { label: label.to_owned(), content: String::new(), version, updated_at: None, updated_by: None })
}

/// Every block that holds a text, by label.
pub fn list(sql: &dyn Sql) -> Result<Vec<Shared>> {
    sql.query(
        "SELECT label, content, version, updated_at, updated_by FROM space_blocks WHERE deleted_at IS NULL ORDER BY label",
        &[],
    )?
        .into_iter()
        .map(|r| {
            Ok(Shared {
                label: r.text(0)?,
                content: r.text(1)?,
                version: r.int(2)?,
                updated_at: Some(r.text(3)?),
                updated_by: r.opt_text(4)?,
            })
        })
        .collect()
}

fn check(label: &str, content: &str, max_tokens: Option<i64>) -> Result<()> {
    if content.len() > MAX_BLOCK_BYTES {
        return Err(Error::too_large(format!("shared block \"{label}\" is over {MAX_BLOCK_BYTES} bytes")));
    }
    let tokens = estimate_str(content);
    if let Some(max) = max_tokens.filter(|&m| tokens > m) {
        return Err(Error::new(
            ErrorKind::OverBudget,
            format!("Block \"{label}\" exceeds maxTokens: {tokens} > {max}"),
        ));
    }
    Ok(())
}

fn put(sql: &dyn Sql, old: &Shared, content: &str, by: Option<&str>, now: &str) -> Result<Shared> {
    if !old.has_text() {
        let n = sql
            .query_row("SELECT count(*) FROM space_blocks WHERE deleted_at IS NULL", &[])?
            .map_or(Ok(0), |r| r.int(0))?;
        if n >= MAX_BLOCKS {
            return Err(Error::new(ErrorKind::OverBudget, format!("a space holds at most {MAX_BLOCKS} shared blocks")));
        }
    }
    sql.execute(
        "INSERT INTO space_blocks (label, content, version, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (label) DO UPDATE SET content = excluded.content, version = excluded.version,
           updated_at = excluded.updated_at, updated_by = excluded.updated_by, deleted_at = NULL",
        &[old.label.as_str().into(), content.into(), (old.version + 1).into(), now.into(), by.into()],
    )?;
    get(sql, &old.label)
}

/// Replaces the text of `label`, if its version is still `read` (else `409`, nothing written).
pub fn replace(sql: &dyn Sql, label: &str, read: i64, w: &Write<'_>, now: &str) -> Result<Shared> {
    check(label, w.content, w.max_tokens)?;
    atomically(sql, || {
        let old = get(sql, label)?;
        if old.version != read {
            return Err(Error::conflict(format!(
                "Block \"{label}\" changed since version {read}: it is at version {} now; read it again",
                old.version
            ))
            .with_code(super::VERSION_CONFLICT));
        }
        put(sql, &old, w.content, w.by, now)
    })
}

/// Appends to `label`: a newline goes between the old and new text unless the old text is empty
/// or the new one starts with one. The budget applies to the whole.
pub fn append(sql: &dyn Sql, label: &str, w: &Write<'_>, now: &str) -> Result<Shared> {
    atomically(sql, || {
        let old = get(sql, label)?;
        let before = if old.has_text() { old.content.as_str() } else { w.initial.unwrap_or_default() };
        let sep = if !before.is_empty() && !w.content.starts_with('\n') { "\n" } else { "" };
        let text = format!("{before}{sep}{}", w.content);
        check(label, &text, w.max_tokens)?;
        put(sql, &old, &text, w.by, now)
    })
}

/// Deletes the text of `label`; whether it had one. The delete counts a version, kept in the
/// label's row (a tombstone); past [`MAX_TOMBSTONES`] the oldest go, the floor raised to the
/// highest version among them.
pub fn delete(sql: &dyn Sql, label: &str, now: &str) -> Result<bool> {
    if !get(sql, label)?.has_text() {
        return Ok(false);
    }
    sql.execute(
        "UPDATE space_blocks SET content = '', version = version + 1, updated_by = NULL, deleted_at = ? WHERE label = ?",
        &[now.into(), label.into()],
    )?;
    let over = sql
        .query_row("SELECT count(*) - ? FROM space_blocks WHERE deleted_at IS NOT NULL", &[MAX_TOMBSTONES.into()])?
        .map_or(Ok(0), |r| r.int(0))?;
    if over > 0 {
        let oldest = sql.query(
            "SELECT label, version FROM space_blocks WHERE deleted_at IS NOT NULL ORDER BY deleted_at, label LIMIT ?",
            &[over.into()],
        )?;
        for r in &oldest {
            raise_floor(sql, r.int(1)?)?;
            sql.execute("DELETE FROM space_blocks WHERE label = ?", &[r.text(0)?.into()])?;
        }
    }
    Ok(true)
}

/// Before the space is erased: the floor raised past the highest version it gave (the erase
/// counts one, as a delete does), so no label reads or is written again at a version it had.
pub(crate) fn keep_floor(sql: &dyn Sql) -> Result<()> {
    match sql.query_row("SELECT max(version) FROM space_blocks HAVING count(*) > 0", &[])? {
        Some(r) => raise_floor(sql, r.int(0)? + 1),
        None => Ok(()),
    }
}

/// Sends a shared block's `op` ([`Operation::ReadBlock`], [`Operation::AppendBlock`],
/// [`Operation::ReplaceBlock`]) to an agent's `space`: the block as the space answered it.
pub async fn send(spaces: &dyn Spaces, space: &str, op: &Operation) -> Result<Shared> {
    serde_json::from_value(request(spaces, space, op).await?)
        .map_err(|e| unavailable(format!("space {space}: an answer that could not be read")).with_log(e.to_string()))
}
