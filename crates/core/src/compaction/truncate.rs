//! Read-time truncation of older messages and structural truncation of tool outputs (docs/REFERENCE.md#truncation).
//!
//! Nothing here changes what is stored: `GET …/history?truncate=1` (and the agent turn) shrink what they *send* so that
//! old tool outputs and long texts do not eat the context window, while the newest messages stay whole. Lengths are
//! JavaScript lengths (UTF-16 code units) and values are measured as `JSON.stringify` prints them, so the cuts fall
//! where the reference's do (docs/REFERENCE.md#conventions).

use serde_json::{Map, Value as Json};

use crate::js::{self, utf16_len, utf16_prefix};
use crate::parts::is_tool_part;
use crate::sort;

/// Objects and arrays nested this deep are replaced by a marker.
pub(crate) const MAX_DEPTH: usize = 8;

/// The note of the object marker.
const OMITTED_NOTE: &str = "Tool output omitted because it was too large to preserve structurally.";

/// How `truncate_older_messages` shrinks a history (the reference's defaults,
/// docs/REFERENCE.md#truncate-older-messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruncateOptions {
    /// The newest messages left untouched.
    pub keep_recent: usize,
    /// The longest tool output (as JSON) of an older message.
    pub max_tool_output_chars: usize,
    /// The longest `text` part of an older message.
    pub max_text_chars: usize,
}

impl Default for TruncateOptions {
    fn default() -> Self {
        TruncateOptions { keep_recent: 4, max_tool_output_chars: 500, max_text_chars: 10_000 }
    }
}

/// Leaves the last `keep_recent` messages as they are; in every older one, a tool part's
/// `output` goes through [`truncate_tool_output`] and a `text` part longer than `max_text_chars`
/// keeps its first `max_text_chars` units plus `... [truncated N chars]`. Reasoning parts and
/// everything else are kept. Messages that need no change are returned unchanged.
pub fn truncate_older_messages(mut messages: Vec<Json>, opts: &TruncateOptions) -> Vec<Json> {
    let n = messages.len();
    if n <= opts.keep_recent {
        return messages;
    }
    for m in &mut messages[..n - opts.keep_recent] {
        truncate_message(m, opts);
    }
    messages
}

/// One older message as [`truncate_older_messages`] shortens it: its tool outputs and long
/// texts.
pub fn truncate_message(m: &mut Json, opts: &TruncateOptions) {
    let Some(parts) = m.get_mut("parts").and_then(Json::as_array_mut) else { return };
    for part in parts.iter_mut() {
        if is_tool_part(part) {
            if let Some(out) = part.get_mut("output") {
                if let Some(t) = truncate_tool_output(out, opts.max_tool_output_chars) {
                    *out = t;
                }
            }
        } else if part.get("type").and_then(Json::as_str) == Some("text") {
            if let Some(Json::String(text)) = part.get_mut("text") {
                let len = utf16_len(text);
                if len > opts.max_text_chars {
                    *text = format!("{}... [truncated {len} chars]", utf16_prefix(text, opts.max_text_chars));
                }
            }
        }
    }
}

/// Shrinks a tool output to at most `max` units of JSON while keeping its structure where it
/// can: long strings are cut with a suffix that says how long they were, arrays lose their
/// last items, objects their longest string fields, and what still does not fit becomes a
/// marker object. `None` when the output already fits (it is then kept as is).
pub fn truncate_tool_output(value: &Json, max: usize) -> Option<Json> {
    let orig = str_len(value);
    if orig <= max {
        return None;
    }
    Some(truncate_value(value, max, orig, 0))
}

/// `str(v).length`: a string's own length, anything else's `JSON.stringify` length.
fn str_len(v: &Json) -> usize {
    match v {
        Json::String(s) => utf16_len(s),
        _ => utf16_len(&js::stringify(v)),
    }
}

/// `... [truncated N chars]`.
fn suffix(orig: usize) -> String {
    format!("... [truncated {orig} chars]")
}

/// Cuts `s` to exactly `max` units, the last of which are the suffix for `orig`.
fn trunc_str(s: &str, max: usize, orig: usize) -> String {
    if utf16_len(s) <= max {
        return s.to_owned();
    }
    let sfx = suffix(orig);
    let sfx_len = utf16_len(&sfx);
    if max <= sfx_len {
        return utf16_prefix(&sfx, max).to_owned();
    }
    format!("{}{sfx}", utf16_prefix(s, max - sfx_len))
}

/// The budget of each child of a container with `count` children.
fn child_budget(count: usize, max: usize) -> usize {
    if count <= 1 {
        max
    } else {
        (max / count.min(10)).max(80)
    }
}

