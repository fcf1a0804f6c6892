//! Incoming messages: validation of the AI SDK `UIMessage` shape, the size limit, and the text
//! that the full-text index sees.

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::parts::{Part, ToolState};
use serde_json::value::RawValue;

/// Largest stored message JSON, in UTF-8 bytes (the DO row limit is 2 MB; this leaves room).
/// A bigger message has its largest fields spilled to R2 ([`crate::store::spill`]).
pub const MAX_MESSAGE_BYTES: usize = 1_800_000;

/// The most text of one message the full-text index keeps (UTF-8 bytes): an index row has the
/// same 2 MB limit as a message row.
pub const MAX_INDEXED_BYTES: usize = 1_000_000;

/// Longest message id, in characters.
pub const MAX_ID_CHARS: usize = 256;

/// A stored message as JSON text, handed out without re-parsing.
pub type RawMessage = Box<RawValue>;

/// A stored message's JSON as a [`RawMessage`].
pub(crate) fn raw(json: String) -> Result<RawMessage> {
    RawValue::from_string(json).map_err(|e| Error::internal(format!("stored message is not JSON: {e}")))
}

/// Parses stored messages for code that works on their structure (truncation, compaction,
/// the conversation sent to a model).
pub fn parse_all(messages: &[RawMessage]) -> Result<Vec<Json>> {
    messages
        .iter()
        .map(|m| serde_json::from_str(m.get()).map_err(|e| Error::internal(format!("stored message: {e}"))))
        .collect()
}

/// One spilled field: `parts[part].field` (or the message's own `field` when `part` is -1).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpillRef {
    pub(crate) part: i64,
    pub(crate) field: String,
    pub(crate) key: String,
    /// UTF-8 bytes of the field's JSON.
    pub(crate) bytes: usize,
}

/// A validated message ready to store.
#[derive(Clone, Debug)]
pub struct NewMessage {
    pub id: String,
    pub role: String,
    /// The message JSON as stored (object keys in their original order).
    pub(crate) json: String,
    /// What the full-text index sees: the `text` of every `text` part, joined by one space
    /// (its first [`MAX_INDEXED_BYTES`]).
    pub(crate) text: String,
    /// Fields moved to the object store; `json` then holds placeholders for them.
    pub(crate) spills: Vec<SpillRef>,
    /// The message as the client sent it, when `json` is not that (fields spilled).
    pub full: Option<String>,
}

/// Checks a message id: 1–256 characters, no control characters.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    let n = id.chars().count();
    if n == 0 || n > MAX_ID_CHARS {
        return Err(Error::invalid(format!("{what} must be 1-{MAX_ID_CHARS} characters")));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid(format!("{what} must not contain control characters")));
    }
    Ok(())
}

impl NewMessage {
    /// Validates `value` as a message: an object with a string `id`, a non-empty string `role`
    /// and a `parts` array. Unknown fields are kept. Any size: one over [`MAX_MESSAGE_BYTES`]
    /// must go through [`crate::store::spill::prepare`] before it is stored.
    pub fn from_json(value: &Json) -> Result<NewMessage> {
        let obj = value.as_object().ok_or_else(|| Error::invalid("message must be a JSON object"))?;
        let id = obj.get("id").and_then(Json::as_str).ok_or_else(|| Error::invalid("message.id must be a string"))?;
        check_id("message.id", id)?;
        let role = obj
            .get("role")
            .and_then(Json::as_str)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| Error::invalid("message.role must be a non-empty string"))?;
        let parts = obj
            .get("parts")
            .and_then(Json::as_array)
            .ok_or_else(|| Error::invalid("message.parts must be an array"))?;
        for (i, p) in parts.iter().enumerate() {
            check_part(p).map_err(|why| Error::invalid(format!("message.parts[{i}]: {why}")))?;
        }
        let json = serde_json::to_string(value).map_err(|e| Error::internal(e.to_string()))?;
        Ok(NewMessage {
            id: id.to_owned(),
            role: role.to_owned(),
            text: indexed_text(parts),
            json,
            spills: Vec::new(),
            full: None,
        })
    }

    /// The message as the client sent it (what answers echo).
    pub(crate) fn client_json(&self) -> &str {
        self.full.as_deref().unwrap_or(&self.json)
    }

    /// `too_large` unless the stored form fits a row.
    pub(crate) fn check_fits(&self) -> Result<()> {
        if self.json.len() > MAX_MESSAGE_BYTES {
            return Err(Error::too_large(format!(
                "message {} is {} bytes of JSON; the limit is {MAX_MESSAGE_BYTES}",
                self.id,
                self.json.len()
            )));
        }
        Ok(())
    }

    /// The message as the client sent it, parsed (for code that builds on a message it just
    /// validated).
    pub(crate) fn to_value(&self) -> Result<Json> {
        serde_json::from_str(self.client_json()).map_err(|e| Error::internal(e.to_string()))
    }
}

