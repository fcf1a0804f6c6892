//! The agent turn's policy (`SESSION_CONFIG.chat`) and the assistant message it stores: one
//! message per turn holding, in order, each step's reasoning and text (as they streamed) and tool
//! calls (as `dynamic-tool` parts with their input and output).

pub mod conversation;
pub mod run;

use serde_json::{json, Map, Value as Json};

use crate::llm::Piece;
use crate::parts::ToolState;

/// The parts of the assistant message a turn is writing.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AssistantParts {
    pub(crate) parts: Vec<Json>,
    /// The `text` or `reasoning` part the current step is streaming into, if any.
    open: Option<(PieceKind, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PieceKind {
    Text,
    Reasoning,
}

impl AssistantParts {
    /// The parts of a stored message a continuation extends (the reply's parts come after them).
    pub(crate) fn after(parts: Vec<Json>) -> Self {
        AssistantParts { parts, open: None }
    }

    /// A piece of the step's text or reasoning, as it streams: more of the part of its kind
    /// being written, or a new part when the other kind came in between. So the parts are in
    /// the order the model sent them, as the AI SDK's stream builds them on the client.
    pub(crate) fn piece(&mut self, piece: &Piece) {
        let (kind, text) = match piece {
            Piece::Text(t) => (PieceKind::Text, t),
            Piece::Reasoning(t) => (PieceKind::Reasoning, t),
        };
        if text.is_empty() {
            return;
        }
        match self.open {
            Some((k, i)) if k == kind => {
                if let Some(Json::String(s)) = self.parts[i].get_mut("text") {
                    s.push_str(text);
                }
            }
            _ => {
                let kind_name = if kind == PieceKind::Text { "text" } else { "reasoning" };
                self.parts.push(json!({"type": kind_name, "text": text}));
                self.open = Some((kind, self.parts.len() - 1));
            }
        }
    }

    /// The step's text and reasoning are complete: a later piece starts a new part.
    pub(crate) fn end_step(&mut self) {
        self.open = None;
    }

    /// A tool call the server ran: `output-available` with its output.
    pub(crate) fn tool_done(&mut self, name: &str, call_id: &str, input: &Json, output: &str) {
        self.open = None;
        self.parts.push(json!({"type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
            "state": ToolState::OutputAvailable, "input": input, "output": output}));
    }

    /// A tool call that failed (unknown tool): `output-error`.
    pub(crate) fn tool_failed(&mut self, name: &str, call_id: &str, input: &Json, error: &str) {
        self.open = None;
        self.parts.push(json!({"type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
            "state": ToolState::OutputError, "input": input, "errorText": error}));
    }

    /// A call of a client-side tool: `input-available`, for the caller to answer.
    pub(crate) fn tool_pending(&mut self, name: &str, call_id: &str, input: &Json) {
        self.open = None;
        self.parts.push(json!({"type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
            "state": ToolState::InputAvailable, "input": input}));
    }

    /// A stopped reply keeps finished tool calls only: a client tool's call waiting for its
    /// result is dropped.
    pub(crate) fn drop_unanswered(&mut self) {
        self.open = None;
        self.parts.retain(|p| p.get("state").and_then(Json::as_str) != Some(ToolState::InputAvailable.as_str()));
    }

    /// The stored message: `{id, role: "assistant", parts, createdAt, metadata}`.
    pub(crate) fn message(&self, id: &str, created_at: &str, metadata: Map<String, Json>) -> Json {
        json!({"id": id, "role": "assistant", "parts": self.parts, "createdAt": created_at, "metadata": metadata})
    }
}
