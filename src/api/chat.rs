//! The agent turn: `POST /sessions/{sid}/chat` (JSON, or server-sent events with
//! `Accept: text/event-stream`) and the WebSocket `chat` frame.
//!
//! A turn appends the user message, sends the frozen system prompt, the branch's history (read-
//! time truncated, dangling calls and orphan results removed, capped without splitting a call
//! from its result) and the session's tools plus the caller's to the model, runs server-side
//! tools and calls the model again (bounded steps), and stores **one** assistant message with
//! the usage. **All or nothing**: nothing is written until the model is done; a provider or tool
//! failure, or a client that goes away mid-stream, leaves the history exactly as it was.
//!
//! A call of a tool the server does not own ends the turn with that call `input-available` in
//! the stored assistant message; the caller continues by posting `{messages}`: the branch as it
//! was given, with those calls answered. The continuation is checked against what is stored
//! (`409 not_a_prefix`, `forged_tool_result`, `forged_approval`).

use serde_json::{json, Map, Value as Json};

use super::http::{Request, Response};
use super::messages::{self, publish_message};
use super::{compact, Ctx};
use crate::core::compaction::truncate::{truncate_older_messages, TruncateOptions};
use crate::core::config::is_label;
use crate::core::context::tools::{self, ToolDef};
use crate::core::context::Context;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::ids::new_id;
use crate::core::llm::Usage;
use crate::core::llm::{chat, ChatMessage, ChatRequest, ToolCall, ToolSpec};
use crate::core::sql::atomically;
use crate::core::store::history::history;
use crate::core::store::message::parse_all;
use crate::core::store::message::NewMessage;
use crate::core::store::sessions;
use crate::core::store::spill;
use crate::core::store::tree::{Parent, Tree};
use crate::core::turn::conversation::{build, validate_continuation};
use crate::core::turn::AssistantParts;

/// What a turn tells its caller as it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    /// The next piece of the reply's text.
    Delta { message_id: String, text: String },
}

/// What a client asked for.
enum Ask {
    /// A new user message, attached like an append (`parentId` absent / null / an id).
    Message { msg: NewMessage, parent: Parent },
    /// A continuation after client-side tools: the branch with their results.
    Continue { messages: Vec<Json> },
}

