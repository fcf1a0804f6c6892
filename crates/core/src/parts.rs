//! What an AI SDK `UIMessage` looks like to the code that reads one: its fields and parts, the
//! kinds of part, the states of a tool part ([`ToolState`]) and a borrowed view of one part
//! ([`Part`]). Plain accessors over `serde_json::Value`, shared by the store (validation,
//! indexing), token estimates, compaction, skills and the agent turn.
//!
//! Reading never re-shapes: messages are stored as the client sent them (unknown fields and all),
//! so a part is read through a view of its JSON, never parsed into a struct and written back.

use serde::{Serialize, Serializer};
use serde_json::Value as Json;

/// The state of an AI SDK tool part (`tool-<name>` or `dynamic-tool`), in the order a call goes
/// through them: its input streams in, is complete, may wait for the user's approval, and ends
/// with an output, an error or a denial. Serialized as its AI SDK name (`ToolState::as_str`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolState {
    /// `input-streaming`: the model is still writing the call's input.
    InputStreaming,
    /// `input-available`: the call is made and waits for its answer (a client tool's call stays
    /// here until the client sends its result).
    InputAvailable,
    /// `approval-requested`: the call waits for the user to approve it.
    ApprovalRequested,
    /// `approval-responded`: the user answered the approval (`approval.approved`).
    ApprovalResponded,
    /// `output-available`: answered, with an `output`.
    OutputAvailable,
    /// `output-error`: answered with an `errorText`.
    OutputError,
    /// `output-denied`: the user refused the call; it never ran.
    OutputDenied,
}

impl ToolState {
    /// Every state, in the order of the AI SDK's docs (error messages list them so).
    pub(crate) const ALL: [ToolState; 7] = [
        ToolState::InputStreaming,
        ToolState::InputAvailable,
        ToolState::ApprovalRequested,
        ToolState::ApprovalResponded,
        ToolState::OutputAvailable,
        ToolState::OutputError,
        ToolState::OutputDenied,
    ];

    /// The state's name in a part's JSON (`output-available`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ToolState::InputStreaming => "input-streaming",
            ToolState::InputAvailable => "input-available",
            ToolState::ApprovalRequested => "approval-requested",
            ToolState::ApprovalResponded => "approval-responded",
            ToolState::OutputAvailable => "output-available",
            ToolState::OutputError => "output-error",
            ToolState::OutputDenied => "output-denied",
        }
    }

    /// The state a part's `state` string names; `None` for any other string.
    pub(crate) fn parse(name: &str) -> Option<ToolState> {
        ToolState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the call is waiting for someone to answer it: its result (`input-available`) or
    /// the user's approval (`approval-requested`).
    pub(crate) fn is_waiting(self) -> bool {
        matches!(self, ToolState::InputAvailable | ToolState::ApprovalRequested)
    }
}

/// The name, as a JSON string: one spelling of each state in the code (`ToolState::as_str`).
impl Serialize for ToolState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for ToolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored part, read in place: the fields the service reads, typed, over the part's JSON (which
/// stays as it is: `Part::json`). Every accessor answers `None` (or the empty string) for a
/// field that is missing or of another JSON type, so a malformed part reads as less, never fails.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Part<'a>(&'a Json);

impl<'a> Part<'a> {
    /// The view of `part` (any JSON: a part that is not an object has no fields).
    pub fn new(part: &'a Json) -> Self {
        Part(part)
    }

