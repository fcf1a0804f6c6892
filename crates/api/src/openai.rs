//! The OpenAI-compatible face: `/v1/models`, `/v1/chat/completions` and `/v1/responses` (with a
//! stored response read back, its input items, its delete) in OpenAI's shapes, streams and
//! errors, over the same turn as `POST …/chat` ([`session_agent_core::turn::run`]). This module
//! only translates: an OpenAI request becomes a [`TurnRequest`] of one session, the stored reply
//! becomes OpenAI's answer.
//!
//! **The conversation.** An OpenAI client holds messages without ids. They are matched with the
//! stored branch by what they say (`Said`): user text, assistant text with the client's own
//! tool calls, the client's tool results (the agent's own tools never show). Before the turn's
//! new part (the last user message, or the tool results after the last assistant message) the
//! client sends either nothing (the session's branch continues: the server holds the history)
//! or the stored branch from its start, whole or in part: the new user message then goes under
//! the last message matched (a sibling branch when that is not the newest). Anything else is
//! `409` and stores nothing. Tool results fill the stored calls of that assistant message and
//! the turn continues after it (a continuation). A Responses `previous_response_id` names the
//! message the new input goes under.
//!
//! **Ids.** A completion's and a response's id is the id of the assistant message it stored.
//! The session is named by the request: `x-session-id`, `metadata.session_id`, `user` (chat
//! completions), `conversation` or the session of `previous_response_id` (Responses).
//!
//! **Errors** are OpenAI's shape `{"error": {"message", "type", "code", "param"}}` with our
//! statuses and codes ([`shaped`]); the Durable Object and the front door reshape every error of
//! a `/v1/` path, whoever refused it.

use serde_json::{Map, Value as Json};

use super::access::Needs;
use super::call::{Call, Pending};
use super::chat::{self, answered, opens, streamed, Dialect, Encode, Streamed};
use super::http::{check_name, Request, Response};
use session_agent_core::after::After;
use session_agent_core::blobs::BoxFuture;
use session_agent_core::config::is_label;
use session_agent_core::env::Env;
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::new_id;
use session_agent_core::live::stop::Stop;
use session_agent_core::llm::ToolSpec;
use session_agent_core::parts::parts;
use session_agent_core::session::Session;
use session_agent_core::store::history::Overlays;
use session_agent_core::store::message::{check_id, NewMessage};
use session_agent_core::store::tree::{sessions_of, Parent};
use session_agent_core::time::parse_iso;
use session_agent_core::turn::run::{
    turn, Ask, CacheUse, ChatEvent, Ended, MemoryUse, Record, Runner, Turn, TurnRequest,
};

/// Whether a Durable Object path is one of OpenAI's (its errors are answered in OpenAI's shape).
pub fn is_openai(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/")
}

/// The error `e` as answered at `path` (below the agent): OpenAI's shape on its routes, ours
/// elsewhere. For the front door's own refusals (a token, a rate limit).
pub fn error_at(path: &str, e: &Error) -> Response {
    match is_openai(path) {
        true => shaped(Response::error(e)),
        false => Response::error(e),
    }
}

/// An answer with its error (ours: `{"error": {"code", "message"}}`) in OpenAI's shape
/// `{"error": {"message", "type", "code", "param"}}`; any other answer as it is.
pub fn shaped(mut resp: Response) -> Response {
    if resp.status < 400 {
        return resp;
    }
    let body = resp.body_json();
    let Some(e) = body.get("error") else { return resp };
    let message = e.get("message").and_then(Json::as_str).unwrap_or_default();
    let kind = match resp.status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    };
    let shaped = obj(vec![(
        "error",
        obj(vec![
            ("message", j(message)),
            ("type", j(kind)),
            ("code", j(e.get("code"))),
            ("param", j(param_of(message))),
        ]),
    )]);
    resp.body = shaped.to_string().into_bytes();
    resp
}

/// The request field an error message starts with (`messages[2].content must be …`), if any.
fn param_of(message: &str) -> Option<&str> {
    let word = message.split(' ').next()?.trim_end_matches(':');
    let top = word.split(['.', '[']).next()?;
    let fields = ["messages", "tools", "tool_choice", "stream", "stream_options", "input", "instructions"];
    let more = ["previous_response_id", "conversation", "store", "metadata", "user", "temperature", "n", "model"];
    let known = fields.contains(&top) || more.contains(&top) || top.starts_with("max_");
    known.then_some(word)
}

/// The streamed dialect of an OpenAI request: its body says `"stream": true`.
pub(crate) fn dialect(req: &Request) -> Option<Dialect> {
    #[derive(serde::Deserialize)]
    struct Probe {
        stream: Option<Json>,
    }
    let asks = serde_json::from_slice::<Probe>(&req.body).is_ok_and(|p| p.stream == Some(Json::Bool(true)));
    match (asks, req.path.as_str()) {
        (true, "/v1/chat/completions") => Some(Dialect::Completions),
        (true, "/v1/responses") => Some(Dialect::Responses),
        _ => None,
    }
}

/// The model's name as answered (`LLM_MODEL`).
fn model(env: &Env<'_>) -> String {
    env.llm.model.clone()
}

/// Seconds since the epoch, as OpenAI's `created`.
fn seconds(env: &Env<'_>) -> i64 {
    env.now.ms() / 1000
}

/// `GET /v1/models`: the configured model, then the others `chat.models` lets a request name
/// (none when no model is configured).
pub(crate) fn models(c: &Call<'_>) -> Result<Response> {
    let name = model(c.env);
    let mut names = vec![name.as_str()];
    names.extend(c.env.config.chat.models.iter().map(String::as_str).filter(|m| *m != name));
    let data: Vec<Json> = match name.is_empty() {
        true => Vec::new(),
        false => names
            .into_iter()
            .map(|id| {
                obj(vec![
                    ("id", j(id)),
                    ("object", j("model")),
                    ("created", j(0_i64)),
                    ("owned_by", j("session-agent")),
                ])
            })
            .collect(),
    };
    Ok(Response::json(200, &obj(vec![("object", j("list")), ("data", j(data))])))
}

// ── What a conversation says ─────────────────────────────────────────────────────────────────────

/// One of the client's calls of its own tools.
#[derive(Clone, Debug, PartialEq)]
struct FnCall {
    id: String,
    name: String,
    arguments: String,
}

/// One message as an OpenAI client holds it (and as a stored message reads to it).
#[derive(Clone, Debug)]
enum Said {
    User(String),
    Assistant { text: String, calls: Vec<FnCall> },
    Tool { call_id: String, output: String },
}

