//! What the server sends its clients over a WebSocket, typed: [`Frame`], one variant per frame of
//! docs/openapi.yaml's `ServerFrame`, and the shapes the chat's server-sent events share with
//! those frames ([`Delta`], [`Whole`], [`Failure`]: the SSE event is the frame without its
//! `sessionId`, a stream answering one request of one session).
//!
//! A frame is built where it is sent, from borrowed fields, and serialized once, when someone
//! listens ([`Frame::to_json`]; the [`crate::events::Events`] trait carries JSON). Field order is
//! serialization order, and it is the order clients have always been sent: `sessionId` first,
//! except on the turn's `reasoning` and `tool` progress frames, which end with `sessionId` and
//! `messageId`. Stored messages inside a frame go out as stored (a `&Json`, never re-shaped).

use serde::{Serialize, Serializer};
use serde_json::Value as Json;

use crate::parts::ToolState;

/// A frame the server sends on `GET …/ws` (docs/openapi.yaml `ServerFrame`): `{"type": <the
/// variant in lower case>, …fields in camelCase}`.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase", rename_all_fields = "camelCase")]
pub enum Frame<'a> {
    /// A stored message, to every socket of its session; or, with `pending`, the echo a socket
    /// gets of its own `chat` frame's user message before the turn stores it.
    Message {
        session_id: &'a str,
        #[serde(flatten)]
        whole: Whole<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pending: Option<True>,
    },
    /// The next piece of a running turn's reply text.
    Delta {
        session_id: &'a str,
        #[serde(flatten)]
        delta: Delta<'a>,
    },
    /// The reasoning of a running turn's model call, once that call is done.
    Reasoning { text: &'a str, session_id: &'a str, message_id: &'a str },
    /// A tool call of a running turn's reply: made (`input-available`), then answered by the
    /// server (`output-available` with `output`, or `output-error` with `errorText`).
    Tool {
        tool_call_id: &'a str,
        tool_name: &'a str,
        state: ToolState,
        input: &'a Json,
        #[serde(flatten)]
        answer: Option<ToolAnswer<'a>>,
        session_id: &'a str,
        message_id: &'a str,
    },
    /// The session's token estimate after a change (docs/REFERENCE.md#status-frames), and how an
    /// automatic compaction went.
    Status {
        session_id: &'a str,
        phase: Phase,
        token_estimate: i64,
        /// `SESSION_CONFIG.compaction.after`; `null` without one.
        token_threshold: Option<i64>,
        #[serde(flatten)]
        compaction: Option<CompactionOutcome<'a>>,
    },
    /// Messages were deleted.
    Deleted { session_id: &'a str, ids: &'a [&'a str] },
    /// The session's messages were cleared (or the session deleted).
    Cleared { session_id: &'a str },
    /// A context block changed.
    Context { session_id: &'a str, label: &'a str },
    /// A long-term memory changed: to every socket of the agent, without `sessionId`. `memory` is
    /// the memory as the API shows it (as it was, for `deleted`).
    Memory { op: MemoryOp, memory: &'a Json },
    /// A schedule ran (by its alarm or by hand): to every socket of the agent, without
    /// `sessionId`. `run` is the run as `GET /schedules/{id}/runs` lists it.
    Schedule { op: ScheduleOp, schedule_id: &'a str, run: &'a Json },
    /// The agent's memory space could not be reached during a turn (`status`: `unreachable`): the
    /// turn went on with the agent's own memories.
    Space { session_id: &'a str, space: &'a str, status: &'a str, message: &'a str },
    /// The answer to a `history` frame: the branch's messages.
    History { session_id: &'a str, messages: &'a Json },
    /// The answer to a `ping` frame.
    Pong,
    /// What went wrong with the socket's frame (the `error.code` its route would answer).
    Error {
        session_id: &'a str,
        #[serde(flatten)]
        failure: Failure<'a>,
    },
}

impl Frame<'_> {
    /// The frame as JSON, for [`crate::events::Events`]. Serializing these types cannot fail
    /// (string keys only, no custom errors), so there is no error to hand on.
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The next piece of a reply's text: the `delta` frame and SSE event.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta<'a> {
    /// The id the reply will be stored under.
    pub message_id: &'a str,
    pub text: &'a str,
}

/// A whole message, as stored: the `message` frame and SSE event.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Whole<'a> {
    pub message: &'a Json,
}

/// What failed, as an API error says it: the `error` frame and SSE event, and the `error` of a
/// `status` frame after a failed compaction.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Failure<'a> {
    /// An `error.code` (`invalid_request`, `llm_unavailable`, …).
    pub code: &'a str,
    pub message: &'a str,
}

/// How the server answered a tool call: one field of the `tool` frame, after `input`.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum ToolAnswer<'a> {
    /// `output`: what the tool returned (`output-available`).
    #[serde(rename = "output")]
    Output(&'a str),
    /// `errorText`: why it failed (`output-error`).
    #[serde(rename = "errorText")]
    Error(&'a str),
}

/// The `phase` of a `status` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Nothing running: the estimate is the branch's now.
    Idle,
    /// A compaction is running (an `idle` frame follows, whatever it did).
    Compacting,
}

/// What an automatic compaction did, on the `idle` frame after it: one field of the `status`
/// frame, after `tokenThreshold`. (Newtype variants: flattened, a struct variant would be
/// buffered through serde's `Content`, which costs the wasm some 5 KB.)
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionOutcome<'a> {
    /// `compacted: {tokensBefore}`: it stored an overlay.
    Compacted(Compacted),
    /// `error: {code, message}`: it failed.
    Error(Failure<'a>),
}

/// The `compacted` field of a `status` frame.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Compacted {
    /// The branch's estimate before the compaction (the frame's `tokenEstimate` is after it).
    pub(crate) tokens_before: i64,
}

/// What happened to a memory, for the `memory` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryOp {
    Created,
    Updated,
    Deleted,
}

