//! The agent turn's policy (`SESSION_CONFIG.chat`) and the assistant message it stores: one
//! message per turn holding, in order, each step's reasoning, text and tool calls (as
//! `dynamic-tool` parts with their input and output).

pub mod conversation;
pub mod run;

use serde_json::{json, Map, Value as Json};

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