impl Said {
    /// Whether the client's `self` is the stored `other` (texts as sent back, trimmed).
    fn is(&self, other: &Said) -> bool {
        match (self, other) {
            (Said::User(a), Said::User(b)) => a.trim() == b.trim(),
            (Said::Assistant { text: a, calls: x }, Said::Assistant { text: b, calls: y }) => {
                a.trim() == b.trim() && x.iter().map(|c| &c.id).eq(y.iter().map(|c| &c.id))
            }
            (Said::Tool { call_id: a, .. }, Said::Tool { call_id: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// What a request asks: the conversation it sends, where each item came from (`messages[3]`),
/// and its system text for this call.
#[derive(Default)]
struct Asked {
    said: Vec<Said>,
    at: Vec<String>,
    system: Vec<String>,
}

impl Asked {
    fn push(&mut self, said: Said, at: String) {
        self.said.push(said);
        self.at.push(at);
    }

    fn instructions(&self) -> Option<String> {
        (!self.system.is_empty()).then(|| self.system.join("\n\n"))
    }
}

/// The text of a message's `text` parts.
fn text_of(message: &Json) -> String {
    parts(message)
        .iter()
        .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Json::as_str))
        .collect()
}

/// A tool part's tool name.
fn tool_name(part: &Json) -> &str {
    match part.get("toolName").and_then(Json::as_str) {
        Some(n) => n,
        None => part.get("type").and_then(Json::as_str).and_then(|t| t.strip_prefix("tool-")).unwrap_or_default(),
    }
}

fn is_tool(part: &Json) -> bool {
    part.get("type").and_then(Json::as_str).is_some_and(|t| t.starts_with("tool-") || t == "dynamic-tool")
}

fn state(part: &Json) -> &str {
    part.get("state").and_then(Json::as_str).unwrap_or_default()
}

fn call_id(part: &Json) -> &str {
    part.get("toolCallId").and_then(Json::as_str).unwrap_or_default()
}

/// A JSON value as OpenAI's text of it (a string as it is).
fn as_text(v: Option<&Json>) -> String {
    match v {
        Some(Json::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// The client's tool parts of a stored message (the agent's own tools, `server`, never show).
fn client_parts<'m>(message: &'m Json, server: &'m [String]) -> impl Iterator<Item = &'m Json> + 'm {
    parts(message).iter().filter(move |p| is_tool(p) && !server.iter().any(|s| s == tool_name(p)))
}

fn fn_call(part: &Json) -> FnCall {
    FnCall { id: call_id(part).to_owned(), name: tool_name(part).to_owned(), arguments: as_text(part.get("input")) }
}

/// The stored branch `stored` as its client holds it, each item with the id of its message.
fn stored_said(stored: &[Json], server: &[String]) -> Vec<(Said, String)> {
    let mut out = Vec::new();
    for m in stored {
        let id = m.get("id").and_then(Json::as_str).unwrap_or_default().to_owned();
        match m.get("role").and_then(Json::as_str) {
            Some("user") => out.push((Said::User(text_of(m)), id)),
            Some("assistant") => {
                let calls = client_parts(m, server).map(fn_call).collect();
                out.push((Said::Assistant { text: text_of(m), calls }, id.clone()));
                for p in client_parts(m, server) {
                    let output = match state(p) {
                        "output-available" => as_text(p.get("output")),
                        "output-error" => as_text(p.get("errorText")),
                        _ => continue,
                    };
                    out.push((Said::Tool { call_id: call_id(p).to_owned(), output }, id.clone()));
                }
            }
            _ => {}
        }
    }
    out
}

/// A new user message of `text`.
fn user_message(text: &str) -> Result<NewMessage> {
    NewMessage::from_json(&obj(vec![
        ("id", j(new_id()?)),
        ("role", j("user")),
        ("parts", Json::Array(vec![obj(vec![("type", j("text")), ("text", j(text))])])),
    ]))
}

/// The stored branch to `leaf` (the newest when `None`) with `overlays`.
async fn branch(session: &Session<'_>, leaf: Option<&str>, overlays: Overlays) -> Result<Vec<Json>> {
    let text = session.history_text(leaf, overlays).await?.value;
    serde_json::from_str(&text).map_err(|e| Error::internal(format!("stored history is not JSON: {e}")))
}

/// The names of the session's own tools.
fn server_tools(session: &Session<'_>) -> Result<Vec<String>> {
    Ok(session.tools()?.into_iter().map(|t| t.name).collect())
}

/// What `asked` asks of `session`, whose branch to `leaf` (the newest when `None`) it continues
/// (see the module's doc). `what` names the request's field in errors.
async fn reconcile(session: &Session<'_>, leaf: Option<&str>, asked: &Asked, what: &str) -> Result<Ask> {
    let said = &asked.said;
    let new = match said.last() {
        Some(Said::User(_)) => 1,
        Some(Said::Tool { .. }) => said.iter().rev().take_while(|s| matches!(s, Said::Tool { .. })).count(),
        _ => {
            return Err(Error::invalid(format!(
                "{what} must end with a user message or the results of the assistant's tool calls"
            )))
        }
    };
    let prefix = &said[..said.len() - new];
    if let (true, Said::User(text)) = (prefix.is_empty(), &said[said.len() - 1]) {
        // Only the new message: it goes under the branch's newest, which needs no read.
        let parent = leaf.map_or(Parent::Latest, |id| Parent::Id(id.to_owned()));
        return Ok(Ask::Message { msg: user_message(text)?, parent });
    }
    let server = server_tools(session)?;
    let stored = branch(session, leaf, Overlays::Raw).await?;
    let held = stored_said(&stored, &server);
    if let Some(i) = prefix.iter().zip(&held).position(|(c, s)| !c.is(&s.0)).or_else(|| {
        // More than is stored: the first one past it.
        (prefix.len() > held.len()).then_some(held.len())
    }) {
        return Err(Error::conflict(format!(
            "{} is not the session's message at that place: send the session's messages as stored (from \
             the first, or none), then the new user message or tool results",
            asked.at[i]
        )));
    }
    // The message the new part follows: the last one matched, or the branch's newest.
    let anchor = match prefix.is_empty() {
        true => held.last(),
        false => held.get(prefix.len() - 1),
    };
    if let (Said::User(text), Some((_, id))) = (&said[said.len() - 1], anchor) {
        return Ok(Ask::Message { msg: user_message(text)?, parent: Parent::Id(id.clone()) });
    }
    // Tool results: they fill the calls of the assistant message they follow.
    let first = said.len() - new;
    let no_calls = || Error::invalid(format!("{} answers no tool call of the assistant", asked.at[first]));
    let Some((Said::Assistant { .. }, aid)) = anchor else { return Err(no_calls()) };
    let mut message =
        stored.iter().find(|m| m.get("id").and_then(Json::as_str) == Some(aid)).cloned().ok_or_else(no_calls)?;
    let list = message.get_mut("parts").and_then(Json::as_array_mut).ok_or_else(no_calls)?;
    for (i, s) in said.iter().enumerate().skip(first) {
        let Said::Tool { call_id: id, output } = s else { continue };
        let part =
            list.iter_mut().find(|p| is_tool(p) && call_id(p) == id && !server.iter().any(|n| n == tool_name(p)));
        let Some(part) = part.filter(|p| state(p) == "input-available") else {
            return Err(Error::invalid(format!(
                "{}: tool call {id:?} is not one the assistant waits on (no such call, or already answered)",
                asked.at[i]
            )));
        };
        part["state"] = j("output-available");
        part["output"] = j(output);
    }
    if let Some(p) = list.iter().find(|p| is_tool(p) && state(p) == "input-available") {
        return Err(Error::invalid(format!("{what}: no result for tool call {:?}", call_id(p))));
    }
    let mut messages = branch(session, Some(aid), Overlays::Applied).await?;
    match messages.last_mut() {
        Some(last) if last.get("id") == message.get("id") => *last = message,
        _ => return Err(no_calls()),
    }
    Ok(Ask::Continue { messages })
}

// ── Reading a request ────────────────────────────────────────────────────────────────────────────

/// A field that must be a string when present.
fn string(body: &Map<String, Json>, key: &str) -> Result<Option<String>> {
    match body.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{key} must be a string"))),
    }
}

/// A field that must be a boolean when present.
fn flag(body: &Map<String, Json>, key: &str) -> Result<bool> {
    match body.get(key) {
        None | Some(Json::Null) => Ok(false),
        Some(Json::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::invalid(format!("{key} must be true or false"))),
    }
}

/// The options OpenAI takes that the agent's configuration decides instead: checked, then
/// ignored (`temperature`, token limits, `n` must be 1).
fn sampling(body: &Map<String, Json>) -> Result<()> {
    if let Some(t) = body.get("temperature").filter(|v| !v.is_null()) {
        if !t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)) {
            return Err(Error::invalid("temperature must be a number from 0 to 2"));
        }
    }
    for key in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
        if body.get(key).is_some_and(|v| !v.is_null() && v.as_i64().is_none_or(|n| n < 1)) {
            return Err(Error::invalid(format!("{key} must be a positive integer")));
        }
    }
    if body.get("n").is_some_and(|v| !v.is_null() && v.as_i64() != Some(1)) {
        return Err(Error::invalid("n must be 1 (one choice per turn)"));
    }
    Ok(())
}

/// The model a request names, when `chat.models` lets a caller choose it (`None`: `LLM_MODEL`
/// answers, whatever the request named).
fn asked_model(env: &Env<'_>, body: &Map<String, Json>) -> Result<Option<String>> {
    let asked = string(body, "model")?;
    let chosen = asked.as_deref().and_then(|m| env.config.chat.allowed_model(m));
    Ok(chosen.filter(|m| *m != env.llm.model).map(str::to_owned))
}

/// Text content: a string, or an array of text parts (`text`, `input_text`, `output_text`).
fn content(v: Option<&Json>, at: &str) -> Result<String> {
    match v {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(Json::Array(list)) => {
            let mut out = String::new();
            for (i, p) in list.iter().enumerate() {
                let kind = p.get("type").and_then(Json::as_str).unwrap_or_default();
                let text = p.get("text").and_then(Json::as_str);
                match (kind, text) {
                    ("text" | "input_text" | "output_text", Some(t)) => out.push_str(t),
                    _ => {
                        return Err(Error::invalid(format!(
                        "{at}.content[{i}] must be a text part ({{type: \"text\", text}}); other content is not taken"
                    )))
                    }
                }
            }
            Ok(out)
        }
        Some(_) => Err(Error::invalid(format!("{at}.content must be a string or an array of text parts"))),
    }
}

/// How a request writes a function tool.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ToolForm {
    /// Chat completions: `{type: "function", function: {name, description, parameters}}`.
    Nested,
    /// Responses: `{type: "function", name, description, parameters}`.
    Flat,
}

