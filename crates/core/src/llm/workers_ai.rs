//! The Workers AI provider ([`WorkersAi`]), reached through the `AI` binding: chat streamed
//! (`stream: true`, server-sent events), with tools for the models that call functions
//! (`LLM_TOOLS`, `FUNCTION_CALLING_MODELS`) and on text only for the others, and the embedding
//! models (`@cf/baai/bge-*`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::api::{Accum, Api, PartialCall};
use super::model::{ChatMessage, ChatReply, ChatRequest, Delivery, Piece, ToolSpec, DEFAULT_MAX_TOKENS};
use super::openai::{self, OpenAi};
use super::sse::SseEvent;
use super::transport::{Call, Endpoint, Returned, ToolUse};
use super::wire::{error_message, lenient, object_or_empty, parse_arguments, unavailable, CompatUsage};
use crate::error::{Error, Result};

/// Workers AI through the `AI` binding (`LLM_PROVIDER=workers-ai`): no URL, no key; the model
/// is run by name.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkersAi;

/// The Workers AI models documented as calling functions (Workers AI's "function calling"
/// models): offered tools unless `LLM_TOOLS=off`. Any other model gets them with `LLM_TOOLS=on`.
pub(crate) const FUNCTION_CALLING_MODELS: [&str; 5] = [
    "@hf/nousresearch/hermes-2-pro-mistral-7b",
    "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
    "@cf/meta/llama-4-scout-17b-16e-instruct",
    "@cf/mistralai/mistral-small-3.1-24b-instruct",
    "@cf/qwen/qwen3-30b-a3b-fp8",
];

/// Whether `model` is offered tools under `LLM_TOOLS`.
fn offers_tools(tools: ToolUse, model: &str) -> bool {
    match tools {
        ToolUse::On => true,
        ToolUse::Off => false,
        ToolUse::Auto => FUNCTION_CALLING_MODELS.contains(&model),
    }
}

impl Api for WorkersAi {
    fn default_base_url(&self) -> &'static str {
        ""
    }

    /// The binding's input; a streamed step asks for server-sent events (`stream: true`).
    fn chat_call(&self, to: &Endpoint<'_>, req: &ChatRequest, delivery: Delivery) -> Result<Call> {
        let tools = offers_tools(to.tools, to.model);
        let input = input(req, tools, delivery == Delivery::Streamed);
        Ok(Call::Binding { model: to.model.to_owned(), input, timeout_ms: to.timeout_ms })
    }

    /// `{response, tool_calls, usage}`, or (the models that answer in OpenAI's format) a chat
    /// completion with `choices`.
    fn reply(&self, answer: Json) -> Result<ChatReply> {
        if answer.get("choices").is_some() {
            return OpenAi.reply(answer);
        }
        let out: Output = serde_json::from_value(answer).unwrap_or_default();
        let mut acc = Accum::default();
        take_calls(&mut acc, &out.tool_calls);
        acc.done = true;
        let mut reply = acc.finish()?;
        reply.text = text_of(out.response);
        reply.usage = out.usage.map(Into::into).unwrap_or_default();
        Ok(reply)
    }

    /// One event of a streamed answer: `{response, tool_calls?, usage?}` (the models that
    /// answer in OpenAI's format stream `choices[].delta` chunks instead), then `[DONE]`.
    fn decode(&self, acc: &mut Accum, ev: &SseEvent) -> Result<Vec<Piece>> {
        let Some(j) = acc.event(ev)? else { return Ok(Vec::new()) };
        if j.get("choices").is_some() {
            // OpenAI's chunks: a finish reason marks the answer complete, `[DONE]` still ends it.
            return openai::push(acc, j);
        }
        if let Some(detail) = error_message(j.get("error")) {
            return Err(
                unavailable("the model's stream failed").with_log(format!("the model's stream failed: {detail}"))
            );
        }
        let out: Output = serde_json::from_value(j).unwrap_or_default();
        if let Some(usage) = out.usage {
            acc.reply.usage = usage.into();
        }
        take_calls(acc, &out.tool_calls);
        let text = text_of(out.response);
        if text.is_empty() {
            return Ok(Vec::new());
        }
        acc.reply.text.push_str(&text);
        Ok(vec![Piece::Text(text)])
    }

    fn has_embeddings(&self) -> bool {
        true
    }

    /// The input of an embeddings model: `{text: [...]}`.
    fn embeddings_call(&self, to: &Endpoint<'_>, texts: &[String]) -> Result<Call> {
        Ok(Call::Binding { model: to.model.to_owned(), input: json!({ "text": texts }), timeout_ms: to.timeout_ms })
    }

    /// The vectors of an embeddings answer: `{shape, data: [[...], ...]}`, one row per text.
    fn vectors(&self, answer: Returned<'_>, n: usize) -> Result<Vec<Vec<f32>>> {
        let Returned::Binding(answer) = answer else {
            return Err(Error::internal("Workers AI answers through the binding"));
        };
        let data = answer
            .get("data")
            .and_then(Json::as_array)
            .ok_or_else(|| unavailable("the embeddings answer has no data"))?;
        let out: Vec<Vec<f32>> = data
            .iter()
            .map(|row| row.as_array().map(|r| r.iter().filter_map(Json::as_f64).map(|f| f as f32).collect()))
            .collect::<Option<_>>()
            .ok_or_else(|| unavailable("the embeddings answer's data is not a list of vectors"))?;
        if out.len() != n {
            return Err(unavailable(format!("asked for {n} embeddings, got {}", out.len())));
        }
        Ok(out)
    }
}

