//! The agent turn: a user message (or a continuation after client tools) in, **one** stored
//! assistant message out.
//!
//! ```text
//! start: validate, read the branch ──▶ the memories for the user's text (a `<user-memory>`
//! block after the prompt) ──▶ the frozen prompt, the conversation (truncated, sanitized,
//! capped keeping summaries), the tools ──▶ steps: the model, server tools, the model again
//! (bounded) ──▶ one transaction (Session::commit_turn) ──▶ frames ──▶ compaction ──▶ after the
//! answer: memory extraction (`memory::After`)
//! ```
//!
//! **All or nothing**: nothing is written until the model is done; a provider or tool-store
//! failure, or a caller that goes away mid-stream (its `on_event` fails), writes nothing.
//! Effects of server tools that already ran (a `set_context` write) are not undone.
//! **Continuations are checked against storage** before any model call.

use serde_json::{json, Map, Value as Json};

use super::conversation::{build, validate_continuation, Rejection, NOT_A_PREFIX};
use super::AssistantParts;
use crate::core::compaction::truncate::{truncate_older_messages, TruncateOptions};
use crate::core::config::{Category, InjectConfig};
use crate::core::context::tools::Tool;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::ids::new_id;
use crate::core::llm::{chat, ChatMessage, ChatRequest, Format, ToolCall, ToolSpec, Usage};
use crate::core::memory::inject::render;
use crate::core::memory::recall::{Query, MAX_LIMIT};
use crate::core::memory::{After, Memories};
use crate::core::parts::parts;
use crate::core::session::{Session, TurnWrite};
use crate::core::store::history::{history, Overlays};
use crate::core::store::message::indexed_text;
use crate::core::store::message::{parse_all, NewMessage};
use crate::core::store::tree::Parent;

/// What a client asked for.
pub enum Ask {
    /// A new user message, attached like an append (`parentId` absent / null / an id).
    Message { msg: NewMessage, parent: Parent },
    /// A continuation after client-side tools: the branch with their results.
    Continue { messages: Vec<Json> },
}

/// A turn as asked: the message or continuation, and the caller's own tools (offered to the
/// model after the session's, answered by the caller).
pub struct TurnRequest {
    pub ask: Ask,
    pub tools: Vec<ToolSpec>,
    /// Whether long-term memory takes part (`memory: false` in the body skips inject and
    /// extract for this turn).
    pub memory: MemoryUse,
}

/// Whether a turn uses long-term memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryUse {
    /// As configured (`SESSION_CONFIG.memory`).
    #[default]
    AsConfigured,
    /// Not for this turn.
    Skip,
}

/// A finished turn: the stored assistant message, and the work it leaves for after its answer.
pub struct Turn {
    pub message: Json,
    pub after: Option<After>,
}

/// What a turn tells its caller as it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    /// The next piece of the reply's text.
    Delta { message_id: String, text: String },
    /// The reply is complete and about to be stored: an `Err` from the caller still stops the
    /// turn here, with nothing stored (a cancel that came after the last piece).
    Storing,
}

/// What the model sees first, and what will be written with the reply.
struct Start {
    /// The branch as clients see it, the new user message last.
    base: Vec<Json>,
    user: Option<NewMessage>,
    parent: Option<String>,
    updates: Vec<NewMessage>,
}

