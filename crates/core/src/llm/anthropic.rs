//! The Anthropic provider ([`Anthropic`]), the Messages API: the request body (the frozen
//! system prompt and the tool list marked for prompt caching, tool results as user turns,
//! alternating roles), the whole answer, the streamed events and the usage (prompt cache reads
//! and writes counted as input), as serde types read leniently. No embeddings.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::api::{Accum, Api, PartialCall};
use super::model::{ChatMessage, ChatReply, ChatRequest, Delivery, Piece, ToolCall, Usage, DEFAULT_MAX_TOKENS};
use super::sse::SseEvent;
use super::transport::{Call, Endpoint, HttpRequest};
use super::wire::{
    error_message, event_json, excerpt, lenient, object_or_empty, parse_arguments, request_body, unavailable,
};
use crate::config::CacheTtl;
use crate::error::Result;
use crate::sort;

/// The Anthropic Messages API (`LLM_PROVIDER=anthropic`): the key as `x-api-key`, and the API
/// version every request names.
#[derive(Clone, Copy, Debug, Default)]
pub struct Anthropic;

impl Api for Anthropic {
    fn default_base_url(&self) -> &'static str {
        "https://api.anthropic.com/v1"
    }

    fn chat_call(&self, to: &Endpoint<'_>, req: &ChatRequest, delivery: Delivery) -> Result<Call> {
        let url = format!("{}/messages", to.base_url);
        let mut http = HttpRequest::json(url, body(to.model, req, delivery)?, delivery, to.timeout_ms);
        if let Some(key) = to.api_key {
            http.headers.push(("x-api-key".into(), key.to_owned()));
        }
        http.headers.push(("anthropic-version".into(), "2023-06-01".into()));
        Ok(Call::Http(http))
    }

    fn reply(&self, answer: Json) -> Result<ChatReply> {
        Ok(reply(answer))
    }

    fn decode(&self, acc: &mut Accum, ev: &SseEvent) -> Result<Vec<Piece>> {
        Ok(push(acc, ev)?.into_iter().collect())
    }
}

// ── Request ──────────────────────────────────────────────────────────────────────────────────────────

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Turn>,
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
}

/// `{"type": "ephemeral", "ttl"?}`: cache the request up to here (for 5 minutes, or `"1h"`).
#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn of(ttl: CacheTtl) -> CacheControl {
        CacheControl {
            r#type: "ephemeral",
            ttl: match ttl {
                CacheTtl::FiveMinutes => None,
                CacheTtl::OneHour => Some("1h"),
            },
        }
    }
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    r#type: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct Turn {
    role: &'static str,
    content: Vec<Content>,
}

/// A content block of a turn, its last one perhaps closing the cached prefix.
#[derive(Serialize)]
struct Content {
    #[serde(flatten)]
    block: Block,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text { text: String },
    ToolUse { id: String, name: String, input: Json },
    ToolResult { tool_use_id: String, content: String },
}

