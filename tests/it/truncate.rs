//! Read-time truncation (docs/REFERENCE.md#truncation): tool outputs cut structurally to a budget, long texts of
//! older messages cut with a suffix, the newest messages untouched; and `GET …/history?truncate=1`.

use crate::support::Api;
use serde_json::{json, Value as Json};
use session_agent_core::compaction::truncate::{truncate_older_messages, truncate_tool_output, TruncateOptions};

fn len16(s: &str) -> usize {
    s.encode_utf16().count()
}

// ── truncate_tool_output ─────────────────────────────────────────────────────────────────────────

#[test]
fn a_fitting_output_is_kept() {
    assert_eq!(truncate_tool_output(&json!("x".repeat(500)), 500), None);
    assert_eq!(truncate_tool_output(&json!({"a": [1, 2, 3]}), 500), None);
    assert_eq!(truncate_tool_output(&json!(null), 4), None);
}

#[test]
fn a_long_string_is_cut_to_exactly_max_with_its_original_length() {
    let out = truncate_tool_output(&json!("x".repeat(600)), 500).unwrap();
    let s = out.as_str().unwrap();
    assert_eq!(s, format!("{}... [truncated 600 chars]", "x".repeat(475)));
    assert_eq!(len16(s), 500);
    // A budget smaller than the suffix: the suffix itself, cut.
    assert_eq!(truncate_tool_output(&json!("y".repeat(100)), 10).unwrap(), json!("... [trunc"));
}

#[test]
fn strings_are_measured_and_cut_in_utf16_units() {
    // 300 emoji are 600 units. Budget 501: 476 units of emoji (238) + the 25-unit suffix.
    let out = truncate_tool_output(&json!("😀".repeat(300)), 501).unwrap();
    assert_eq!(out.as_str().unwrap(), format!("{}... [truncated 600 chars]", "😀".repeat(238)));
    assert_eq!(len16(out.as_str().unwrap()), 501);
    // Budget 500 would split a surrogate pair: one unit short instead (237 emoji).
    let out = truncate_tool_output(&json!("😀".repeat(300)), 500).unwrap();
    assert_eq!(out.as_str().unwrap(), format!("{}... [truncated 600 chars]", "😀".repeat(237)));
}

#[test]
fn an_array_loses_its_last_items_and_says_so() {
    // 20 strings of 100: childBudget max(80, 1000/10) = 100 keeps each whole (102 as JSON);
    // 9 fit (928 units), then the note (51 units as JSON) still fits (980).
    let items: Vec<Json> = (0..20).map(|i| json!(format!("{i:0>100}"))).collect();
    let orig = 2 + 20 * 102 + 19;
    let out = truncate_tool_output(&Json::Array(items.clone()), 1000).unwrap();
    let arr = out.as_array().unwrap();
    assert_eq!(arr.len(), 10);
    assert_eq!(&arr[..9], &items[..9]);
    assert_eq!(arr[9], json!(format!("Array output truncated ... [truncated {orig} chars]")));
    assert!(len16(&out.to_string()) <= 1000);
}

#[test]
fn an_array_whose_note_does_not_fit_becomes_the_marker() {
    // childBudget 80: each item becomes 55 chars + suffix (82 as JSON); 6 fit in 499 units, and the 51-unit note then
    // overflows 500: the reference returns the array marker (docs/REFERENCE.md#truncate-tool-output).
    let items: Vec<Json> = (0..20).map(|_| json!("z".repeat(100))).collect();
    let out = truncate_tool_output(&Json::Array(items), 500).unwrap();
    assert_eq!(
        out,
        json!([{"__truncated": true, "__truncatedChars": 2061,
                 "note": "Tool output omitted because it was too large to preserve structurally."}])
    );
}

#[test]
fn array_markers_shrink_with_the_budget() {
    let items: Vec<Json> = (0..50).map(|_| json!("z".repeat(100))).collect();
    // [{__truncated, __truncatedChars}] is 46 units; the note does not fit in 60.
    assert_eq!(
        truncate_tool_output(&Json::Array(items.clone()), 60).unwrap(),
        json!([{"__truncated": true, "__truncatedChars": 5151}])
    );
    // In 20 units only the suffix fits, cut.
    assert_eq!(truncate_tool_output(&Json::Array(items), 20).unwrap(), json!(["... [truncated 5151 "]));
}

#[test]
fn an_object_keeps_its_fields_with_long_strings_cut() {
    // Two fields: budget max(80, 250) = 250 for the long string; the number stays.
    let out = truncate_tool_output(&json!({"a": "y".repeat(2000), "b": 1}), 500).unwrap();
    assert_eq!(out, json!({"a": format!("{}... [truncated 2000 chars]", "y".repeat(224)), "b": 1}));
}

