//! The agent turn over HTTP: `POST /sessions/{sid}/chat` as JSON, as server-sent events with
//! `Accept: text/event-stream`, or, for the AI SDK's `useChat` body (`{id?, messages, trigger,
//! messageId?}`), as the AI SDK's UI message stream ([`super::ui_stream`]). The WebSocket `chat`
//! frame maps onto the JSON form. The body is parsed here; the turn itself is
//! [`session_agent_core::turn::run`]. Also the agent-level `POST /chat` (the default session),
//! the resume request (`GET …/chat/{chatId}/stream`: the running turn replayed from its start and
//! followed live) and `POST …/chat/stop`.

use serde::Serialize;
use serde_json::{json, Map, Value as Json};

use futures::channel::mpsc::UnboundedReceiver;
use futures::StreamExt;

use super::access::{claims_of, permit, Needs, Who};
use super::call::{Call, Params, Pending};
use super::http::{Request, Response};
use super::messages;
use super::ui_stream::{UiStream, HEADER};
use session_agent_core::after::After;
use session_agent_core::blobs::BoxFuture;
use session_agent_core::config::is_label;
use session_agent_core::config::{CacheConfig, OnDisconnect};
use session_agent_core::env::Env;
use session_agent_core::error::{Error, Result};
use session_agent_core::live::stop::Stop;
use session_agent_core::live::{Ending, Follow, Update};
use session_agent_core::llm::ToolSpec;
use session_agent_core::memory::Category;
use session_agent_core::session::Session;
use session_agent_core::store::message::NewMessage;
use session_agent_core::turn::run::{
    turn, Ask, CacheUse, ChatEvent, Ended, MemoryUse, Record, Trigger, Turn, TurnRequest,
};
use session_agent_core::wire::{Delta, Failure, Whole};

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
    if let Some(trigger) = body.get("trigger") {
        let trigger = match trigger.as_str() {
            Some("submit-message") => Trigger::Submit,
            Some("regenerate-message") => Trigger::Regenerate,
            _ => return Err(Error::invalid("trigger must be \"submit-message\" or \"regenerate-message\"")),
        };
        for key in ["id", "messageId"] {
            if body.get(key).is_some_and(|v| !v.is_string() && !v.is_null()) {
                return Err(Error::invalid(format!("{key} must be a string")));
            }
        }
        if body.contains_key("message") {
            return Err(Error::invalid("a useChat body (with trigger) has messages, not message"));
        }
        let messages = body.get("messages").and_then(Json::as_array).filter(|l| !l.is_empty()).cloned();
        let messages = messages.ok_or_else(|| Error::invalid("messages must be a non-empty array"))?;
        if let Some(i) = messages.iter().position(|m| !m.is_object()) {
            return Err(Error::invalid(format!("messages[{i}] must be an object")));
        }
        return Ok(Ask::Chat { messages, trigger });
    }
    match (body.get("message"), body.get("messages")) {
        (Some(m), None) => {
            let msg = NewMessage::from_json(m)?;
            if msg.role != "user" {
                return Err(Error::invalid("message.role must be \"user\""));
            }
            if session_agent_core::session::is_synthetic(&msg) {
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

/// The fields of a call's memory spec.
const MEMORY_SPEC: [&str; 5] = ["inject", "extract", "tags", "categories", "limit"];

/// The `memory` of a chat body: absent or `true` as configured, `false` neither inject nor
/// extract, or a spec `{inject?, extract?, tags?, categories?, limit?}` that overrides the
/// configuration for this turn (`null` fields as absent). Anything else is `400`.
fn memory_use(body: &Map<String, Json>) -> Result<MemoryUse> {
    let spec = match body.get("memory") {
        None | Some(Json::Bool(true)) => return Ok(MemoryUse::default()),
        Some(Json::Bool(false)) => return Ok(MemoryUse::skip()),
        Some(Json::Object(o)) => o,
        Some(_) => {
            return Err(Error::invalid(format!(
                "memory must be true, false or an object of {}",
                MEMORY_SPEC.join(", ")
            )))
        }
    };
    if let Some(k) = spec.keys().find(|k| !MEMORY_SPEC.contains(&k.as_str())) {
        return Err(Error::invalid(format!("memory.{k} is not known: expected {}", MEMORY_SPEC.join(", "))));
    }
    let field = |k: &str| spec.get(k).filter(|v| !v.is_null());
    let switch = |k: &str| match field(k) {
        None => Ok(None),
        Some(Json::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(Error::invalid(format!("memory.{k} must be true or false"))),
    };
    let strings = |k: &str, what: &str| -> Result<Option<Vec<String>>> {
        let Some(v) = field(k) else { return Ok(None) };
        let list = v.as_array().filter(|a| a.iter().all(Json::is_string));
        let list = list.ok_or_else(|| Error::invalid(format!("memory.{k} must be an array of {what}")))?;
        Ok(Some(list.iter().filter_map(Json::as_str).map(str::to_owned).collect()))
    };
    let categories = strings("categories", "core, daily or conversation")?
        .map(|list| {
            let parse = |c: &String| Category::parse(c).ok();
            list.iter()
                .map(parse)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::invalid("memory.categories must be an array of core, daily or conversation"))
        })
        .transpose()?;
    let limit = match field("limit") {
        None => None,
        Some(v) => Some(v.as_i64().ok_or_else(|| Error::invalid("memory.limit must be an integer from 1 to 50"))?),
    };
    let m = MemoryUse {
        inject: switch("inject")?,
        extract: switch("extract")?,
        // Compared with the stored tags, which are trimmed.
        tags: strings("tags", "tags")?.map(|t| t.iter().map(|t| t.trim().to_owned()).collect()),
        categories,
        limit,
    };
    m.check()?;
    Ok(m)
}

/// The turn a chat body asks for.
fn turn_request(req: &Request) -> Result<TurnRequest> {
    let body = req.json_object()?;
    let tools = client_tools(&body)?;
    let memory = memory_use(&body)?;
    let cache = match body.get("cache") {
        None => CacheUse::AsConfigured,
        Some(v) => CacheUse::Instead(CacheConfig::from_json(v, "cache")?),
    };
    let stop = req.stop.clone().unwrap_or_default();
    Ok(TurnRequest {
        ask: ask(&body)?,
        tools,
        memory,
        stop,
        cache,
        instructions: None,
        record: Record::Store,
        model: None,
    })
}

/// How a turn's answer is streamed: as our events, or as the AI SDK's UI message stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `delta` events, then `message`, then `[DONE]` (`Accept: text/event-stream`).
    Events,
    /// The AI SDK's UI message stream (a `useChat` body).
    UiMessages,
    /// OpenAI's `chat.completion.chunk` events (`POST /v1/chat/completions` with `stream`).
    Completions,
    /// OpenAI's Responses events (`POST /v1/responses` with `stream`).
    Responses,
}

impl Dialect {
    /// The dialect a chat request is answered in: the UI message stream for a `useChat` body
    /// (whatever `Accept` says: `useChat` sends none), ours with `Accept: text/event-stream`,
    /// none (a JSON answer) otherwise. The body is scanned once, here.
    pub fn of(req: &Request) -> Option<Dialect> {
        if is_ui_body(&req.body) {
            Some(Dialect::UiMessages)
        } else if req.wants_event_stream() {
            Some(Dialect::Events)
        } else {
            None
        }
    }

    /// The headers of a streamed answer (the UI message stream's carry its own header).
    pub fn headers(self) -> Vec<(String, String)> {
        let mut h = vec![
            ("content-type".to_owned(), "text/event-stream; charset=utf-8".to_owned()),
            ("cache-control".to_owned(), "no-cache".to_owned()),
        ];
        if self == Dialect::UiMessages {
            h.push((HEADER.0.to_owned(), HEADER.1.to_owned()));
            h.push(("x-accel-buffering".to_owned(), "no".to_owned()));
        }
        h
    }
}

/// Whether a chat body is the AI SDK's `useChat` body (it has a `trigger`). Reads only the
/// top-level keys' names.
fn is_ui_body(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        trigger: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(body).is_ok_and(|p| p.trigger.is_some())
}

/// The JSON of one server-sent event of a streamed turn in our dialect (docs/openapi.yaml
/// `ChatEvent`): the WebSocket frame of the same name without its `sessionId` (the stream answers
/// one request of one session), so the shapes are the frames' own.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum SseEvent<'a> {
    /// The next piece of the reply's text.
    Delta(Delta<'a>),
    /// The stored reply; `[DONE]` follows.
    Message(Whole<'a>),
    /// What failed after the stream started (nothing was stored); the stream ends.
    Error(Failure<'a>),
}

/// One server-sent event: `data: <json>` and a blank line.
fn sse(event: &SseEvent<'_>) -> String {
    format!("data: {}\n\n", serde_json::to_string(event).unwrap_or_default())
}

/// The events of a streamed turn, in one of the two dialects.
enum Encoder {
    /// Ours: `delta` events, then `message`, then `[DONE]`; `error` on a failure.
    Events,
    /// The AI SDK's UI message stream.
    Ui(UiStream),
}

/// What writes the events of a streamed turn in one dialect: ours, the AI SDK's, or OpenAI's
/// (`super::openai`).
pub(crate) trait Encode {
    /// The text of one event, if it has any.
    fn event(&mut self, e: &ChatEvent) -> Option<String>;
    /// The closing events of a finished turn (a stopped one's message, if anything was shown).
    fn done(&mut self, turn: &Turn) -> String;
    /// The closing events of a turn that failed after its stream started.
    fn failed(&mut self, e: &Error) -> String;
}

impl Encoder {
    fn new(dialect: Dialect) -> Self {
        match dialect {
            Dialect::UiMessages => Encoder::Ui(UiStream::default()),
            _ => Encoder::Events,
        }
    }
}

impl Encode for Encoder {
    fn event(&mut self, e: &ChatEvent) -> Option<String> {
        match (self, e) {
            (Encoder::Events, ChatEvent::Delta { message_id, text }) => {
                Some(sse(&SseEvent::Delta(Delta { message_id, text })))
            }
            (Encoder::Events, _) => None,
            (Encoder::Ui(u), e) => Some(u.event(e)).filter(|t| !t.is_empty()),
        }
    }

    fn done(&mut self, turn: &Turn) -> String {
        match (self, &turn.message, turn.ended) {
            (Encoder::Events, Some(message), _) => {
                format!("{}data: [DONE]\n\n", sse(&SseEvent::Message(Whole { message })))
            }
            (Encoder::Events, None, _) => "data: [DONE]\n\n".to_owned(),
            (Encoder::Ui(u), _, Ended::Stopped) | (Encoder::Ui(u), None, _) => u.stopped(),
            (Encoder::Ui(u), Some(message), Ended::Answered) => u.finish(message),
        }
    }

    fn failed(&mut self, e: &Error) -> String {
        match self {
            Encoder::Events => sse(&SseEvent::Error(Failure { code: e.code(), message: &e.message })),
            Encoder::Ui(u) => u.error(e),
        }
    }
}

/// `POST /sessions/{sid}/chat`: `201 {messages: [assistant]}`, or the events of the turn in one
/// answer (with `Accept: text/event-stream`, or the UI message stream for a `useChat` body; the
/// Durable Object streams them as they come instead, with [`stream`]). An error before the
/// first event is an ordinary JSON error answer.
pub(crate) fn route<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move { answer(&c.session(), c.req).await })
}

async fn answer(s: &Session<'_>, req: &Request) -> Result<Response> {
    let request = turn_request(req)?;
    let Some(dialect) = Dialect::of(req) else {
        let done = turn(s, request, &mut |_| Ok(())).await?;
        let mut resp = Response::json(201, &json!({ "messages": done.message.into_iter().collect::<Vec<_>>() }));
        resp.after.extend(done.after);
        return Ok(resp);
    };
    answered(s, request, &mut Encoder::new(dialect), dialect.headers()).await
}

/// A turn's events in `encoder`'s dialect as one answer with `headers` (for a caller that
/// cannot stream); an error before the first event is an ordinary error answer.
pub(crate) async fn answered(
    s: &Session<'_>,
    request: TurnRequest,
    encoder: &mut dyn Encode,
    headers: Vec<(String, String)>,
) -> Result<Response> {
    let mut body = String::new();
    let result = turn(s, request, &mut |e| {
        if let Some(text) = encoder.event(&e) {
            body.push_str(&text);
        }
        Ok(())
    })
    .await;
    let mut after = Vec::new();
    match result {
        Ok(done) => {
            body.push_str(&encoder.done(&done));
            after = done.after;
        }
        Err(e) if body.is_empty() => return Err(e),
        Err(e) => body.push_str(&encoder.failed(&e)),
    }
    Ok(Response { status: 200, headers, body: body.into_bytes(), warnings: Vec::new(), after })
}

/// A piece of a streamed turn for the Workers layer: the text of server-sent events, or the
/// error that ended the turn before anything was sent (then answered as a JSON error).
pub enum Streamed {
    Data(String),
    Fail(Error),
}

/// Runs a streamed turn of session `sid` in `dialect` (see `stream`), for a request `env`
/// admitted (`crate::object::Object::fetch` runs it in a task of its own; the native tests
/// drive it with a client of their own). Boxed: see `crate::handle`.
pub fn stream_turn<'a>(
    env: &'a Env<'a>,
    sid: &'a str,
    req: &'a Request,
    dialect: Dialect,
    gone: &'a Stop,
    send: &'a mut dyn FnMut(Streamed) -> Result<()>,
) -> BoxFuture<'a, Vec<After>> {
    Box::pin(async move { stream(&Session::new(env, sid), req, dialect, gone, send).await })
}