/// The client's function tools, written in `form`. `tool_choice: "none"` offers none.
fn tools(body: &Map<String, Json>, form: ToolForm) -> Result<Vec<ToolSpec>> {
    match body.get("tool_choice") {
        None | Some(Json::Null) => {}
        Some(Json::String(c)) if c == "none" => return tools(&Map::new(), form),
        Some(Json::String(c)) if c == "auto" || c == "required" => {}
        Some(Json::Object(_)) => {}
        Some(_) => return Err(Error::invalid("tool_choice must be \"none\", \"auto\", \"required\" or an object")),
    }
    let list = match body.get("tools") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(l)) => l,
        Some(_) => return Err(Error::invalid("tools must be an array")),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        if t.get("type").and_then(Json::as_str) != Some("function") {
            return Err(Error::invalid(format!(
                "tools[{i}].type must be \"function\" (only function tools are taken)"
            )));
        }
        let f = match form {
            ToolForm::Flat => t,
            ToolForm::Nested => t.get("function").filter(|f| f.is_object()).ok_or_else(|| {
                Error::invalid(format!("tools[{i}].function must be an object ({{name, description, parameters}})"))
            })?,
        };
        let name = f.get("name").and_then(Json::as_str).unwrap_or_default();
        if !is_label(name) {
            return Err(Error::invalid(format!("tools[{i}].name must be 1-64 characters of [A-Za-z0-9_-]")));
        }
        let description = match f.get("description") {
            None | Some(Json::Null) => String::new(),
            Some(Json::String(d)) => d.clone(),
            Some(_) => return Err(Error::invalid(format!("tools[{i}].description must be a string"))),
        };
        let input_schema = match f.get("parameters") {
            None | Some(Json::Null) => obj(vec![("type", j("object")), ("properties", Json::Object(Map::new()))]),
            Some(s @ Json::Object(_)) => s.clone(),
            Some(_) => return Err(Error::invalid(format!("tools[{i}].parameters must be an object"))),
        };
        out.push(ToolSpec { name: name.to_owned(), description, input_schema });
    }
    Ok(out)
}

/// A message's `tool_calls` (chat completions).
fn tool_calls(m: &Json, at: &str) -> Result<Vec<FnCall>> {
    let Some(list) = m.get("tool_calls").filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| Error::invalid(format!("{at}.tool_calls must be an array")))?;
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let f = c.get("function");
            let field = |v: Option<&Json>| v.and_then(Json::as_str).map(str::to_owned);
            match (field(c.get("id")), field(f.and_then(|f| f.get("name"))), field(f.and_then(|f| f.get("arguments")))) {
                (Some(id), Some(name), Some(arguments)) => Ok(FnCall { id, name, arguments }),
                _ => Err(Error::invalid(format!(
                    "{at}.tool_calls[{i}] must be {{id, type: \"function\", function: {{name, arguments}}}} with strings"
                ))),
            }
        })
        .collect()
}

