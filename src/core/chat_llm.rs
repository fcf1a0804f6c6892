//! A conversation with tools on the configured model: the provider-neutral request and reply of
//! one agent-turn step ([`ChatRequest`], [`ChatReply`]), each provider's wire format for them
//! (OpenAI-compatible chat completions, Anthropic Messages, Workers AI), streamed as server-sent
//! events where the provider can, with text deltas handed out as they arrive.

use serde_json::{json, Value as Json};

use crate::core::error::{Error, ErrorKind, Result};
use crate::core::llm::{
    excerpt, http_request, int, unavailable, HttpRequest, HttpResponse, LlmConfig, Provider, Transport, Usage,
    DEFAULT_MAX_TOKENS,
};

/// One message of the conversation sent to the model.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatMessage {
    User {
        text: String,
    },
    /// The model's earlier turn: its text and the tools it called.
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, as the model reads it.
    Tool {
        call_id: String,
        name: String,
        output: String,
    },
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments, parsed (`{}` when the model sent none or invalid JSON).
    pub input: Json,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Json,
}

/// One step of a turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    /// Provider-side prompt caching key (OpenAI `prompt_cache_key`): the session id.
    pub cache_key: Option<String>,
}

/// What the model answered in one step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatReply {
    pub text: String,
    /// Reasoning text, when the provider sends it separately.
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
}

/// How much of a streamed body is kept for an error message once events are flowing.
const RAW_CAP: usize = 64 * 1024;
/// How much of a body without any event is kept: it may be a whole plain JSON answer from a
/// provider that ignored `stream: true`.
const PLAIN_BODY_CAP: usize = 4 * 1024 * 1024;

fn str_of<'a>(v: &'a Json, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Json::as_str)
}

/// Tool arguments as the model sent them (a JSON string, or an object from lenient servers),
/// parsed; `{}` when empty, invalid or not an object.
fn parse_arguments(v: Option<&Json>) -> Json {
    let parsed = match v {
        Some(Json::String(s)) => serde_json::from_str::<Json>(s).ok(),
        Some(o @ Json::Object(_)) => Some(o.clone()),
        _ => None,
    };
    parsed.filter(Json::is_object).unwrap_or_else(|| json!({}))
}

fn object_or_empty(v: &Json) -> Json {
    if v.is_object() {
        v.clone()
    } else {
        json!({})
    }
}

/// `llm_unavailable` for a non-2xx answer, with the provider's `error.message` or an excerpt.
fn http_failure(status: u16, body: &str) -> Error {
    let detail = serde_json::from_str::<Json>(body)
        .ok()
        .and_then(|j| str_of(&j, "/error/message").map(str::to_owned))
        .unwrap_or_else(|| excerpt(body, 300));
    unavailable(format!("the model answered HTTP {status}: {detail}"))
}

/// The message of an `error` object the provider put in a 2xx answer or event.
fn error_detail(j: &Json) -> Option<String> {
    let e = j.get("error")?;
    if e.is_null() {
        return None;
    }
    Some(
        e.get("message")
            .and_then(Json::as_str)
            .map(str::to_owned)
            .or_else(|| e.as_str().map(str::to_owned))
            .unwrap_or_else(|| excerpt(&e.to_string(), 300)),
    )
}

fn not_configured() -> Error {
    Error::new(
        ErrorKind::NotConfigured,
        "no LLM is configured: set LLM_PROVIDER, LLM_BASE_URL, LLM_MODEL (and the secret LLM_API_KEY)",
    )
}

// ---------------------------------------------------------------------------------------------
// Requests

fn openai_messages(req: &ChatRequest) -> Vec<Json> {
    let mut out = Vec::new();
    if let Some(s) = &req.system {
        out.push(json!({"role": "system", "content": s}));
    }
    for m in &req.messages {
        out.push(match m {
            ChatMessage::User { text } => json!({"role": "user", "content": text}),
            ChatMessage::Assistant { text, tool_calls } => {
                if tool_calls.is_empty() {
                    json!({"role": "assistant", "content": text})
                } else {
                    let calls: Vec<Json> = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": object_or_empty(&c.input).to_string()}})
                        })
                        .collect();
                    let content = if text.is_empty() { Json::Null } else { json!(text) };
                    json!({"role": "assistant", "content": content, "tool_calls": calls})
                }
            }
            ChatMessage::Tool { call_id, output, .. } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": output})
            }
        });
    }
    out
}

