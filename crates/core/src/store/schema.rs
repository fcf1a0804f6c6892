//! Versioned schema migrations from `migrations/`, applied idempotently when the store opens.
//!
//! A database made before brings itself up to date by replaying the migrations it lacks. A new
//! database (a never-used agent's first request) is made whole instead: `migrations/schema.sql`
//! is the schema the replay of every migration ends with, generated from that replay by a test
//! (`tests/it/schema.rs` fails when the two differ), and made in one transaction with the rows
//! of every version. The replay re-reads SQLite's whole schema after each `ALTER TABLE`; the
//! schema made whole costs a quarter of it (natively 2.2 ms against 8.1 ms).

use crate::error::Result;
use crate::sql::{atomically, Sql, Value};

/// A migration file as it is run: its text without its comment lines (`--` first on the line,
/// after any indentation), stripped at compile time. The files explain the schema to a reader;
/// SQLite needs only the statements, and the comments were ~8 KB of the wasm.
macro_rules! migration {
    ($file:literal) => {{
        const TEXT: &str = include_str!(concat!("../../../../migrations/", $file));
        const BYTES: [u8; uncommented_len(TEXT)] = uncommented(TEXT);
        match std::str::from_utf8(&BYTES) {
            Ok(sql) => sql,
            Err(_) => panic!("a migration is not UTF-8 after its comments are removed"),
        }
    }};
}

/// Every migration, in order. A new one is appended here and never edits an old one.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "foundation", migration!("0001_foundation.sql")),
    (2, "context", migration!("0002_context.sql")),
    (3, "estimates", migration!("0003_estimates.sql")),
    (4, "spill", migration!("0004_spill.sql")),
    (5, "spill_pending", migration!("0005_spill_pending.sql")),
    (6, "memories", migration!("0006_memories.sql")),
    (7, "access", migration!("0007_access.sql")),
    (8, "walks", migration!("0008_walks.sql")),
    (9, "versions", migration!("0009_versions.sql")),
    (10, "holes", migration!("0010_holes.sql")),
    (11, "metadata", migration!("0011_metadata.sql")),
    (12, "validity", migration!("0012_validity.sql")),
    (13, "vectors", migration!("0013_vectors.sql")),
    (14, "schedules", migration!("0014_schedules.sql")),
    (15, "spaces", migration!("0015_spaces.sql")),
    (16, "directory", migration!("0016_directory.sql")),
    (17, "space_block_versions", migration!("0017_space_block_versions.sql")),
    (18, "schedule_reach", migration!("0018_schedule_reach.sql")),
    (19, "message_parts", migration!("0019_message_parts.sql")),
    (20, "calibration", migration!("0020_calibration.sql")),
    (21, "fetched_block_texts", migration!("0021_fetched_block_texts.sql")),
    (22, "messages_by_id", migration!("0022_messages_by_id.sql")),
];

/// Where the line that starts at `at` ends (after its `\n`, or at the end), and whether it is a
/// comment line: `--` after spaces and tabs.
const fn line(b: &[u8], at: usize) -> (usize, bool) {
    let mut i = at;
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    let comment = i + 1 < b.len() && b[i] == b'-' && b[i + 1] == b'-';
    while i < b.len() && b[i] != b'\n' {
        i += 1;
    }
    (if i < b.len() { i + 1 } else { i }, comment)
}

/// The length of `text` without its comment lines.
const fn uncommented_len(text: &str) -> usize {
    let b = text.as_bytes();
    let (mut at, mut len) = (0, 0);
    while at < b.len() {
        let (end, comment) = line(b, at);
        if !comment {
            len += end - at;
        }
        at = end;
    }
    len
}

/// `text` without its comment lines (whole lines: a comment after a statement stays), as `N`
/// bytes ([`uncommented_len`]).
const fn uncommented<const N: usize>(text: &str) -> [u8; N] {
    let b = text.as_bytes();
    let mut out = [0u8; N];
    let (mut at, mut n) = (0, 0);
    while at < b.len() {
        let (end, comment) = line(b, at);
        while !comment && at < end {
            out[n] = b[at];
            n += 1;
            at += 1;
        }
        at = end;
    }
    out
}

/// The schema at the newest version ([`latest_version`]) as the replay of [`MIGRATIONS`] leaves
/// it: a new database is made from it whole.
pub const SCHEMA: &str = migration!("schema.sql");

/// The newest schema version this build knows.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Brings the database up to the newest version: every migration of [`MIGRATIONS`] it has not
/// recorded, in the list's order (a version numbered below one already applied, made on
/// another branch meanwhile, applies too). Each migration runs in its own transaction together
/// with its `schema_version` row, so a failed one leaves no trace and is retried on the next
/// start. Returns the versions that were applied now (empty when already current).
pub fn migrate(sql: &dyn Sql, now: &str) -> Result<Vec<i64>> {
    sql.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
           version    INTEGER PRIMARY KEY,
           name       TEXT NOT NULL,
           applied_at TEXT NOT NULL
         )",
    )?;
    let done: Vec<i64> =
        sql.query("SELECT version FROM schema_version", &[])?.iter().map(|r| r.int(0)).collect::<Result<_>>()?;
    if done.is_empty() && is_new(sql)? {
        return made_whole(sql, now);
    }
    let mut applied = Vec::new();
    for &(version, name, body) in MIGRATIONS.iter().filter(|m| !done.contains(&m.0)) {
        atomically(sql, || {
            sql.execute_batch(body)?;
            sql.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                &[Value::Int(version), name.into(), now.into()],
            )
        })?;
        applied.push(version);
    }
    Ok(applied)
}

/// Whether the database holds nothing but the (empty) `schema_version` table (and the
/// runtime's own: SQLite's, and the Durable Object's `_cf_` tables).
fn is_new(sql: &dyn Sql) -> Result<bool> {
    let row = sql.query_row(
        "SELECT COUNT(*) FROM sqlite_master
         WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name <> 'schema_version'",
        &[],
    )?;
    Ok(row.map_or(Ok(0), |r| r.int(0))? == 0)
}

/// Makes a new database at the newest version: [`SCHEMA`] and a row for every migration, in one
/// transaction. Returns every version, as a replay from nothing would.
fn made_whole(sql: &dyn Sql, now: &str) -> Result<Vec<i64>> {
    let versions: Vec<(i64, &str)> = MIGRATIONS.iter().map(|&(v, name, _)| (v, name)).collect();
    let list = serde_json::to_string(&versions).map_err(|e| crate::error::Error::internal(e.to_string()))?;
    atomically(sql, || {
        sql.execute_batch(SCHEMA)?;
        sql.execute(
            "INSERT INTO schema_version (version, name, applied_at)
             SELECT value ->> 0, value ->> 1, ? FROM json_each(?)",
            &[now.into(), list.as_str().into()],
        )
    })?;
    Ok(versions.into_iter().map(|(v, _)| v).collect())
}

/// The highest applied version, 0 for an empty database.
pub fn current_version(sql: &dyn Sql) -> Result<i64> {
    let row = sql.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])?;
    row.map_or(Ok(0), |r| r.int(0))
}

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    #[test]
    fn migrations_are_their_files_without_comment_lines() {
        let file = include_str!("../../../../migrations/0004_spill.sql");
        let kept: String = file.split_inclusive('\n').filter(|l| !l.trim_start().starts_with("--")).collect();
        assert_eq!(MIGRATIONS[3].2, kept);
        assert!(kept.contains("-- the field's name in that object"), "a comment after a statement stays");
        for (_, _, sql) in MIGRATIONS {
            assert!(sql.lines().all(|l| !l.trim_start().starts_with("--")));
        }
    }
}