/// The `messages` of a chat completion request.
fn messages(body: &Map<String, Json>) -> Result<Asked> {
    let list = body.get("messages").and_then(Json::as_array).filter(|l| !l.is_empty());
    let list = list.ok_or_else(|| Error::invalid("messages must be a non-empty array"))?;
    let mut asked = Asked::default();
    for (i, m) in list.iter().enumerate() {
        let at = format!("messages[{i}]");
        if !m.is_object() {
            return Err(Error::invalid(format!("{at} must be an object")));
        }
        let said = match m.get("role").and_then(Json::as_str) {
            Some("system" | "developer") => {
                asked.system.push(content(m.get("content"), &at)?);
                continue;
            }
            Some("user") => Said::User(content(m.get("content"), &at)?),
            Some("assistant") => Said::Assistant { text: content(m.get("content"), &at)?, calls: tool_calls(m, &at)? },
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Json::as_str);
                let id = id.ok_or_else(|| Error::invalid(format!("{at}.tool_call_id must be a string")))?;
                Said::Tool { call_id: id.to_owned(), output: content(m.get("content"), &at)? }
            }
            _ => {
                return Err(Error::invalid(format!(
                    "{at}.role must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\""
                )))
            }
        };
        asked.push(said, at);
    }
    Ok(asked)
}

/// The session a chat completion talks to: `x-session-id`, else `metadata.session_id`, else
/// `user`, else the default session; the token must open it.
fn completion_session(req: &Request, body: &Map<String, Json>) -> Result<String> {
    let meta = match body.get("metadata") {
        None | Some(Json::Null) => None,
        Some(Json::Object(m)) => m.get("session_id"),
        Some(_) => return Err(Error::invalid("metadata must be an object")),
    };
    if meta.is_some_and(|v| !v.is_string()) {
        return Err(Error::invalid("metadata: its session id must be a string"));
    }
    let named = [header_session(req)?, meta.and_then(Json::as_str).map(str::to_owned), string(body, "user")?];
    for (what, n) in ["metadata: its session id", "user"].iter().zip(&named[1..]) {
        if let Some(n) = n {
            check_name(what, n)?;
        }
    }
    let sid = named.into_iter().flatten().next().unwrap_or_else(|| chat::DEFAULT_SESSION.to_owned());
    opens(req, &sid, Needs::Write)?;
    Ok(sid)
}

/// The session the header `x-session-id` names (checked), if it names one.
fn header_session(req: &Request) -> Result<Option<String>> {
    let Some(h) = req.header_value("x-session-id") else { return Ok(None) };
    check_name("x-session-id", h)?;
    Ok(Some(h.to_owned()))
}

/// The turn a request asks of `session`.
fn turn_request(
    req: &Request,
    ask: Ask,
    tools: Vec<ToolSpec>,
    instructions: Option<String>,
    record: Record,
    model: Option<String>,
) -> TurnRequest {
    let stop = req.stop.clone().unwrap_or_default();
    let (memory, cache) = (MemoryUse::default(), CacheUse::AsConfigured);
    TurnRequest { ask, tools, memory, stop, cache, instructions, record, model }
}

/// A chat completion request read: its session and turn, and how its answer is written.
async fn completion_turn(env: &Env<'_>, req: &Request) -> Result<(String, TurnRequest, Completion)> {
    let body = req.json_object()?;
    sampling(&body)?;
    let asked = messages(&body)?;
    let tools = tools(&body, ToolForm::Nested)?;
    flag(&body, "stream")?;
    let usage = match body.get("stream_options") {
        None | Some(Json::Null) => false,
        Some(Json::Object(o)) => flag(o, "include_usage")
            .map_err(|_| Error::invalid("stream_options.include_usage must be true or false"))?,
        Some(_) => return Err(Error::invalid("stream_options must be an object")),
    };
    let sid = completion_session(req, &body)?;
    let session = Session::new(env, &sid);
    let ask = reconcile(&session, None, &asked, "messages").await?;
    let chosen = asked_model(env, &body)?;
    let model = chosen.clone().unwrap_or_else(|| model(env));
    let request = turn_request(req, ask, tools, asked.instructions(), Record::Store, chosen);
    let encoder = Completion { id: String::new(), created: seconds(env), model, usage, calls: 0 };
    Ok((sid, request, encoder))
}

// ── Chat completions ─────────────────────────────────────────────────────────────────────────────

/// The reply's text and the client tool calls it waits on.
fn reply_of(message: Option<&Json>) -> (String, Vec<FnCall>) {
    let Some(m) = message else { return (String::new(), Vec::new()) };
    let calls = parts(m).iter().filter(|p| is_tool(p) && state(p) == "input-available").map(fn_call).collect();
    (text_of(m), calls)
}

/// A stored reply's usage (`metadata.usage`): input, output, cached input tokens.
fn usage_of(message: Option<&Json>) -> (i64, i64, i64) {
    let u = message.and_then(|m| m.pointer("/metadata/usage"));
    let n = |k: &str| u.and_then(|u| u.get(k)).and_then(Json::as_i64).unwrap_or(0);
    (n("inputTokens"), n("outputTokens"), n("cachedInputTokens"))
}

fn completion_usage(message: Option<&Json>) -> Json {
    let (input, output, cached) = usage_of(message);
    obj(vec![
        ("prompt_tokens", j(input)),
        ("completion_tokens", j(output)),
        ("total_tokens", j(input + output)),
        ("prompt_tokens_details", obj(vec![("cached_tokens", j(cached))])),
    ])
}

fn openai_calls(calls: &[FnCall]) -> Vec<Json> {
    let call = |(i, c): (usize, &FnCall)| {
        obj(vec![
            ("index", j(i)),
            ("id", j(&c.id)),
            ("type", j("function")),
            ("function", obj(vec![("name", j(&c.name)), ("arguments", j(&c.arguments))])),
        ])
    };
    calls.iter().enumerate().map(call).collect()
}

/// How a chat completion is written: its id (the reply's), time, model; whether a stream ends
/// with a usage chunk; the client tool calls streamed so far.
struct Completion {
    id: String,
    created: i64,
    model: String,
    usage: bool,
    calls: usize,
}