/// Anthropic messages: tool results go in a user message right after the assistant turn, and
/// roles must alternate, so adjacent messages of one role are merged (tool results first) and
/// empty ones are left out.
fn anthropic_messages(msgs: &[ChatMessage]) -> Vec<Json> {
    let mut turns: Vec<(&'static str, Vec<Json>)> = Vec::new();
    for m in msgs {
        let (role, blocks) = match m {
            ChatMessage::User { text } => {
                let b = if text.is_empty() { vec![] } else { vec![json!({"type": "text", "text": text})] };
                ("user", b)
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut b = Vec::new();
                if !text.is_empty() {
                    b.push(json!({"type": "text", "text": text}));
                }
                b.extend(tool_calls.iter().map(
                    |c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": object_or_empty(&c.input)}),
                ));
                ("assistant", b)
            }
            ChatMessage::Tool { call_id, output, .. } => {
                ("user", vec![json!({"type": "tool_result", "tool_use_id": call_id, "content": output})])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                blocks.sort_by_key(|b| b.get("type").and_then(Json::as_str) != Some("tool_result"));
            }
            json!({"role": role, "content": blocks})
        })
        .collect()
}

/// The HTTP request of one chat step (OpenAI-compatible or Anthropic), streamed as
/// server-sent events when `stream`.
pub fn build_chat_request(cfg: &LlmConfig, req: &ChatRequest, stream: bool) -> Result<HttpRequest> {
    let max_tokens = req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let body = match cfg.provider {
        Provider::OpenAi => {
            let mut body = json!({"model": cfg.model, "messages": openai_messages(req), "max_tokens": max_tokens, "stream": stream});
            if stream {
                body["stream_options"] = json!({"include_usage": true});
            }
            if !req.tools.is_empty() {
                let tools: Vec<Json> = req
                    .tools
                    .iter()
                    .map(|t| {
                        json!({"type": "function",
                            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}})
                    })
                    .collect();
                body["tools"] = json!(tools);
            }
            if let Some(k) = &req.cache_key {
                body["prompt_cache_key"] = json!(k);
            }
            body
        }
        Provider::Anthropic => {
            let mut body = json!({"model": cfg.model, "max_tokens": max_tokens,
                "messages": anthropic_messages(&req.messages), "stream": stream});
            if let Some(s) = &req.system {
                // System and tools are stable across the steps of a session: cache them.
                body["system"] = json!([{"type": "text", "text": s, "cache_control": {"type": "ephemeral"}}]);
            }
            if !req.tools.is_empty() {
                let mut tools: Vec<Json> = req
                    .tools
                    .iter()
                    .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
                    .collect();
                if let Some(last) = tools.last_mut() {
                    last["cache_control"] = json!({"type": "ephemeral"});
                }
                body["tools"] = json!(tools);
            }
            body
        }
        Provider::WorkersAi | Provider::None => {
            return Err(Error::internal("build_chat_request is only for HTTP providers"));
        }
    };
    http_request(cfg, &body, stream)
}

// ---------------------------------------------------------------------------------------------
// Whole answers

/// OpenAI message content: a string, or (some compatible servers) an array of text parts.
fn openai_content(v: Option<&Json>) -> String {
    match v {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Json::as_str)).collect(),
        _ => String::new(),
    }
}

/// Reasoning text of an OpenAI-compatible message or delta (`reasoning_content`: DeepSeek,
/// vLLM; `reasoning`: OpenRouter, Ollama, Groq).
fn openai_reasoning(m: &Json) -> Option<&str> {
    m.get("reasoning_content").and_then(Json::as_str).or_else(|| m.get("reasoning").and_then(Json::as_str))
}

fn anthropic_input_tokens(usage: &Json) -> i64 {
    int(usage, "input_tokens") + int(usage, "cache_read_input_tokens") + int(usage, "cache_creation_input_tokens")
}