/// Runs a streamed `POST /sessions/{sid}/chat` in `dialect`, handing each event to `send` as
/// soon as it exists. `gone` is set when the client went away (as `send`
/// failing says too): with `chat.onDisconnect: "stop"` that stops the turn, which keeps what
/// was shown; with `"finish"` the turn runs on for the resume request. Returns the work left
/// for after the answer: the sweep, as after every write ([`super::handle`]), then what the turn
/// left (compaction, memory extraction). The caller closes the stream first and then runs it
/// ([`super::after()`]), so none of it delays the answer.
pub(crate) async fn stream(
    s: &Session<'_>,
    req: &Request,
    dialect: Dialect,
    gone: &Stop,
    send: &mut dyn FnMut(Streamed) -> Result<()>,
) -> Vec<After> {
    streamed(s, turn_request(req), &mut Encoder::new(dialect), gone, send).await
}

/// Runs the streamed turn `request` (or answers its refusal) in `encoder`'s dialect: see
/// [`stream`].
pub(crate) async fn streamed(
    s: &Session<'_>,
    request: Result<TurnRequest>,
    encoder: &mut dyn Encode,
    gone: &Stop,
    send: &mut dyn FnMut(Streamed) -> Result<()>,
) -> Vec<After> {
    let started = std::cell::Cell::new(false);
    let finish = s.env.config.chat.on_disconnect == OnDisconnect::Finish;
    let result = async {
        let mut request = request?;
        if !finish {
            request.stop = gone.clone();
        }
        turn(s, request, &mut |e| match encoder.event(&e) {
            Some(text) => {
                started.set(true);
                // A client that went away stops the turn, unless it is to finish.
                send(Streamed::Data(text)).or_else(|e| if finish { Ok(()) } else { Err(e) })
            }
            None => Ok(()),
        })
        .await
    }
    .await;
    let mut after = vec![After::Sweep];
    if let Some(log) = result.as_ref().err().and_then(|e| e.log.as_deref()) {
        s.env.events.warn(log);
    }
    match result {
        Ok(done) => {
            let _ = send(Streamed::Data(encoder.done(&done)));
            after.extend(done.after);
            if s.env.embeddings.is_on() {
                after.push(After::Embed);
            }
        }
        Err(e) if !started.get() => {
            let _ = send(Streamed::Fail(e));
        }
        Err(e) => {
            let _ = send(Streamed::Data(encoder.failed(&e)));
        }
    }
    after
}