#[test]
fn an_object_over_budget_shrinks_its_longest_strings_first() {
    // Three 400-char strings: each cut to 166 (141 + suffix); 520 > 500, so the first of the
    // (equally) longest is cut again to 500/4 = 125, and then the object fits.
    let s = |c: &str| c.repeat(400);
    let out = truncate_tool_output(&json!({"a": s("a"), "b": s("b"), "c": s("c")}), 500).unwrap();
    let cut166 = |c: &str| format!("{}... [truncated 400 chars]", c.repeat(141));
    assert_eq!(
        out,
        json!({"a": format!("{}... [truncated 166 chars]", "a".repeat(100)), "b": cut166("b"), "c": cut166("c")})
    );
    assert!(len16(&out.to_string()) <= 500);
}

#[test]
fn an_object_that_cannot_fit_is_flagged_then_replaced_by_the_marker() {
    // 30 numeric fields cannot shrink: the marker, with the note when it fits.
    let map: serde_json::Map<String, Json> = (0..30).map(|i| (format!("k{i}"), json!(123456789))).collect();
    let orig = len16(&Json::Object(map.clone()).to_string());
    let out = truncate_tool_output(&Json::Object(map.clone()), 200).unwrap();
    assert_eq!(
        out,
        json!({"__truncated": true, "__truncatedChars": orig,
               "note": "Tool output omitted because it was too large to preserve structurally."})
    );
    let out = truncate_tool_output(&Json::Object(map), 60).unwrap();
    assert_eq!(out, json!({"__truncated": true, "__truncatedChars": orig}));
}

#[test]
fn shrinking_the_longest_string_can_be_enough() {
    // Eleven fields, budget 150: childBudget max(80, 15) = 80 cuts the text to 80 units, and
    // {"text":"<80>","n0":0,...} is 2 + 89 + 60 + 10 = 161. The text then goes to 150/4 = 37
    // units (13 + a 24-unit suffix): 118, which fits without the flags.
    let mut map = serde_json::Map::new();
    map.insert("text".into(), json!("t".repeat(600)));
    for i in 0..10 {
        map.insert(format!("n{i}"), json!(i));
    }
    let out = truncate_tool_output(&Json::Object(map), 150).unwrap();
    assert_eq!(out["text"], json!("t".repeat(13) + "... [truncated 80 chars]"));
    assert_eq!(out["n9"], json!(9));
    assert!(out.get("__truncated").is_none());
    assert_eq!(len16(&out.to_string()), 118);
}

#[test]
fn deep_nesting_is_replaced_below_depth_eight() {
    let mut v = json!("x".repeat(600));
    for _ in 0..10 {
        v = json!({ "a": v });
    }
    let out = truncate_tool_output(&v, 500).unwrap();
    // Eight objects deep, the ninth (holding the tenth and the string: 614 units) is a note.
    let mut inner = &out;
    for _ in 0..8 {
        inner = &inner["a"];
    }
    assert_eq!(inner, &json!("[Nested output omitted ... [truncated 614 chars]]"));
}

#[test]
fn scalars_over_budget_are_returned_as_they_are() {
    assert_eq!(truncate_tool_output(&json!(123456789), 3).unwrap(), json!(123456789));
}

#[test]
fn a_huge_array_is_cut_in_linear_time() {
    // 200,000 items (about 1.6 MB of JSON): popping with incremental lengths, not re-printing.
    let items: Vec<Json> = (0..200_000).map(|i| json!(i)).collect();
    let out = truncate_tool_output(&Json::Array(items), 500).unwrap();
    // Popping stops as soon as the items fit, so the note then overflows: the marker.
    assert!(len16(&out.to_string()) <= 500, "{out}");
    assert_eq!(out[0]["__truncated"], json!(true));
}

// ── truncate_older_messages ──────────────────────────────────────────────────────────────────────

