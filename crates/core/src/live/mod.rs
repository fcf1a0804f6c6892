//! The turns running now in this object ([`Live`]): each keeps the events it sent since its
//! `start` (text and reasoning pieces merged, so the log is about the size of the reply), so a
//! client that reloaded can follow it from the beginning (the resume request, [`Live::follow`]),
//! and its stop signal, so `POST …/chat/stop` can stop it ([`Live::stop`]). Kept in memory
//! only: a turn lives no longer than the object that runs it.
//!
//! - [`event`]: what a turn tells its caller as it goes ([`event::ChatEvent`]), which a running
//!   turn keeps for its followers;
//! - [`stop`]: a turn's stop signal ([`stop::Stop`]).
//!
//! Below `env` (which holds the [`Live`] of the object) and `turn` (which registers each turn
//! here), so it knows nothing of either.

pub mod event;
pub mod stop;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use serde_json::Value as Json;

use crate::error::Error;
use event::{ChatEvent, Outcome};
use stop::Stop;

/// Most bytes of events a running turn keeps for its followers (4 MiB, more than the largest
/// stored message). A turn whose log grows past it can no longer be followed from its start:
/// the resume request then answers 204, and the readers it already has go on live.
pub const MAX_LOG_BYTES: usize = 4 * 1024 * 1024;

/// The turns running in this object.
#[derive(Default)]
pub struct Live {
    turns: RefCell<Vec<Rc<Running>>>,
}

/// One running turn.
struct Running {
    session: String,
    stop: Stop,
    log: RefCell<Vec<ChatEvent>>,
    /// Bytes of text and JSON in `log`, roughly as the stream sends them.
    bytes: Cell<usize>,
    /// Whether `log` outgrew [`MAX_LOG_BYTES`] (it was then emptied).
    over: Cell<bool>,
    readers: RefCell<Vec<UnboundedSender<Update>>>,
}

/// What a follower of a turn gets after the replay: the turn's next events, then its end.
#[derive(Clone, Debug)]
pub enum Update {
    Event(ChatEvent),
    End(Ending),
}

/// How a turn ended.
#[derive(Clone, Debug)]
pub enum Ending {
    /// Stored: the assistant message (`None` when a stop came before anything was shown).
    Stored(Option<Json>),
    /// Failed, nothing stored (or, for a turn that stores its user message at its start, only
    /// that).
    Failed(Error),
}

/// A turn followed from its start: what it sent so far, then what comes.
pub struct Follow {
    pub replay: Vec<ChatEvent>,
    /// Bytes the turn keeps for its followers (see [`MAX_LOG_BYTES`]).
    pub bytes: usize,
    pub live: UnboundedReceiver<Update>,
}

impl Live {
    /// A turn of `session` starts (it passed its checks): it is followed and stopped from here
    /// until its registration ends (or is dropped: a turn whose future is dropped midway ends
    /// as failed, so no reader waits for it forever).
    pub fn start(&self, session: &str, stop: &Stop) -> Registered<'_> {
        Registered { live: self, running: Some(self.register(session, stop)) }
    }

    fn register(&self, session: &str, stop: &Stop) -> Rc<Running> {
        let running = Rc::new(Running {
            session: session.to_owned(),
            stop: stop.clone(),
            log: RefCell::default(),
            bytes: Cell::new(0),
            over: Cell::new(false),
            readers: RefCell::default(),
        });
        self.turns.borrow_mut().push(running.clone());
        running
    }

    /// The turn ended: its followers get `ending`, and it is no longer running.
    fn end(&self, running: &Rc<Running>, ending: Ending) {
        for r in running.readers.take() {
            let _ = r.unbounded_send(Update::End(ending.clone()));
        }
        self.turns.borrow_mut().retain(|t| !Rc::ptr_eq(t, running));
    }

    /// Stops every running turn of `session`; whether there was one.
    pub fn stop(&self, session: &str) -> bool {
        let turns = self.turns.borrow();
        let mine: Vec<&Rc<Running>> = turns.iter().filter(|t| t.session == session).collect();
        mine.iter().for_each(|t| t.stop.stop());
        !mine.is_empty()
    }

    /// Follows the session's newest running turn from its start; `None` when none runs (or its
    /// log outgrew [`MAX_LOG_BYTES`]).
    pub fn follow(&self, session: &str) -> Option<Follow> {
        let running = self.turns.borrow().iter().rev().find(|t| t.session == session && !t.over.get()).cloned()?;
        let (tx, rx) = unbounded();
        running.readers.borrow_mut().push(tx);
        let replay = running.log.borrow().clone();
        Some(Follow { replay, bytes: running.bytes.get(), live: rx })
    }

    /// Whether a turn of `session` is running.
    pub fn running(&self, session: &str) -> bool {
        self.turns.borrow().iter().any(|t| t.session == session)
    }
}