/// The session of the agent-level `POST /chat`: the body's `sessionId` (or `session_id`, as the
/// seed's webhooks send it), else the useChat body's `id`, else `dashboard` (a session is
/// registered, named after its id, by its first write). A token limited to some sessions must
/// open it, as on the session's own route.
pub(crate) fn named_session(req: &Request) -> Result<String> {
    let body = req.json_object()?;
    let mut named = None;
    for key in ["sessionId", "session_id", "id"] {
        match body.get(key) {
            None | Some(Json::Null) => continue,
            Some(Json::String(s)) => {
                named = Some(s.clone());
                break;
            }
            Some(_) => return Err(Error::invalid(format!("{key} must be a string (a session id)"))),
        }
    }
    let sid = named.unwrap_or_else(|| DEFAULT_SESSION.to_owned());
    super::http::check_name("sessionId", &sid)?;
    opens(req, &sid, Needs::Write)?;
    Ok(sid)
}

/// Refuses a request of the agent-level chat routes whose token does not open `sid` (as the
/// session's own routes would).
pub(crate) fn opens(req: &Request, sid: &str, needs: Needs) -> Result<()> {
    let Some(claims) = claims_of(req)? else { return Ok(()) };
    permit(&claims, Who::Session, Some(sid), needs)
}

/// The session `POST /chat` talks to when its body names none.
pub const DEFAULT_SESSION: &str = "dashboard";

