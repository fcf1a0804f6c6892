//! The frames each WebSocket is running, so that a `cancel` frame of that socket stops its
//! running turn: every frame gets a stop signal ([`Running::start`]) that the turn waits on
//! beside its model; when a `cancel` frame ends, it sets the signals of the socket's other
//! running frames ([`Running::end`] with [`Then::Cancel`]).

use std::cell::RefCell;
use std::collections::HashMap;

use session_agent_core::live::stop::Stop;

/// What ending a frame does to the socket's other running frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    Nothing,
    /// The frame was `cancel`: the others are to stop.
    Cancel,
}

/// The running frames' stop signals of every socket (by socket id), kept in the object's memory.
#[derive(Default)]
pub struct Running {
    flags: RefCell<HashMap<String, Vec<Stop>>>,
}

impl Running {
    /// A new frame of `socket` starts: its stop signal, among the socket's running ones.
    pub fn start(&self, socket: &str) -> Stop {
        let flag = Stop::default();
        self.flags.borrow_mut().entry(socket.to_owned()).or_default().push(flag.clone());
        flag
    }

    /// The frame with `flag` of `socket` ended; with [`Then::Cancel`] the socket's other running
    /// frames are told to stop. A socket with no running frame is forgotten.
    pub fn end(&self, socket: &str, flag: &Stop, then: Then) {
        let mut all = self.flags.borrow_mut();
        let Some(flags) = all.get_mut(socket) else { return };
        flags.retain(|f| !f.same(flag));
        if then == Then::Cancel {
            flags.iter().for_each(|f| f.stop());
        }
        if flags.is_empty() {
            all.remove(socket);
        }
    }

    /// How many sockets have a running frame (what the object keeps).
    #[cfg(test)]
    fn sockets(&self) -> usize {
        self.flags.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Running, Then};

    #[test]
    fn a_cancel_frame_stops_its_sockets_other_frames_only() {
        let r = Running::default();
        let turn = r.start("a");
        let other_socket = r.start("b");
        let cancel = r.start("a");
        r.end("a", &cancel, Then::Cancel);
        assert!(turn.is_stopped(), "the socket's running turn is told to stop");
        assert!(!other_socket.is_stopped() && !cancel.is_stopped(), "another socket's frame runs on");
        r.end("a", &turn, Then::Nothing);
        assert_eq!(r.sockets(), 1, "a socket with nothing running is forgotten");
        r.end("b", &other_socket, Then::Nothing);
        r.end("b", &other_socket, Then::Cancel);
        assert_eq!(r.sockets(), 0);
    }
}
