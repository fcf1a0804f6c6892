//! The agent turn's policy (`SESSION_CONFIG.chat`) and the assistant message it stores: one
//! message per turn holding, in order, each step's reasoning and text (as they streamed) and tool
//! calls (as `dynamic-tool` parts with their input and output).
//!
//! # Its modules
//!
//! | module | what it is for |
//! |---|---|
//! | `mod.rs` | `AssistantParts`: the one assistant message a turn stores (reasoning and text parts as they stream, `dynamic-tool` parts), or the stored one it extends |
//! | `conversation.rs` | stored UIMessages → the model's conversation; `sanitize` (dangling calls, orphan results), tool-pair-aware `cap`, `build` (the cap keeping summaries), continuation validation |
//! | `run.rs` | `turn`: `Ask` (a message, a continuation, or the AI SDK's `useChat` body: a new user message, a stored one answered again, or a stored assistant message extended after client tools) → start (checked against the stored branch, read as one JSON text (`Session::history_text`, which `GET …/history` answers with too: SQLite assembles it where it can); the client's copies compared through `conversation::client_views`, which normalizes only the pairs that differ) → inject → steps → `Session::commit_turn` (`Placement::New` or `Extends`); `ChatEvent`s as they happen (`Start`, per step `Step`, `Delta`/`Reasoning` pieces as they stream, `ToolCall`/`ToolResult`, `StepEnd`, `Storing`); the work it leaves for after the answer (`after::After`: compaction, then extraction); the reply's `delta`, `reasoning` and `tool` frames (`wire::Frame`) as they happen |
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 21. **A failed turn changes nothing; a stopped turn keeps what was shown**: nothing is written
//!     until the model is done or the turn is stopped; then the user message, the answered client
//!     calls, the one assistant message, the usage and (first time) the frozen prompt go in one
//!     transaction. A provider or tool-store failure writes nothing (with `chat.onDisconnect:
//!     "finish"` the user message was written at the start and stays). A stop (the turn's `Stop`
//!     set by its client going away, a `cancel` frame or `POST …/chat/stop`; or its `on_event`
//!     failing) drops the model call at once and writes the reply as far as it streamed, marked
//!     `metadata.stopped`, finished tool calls kept, a waiting client call dropped, no extraction;
//!     before the first piece, the user message alone. A client's copy of a stopped reply that is a
//!     prefix of the stored one is accepted and the stored copy cut back to it
//!     (`conversation::cut_back`); an empty copy stands for none. Effects of server tools that
//!     already ran (a `set_context` write) are not undone.
//! 22. **Continuations are checked against storage**: the client's branch must equal the stored
//!     one except pending client tool calls answered (and pending approvals responded); anything
//!     else is 409 with the specific code, before any model call. A `useChat` body is compared the
//!     same way after `client_view` takes out only what the AI SDK changes in messages it holds;
//!     the model then reads the stored messages, never the client's copies.
//! 24. **The turn's message cap never drops a compaction summary** (nor the head before it:
//!     `conversation::build`); what it does drop is compacted after the turn when compaction is
//!     configured.

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