/// A running turn's place among the running ones ([`Live::start`]).
pub struct Registered<'l> {
    live: &'l Live,
    /// `None` once ended.
    running: Option<Rc<Running>>,
}

impl Registered<'_> {
    /// The turn sent `event` (see [`Running::record`]).
    pub(crate) fn record(&self, event: &ChatEvent) {
        if let Some(r) = &self.running {
            r.record(event);
        }
    }

    /// The turn ended: its followers get `ending`, and it is no longer running.
    pub fn end(mut self, ending: Ending) {
        if let Some(r) = self.running.take() {
            self.live.end(&r, ending);
        }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.live.end(&r, Ending::Failed(Error::internal("the turn ended without an answer")));
        }
    }
}

impl Running {
    /// The turn sent `event`: kept for later followers, and passed to the present ones.
    fn record(&self, event: &ChatEvent) {
        self.readers.borrow_mut().retain(|r| r.unbounded_send(Update::Event(event.clone())).is_ok());
        if self.over.get() {
            return;
        }
        let mut log = self.log.borrow_mut();
        let size = match event {
            ChatEvent::Delta { text, .. } | ChatEvent::Reasoning { text } => text.len(),
            ChatEvent::ToolCall { input, .. } => input.to_string().len() + 64,
            ChatEvent::ToolResult { outcome: Outcome::Output(t) | Outcome::Error(t), .. } => t.len() + 64,
            _ => 32,
        };
        self.bytes.set(self.bytes.get() + size);
        if self.bytes.get() > MAX_LOG_BYTES {
            self.over.set(true);
            log.clear();
            log.shrink_to_fit();
            return;
        }
        // Pieces of the same part merge: a follower needs the text, not how it was cut.
        match (log.last_mut(), event) {
            (Some(ChatEvent::Delta { message_id: a, text }), ChatEvent::Delta { message_id: b, text: more })
                if a == b =>
            {
                text.push_str(more)
            }
            (Some(ChatEvent::Reasoning { text }), ChatEvent::Reasoning { text: more }) => text.push_str(more),
            _ => log.push(event.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn delta(text: &str) -> ChatEvent {
        ChatEvent::Delta { message_id: "m".into(), text: text.into() }
    }

    #[test]
    fn a_follower_gets_the_turn_from_its_start_then_live_and_its_end() {
        let live = Live::default();
        assert!(live.follow("s").is_none(), "nothing runs");
        let stop = Stop::default();
        let running = live.start("s", &stop);
        running.record(&ChatEvent::Start { message_id: "m".into() });
        running.record(&delta("Hel"));
        running.record(&delta("lo"));
        let first = live.follow("s").expect("running");
        assert_eq!(first.replay, vec![ChatEvent::Start { message_id: "m".into() }, delta("Hello")], "pieces merged");
        running.record(&delta(" you"));
        let second = live.follow("s").expect("running");
        assert_eq!(second.replay.last(), Some(&delta("Hello you")));
        running.end(Ending::Stored(Some(serde_json::json!({"id": "m"}))));
        assert!(!live.running("s") && live.follow("s").is_none(), "ended");
        let got: Vec<Update> = futures::executor::block_on(first.live.collect());
        assert!(matches!(&got[0], Update::Event(e) if *e == delta(" you")), "{got:?}");
        assert!(matches!(&got[1], Update::End(Ending::Stored(Some(_)))), "{got:?}");
        assert_eq!(got.len(), 2);
        let got: Vec<Update> = futures::executor::block_on(second.live.collect());
        assert_eq!(got.len(), 1, "the second reader joined after ' you': only the end is new");
    }

    #[test]
    fn stop_reaches_the_sessions_turns_only() {
        let live = Live::default();
        let (a, b) = (Stop::default(), Stop::default());
        let _ra = live.start("a", &a);
        let _rb = live.start("b", &b);
        drop(live.start("c", &Stop::default()));
        assert!(!live.running("c"), "a registration dropped ends its turn");
        assert!(live.stop("a"));
        assert!(a.is_stopped() && !b.is_stopped());
        assert!(!live.stop("c"), "no turn of c");
    }

    #[test]
    fn a_log_over_the_cap_is_no_longer_followed() {
        let live = Live::default();
        let running = live.start("s", &Stop::default());
        let reader = live.follow("s").expect("running");
        let big = "x".repeat(MAX_LOG_BYTES / 2 + 1);
        running.record(&delta(&big));
        assert!(live.follow("s").is_some());
        running.record(&delta(&big));
        assert!(live.follow("s").is_none(), "past the cap: 204");
        running.record(&delta("!"));
        running.end(Ending::Failed(Error::internal("x")));
        let got: Vec<Update> = futures::executor::block_on(reader.live.collect());
        assert_eq!(got.len(), 4, "the reader that came before goes on live");
    }
}
