//! Who hears about a session's changes: the WebSocket clients of the session (`message`,
//! `delta` and `status` frames), whether the change came over HTTP, a WebSocket or a stub.
//! The session publishes; the Workers layer delivers to the sockets tagged with the session id.

use serde_json::Value as Json;

/// Receives the frames of every session.
pub trait Events {
    /// Whether anyone listens to `session` (frames are only built when someone does).
    fn has_listeners(&self, session: &str) -> bool;
    /// Delivers `frame` (already carrying `sessionId`) to everyone listening to `session`.
    fn publish(&self, session: &str, frame: &Json);
}

/// Nobody listens (a DO without sockets, or a caller that does not care).
pub struct NoEvents;

impl Events for NoEvents {
    fn has_listeners(&self, _session: &str) -> bool {
        false
    }
    fn publish(&self, _session: &str, _frame: &Json) {}
}
