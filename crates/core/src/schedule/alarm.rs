//! The agent's one Durable Object alarm: everything the agent does without a request. A
//! wake-up ([`wake`]) runs the schedules that are due, one after another, at most
//! [`RUNS_PER_WAKE`] of them and none started after [`WAKE_BUDGET_MS`], then the maintenance: memories whose `expiresAt` has come purged
//! (at most [`PURGE_BATCH`]), the sleep-time consolidation when it is configured and due
//! (`memory::maintain`: `memory.maintenance.batch` memories, one model call each), and the work a failure left, handed back to the caller to run as
//! after an answer (`After::Sweep` for spilled objects still to delete, `After::Embed` for rows
//! still waiting for a vector). [`due`] is the next time the alarm is needed: the earliest
//! `nextRunAt`, the earliest `expiresAt`, and [`RETRY_MS`] from now while left-over work waits.
//! What a wake-up leaves (more due runs, more expired rows) is due at once, so the alarm is set
//! again for now and the next wake-up goes on: no wake-up runs long.

use super::run::{tick, Tick};
use crate::after::After;
use crate::blobs::BoxFuture;
use crate::directory::report;
use crate::env::Env;
use crate::error::Result;
use crate::memory::maintain::{self, Consolidated};
use crate::memory::store as memories;
use crate::sql::{atomically, Sql, Value};
use crate::time::parse_iso;

/// Scheduled runs one wake-up starts at most (one after another; each is a model call).
pub const RUNS_PER_WAKE: i64 = 10;
/// A wake-up starts no run after this long (ms) since it began: what is left is due at once and
/// goes to the next wake-up. (One run is bounded by its own turn: `chat.maxSteps` model calls,
/// each within `LLM_TIMEOUT_MS`.)
pub const WAKE_BUDGET_MS: i64 = 60_000;
/// Expired memories one wake-up purges at most.
pub const PURGE_BATCH: i64 = 500;
/// How long left-over work (an embedding or a spill sweep that failed) waits for its retry.
pub const RETRY_MS: i64 = 5 * 60_000;

/// What one wake-up did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Woken {
    /// Runs started (ended `ok` or `error`).
    pub runs: usize,
    /// Expired memories purged.
    pub purged: usize,
    /// The sleep-time consolidation's share of this wake-up (`memory.maintenance`).
    pub consolidated: Consolidated,
    /// Work for the caller to run now, as after an answer: what the runs' turns left (a
    /// session's compaction, memory extraction), the spill sweep, the embedding of waiting rows.
    pub after: Vec<After>,
}

/// The schedules due at `now`, oldest due first, at most `limit`.
fn due_schedules(sql: &dyn Sql, now: &str, limit: i64) -> Result<Vec<String>> {
    sql.query(
        "SELECT id FROM schedules WHERE paused = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?
         ORDER BY next_run_at, seq LIMIT ?",
        &[now.into(), Value::Int(limit)],
    )?
    .iter()
    .map(|r| r.text(0))
    .collect()
}

/// Deletes at most [`PURGE_BATCH`] memories that expired by `now` (with their index rows,
/// versions and vectors). Returns how many.
fn purge(sql: &dyn Sql, now: &str) -> Result<usize> {
    atomically(sql, || {
        let seqs: Vec<i64> = sql
            .query(
                "SELECT seq FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?",
                &[now.into(), Value::Int(PURGE_BATCH)],
            )?
            .iter()
            .map(|r| r.int(0))
            .collect::<Result<_>>()?;
        memories::delete(sql, &seqs)?;
        Ok(seqs.len())
    })
}

fn exists(sql: &dyn Sql, query: &str) -> Result<bool> {
    Ok(sql.query_row(query, &[])?.is_some())
}

/// One wake-up of the alarm. `env` gives the agent as of the moment it is called (each run
/// starts with the time it actually starts). Failures are warnings through the agent's events:
/// a wake-up never fails, and what it could not do is due again. (Boxed: see
/// [`super::run::tick`].)
#[inline(never)]
pub fn wake<'a>(env: &'a dyn Fn() -> Env<'a>) -> BoxFuture<'a, Woken> {
    Box::pin(run_wake(env))
}

async fn run_wake<'a>(env: &'a dyn Fn() -> Env<'a>) -> Woken {
    let mut woken = Woken::default();
    let first = env();
    let ids = match due_schedules(first.sql, first.now.iso(), RUNS_PER_WAKE) {
        Ok(ids) => ids,
        Err(e) => {
            first.events.warn(&format!("alarm: reading the due schedules: {}", e.message));
            Vec::new()
        }
    };
    let began = first.now.ms();
    for id in ids {
        let now = env();
        if now.now.ms() - began > WAKE_BUDGET_MS {
            break;
        }
        match tick(&now, &id, Tick::Due).await {
            Ok(Some(ran)) => {
                woken.runs += 1;
                woken.after.extend(ran.after);
            }
            Ok(None) => {}
            Err(e) => now.events.warn(&format!("alarm: schedule {id}: {}", e.message)),
        }
    }
    let last = env();
    match purge(last.sql, last.now.iso()) {
        Ok(n) => woken.purged = n,
        Err(e) => last.events.warn(&format!("alarm: purging expired memories: {}", e.message)),
    }
    match maintain::run(&last).await {
        Ok(c) => woken.consolidated = c,
        Err(e) => last.events.warn(&format!("alarm: consolidating memories: {}", e.message)),
    }
    if !woken.after.contains(&After::Sweep) && exists(last.sql, "SELECT 1 FROM spill_garbage LIMIT 1").unwrap_or(false)
    {
        woken.after.push(After::Sweep);
    }
    if last.embeddings.is_on() && exists(last.sql, "SELECT 1 FROM unembedded LIMIT 1").unwrap_or(false) {
        woken.after.push(After::Embed);
    }
    woken
}

/// The next time (ms) the alarm is needed, if ever: the earliest due schedule, the earliest
/// expiry of a memory, the next consolidation (when configured), the object's directory report
/// (`directory::report::due`), and while a spill sweep or an embedding has work left, [`RETRY_MS`] after
/// now. A time already past means at once.
pub fn due(env: &Env<'_>) -> Result<Option<i64>> {
    let sql = env.sql;
    let earliest = |query: &str| -> Result<Option<i64>> {
        Ok(sql.query_row(query, &[])?.and_then(|r| r.opt_text(0).ok().flatten()).and_then(|t| parse_iso(&t)))
    };
    let now = env.now.ms();
    let mut times = vec![
        earliest("SELECT min(next_run_at) FROM schedules WHERE paused = 0")?,
        earliest("SELECT min(expires_at) FROM memories WHERE expires_at IS NOT NULL")?,
        maintain::due(env)?,
        report::due(sql)?,
    ];
    if exists(sql, "SELECT 1 FROM spill_garbage LIMIT 1")?
        || (env.embeddings.is_on() && exists(sql, "SELECT 1 FROM unembedded LIMIT 1")?)
    {
        times.push(Some(now + RETRY_MS));
    }
    Ok(times.into_iter().flatten().min())
}