impl Completion {
    /// The `chat.completion` of `turn`.
    fn whole(&self, turn: &Turn) -> Json {
        let m = turn.message.as_ref();
        let (text, calls) = reply_of(m);
        let mut message = obj(vec![("role", j("assistant")), ("content", j(&text)), ("refusal", Json::Null)]);
        if !calls.is_empty() {
            message["tool_calls"] = j(openai_calls(&calls)
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    c.as_object_mut().map(|o| o.remove("index"));
                    c
                })
                .collect::<Vec<_>>());
        }
        let id = m.and_then(|m| m.get("id")).and_then(Json::as_str).unwrap_or_default();
        obj(vec![
            ("id", j(id)),
            ("object", j("chat.completion")),
            ("created", j(self.created)),
            ("model", j(&self.model)),
            (
                "choices",
                Json::Array(vec![obj(vec![
                    ("index", j(0_i64)),
                    ("message", j(message)),
                    ("logprobs", Json::Null),
                    ("finish_reason", j(finish(&calls))),
                ])]),
            ),
            ("usage", j(completion_usage(m))),
            ("system_fingerprint", Json::Null),
        ])
    }

    /// One `chat.completion.chunk` event with `delta` (and `finish_reason`).
    fn chunk(&self, delta: Json, finish: Option<&str>) -> String {
        let mut c = obj(vec![
            ("id", j(&self.id)),
            ("object", j("chat.completion.chunk")),
            ("created", j(self.created)),
            ("model", j(&self.model)),
            ("system_fingerprint", Json::Null),
            (
                "choices",
                Json::Array(vec![obj(vec![
                    ("index", j(0_i64)),
                    ("delta", j(delta)),
                    ("logprobs", Json::Null),
                    ("finish_reason", j(finish)),
                ])]),
            ),
        ]);
        if self.usage {
            c["usage"] = Json::Null;
        }
        format!("data: {c}\n\n")
    }
}

fn finish(calls: &[FnCall]) -> &'static str {
    match calls.is_empty() {
        true => "stop",
        false => "tool_calls",
    }
}

impl Encode for Completion {
    fn event(&mut self, e: &ChatEvent) -> Option<String> {
        match e {
            ChatEvent::Start { message_id } => {
                self.id = message_id.clone();
                Some(self.chunk(obj(vec![("role", j("assistant")), ("content", j("")), ("refusal", Json::Null)]), None))
            }
            ChatEvent::Delta { text, .. } => Some(self.chunk(obj(vec![("content", j(text))]), None)),
            ChatEvent::ToolCall { call_id, name, input, runner: Runner::Client } => {
                let call = obj(vec![
                    ("index", j(self.calls)),
                    ("id", j(call_id)),
                    ("type", j("function")),
                    ("function", obj(vec![("name", j(name)), ("arguments", j(as_text(Some(input))))])),
                ]);
                self.calls += 1;
                Some(self.chunk(obj(vec![("tool_calls", Json::Array(vec![j(call)]))]), None))
            }
            _ => None,
        }
    }

    fn done(&mut self, turn: &Turn) -> String {
        let (_, calls) = reply_of(turn.message.as_ref());
        let mut out = self.chunk(Json::Object(Map::new()), Some(finish(&calls)));
        if self.usage {
            let usage = completion_usage(turn.message.as_ref());
            let c = obj(vec![
                ("id", j(&self.id)),
                ("object", j("chat.completion.chunk")),
                ("created", j(self.created)),
                ("model", j(&self.model)),
                ("system_fingerprint", Json::Null),
                ("choices", Json::Array(Vec::new())),
                ("usage", j(usage)),
            ]);
            out.push_str(&format!("data: {c}\n\n"));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    fn failed(&mut self, e: &Error) -> String {
        let body = shaped(Response::error(e)).body;
        format!("data: {}\n\n", String::from_utf8_lossy(&body))
    }
}

/// The headers of OpenAI's event streams.
fn stream_headers() -> Vec<(String, String)> {
    Dialect::Completions.headers()
}

/// `POST /v1/chat/completions`: a `chat.completion`, or (with `stream`, answered whole here; the
/// Durable Object streams it instead) its `chat.completion.chunk` events.
pub(crate) fn completions<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let (sid, request, mut encoder) = completion_turn(c.env, c.req).await?;
        let session = Session::new(c.env, &sid);
        if dialect(c.req).is_some() {
            return answered(&session, request, &mut encoder, stream_headers()).await;
        }
        let done = turn(&session, request, &mut |_| Ok(())).await?;
        let mut resp = Response::json(200, &encoder.whole(&done));
        resp.after.extend(done.after);
        Ok(resp)
    })
}

/// Runs a streamed OpenAI turn (`dialect`) for `req` as `chat::stream_turn` does ours: the
/// session is the request's own (see the module's doc). Boxed: see `crate::handle`.
pub fn stream_turn<'a>(
    env: &'a Env<'a>,
    req: &'a Request,
    dialect: Dialect,
    gone: &'a Stop,
    send: &'a mut dyn FnMut(Streamed) -> Result<()>,
) -> BoxFuture<'a, Vec<After>> {
    Box::pin(stream(env, req, dialect, gone, send))
}

async fn stream(
    env: &Env<'_>,
    req: &Request,
    dialect: Dialect,
    gone: &Stop,
    send: &mut dyn FnMut(Streamed) -> Result<()>,
) -> Vec<After> {
    let prepared = match dialect {
        Dialect::Responses => response_turn(env, req).await.map(|(sid, r, e)| (sid, r, Box::new(e) as Box<dyn Encode>)),
        _ => completion_turn(env, req).await.map(|(sid, r, e)| (sid, r, Box::new(e) as Box<dyn Encode>)),
    };
    match prepared {
        Ok((sid, request, mut encoder)) => {
            streamed(&Session::new(env, &sid), Ok(request), encoder.as_mut(), gone, send).await
        }
        Err(e) => {
            let _ = send(Streamed::Fail(e));
            Vec::new()
        }
    }
}

// ── Responses ────────────────────────────────────────────────────────────────────────────────────

/// The stored assistant message `id` (a response id) and its session, among the sessions the
/// request's token opens (`needs`); `404` when there is none.
async fn find(env: &Env<'_>, req: &Request, id: &str, needs: Needs) -> Result<(String, Json)> {
    let missing = || Error::not_found(format!("no response {id:?}"));
    for sid in sessions_of(env.sql, id)?.into_iter().rev() {
        if opens(req, &sid, needs).is_err() {
            continue;
        }
        let session = Session::new(env, &sid);
        let Some(raw) = session.tree().get(id)? else { continue };
        let message: Json = serde_json::from_str(raw.get()).map_err(|e| Error::internal(e.to_string()))?;
        if message.get("role").and_then(Json::as_str) == Some("assistant") {
            return Ok((sid, message));
        }
    }
    Err(missing())
}

