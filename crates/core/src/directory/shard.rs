//! A directory shard's table (`directory_entries`): reports upserted or removed, and pages of
//! entries in (name, kind) order after a cursor, filtered by kind, name prefix and activity.

use super::{After, Entry, Listing, Report, MAX_LIMIT};
use crate::error::Result;
use crate::ids::Role;
use crate::sql::{atomically, Row, Sql, Value};

/// Reports at most one request to a shard carries.
pub const MAX_REPORTS: usize = 1000;

/// Takes `reports` at `now`: an entry replaces the object's row (`reportedAt` = `now`), a
/// removal deletes it. One transaction.
pub fn take(sql: &dyn Sql, reports: &[Report], now: &str) -> Result<()> {
    atomically(sql, || {
        for r in reports {
            match r {
                Report::Holds(e) => sql.execute(
                    "INSERT OR REPLACE INTO directory_entries (kind, name, sessions, messages, memories, sqlite_bytes,
                       r2_bytes, created_at, last_active_at, reported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    &[
                        e.kind.as_str().into(),
                        e.name.as_str().into(),
                        Value::Int(e.sessions),
                        Value::Int(e.messages),
                        Value::Int(e.memories),
                        Value::Int(e.sqlite_bytes),
                        Value::Int(e.r2_bytes),
                        e.created_at.as_str().into(),
                        e.last_active_at.as_str().into(),
                        now.into(),
                    ],
                )?,
                Report::Removed { kind, name } => sql.execute(
                    "DELETE FROM directory_entries WHERE kind = ? AND name = ?",
                    &[kind.as_str().into(), name.as_str().into()],
                )?,
            }
        }
        Ok(())
    })
}

fn entry(r: &Row) -> Result<Entry> {
    Ok(Entry {
        kind: Role::parse(&r.text(0)?)?,
        name: r.text(1)?,
        sessions: r.int(2)?,
        messages: r.int(3)?,
        memories: r.int(4)?,
        sqlite_bytes: r.int(5)?,
        r2_bytes: r.int(6)?,
        created_at: r.text(7)?,
        last_active_at: r.text(8)?,
        reported_at: r.text(9)?,
    })
}

/// The shard's first `listing.limit` entries (at most `MAX_LIMIT + 1`) after its cursor, in
/// (name, kind) order, that pass its filters.
pub fn list(sql: &dyn Sql, listing: &Listing) -> Result<Vec<Entry>> {
    let mut conds = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    if let Some(k) = listing.kind {
        conds.push("kind = ?");
        args.push(k.as_str().into());
    }
    if let Some(p) = &listing.prefix {
        conds.push("substr(name, 1, length(?)) = ?");
        args.extend([p.as_str().into(), p.as_str().into()]);
    }
    if let Some(t) = &listing.active_after {
        conds.push("last_active_at >= ?");
        args.push(t.as_str().into());
    }
    if let Some(t) = &listing.active_before {
        conds.push("last_active_at < ?");
        args.push(t.as_str().into());
    }
    if let Some(After { name, kind }) = &listing.after {
        conds.push("(name > ? OR (name = ? AND kind > ?))");
        args.extend([name.as_str().into(), name.as_str().into(), kind.as_str().into()]);
    }
    let filter = if conds.is_empty() { String::new() } else { format!("WHERE {}", conds.join(" AND ")) };
    args.push(Value::Int(listing.limit.clamp(0, MAX_LIMIT + 1)));
    sql.query(
        &format!(
            "SELECT kind, name, sessions, messages, memories, sqlite_bytes, r2_bytes, created_at, last_active_at,
               reported_at FROM directory_entries {filter} ORDER BY name, kind LIMIT ?"
        ),
        &args,
    )?
    .iter()
    .map(entry)
    .collect()
}
