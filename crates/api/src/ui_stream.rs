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
//! A failure after `start` is an `error` chunk, then `[DONE]`; a stopped turn ends with `abort`. Tool parts are `dynamic` (the
//! stored parts are `dynamic-tool`), and the ones the server answers are `providerExecuted`, so
//! `useChat` does not hand them to its `onToolCall`. The client builds from these chunks the
//! message the turn stores, part for part.

use serde::Serialize;
use serde_json::Value as Json;

use session_agent_core::error::Error;
use session_agent_core::parts::{parts, Part, ToolState};
use session_agent_core::turn::run::{ChatEvent, Outcome, Runner};
use session_agent_core::wire::True;

/// The header that tells the AI SDK the answer is a UI message stream.
pub(crate) const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// One chunk of the stream: `{"type": <the variant in kebab-case>, …fields in camelCase}`, as
/// the AI SDK's `uiMessageChunkSchema` reads them (the subset a turn sends).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase")]
enum Chunk<'a> {
    /// The answer begins: the id the reply is stored under.
    Start {
        message_id: &'a str,
    },
    /// A model step begins.
    StartStep,
    TextStart {
        id: &'a str,
    },
    TextDelta {
        id: &'a str,
        delta: &'a str,
    },
    TextEnd {
        id: &'a str,
    },
    ReasoningStart {
        id: &'a str,
    },
    ReasoningDelta {
        id: &'a str,
        delta: &'a str,
    },
    ReasoningEnd {
        id: &'a str,
    },
    /// The model called a tool; `providerExecuted` when the server answers it.
    ToolInputAvailable {
        tool_call_id: &'a str,
        tool_name: &'a str,
        input: &'a Json,
        dynamic: True,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_executed: Option<True>,
    },
    /// The server's tool answered.
    ToolOutputAvailable {
        tool_call_id: &'a str,
        output: &'a str,
        dynamic: True,
        provider_executed: True,
    },
    /// The server's tool failed (or there is no such tool).
    ToolOutputError {
        tool_call_id: &'a str,
        error_text: &'a str,
        dynamic: True,
        provider_executed: True,
    },
    /// The step is over.
    FinishStep,
    /// The answer is stored: why it ended, and the stored message's metadata.
    Finish {
        finish_reason: FinishReason,
        message_metadata: &'a Json,
    },
    /// The turn failed after `start` (`"<code>: <message>"`); nothing was stored.
    Error {
        error_text: &'a str,
    },
    /// The turn was stopped: what was streamed is stored (`metadata.stopped`).
    Abort {
        reason: &'a str,
    },
}

/// Why an answer ended (the `finishReason` of `finish`).
#[derive(Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
enum FinishReason {
    /// The model answered.
    Stop,
    /// A client tool's call waits for the client's result.
    ToolCalls,
}

/// The `messageMetadata` of a message that has none.
static NO_METADATA: Json = Json::Null;

/// The state of one answer's stream: the text or reasoning part being streamed.
#[derive(Default)]
pub(crate) struct UiStream {
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
    pub(crate) fn event(&mut self, e: &ChatEvent) -> String {
        let mut out = String::new();
        match e {
            ChatEvent::Start { message_id } => chunk(&mut out, &Chunk::Start { message_id }),
            ChatEvent::Step => chunk(&mut out, &Chunk::StartStep),
            ChatEvent::Delta { text, .. } => self.piece(&mut out, Open::Text, text),
            ChatEvent::Reasoning { text } => self.piece(&mut out, Open::Reasoning, text),
            ChatEvent::ToolCall { call_id, name, input, runner } => {
                self.close(&mut out);
                let provider_executed = (*runner == Runner::Server).then_some(True);
                let c = Chunk::ToolInputAvailable {
                    tool_call_id: call_id,
                    tool_name: name,
                    input,
                    dynamic: True,
                    provider_executed,
                };
                chunk(&mut out, &c);
            }
            ChatEvent::ToolResult { call_id, outcome } => {
                let tool_call_id = call_id;
                let c = match outcome {
                    Outcome::Output(output) => {
                        Chunk::ToolOutputAvailable { tool_call_id, output, dynamic: True, provider_executed: True }
                    }
                    Outcome::Error(error_text) => {
                        Chunk::ToolOutputError { tool_call_id, error_text, dynamic: True, provider_executed: True }
                    }
                };
                chunk(&mut out, &c);
            }
            ChatEvent::StepEnd => {
                self.close(&mut out);
                chunk(&mut out, &Chunk::FinishStep);
            }
            ChatEvent::Storing => {}
        }
        out
    }