/// The `input` of a Responses request (a string, or items).
fn input(body: &Map<String, Json>) -> Result<Asked> {
    let mut asked = Asked::default();
    if let Some(i) = string(body, "instructions")? {
        asked.system.push(i);
    }
    let list = match body.get("input") {
        Some(Json::String(s)) => {
            asked.push(Said::User(s.clone()), "input".into());
            return Ok(asked);
        }
        Some(Json::Array(l)) if !l.is_empty() => l,
        _ => return Err(Error::invalid("input must be a string or a non-empty array of items")),
    };
    for (i, item) in list.iter().enumerate() {
        let at = format!("input[{i}]");
        let field = |k: &str| item.get(k).and_then(Json::as_str);
        let kind = field("type").unwrap_or(if item.get("role").is_some() { "message" } else { "" });
        match (kind, field("role")) {
            ("message", Some("system" | "developer")) => asked.system.push(content(item.get("content"), &at)?),
            ("message", Some("user")) => asked.push(Said::User(content(item.get("content"), &at)?), at),
            ("message", Some("assistant")) => {
                let text = content(item.get("content"), &at)?;
                asked.push(Said::Assistant { text, calls: Vec::new() }, at)
            }
            ("function_call", _) => {
                let (Some(id), Some(name), Some(arguments)) = (field("call_id"), field("name"), field("arguments"))
                else {
                    return Err(Error::invalid(format!("{at} must have call_id, name and arguments (strings)")));
                };
                let call = FnCall { id: id.into(), name: name.into(), arguments: arguments.into() };
                // A call belongs to the assistant message before it (or one of its own).
                match asked.said.last_mut() {
                    Some(Said::Assistant { calls, .. }) => calls.push(call),
                    _ => asked.push(Said::Assistant { text: String::new(), calls: vec![call] }, at),
                }
            }
            ("function_call_output", _) => {
                let Some(id) = field("call_id") else {
                    return Err(Error::invalid(format!("{at}.call_id must be a string")));
                };
                let output = content(item.get("output"), &at)?;
                asked.push(Said::Tool { call_id: id.into(), output }, at)
            }
            _ => {
                return Err(Error::invalid(format!(
                    "{at} must be a message (role user, assistant, system or developer), a function_call or a \
                     function_call_output"
                )))
            }
        }
    }
    Ok(asked)
}

/// What a response says besides its output: its conversation, the response before it, the
/// request's instructions and tools, whether it was stored.
#[derive(Clone)]
struct Framing {
    created: i64,
    model: String,
    conversation: String,
    previous: Option<String>,
    instructions: Option<String>,
    tools: Json,
    store: bool,
}

/// The `response` object of `message` (`None`: nothing was stored yet or shown).
fn response_object(f: &Framing, id: &str, message: Option<&Json>, status: &str) -> Json {
    let (text, calls) = reply_of(message);
    let mut output = Vec::new();
    if !text.is_empty() {
        output.push(message_item(id, &text, "completed"));
    }
    output.extend(calls.iter().map(|c| call_item(c, "completed")));
    let (input, out, cached) = usage_of(message);
    let usage = message.map(|_| {
        obj(vec![
            ("input_tokens", j(input)),
            ("input_tokens_details", obj(vec![("cached_tokens", j(cached))])),
            ("output_tokens", j(out)),
            ("output_tokens_details", obj(vec![("reasoning_tokens", j(0_i64))])),
            ("total_tokens", j(input + out)),
        ])
    });
    obj(vec![
        ("id", j(id)),
        ("object", j("response")),
        ("created_at", j(f.created)),
        ("status", j(status)),
        ("model", j(&f.model)),
        ("output", j(output)),
        ("usage", j(usage)),
        ("conversation", obj(vec![("id", j(&f.conversation))])),
        ("previous_response_id", j(f.previous.as_deref())),
        ("instructions", j(f.instructions.as_deref())),
        ("tools", j(&f.tools)),
        ("store", j(f.store)),
        ("error", Json::Null),
        ("incomplete_details", Json::Null),
        ("metadata", Json::Object(Map::new())),
        ("parallel_tool_calls", j(true)),
        ("tool_choice", j("auto")),
        ("temperature", Json::Null),
        ("top_p", Json::Null),
        ("text", obj(vec![("format", obj(vec![("type", j("text"))]))])),
        ("truncation", j("disabled")),
        ("background", j(false)),
    ])
}

/// The output item of a reply's text.
fn message_item(id: &str, text: &str, status: &str) -> Json {
    let content: Vec<Json> = match status {
        "in_progress" => Vec::new(),
        _ => vec![obj(vec![("type", j("output_text")), ("text", j(text)), ("annotations", Json::Array(Vec::new()))])],
    };
    obj(vec![
        ("type", j("message")),
        ("id", j(format!("msg_{id}"))),
        ("status", j(status)),
        ("role", j("assistant")),
        ("content", j(content)),
    ])
}

/// The output item of one of the client's tool calls.
fn call_item(c: &FnCall, status: &str) -> Json {
    obj(vec![
        ("type", j("function_call")),
        ("id", j(format!("fc_{}", c.id))),
        ("call_id", j(&c.id)),
        ("name", j(&c.name)),
        ("arguments", j(&c.arguments)),
        ("status", j(status)),
    ])
}

/// A Responses request read: its session and turn, and how its answer is written.
async fn response_turn(env: &Env<'_>, req: &Request) -> Result<(String, TurnRequest, Responses)> {
    let body = req.json_object()?;
    sampling(&body)?;
    let asked = input(&body)?;
    let offered = tools(&body, ToolForm::Flat)?;
    flag(&body, "stream")?;
    let store = match body.get("store") {
        None | Some(Json::Null) => true,
        Some(Json::Bool(b)) => *b,
        Some(_) => return Err(Error::invalid("store must be true or false")),
    };
    let conversation = match body.get("conversation") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(Json::Object(o)) => match o.get("id") {
            Some(Json::String(s)) => Some(s.clone()),
            _ => return Err(Error::invalid("conversation.id must be a string")),
        },
        Some(_) => return Err(Error::invalid("conversation must be a session id or {id}")),
    };
    let previous = match string(&body, "previous_response_id")? {
        Some(id) => {
            check_id("previous_response_id", &id)?;
            Some((id.clone(), find(env, req, &id, Needs::Write).await?.0))
        }
        None => None,
    };
    if let (Some(c), Some((_, p))) = (&conversation, &previous) {
        if c != p {
            return Err(Error::invalid(format!(
                "conversation {c:?} is not the conversation of previous_response_id (session {p:?})"
            )));
        }
    }
    if let Some(c) = &conversation {
        check_name("conversation", c)?;
    }
    let sid = match (conversation, &previous, header_session(req)?) {
        (Some(c), _, _) => c,
        (None, Some((_, p)), _) => p.clone(),
        (None, None, Some(h)) => h,
        (None, None, None) => new_id()?,
    };
    opens(req, &sid, Needs::Write)?;
    let session = Session::new(env, &sid);
    let leaf = previous.as_ref().map(|(id, _)| id.as_str());
    let ask = reconcile(&session, leaf, &asked, "input").await?;
    let instructions = asked.instructions();
    let chosen = asked_model(env, &body)?;
    let framing = Framing {
        created: seconds(env),
        model: chosen.clone().unwrap_or_else(|| model(env)),
        conversation: sid.clone(),
        previous: previous.map(|(id, _)| id),
        instructions: instructions.clone(),
        tools: body.get("tools").cloned().unwrap_or(Json::Array(Vec::new())),
        store,
    };
    let record = if store { Record::Store } else { Record::Discard };
    let request = turn_request(req, ask, offered, instructions, record, chosen);
    Ok((sid, request, Responses { framing, id: String::new(), seq: 0, text: String::new(), open: false, index: 0 }))
}

