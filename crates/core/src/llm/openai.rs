//! The OpenAI-compatible provider ([`OpenAi`]): any endpoint that speaks `/chat/completions`
//! and `/embeddings` (OpenAI, Groq, vLLM, Ollama, AI Gateway, …), its request body, whole
//! answer, streamed chunks and usage as serde types. Answers are read leniently: a field of an
//! unexpected shape counts as absent, because "compatible" servers differ in the details
//! (content as an array of parts, arguments as an object, tool calls without an index).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::api::{Accum, Api, PartialCall};
use super::model::{ChatMessage, ChatReply, ChatRequest, Delivery, Format, Piece, ToolCall, DEFAULT_MAX_TOKENS};
use super::sse::SseEvent;
use super::transport::{Call, Endpoint, HttpRequest, Returned};
use super::wire::{error_message, lenient, object_or_empty, parse_arguments, request_body, unavailable, CompatUsage};
use crate::error::{Error, Result};

/// Any OpenAI-compatible endpoint (`LLM_PROVIDER=openai`): the key as `Authorization: Bearer`.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAi;

impl Api for OpenAi {
    fn default_base_url(&self) -> &'static str {
        "https://api.openai.com/v1"
    }

    fn chat_call(&self, to: &Endpoint<'_>, req: &ChatRequest, delivery: Delivery) -> Result<Call> {
        let url = format!("{}/chat/completions", to.base_url);
        Ok(Call::Http(authorized(HttpRequest::json(url, body(to.model, req, delivery)?, delivery, to.timeout_ms), to)))
    }

    fn reply(&self, answer: Json) -> Result<ChatReply> {
        reply(answer)
    }

    fn decode(&self, acc: &mut Accum, ev: &SseEvent) -> Result<Vec<Piece>> {
        match acc.event(ev)? {
            Some(j) => push(acc, j),
            None => Ok(Vec::new()),
        }
    }

    fn has_embeddings(&self) -> bool {
        true
    }

    fn embeddings_call(&self, to: &Endpoint<'_>, texts: &[String]) -> Result<Call> {
        let body = json!({"model": to.model, "input": texts}).to_string();
        let url = format!("{}/embeddings", to.base_url);
        Ok(Call::Http(authorized(HttpRequest::json(url, body, Delivery::Whole, to.timeout_ms), to)))
    }

    fn vectors(&self, answer: Returned<'_>, n: usize) -> Result<Vec<Vec<f32>>> {
        vectors(answer, n)
    }
}

/// `req` with the endpoint's key, if it has one, as `Authorization: Bearer`.
fn authorized(mut req: HttpRequest, to: &Endpoint<'_>) -> HttpRequest {
    if let Some(key) = to.api_key {
        req.headers.push(("authorization".into(), format!("Bearer {key}")));
    }
    req
}

// ── Request ──────────────────────────────────────────────────────────────────────────────────────────

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat>,
}

#[derive(Serialize)]
struct ResponseFormat {
    r#type: &'static str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    /// `content` is `null` when an assistant turn that calls tools has no text.
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<SentCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A tool call of an earlier assistant turn, as sent back in the conversation.
#[derive(Serialize)]
struct SentCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    /// The input as a JSON string (an object; `{}` when the input was not one).
    arguments: String,
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    function: ToolFunction<'a>,
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Json,
}

fn message(m: &ChatMessage) -> Message<'_> {
    match m {
        ChatMessage::User { text } => Message::User { content: text },
        ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
            Message::Assistant { content: Some(text), tool_calls: Vec::new() }
        }
        ChatMessage::Assistant { text, tool_calls } => Message::Assistant {
            content: Some(text.as_str()).filter(|t| !t.is_empty()),
            tool_calls: tool_calls
                .iter()
                .map(|c| SentCall {
                    id: &c.id,
                    r#type: "function",
                    function: CallFunction { name: &c.name, arguments: object_or_empty(&c.input).to_string() },
                })
                .collect(),
        },
        ChatMessage::Tool { call_id, output, .. } => Message::Tool { tool_call_id: call_id, content: output },
    }
}