    /// The end of a stored answer: `finish` with the message's metadata (model, usage, the
    /// memories it was given) and why it ended (`tool-calls` while a client tool call waits),
    /// then `[DONE]`.
    pub(crate) fn finish(&mut self, message: &Json) -> String {
        let mut out = String::new();
        self.close(&mut out);
        let last = parts(message).last().map(Part::new);
        let waiting = last.is_some_and(|p| p.is_tool() && p.state() == Some(ToolState::InputAvailable));
        let finish_reason = if waiting { FinishReason::ToolCalls } else { FinishReason::Stop };
        let message_metadata = message.get("metadata").unwrap_or(&NO_METADATA);
        chunk(&mut out, &Chunk::Finish { finish_reason, message_metadata });
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// The end of a stopped answer: `abort`, then `[DONE]` (the reply is stored as far as it
    /// streamed).
    pub(crate) fn stopped(&mut self) -> String {
        let mut out = String::new();
        self.close(&mut out);
        chunk(&mut out, &Chunk::Abort { reason: "stopped" });
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// The end of a failed answer: an `error` chunk (`"<code>: <message>"`), then `[DONE]`.
    /// Nothing of the turn was stored.
    pub(crate) fn error(&mut self, e: &Error) -> String {
        let mut out = String::new();
        self.close(&mut out);
        chunk(&mut out, &Chunk::Error { error_text: &format!("{}: {}", e.code(), e.message) });
        out.push_str("data: [DONE]\n\n");
        out
    }

    fn piece(&mut self, out: &mut String, kind: Open, text: &str) {
        if self.open.as_ref().map(|(k, _)| *k) != Some(kind) {
            self.close(out);
            self.parts += 1;
            let id = format!("{}-{}", kind.name(), self.parts);
            chunk(out, &kind.start(&id));
            self.open = Some((kind, id));
        }
        if let Some((_, id)) = &self.open {
            chunk(out, &kind.delta(id, text));
        }
    }

    fn close(&mut self, out: &mut String) {
        if let Some((kind, id)) = self.open.take() {
            chunk(out, &kind.end(&id));
        }
    }
}

impl Open {
    /// The kind's name: the stored part's `type`, and the prefix of its stream ids and chunks.
    fn name(self) -> &'static str {
        match self {
            Open::Text => "text",
            Open::Reasoning => "reasoning",
        }
    }

    fn start(self, id: &str) -> Chunk<'_> {
        match self {
            Open::Text => Chunk::TextStart { id },
            Open::Reasoning => Chunk::ReasoningStart { id },
        }
    }

    fn delta<'a>(self, id: &'a str, delta: &'a str) -> Chunk<'a> {
        match self {
            Open::Text => Chunk::TextDelta { id, delta },
            Open::Reasoning => Chunk::ReasoningDelta { id, delta },
        }
    }

    fn end(self, id: &str) -> Chunk<'_> {
        match self {
            Open::Text => Chunk::TextEnd { id },
            Open::Reasoning => Chunk::ReasoningEnd { id },
        }
    }
}

/// Appends one chunk as a server-sent event: `data: <json>` and a blank line.
fn chunk(out: &mut String, c: &Chunk<'_>) {
    out.push_str("data: ");
    out.push_str(&serde_json::to_string(c).unwrap_or_default());
    out.push_str("\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use session_agent_core::error::ErrorKind;

    /// The bytes `useChat` reads, chunk for chunk (names, field order, flags left out when unset).
    #[test]
    fn chunks_are_the_ai_sdk_s() {
        let mut u = UiStream::default();
        let input = json!({"q": 1});
        let call = |call_id: &str, runner| ChatEvent::ToolCall {
            call_id: call_id.into(),
            name: "t".into(),
            input: input.clone(),
            runner,
        };
        let events = [
            ChatEvent::Start { message_id: "a".into() },
            ChatEvent::Step,
            call("c1", Runner::Server),
            ChatEvent::ToolResult { call_id: "c1".into(), outcome: Outcome::Output("ok".into()) },
            call("c2", Runner::Server),
            ChatEvent::ToolResult { call_id: "c2".into(), outcome: Outcome::Error("no".into()) },
            ChatEvent::StepEnd,
            ChatEvent::Step,
            ChatEvent::Reasoning { text: "Think.".into() },
            ChatEvent::Delta { message_id: "a".into(), text: "Hi".into() },
            ChatEvent::Delta { message_id: "a".into(), text: "!".into() },
            call("c3", Runner::Client),
            ChatEvent::StepEnd,
            ChatEvent::Storing,
        ];
        let mut out: String = events.iter().map(|e| u.event(e)).collect();
        let stored = json!({"id": "a", "parts": [{"type": "dynamic-tool", "state": "input-available"}],
            "metadata": {"model": "m"}});
        out.push_str(&u.finish(&stored));
        let want = [
            r#"{"type":"start","messageId":"a"}"#,
            r#"{"type":"start-step"}"#,
            r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"t","input":{"q":1},"dynamic":true,"providerExecuted":true}"#,
            r#"{"type":"tool-output-available","toolCallId":"c1","output":"ok","dynamic":true,"providerExecuted":true}"#,
            r#"{"type":"tool-input-available","toolCallId":"c2","toolName":"t","input":{"q":1},"dynamic":true,"providerExecuted":true}"#,
            r#"{"type":"tool-output-error","toolCallId":"c2","errorText":"no","dynamic":true,"providerExecuted":true}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"start-step"}"#,
            r#"{"type":"reasoning-start","id":"reasoning-1"}"#,
            r#"{"type":"reasoning-delta","id":"reasoning-1","delta":"Think."}"#,
            r#"{"type":"reasoning-end","id":"reasoning-1"}"#,
            r#"{"type":"text-start","id":"text-2"}"#,
            r#"{"type":"text-delta","id":"text-2","delta":"Hi"}"#,
            r#"{"type":"text-delta","id":"text-2","delta":"!"}"#,
            r#"{"type":"text-end","id":"text-2"}"#,
            r#"{"type":"tool-input-available","toolCallId":"c3","toolName":"t","input":{"q":1},"dynamic":true}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"finish","finishReason":"tool-calls","messageMetadata":{"model":"m"}}"#,
            "[DONE]",
        ];
        assert_eq!(out, want.iter().map(|c| format!("data: {c}\n\n")).collect::<String>());
        let mut u = UiStream::default();
        let done = u.finish(&json!({"id": "a", "parts": [{"type": "text", "text": "x"}]}));
        assert!(done.starts_with(r#"data: {"type":"finish","finishReason":"stop","messageMetadata":null}"#), "{done}");
        let e = Error::new(ErrorKind::LlmUnavailable, "down");
        assert_eq!(
            UiStream::default().error(&e),
            "data: {\"type\":\"error\",\"errorText\":\"llm_unavailable: down\"}\n\ndata: [DONE]\n\n"
        );
    }
}