/// Checks the kinds of part the service reads, so that whatever is stored reads back as a valid
/// AI SDK part: every part is an object with a non-empty string `type`; `text` and `reasoning`
/// parts have a string `text`; tool parts have a string `toolCallId`, a `state` of
/// [`ToolState::ALL`], a string `toolName` on `dynamic-tool` (and a string one wherever given),
/// and a string `errorText` when `state` is `output-error` (and wherever given). Other part
/// types and extra fields pass through as they are.
fn check_part(part: &Json) -> std::result::Result<(), String> {
    let obj = part.as_object().ok_or("a part must be a JSON object")?;
    let view = Part::new(part);
    let ty = Some(view.kind()).filter(|t| !t.is_empty()).ok_or("type must be a non-empty string")?;
    let string = |key: &str, required: bool| match obj.get(key) {
        Some(Json::String(_)) => Ok(()),
        None if !required => Ok(()),
        _ => Err(format!("{key} of a {ty:?} part must be a string")),
    };
    if ty == "text" || ty == "reasoning" {
        return string("text", true);
    }
    if !view.is_tool() {
        return Ok(());
    }
    string("toolCallId", true)?;
    string("toolName", ty == "dynamic-tool")?;
    let Some(state) = view.state() else {
        let all: Vec<&str> = ToolState::ALL.iter().map(|s| s.as_str()).collect();
        return Err(format!("state of a {ty:?} part must be one of {}", all.join(", ")));
    };
    string("errorText", state == ToolState::OutputError)
}

/// The searchable text of a message's parts: `text` parts only (reasoning and tool parts are
/// not indexed), joined by a single space, cut to [`MAX_INDEXED_BYTES`] on a character boundary.
pub(crate) fn indexed_text(parts: &[Json]) -> String {
    let texts: Vec<&str> = parts.iter().map(Part::new).filter(|p| p.is_text()).filter_map(Part::text).collect();
    let mut text = texts.join(" ");
    if text.len() > MAX_INDEXED_BYTES {
        let mut end = MAX_INDEXED_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_unknown_fields_in_order() {
        let m =
            NewMessage::from_json(&json!({"id":"a","role":"user","parts":[],"zeta":1,"alpha":{"b":2,"a":1}})).unwrap();
        assert_eq!(m.json, r#"{"id":"a","role":"user","parts":[],"zeta":1,"alpha":{"b":2,"a":1}}"#);
    }

    #[test]
    fn indexes_text_parts_only() {
        let m = NewMessage::from_json(&json!({"id":"a","role":"assistant","parts":[
            {"type":"text","text":"hello"},{"type":"reasoning","text":"secret"},
            {"type":"dynamic-tool","toolName":"x","toolCallId":"c","state":"input-available","input":{"q":"tool"}},{"type":"text","text":"world"}]})).unwrap();
        assert_eq!(m.text, "hello world");
    }

    #[test]
    fn rejects_bad_shapes() {
        for bad in [
            json!(1),
            json!({"role":"user","parts":[]}),
            json!({"id":"","role":"user","parts":[]}),
            json!({"id":"a\u{1}","role":"user","parts":[]}),
            json!({"id":"a","parts":[]}),
            json!({"id":"a","role":"user"}),
            json!({"id":"a","role":"user","parts":{}}),
            json!({"id":"x".repeat(257),"role":"user","parts":[]}),
        ] {
            assert_eq!(NewMessage::from_json(&bad).unwrap_err().kind, crate::error::ErrorKind::InvalidRequest, "{bad}");
        }
        assert!(NewMessage::from_json(&json!({"id":"é".repeat(256),"role":"user","parts":[]})).is_ok());
    }

    #[test]
    fn known_parts_are_checked_and_others_pass() {
        let with = |part: Json| NewMessage::from_json(&json!({"id":"a","role":"assistant","parts":[part]}));
        for bad in [
            json!(1),
            json!("text"),
            json!({}),
            json!({"type": ""}),
            json!({"type": 5}),
            json!({"text": "no type"}),
            json!({"type": "text"}),
            json!({"type": "text", "text": 1}),
            json!({"type": "reasoning", "text": null}),
            json!({"type": "tool-x", "state": "output-available"}),
            json!({"type": "tool-x", "toolCallId": 1, "state": "output-available"}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "done"}),
            json!({"type": "tool-x", "toolCallId": "c"}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-error"}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-error", "errorText": {"m": 1}}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-available", "errorText": 2}),
            json!({"type": "dynamic-tool", "toolCallId": "c", "state": "input-available"}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "input-available", "toolName": 3}),
        ] {
            let e = with(bad.clone()).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::InvalidRequest, "{bad}");
            assert!(e.message.starts_with("message.parts[0]: "), "{}", e.message);
        }
        let states = "input-streaming, input-available, approval-requested, approval-responded, output-available, \
                      output-error, output-denied";
        let e = with(json!({"type": "tool-x", "toolCallId": "c", "state": "done"})).unwrap_err();
        assert_eq!(e.message, format!("message.parts[0]: state of a \"tool-x\" part must be one of {states}"));
        for ok in [
            json!({"type": "text", "text": "", "state": "done", "providerMetadata": {"x": 1}}),
            json!({"type": "step-start"}),
            json!({"type": "file", "mediaType": "image/png", "url": "data:,"}),
            json!({"type": "data-weather", "data": {"any": ["thing"]}}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "input-streaming"}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-available", "input": {}, "output": [1]}),
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-error", "errorText": "boom"}),
            json!({"type": "dynamic-tool", "toolName": "x", "toolCallId": "c", "state": "output-denied", "extra": true}),
        ] {
            assert!(with(ok.clone()).is_ok(), "{ok}");
        }
    }

    #[test]
    fn over_the_row_limit_until_spilled() {
        let big = "x".repeat(MAX_MESSAGE_BYTES);
        let m = NewMessage::from_json(&json!({"id":"a","role":"user","parts":[{"type":"text","text":big}]})).unwrap();
        assert_eq!(m.check_fits().unwrap_err().kind, crate::error::ErrorKind::TooLarge);
        assert_eq!(m.text.len(), MAX_INDEXED_BYTES);
        let cut = indexed_text(&[json!({"type":"text","text":"é".repeat(MAX_INDEXED_BYTES)})]);
        assert_eq!(cut.len(), MAX_INDEXED_BYTES);
    }
}