/// How a response is written, streamed: its framing, the reply's id, the events' sequence
/// number, the text so far, whether its message item is open, the next output index.
struct Responses {
    framing: Framing,
    id: String,
    seq: u64,
    text: String,
    open: bool,
    index: usize,
}

impl Responses {
    /// One event: `event: <type>` and its data with `type` and `sequence_number`.
    fn event(&mut self, kind: &str, mut data: Json) -> String {
        data["type"] = j(kind);
        data["sequence_number"] = j(self.seq);
        self.seq += 1;
        format!("event: {kind}\ndata: {data}\n\n")
    }

    /// Closes the open message item (its text done).
    fn close(&mut self) -> String {
        if !self.open {
            return String::new();
        }
        self.open = false;
        let (item, index, text) = (format!("msg_{}", self.id), self.index, self.text.clone());
        let part = obj(vec![("type", j("output_text")), ("text", j(&text)), ("annotations", Json::Array(Vec::new()))]);
        let mut out = self.event(
            "response.output_text.done",
            obj(vec![
                ("item_id", j(&item)),
                ("output_index", j(index)),
                ("content_index", j(0_i64)),
                ("text", j(&text)),
                ("logprobs", Json::Array(Vec::new())),
            ]),
        );
        out += &self.event(
            "response.content_part.done",
            obj(vec![
                ("item_id", j(&item)),
                ("output_index", j(index)),
                ("content_index", j(0_i64)),
                ("part", j(part)),
            ]),
        );
        let done = message_item(&self.id, &text, "completed");
        out += &self.event("response.output_item.done", obj(vec![("output_index", j(index)), ("item", j(done))]));
        self.index += 1;
        out
    }
}

impl Encode for Responses {
    fn event(&mut self, e: &ChatEvent) -> Option<String> {
        match e {
            ChatEvent::Start { message_id } => {
                self.id = message_id.clone();
                let response = response_object(&self.framing, &self.id, None, "in_progress");
                let mut out = Responses::event(self, "response.created", obj(vec![("response", j(&response))]));
                out += &Responses::event(self, "response.in_progress", obj(vec![("response", j(&response))]));
                Some(out)
            }
            ChatEvent::Delta { text, .. } => {
                let mut out = String::new();
                let (item, index) = (format!("msg_{}", self.id), self.index);
                if !self.open {
                    self.open = true;
                    let added = message_item(&self.id, "", "in_progress");
                    out += &Responses::event(
                        self,
                        "response.output_item.added",
                        obj(vec![("output_index", j(index)), ("item", j(added))]),
                    );
                    let part = obj(vec![
                        ("type", j("output_text")),
                        ("text", j("")),
                        ("annotations", Json::Array(Vec::new())),
                    ]);
                    out += &Responses::event(
                        self,
                        "response.content_part.added",
                        obj(vec![
                            ("item_id", j(&item)),
                            ("output_index", j(index)),
                            ("content_index", j(0_i64)),
                            ("part", j(part)),
                        ]),
                    );
                }
                self.text.push_str(text);
                out += &Responses::event(
                    self,
                    "response.output_text.delta",
                    obj(vec![
                        ("item_id", j(&item)),
                        ("output_index", j(index)),
                        ("content_index", j(0_i64)),
                        ("delta", j(text)),
                        ("logprobs", Json::Array(Vec::new())),
                    ]),
                );
                Some(out)
            }
            ChatEvent::ToolCall { call_id, name, input, runner: Runner::Client } => {
                let mut out = self.close();
                let call = FnCall { id: call_id.clone(), name: name.clone(), arguments: as_text(Some(input)) };
                let index = self.index;
                let item = call_item(&FnCall { arguments: String::new(), ..call.clone() }, "in_progress");
                out += &Responses::event(
                    self,
                    "response.output_item.added",
                    obj(vec![("output_index", j(index)), ("item", j(&item))]),
                );
                let item_id = format!("fc_{call_id}");
                out += &Responses::event(
                    self,
                    "response.function_call_arguments.delta",
                    obj(vec![("item_id", j(&item_id)), ("output_index", j(index)), ("delta", j(&call.arguments))]),
                );
                out += &Responses::event(
                    self,
                    "response.function_call_arguments.done",
                    obj(vec![
                        ("item_id", j(&item_id)),
                        ("output_index", j(index)),
                        ("name", j(name)),
                        ("arguments", j(&call.arguments)),
                    ]),
                );
                out += &Responses::event(
                    self,
                    "response.output_item.done",
                    obj(vec![("output_index", j(index)), ("item", j(call_item(&call, "completed")))]),
                );
                self.index += 1;
                Some(out)
            }
            _ => None,
        }
    }

    fn done(&mut self, turn: &Turn) -> String {
        let mut out = self.close();
        let status = if turn.ended == Ended::Stopped { "incomplete" } else { "completed" };
        let response = response_object(&self.framing, &self.id, turn.message.as_ref(), status);
        let kind = if status == "completed" { "response.completed" } else { "response.incomplete" };
        out += &Responses::event(self, kind, obj(vec![("response", j(response))]));
        out
    }

    fn failed(&mut self, e: &Error) -> String {
        let shown = shaped(Response::error(e)).body_json();
        let e = &shown["error"];
        let data = obj(vec![("code", j(&e["code"])), ("message", j(&e["message"])), ("param", j(&e["param"]))]);
        Responses::event(self, "error", data)
    }
}

/// `POST /v1/responses`: a `response`, or (with `stream`, answered whole here; the Durable Object
/// streams it instead) the Responses events.
pub(crate) fn responses<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let (sid, request, mut encoder) = response_turn(c.env, c.req).await?;
        let session = Session::new(c.env, &sid);
        if dialect(c.req).is_some() {
            return answered(&session, request, &mut encoder, stream_headers()).await;
        }
        let done = turn(&session, request, &mut |_| Ok(())).await?;
        let id = done.message.as_ref().and_then(|m| m.get("id")).and_then(Json::as_str).unwrap_or_default();
        let status = if done.ended == Ended::Stopped { "incomplete" } else { "completed" };
        let mut resp = Response::json(200, &response_object(&encoder.framing, id, done.message.as_ref(), status));
        resp.after.extend(done.after);
        Ok(resp)
    })
}

