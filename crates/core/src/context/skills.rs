//! Skills: the prompt listing of a skills block, and which skills a session has loaded. The load state lives in SQLite
//! (the reference keeps it in memory and rebuilds it from history, docs/REFERENCE.md#d-skill-state), and unloading
//! rewrites the stored `load_context` output so the context is really reclaimed.

use serde_json::Value as Json;

use crate::blobs::BlobInfo;
use crate::error::Result;
use crate::parts::{str_field, Part, ToolState};
use crate::sql::{Sql, Value};
use crate::store::message::NewMessage;
use crate::store::tree::Tree;

/// The prompt listing: `- key: description` (or `- key`) per object, in key order, with the
/// block's key prefix removed; empty when there are none.
pub(crate) fn listing(objects: &[BlobInfo], prefix: &str) -> String {
    objects
        .iter()
        .filter_map(|o| {
            let key = o.key.strip_prefix(prefix)?;
            Some(match o.description.as_deref().filter(|d| !d.is_empty()) {
                Some(d) => format!("- {key}: {d}"),
                None => format!("- {key}"),
            })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Records that `session` loaded `label:key` (a second load keeps the first position).
pub(crate) fn mark_loaded(sql: &dyn Sql, session: &str, label: &str, key: &str) -> Result<()> {
    sql.execute(
        "INSERT OR IGNORE INTO loaded_skills (session_id, label, key) VALUES (?, ?, ?)",
        &[session.into(), label.into(), key.into()],
    )
}

/// Forgets `label:key` for `session`; `false` when it was not loaded.
pub(crate) fn mark_unloaded(sql: &dyn Sql, session: &str, label: &str, key: &str) -> Result<bool> {
    let found = sql
        .query_row(
            "DELETE FROM loaded_skills WHERE session_id = ? AND label = ? AND key = ? RETURNING seq",
            &[session.into(), label.into(), key.into()],
        )?
        .is_some();
    Ok(found)
}

/// `label:key` of every loaded skill of `session`, in load order.
pub(crate) fn loaded(sql: &dyn Sql, session: &str) -> Result<Vec<String>> {
    sql.query("SELECT label, key FROM loaded_skills WHERE session_id = ? ORDER BY seq", &[session.into()])?
        .iter()
        .map(|r| Ok(format!("{}:{}", r.text(0)?, r.text(1)?)))
        .collect()
}

/// Forgets every loaded skill of `session` (clear, delete), or only those of one block.
pub(crate) fn forget(sql: &dyn Sql, session: &str, label: Option<&str>) -> Result<()> {
    match label {
        Some(l) => {
            sql.execute("DELETE FROM loaded_skills WHERE session_id = ? AND label = ?", &[session.into(), l.into()])
        }
        None => sql.execute("DELETE FROM loaded_skills WHERE session_id = ?", &[session.into()]),
    }
}

/// The text that replaces an unloaded skill's content in history.
pub(crate) fn unloaded_marker(key: &str) -> String {
    format!("[skill unloaded: {key}]")
}

/// Whether `part` is a finished `load_context` call for `label` / `key` whose output is still
/// the skill. Both tool part shapes count: `toolName` (dynamic-tool) and `type:
/// "tool-load_context"` (the reference only saw the first, docs/REFERENCE.md#d-reclaim-tool-type).
fn is_live_load(part: &Json, label: &str, key: &str) -> bool {
    let part = Part::new(part);
    let named = part.str("toolName") == Some("load_context") || part.kind() == "tool-load_context";
    let input = part.input();
    named
        && part.state() == Some(ToolState::OutputAvailable)
        && input.and_then(|i| str_field(i, "label")) == Some(label)
        && input.and_then(|i| str_field(i, "key")) == Some(key)
        && !part.output().and_then(Json::as_str).is_some_and(|o| o.starts_with("[skill unloaded:"))
}

/// Rewrites the newest assistant message on the active branch that holds a live
/// `load_context` result for `label:key`: every such part's output becomes
/// [`unloaded_marker`]. Reads the raw path (overlays do not hide it). Returns the rewritten
/// message id, if any. Run inside the unload's transaction.
pub(crate) fn reclaim(sql: &dyn Sql, session: &str, label: &str, key: &str) -> Result<Option<String>> {
    let tree = Tree::new(sql, session);
    let Some(leaf) = tree.latest_leaf_id()? else { return Ok(None) };
    let path = tree.path(&leaf)?;
    for row in path.iter().rev().filter(|r| r.role == "assistant") {
        let content = sql
            .query_row("SELECT content FROM messages WHERE seq = ?", &[Value::Int(row.seq)])?
            .map(|r| r.text(0))
            .transpose()?
            .unwrap_or_default();
        let Ok(mut msg) = serde_json::from_str::<Json>(&content) else { continue };
        let Some(parts) = msg.get_mut("parts").and_then(Json::as_array_mut) else { continue };
        let mut hit = false;
        for part in parts.iter_mut().filter(|p| is_live_load(p, label, key)) {
            part["output"] = Json::String(unloaded_marker(key));
            hit = true;
        }
        if hit {
            tree.update(&NewMessage::from_json(&msg)?)?;
            return Ok(Some(row.id.clone()));
        }
    }
    Ok(None)
}