fn truncate_value(v: &Json, max: usize, orig: usize, depth: usize) -> Json {
    match v {
        Json::String(s) => return Json::String(trunc_str(s, max, utf16_len(s))),
        Json::Array(_) | Json::Object(_) => {}
        Json::Null | Json::Bool(_) | Json::Number(_) => return v.clone(),
    }
    if depth >= MAX_DEPTH {
        return Json::String(format!("[Nested output omitted {}]", suffix(orig)));
    }
    match v {
        Json::Array(items) => truncate_array(items, max, orig, depth),
        Json::Object(map) => truncate_object(map, max, orig, depth),
        _ => v.clone(),
    }
}

/// `JSON.stringify(v).length`: how much room `v` takes inside a container.
fn json_len(v: &Json) -> usize {
    utf16_len(&js::stringify(v))
}

/// The JSON length of a container whose members take `members` units in all, `n` of them
/// (brackets and separating commas).
fn container_len(members: usize, n: usize) -> usize {
    2 + members + n.saturating_sub(1)
}

fn truncate_array(items: &[Json], max: usize, orig: usize, depth: usize) -> Json {
    let budget = child_budget(items.len(), max);
    let mut out: Vec<Json> = items.iter().map(|c| truncate_value(c, budget, str_len(c), depth + 1)).collect();
    // Lengths kept incrementally: re-printing the array after every pop is quadratic.
    let lens: Vec<usize> = out.iter().map(json_len).collect();
    let mut members: usize = lens.iter().sum();
    let mut popped = false;
    while out.len() > 1 && container_len(members, out.len()) > max {
        out.pop();
        members -= lens[out.len()];
        popped = true;
    }
    if popped {
        out.push(Json::String(format!("Array output truncated {}", suffix(orig))));
    }
    let out = Json::Array(out);
    if str_len(&out) > max {
        return array_marker(max, orig);
    }
    out
}

fn truncate_object(map: &Map<String, Json>, max: usize, orig: usize, depth: usize) -> Json {
    let budget = child_budget(map.len(), max);
    let mut out: Map<String, Json> =
        map.iter().map(|(k, c)| (k.clone(), truncate_value(c, budget, str_len(c), depth + 1))).collect();
    // `"key":value` lengths, kept up to date as string fields shrink.
    let entry_len = |k: &str, v: &Json| json_len(&Json::String(k.to_owned())) + 1 + json_len(v);
    let mut members: usize = out.iter().map(|(k, v)| entry_len(k, v)).sum();
    let after_children = container_len(members, out.len());
    if after_children <= max {
        return Json::Object(out);
    }
    // The string fields, longest first (a stable sort: ties keep their order).
    let mut strings: Vec<(String, usize)> =
        out.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), utf16_len(s)))).collect();
    sort::by_key(&mut strings, |s| std::cmp::Reverse(s.1));
    for (key, len) in strings {
        if container_len(members, out.len()) <= max {
            break;
        }
        if let Some(v) = out.get_mut(&key) {
            let before = entry_len(&key, v);
            if let Json::String(s) = v {
                *s = trunc_str(s, max / 4, len);
            }
            members = members - before + entry_len(&key, v);
        }
    }
    if container_len(members, out.len()) > max {
        out.insert("__truncated".into(), Json::Bool(true));
        out.insert("__truncatedChars".into(), Json::from(after_children));
    }
    let out = Json::Object(out);
    if str_len(&out) > max {
        return object_marker(max, orig);
    }
    out
}

/// `{__truncated, __truncatedChars, note}`, without the note when that does not fit.
fn object_marker(max: usize, orig: usize) -> Json {
    let mut m = Map::new();
    m.insert("__truncated".into(), Json::Bool(true));
    m.insert("__truncatedChars".into(), Json::from(orig));
    let mut with_note = m.clone();
    with_note.insert("note".into(), Json::String(OMITTED_NOTE.into()));
    let with_note = Json::Object(with_note);
    if str_len(&with_note) <= max {
        with_note
    } else {
        Json::Object(m)
    }
}

/// `[objectMarker]`, else a one-string array that says the array was omitted, else the suffix cut to `max`.
fn array_marker(max: usize, orig: usize) -> Json {
    let wrapped = Json::Array(vec![object_marker(max, orig)]);
    if str_len(&wrapped) <= max {
        return wrapped;
    }
    let said = Json::Array(vec![Json::String(format!(
        "Array output omitted because it was too large to preserve structurally {}",
        suffix(orig)
    ))]);
    if str_len(&said) <= max {
        return said;
    }
    Json::Array(vec![Json::String(utf16_prefix(&suffix(orig), max).to_owned())])
}