/// The request body of one step; `stream` asks for server-sent events with the usage at the end.
fn body(model: &str, req: &ChatRequest, delivery: Delivery) -> Result<String> {
    let stream = delivery == Delivery::Streamed;
    let mut messages: Vec<Message> = req.system.iter().map(|s| Message::System { content: s }).collect();
    messages.extend(req.system_tail.iter().map(|s| Message::System { content: s }));
    messages.extend(req.messages.iter().map(message));
    request_body(&Body {
        model,
        messages,
        max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        stream,
        stream_options: stream.then_some(StreamOptions { include_usage: true }),
        tools: req
            .tools
            .iter()
            .map(|t| Tool {
                r#type: "function",
                function: ToolFunction { name: &t.name, description: &t.description, parameters: &t.input_schema },
            })
            .collect(),
        prompt_cache_key: req.cache.as_ref().map(|c| c.key.as_str()),
        response_format: (req.format == Format::JsonObject).then_some(ResponseFormat { r#type: "json_object" }),
    })
}

// ── Answers ──────────────────────────────────────────────────────────────────────────────────────────

/// Message content: a string, or (some compatible servers) an array of text parts.
#[derive(Default)]
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(Text(match Json::deserialize(d)? {
            Json::String(s) => s,
            Json::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Json::as_str)).collect(),
            _ => String::new(),
        }))
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Completion {
    #[serde(deserialize_with = "lenient")]
    choices: Vec<Choice>,
    #[serde(deserialize_with = "lenient")]
    usage: CompatUsage,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Choice {
    #[serde(deserialize_with = "lenient")]
    message: Delta,
    #[serde(deserialize_with = "lenient")]
    delta: Option<Delta>,
    #[serde(deserialize_with = "lenient")]
    finish_reason: Option<String>,
}

/// A whole message or a streamed delta: the same fields.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Delta {
    content: Text,
    /// Reasoning text: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama,
    /// Groq).
    #[serde(deserialize_with = "lenient")]
    reasoning_content: Option<String>,
    #[serde(deserialize_with = "lenient")]
    reasoning: Option<String>,
    #[serde(deserialize_with = "lenient")]
    tool_calls: Vec<WireCall>,
}

impl Delta {
    fn reasoning(&self) -> Option<&str> {
        self.reasoning_content.as_deref().or(self.reasoning.as_deref())
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireCall {
    #[serde(deserialize_with = "lenient")]
    index: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    function: WireFunction,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireFunction {
    #[serde(deserialize_with = "lenient")]
    name: Option<String>,
    arguments: Option<Json>,
}

/// A whole (non-streamed) answer, already checked for a status and an `error`.
fn reply(answer: Json) -> Result<ChatReply> {
    let c: Completion = serde_json::from_value(answer).unwrap_or_default();
    let choice = c.choices.into_iter().next().ok_or_else(|| unavailable("the model's answer has no choices"))?;
    let m = choice.message;
    let tool_calls = m
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, call)| ToolCall {
            id: call.id.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| format!("call_{i}")),
            name: call.function.name.clone().unwrap_or_default(),
            input: parse_arguments(call.function.arguments.as_ref()),
        })
        .collect();
    Ok(ChatReply {
        reasoning: m.reasoning().unwrap_or_default().to_owned(),
        text: m.content.0,
        tool_calls,
        usage: c.usage.into(),
        finish_reason: choice.finish_reason,
    })
}

// ── Streamed answers ─────────────────────────────────────────────────────────────────────────────────

#[derive(Deserialize, Default)]
#[serde(default)]
struct Chunk {
    #[serde(deserialize_with = "lenient")]
    choices: Vec<Choice>,
    #[serde(deserialize_with = "lenient")]
    usage: Option<CompatUsage>,
    error: Option<Json>,
}

