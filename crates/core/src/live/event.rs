//! What a turn tells its caller as it goes ([`ChatEvent`]): the events every transport encodes
//! (server-sent events, the AI SDK's UI message stream, WebSocket frames) and running turns keep
//! for the clients that follow them.

use serde_json::Value as Json;

/// What a turn tells its caller as it goes, in this order: `Start`, then per model step `Step`,
/// its `Delta`s and `Reasoning` as they stream, its tool calls (`ToolCall`, and `ToolResult` for
/// those the server answers) and `StepEnd`; last `Storing`.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    /// The turn passed its checks: the id its reply is stored under (the extended message's
    /// own id for a continuation of the AI SDK's kind).
    Start { message_id: String },
    /// A model step begins.
    Step,
    /// The next piece of the reply's text.
    Delta { message_id: String, text: String },
    /// The next piece of the model's reasoning.
    Reasoning { text: String },
    /// The model called a tool; `runner` says who answers it.
    ToolCall { call_id: String, name: String, input: Json, runner: Runner },
    /// The answer to a tool call the server ran: its output, or the error the model reads.
    ToolResult { call_id: String, outcome: Outcome },
    /// The step is over (its tool calls answered, or waiting for the client).
    StepEnd,
    /// The reply is complete and about to be stored (whole: a stop that comes now is too late).
    Storing,
}

/// Who answers a tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// The session: its tools, and the error for a tool nobody has.
    Server,
    /// The caller (a tool of the request's `tools`): the turn ends with the call pending.
    Client,
}

/// How a tool call the server answered went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Output(String),
    Error(String),
}