/// Tool results go in a user turn right after the assistant turn, and roles must alternate, so
/// adjacent messages of one role are merged (tool results first) and empty ones left out.
fn turns(msgs: &[ChatMessage]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for m in msgs {
        let (role, blocks) = match m {
            ChatMessage::User { text } => {
                ("user", if text.is_empty() { vec![] } else { vec![Block::Text { text: text.clone() }] })
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut b = Vec::new();
                if !text.is_empty() {
                    b.push(Block::Text { text: text.clone() });
                }
                b.extend(tool_calls.iter().map(|c| Block::ToolUse {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    input: object_or_empty(&c.input),
                }));
                ("assistant", b)
            }
            ChatMessage::Tool { call_id, output, .. } => {
                ("user", vec![Block::ToolResult { tool_use_id: call_id.clone(), content: output.clone() }])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        let blocks = blocks.into_iter().map(|block| Content { block, cache_control: None });
        match turns.last_mut() {
            Some(t) if t.role == role => t.content.extend(blocks),
            _ => turns.push(Turn { role, content: blocks.collect() }),
        }
    }
    for t in turns.iter_mut().filter(|t| t.role == "user") {
        sort::by_key(&mut t.content, |c| !matches!(c.block, Block::ToolResult { .. }));
    }
    turns
}

/// The request body of one step. The system prompt and the tools are stable across the steps
/// of a session (the prompt is frozen), and so is the conversation before its newest turns: the
/// request's cache marks (`chat.cache`) close each of them for the prompt cache.
fn body(model: &str, req: &ChatRequest, delivery: Delivery) -> Result<String> {
    let stream = delivery == Delivery::Streamed;
    let last = req.tools.len().saturating_sub(1);
    let marks = req.cache.as_ref().map(|c| c.marks);
    let mark = |on: bool| marks.filter(|_| on).map(|m| CacheControl::of(m.ttl));
    let mut messages = turns(&req.messages);
    // The `messages`-th turn from the end closes the cached conversation (its last block).
    if let Some(m) = marks.filter(|m| m.messages > 0) {
        if let Some(t) = messages.len().checked_sub(m.messages).and_then(|i| messages.get_mut(i)) {
            if let Some(c) = t.content.last_mut() {
                c.cache_control = Some(CacheControl::of(m.ttl));
            }
        }
    }
    request_body(&Body {
        model,
        max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        messages,
        stream,
        // The frozen prompt is cached; the per-turn tail after it is not.
        system: req
            .system
            .iter()
            .map(|s| SystemBlock {
                r#type: "text",
                text: s,
                cache_control: mark(marks.is_some_and(|m| m.instructions)),
            })
            .chain(req.system_tail.iter().map(|s| SystemBlock { r#type: "text", text: s, cache_control: None }))
            .collect(),
        tools: req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| Tool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.input_schema,
                cache_control: mark(i == last && marks.is_some_and(|m| m.tools)),
            })
            .collect(),
    })
}

// ── Answers ──────────────────────────────────────────────────────────────────────────────────────────

/// Usage; input tokens count the prompt cache's reads and writes too.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    #[serde(deserialize_with = "lenient")]
    input_tokens: Option<i64>,
    #[serde(deserialize_with = "lenient")]
    cache_read_input_tokens: i64,
    #[serde(deserialize_with = "lenient")]
    cache_creation_input_tokens: i64,
    #[serde(deserialize_with = "lenient")]
    output_tokens: Option<i64>,
}

impl WireUsage {
    fn input(&self) -> i64 {
        self.input_tokens.unwrap_or(0) + self.cache_read_input_tokens + self.cache_creation_input_tokens
    }
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input(),
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: self.cache_read_input_tokens,
        }
    }
}

/// A content block of an answer (`content_block` of a stream event).
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireBlock {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: String,
    #[serde(deserialize_with = "lenient")]
    text: String,
    #[serde(deserialize_with = "lenient")]
    thinking: String,
    #[serde(deserialize_with = "lenient")]
    id: String,
    #[serde(deserialize_with = "lenient")]
    name: String,
    input: Option<Json>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Message {
    #[serde(deserialize_with = "lenient")]
    content: Vec<WireBlock>,
    #[serde(deserialize_with = "lenient")]
    usage: WireUsage,
    #[serde(deserialize_with = "lenient")]
    stop_reason: Option<String>,
}

/// A whole (non-streamed) answer, already checked for a status and an `error`.
fn reply(answer: Json) -> ChatReply {
    let m: Message = serde_json::from_value(answer).unwrap_or_default();
    let mut reply = ChatReply { usage: m.usage.usage(), finish_reason: m.stop_reason, ..ChatReply::default() };
    for b in m.content {
        match b.kind.as_str() {
            "text" => reply.text.push_str(&b.text),
            "thinking" => reply.reasoning.push_str(&b.thinking),
            "tool_use" => {
                reply.tool_calls.push(ToolCall { id: b.id, name: b.name, input: parse_arguments(b.input.as_ref()) })
            }
            _ => {}
        }
    }
    reply
}

// ── Streamed answers ─────────────────────────────────────────────────────────────────────────────────

/// Any event of the stream: the fields of every kind, each absent where it does not belong.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Event {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    index: u64,
    #[serde(deserialize_with = "lenient")]
    message: Message,
    #[serde(deserialize_with = "lenient")]
    content_block: WireBlock,
    #[serde(deserialize_with = "lenient")]
    delta: EventDelta,
    #[serde(deserialize_with = "lenient")]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct EventDelta {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: String,
    #[serde(deserialize_with = "lenient")]
    text: String,
    #[serde(deserialize_with = "lenient")]
    thinking: String,
    #[serde(deserialize_with = "lenient")]
    partial_json: String,
    #[serde(deserialize_with = "lenient")]
    stop_reason: Option<String>,
}