/// The stored branch to response `id` (found in `sid`), the response last.
async fn stored_branch(env: &Env<'_>, sid: &str, id: &str) -> Result<Vec<Json>> {
    branch(&Session::new(env, sid), Some(id), Overlays::Raw).await
}

/// A stored response's framing: its session, the response before it on its branch.
fn stored_framing(env: &Env<'_>, sid: &str, path: &[Json]) -> Framing {
    let before = path.iter().rev().skip(1).find(|m| m.get("role").and_then(Json::as_str) == Some("assistant"));
    let created = path.last().and_then(|m| m.get("createdAt")).and_then(Json::as_str).and_then(parse_iso);
    Framing {
        created: created.unwrap_or(0) / 1000,
        model: path
            .last()
            .and_then(|m| m.pointer("/metadata/model"))
            .and_then(Json::as_str)
            .map_or_else(|| model(env), str::to_owned),
        conversation: sid.to_owned(),
        previous: before.and_then(|m| m.get("id")).and_then(Json::as_str).map(str::to_owned),
        instructions: None,
        tools: Json::Array(Vec::new()),
        store: true,
    }
}

/// `GET /v1/responses/{id}`: a stored response.
pub(crate) fn response<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let id = &c.params.mid;
        let (sid, message) = find(c.env, c.req, id, Needs::Read).await?;
        let path = stored_branch(c.env, &sid, id).await?;
        let framing = stored_framing(c.env, &sid, &path);
        let stopped = message.pointer("/metadata/stopped") == Some(&Json::Bool(true));
        let status = if stopped { "incomplete" } else { "completed" };
        Ok(Response::json(200, &response_object(&framing, id, Some(&message), status)))
    })
}

/// The items of a stored branch, oldest first, as the Responses API lists input items.
fn items(path: &[Json], server: &[String]) -> Vec<Json> {
    let mut out = Vec::new();
    for m in path {
        let id = m.get("id").and_then(Json::as_str).unwrap_or_default();
        match m.get("role").and_then(Json::as_str) {
            Some("user") => out.push(obj(vec![
                ("id", j(id)),
                ("type", j("message")),
                ("role", j("user")),
                ("status", j("completed")),
                ("content", Json::Array(vec![obj(vec![("type", j("input_text")), ("text", j(text_of(m)))])])),
            ])),
            Some("assistant") => {
                let text = text_of(m);
                if !text.is_empty() {
                    out.push(message_item(id, &text, "completed"));
                }
                for p in client_parts(m, server) {
                    out.push(call_item(&fn_call(p), "completed"));
                    if state(p) == "output-available" {
                        out.push(obj(vec![
                            ("id", j(format!("fco_{}", call_id(p)))),
                            ("type", j("function_call_output")),
                            ("call_id", j(call_id(p))),
                            ("output", j(as_text(p.get("output")))),
                            ("status", j("completed")),
                        ]));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// `GET /v1/responses/{id}/input_items`: the items that led to a stored response (its branch
/// before it), newest first by default (`order=asc` oldest first), `limit` (1–100, 20) at a
/// time after the item `after`.
pub(crate) fn input_items<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let id = &c.params.mid;
        let limit = c.query.int("limit", 1, 100)?.unwrap_or(20) as usize;
        let ascending = match c.query.get("order") {
            None | Some("desc") => false,
            Some("asc") => true,
            Some(_) => return Err(Error::invalid("order must be \"asc\" or \"desc\"")),
        };
        let (sid, _) = find(c.env, c.req, id, Needs::Read).await?;
        let mut path = stored_branch(c.env, &sid, id).await?;
        path.pop();
        let mut all = items(&path, &server_tools(&Session::new(c.env, &sid))?);
        if !ascending {
            all.reverse();
        }
        let start = match c.query.get("after") {
            None => 0,
            Some(after) => match all.iter().position(|i| i["id"] == after) {
                Some(p) => p + 1,
                None => return Err(Error::not_found(format!("no input item {after:?} in response {id:?}"))),
            },
        };
        let page: Vec<Json> = all.iter().skip(start).take(limit).cloned().collect();
        let has_more = start + page.len() < all.len();
        let (first, last) = (page.first().map(|i| i["id"].clone()), page.last().map(|i| i["id"].clone()));
        Ok(Response::json(
            200,
            &obj(vec![
                ("object", j("list")),
                ("data", j(page)),
                ("first_id", j(first)),
                ("last_id", j(last)),
                ("has_more", j(has_more)),
            ]),
        ))
    })
}

/// `DELETE /v1/responses/{id}`: deletes the stored reply as `DELETE …/messages/{mid}` does (its
/// children stay, orphaned).
pub(crate) fn delete_response<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let id = &c.params.mid;
        let (sid, _) = find(c.env, c.req, id, Needs::Write).await?;
        Session::new(c.env, &sid).delete_message(id).await?;
        Ok(Response::json(200, &obj(vec![("id", j(id)), ("object", j("response")), ("deleted", j(true))])))
    })
}

/// A JSON object of `pairs`: cheaper in the wasm than `json!`, which serializes each value
/// through its own type.
fn obj(pairs: Vec<(&str, Json)>) -> Json {
    Json::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A value as JSON, without serializing it through its type.
trait ToJson {
    fn to_json(self) -> Json;
}

impl ToJson for &str {
    fn to_json(self) -> Json {
        Json::String(self.to_owned())
    }
}

impl ToJson for &&str {
    fn to_json(self) -> Json {
        Json::String((*self).to_owned())
    }
}

impl ToJson for &&String {
    fn to_json(self) -> Json {
        Json::String((*self).clone())
    }
}

impl ToJson for &String {
    fn to_json(self) -> Json {
        Json::String(self.clone())
    }
}

impl ToJson for String {
    fn to_json(self) -> Json {
        Json::String(self)
    }
}

impl ToJson for i64 {
    fn to_json(self) -> Json {
        Json::from(self)
    }
}

impl ToJson for usize {
    fn to_json(self) -> Json {
        Json::from(self)
    }
}

impl ToJson for u64 {
    fn to_json(self) -> Json {
        Json::from(self)
    }
}

impl ToJson for bool {
    fn to_json(self) -> Json {
        Json::Bool(self)
    }
}

impl ToJson for Json {
    fn to_json(self) -> Json {
        self
    }
}

impl ToJson for &Json {
    fn to_json(self) -> Json {
        self.clone()
    }
}

impl ToJson for Vec<Json> {
    fn to_json(self) -> Json {
        Json::Array(self)
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(self) -> Json {
        self.map_or(Json::Null, ToJson::to_json)
    }
}

fn j(value: impl ToJson) -> Json {
    value.to_json()
}