/// A caller's tool: offered to the model, answered by the caller.
fn client_tools(body: &Map<String, Json>, server: &[ToolDef]) -> Result<Vec<ToolSpec>> {
    let Some(list) = body.get("tools") else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| Error::invalid("tools must be an array"))?;
    let mut out: Vec<ToolSpec> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let name = t.get("name").and_then(Json::as_str).unwrap_or_default();
        if !is_label(name) {
            return Err(Error::invalid(format!("tools[{i}].name must be 1-64 characters of [A-Za-z0-9_-]")));
        }
        if server.iter().any(|d| d.name == name) || out.iter().any(|s| s.name == name) {
            return Err(Error::invalid(format!("tools[{i}]: a tool named {name:?} already exists")));
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
            if msg.id.starts_with(crate::core::store::overlay::COMPACTION_PREFIX) {
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

/// The stored messages of the path to `leaf` as clients see them (overlays applied, whole).
async fn branch(ctx: &Ctx<'_>, sid: &str, leaf: Option<&str>) -> Result<Vec<Json>> {
    let raw = match leaf {
        Some(l) => history(ctx.sql, sid, Some(l), false)?,
        None => Vec::new(),
    };
    let (whole, _) = spill::rehydrate(ctx.sql, ctx.blobs, sid, raw).await?;
    parse_all(&whole)
}

/// Runs one turn. `on_event` gets the reply's text as it streams (an `Err` from it aborts the
/// turn, which then stores nothing). Returns the stored assistant message.
pub async fn turn(
    ctx: &Ctx<'_>,
    sid: &str,
    req: &Request,
    on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
) -> Result<Json> {
    let body = req.json_object()?;
    let cfg = &ctx.config.chat;
    let context = Context { sql: ctx.sql, blobs: ctx.blobs, config: ctx.config, agent: ctx.agent, session: sid };
    let server_defs = tools::for_session(&context)?;
    let client = client_tools(&body, &server_defs)?;
    let tree = Tree::new(ctx.sql, sid);

    // What the model sees, and what will be written once it is done.
    let (mut base, mut user, parent, mut updates) = match ask(&body)? {
        Ask::Message { msg, parent } => {
            tree.check_parent(&parent)?;
            if tree.contains(&msg.id)? {
                return Err(Error::conflict(format!("message {} is already in session {sid}", msg.id)));
            }
            let parent_id = tree.parent_id(&parent)?;
            let mut base = branch(ctx, sid, parent_id.as_deref()).await?;
            base.push(serde_json::from_str(&msg.json).map_err(|e| Error::internal(e.to_string()))?);
            (base, Some(msg), parent_id, Vec::new())
        }
        Ask::Continue { messages } => {
            let leaf = messages
                .last()
                .and_then(|m| m.get("id"))
                .and_then(Json::as_str)
                .ok_or_else(|| Error::invalid("messages: the last message needs an id"))?
                .to_owned();
            if !tree.contains(&leaf)? {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("not_a_prefix: message {leaf} is not in session {sid}"),
                )
                .with_code("not_a_prefix"));
            }
            let stored = branch(ctx, sid, Some(&leaf)).await?;
            let names: Vec<&str> = server_defs.iter().map(|d| d.name).collect();
            let changed = validate_continuation(&stored, &messages, &names).map_err(|r| {
                Error::new(ErrorKind::Conflict, format!("{} at message {}: {}", r.code, r.index, r.reason))
                    .with_code(r.code)
            })?;
            let updates =
                changed.into_iter().map(|i| NewMessage::from_json(&messages[i])).collect::<Result<Vec<_>>>()?;
            (messages, None, Some(leaf), updates)
        }
    };

    // Frozen with the turn's writes: a turn that fails stores nothing, not even the prompt.
    let (system, to_freeze) = context.prompt_for_turn().await?;
    let mut specs: Vec<ToolSpec> = server_defs
        .iter()
        .map(|d| ToolSpec {
            name: d.name.to_owned(),
            description: d.description.clone(),
            input_schema: d.input_schema.clone(),
        })
        .collect();
    specs.extend(client.iter().cloned());
    let shown = truncate_older_messages(std::mem::take(&mut base), &TruncateOptions::default());
    let conversation = build(&shown, cfg.max_messages);
    let mut model_messages = conversation.messages;

    let assistant_id = new_id()?;
    let mut parts = AssistantParts::default();
    let mut usage = Usage::default();
    for _step in 0..cfg.max_steps {
        let request = ChatRequest {
            system: Some(system.clone()),
            messages: model_messages.clone(),
            tools: specs.clone(),
            max_tokens: cfg.max_tokens,
            cache_key: Some(sid.to_owned()),
        };
        let mut forward = |text: &str| -> Result<()> {
            if ctx.events.has_listeners(sid) {
                ctx.events
                    .publish(sid, &json!({"type": "delta", "sessionId": sid, "messageId": assistant_id, "text": text}));
            }
            on_event(ChatEvent::Delta { message_id: assistant_id.clone(), text: text.to_owned() })
        };
        let reply = chat(ctx.transport, ctx.llm, &request, &mut forward).await?;
        usage.input_tokens += reply.usage.input_tokens;
        usage.output_tokens += reply.usage.output_tokens;
        if reply.text.trim().is_empty() && reply.tool_calls.is_empty() {
            return Err(Error::new(ErrorKind::LlmUnavailable, "the model answered neither text nor a tool call"));
        }
        parts.step_text(&reply.reasoning, &reply.text);
        if reply.tool_calls.is_empty() {
            break;
        }
        let mut results = Vec::new();
        let mut pending = false;
        for ToolCall { id, name, input } in &reply.tool_calls {
            if server_defs.iter().any(|d| d.name == name) {
                // A storage failure here fails the whole turn; the model's mistakes (input of
                // the wrong shape included) are outputs it can correct.
                let output = match tools::execute(&context, name, input, &ctx.now).await {
                    Ok(ran) => {
                        super::context::publish_tool_effects(ctx, sid, input, &ran).await;
                        ran.output
                    }
                    Err(e) if matches!(e.kind, ErrorKind::InvalidRequest | ErrorKind::NotFound) => {
                        format!("Error: {}", e.message)
                    }
                    Err(e) => return Err(e),
                };
                parts.tool_done(name, id, input, &output);
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output });
            } else if client.iter().any(|c| &c.name == name) {
                parts.tool_pending(name, id, input);
                pending = true;
            } else {
                let error = format!("Error: there is no tool named {name:?}");
                parts.tool_failed(name, id, input, &error);
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output: error });
            }
        }
        if pending {
            break;
        }
        model_messages.push(ChatMessage::Assistant { text: reply.text.clone(), tool_calls: reply.tool_calls.clone() });
        model_messages.extend(results);
    }

    // Everything is known: write it in one transaction.
    let mut meta = Map::new();
    meta.insert("model".into(), json!(ctx.llm.model));
    meta.insert("usage".into(), json!({"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}));
    let message = parts.message(&assistant_id, &ctx.now, meta);
    let mut assistant = NewMessage::from_json(&message)?;
    // Oversize messages spill only now that the turn will be written: a turn that failed
    // earlier left no objects behind, and one that fails here deletes what it wrote.
    let spilled = async {
        if let Some(u) = user.as_mut() {
            spill::prepare(ctx.sql, ctx.blobs, ctx.agent, sid, u).await?;
        }
        for m in updates.iter_mut() {
            spill::prepare(ctx.sql, ctx.blobs, ctx.agent, sid, m).await?;
        }
        spill::prepare(ctx.sql, ctx.blobs, ctx.agent, sid, &mut assistant).await
    }
    .await;
    if let Err(e) = spilled {
        let mut all: Vec<NewMessage> = user.take().into_iter().collect();
        all.extend(updates);
        all.push(assistant);
        messages::release(ctx, &all);
        return Err(e);
    }
    let written = atomically(ctx.sql, || {
        // Each new message is the child of the one before (the first of `parent`, or a root).
        let under = |id: &Option<String>| id.clone().map_or(Parent::Root, Parent::Id);
        let mut attach = parent.clone();
        if let Some(u) = &user {
            tree.append(u, &under(&attach), &ctx.now)?;
            attach = Some(u.id.clone());
        }
        for m in &updates {
            tree.update(m)?;
        }
        tree.append(&assistant, &under(&attach), &ctx.now)?;
        sessions::ensure(ctx.sql, sid, &ctx.now)?;
        sessions::add_usage(ctx.sql, sid, usage.input_tokens, usage.output_tokens, 0.0, &ctx.now)?;
        if to_freeze {
            context.freeze(&system, &ctx.now)?;
        }
        Ok(())
    });
    // In the order they were written: the user message, the answered calls, the reply.
    let mut all: Vec<NewMessage> = user.take().into_iter().collect();
    all.extend(updates);
    all.push(assistant);
    messages::release(ctx, &all);
    written?;
    for m in &all {
        publish_message(ctx, sid, m.client_json());
    }
    // Messages the cap left out are forgotten by the model: compact (when configured) so the
    // next turn sees them in a summary.
    if conversation.dropped > 0 {
        compact::after_cap(ctx, sid, &assistant_id).await;
    } else {
        let _ = compact::after_append(ctx, sid, &assistant_id).await;
    }
    Ok(message)
}

/// One server-sent event: `data: <json>` and a blank line.
pub fn sse(frame: &Json) -> String {
    format!("data: {frame}\n\n")
}

/// The SSE frame of an event.
pub fn event_frame(e: &ChatEvent) -> Json {
    match e {
        ChatEvent::Delta { message_id, text } => json!({"type": "delta", "messageId": message_id, "text": text}),
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
/// they come instead; see `workers::agent`). An error before the first event is an ordinary
/// JSON error answer.
pub async fn route(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    if !req.wants_event_stream() {
        let message = turn(ctx, sid, req, &mut |_| Ok(())).await?;
        return Ok(Response::json(201, &json!({ "messages": [message] })));
    }
    let mut body = String::new();
    let result = turn(ctx, sid, req, &mut |e| {
        body.push_str(&sse(&event_frame(&e)));
        Ok(())
    })
    .await;
    match result {
        Ok(message) => body.push_str(&closing_frames(&message)),
        Err(e) if body.is_empty() => return Err(e),
        Err(e) => body.push_str(&error_frame(&e)),
    }
    Ok(event_stream(body.into_bytes()))
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
/// then stores nothing.
pub async fn stream(env: super::Env<'_>, now_ms: i64, req: &Request, send: &mut dyn FnMut(Streamed) -> Result<()>) {
    let ctx = super::context_of(env, now_ms);
    let sid = match super::session_of(req) {
        Ok(s) => s,
        Err(e) => {
            let _ = send(Streamed::Fail(e));
            return;
        }
    };
    let mut started = false;
    let result = turn(&ctx, &sid, req, &mut |e| {
        started = true;
        send(Streamed::Data(sse(&event_frame(&e))))
    })
    .await;
    let _ = match result {
        Ok(message) => send(Streamed::Data(closing_frames(&message))),
        Err(e) if !started => send(Streamed::Fail(e)),
        Err(e) => send(Streamed::Data(error_frame(&e))),
    };
    // As after every write request: spilled objects that lost their last reference go.
    let _ = crate::core::store::spill::sweep(ctx.sql, ctx.blobs, 100).await;
}
