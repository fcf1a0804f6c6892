//! Versioned schema migrations from `migrations/`, applied idempotently when the store opens.

use crate::error::Result;
use crate::sql::{atomically, Sql, Value};

/// Every migration, in order. A new one is appended here and never edits an old one.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "foundation", include_str!("../../../../migrations/0001_foundation.sql")),
    (2, "context", include_str!("../../../../migrations/0002_context.sql")),
    (3, "estimates", include_str!("../../../../migrations/0003_estimates.sql")),
    (4, "spill", include_str!("../../../../migrations/0004_spill.sql")),
    (5, "spill_pending", include_str!("../../../../migrations/0005_spill_pending.sql")),
    (6, "memories", include_str!("../../../../migrations/0006_memories.sql")),
    (7, "access", include_str!("../../../../migrations/0007_access.sql")),
    (8, "walks", include_str!("../../../../migrations/0008_walks.sql")),
    (9, "versions", include_str!("../../../../migrations/0009_versions.sql")),
    (10, "holes", include_str!("../../../../migrations/0010_holes.sql")),
    (11, "metadata", include_str!("../../../../migrations/0011_metadata.sql")),
    (12, "validity", include_str!("../../../../migrations/0012_validity.sql")),
    (13, "vectors", include_str!("../../../../migrations/0013_vectors.sql")),
];

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

/// The highest applied version, 0 for an empty database.
pub fn current_version(sql: &dyn Sql) -> Result<i64> {
    let row = sql.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])?;
    row.map_or(Ok(0), |r| r.int(0))
}
