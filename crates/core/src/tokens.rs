//! Token estimates, exactly as the reference heuristic (docs/REFERENCE.md#tokens): max(UTF-16 length / 4, words × 1.3),
//! rounded up, with JavaScript's notion of white space.

use serde_json::Value as Json;

/// Characters (UTF-16 code units) per token.
pub(crate) const CHARS_PER_TOKEN: f64 = 4.0;
/// Tokens per word.
pub(crate) const WORDS_TOKEN_MULTIPLIER: f64 = 1.3;
/// Fixed cost of each message.
pub(crate) const TOKENS_PER_MESSAGE: i64 = 4;

/// JavaScript's `\s`: the Unicode `White_Space` characters except U+0085, plus U+FEFF.
pub(crate) fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// The estimate for one string: 0 for the empty string.
pub(crate) fn estimate_str(text: &str) -> i64 {
    if text.is_empty() {
        return 0;
    }
    let chars = text.encode_utf16().count() as f64 / CHARS_PER_TOKEN;
    let words = text.split(is_js_whitespace).filter(|w| !w.is_empty()).count() as f64 * WORDS_TOKEN_MULTIPLIER;
    chars.max(words).ceil() as i64
}

/// The estimate for any JSON value: null 0, a string itself, anything else its JSON text.
pub(crate) fn estimate_value(v: Option<&Json>) -> i64 {
    match v {
        None | Some(Json::Null) => 0,
        Some(Json::String(s)) => estimate_str(s),
        Some(other) => estimate_str(&crate::js::stringify(other)),
    }
}

/// The estimate for one message: 4 plus its parts (text/reasoning: their text; tool parts:
/// input + output (or result); other parts: `text`, else `result`, else 0).
pub fn estimate_message(m: &Json) -> i64 {
    let parts = m.get("parts").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default();
    TOKENS_PER_MESSAGE + parts.iter().map(estimate_part).sum::<i64>()
}

fn estimate_part(p: &Json) -> i64 {
    let ty = p.get("type").and_then(Json::as_str).unwrap_or_default();
    if ty == "text" || ty == "reasoning" {
        let text = p.get("text").filter(|t| !t.is_null()).or_else(|| p.get("reasoning"));
        return estimate_value(text);
    }
    if crate::parts::is_tool_type(ty) {
        let out = p.get("output").filter(|o| !o.is_null()).or_else(|| p.get("result"));
        return estimate_value(p.get("input")) + estimate_value(out);
    }
    if let Some(t) = p.get("text") {
        return estimate_value(Some(t));
    }
    estimate_value(p.get("result"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_count_as_javascript_prints_them() {
        // `JSON.stringify({q: 1.0})` is `{"q":1}`: 7 units, 2 tokens; serde would print `1.0`.
        let parsed: Json = serde_json::from_str(r#"{"q":1.0,"big":1e21}"#).unwrap();
        assert_eq!(estimate_value(Some(&parsed)), estimate_str(r#"{"q":1,"big":1e+21}"#));
    }

    #[test]
    fn golden_values() {
        assert_eq!(estimate_str("hello world"), 3);
        assert_eq!(estimate_str(&"x".repeat(400)), 100);
        assert_eq!(estimate_str(&"word ".repeat(50)), 65);
        assert_eq!(estimate_str("a b c"), 4);
        assert_eq!(estimate_str("a b c d e f g h i j"), 13);
        assert_eq!(estimate_str(""), 0);
    }

    #[test]
    fn javascript_whitespace() {
        // U+0085 is not JS white space (one word); U+FEFF is (two words).
        assert_eq!(estimate_str("a\u{85}b"), 2); // ceil(max(3/4, 1.3))
        assert_eq!(estimate_str("a\u{feff}b"), 3); // ceil(max(3/4, 2.6))
                                                   // UTF-16 length: an astral character counts as two units.
        assert_eq!(estimate_str(&"😀".repeat(4)), 2);
    }

    #[test]
    fn messages() {
        let m = json!({"parts":[{"type":"text","text":"hello world"},{"type":"dynamic-tool","input":{"q":1},"output":"ok"},
                               {"type":"file","url":"data:..."}]});
        // 4 + "hello world" 3 + ({"q":1} ceil(7/4) = 2, "ok" ceil(1.3) = 2) + file part 0
        assert_eq!(estimate_message(&m), 11);
    }
}
