//! WebSockets of the `SessionAgent` with the hibernation API: each socket is accepted with its
//! session id as first tag, so the runtime can evict the object while sockets stay open and wake
//! it for the next frame; [`Sockets`] delivers a session's frames to every socket with its tag.
//! The other tags say what the socket's token allows: [`AGENT_TAG`] on sockets that may hear the
//! agent's `memory` frames (a token not limited to sessions), and the scoped token's claims (its
//! scope, issue and expiry times), so every frame is checked as its request would be.

use serde_json::Value as Json;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{worker_sys::DurableObjectState, State, WebSocket};

use crate::api::access::{Claims, Scope};
use crate::core::events::Events;

/// The tag of sockets whose token opens the whole agent (the admin token, or a scoped token not
/// limited to sessions): they hear `memory` frames. Tags other than the session's start with `#`,
/// which no session id has, so a session can never be mistaken for one.
const AGENT_TAG: &str = "#agent";
/// The prefix of the tag that names one socket (`#id:<uuid>`): its running turn can be cancelled.
const ID_TAG: &str = "#id:";
/// The prefix of the tag that carries a scoped token's claims: `#token:<scope>:<iat ms>:<exp ms>`.
const TOKEN_TAG: &str = "#token:";

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

    /// Accepts `ws` (the server end of a pair) for session `sid`, hibernatable, opened with the
    /// scoped token `claims` (none: the admin token or a binding).
    pub fn accept(&self, ws: &WebSocket, sid: &str, claims: Option<&Claims>) {
        let mut tags = vec![sid.to_owned(), format!("{ID_TAG}{}", crate::core::ids::new_id().unwrap_or_default())];
        if claims.is_none_or(|c| !c.limited()) {
            tags.push(AGENT_TAG.to_owned());
        }
        if let Some(c) = claims {
            let scope = if c.scope == Scope::Read { "read" } else { "write" };
            tags.push(format!("{TOKEN_TAG}{scope}:{}:{}", c.issued_ms(), c.expires_ms()));
        }
        let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
        self.state.accept_websocket_with_tags(ws, &tags);
    }

    /// The socket's own id (sockets accepted before ids were given have none).
    pub fn id_of(&self, ws: &WebSocket) -> Option<String> {
        self.state.get_tags(ws).into_iter().skip(1).find_map(|t| t.strip_prefix(ID_TAG).map(str::to_owned))
    }

    /// The session a socket was accepted for, and the claims of its token (for this session:
    /// a limited token's other sessions do not matter on this socket).
    pub fn session_of(&self, ws: &WebSocket, agent: &str) -> Option<(String, Option<Claims>)> {
        let tags = self.state.get_tags(ws);
        let sid = tags.first()?.clone();
        let claims = token_tag(&tags).map(|(scope, iat, exp)| {
            let limited = !tags[1..].iter().any(|t| t == AGENT_TAG);
            Claims {
                agent: agent.to_owned(),
                scope,
                sessions: limited.then(|| vec![sid.clone()]),
                iat: iat as f64 / 1000.0,
                exp: exp as f64 / 1000.0,
            }
        });
        Some((sid, claims))
    }
}

/// The scope, issue time and expiry (ms) of the token a socket was opened with, from its tags
/// (none: the admin token or a binding). The session's own tag, first, is never read as one.
fn token_tag(tags: &[String]) -> Option<(Scope, i64, i64)> {
    let t = tags.get(1..)?.iter().find_map(|t| t.strip_prefix(TOKEN_TAG))?;
    let mut parts = t.split(':');
    let scope = if parts.next()? == "read" { Scope::Read } else { Scope::Write };
    Some((scope, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether `ws` may still hear frames: a socket whose token expired is closed instead (1008).
fn live(state: &State, ws: &WebSocket) -> bool {
    let expired =
        token_tag(&state.get_tags(ws)).is_some_and(|(_, _, exp)| exp <= worker::Date::now().as_millis() as i64);
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

    fn revoked(&self, before_ms: i64) {
        for ws in self.state.get_websockets() {
            if token_tag(&self.state.get_tags(&ws)).is_some_and(|(_, iat, _)| iat < before_ms) {
                // 1008: policy violation; the client must come back with a new token.
                let _ = ws.close(Some(1008), Some("token revoked"));
            }
        }
    }
}