/// `POST /chat`: the turn of [`route`], in the session [`target`] names.
pub(crate) fn agent_route<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let sid = named_session(c.req)?;
        answer(&Session::new(c.env, &sid), c.req).await
    })
}

/// `POST /sessions/{sid}/chat/stop`: stops the session's running turn (it keeps what was shown);
/// `{stopped}` says whether one was running.
pub(crate) fn stop(c: &Call<'_>) -> Result<Response> {
    Ok(Response::json(200, &json!({ "stopped": c.env.live.stop(&c.params.sid) })))
}

/// The session of a resume request with path parameters `params`: `{sid}` of the session
/// route, `{chatId}` of the agent-level one.
pub(crate) fn resumed_session(req: &Request, params: &Params) -> Result<String> {
    match params.sid.is_empty() {
        false => Ok(params.sid.clone()),
        true => {
            super::http::check_name("chatId (the session)", &params.chat)?;
            opens(req, &params.chat, Needs::Read)?;
            Ok(params.chat.clone())
        }
    }
}

/// The header of a resume answer that says how many bytes of events the running turn keeps for
/// its readers (what its replay costs the object's memory).
pub const REPLAY_BYTES_HEADER: &str = "x-replay-bytes";

/// The answer to the AI SDK's resume request: the session's running turn as a UI message
/// stream, replayed from its `start` (all of it at once) and then followed live to `[DONE]`.
pub struct Resume {
    encoder: UiStream,
    replay: Option<String>,
    live: UnboundedReceiver<Update>,
    ended: bool,
    /// Bytes the running turn keeps for its followers.
    pub buffered: usize,
}