    /// The part's JSON, as stored.
    pub(crate) fn json(self) -> &'a Json {
        self.0
    }

    /// A string field of the part, if it is one.
    pub(crate) fn str(self, key: &str) -> Option<&'a str> {
        str_field(self.0, key)
    }

    /// The part's `type` (empty when missing): `text`, `reasoning`, `tool-<name>`,
    /// `dynamic-tool`, `step-start`, `file`, …
    pub(crate) fn kind(self) -> &'a str {
        self.str("type").unwrap_or_default()
    }

    /// Whether it is a `text` part (`reasoning` parts are not).
    pub(crate) fn is_text(self) -> bool {
        self.kind() == "text"
    }

    /// Whether it is a tool part (`tool-<name>` or `dynamic-tool`).
    pub fn is_tool(self) -> bool {
        is_tool_type(self.kind())
    }

    /// The `text` of a `text` or `reasoning` part.
    pub(crate) fn text(self) -> Option<&'a str> {
        self.str("text")
    }

    /// A tool part's tool: `toolName`, else `<name>` of a `tool-<name>` type, else `unknown` (the
    /// reference says `unknown` for every static tool part, losing its name:
    /// docs/REFERENCE.md#d-summary-tool-name).
    pub(crate) fn tool_name(self) -> &'a str {
        if let Some(name) = self.str("toolName") {
            return name;
        }
        match self.kind().strip_prefix("tool-") {
            Some(name) if !name.is_empty() => name,
            _ => "unknown",
        }
    }

    /// A tool part's `toolCallId`.
    pub(crate) fn call_id(self) -> Option<&'a str> {
        self.str("toolCallId")
    }

    /// A tool part's `state`, when it is one of the seven.
    pub fn state(self) -> Option<ToolState> {
        self.str("state").and_then(ToolState::parse)
    }

    /// A tool part's `input` (any JSON).
    pub(crate) fn input(self) -> Option<&'a Json> {
        self.0.get("input")
    }

    /// A tool part's `output` (any JSON; a string for the server's own tools).
    pub(crate) fn output(self) -> Option<&'a Json> {
        self.0.get("output")
    }

    /// A tool part's `errorText` (a string in a valid part; read as given).
    pub(crate) fn error_text(self) -> Option<&'a Json> {
        self.0.get("errorText")
    }

    /// A tool part's `approval` (`{id, approved?, reason?}`).
    pub(crate) fn approval(self) -> Option<&'a Json> {
        self.0.get("approval")
    }

    /// The `approval.id` of a tool part.
    pub(crate) fn approval_id(self) -> Option<&'a str> {
        self.approval().and_then(|a| str_field(a, "id"))
    }
}

/// A string field of a message or part, if it is one.
pub(crate) fn str_field<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str)
}

/// A message's `id` (empty when missing).
pub(crate) fn message_id(m: &Json) -> &str {
    str_field(m, "id").unwrap_or_default()
}

/// A message's parts (none when missing).
pub fn parts(m: &Json) -> &[Json] {
    m.get("parts").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// A part's `type` (empty when missing): [`Part::kind`].
pub(crate) fn part_type(p: &Json) -> &str {
    Part::new(p).kind()
}

/// Whether a part's `type` makes it a tool part (`tool-<name>` or `dynamic-tool`).
pub(crate) fn is_tool_type(t: &str) -> bool {
    t.starts_with("tool-") || t == "dynamic-tool"
}

/// Whether `p` is a tool part: [`Part::is_tool`].
pub(crate) fn is_tool_part(p: &Json) -> bool {
    Part::new(p).is_tool()
}

/// A tool part's tool: [`Part::tool_name`].
pub(crate) fn tool_name(p: &Json) -> &str {
    Part::new(p).tool_name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn states_round_trip_through_their_names() {
        for s in ToolState::ALL {
            assert_eq!(ToolState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
        assert_eq!(ToolState::parse("done"), None);
    }

    #[test]
    fn a_part_reads_what_it_has() {
        let p = json!({"type": "tool-weather", "toolCallId": "c", "state": "output-error", "errorText": "x",
            "approval": {"id": "a1"}});
        let v = Part::new(&p);
        assert_eq!((v.kind(), v.tool_name(), v.call_id()), ("tool-weather", "weather", Some("c")));
        assert_eq!(
            (v.state(), v.error_text(), v.approval_id()),
            (Some(ToolState::OutputError), Some(&json!("x")), Some("a1"))
        );
        assert!(v.is_tool() && !v.is_text() && v.input().is_none());
        let odd = json!({"type": 3, "state": "done", "toolName": 1});
        let v = Part::new(&odd);
        assert_eq!((v.kind(), v.state(), v.tool_name(), v.text()), ("", None, "unknown", None));
    }
}