// ── Request ──────────────────────────────────────────────────────────────────────────────────────────

#[derive(Serialize)]
struct Input<'a> {
    messages: Vec<Message<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
}

/// A message: `role` and `content` (a string, as every model's schema takes it); an assistant
/// turn that called tools also lists them (`tool_calls`, OpenAI's shape), a tool result names
/// its call (`tool_call_id`, nine letters or digits as the schemas ask) and its tool.
#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Cow<'a, str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<SentCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

impl<'a> Message<'a> {
    fn text(role: &'static str, content: impl Into<Cow<'a, str>>) -> Self {
        Message { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None, name: None }
    }
}

#[derive(Serialize)]
struct SentCall<'a> {
    id: String,
    r#type: &'static str,
    function: SentFunction<'a>,
}

#[derive(Serialize)]
struct SentFunction<'a> {
    name: &'a str,
    /// The input as a JSON string (an object).
    arguments: String,
}

/// A tool as Workers AI's function calling documents it: `{name, description, parameters}`.
#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Json,
}

/// `id` as the models' schemas take a `tool_call_id`: its letters and digits, the last nine,
/// padded with `0` in front.
fn wire_id(id: &str) -> String {
    let alnum: Vec<char> = id.chars().filter(char::is_ascii_alphanumeric).collect();
    let tail: String = alnum[alnum.len().saturating_sub(9)..].iter().collect();
    format!("{tail:0>9}")
}

/// The binding's input for `req`: the system texts, then the conversation. With `tools`, the
/// tools are offered and the calls and their results go as `tool_calls` and `role: "tool"`
/// messages; without, the conversation is text turns (tool results as user text).
fn input(req: &ChatRequest, tools: bool, stream: bool) -> Json {
    let mut messages: Vec<Message> =
        req.system.iter().chain(&req.system_tail).map(|s| Message::text("system", s.as_str())).collect();
    messages.extend(req.messages.iter().map(|m| {
        match m {
            ChatMessage::User { text } => Message::text("user", text.as_str()),
            ChatMessage::Assistant { text, tool_calls } if tools && !tool_calls.is_empty() => Message {
                tool_calls: tool_calls
                    .iter()
                    .map(|c| SentCall {
                        id: wire_id(&c.id),
                        r#type: "function",
                        function: SentFunction { name: &c.name, arguments: object_or_empty(&c.input).to_string() },
                    })
                    .collect(),
                ..Message::text("assistant", text.as_str())
            },
            ChatMessage::Assistant { text, .. } => Message::text("assistant", text.as_str()),
            ChatMessage::Tool { call_id, name, output } if tools => Message {
                tool_call_id: Some(wire_id(call_id)),
                name: Some(name),
                ..Message::text("tool", output.as_str())
            },
            ChatMessage::Tool { name, output, .. } => Message::text("user", format!("Tool {name} returned: {output}")),
        }
    }));
    let offered: &[ToolSpec] = if tools { &req.tools } else { &[] };
    let input = Input {
        messages,
        max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        stream,
        tools: offered
            .iter()
            .map(|t| Tool { name: &t.name, description: &t.description, parameters: &t.input_schema })
            .collect(),
    };
    serde_json::to_value(input).unwrap_or(Json::Null)
}

