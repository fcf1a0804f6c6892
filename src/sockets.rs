//! WebSockets of the `SessionAgent` with the hibernation API: each socket is accepted with its
//! session id as first tag, so the runtime can evict the object while sockets stay open and wake
//! it for the next frame; [`Sockets`] delivers a session's frames to every socket with its tag.
//! The other tags say what the socket's token allows (`api::socket_tags` writes and reads them,
//! failing closed), so every frame is checked as its request would be.

use serde_json::Value as Json;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{worker_sys::DurableObjectState, State, WebSocket};

use session_agent_api::access::Claims;
use session_agent_api::socket_tags::{self, SocketTags, AGENT_TAG};
use session_agent_core::error::Result;
use session_agent_core::events::Events;

/// The object's accepted sockets, by session tag; and where its warnings and spans go.
pub(crate) struct Sockets {
    state: State,
    spans: SpanLog,
}

/// Whether the phases of each turn are logged (`TURN_SPANS` set: one JSON line per turn, for
/// `bench/latency.mjs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanLog {
    Logged,
    Off,
}

impl Sockets {
    pub(crate) fn new(state: &State, spans: SpanLog) -> Self {
        // Another handle on the same JavaScript object (the state is not `Clone` in Rust).
        let js: &JsValue = state.as_raw().as_ref();
        Sockets { state: State::from(js.clone().unchecked_into::<DurableObjectState>()), spans }
    }

    /// Accepts `ws` (the server end of a pair) for session `sid`, hibernatable, opened with the
    /// scoped token `claims` (none: the admin token or a binding), under a new id.
    pub(crate) fn accept(&self, ws: &WebSocket, sid: &str, claims: Option<&Claims>) -> Result<()> {
        let tags = socket_tags::encode(sid, &session_agent_core::ids::new_id()?, claims);
        let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
        self.state.accept_websocket_with_tags(ws, &tags);
        Ok(())
    }

    /// What the socket's tags say; a socket whose tags do not read (`socket_tags::decode`) is
    /// closed (1008) and opens nothing.
    pub(crate) fn tags_of(&self, ws: &WebSocket, agent: &str) -> Option<SocketTags> {
        match socket_tags::decode(&self.state.get_tags(ws), agent) {
            Ok(t) => Some(t),
            Err(e) => {
                worker::console_warn!("SessionAgent: closing a socket: {}", e.message);
                let _ = ws.close(Some(1008), Some("socket state unreadable: reconnect"));
                None
            }
        }
    }
}

/// The issue and expiry times (ms) of the token a socket was opened with (none: the admin token
/// or a binding); a socket whose tags do not read counts as expired long ago.
fn token_times(state: &State, ws: &WebSocket) -> Option<(i64, i64)> {
    match socket_tags::decode(&state.get_tags(ws), "") {
        Ok(t) => t.claims.map(|c| (c.issued_ms(), c.expires_ms())),
        Err(_) => Some((i64::MIN, i64::MIN)),
    }
}

/// Whether `ws` may still hear frames: a socket whose token expired (or whose tags do not read)
/// is closed instead (1008).
fn live(state: &State, ws: &WebSocket) -> bool {
    let expired = token_times(state, ws).is_some_and(|(_, exp)| exp <= worker::Date::now().as_millis() as i64);
    if expired {
        let _ = ws.close(Some(1008), Some("token expired"));
    }
    !expired
}

impl Events for Sockets {
    fn has_listeners(&self, session: &str) -> bool {
        !self.state.get_websockets_with_tag(session).is_empty()
    }

    fn publish(&self, session: &str, frame: &Json) {
        let text = frame.to_string();
        for ws in self.state.get_websockets_with_tag(session).iter().filter(|ws| live(&self.state, ws)) {
            // A socket closing right now is not an error of the write that published.
            let _ = ws.send_with_str(&text);
        }
    }

    fn publish_agent(&self, frame: &Json) {
        let text = frame.to_string();
        for ws in self.state.get_websockets_with_tag(AGENT_TAG).iter().filter(|ws| live(&self.state, ws)) {
            let _ = ws.send_with_str(&text);
        }
    }

    fn warn(&self, message: &str) {
        worker::console_warn!("SessionAgent: {message}");
    }

    fn spans(&self, what: &str, spans: &[(&'static str, f64)]) {
        if self.spans == SpanLog::Logged {
            let phases: serde_json::Map<String, Json> =
                spans.iter().map(|(k, v)| ((*k).to_owned(), Json::from(*v))).collect();
            worker::console_log!("{}", serde_json::json!({ "spans": what, "ms": phases }));
        }
    }

    fn revoked(&self, before_ms: i64) {
        for ws in self.state.get_websockets() {
            if token_times(&self.state, &ws).is_some_and(|(iat, _)| iat < before_ms) {
                // 1008: policy violation; the client must come back with a new token.
                let _ = ws.close(Some(1008), Some("token revoked"));
            }
        }
    }
}
