//! Workers AI through the `AI` binding: text only (no tools; tool results are given to the
//! model as user text), one answer at once, handed to the caller as a single delta.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::model::{ChatMessage, ChatReply, ChatRequest, Piece, DEFAULT_MAX_TOKENS};
use super::openai::WireUsage;
use super::transport::Transport;
use super::wire::{error_message, lenient, unavailable};
use super::LlmConfig;
use crate::error::Result;

#[derive(Serialize)]
struct Input<'a> {
    messages: Vec<Message<'a>>,
    max_tokens: u32,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: std::borrow::Cow<'a, str>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Output {
    response: Option<Json>,
    #[serde(deserialize_with = "lenient")]
    usage: WireUsage,
}

/// The binding's input for `req`.
pub fn input(req: &ChatRequest) -> Json {
    let mut messages: Vec<Message> =
        req.system.iter().chain(&req.system_tail).map(|s| Message { role: "system", content: s.into() }).collect();
    messages.extend(req.messages.iter().map(|m| match m {
        ChatMessage::User { text } => Message { role: "user", content: text.into() },
        ChatMessage::Assistant { text, .. } => Message { role: "assistant", content: text.into() },
        ChatMessage::Tool { name, output, .. } => {
            Message { role: "user", content: format!("Tool {name} returned: {output}").into() }
        }
    }));
    let input = Input { messages, max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS) };
    serde_json::to_value(input).unwrap_or(Json::Null)
}

/// The binding's answer: `response` (a string; anything else as its JSON) and `usage`.
pub fn reply(out: Json) -> Result<ChatReply> {
    if let Some(detail) = error_message(out.get("error")) {
        return Err(unavailable("the model failed").with_log(format!("the model failed: {detail}")));
    }
    let out: Output = serde_json::from_value(out).unwrap_or_default();
    let text = match out.response {
        Some(Json::String(s)) => s,
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    Ok(ChatReply { text, usage: out.usage.into(), ..ChatReply::default() })
}

/// One step on Workers AI.
pub(super) async fn chat(
    t: &dyn Transport,
    cfg: &LlmConfig,
    req: &ChatRequest,
    on_delta: &mut dyn FnMut(&Piece) -> Result<()>,
) -> Result<ChatReply> {
    let out = t.workers_ai(&cfg.model, input(req)).await.map_err(|e| unavailable(e.message))?;
    let reply = reply(out)?;
    if !reply.text.is_empty() {
        on_delta(&Piece::Text(reply.text.clone()))?;
    }
    Ok(reply)
}
