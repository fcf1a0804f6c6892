//! An object's side of the directory, kept in its own SQLite (`directory_report`, one row):
//! every write marks it dirty ([`mark`], in the same turn as the write, so both commit
//! together), which makes its report due a little later ([`due`], read by the alarm's
//! `schedule::alarm::due`); the alarm then computes its figures ([`stats`]), sends them, and
//! [`sent`] clears the mark unless another write came meanwhile ([`failed`]: retried later). A
//! crash between a write and its report is repaired by the alarm the mark set.

use super::{Entry, Report};
use crate::error::Result;
use crate::ids::Role;
use crate::sql::{Sql, Value};
use crate::time::iso_millis;

/// How long (ms) a report waits after the first write that needs it, so a burst of writes is
/// reported once (the var `DIRECTORY_REPORT_MS` overrides it).
pub const REPORT_DELAY_MS: i64 = 2_000;
/// How long (ms) a report that failed waits for its retry.
pub const RETRY_MS: i64 = 30_000;

/// Marks the object written at `now_ms`: the first write since the last report makes the
/// report due `delay_ms` later. `name` is the object's name when the runtime told it (kept for
/// the report, which an alarm after a restart sends without it). Returns when the report is due.
pub fn mark(sql: &dyn Sql, now_ms: i64, delay_ms: i64, name: Option<&str>) -> Result<i64> {
    let row = sql.query_row(
        "INSERT INTO directory_report (id, dirty_since, due_at, generation, last_write, name) VALUES (1, ?, ?, 1, ?, ?)
         ON CONFLICT (id) DO UPDATE SET generation = generation + 1, last_write = excluded.last_write,
           dirty_since = COALESCE(dirty_since, excluded.dirty_since), due_at = COALESCE(due_at, excluded.due_at),
           name = COALESCE(excluded.name, name)
         RETURNING due_at",
        &[Value::Int(now_ms), Value::Int(now_ms + delay_ms), iso_millis(now_ms).into(), name.into()],
    )?;
    row.map_or(Ok(now_ms + delay_ms), |r| r.int(0))
}

/// Keeps the object's name for its reports, told by a request that writes nothing (a
/// WebSocket handshake: an object woken later by that socket's frames, or by its alarm, is not
/// told its name). Writes only when the name kept differs.
pub fn name(sql: &dyn Sql, name: &str) -> Result<()> {
    sql.execute(
        "INSERT INTO directory_report (id, name) VALUES (1, ?)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name WHERE name IS NOT excluded.name",
        &[name.into()],
    )
}

/// The name the object's writes kept, if any: the name of an object that the runtime started
/// without telling it (an alarm, a hibernated socket's frame after an eviction).
pub fn kept_name(sql: &dyn Sql) -> Result<Option<String>> {
    Ok(sql.query_row("SELECT name FROM directory_report", &[])?.map(|r| r.opt_text(0)).transpose()?.flatten())
}

/// When the report is due (ms), if one waits.
pub fn due(sql: &dyn Sql) -> Result<Option<i64>> {
    sql.query_row("SELECT due_at FROM directory_report WHERE dirty_since IS NOT NULL AND due_at IS NOT NULL", &[])?
        .map(|r| r.int(0))
        .transpose()
}

/// The report that is due at `now_ms`, as the writes it covers (their generation), if any.
pub fn pending(sql: &dyn Sql, now_ms: i64) -> Result<Option<i64>> {
    sql.query_row(
        "SELECT generation FROM directory_report WHERE dirty_since IS NOT NULL AND due_at <= ?",
        &[Value::Int(now_ms)],
    )?
    .map(|r| r.int(0))
    .transpose()
}

/// Forgets the mark without a report (no directory to report to).
pub fn forget(sql: &dyn Sql) -> Result<()> {
    sql.execute("UPDATE directory_report SET dirty_since = NULL, due_at = NULL", &[])
}

fn count(sql: &dyn Sql, query: &str) -> Result<i64> {
    sql.query_row(query, &[])?.map_or(Ok(0), |r| r.int(0))
}

/// The object's report as of `now_ms` (under the name its writes kept, else `name`): its
/// figures, or [`Report::Removed`] when it holds no session, message, memory or schedule. `sqlite_bytes` is its database's size as the runtime gives it;
/// `r2Bytes` is what `spills` records of the message fields moved to R2 (the skills bucket's
/// files are shared, not counted). `createdAt` is when it first reported holding data (else
/// its oldest session or memory); `lastActiveAt` its last write.
pub fn stats(sql: &dyn Sql, kind: Role, name: &str, sqlite_bytes: i64, now_ms: i64) -> Result<Report> {
    let kept = kept_name(sql)?;
    let name = kept.as_deref().unwrap_or(name);
    let sessions = count(sql, "SELECT count(*) FROM sessions")?;
    let memories = count(sql, "SELECT count(*) FROM memories")?;
    let schedules = count(sql, "SELECT count(*) FROM schedules")?;
    let messages = count(sql, "SELECT count(*) FROM messages")?;
    if sessions + memories + schedules + messages == 0 {
        return Ok(Report::Removed { kind, name: name.to_owned() });
    }
    let now = iso_millis(now_ms);
    let row = sql.query_row(
        "SELECT (SELECT created_at FROM directory_report),
                (SELECT min(t) FROM (SELECT min(created_at) AS t FROM sessions
                                     UNION ALL SELECT min(created_at) FROM memories)),
                (SELECT last_write FROM directory_report),
                (SELECT COALESCE(sum(bytes), 0) FROM spills)",
        &[],
    )?;
    let (created, oldest, last, r2) = match &row {
        Some(r) => (r.opt_text(0)?, r.opt_text(1)?, r.opt_text(2)?, r.int(3)?),
        None => (None, None, None, 0),
    };
    Ok(Report::Holds(Entry {
        kind,
        name: name.to_owned(),
        sessions,
        messages,
        memories,
        sqlite_bytes,
        r2_bytes: r2,
        created_at: created.or(oldest).unwrap_or_else(|| now.clone()),
        last_active_at: last.unwrap_or(now),
        reported_at: String::new(),
    }))
}

/// `report`, covering the writes up to `generation`, was taken at `now_ms`: the mark is cleared,
/// or, when writes came meanwhile, their report is due `delay_ms` from now.
pub fn sent(sql: &dyn Sql, report: &Report, generation: i64, now_ms: i64, delay_ms: i64) -> Result<()> {
    let created = match report {
        Report::Holds(e) => Value::Text(e.created_at.clone()),
        Report::Removed { .. } => Value::Null,
    };
    sql.execute(
        "UPDATE directory_report SET created_at = ?, reported_at = ?,
           dirty_since = CASE WHEN generation = ? THEN NULL ELSE ? END,
           due_at = CASE WHEN generation = ? THEN NULL ELSE ? END",
        &[
            created,
            iso_millis(now_ms).into(),
            Value::Int(generation),
            Value::Int(now_ms),
            Value::Int(generation),
            Value::Int(now_ms + delay_ms),
        ],
    )
}

/// The report could not be sent at `now_ms`: it is due again [`RETRY_MS`] later.
pub fn failed(sql: &dyn Sql, now_ms: i64) -> Result<()> {
    sql.execute(
        "UPDATE directory_report SET due_at = ? WHERE dirty_since IS NOT NULL",
        &[Value::Int(now_ms + RETRY_MS)],
    )
}
