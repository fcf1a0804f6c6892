//! The entries of searchable context blocks (the reference's `AgentSearchProvider`, docs/REFERENCE.md#search-entries):
//! keyed texts in SQLite with an FTS5 index (and with embeddings a vector each), shared by all sessions of the agent
//! and partitioned by label.

use crate::error::{Error, Result};
use crate::query::compile;
use crate::rank::{rank, rowids, Index, Rows, Scope, Unmatched};
use crate::sql::{json_ids, Sql, Value};
use crate::vectors::fuse::{fuse, CANDIDATES};
use crate::vectors::index::Within;
use crate::vectors::{evidence, ItemKind, Meaning};

/// How many entries `search_context` returns.
pub(crate) const SEARCH_LIMIT: i64 = 10;

/// Creates or replaces the entry `key` of block `label`. The old text leaves the index in the
/// same transaction, so a replaced entry no longer matches its old words.
pub(crate) fn set(sql: &dyn Sql, label: &str, key: &str, content: &str, now: &str) -> Result<()> {
    let old = sql
        .query_row("SELECT seq FROM search_entries WHERE label = ? AND key = ?", &[label.into(), key.into()])?
        .map(|r| r.int(0))
        .transpose()?;
    let seq = match old {
        Some(seq) => {
            sql.execute("DELETE FROM search_entries_fts WHERE rowid = ?", &[Value::Int(seq)])?;
            sql.execute(
                "UPDATE search_entries SET content = ?, updated_at = ? WHERE seq = ?",
                &[content.into(), now.into(), Value::Int(seq)],
            )?;
            seq
        }
        None => sql
            .query_row(
                "INSERT INTO search_entries (label, key, created_at, updated_at, content)
                 VALUES (?, ?, ?, ?, ?) RETURNING seq",
                &[label.into(), key.into(), now.into(), now.into(), content.into()],
            )?
            .ok_or_else(|| Error::internal("INSERT returned no row"))?
            .int(0)?,
    };
    index(sql, seq, content)
}

/// Indexes the text of the entry `seq` (a new row, or one whose old text left the index).
pub(crate) fn index(sql: &dyn Sql, seq: i64, content: &str) -> Result<()> {
    sql.execute("INSERT INTO search_entries_fts (rowid, content) VALUES (?, ?)", &[Value::Int(seq), content.into()])
}

/// How many entries block `label` holds.
pub(crate) fn count(sql: &dyn Sql, label: &str) -> Result<i64> {
    Ok(sql
        .query_row("SELECT count(*) FROM search_entries WHERE label = ?", &[label.into()])?
        .map(|r| r.int(0))
        .transpose()?
        .unwrap_or(0))
}

/// The block's content in the prompt: `N entries indexed.`, or empty when there are none.
pub(crate) fn summary(sql: &dyn Sql, label: &str) -> Result<String> {
    let n = count(sql, label)?;
    Ok(if n == 0 { String::new() } else { format!("{n} entries indexed.") })
}

/// The entry index: one column, ranked as `bm25(search_entries_fts)`.
const ENTRIES: Index = Index { fts: "search_entries_fts", column: None, weights: "1.0", weight: 1.0 };

/// The best [`SEARCH_LIMIT`] entries of `label` for `query` (a plain-language query, as message
/// search takes; with embeddings, the entries nearest by meaning too, fused by rank as message
/// search fuses them; with a re-ranker, re-ordered by it), as `[key]\ncontent` joined by a blank
/// line; `None` when nothing matches.
pub(crate) async fn search(meaning: &Meaning<'_>, label: &str, query: &str) -> Result<Option<String>> {
    let sql = meaning.sql;
    let Some(words) = compile(query) else { return Ok(None) };
    let params = [Value::from(label)];
    let rows = Rows { join: "CROSS JOIN search_entries e ON e.seq = f.rowid", cond: "e.label = ?", params: &params };
    let scope = Scope { words: None, rows: Some(rows) };
    // With meaning, more of the words' candidates than the hits: meaning may move one up.
    let wide = if meaning.is_on() { CANDIDATES.max(SEARCH_LIMIT as usize) } else { SEARCH_LIMIT as usize };
    let ranked = rank(sql, &ENTRIES, &scope, &words, Unmatched::Nothing, wide)?;
    let mut found: Vec<(i64, String, String)> = Vec::with_capacity(ranked.len());
    if !ranked.is_empty() {
        for r in sql.query(
            "SELECT e.seq, e.key, e.content FROM json_each(?) j JOIN search_entries e ON e.seq = j.value ORDER BY j.key",
            &[rowids(&ranked).into()],
        )? {
            found.push((r.int(0)?, r.text(1)?, r.text(2)?));
        }
    }
    if meaning.is_on() {
        match meaning.query(query.trim()).await {
            Ok(v) => found = with_meaning(meaning, label, &v, found)?,
            Err(e) => meaning.events.warn(&format!("search_context by meaning: {} (by words only)", e.message)),
        }
        found.truncate(SEARCH_LIMIT as usize);
    }
    let reranked = meaning.reranked(query, found, |e| &e.2).await;
    reranked.warnings.iter().for_each(|w| meaning.events.warn(w));
    let found = reranked.value;
    if found.is_empty() {
        return Ok(None);
    }
    let found: Vec<String> = found.iter().map(|(_, key, content)| format!("[{key}]\n{content}")).collect();
    Ok(Some(found.join("\n\n")))
}

