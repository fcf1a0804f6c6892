//! The agent turn's policy (`SESSION_CONFIG.chat`) and the assistant message it stores: one
//! message per turn holding, in order, each step's reasoning, text and tool calls (as
//! `dynamic-tool` parts with their input and output).

use serde::Deserialize;
use serde_json::{json, Map, Value as Json};

use crate::core::error::{Error, Result};

/// Model messages sent per step, by default (a tool call is never separated from its result).
pub const DEFAULT_MAX_MESSAGES: usize = 50;
/// Model calls per turn, by default: a turn whose model keeps calling server tools stops there.
pub const DEFAULT_MAX_STEPS: usize = 8;

/// `SESSION_CONFIG.chat`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatConfig {
    /// Most model messages sent per step (0 = no cap).
    #[serde(default = "default_max_messages")]
    pub max_messages: usize,
    /// Most model calls per turn (1–50).
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// `max_tokens` of each call (default: the provider layer's).
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

fn default_max_messages() -> usize {
    DEFAULT_MAX_MESSAGES
}

fn default_max_steps() -> usize {
    DEFAULT_MAX_STEPS
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig { max_messages: DEFAULT_MAX_MESSAGES, max_steps: DEFAULT_MAX_STEPS, max_tokens: None }
    }
}

impl ChatConfig {
    /// Parses and checks `SESSION_CONFIG.chat` (absent = the defaults).
    pub fn from_json(v: Option<&Json>) -> Result<Self> {
        let Some(v) = v else { return Ok(ChatConfig::default()) };
        let cfg: ChatConfig = serde_json::from_value(v.clone()).map_err(|e| Error::invalid(format!("chat: {e}")))?;
        if !(1..=50).contains(&cfg.max_steps) {
            return Err(Error::invalid("chat.maxSteps must be from 1 to 50"));
        }
        if cfg.max_tokens == Some(0) {
            return Err(Error::invalid("chat.maxTokens must be positive"));
        }
        Ok(cfg)
    }
}

/// The parts of the assistant message a turn is writing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantParts {
    pub parts: Vec<Json>,
}

impl AssistantParts {
    /// A step's reasoning and text (empty ones are left out).
    pub fn step_text(&mut self, reasoning: &str, text: &str) {
        if !reasoning.is_empty() {
            self.parts.push(json!({"type": "reasoning", "text": reasoning}));
        }
        if !text.is_empty() {
            self.parts.push(json!({"type": "text", "text": text}));
        }
    }

    /// A tool call the server ran: `output-available` with its output.
    pub fn tool_done(&mut self, name: &str, call_id: &str, input: &Json, output: &str) {
        self.parts.push(json!({"type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
            "state": "output-available", "input": input, "output": output}));
    }

    /// A tool call that failed (unknown tool): `output-error`.
    pub fn tool_failed(&mut self, name: &str, call_id: &str, input: &Json, error: &str) {
        self.parts.push(json!({"type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
            "state": "output-error", "input": input, "errorText": error}));
    }

    /// A call of a client-side tool: `input-available`, for the caller to answer.
    pub fn tool_pending(&mut self, name: &str, call_id: &str, input: &Json) {
        self.parts.push(json!({"type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
            "state": "input-available", "input": input}));
    }

    /// The stored message: `{id, role: "assistant", parts, createdAt, metadata}`.
    pub fn message(&self, id: &str, created_at: &str, metadata: Map<String, Json>) -> Json {
        json!({"id": id, "role": "assistant", "parts": self.parts, "createdAt": created_at, "metadata": metadata})
    }
}