/// What a content block of the stream is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum BlockKind {
    Text,
    Thinking,
    /// A `tool_use` block: the position of its call.
    Tool(usize),
    Other,
}

/// Takes in one event of a streamed answer; returns the text or reasoning it adds, if any. The
/// blocks the stream announces are kept in [`Accum`]'s `blocks`, with the call a `tool_use`
/// block streams.
fn push(acc: &mut Accum, ev: &SseEvent) -> Result<Option<Piece>> {
    if ev.data.trim().is_empty() {
        return Ok(None);
    }
    let j = event_json(&ev.data)?;
    let event: Event = serde_json::from_value(j.clone()).unwrap_or_default();
    let kind = event.kind.clone().or_else(|| ev.event.clone()).unwrap_or_default();
    let index = event.index;
    match kind.as_str() {
        "error" => {
            let detail = error_message(j.get("error")).unwrap_or_else(|| excerpt(&ev.data, 300));
            return Err(
                unavailable("the model's stream failed").with_log(format!("the model's stream failed: {detail}"))
            );
        }
        "message_start" => acc.reply.usage = event.message.usage.usage(),
        "content_block_start" => return Ok(block_start(acc, index, event.content_block)),
        "content_block_delta" => return Ok(block_delta(acc, index, event.delta)),
        "content_block_stop" => {
            if let Some(p) = acc.block_call(index) {
                let call = &mut acc.calls[p];
                if call.input.is_none() {
                    call.input = Some(parse_arguments(Some(&Json::String(std::mem::take(&mut call.arguments)))));
                }
            }
        }
        "message_delta" => {
            if let Some(r) = event.delta.stop_reason {
                acc.reply.finish_reason = Some(r);
                acc.done = true;
            }
            if let Some(u) = event.usage {
                if let Some(out) = u.output_tokens {
                    acc.reply.usage.output_tokens = out;
                }
                if u.input_tokens.is_some_and(|n| n > 0) {
                    acc.reply.usage.input_tokens = u.input();
                }
            }
        }
        "message_stop" => {
            acc.done = true;
            acc.ended = true;
        }
        _ => {}
    }
    Ok(None)
}

fn block_start(acc: &mut Accum, index: u64, b: WireBlock) -> Option<Piece> {
    let kind = match b.kind.as_str() {
        "text" => BlockKind::Text,
        "thinking" => BlockKind::Thinking,
        "tool_use" => {
            let input = b.input.filter(|i| i.as_object().is_some_and(|o| !o.is_empty()));
            // Calls come out in the order their blocks started.
            let order = acc.calls.len() as u64;
            acc.calls.push(PartialCall { index: order, id: b.id, name: b.name, arguments: String::new(), input });
            BlockKind::Tool(acc.calls.len() - 1)
        }
        _ => BlockKind::Other,
    };
    acc.start_block(
        index,
        match kind {
            BlockKind::Tool(p) => Some(p),
            _ => None,
        },
    );
    match kind {
        BlockKind::Text if !b.text.is_empty() => {
            acc.reply.text.push_str(&b.text);
            Some(Piece::Text(b.text))
        }
        BlockKind::Thinking if !b.thinking.is_empty() => {
            acc.reply.reasoning.push_str(&b.thinking);
            Some(Piece::Reasoning(b.thinking))
        }
        _ => None,
    }
}

fn block_delta(acc: &mut Accum, index: u64, d: EventDelta) -> Option<Piece> {
    match d.kind.as_str() {
        "text_delta" if !d.text.is_empty() => {
            acc.reply.text.push_str(&d.text);
            Some(Piece::Text(d.text))
        }
        "thinking_delta" if !d.thinking.is_empty() => {
            acc.reply.reasoning.push_str(&d.thinking);
            Some(Piece::Reasoning(d.thinking))
        }
        "input_json_delta" => {
            if let Some(p) = acc.block_call(index) {
                let call = &mut acc.calls[p];
                call.arguments.push_str(&d.partial_json);
                if !call.arguments.is_empty() {
                    call.input = None;
                }
            }
            None
        }
        _ => None,
    }
}