/// The full-text hits `lexical` (seq, key, content) fused with the entries of `label` nearest
/// to `v`.
fn with_meaning(
    meaning: &Meaning<'_>,
    label: &str,
    v: &[f32],
    lexical: Vec<(i64, String, String)>,
) -> Result<Vec<(i64, String, String)>> {
    let n = SEARCH_LIMIT as usize;
    let scale = meaning.scale(ItemKind::Entry)?;
    let near = meaning.nearest(ItemKind::Entry, v, Within::Scopes(&[label]), CANDIDATES.max(n), scale.support())?;
    let near = evidence(near, &lexical.iter().map(|e| e.0).collect::<Vec<_>>(), &scale);
    let ids = json_ids(near.iter().map(|(seq, _)| *seq));
    let rows = meaning.sql.query(
        "SELECT e.seq, e.key, e.content FROM json_each(?) j CROSS JOIN search_entries e ON e.seq = j.value
          WHERE e.label = ? ORDER BY j.key",
        &[ids.into(), label.into()],
    )?;
    let semantic = rows.iter().map(|r| Ok((r.int(0)?, r.text(1)?, r.text(2)?))).collect::<Result<Vec<_>>>()?;
    let seqs = |l: &[(i64, String, String)]| l.iter().map(|e| e.0).collect::<Vec<_>>();
    let order = fuse(&seqs(&lexical), &seqs(&semantic), n);
    let mut all = lexical;
    all.extend(semantic);
    Ok(order.into_iter().filter_map(|seq| all.iter().position(|e| e.0 == seq).map(|i| all.swap_remove(i))).collect())
}

/// One entry of a searchable block, as the API shows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub(crate) key: String,
    pub(crate) content: String,
    pub(crate) created_at: String,
    pub updated_at: String,
}

/// Largest page of entries.
pub const MAX_PAGE: i64 = 100;

fn entry(r: &crate::sql::Row) -> Result<Entry> {
    Ok(Entry { key: r.text(0)?, content: r.text(1)?, created_at: r.text(2)?, updated_at: r.text(3)? })
}

/// A page of block `label`'s entries in insertion order, and the cursor of the next page.
pub(crate) fn list(
    sql: &dyn Sql,
    label: &str,
    limit: i64,
    cursor: Option<&str>,
) -> Result<(Vec<Entry>, Option<String>)> {
    let after = match cursor {
        None => 0,
        Some(c) => c.parse::<i64>().map_err(|_| Error::invalid("cursor is not one this API gave out"))?,
    };
    let rows = sql.query(
        "SELECT key, content, created_at, updated_at, seq FROM search_entries WHERE label = ? AND seq > ?
          ORDER BY seq LIMIT ?",
        &[label.into(), Value::Int(after), Value::Int(limit + 1)],
    )?;
    let more = rows.len() as i64 > limit;
    let rows = &rows[..rows.len().min(limit as usize)];
    let next = if more { rows.last().map(|r| r.int(4)).transpose()?.map(|s| s.to_string()) } else { None };
    Ok((rows.iter().map(entry).collect::<Result<_>>()?, next))
}

/// Entry `key` of block `label`, if there is one.
pub(crate) fn get(sql: &dyn Sql, label: &str, key: &str) -> Result<Option<Entry>> {
    sql.query_row(
        "SELECT key, content, created_at, updated_at FROM search_entries WHERE label = ? AND key = ?",
        &[label.into(), key.into()],
    )?
    .map(|r| entry(&r))
    .transpose()
}

/// Deletes entry `key` of block `label` and its index row; `false` when there was none.
pub(crate) fn delete(sql: &dyn Sql, label: &str, key: &str) -> Result<bool> {
    let Some(seq) = sql
        .query_row("SELECT seq FROM search_entries WHERE label = ? AND key = ?", &[label.into(), key.into()])?
        .map(|r| r.int(0))
        .transpose()?
    else {
        return Ok(false);
    };
    sql.execute("DELETE FROM search_entries_fts WHERE rowid = ?", &[Value::Int(seq)])?;
    sql.execute("DELETE FROM search_entries WHERE seq = ?", &[Value::Int(seq)])?;
    Ok(true)
}