/// What happened to a schedule, for the `schedule` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleOp {
    /// One of its runs ended (`ok` or `error`).
    Run,
}

/// A flag whose only value is `true` (`pending`, and the UI stream's `dynamic` and
/// `providerExecuted`): where it does not hold, the field is left out, never `false`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct True;

impl Serialize for True {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bytes clients get: field names, order and optional fields as before the frames were typed.
    #[test]
    fn frames_serialize_as_clients_read_them() {
        let m = json!({"id": "u1", "role": "user", "parts": []});
        let text = |f: Frame| f.to_json().to_string();
        assert_eq!(
            text(Frame::Message { session_id: "s", whole: Whole { message: &m }, pending: None }),
            r#"{"type":"message","sessionId":"s","message":{"id":"u1","role":"user","parts":[]}}"#
        );
        assert_eq!(
            text(Frame::Message { session_id: "s", whole: Whole { message: &m }, pending: Some(True) }),
            r#"{"type":"message","sessionId":"s","message":{"id":"u1","role":"user","parts":[]},"pending":true}"#
        );
        assert_eq!(
            text(Frame::Delta { session_id: "s", delta: Delta { message_id: "a", text: "Hi" } }),
            r#"{"type":"delta","sessionId":"s","messageId":"a","text":"Hi"}"#
        );
        assert_eq!(
            text(Frame::Reasoning { text: "Think.", session_id: "s", message_id: "a" }),
            r#"{"type":"reasoning","text":"Think.","sessionId":"s","messageId":"a"}"#
        );
        let input = json!({"q": 1});
        let tool = |state, answer| Frame::Tool {
            tool_call_id: "c",
            tool_name: "t",
            state,
            input: &input,
            answer,
            session_id: "s",
            message_id: "a",
        };
        assert_eq!(
            text(tool(ToolState::InputAvailable, None)),
            r#"{"type":"tool","toolCallId":"c","toolName":"t","state":"input-available","input":{"q":1},"sessionId":"s","messageId":"a"}"#
        );
        assert_eq!(
            text(tool(ToolState::OutputAvailable, Some(ToolAnswer::Output("ok")))),
            r#"{"type":"tool","toolCallId":"c","toolName":"t","state":"output-available","input":{"q":1},"output":"ok","sessionId":"s","messageId":"a"}"#
        );
        assert_eq!(
            text(tool(ToolState::OutputError, Some(ToolAnswer::Error("no")))),
            r#"{"type":"tool","toolCallId":"c","toolName":"t","state":"output-error","input":{"q":1},"errorText":"no","sessionId":"s","messageId":"a"}"#
        );
        let status = |phase, threshold, compaction| Frame::Status {
            session_id: "s",
            phase,
            token_estimate: 40,
            token_threshold: threshold,
            compaction,
        };
        assert_eq!(
            text(status(Phase::Idle, None, None)),
            r#"{"type":"status","sessionId":"s","phase":"idle","tokenEstimate":40,"tokenThreshold":null}"#
        );
        assert_eq!(
            text(status(Phase::Idle, Some(50), Some(CompactionOutcome::Compacted(Compacted { tokens_before: 99 })))),
            r#"{"type":"status","sessionId":"s","phase":"idle","tokenEstimate":40,"tokenThreshold":50,"compacted":{"tokensBefore":99}}"#
        );
        let failure = Failure { code: "llm_unavailable", message: "down" };
        assert_eq!(
            text(status(Phase::Idle, Some(50), Some(CompactionOutcome::Error(failure)))),
            r#"{"type":"status","sessionId":"s","phase":"idle","tokenEstimate":40,"tokenThreshold":50,"error":{"code":"llm_unavailable","message":"down"}}"#
        );
        assert_eq!(
            text(status(Phase::Compacting, Some(50), None)),
            r#"{"type":"status","sessionId":"s","phase":"compacting","tokenEstimate":40,"tokenThreshold":50}"#
        );
        assert_eq!(
            text(Frame::Deleted { session_id: "s", ids: &["m1"] }),
            r#"{"type":"deleted","sessionId":"s","ids":["m1"]}"#
        );
        assert_eq!(text(Frame::Cleared { session_id: "s" }), r#"{"type":"cleared","sessionId":"s"}"#);
        assert_eq!(
            text(Frame::Context { session_id: "s", label: "memory" }),
            r#"{"type":"context","sessionId":"s","label":"memory"}"#
        );
        assert_eq!(
            text(Frame::Memory { op: MemoryOp::Deleted, memory: &json!({"id": "mem_1"}) }),
            r#"{"type":"memory","op":"deleted","memory":{"id":"mem_1"}}"#
        );
        assert_eq!(
            text(Frame::Schedule { op: ScheduleOp::Run, schedule_id: "sch_1", run: &json!({"id": "r"}) }),
            r#"{"type":"schedule","op":"run","scheduleId":"sch_1","run":{"id":"r"}}"#
        );
        assert_eq!(
            text(Frame::History { session_id: "s", messages: &json!([m]) }),
            r#"{"type":"history","sessionId":"s","messages":[{"id":"u1","role":"user","parts":[]}]}"#
        );
        assert_eq!(text(Frame::Pong), r#"{"type":"pong"}"#);
        assert_eq!(
            text(Frame::Error { session_id: "s", failure: Failure { code: "invalid_request", message: "bad" } }),
            r#"{"type":"error","sessionId":"s","code":"invalid_request","message":"bad"}"#
        );
    }
}
