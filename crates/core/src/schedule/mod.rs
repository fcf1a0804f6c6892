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

pub mod alarm;
pub mod cron;
pub mod run;
pub mod store;
