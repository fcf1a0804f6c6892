//! The WebSocket protocol of a session (`GET /sessions/{sid}/ws`): each client frame becomes the
//! HTTP request it stands for, so a frame does exactly what its route does. Answers meant for
//! the sending socket only (`history`, `pong`, `error`) are returned; `message`, `delta` and
//! `status` frames reach every socket of the session through [`session_agent_core::events::Events`].
//!
//! Client frames: `{type:"append", message, parentId?}`, `{type:"history", leafId?}`,
//! `{type:"chat", message, parentId?, tools?}` (or `messages` to continue after client tools),
//! `{type:"cancel"}` (stops the socket's running turn, which keeps what was shown: its `message`
//! frame follows, no error), `{type:"ping"}`. A frame that is not one of these gets an
//! `error` frame; the socket stays open. A `chat` frame's user message is echoed to its sender
//! at once as `pending` ([`pending_echo`]); the turn's `delta`, `tool` and `reasoning` progress
//! frames reach every socket of the session.

use serde_json::{Map, Value as Json};

use super::access::{Claims, CLAIMS_HEADER};
use super::http::Method;
use super::{handle, Request};
use session_agent_core::after::After;
use session_agent_core::env::Env;
use session_agent_core::error::{Error, ErrorKind};
use session_agent_core::live::stop::Stop;
use session_agent_core::wire::{Failure, Frame, True, Whole};

/// The `messages` of a `history` frame whose answer had none.
static NO_MESSAGES: Json = Json::Array(Vec::new());

/// The `error` frame: `code` is the `error.code` the frame's route would answer.
pub fn error_frame(sid: &str, code: &str, message: &str) -> Json {
    Frame::Error { session_id: sid, failure: Failure { code, message } }.to_json()
}

fn failed(sid: &str, e: &Error) -> Vec<Json> {
    vec![error_frame(sid, e.code(), &e.message)]
}

/// `/sessions/<sid>` with the id percent-encoded again (it was decoded from the path).
fn session_path(sid: &str) -> String {
    let enc: String = form_urlencoded::byte_serialize(sid.as_bytes()).collect();
    format!("/sessions/{enc}")
}

/// A frame handled: what the sending socket gets back, and warnings for the operator's log.
pub struct Handled {
    pub frames: Vec<Json>,
    pub warnings: Vec<String>,
    /// Work to run after the frames are sent (see [`super::after()`]).
    pub after: Vec<After>,
    /// The frame was `cancel`: the socket's running turn is to stop.
    pub cancel: bool,
}

/// The echo a socket gets of the user message its `chat` frame sends, before the turn runs:
/// `{type:"message", sessionId, message, pending: true}` (stored with the reply, all or nothing;
/// a failed turn ends with an `error` frame instead). `None` for any other frame, a frame its
/// token may not send, or one without a `message` object.
pub fn pending_echo(sid: &str, claims: Option<&Claims>, text: &str) -> Option<Json> {
    if text.len() > MAX_FRAME_BYTES || claims.is_some_and(|c| c.scope == super::access::Scope::Read) {
        return None;
    }
    let obj: Map<String, Json> = serde_json::from_str(text).ok()?;
    if obj.get("type").and_then(Json::as_str) != Some("chat") {
        return None;
    }
    let message = obj.get("message").filter(|m| m.is_object())?;
    Some(Frame::Message { session_id: sid, whole: Whole { message }, pending: Some(True) }.to_json())
}

/// Largest client frame answered, in bytes: half of the runtime's own limit (workerd closes the
/// socket with 1009 on a frame over 32 MiB before the object sees it), so a big frame gets an
/// `error` frame and the socket stays usable. Bigger messages go over HTTP (32 MiB bodies).
pub(crate) const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Answers one text frame from a socket of session `sid` (already checked), opened with the
/// scoped token `claims` (none: the admin token or a binding); each frame is checked against
/// them as its request would be (`forbidden`, or `unauthorized` once expired or revoked).
pub async fn frame(env: &Env<'_>, sid: &str, claims: Option<&Claims>, text: &str, cancel: &Stop) -> Handled {
    if text.len() > MAX_FRAME_BYTES {
        let e = Error::too_large(format!(
            "a frame may have at most {MAX_FRAME_BYTES} bytes (this one has {}); send big messages over HTTP",
            text.len()
        ));
        return Handled { frames: failed(sid, &e), warnings: Vec::new(), after: Vec::new(), cancel: false };
    }
    answer(env, sid, claims, text, cancel).await
}

async fn answer(env: &Env<'_>, sid: &str, claims: Option<&Claims>, text: &str, cancel: &Stop) -> Handled {
    let only = |frames: Vec<Json>| Handled { frames, warnings: Vec::new(), after: Vec::new(), cancel: false };
    let obj: Map<String, Json> = match serde_json::from_str(text) {
        Ok(Json::Object(o)) => o,
        _ => return only(failed(sid, &Error::invalid("a frame must be a JSON object with a type"))),
    };
    let kind = obj.get("type").and_then(Json::as_str).unwrap_or_default().to_owned();
    let mut body = obj.clone();
    body.remove("type");
    let base = session_path(sid);
    let req = match kind.as_str() {
        "ping" => return only(vec![Frame::Pong.to_json()]),
        "cancel" => return Handled { cancel: true, ..only(Vec::new()) },
        "append" => Request::new(Method::Post, &format!("{base}/messages")).json(&Json::Object(body)),
        "chat" if body.contains_key("trigger") => {
            let e = Error::invalid("a chat frame takes message or messages; the useChat body (trigger) is for HTTP");
            return only(failed(sid, &e));
        }
        "chat" => Request { stop: Some(cancel.clone()), ..Request::new(Method::Post, &format!("{base}/chat")) }
            .json(&Json::Object(body)),
        "history" => match obj.get("leafId") {
            None | Some(Json::Null) => Request::new(Method::Get, &format!("{base}/history")),
            Some(Json::String(l)) => {
                let query = form_urlencoded::Serializer::new(String::new()).append_pair("leaf", l).finish();
                Request::new(Method::Get, &format!("{base}/history?{query}"))
            }
            Some(_) => return only(failed(sid, &Error::invalid("leafId must be a string"))),
        },
        "" => return only(failed(sid, &Error::invalid("a frame must be a JSON object with a type"))),
        other => {
            return only(failed(
                sid,
                &Error::invalid(format!("unknown frame type {other:?}: one of append, history, chat, cancel, ping")),
            ))
        }
    };
    let req = match claims.map(serde_json::to_string) {
        Some(Ok(c)) => req.header(CLAIMS_HEADER, &c),
        _ => req,
    };
    let resp = handle(env, &req).await;
    let (warnings, after) = (resp.warnings.clone(), resp.after.clone());
    if resp.status >= 400 {
        let body = resp.body_json();
        let code = body.pointer("/error/code").and_then(Json::as_str).unwrap_or(ErrorKind::Internal.code());
        let message = body.pointer("/error/message").and_then(Json::as_str).unwrap_or("request failed");
        return Handled { frames: vec![error_frame(sid, code, message)], warnings, after, cancel: false };
    }
    let frames = match kind.as_str() {
        "history" => {
            let body = resp.body_json();
            let messages = body.get("messages").unwrap_or(&NO_MESSAGES);
            vec![Frame::History { session_id: sid, messages }.to_json()]
        }
        // The stored messages, deltas and status reached every socket as they happened.
        _ => Vec::new(),
    };
    Handled { frames, warnings, after, cancel: false }
}
