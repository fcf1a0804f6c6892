//! Schedules: agent turns that run on their own (`/schedules`), on the one Durable Object
//! alarm. A schedule is a prompt and its timing ([`store::Timing`]: once `at` a time, `every` so many
//! seconds, or a [`cron::Cron`] expression in UTC); each run is recorded ([`run`]), and the
//! alarm ([`alarm`]) runs what is due and the agent's maintenance.
//!
//! - [`cron`]: the five-field expressions and their next time;
//! - [`store`]: the store of schedules (create, list, change, delete);
//! - [`run`]: one run, recorded as started before its model call, on a fresh history or in the
//!   schedule's session, and the runs recorded;
//! - [`alarm`]: a wake-up of the alarm (due runs, expired memories, retries) and the next time
//!   it is needed.
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 42. **No tick runs twice.** A run is claimed before its model call, in one transaction that
//!     records it as started and moves its schedule's `nextRunAt` past now, so an alarm delivered
//!     again finds nothing due; a run still recorded as started when the object opens belonged to
//!     an instance that is gone (a crash, an eviction mid-run) and is marked failed, never run
//!     again (`run::recover`, right after `store::open` in `Agent::open`). A missed stretch of ticks is one run when the
//!     object wakes, and `nextRunAt` is the next time after now.
//! 43. **A wake-up is bounded**: at most `RUNS_PER_WAKE` runs (one after another, none started
//!     after `WAKE_BUDGET_MS`, 60 s; one run is bounded by its turn's steps and timeouts) and
//!     `PURGE_BATCH` expired memories; what is left is due at once, so the alarm is set again for
//!     now and the next wake-up goes on. The sweep and the embedding the alarm retries are the
//!     bounded after-work of an answer (`SWEEP_BATCH` objects, the embedding's rounds). A fresh
//!     run reads no session's state and writes nothing but its run.
//! 47. **A scheduled run in a session reads across sessions no further than that session's
//!     token would.** Its turn is stored there, for that session's tokens to read; it reaches its
//!     session only (`Schedule::reaches`, applied in `run::execute` whoever starts it: the alarm,
//!     the admin by hand), unless its schedule says `reach: "agent"` (created or changed by
//!     agent-wide tokens only). A request's turn has its request's reach (invariant 38).

pub mod alarm;
pub mod cron;
pub mod run;
pub mod store;
