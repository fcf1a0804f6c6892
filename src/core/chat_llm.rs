//! A conversation with tools on the configured model: the provider-neutral request and reply of
//! one agent-turn step ([`ChatRequest`], [`ChatReply`]), each provider's wire format for them
//! (OpenAI-compatible chat completions, Anthropic Messages, Workers AI), streamed as server-sent
//! events where the provider can, with text deltas handed out as they arrive.

use serde_json::Value as Json;

use crate::core::llm::Usage;

/// One message of the conversation sent to the model.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatMessage {
    User { text: String },
    /// The model's earlier turn: its text and the tools it called.
    Assistant { text: String, tool_calls: Vec<ToolCall> },
    /// The result of one tool call, as the model reads it.
    Tool { call_id: String, name: String, output: String },
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