/// Takes in one event of a streamed answer (its JSON, [`Accum::event`]); returns the text it
/// adds, if any. Workers AI's models that answer in OpenAI's format stream these chunks too.
pub(crate) fn push(acc: &mut Accum, j: Json) -> Result<Vec<Piece>> {
    if !j.is_object() {
        return Ok(Vec::new());
    }
    if let Some(detail) = error_message(j.get("error")) {
        return Err(unavailable("the model's stream failed").with_log(format!("the model's stream failed: {detail}")));
    }
    let chunk: Chunk = serde_json::from_value(j).unwrap_or_default();
    if let Some(u) = chunk.usage {
        acc.reply.usage = u.into();
    }
    let Some(choice) = chunk.choices.into_iter().next() else { return Ok(Vec::new()) };
    if let Some(r) = choice.finish_reason {
        acc.reply.finish_reason = Some(r);
        acc.done = true;
    }
    let Some(delta) = choice.delta else { return Ok(Vec::new()) };
    let mut pieces = Vec::new();
    if let Some(r) = delta.reasoning().filter(|r| !r.is_empty()) {
        acc.reply.reasoning.push_str(r);
        pieces.push(Piece::Reasoning(r.to_owned()));
    }
    for (pos, call) in delta.tool_calls.iter().enumerate() {
        fragment(acc, pos, call);
    }
    let text = delta.content.0;
    if !text.is_empty() {
        acc.reply.text.push_str(&text);
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// One streamed fragment of a tool call: a new call, or more of one already started.
fn fragment(acc: &mut Accum, pos: usize, tc: &WireCall) {
    let id = tc.id.as_deref().unwrap_or_default();
    let index = match tc.index {
        Some(i) => i,
        // No index (lenient servers): a new id starts a new call, else the last one goes on.
        None if !id.is_empty() && !acc.calls.iter().any(|c| c.id == id) => {
            acc.calls.iter().map(|c| c.index + 1).max().unwrap_or(0).max(pos as u64)
        }
        None => acc.calls.last().map_or(pos as u64, |c| c.index),
    };
    let at = match acc.calls.iter().position(|c| c.index == index) {
        Some(p) => p,
        None => {
            acc.calls.push(PartialCall { index, id: format!("call_{index}"), ..PartialCall::default() });
            acc.calls.len() - 1
        }
    };
    let call = &mut acc.calls[at];
    if !id.is_empty() {
        call.id = id.to_owned();
    }
    if let Some(name) = tc.function.name.as_deref().filter(|n| !n.is_empty()) {
        // Sent once by OpenAI; some servers repeat it whole in every fragment.
        if call.name != name {
            call.name.push_str(name);
        }
    }
    match &tc.function.arguments {
        Some(Json::String(s)) => call.arguments.push_str(s),
        Some(o @ Json::Object(_)) => call.input = Some(o.clone()),
        _ => {}
    }
}

// ── Embeddings ───────────────────────────────────────────────────────────────────────────────────────

#[derive(Deserialize)]
struct Embeddings {
    data: Vec<Embedding>,
}

#[derive(Deserialize)]
struct Embedding {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// The vectors of an `/embeddings` answer, put in the order of the inputs by their `index`.
fn vectors(answer: Returned<'_>, n: usize) -> Result<Vec<Vec<f32>>> {
    let Returned::Body(body) = answer else {
        return Err(Error::internal("an OpenAI-compatible endpoint answers over HTTP"));
    };
    let a: Embeddings =
        serde_json::from_str(body).map_err(|e| unavailable(format!("the embeddings answer is not understood: {e}")))?;
    let mut out = vec![Vec::new(); n];
    for (i, v) in a.data.into_iter().enumerate() {
        let at = v.index.unwrap_or(i);
        if at < n {
            out[at] = v.embedding;
        }
    }
    Ok(out)
}
