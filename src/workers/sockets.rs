//! WebSockets of the `SessionAgent` with the hibernation API: each socket is accepted with its
//! session id as tag, so the runtime can evict the object while sockets stay open and wake it
//! for the next frame; [`Sockets`] delivers a session's frames to every socket with its tag.

use serde_json::Value as Json;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{worker_sys::DurableObjectState, State, WebSocket};

use crate::core::events::Events;

/// The object's accepted sockets, by session tag.
pub struct Sockets {
    state: State,
}

impl Sockets {
    pub fn new(state: &State) -> Self {
        // Another handle on the same JavaScript object (the state is not `Clone` in Rust).
        let js: &JsValue = state.as_raw().as_ref();
        Sockets { state: State::from(js.clone().unchecked_into::<DurableObjectState>()) }
    }

    /// Accepts `ws` (the server end of a pair) for session `sid`, hibernatable.
    pub fn accept(&self, ws: &WebSocket, sid: &str) {
        self.state.accept_websocket_with_tags(ws, &[sid]);
    }

    /// The session a socket was accepted for.
    pub fn session_of(&self, ws: &WebSocket) -> Option<String> {
        self.state.get_tags(ws).into_iter().next()
    }
}

impl Events for Sockets {
    fn has_listeners(&self, session: &str) -> bool {
        !self.state.get_websockets_with_tag(session).is_empty()
    }

    fn publish(&self, session: &str, frame: &Json) {
        let text = frame.to_string();
        for ws in self.state.get_websockets_with_tag(session) {
            // A socket closing right now is not an error of the write that published.
            let _ = ws.send_with_str(&text);
        }
    }

    fn publish_agent(&self, frame: &Json) {
        let text = frame.to_string();
        for ws in self.state.get_websockets() {
            let _ = ws.send_with_str(&text);
        }
    }

    fn warn(&self, message: &str) {
        worker::console_warn!("SessionAgent: {message}");
    }
}
