//! What an AI SDK `UIMessage` looks like to the code that reads one: its fields and parts, the
//! kinds of part, a tool part's name. Plain accessors over `serde_json::Value`, shared by the
//! store (validation, indexing), token estimates, compaction and the agent turn.

use serde_json::Value as Json;

/// The states of an AI SDK tool part.
pub const TOOL_STATES: [&str; 7] = [
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
];

/// A string field of a message or part, if it is one.
pub fn str_field<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str)
}

/// A message's `id` (empty when missing).
pub fn message_id(m: &Json) -> &str {
    str_field(m, "id").unwrap_or_default()
}

/// A message's parts (none when missing).
pub fn parts(m: &Json) -> &[Json] {
    m.get("parts").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// A part's `type` (empty when missing).
pub fn part_type(p: &Json) -> &str {
    str_field(p, "type").unwrap_or_default()
}

/// Whether a part's `type` makes it a tool part (`tool-<name>` or `dynamic-tool`).
pub fn is_tool_type(t: &str) -> bool {
    t.starts_with("tool-") || t == "dynamic-tool"
}

/// Whether `p` is a tool part.
pub fn is_tool_part(p: &Json) -> bool {
    is_tool_type(part_type(p))
}

/// A tool part's tool: `toolName`, else `<name>` of a `tool-<name>` type, else `unknown` (the
/// reference says `unknown` for every static tool part, losing its name: docs/REFERENCE.md#d-summary-tool-name).
pub fn tool_name(p: &Json) -> &str {
    if let Some(name) = str_field(p, "toolName") {
        return name;
    }
    match part_type(p).strip_prefix("tool-") {
        Some(name) if !name.is_empty() => name,
        _ => "unknown",
    }
}
