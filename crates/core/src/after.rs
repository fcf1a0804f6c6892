//! Work an answer leaves for after it is sent: the spill sweep after a write, the compaction a
//! turn calls for, the memory extraction after a turn, the vectors of what a write stored. It
//! never delays the answer (the Workers layer runs it once the answer, or a stream's last
//! event, is out), and its failures are logged, never answered; compaction reports itself in
//! `status` frames.

use std::cell::Cell;

use crate::env::Env;
use crate::memory::Memories;
use crate::session::Session;
use crate::store::spill;

/// One piece of work for after an answer.
#[derive(Clone, Debug, PartialEq)]
pub enum After {
    /// Delete spilled objects that lost their last reference (at most [`SWEEP_BATCH`]; a
    /// failure is retried by a later sweep).
    Sweep,
    /// Compact the branch that ends at `leaf` as after an append (when it is over
    /// `SESSION_CONFIG.compaction.after`), or whatever its size when the turn's message cap
    /// left messages out ([`Cap::Dropped`]), so the next turn sees them in a summary.
    Compact { session: String, leaf: String, cap: Cap },
    /// Distill the exchange that ends at `leaf` into long-term memories (after a turn), each
    /// given `tags` (the turn's scope).
    ExtractMemories { session: String, leaf: String, tags: Vec<String> },
    /// Embed every memory, message and search entry still waiting for its vector (after every
    /// write, when embeddings are configured: the write's own rows and any a failure left).
    Embed,
}

/// Whether a turn's message cap left messages of the branch out of what the model read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    Kept,
    Dropped,
}

/// Background work of one kind run at most once at a time: asked for while it runs, it goes
/// round once more when the run ends instead of starting a second run beside it (two would do
/// the same work twice: embed the same rows).
#[derive(Debug, Default)]
pub struct Flight {
    running: Cell<bool>,
    again: Cell<bool>,
}

/// What asking a [`Flight`] for a run says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// None was running: the caller runs it (and asks [`Flight::next`] after each run).
    Run,
    /// One is running: it will go round once more.
    Queued,
}

/// What a [`Flight`] says after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Asked for during the run: run once more.
    Again,
    /// Done: the flight ends.
    Done,
}

impl Flight {
    /// Asks for a run.
    pub fn ask(&self) -> Ask {
        if self.running.replace(true) {
            self.again.set(true);
            Ask::Queued
        } else {
            Ask::Run
        }
    }

    /// After a run: another one, or the flight ends.
    pub fn next(&self) -> Next {
        if self.again.replace(false) {
            Next::Again
        } else {
            self.running.set(false);
            Next::Done
        }
    }
}

/// Unreferenced spilled objects deleted by one [`After::Sweep`], at most.
pub const SWEEP_BATCH: i64 = 100;

/// Runs `work` in order.
pub async fn run(env: &Env<'_>, work: &[After]) {
    for after in work {
        match after {
            After::Sweep => match spill::sweep(env.sql, env.blobs, SWEEP_BATCH).await {
                Ok((_, errors)) => errors.iter().for_each(|e| env.events.warn(e)),
                Err(e) => env.events.warn(&format!("spill sweep: {}", e.message)),
            },
            After::Compact { session, leaf, cap } => {
                let s = Session::new(env, session);
                match cap {
                    Cap::Kept => s.after_append(leaf).await,
                    Cap::Dropped => s.after_cap(leaf).await,
                };
            }
            After::ExtractMemories { session, leaf, tags } => {
                crate::memory::extract::after(&Memories::new(env), session, leaf, tags).await
            }
            After::Embed => {
                crate::vectors::embed::run(env.sql, env.transport, env.embeddings, env.events, env.now.iso()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Ask, Flight, Next};

    #[test]
    fn one_run_at_a_time_and_one_more_round_for_what_came_meanwhile() {
        let f = Flight::default();
        assert_eq!(f.ask(), Ask::Run);
        assert_eq!((f.ask(), f.ask()), (Ask::Queued, Ask::Queued), "asked twice during the run: one more round");
        assert_eq!(f.next(), Next::Again);
        assert_eq!(f.next(), Next::Done);
        assert_eq!(f.ask(), Ask::Run, "a new flight after the last ended");
        assert_eq!(f.next(), Next::Done);
    }
}
