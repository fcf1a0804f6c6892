//! A space's shared writable blocks: one text per label that every agent of the space reads and
//! writes (a team's notes, a user's profile). Each write counts a version; an append keeps what
//! was there (two agents appending at once both land: the space's Durable Object runs one write
//! at a time); a replace names the version it read and is refused (`409`) when another write
//! came first. The budget (`maxTokens`) is the writing agent's block's, sent with the write.

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::sql::{atomically, Row, Sql};
use crate::tokens::estimate_str;

/// Longest text of a shared block, in bytes.
pub const MAX_BLOCK_BYTES: usize = 256 * 1024;
/// Most shared blocks of one space.
pub const MAX_BLOCKS: i64 = 100;

/// A shared block as the space holds it. A label never written reads as version 0, empty.
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

/// A write to a shared block.
pub struct Write<'a> {
    pub content: &'a str,
    /// Who writes (an agent's name), if an agent.
    pub by: Option<&'a str>,
    /// The writing block's budget, if it has one.
    pub max_tokens: Option<i64>,
    /// The text a label never written starts from (the writing block's configured content).
    pub initial: Option<&'a str>,
}

fn from_row(label: &str, r: Option<Row>) -> Result<Shared> {
    match r {
        Some(r) => Ok(Shared {
            label: label.to_owned(),
            content: r.text(0)?,
            version: r.int(1)?,
            updated_at: Some(r.text(2)?),
            updated_by: r.opt_text(3)?,
        }),
        None => Ok(Shared {
            label: label.to_owned(),
            content: String::new(),
            version: 0,
            updated_at: None,
            updated_by: None,
        }),
    }
}

/// The block `label` (version 0 and empty when never written).
pub fn get(sql: &dyn Sql, label: &str) -> Result<Shared> {
    let row = sql.query_row(
        "SELECT content, version, updated_at, updated_by FROM space_blocks WHERE label = ?",
        &[label.into()],
    )?;
    from_row(label, row)
}

/// Every block written so far, by label.
pub fn list(sql: &dyn Sql) -> Result<Vec<Shared>> {
    sql.query("SELECT label, content, version, updated_at, updated_by FROM space_blocks ORDER BY label", &[])?
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
    if old.version == 0 {
        let n = sql.query_row("SELECT count(*) FROM space_blocks", &[])?.map(|r| r.int(0)).transpose()?.unwrap_or(0);
        if n >= MAX_BLOCKS {
            return Err(Error::new(ErrorKind::OverBudget, format!("a space holds at most {MAX_BLOCKS} shared blocks")));
        }
    }
    sql.execute(
        "INSERT INTO space_blocks (label, content, version, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (label) DO UPDATE SET content = excluded.content, version = excluded.version,
           updated_at = excluded.updated_at, updated_by = excluded.updated_by",
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
        let before = if old.version == 0 { w.initial.unwrap_or_default() } else { old.content.as_str() };
        let sep = if !before.is_empty() && !w.content.starts_with('\n') { "\n" } else { "" };
        let text = format!("{before}{sep}{}", w.content);
        check(label, &text, w.max_tokens)?;
        put(sql, &old, &text, w.by, now)
    })
}

/// Deletes `label`; whether it was there.
pub fn delete(sql: &dyn Sql, label: &str) -> Result<bool> {
    let there = sql.query_row("SELECT 1 FROM space_blocks WHERE label = ?", &[label.into()])?.is_some();
    sql.execute("DELETE FROM space_blocks WHERE label = ?", &[label.into()])?;
    Ok(there)
}
