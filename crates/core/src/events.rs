//! Who hears about a session's changes: the WebSocket clients of the session (`message`,
//! `delta` and `status` frames) and of the whole agent (`memory` frames), whether the change came over HTTP, a WebSocket or a stub.
//! The session publishes; the Workers layer delivers to the sockets tagged with the session id.

use serde_json::Value as Json;

/// Receives the frames of every session.
pub trait Events {
    /// Whether anyone listens to `session` (frames are only built when someone does).
    fn has_listeners(&self, session: &str) -> bool;
    /// Delivers `frame` (already carrying `sessionId`) to everyone listening to `session`.
    fn publish(&self, session: &str, frame: &Json);
    /// Delivers `frame` to every listener of the agent, whatever its session (`memory` frames).
    fn publish_agent(&self, frame: &Json);
    /// Reports a problem no request waits for (a failed memory extraction or embedding): the
    /// Workers layer logs it.
    fn warn(&self, message: &str);
    /// How long the phases of `what` (a turn before its model call) took, in milliseconds, in
    /// their order: the Workers layer logs them when asked to (`TURN_SPANS`), for the bench.
    fn spans(&self, _what: &str, _spans: &[(&'static str, f64)]) {}
    /// Tokens issued before `before_ms` were revoked: listeners that came in with one are
    /// closed (the Workers layer knows which sockets did).
    fn revoked(&self, _before_ms: i64) {}
}
