//! The agent turn over HTTP: `POST /sessions/{sid}/chat` as JSON, or as server-sent events with
//! `Accept: text/event-stream` (the WebSocket `chat` frame maps onto the JSON form). The body
//! is parsed here; the turn itself is [`crate::core::turn::run`].

use serde_json::{json, Map, Value as Json};

use super::http::{Request, Response};
use super::messages;
use crate::core::config::is_label;
use crate::core::env::Env;
use crate::core::error::{Error, Result};
use crate::core::llm::ToolSpec;
use crate::core::memory::After;
use crate::core::session::Session;
use crate::core::store::message::NewMessage;
use crate::core::turn::run::{turn, Ask, ChatEvent, MemoryUse, TurnRequest};

/// The caller's tools: offered to the model, answered by the caller.
fn client_tools(body: &Map<String, Json>) -> Result<Vec<ToolSpec>> {
    let Some(list) = body.get("tools") else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| Error::invalid("tools must be an array"))?;
    let mut out: Vec<ToolSpec> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let name = t.get("name").and_then(Json::as_str).unwrap_or_default();
        if !is_label(name) {
            return Err(Error::invalid(format!("tools[{i}].name must be 1-64 characters of [A-Za-z0-9_-]")));
        }
        let description = match t.get("description") {
            None | Some(Json::Null) => String::new(),
            Some(Json::String(d)) => d.clone(),
            Some(_) => return Err(Error::invalid(format!("tools[{i}].description must be a string"))),
        };
        let input_schema = match t.get("inputSchema") {
            None | Some(Json::Null) => json!({"type": "object", "properties": {}}),
            Some(s @ Json::Object(_)) => s.clone(),
            Some(_) => return Err(Error::invalid(format!("tools[{i}].inputSchema must be an object"))),
        };
        out.push(ToolSpec { name: name.to_owned(), description, input_schema });
    }
    Ok(out)
}

fn ask(body: &Map<String, Json>) -> Result<Ask> {
    match (body.get("message"), body.get("messages")) {
        (Some(m), None) => {
            let msg = NewMessage::from_json(m)?;
            if msg.role != "user" {
                return Err(Error::invalid("message.role must be \"user\""));
            }
            if crate::core::session::is_synthetic(&msg) {
                return Err(Error::invalid("message.id may not start with compaction_"));
            }
            Ok(Ask::Message { msg, parent: messages::parent(body)? })
        }
        (None, Some(list)) => {
            let messages = list.as_array().filter(|l| !l.is_empty()).cloned().ok_or_else(|| {
                Error::invalid("messages must be a non-empty array (the branch, with client tool results)")
            })?;
            Ok(Ask::Continue { messages })
        }
        _ => Err(Error::invalid("give either message (a new user message) or messages (a continuation)")),
    }
}

/// The turn a chat body asks for.
fn turn_request(req: &Request) -> Result<TurnRequest> {
    let body = req.json_object()?;
    let tools = client_tools(&body)?;
    let memory = match body.get("memory") {
        None | Some(Json::Bool(true)) => MemoryUse::AsConfigured,
        Some(Json::Bool(false)) => MemoryUse::Skip,
        Some(_) => return Err(Error::invalid("memory must be true or false")),
    };
    Ok(TurnRequest { ask: ask(&body)?, tools, memory })
}

/// One server-sent event: `data: <json>` and a blank line.
pub fn sse(frame: &Json) -> String {
    format!("data: {frame}\n\n")
}

/// The SSE frame of an event, if it has one.
pub fn event_frame(e: &ChatEvent) -> Option<Json> {
    match e {
        ChatEvent::Delta { message_id, text } => Some(json!({"type": "delta", "messageId": message_id, "text": text})),
        ChatEvent::Storing => None,
    }
}

/// `cancelled` when the request's turn was cancelled (a WebSocket `cancel` frame).
fn check_cancel(req: &Request) -> Result<()> {
    match &req.cancel {
        Some(flag) if flag.get() => {
            Err(Error::conflict("the turn was cancelled; nothing was stored").with_code("cancelled"))
        }
        _ => Ok(()),
    }
}

/// The closing frames of a finished turn: the stored message, then `[DONE]`.
pub fn closing_frames(message: &Json) -> String {
    format!("{}data: [DONE]\n\n", sse(&json!({"type": "message", "message": message})))
}

/// The SSE frame of a failed turn (after the stream started): `{type:"error", code, message}`.
pub fn error_frame(e: &Error) -> String {
    sse(&json!({"type": "error", "code": e.code(), "message": e.message}))
}

/// `POST /sessions/{sid}/chat`: `201 {messages: [assistant]}`, or with `Accept:
/// text/event-stream` the events of the turn in one answer (the Durable Object streams them as
/// they come instead, with [`stream`]). An error before the first event is an ordinary JSON
/// error answer.
pub async fn route(s: &Session<'_>, req: &Request) -> Result<Response> {
    let request = turn_request(req)?;
    if !req.wants_event_stream() {
        let done = turn(s, request, &mut |_| check_cancel(req)).await?;
        let mut resp = Response::json(201, &json!({ "messages": [done.message] }));
        resp.after.extend(done.after);
        return Ok(resp);
    }
    let mut body = String::new();
    let result = turn(s, request, &mut |e| {
        if let Some(f) = event_frame(&e) {
            body.push_str(&sse(&f));
        }
        Ok(())
    })
    .await;
    let mut after = None;
    match result {
        Ok(done) => {
            body.push_str(&closing_frames(&done.message));
            after = done.after;
        }
        Err(e) if body.is_empty() => return Err(e),
        Err(e) => body.push_str(&error_frame(&e)),
    }
    let mut resp = event_stream(body.into_bytes());
    resp.after.extend(after);
    Ok(resp)
}

/// A `200 text/event-stream` answer with `body`.
pub fn event_stream(body: Vec<u8>) -> Response {
    Response {
        status: 200,
        headers: vec![
            ("content-type".into(), "text/event-stream; charset=utf-8".into()),
            ("cache-control".into(), "no-cache".into()),
        ],
        body,
        warnings: Vec::new(),
        after: Vec::new(),
    }
}

/// A piece of a streamed turn for the Workers layer: the text of server-sent events, or the
/// error that ended the turn before anything was sent (then answered as a JSON error).
pub enum Streamed {
    Data(String),
    Fail(Error),
}

/// Runs `POST /sessions/{sid}/chat` with `Accept: text/event-stream`, handing each event to
/// `send` as soon as it exists. `send` failing (the client went away) aborts the turn, which
/// then stores nothing. Returns the work the turn leaves for after the answer (memory
/// extraction): the caller closes the stream first, then runs [`super::sweep`] and
/// [`super::after`], so neither delays the answer.
pub async fn stream(env: &Env<'_>, req: &Request, send: &mut dyn FnMut(Streamed) -> Result<()>) -> Vec<After> {
    let started = std::cell::Cell::new(false);
    let result = async {
        let sid = super::session_of(req)?;
        let request = turn_request(req)?;
        turn(&Session::new(env, &sid), request, &mut |e| match event_frame(&e) {
            Some(f) => {
                started.set(true);
                send(Streamed::Data(sse(&f)))
            }
            None => Ok(()),
        })
        .await
    }
    .await;
    match result {
        Ok(done) => {
            let _ = send(Streamed::Data(closing_frames(&done.message)));
            done.after.into_iter().collect()
        }
        Err(e) if !started.get() => {
            let _ = send(Streamed::Fail(e));
            Vec::new()
        }
        Err(e) => {
            let _ = send(Streamed::Data(error_frame(&e)));
            Vec::new()
        }
    }
}
