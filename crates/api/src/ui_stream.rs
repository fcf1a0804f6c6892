//! The AI SDK's UI message stream: the server-sent events `useChat` (through its
//! `DefaultChatTransport`) reads from `POST /sessions/{sid}/chat`, made from a turn's
//! [`ChatEvent`]s as they come.
//!
//! ```text
//! start{messageId} ─▶ per step: start-step, reasoning-start/-delta/-end and text-start/-delta/-end
//! in the order they stream, tool-input-available (then tool-output-available / -error for the
//! tools the server runs), finish-step ─▶ finish{finishReason, messageMetadata} ─▶ [DONE]
//! ```
//!
//! A failure after `start` is an `error` chunk, then `[DONE]`. Tool parts are `dynamic` (the
//! stored parts are `dynamic-tool`), and the ones the server answers are `providerExecuted`, so
//! `useChat` does not hand them to its `onToolCall`. The client builds from these chunks the
//! message the turn stores, part for part.

use serde_json::{json, Value as Json};

use session_agent_core::error::Error;
use session_agent_core::parts::{is_tool_part, parts, str_field};
use session_agent_core::turn::run::{ChatEvent, Outcome, Runner};

/// The header that tells the AI SDK the answer is a UI message stream.
pub const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// The state of one answer's stream: the text or reasoning part being streamed.
#[derive(Default)]
pub struct UiStream {
    open: Option<(Open, String)>,
    parts: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Reasoning,
}

impl UiStream {
    /// The chunks of one event (empty when it has none).
    pub fn event(&mut self, e: &ChatEvent) -> String {
        let mut out = String::new();
        match e {
            ChatEvent::Start { message_id } => chunk(&mut out, json!({"type": "start", "messageId": message_id})),
            ChatEvent::Step => chunk(&mut out, json!({"type": "start-step"})),
            ChatEvent::Delta { text, .. } => self.piece(&mut out, Open::Text, text),
            ChatEvent::Reasoning { text } => self.piece(&mut out, Open::Reasoning, text),
            ChatEvent::ToolCall { call_id, name, input, runner } => {
                self.close(&mut out);
                let mut c = json!({"type": "tool-input-available", "toolCallId": call_id, "toolName": name,
                    "input": input, "dynamic": true});
                if *runner == Runner::Server {
                    c["providerExecuted"] = json!(true);
                }
                chunk(&mut out, c);
            }
            ChatEvent::ToolResult { call_id, outcome } => {
                let c = match outcome {
                    Outcome::Output(output) => json!({"type": "tool-output-available", "toolCallId": call_id,
                        "output": output, "dynamic": true, "providerExecuted": true}),
                    Outcome::Error(text) => json!({"type": "tool-output-error", "toolCallId": call_id,
                        "errorText": text, "dynamic": true, "providerExecuted": true}),
                };
                chunk(&mut out, c);
            }
            ChatEvent::StepEnd => {
                self.close(&mut out);
                chunk(&mut out, json!({"type": "finish-step"}));
            }
            ChatEvent::Storing => {}
        }
        out
    }

    /// The end of a stored answer: `finish` with the message's metadata (model, usage, the
    /// memories it was given) and why it ended (`tool-calls` while a client tool call waits),
    /// then `[DONE]`.
    pub fn finish(&mut self, message: &Json) -> String {
        let mut out = String::new();
        self.close(&mut out);
        let waiting =
            parts(message).last().is_some_and(|p| is_tool_part(p) && str_field(p, "state") == Some("input-available"));
        let reason = if waiting { "tool-calls" } else { "stop" };
        let meta = message.get("metadata").cloned().unwrap_or(Json::Null);
        chunk(&mut out, json!({"type": "finish", "finishReason": reason, "messageMetadata": meta}));
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// The end of a failed answer: an `error` chunk (`"<code>: <message>"`), then `[DONE]`.
    /// Nothing of the turn was stored.
    pub fn error(&mut self, e: &Error) -> String {
        let mut out = String::new();
        self.close(&mut out);
        chunk(&mut out, json!({"type": "error", "errorText": format!("{}: {}", e.code(), e.message)}));
        out.push_str("data: [DONE]\n\n");
        out
    }

    fn piece(&mut self, out: &mut String, kind: Open, text: &str) {
        let (start, delta) = match kind {
            Open::Text => ("text-start", "text-delta"),
            Open::Reasoning => ("reasoning-start", "reasoning-delta"),
        };
        if self.open.as_ref().map(|(k, _)| *k) != Some(kind) {
            self.close(out);
            self.parts += 1;
            let id = format!("{}-{}", if kind == Open::Text { "text" } else { "reasoning" }, self.parts);
            chunk(out, json!({"type": start, "id": id}));
            self.open = Some((kind, id));
        }
        if let Some((_, id)) = &self.open {
            chunk(out, json!({"type": delta, "id": id, "delta": text}));
        }
    }

    fn close(&mut self, out: &mut String) {
        if let Some((kind, id)) = self.open.take() {
            let end = if kind == Open::Text { "text-end" } else { "reasoning-end" };
            chunk(out, json!({"type": end, "id": id}));
        }
    }
}

fn chunk(out: &mut String, c: Json) {
    out.push_str("data: ");
    out.push_str(&c.to_string());
    out.push_str("\n\n");
}
