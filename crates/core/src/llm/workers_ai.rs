//! The Workers AI provider ([`WorkersAi`]), reached through the `AI` binding: chat on text only
//! (no tools; tool results are given to the model as user text), one answer at once (the client
//! hands it out as a single piece), and the embedding models (`@cf/baai/bge-*`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::api::{Accum, Api};
use super::model::{ChatMessage, ChatReply, ChatRequest, Delivery, Piece, DEFAULT_MAX_TOKENS};
use super::sse::SseEvent;
use super::transport::{Answer, Call, Endpoint};
use super::wire::{lenient, unavailable, CompatUsage};
use crate::error::{Error, Result};

/// Workers AI through the `AI` binding (`LLM_PROVIDER=workers-ai`): no URL, no key; the model
/// is run by name.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkersAi;

impl Api for WorkersAi {
    fn default_base_url(&self) -> &'static str {
        ""
    }

    /// Always a whole answer: the binding is not asked to stream (yet).
    fn chat_call(&self, to: &Endpoint<'_>, req: &ChatRequest, _delivery: Delivery) -> Result<Call> {
        Ok(Call::Binding { model: to.model.to_owned(), input: input(req) })
    }

    fn reply(&self, answer: Json) -> Result<ChatReply> {
        let out: Output = serde_json::from_value(answer).unwrap_or_default();
        let text = match out.response {
            Some(Json::String(s)) => s,
            Some(Json::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        Ok(ChatReply { text, usage: out.usage.into(), ..ChatReply::default() })
    }

    /// Never called while [`WorkersAi::chat_call`] asks for whole answers only.
    fn decode(&self, _acc: &mut Accum, _ev: &SseEvent) -> Result<Vec<Piece>> {
        Err(Error::internal("Workers AI answers are not streamed"))
    }

    fn has_embeddings(&self) -> bool {
        true
    }

    /// The input of an embeddings model: `{text: [...]}`.
    fn embeddings_call(&self, to: &Endpoint<'_>, texts: &[String]) -> Result<Call> {
        Ok(Call::Binding { model: to.model.to_owned(), input: json!({ "text": texts }) })
    }

    /// The vectors of an embeddings answer: `{shape, data: [[...], ...]}`, one row per text.
    fn vectors(&self, answer: Answer<'_>, n: usize) -> Result<Vec<Vec<f32>>> {
        let Answer::Binding(answer) = answer else {
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

// ── Chat ─────────────────────────────────────────────────────────────────────────────────────────────

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

/// The binding's answer: `response` (a string; anything else as its JSON) and `usage`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Output {
    response: Option<Json>,
    #[serde(deserialize_with = "lenient")]
    usage: CompatUsage,
}

/// The binding's input for `req`: the system texts, then the conversation as text turns.
fn input(req: &ChatRequest) -> Json {
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