fn text_msg(id: &str, text: &str) -> Json {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

fn tool_msg(id: &str, output: Json) -> Json {
    json!({"id": id, "role": "assistant", "parts": [
        {"type": "reasoning", "text": "r".repeat(20_000)},
        {"type": "dynamic-tool", "toolName": "fetch", "toolCallId": "c1", "state": "output-available",
         "input": {"url": "u".repeat(2000)}, "output": output},
        {"type": "tool-search", "toolCallId": "c2", "state": "output-available", "output": "short"}]})
}

#[test]
fn short_histories_are_untouched() {
    let msgs: Vec<Json> = (0..4).map(|i| text_msg(&format!("m{i}"), &"x".repeat(20_000))).collect();
    assert_eq!(truncate_older_messages(msgs.clone(), &TruncateOptions::default()), msgs);
}

#[test]
fn older_messages_are_cut_and_the_newest_kept() {
    let long = "x".repeat(10_001);
    let mut msgs = vec![text_msg("old-text", &long), tool_msg("old-tool", json!("o".repeat(1000)))];
    for i in 0..4 {
        msgs.push(tool_msg(&format!("new{i}"), json!("o".repeat(1000))));
    }
    let out = truncate_older_messages(msgs.clone(), &TruncateOptions::default());
    assert_eq!(out[0]["parts"][0]["text"], json!(format!("{}... [truncated 10001 chars]", "x".repeat(10_000))));
    let parts = &out[1]["parts"];
    assert_eq!(parts[0], msgs[1]["parts"][0], "reasoning is not touched");
    assert_eq!(parts[1]["output"], json!(format!("{}... [truncated 1000 chars]", "o".repeat(474))));
    assert_eq!(parts[1]["input"], msgs[1]["parts"][1]["input"], "inputs are not touched");
    assert_eq!(parts[2]["output"], json!("short"));
    assert_eq!(&out[2..], &msgs[2..], "the newest 4 are whole");
}

#[test]
fn a_text_of_exactly_the_limit_is_kept_and_options_apply() {
    let msgs = vec![text_msg("a", &"x".repeat(100)), text_msg("b", &"y".repeat(101)), text_msg("c", "z")];
    let opts = TruncateOptions { keep_recent: 1, max_tool_output_chars: 10, max_text_chars: 100 };
    let out = truncate_older_messages(msgs.clone(), &opts);
    assert_eq!(out[0], msgs[0]);
    assert_eq!(out[1]["parts"][0]["text"], json!(format!("{}... [truncated 101 chars]", "y".repeat(100))));
    assert_eq!(out[2], msgs[2]);
}

// ── GET /sessions/{sid}/history?truncate= ────────────────────────────────────────────────────────

// invariant 20 (docs/ARCHITECTURE.md)
#[test]
fn history_truncates_on_request_only() {
    let api = Api::new();
    let mut msgs = vec![text_msg("m0", &"x".repeat(12_000)), tool_msg("m1", json!({"rows": vec!["row"; 1000]}))];
    msgs.extend((2..6).map(|i| text_msg(&format!("m{i}"), "recent")));
    assert_eq!(api.post("/sessions/s/messages/batch", json!({"messages": msgs})).status, 201);

    let whole = api.get("/sessions/s/history").body_json();
    assert_eq!(whole["messages"].as_array().unwrap(), &msgs, "stored whole");

    let r = api.get("/sessions/s/history?truncate=1");
    assert_eq!(r.status, 200);
    let cut = r.body_json();
    let cut = cut["messages"].as_array().unwrap();
    assert_eq!(cut.len(), 6);
    assert!(cut[0]["parts"][0]["text"].as_str().unwrap().ends_with("... [truncated 12000 chars]"));
    // 1,000 rows do not fit in 500 units: the array becomes the marker, with the rows' length.
    assert_eq!(cut[1]["parts"][1]["output"]["rows"][0]["__truncatedChars"], json!(6001));
    assert_eq!(&cut[2..], &msgs[2..]);

    // Options: keep everything recent, or cut texts harder.
    let kept = api.get("/sessions/s/history?truncate=1&keepRecent=6").body_json();
    assert_eq!(kept["messages"].as_array().unwrap(), &msgs);
    let hard = api.get("/sessions/s/history?truncate=1&maxTextChars=10&keepRecent=0").body_json();
    assert_eq!(hard["messages"][5]["parts"][0]["text"], json!("recent"));
    assert_eq!(hard["messages"][0]["parts"][0]["text"], json!("xxxxxxxxxx... [truncated 12000 chars]"));

    // Still the stored messages afterwards.
    let again = api.get("/sessions/s/history").body_json();
    assert_eq!(again["messages"].as_array().unwrap(), &msgs);
}

#[test]
fn history_truncation_options_are_validated() {
    let api = Api::new();
    for bad in
        ["truncate=yes", "truncate=1&keepRecent=-1", "truncate=1&maxTextChars=abc", "truncate=1&maxToolOutputChars=0"]
    {
        let r = api.get(&format!("/sessions/s/history?{bad}"));
        let body = r.body_json();
        assert_eq!(r.status, 400, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
    }
    // Options without truncate=1 are checked, and do nothing.
    assert_eq!(api.get("/sessions/s/history?keepRecent=-2").status, 400);
    api.append("s", "m1", None, &"x".repeat(20));
    let plain = api.get("/sessions/s/history?keepRecent=0&maxTextChars=5&truncate=0").body_json();
    assert_eq!(plain["messages"][0]["parts"][0]["text"].as_str().map(str::len), Some(20));
}