/// Parses a provider's whole (non-streamed) answer. A non-2xx status is `llm_unavailable` with
/// the provider's own message; an answer with neither text nor tool calls is returned as is.
pub fn parse_chat_response(cfg: &LlmConfig, resp: &HttpResponse) -> Result<ChatReply> {
    if !(200..300).contains(&resp.status) {
        return Err(http_failure(resp.status, &resp.body));
    }
    let j: Json = serde_json::from_str(&resp.body)
        .map_err(|_| unavailable(format!("the model's answer is not JSON: {}", excerpt(&resp.body, 200))))?;
    if let Some(detail) = error_detail(&j) {
        return Err(unavailable(format!("the model failed: {detail}")));
    }
    match cfg.provider {
        Provider::OpenAi => {
            let choice = j.pointer("/choices/0").ok_or_else(|| unavailable("the model's answer has no choices"))?;
            let m = choice.get("message").cloned().unwrap_or(Json::Null);
            let tool_calls = m
                .get("tool_calls")
                .and_then(Json::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .enumerate()
                        .map(|(i, c)| ToolCall {
                            id: c
                                .get("id")
                                .and_then(Json::as_str)
                                .filter(|s| !s.is_empty())
                                .map_or_else(|| format!("call_{i}"), str::to_owned),
                            name: str_of(c, "/function/name").unwrap_or_default().to_owned(),
                            input: parse_arguments(c.pointer("/function/arguments")),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let usage = j.get("usage").cloned().unwrap_or(Json::Null);
            Ok(ChatReply {
                text: openai_content(m.get("content")),
                reasoning: openai_reasoning(&m).unwrap_or_default().to_owned(),
                tool_calls,
                usage: Usage {
                    input_tokens: int(&usage, "prompt_tokens"),
                    output_tokens: int(&usage, "completion_tokens"),
                },
                finish_reason: choice.get("finish_reason").and_then(Json::as_str).map(str::to_owned),
            })
        }
        Provider::Anthropic => {
            let mut reply = ChatReply::default();
            for block in j.get("content").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default() {
                match block.get("type").and_then(Json::as_str) {
                    Some("text") => reply.text.push_str(block.get("text").and_then(Json::as_str).unwrap_or_default()),
                    Some("thinking") => {
                        reply.reasoning.push_str(block.get("thinking").and_then(Json::as_str).unwrap_or_default())
                    }
                    Some("tool_use") => reply.tool_calls.push(ToolCall {
                        id: block.get("id").and_then(Json::as_str).unwrap_or_default().to_owned(),
                        name: block.get("name").and_then(Json::as_str).unwrap_or_default().to_owned(),
                        input: parse_arguments(block.get("input")),
                    }),
                    _ => {}
                }
            }
            let usage = j.get("usage").cloned().unwrap_or(Json::Null);
            reply.usage =
                Usage { input_tokens: anthropic_input_tokens(&usage), output_tokens: int(&usage, "output_tokens") };
            reply.finish_reason = j.get("stop_reason").and_then(Json::as_str).map(str::to_owned);
            Ok(reply)
        }
        Provider::WorkersAi | Provider::None => Err(Error::internal("parse_chat_response is only for HTTP providers")),
    }
}

// ---------------------------------------------------------------------------------------------
// Server-sent events

/// One server-sent event: its `event:` name, if any, and its `data:` lines joined with `\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Decodes a `text/event-stream` body handed over in arbitrary pieces (an event, a line, even a
/// `\r\n` may be split across them). Lines end in `\n`, `\r\n` or `\r`; `:` lines are comments;
/// a blank line dispatches the event, if it has data.
#[derive(Clone, Debug, Default)]
pub struct SseDecoder {
    line: String,
    event: Option<String>,
    data: Option<String>,
    /// The last piece ended in `\r`: a `\n` starting the next one belongs to that line end.
    skip_lf: bool,
    started: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds the next piece of the body; returns the events it completes.
    pub fn push(&mut self, chunk: &str) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut chunk = chunk;
        if !self.started && !chunk.is_empty() {
            self.started = true;
            chunk = chunk.strip_prefix('\u{feff}').unwrap_or(chunk);
        }
        let bytes = chunk.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if b != b'\r' && b != b'\n' {
                continue;
            }
            if b == b'\n' && i == start && self.skip_lf && self.line.is_empty() {
                // The `\n` of a `\r\n` split across pieces.
                self.skip_lf = false;
                start = i + 1;
                continue;
            }
            if b == b'\n' && i > 0 && bytes[i - 1] == b'\r' && i == start {
                // The `\n` of a `\r\n` within this piece: the line already ended at `\r`.
                start = i + 1;
                continue;
            }
            self.line.push_str(&chunk[start..i]);
            self.skip_lf = false;
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut out);
            start = i + 1;
        }
        if let Some(&b) = bytes.last() {
            self.skip_lf = b == b'\r';
        }
        self.line.push_str(&chunk[start..]);
        out
    }

    /// The end of the body: dispatches a last event not followed by a blank line.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut out);
        }
        self.dispatch(&mut out);
        self.skip_lf = false;
        out
    }

    fn process_line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take().filter(|e| !e.is_empty());
        if let Some(data) = self.data.take() {
            out.push(SseEvent { event, data });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streamed answers

/// A tool call being streamed.
#[derive(Clone, Debug, Default)]
struct PartialCall {
    /// OpenAI: the call's `index`; Anthropic: its content block's index.
    index: u64,
    id: String,
    name: String,
    arguments: String,
    /// Set once the arguments are complete (Anthropic `content_block_stop`).
    input: Option<Json>,
}

impl PartialCall {
    fn into_call(self) -> ToolCall {
        let input = self.input.unwrap_or_else(|| {
            if self.arguments.trim().is_empty() {
                json!({})
            } else {
                parse_arguments(Some(&Json::String(self.arguments)))
            }
        });
        ToolCall { id: self.id, name: self.name, input }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum BlockKind {
    Text,
    Thinking,
    /// A `tool_use` block: the position of its call.
    Tool(usize),
    Other,
}

/// Accumulates a streamed answer from its events ([`SseEvent`]) into a [`ChatReply`], handing
/// out the text deltas as they come.
#[derive(Clone, Debug)]
pub struct StreamState {
    provider: Provider,
    reply: ChatReply,
    calls: Vec<PartialCall>,
    /// Anthropic content blocks by index.
    blocks: Vec<(u64, BlockKind)>,
    done: bool,
    /// OpenAI `[DONE]` or Anthropic `message_stop`: later events are ignored.
    ended: bool,
}

impl StreamState {
    pub fn new(provider: Provider) -> Self {
        StreamState {
            provider,
            reply: ChatReply::default(),
            calls: Vec::new(),
            blocks: Vec::new(),
            done: false,
            ended: false,
        }
    }

    /// Whether the provider said the answer is complete (OpenAI `[DONE]` or a finish reason,
    /// Anthropic `message_stop` or a stop reason).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The answer so far (tool calls not included until [`StreamState::finish`]).
    pub fn reply(&self) -> &ChatReply {
        &self.reply
    }

    /// Takes in one event; returns the text it adds, if any. An error the provider streamed is
    /// `llm_unavailable` with its message.
    pub fn push(&mut self, ev: &SseEvent) -> Result<Option<String>> {
        if self.ended {
            return Ok(None);
        }
        match self.provider {
            Provider::OpenAi => self.push_openai(ev),
            Provider::Anthropic => self.push_anthropic(ev),
            Provider::WorkersAi | Provider::None => Err(Error::internal("StreamState is only for HTTP providers")),
        }
    }

    /// The whole answer. A stream that ended before the provider said it was complete is
    /// `llm_unavailable`.
    pub fn finish(self) -> Result<ChatReply> {
        if !self.done {
            return Err(unavailable("the model's stream ended before its answer was complete"));
        }
        let mut reply = self.reply;
        let mut calls = self.calls;
        if self.provider == Provider::OpenAi {
            calls.sort_by_key(|c| c.index);
        }
        reply.tool_calls = calls.into_iter().map(PartialCall::into_call).collect();
        Ok(reply)
    }

    fn parse_data(data: &str) -> Result<Json> {
        serde_json::from_str(data)
            .map_err(|_| unavailable(format!("the model streamed an event that is not JSON: {}", excerpt(data, 200))))
    }

    fn push_openai(&mut self, ev: &SseEvent) -> Result<Option<String>> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done = true;
            self.ended = true;
            return Ok(None);
        }
        if data.is_empty() {
            return Ok(None);
        }
        let j = Self::parse_data(data)?;
        if let Some(detail) = error_detail(&j) {
            return Err(unavailable(format!("the model's stream failed: {detail}")));
        }
        if let Some(u) = j.get("usage").filter(|u| u.is_object()) {
            self.reply.usage =
                Usage { input_tokens: int(u, "prompt_tokens"), output_tokens: int(u, "completion_tokens") };
        }
        let Some(choice) = j.pointer("/choices/0") else { return Ok(None) };
        if let Some(r) = choice.get("finish_reason").and_then(Json::as_str) {
            self.reply.finish_reason = Some(r.to_owned());
            self.done = true;
        }
        let Some(delta) = choice.get("delta") else { return Ok(None) };
        if let Some(r) = openai_reasoning(delta) {
            self.reply.reasoning.push_str(r);
        }
        for (pos, tc) in
            delta.get("tool_calls").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate()
        {
            let id = tc.get("id").and_then(Json::as_str).unwrap_or_default();
            let index = match tc.get("index").and_then(Json::as_u64) {
                Some(i) => i,
                // No index (lenient servers): a new id starts a new call, else the last one goes on.
                None if !id.is_empty() && !self.calls.iter().any(|c| c.id == id) => {
                    self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0).max(pos as u64)
                }
                None => self.calls.last().map_or(pos as u64, |c| c.index),
            };
            let call = match self.calls.iter().position(|c| c.index == index) {
                Some(p) => &mut self.calls[p],
                None => {
                    self.calls.push(PartialCall { index, id: format!("call_{index}"), ..PartialCall::default() });
                    self.calls.last_mut().expect("just pushed")
                }
            };
            if !id.is_empty() {
                call.id = id.to_owned();
            }
            if let Some(name) = str_of(tc, "/function/name").filter(|n| !n.is_empty()) {
                // Sent once by OpenAI; some servers repeat it whole in every fragment.
                if call.name != name {
                    call.name.push_str(name);
                }
            }
            match tc.pointer("/function/arguments") {
                Some(Json::String(s)) => call.arguments.push_str(s),
                Some(o @ Json::Object(_)) => call.input = Some(o.clone()),
                _ => {}
            }
        }
        let text = openai_content(delta.get("content"));
        if text.is_empty() {
            return Ok(None);
        }
        self.reply.text.push_str(&text);
        Ok(Some(text))
    }

    fn block(&self, index: u64) -> BlockKind {
        self.blocks.iter().find(|(i, _)| *i == index).map_or(BlockKind::Other, |(_, k)| *k)
    }

    fn push_anthropic(&mut self, ev: &SseEvent) -> Result<Option<String>> {
        if ev.data.trim().is_empty() {
            return Ok(None);
        }
        let j = Self::parse_data(&ev.data)?;
        let kind = j.get("type").and_then(Json::as_str).or(ev.event.as_deref()).unwrap_or_default();
        let index = j.get("index").and_then(Json::as_u64).unwrap_or(0);
        match kind {
            "error" => {
                let detail = error_detail(&j).unwrap_or_else(|| excerpt(&ev.data, 300));
                return Err(unavailable(format!("the model's stream failed: {detail}")));
            }
            "message_start" => {
                let usage = j.pointer("/message/usage").cloned().unwrap_or(Json::Null);
                self.reply.usage =
                    Usage { input_tokens: anthropic_input_tokens(&usage), output_tokens: int(&usage, "output_tokens") };
            }
            "content_block_start" => {
                let b = j.get("content_block").cloned().unwrap_or(Json::Null);
                let kind = match b.get("type").and_then(Json::as_str) {
                    Some("text") => BlockKind::Text,
                    Some("thinking") => BlockKind::Thinking,
                    Some("tool_use") => {
                        let input = b.get("input").filter(|i| i.as_object().is_some_and(|o| !o.is_empty())).cloned();
                        self.calls.push(PartialCall {
                            index,
                            id: b.get("id").and_then(Json::as_str).unwrap_or_default().to_owned(),
                            name: b.get("name").and_then(Json::as_str).unwrap_or_default().to_owned(),
                            arguments: String::new(),
                            input,
                        });
                        BlockKind::Tool(self.calls.len() - 1)
                    }
                    _ => BlockKind::Other,
                };
                self.blocks.retain(|(i, _)| *i != index);
                self.blocks.push((index, kind));
                match kind {
                    BlockKind::Text => {
                        let text = b.get("text").and_then(Json::as_str).unwrap_or_default();
                        if !text.is_empty() {
                            self.reply.text.push_str(text);
                            return Ok(Some(text.to_owned()));
                        }
                    }
                    BlockKind::Thinking => {
                        self.reply.reasoning.push_str(b.get("thinking").and_then(Json::as_str).unwrap_or_default())
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let d = j.get("delta").cloned().unwrap_or(Json::Null);
                match d.get("type").and_then(Json::as_str) {
                    Some("text_delta") => {
                        let text = d.get("text").and_then(Json::as_str).unwrap_or_default();
                        if !text.is_empty() {
                            self.reply.text.push_str(text);
                            return Ok(Some(text.to_owned()));
                        }
                    }
                    Some("thinking_delta") => {
                        self.reply.reasoning.push_str(d.get("thinking").and_then(Json::as_str).unwrap_or_default())
                    }
                    Some("input_json_delta") => {
                        if let BlockKind::Tool(p) = self.block(index) {
                            let call = &mut self.calls[p];
                            call.arguments.push_str(d.get("partial_json").and_then(Json::as_str).unwrap_or_default());
                            if !call.arguments.is_empty() {
                                call.input = None;
                            }
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let BlockKind::Tool(p) = self.block(index) {
                    let call = &mut self.calls[p];
                    if call.input.is_none() {
                        call.input = Some(if call.arguments.trim().is_empty() {
                            json!({})
                        } else {
                            parse_arguments(Some(&Json::String(std::mem::take(&mut call.arguments))))
                        });
                    }
                }
            }
            "message_delta" => {
                if let Some(r) = str_of(&j, "/delta/stop_reason") {
                    self.reply.finish_reason = Some(r.to_owned());
                    self.done = true;
                }
                if let Some(u) = j.get("usage").filter(|u| u.is_object()) {
                    if u.get("output_tokens").is_some() {
                        self.reply.usage.output_tokens = int(u, "output_tokens");
                    }
                    if u.get("input_tokens").and_then(Json::as_i64).is_some_and(|n| n > 0) {
                        self.reply.usage.input_tokens = anthropic_input_tokens(u);
                    }
                }
            }
            "message_stop" => {
                self.done = true;
                self.ended = true;
            }
            _ => {}
        }
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// One step

/// Why a stream was cut short from our side.
enum Stop {
    /// `on_delta` failed (the client went away): returned unchanged.
    Client(Error),
    /// The provider streamed an error or something unreadable.
    Provider(Error),
}

/// A streamed call in progress: the events decoded from the body, the text handed out, and
/// the raw body kept for an error message or a plain JSON answer.
struct Run<'a> {
    decoder: SseDecoder,
    state: StreamState,
    raw: String,
    raw_truncated: bool,
    events: usize,
    stop: Option<Stop>,
    on_delta: &'a mut dyn FnMut(&str) -> Result<()>,
}

impl Run<'_> {
    fn chunk(&mut self, chunk: &str) -> Result<()> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let cap = if self.events == 0 { PLAIN_BODY_CAP } else { RAW_CAP };
        if self.raw.len() < cap {
            let mut take = chunk.len().min(cap - self.raw.len());
            while !chunk.is_char_boundary(take) {
                take -= 1;
            }
            self.raw.push_str(&chunk[..take]);
            self.raw_truncated |= take < chunk.len();
        } else if !chunk.is_empty() {
            self.raw_truncated = true;
        }
        let events = self.decoder.push(chunk);
        self.take_events(events)
    }

    fn take_events(&mut self, events: Vec<SseEvent>) -> Result<()> {
        for ev in events {
            self.events += 1;
            match self.state.push(&ev) {
                Ok(Some(delta)) => {
                    if let Err(e) = (self.on_delta)(&delta) {
                        self.stop = Some(Stop::Client(e.clone()));
                        return Err(e);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    self.stop = Some(Stop::Provider(e.clone()));
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn stopped(&self) -> Option<Error> {
        match &self.stop {
            Some(Stop::Client(e)) | Some(Stop::Provider(e)) => Some(e.clone()),
            None => None,
        }
    }

    fn end(mut self, cfg: &LlmConfig, sent: Result<u16>) -> Result<ChatReply> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let status = sent.map_err(|e| unavailable(e.message))?;
        if !(200..300).contains(&status) {
            return Err(http_failure(status, &self.raw));
        }
        let last = self.decoder.finish();
        self.take_events(last)?;
        if self.events > 0 {
            return self.state.finish();
        }
        // No event at all: a provider that ignored `stream: true` and answered plain JSON.
        if self.raw_truncated {
            return Err(unavailable(format!(
                "the model's answer is not a stream and is over {} MB",
                PLAIN_BODY_CAP / (1024 * 1024)
            )));
        }
        if serde_json::from_str::<Json>(&self.raw).is_err() {
            return Err(unavailable(format!(
                "the model's answer is neither server-sent events nor JSON: {}",
                excerpt(&self.raw, 200)
            )));
        }
        let reply = parse_chat_response(cfg, &HttpResponse { status, body: std::mem::take(&mut self.raw) })?;
        if !reply.text.is_empty() {
            (self.on_delta)(&reply.text)?;
        }
        Ok(reply)
    }
}

/// Workers AI: text only (no tools), tool results as user text.
async fn chat_workers_ai(
    t: &dyn Transport,
    cfg: &LlmConfig,
    req: &ChatRequest,
    on_delta: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<ChatReply> {
    let mut messages = Vec::new();
    if let Some(s) = &req.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    for m in &req.messages {
        messages.push(match m {
            ChatMessage::User { text } => json!({"role": "user", "content": text}),
            ChatMessage::Assistant { text, .. } => json!({"role": "assistant", "content": text}),
            ChatMessage::Tool { name, output, .. } => {
                json!({"role": "user", "content": format!("Tool {name} returned: {output}")})
            }
        });
    }
    let input = json!({"messages": messages, "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)});
    let out = t.workers_ai(&cfg.model, input).await.map_err(|e| unavailable(e.message))?;
    if let Some(detail) = error_detail(&out) {
        return Err(unavailable(format!("the model failed: {detail}")));
    }
    let text = match out.get("response") {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let usage = out.get("usage").cloned().unwrap_or(Json::Null);
    if !text.is_empty() {
        on_delta(&text)?;
    }
    Ok(ChatReply {
        text,
        usage: Usage { input_tokens: int(&usage, "prompt_tokens"), output_tokens: int(&usage, "completion_tokens") },
        ..ChatReply::default()
    })
}

/// Runs one step of a conversation with tools on the configured model, streamed where the
/// provider can: every piece of text goes to `on_delta` as it arrives (reasoning does not).
///
/// Provider failures (transport, non-2xx, a streamed error, an unreadable or cut-off stream)
/// are `llm_unavailable` with the provider's message; no provider is `not_configured`. An error
/// from `on_delta` stops the call and comes back unchanged, so the caller can tell its client
/// going away from the model failing. A reply with neither text nor tool calls is returned as is.
pub async fn chat(
    t: &dyn Transport,
    cfg: &LlmConfig,
    req: &ChatRequest,
    on_delta: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<ChatReply> {
    match cfg.provider {
        Provider::None => Err(not_configured()),
        Provider::WorkersAi => chat_workers_ai(t, cfg, req, on_delta).await,
        Provider::OpenAi | Provider::Anthropic => {
            let http = build_chat_request(cfg, req, true)?;
            let mut run = Run {
                decoder: SseDecoder::new(),
                state: StreamState::new(cfg.provider),
                raw: String::new(),
                raw_truncated: false,
                events: 0,
                stop: None,
                on_delta,
            };
            let sent = {
                let mut on_chunk = |chunk: &str| run.chunk(chunk);
                t.send_stream(http, &mut on_chunk).await
            };
            run.end(cfg, sent)
        }
    }
}
