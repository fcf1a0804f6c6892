//! The message store of one agent, in its SQLite database: the schema, validated messages,
//! the tree of each session, oversize fields kept in R2, compaction overlays, history and the
//! running token estimate, the sessions registry, search and a session's storage figures. [`open`] is where it starts.

pub mod estimate;
pub mod history;
pub mod message;
pub mod overlay;
pub mod schema;
pub mod search;
pub mod sessions;
pub mod spill;
pub mod storage;
pub mod tree;

use crate::error::Result;
use crate::sql::Sql;
use crate::time::iso_millis;

/// Opens the store: brings the schema up to date (returns the versions applied now) and
/// recovers from a crash mid-write (spilled objects of writes that never committed become
/// garbage for the next sweep). The Durable Object calls this once when it starts, then
/// `schedule::run::recover` (the schedule runs a crash cut short), which sits above the store.
pub fn open(sql: &dyn Sql, now_ms: i64) -> Result<Vec<i64>> {
    let applied = schema::migrate(sql, &iso_millis(now_ms))?;
    spill::recover(sql)?;
    Ok(applied)
}