/// Runs one turn of `session`. `on_event` gets the reply's text as it streams (an `Err` from it
/// aborts the turn, which then stores nothing). Returns the stored assistant message.
pub async fn turn(
    session: &Session<'_>,
    req: TurnRequest,
    on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
) -> Result<Turn> {
    let server = session.tools()?;
    for (i, t) in req.tools.iter().enumerate() {
        let clash = server.iter().chain(&req.tools[..i]).any(|s| s.name == t.name);
        if clash {
            return Err(Error::invalid(format!("tools[{i}]: a tool named {:?} already exists", t.name)));
        }
    }
    let continuation = matches!(req.ask, Ask::Continue { .. });
    let memory = session.env.config.memory.as_ref().filter(|_| req.memory == MemoryUse::AsConfigured && !continuation);
    let start = start(session, req.ask, &server).await?;
    let injected = match (memory.and_then(|m| m.inject.as_ref()), &start.user) {
        (Some(cfg), Some(user)) => inject(session, cfg, user).await?,
        _ => None,
    };
    // Frozen with the turn's writes: a turn that fails stores nothing, not even the prompt.
    let (system, to_freeze) = session.context().prompt_for_turn().await?;
    let shown = truncate_older_messages(start.base, &TruncateOptions::default());
    let conversation = build(&shown, session.env.config.chat.max_messages);
    let assistant_id = new_id()?;
    let tail = injected.as_ref().map(|i| i.0.clone());
    let steps =
        Steps { session, server: &server, client: &req.tools, system, memory: tail, assistant_id: &assistant_id };
    let (parts, usage) = steps.run(conversation.messages, on_event).await?;

    let mut meta = Map::new();
    meta.insert("model".into(), json!(session.env.llm.model));
    meta.insert("usage".into(), json!({"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}));
    let recalled = injected.map(|i| i.1).unwrap_or_default();
    if memory.is_some_and(|m| m.inject.is_some()) {
        meta.insert("memories".into(), json!(recalled));
    }
    on_event(ChatEvent::Storing)?;
    let message = parts.message(&assistant_id, &session.env.now, meta);
    let assistant = NewMessage::from_json(&message)?;
    let freeze = to_freeze.then_some(steps.system);
    let write = TurnWrite {
        user: start.user,
        updates: start.updates,
        assistant,
        parent: start.parent,
        usage,
        freeze,
        recalled,
    };
    session.commit_turn(write).await?;
    // Messages the cap left out are forgotten by the model: compact (when configured) so the
    // next turn sees them in a summary.
    if conversation.dropped > 0 {
        session.after_cap(&assistant_id).await;
    } else {
        session.after_append(&assistant_id).await;
    }
    let after = memory
        .filter(|m| m.extract.is_some())
        .map(|_| After::ExtractMemories { session: session.id.to_owned(), leaf: assistant_id.clone() });
    Ok(Turn { message, after })
}

/// The memories recalled for the user's message, as the `<user-memory>` block and their ids;
/// `None` when nothing relevant is stored. Conversation memories of other sessions stay out.
async fn inject(session: &Session<'_>, cfg: &InjectConfig, user: &NewMessage) -> Result<Option<(String, Vec<String>)>> {
    let text = indexed_text(parts(&user.to_value()?));
    if text.trim().is_empty() {
        return Ok(None);
    }
    let query = Query { text, limit: MAX_LIMIT, ..Query::default() };
    let mut hits = Memories::new(session.env).rank(&query).await?;
    hits.retain(|h| {
        cfg.categories.contains(&h.memory.category)
            && (h.memory.category != Category::Conversation
                || h.memory.source.as_ref().is_some_and(|s| s.session_id == session.id))
    });
    hits.truncate(cfg.limit);
    Ok(render(&hits, cfg.token_budget))
}

/// Checks what was asked against what is stored and reads the branch the model will see.
async fn start(session: &Session<'_>, ask: Ask, server: &[ToolSpec]) -> Result<Start> {
    let (tree, sid) = (session.tree(), session.id);
    match ask {
        Ask::Message { msg, parent } => {
            tree.check_parent(&parent)?;
            if tree.contains(&msg.id)? {
                return Err(Error::conflict(format!("message {} is already in session {sid}", msg.id)));
            }
            let parent_id = tree.parent_id(&parent)?;
            let mut base = branch(session, parent_id.as_deref()).await?;
            base.push(msg.to_value()?);
            Ok(Start { base, user: Some(msg), parent: parent_id, updates: Vec::new() })
        }
        Ask::Continue { messages } => {
            let leaf = messages
                .last()
                .and_then(|m| m.get("id"))
                .and_then(Json::as_str)
                .ok_or_else(|| Error::invalid("messages: the last message needs an id"))?
                .to_owned();
            if !tree.contains(&leaf)? {
                let reason = format!("message {leaf} is not in session {sid}");
                return Err(Rejection { code: NOT_A_PREFIX, reason, index: messages.len() - 1 }.into());
            }
            let stored = branch(session, Some(&leaf)).await?;
            let names: Vec<&str> = server.iter().map(|d| d.name.as_str()).collect();
            let changed = validate_continuation(&stored, &messages, &names)?;
            let updates = changed.into_iter().map(|i| NewMessage::from_json(&messages[i])).collect::<Result<_>>()?;
            Ok(Start { base: messages, user: None, parent: Some(leaf), updates })
        }
    }
}

/// The stored messages of the path to `leaf` as clients see them (overlays applied, whole).
async fn branch(session: &Session<'_>, leaf: Option<&str>) -> Result<Vec<Json>> {
    let raw = match leaf {
        Some(l) => history(session.env.sql, session.id, Some(l), Overlays::Applied)?,
        None => Vec::new(),
    };
    let (whole, _) = session.whole(raw).await?;
    parse_all(&whole)
}

/// The model's steps of one turn.
struct Steps<'s, 'a> {
    session: &'s Session<'a>,
    server: &'s [ToolSpec],
    client: &'s [ToolSpec],
    system: String,
    /// The `<user-memory>` block of this turn, sent after the frozen prompt.
    memory: Option<String>,
    assistant_id: &'s str,
}

impl Steps<'_, '_> {
    /// Calls the model, runs the server tools it called and calls it again, until it answers
    /// without tools, calls a client tool (the turn ends with that call pending) or the
    /// configured most steps are done. Returns the reply's parts and the usage of all steps.
    async fn run(
        &self,
        mut messages: Vec<ChatMessage>,
        on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
    ) -> Result<(AssistantParts, Usage)> {
        let (env, sid) = (self.session.env, self.session.id);
        let cfg = &env.config.chat;
        let tools: Vec<ToolSpec> = self.server.iter().chain(self.client).cloned().collect();
        let mut parts = AssistantParts::default();
        let mut usage = Usage::default();
        for _step in 0..cfg.max_steps {
            let request = ChatRequest {
                system: Some(self.system.clone()),
                messages: messages.clone(),
                tools: tools.clone(),
                max_tokens: cfg.max_tokens,
                cache_key: Some(sid.to_owned()),
                system_tail: self.memory.clone(),
                format: Format::Text,
            };
            let mut forward = |text: &str| -> Result<()> {
                if env.events.has_listeners(sid) {
                    let frame =
                        json!({"type": "delta", "sessionId": sid, "messageId": self.assistant_id, "text": text});
                    env.events.publish(sid, &frame);
                }
                on_event(ChatEvent::Delta { message_id: self.assistant_id.to_owned(), text: text.to_owned() })
            };
            let reply = chat(env.transport, env.llm, &request, &mut forward).await?;
            usage.input_tokens += reply.usage.input_tokens;
            usage.output_tokens += reply.usage.output_tokens;
            if reply.text.trim().is_empty() && reply.tool_calls.is_empty() {
                return Err(Error::new(ErrorKind::LlmUnavailable, "the model answered neither text nor a tool call"));
            }
            parts.step_text(&reply.reasoning, &reply.text);
            if !reply.reasoning.is_empty() {
                self.progress(json!({"type": "reasoning", "text": reply.reasoning}));
            }
            if reply.tool_calls.is_empty() {
                break;
            }
            let (results, pending) = self.tools(&reply.tool_calls, &mut parts).await?;
            if pending {
                break;
            }
            messages.push(ChatMessage::Assistant { text: reply.text.clone(), tool_calls: reply.tool_calls.clone() });
            messages.extend(results);
        }
        Ok((parts, usage))
    }

    /// Answers one step's tool calls: server tools run (their results go back to the model),
    /// client tools stay pending (`true`: the turn ends), unknown ones are errors the model
    /// reads.
    /// A progress frame of the reply for the session's sockets (`reasoning` of a finished step,
    /// `tool` calls as they are made and answered), with the session and reply ids added.
    fn progress(&self, mut frame: Json) {
        let sid = self.session.id;
        if self.session.env.events.has_listeners(sid) {
            frame["sessionId"] = json!(sid);
            frame["messageId"] = json!(self.assistant_id);
            self.session.env.events.publish(sid, &frame);
        }
    }

    async fn tools(&self, calls: &[ToolCall], parts: &mut AssistantParts) -> Result<(Vec<ChatMessage>, bool)> {
        let mut results = Vec::new();
        let mut pending = false;
        for ToolCall { id, name, input } in calls {
            let call =
                json!({"type": "tool", "toolCallId": id, "toolName": name, "state": "input-available", "input": input});
            self.progress(call.clone());
            let done = |state: &str, key: &str, value: &str| {
                let mut f = call.clone();
                f["state"] = json!(state);
                f[key] = json!(value);
                self.progress(f);
            };
            let server = Tool::from_name(name).filter(|_| self.server.iter().any(|t| &t.name == name));
            if server.is_some() {
                // A storage failure fails the whole turn; the model's mistakes (input of the
                // wrong shape included) are outputs it can correct.
                let output = match self.session.execute_tool(name, input).await {
                    Ok(ran) => ran.output,
                    Err(e) if matches!(e.kind, ErrorKind::InvalidRequest | ErrorKind::NotFound) => {
                        format!("Error: {}", e.message)
                    }
                    Err(e) => return Err(e),
                };
                done("output-available", "output", &output);
                parts.tool_done(name, id, input, &output);
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output });
            } else if self.client.iter().any(|c| &c.name == name) {
                parts.tool_pending(name, id, input);
                pending = true;
            } else {
                let error = format!("Error: there is no tool named {name:?}");
                done("output-error", "errorText", &error);
                parts.tool_failed(name, id, input, &error);
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output: error });
            }
        }
        Ok((results, pending))
    }
}