// ── Answers ──────────────────────────────────────────────────────────────────────────────────────────

/// An answer, or one event of a streamed one: `response` (a string; anything else as its
/// JSON), `tool_calls` and `usage`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Output {
    response: Option<Json>,
    /// Each `{name, arguments}` (an object, or a JSON string), or OpenAI's
    /// `{id, type: "function", function: {name, arguments}}`; a fragment of a call streamed in
    /// pieces also has an `index`, as in OpenAI's chunks.
    #[serde(deserialize_with = "lenient")]
    tool_calls: Vec<Json>,
    /// `None` when absent (a stream reports it once, in its last event).
    #[serde(deserialize_with = "lenient")]
    usage: Option<CompatUsage>,
}

/// The text of a `response`: a string as is, `null` as nothing, anything else as its JSON.
fn text_of(response: Option<Json>) -> String {
    match response {
        Some(Json::String(s)) => s,
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The calls of an answer or of a streamed event, in order. A call with an `index` is a
/// fragment: it starts the call of that index or adds to it (its id, its name, more of its
/// arguments' text); any other call came whole and is one more call. A call without an id gets
/// one of nine letters and digits; an entry with no name and nothing to add (the `null` entry
/// some streams close their calls with) adds nothing.
fn take_calls(acc: &mut Accum, calls: &[Json]) {
    for call in calls {
        let function = call.get("function").filter(|f| f.is_object()).unwrap_or(call);
        let name = function.get("name").and_then(Json::as_str).unwrap_or_default();
        let arguments = function.get("arguments");
        let id = call.get("id").and_then(Json::as_str).filter(|id| !id.is_empty());
        let Some(index) = call.get("index").and_then(Json::as_u64) else {
            if name.is_empty() {
                continue;
            }
            let input = parse_arguments(arguments);
            let index = acc.calls.iter().map(|c| c.index + 1).max().unwrap_or(0);
            let id = id.map_or_else(|| generated_id(index, name, &input), str::to_owned);
            acc.calls.push(PartialCall {
                index,
                id,
                name: name.to_owned(),
                input: Some(input),
                ..PartialCall::default()
            });
            continue;
        };
        let at = match acc.calls.iter().position(|c| c.index == index) {
            Some(at) => at,
            None => {
                let id = generated_id(index, "", &Json::Null);
                acc.calls.push(PartialCall { index, id, ..PartialCall::default() });
                acc.calls.len() - 1
            }
        };
        let partial = &mut acc.calls[at];
        if let Some(id) = id {
            partial.id = id.to_owned();
        }
        if partial.name.is_empty() {
            partial.name = name.to_owned();
        }
        match arguments {
            Some(Json::String(s)) => partial.arguments.push_str(s),
            Some(o @ Json::Object(_)) => partial.input = Some(o.clone()),
            _ => {}
        }
    }
}

/// An id for the call at `index` of `name` with `input`: nine letters and digits (FNV-1a of the
/// three, in base 36), the same for the same call.
fn generated_id(index: u64, name: &str, input: &Json) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{index}\0{name}\0{input}").bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..9)
        .map(|_| {
            let d = digits[(h % 36) as usize] as char;
            h /= 36;
            d
        })
        .collect()
}