impl Resume {
    /// Follows `follow`.
    pub fn new(follow: Follow) -> Resume {
        let mut encoder = UiStream::default();
        let replay: String = follow.replay.iter().map(|e| encoder.event(e)).collect();
        Resume { encoder, replay: Some(replay), live: follow.live, ended: false, buffered: follow.bytes }
    }

    /// The next text of the stream; `None` once it is over.
    pub async fn next(&mut self) -> Option<String> {
        if let Some(replay) = self.replay.take().filter(|r| !r.is_empty()) {
            return Some(replay);
        }
        while !self.ended {
            let update = self.live.next().await;
            let text = match update {
                Some(Update::Event(e)) => self.encoder.event(&e),
                Some(Update::End(Ending::Stored(Some(m)))) if !is_stopped(&m) => {
                    self.ended = true;
                    self.encoder.finish(&m)
                }
                Some(Update::End(Ending::Stored(_))) => {
                    self.ended = true;
                    self.encoder.stopped()
                }
                Some(Update::End(Ending::Failed(e))) => {
                    self.ended = true;
                    self.encoder.error(&e)
                }
                None => {
                    // The turn is gone without an end (its object is shutting down).
                    self.ended = true;
                    self.encoder.error(&Error::internal("the turn ended without an answer"))
                }
            };
            if !text.is_empty() {
                return Some(text);
            }
        }
        None
    }
}

/// Whether a stored reply was stopped (`metadata.stopped`).
fn is_stopped(message: &Json) -> bool {
    message.pointer("/metadata/stopped") == Some(&Json::Bool(true))
}

/// `GET /sessions/{sid}/chat/{chatId}/stream` (and `GET /chat/{chatId}/stream`) when it is not
/// streamed: `204` when no turn runs. A running turn is followed only as a stream, which the
/// Durable Object answers itself with [`super::resume`] before any request reaches the route
/// table; here (a caller of [`super::handle`] that cannot stream) it is a `409`.
pub(crate) fn resume_route(c: &Call<'_>) -> Result<Response> {
    let sid = resumed_session(c.req, &c.params)?;
    match c.env.live.running(&sid) {
        false => Ok(Response::no_content()),
        true => Err(Error::conflict(
            "a running turn is followed as a stream (GET …/chat/{chatId}/stream to the Durable Object)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our dialect's bytes: each event is the WebSocket frame of its name without `sessionId`.
    #[test]
    fn events_are_the_frames_without_the_session() {
        let mut enc = Encoder::new(Dialect::Events);
        let delta = ChatEvent::Delta { message_id: "a".into(), text: "Hi".into() };
        assert_eq!(
            enc.event(&delta).as_deref(),
            Some("data: {\"type\":\"delta\",\"messageId\":\"a\",\"text\":\"Hi\"}\n\n")
        );
        assert_eq!(enc.event(&ChatEvent::Step), None);
        assert_eq!(
            enc.done(&Turn { message: Some(json!({"id": "a"})), ended: Ended::Answered, after: Vec::new() }),
            "data: {\"type\":\"message\",\"message\":{\"id\":\"a\"}}\n\ndata: [DONE]\n\n"
        );
        let stopped_early = Turn { message: None, ended: Ended::Stopped, after: Vec::new() };
        assert_eq!(enc.done(&stopped_early), "data: [DONE]\n\n", "a stop before the first piece: no message");
        let mut ui = Encoder::new(Dialect::UiMessages);
        assert_eq!(ui.done(&stopped_early), "data: {\"type\":\"abort\",\"reason\":\"stopped\"}\n\ndata: [DONE]\n\n");
        assert_eq!(
            enc.failed(&Error::conflict("no")),
            "data: {\"type\":\"error\",\"code\":\"conflict\",\"message\":\"no\"}\n\n"
        );
    }
}
