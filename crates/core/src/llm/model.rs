//! The request/answer model every provider speaks in: a conversation with tools
//! ([`ChatRequest`]) in, one step's answer ([`ChatReply`]) out, the [`Piece`]s of an answer as
//! it streams, and the [`Usage`] it cost. Plain data, the same whichever provider answers: each
//! provider translates to and from its own wire format.

use serde_json::Value as Json;

use crate::config::CacheConfig;
use crate::error::Result;

/// Default `max_tokens` of a call (Anthropic requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

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

/// A tool offered to the model (and listed by `GET …/tools`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Json,
}

/// One step of a conversation (a turn's step, or a summary: one user message, no tools).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    /// What the provider's prompt cache keeps (`None`: nothing is marked).
    pub cache: Option<PromptCache>,
    /// Per-turn system text sent after `system`, outside what the prompt cache keeps (the
    /// memories recalled for this turn), so `system` stays byte-identical between turns.
    pub system_tail: Option<String>,
    /// What the answer's text must be.
    pub format: Format,
}

/// A request's prompt-cache marks: `key` routes OpenAI's cache (`prompt_cache_key`: the
/// session id), `marks` say what Anthropic's `cache_control` closes (`chat.cache`).
#[derive(Clone, Debug, PartialEq)]
pub struct PromptCache {
    pub key: String,
    pub marks: CacheConfig,
}

/// The shape asked of the answer's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Free text.
    #[default]
    Text,
    /// One JSON object (OpenAI-compatible `response_format: json_object`; other providers are
    /// asked in the prompt and parsed leniently).
    JsonObject,
}

impl ChatRequest {
    /// A single user message, nothing else.
    pub fn user(text: impl Into<String>) -> Self {
        ChatRequest { messages: vec![ChatMessage::User { text: text.into() }], ..ChatRequest::default() }
    }
}

/// How a step's answer comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// One JSON answer (summaries, and chat steps that need no live text).
    Whole,
    /// Server-sent events, with the usage at the end.
    Streamed,
}

/// Tokens a call consumed, for the session's usage totals. Input tokens include the prompt
/// cache's reads and writes wherever the provider reports them apart (Anthropic);
/// `cached_input_tokens` are those of them read from the cache (Anthropic's
/// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_input_tokens: i64,
}

/// A piece of a streamed answer, handed out as it arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// More of the reply's text.
    Text(String),
    /// More of the model's reasoning (providers that send it apart: Anthropic thinking,
    /// `reasoning_content` / `reasoning` of OpenAI-compatible ones).
    Reasoning(String),
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

impl ChatReply {
    /// Hands a reply that came back whole to a caller that wanted it streamed: its reasoning,
    /// then its text, each as one piece (none for an empty one).
    pub(crate) fn hand_out(&self, on_delta: &mut dyn FnMut(&Piece) -> Result<()>) -> Result<()> {
        if !self.reasoning.is_empty() {
            on_delta(&Piece::Reasoning(self.reasoning.clone()))?;
        }
        if !self.text.is_empty() {
            on_delta(&Piece::Text(self.text.clone()))?;
        }
        Ok(())
    }
}
