//! Incoming messages: validation of the AI SDK `UIMessage` shape, the size limit, and the text
//! that the full-text index sees.

use serde_json::Value as Json;

use crate::core::error::{Error, Result};

/// Largest stored message JSON, in UTF-8 bytes (the DO row limit is 2 MB; this leaves room).
pub const MAX_MESSAGE_BYTES: usize = 1_800_000;

/// Longest message id, in characters.
pub const MAX_ID_CHARS: usize = 256;

/// A validated message ready to store.
#[derive(Clone, Debug)]
pub struct NewMessage {
    pub id: String,
    pub role: String,
    /// The message JSON as stored (object keys in their original order).
    pub json: String,
    /// What the full-text index sees: the `text` of every `text` part, joined by one space.
    pub text: String,
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
    /// and a `parts` array. Unknown fields are kept. Over [`MAX_MESSAGE_BYTES`] is `too_large`.
    pub fn from_json(value: &Json) -> Result<NewMessage> {
        let obj = value
            .as_object()
            .ok_or_else(|| Error::invalid("message must be a JSON object"))?;
        let id = obj
            .get("id")
            .and_then(Json::as_str)
            .ok_or_else(|| Error::invalid("message.id must be a string"))?;
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
        let json = serde_json::to_string(value).map_err(|e| Error::internal(e.to_string()))?;
        if json.len() > MAX_MESSAGE_BYTES {
            return Err(Error::too_large(format!(
                "message {id} is {} bytes of JSON; the limit is {MAX_MESSAGE_BYTES}",
                json.len()
            )));
        }
        Ok(NewMessage {
            id: id.to_owned(),
            role: role.to_owned(),
            text: indexed_text(parts),
            json,
        })
    }
}

/// The searchable text of a message's parts: `text` parts only (reasoning and tool parts are
/// not indexed), joined by a single space.
pub fn indexed_text(parts: &[Json]) -> String {
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Json::as_str))
        .collect();
    texts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_unknown_fields_in_order() {
        let m = NewMessage::from_json(&json!({"id":"a","role":"user","parts":[],"zeta":1,"alpha":{"b":2,"a":1}})).unwrap();
        assert_eq!(m.json, r#"{"id":"a","role":"user","parts":[],"zeta":1,"alpha":{"b":2,"a":1}}"#);
    }

    #[test]
    fn indexes_text_parts_only() {
        let m = NewMessage::from_json(&json!({"id":"a","role":"assistant","parts":[
            {"type":"text","text":"hello"},{"type":"reasoning","text":"secret"},
            {"type":"dynamic-tool","toolName":"x","input":{"q":"tool"}},{"type":"text","text":"world"}]})).unwrap();
        assert_eq!(m.text, "hello world");
    }

    #[test]
    fn rejects_bad_shapes() {
        for bad in [json!(1), json!({"role":"user","parts":[]}), json!({"id":"","role":"user","parts":[]}),
                    json!({"id":"a\u{1}","role":"user","parts":[]}), json!({"id":"a","parts":[]}),
                    json!({"id":"a","role":"user"}), json!({"id":"a","role":"user","parts":{}}),
                    json!({"id":"x".repeat(257),"role":"user","parts":[]})] {
            assert_eq!(NewMessage::from_json(&bad).unwrap_err().kind, crate::core::error::ErrorKind::InvalidRequest, "{bad}");
        }
        assert!(NewMessage::from_json(&json!({"id":"é".repeat(256),"role":"user","parts":[]})).is_ok());
    }

    #[test]
    fn refuses_over_the_row_limit() {
        let big = "x".repeat(MAX_MESSAGE_BYTES);
        let e = NewMessage::from_json(&json!({"id":"a","role":"user","parts":[{"type":"text","text":big}]})).unwrap_err();
        assert_eq!(e.kind, crate::core::error::ErrorKind::TooLarge);
    }
}
