//! The compaction algorithm as pure functions: head/tail protection, tool-pair alignment, overlay messages in the
//! middle, the summary budget, both prompts byte for byte, skeleton summaries, iterative overlays, and the config.

use serde_json::{json, Value as Json};
use session_agent_core::compaction::plan::{
    accept_summary, align_boundary_backward, align_boundary_forward, build_summary_prompt, call_ids,
    compute_summary_budget, find_tail_cut, has_tool_calls, is_tool_result_for, iterative_from, plan,
};
use session_agent_core::config::{CompactOptions, CompactionConfig};
use session_agent_core::error::ErrorKind;
use session_agent_core::tokens::estimate_message;

/// A text message; `"x" * 40` text makes it 14 tokens (4 + 10).
fn msg(id: &str, role: &str) -> Json {
    json!({"id": id, "role": role, "parts": [{"type": "text", "text": "x".repeat(40)}]})
}

fn text(id: &str, role: &str, text: &str) -> Json {
    json!({"id": id, "role": role, "parts": [{"type": "text", "text": text}]})
}

/// An assistant message calling tool `call`.
fn call(id: &str, call: &str) -> Json {
    json!({"id": id, "role": "assistant", "parts": [
        {"type": "dynamic-tool", "toolName": "search", "toolCallId": call, "state": "input-available", "input": {"q": 1}}
    ]})
}

/// A message carrying the result of `call`.
fn result(id: &str, role: &str, call: &str) -> Json {
    json!({"id": id, "role": role, "parts": [
        {"type": "tool-search", "toolCallId": call, "state": "output-available", "output": "found"}
    ]})
}

/// `n` alternating user/assistant 14-token messages `m0`…
fn linear(n: usize) -> Vec<Json> {
    (0..n).map(|i| msg(&format!("m{i}"), if i % 2 == 0 { "user" } else { "assistant" })).collect()
}

fn opts(protect_head: usize, tail_token_budget: i64, min_tail_messages: usize) -> CompactOptions {
    CompactOptions { protect_head, tail_token_budget, min_tail_messages }
}

fn ids(msgs: &[Json]) -> Vec<&str> {
    msgs.iter().map(|m| m["id"].as_str().unwrap()).collect()
}

// ── Head and tail ────────────────────────────────────────────────────────────────────────────────────

#[test]
fn defaults() {
    assert_eq!(CompactOptions::default(), opts(3, 20000, 2));
    assert_eq!(estimate_message(&msg("a", "user")), 14);
}

#[test]
fn too_short_for_head_plus_tail() {
    // n <= protectHead + minTailMessages: nothing, even with a zero budget.
    assert_eq!(plan(&linear(5), &opts(3, 0, 2)), None);
    assert_eq!(plan(&linear(3), &opts(1, 0, 2)), None);
    assert_eq!(plan(&[], &CompactOptions::default()), None);
    // One more message and there is a middle of one.
    let p = plan(&linear(6), &opts(3, 0, 2)).unwrap();
    assert_eq!(ids(&p.middle), ["m3"]);
    assert_eq!((p.from_message_id.as_str(), p.to_message_id.as_str()), ("m3", "m3"));
}

#[test]
fn everything_fits_in_the_tail() {
    // The default 20000-token budget takes every message after the head: the tail reaches the head.
    assert_eq!(plan(&linear(20), &CompactOptions::default()), None);
}

#[test]
fn tail_budget() {
    let msgs = linear(12);
    // 14 tokens each: a 42-token budget keeps the newest three (more than minTail = 2).
    let p = plan(&msgs, &opts(3, 42, 2)).unwrap();
    assert_eq!(ids(&p.middle), ["m3", "m4", "m5", "m6", "m7", "m8"]);
    // 41 tokens: only two fit.
    assert_eq!(find_tail_cut(&msgs, 3, 41, 2), 10);
    assert_eq!(find_tail_cut(&msgs, 3, 42, 2), 9);
    assert_eq!(find_tail_cut(&msgs, 3, 42, 0), 9);
}

#[test]
fn newest_message_is_always_in_the_tail() {
    let mut msgs = linear(8);
    msgs.push(text("huge", "user", &"y".repeat(40_000))); // 10004 tokens
    assert!(estimate_message(&msgs[8]) > 100);
    // Budget 100, no minimum tail: the huge newest message alone is the tail.
    let p = plan(&msgs, &opts(3, 100, 0)).unwrap();
    assert_eq!(ids(&p.middle), ["m3", "m4", "m5", "m6", "m7"]);
    assert_eq!(find_tail_cut(&msgs, 3, 100, 0), 8);
    assert_eq!(find_tail_cut(&msgs, 3, -5, 0), 8);
}

#[test]
fn min_tail_messages() {
    let msgs = linear(12);
    // Zero budget: the tail is the newest message plus enough to reach minTail.
    assert_eq!(ids(&plan(&msgs, &opts(3, 0, 4)).unwrap().middle), ["m3", "m4", "m5", "m6", "m7"]);
    assert_eq!(ids(&plan(&msgs, &opts(3, 0, 1)).unwrap().middle), ["m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"]);
    // A minimum tail that would reach into the head is ignored (the token cut stands).
    assert_eq!(find_tail_cut(&msgs, 3, 0, 10), 11);
    assert_eq!(find_tail_cut(&msgs, 3, 0, 9), 3);
    assert_eq!(find_tail_cut(&msgs, 3, 0, 20), 11);
}

// ── Tool pairs ───────────────────────────────────────────────────────────────────────────────────────

#[test]
fn helpers() {
    let c = call("a", "c1");
    let r = result("r", "tool", "c1");
    assert!(has_tool_calls(&c) && has_tool_calls(&r));
    assert!(!has_tool_calls(&msg("t", "assistant")));
    assert!(!has_tool_calls(&json!({"id": "x", "role": "user"})));
    assert_eq!(call_ids(&c).into_iter().collect::<Vec<_>>(), ["c1"]);
    assert!(is_tool_result_for(&r, &call_ids(&c)));
    assert!(!is_tool_result_for(&result("r", "tool", "c9"), &call_ids(&c)));
    assert!(!is_tool_result_for(&msg("t", "user"), &call_ids(&c)));
    // A part without toolCallId has no id.
    let no_id = json!({"id": "a", "role": "assistant", "parts": [{"type": "tool-x", "input": {}}]});
    assert!(has_tool_calls(&no_id) && call_ids(&no_id).is_empty());
}

#[test]
fn alignment_on_both_boundaries() {
    // 0 u, 1 a, 2 a(call c1), 3 tool(c1), 4 u, 5 a(call c2), 6 tool(c2), 7 u
    let msgs = vec![
        msg("m0", "user"),
        msg("m1", "assistant"),
        call("m2", "c1"),
        result("m3", "tool", "c1"),
        msg("m4", "user"),
        call("m5", "c2"),
        result("m6", "tool", "c2"),
        msg("m7", "user"),
    ];
    // The head boundary (3) moves forward past c1's result; the tail boundary (6) moves back onto c2's call.
    assert_eq!(align_boundary_forward(&msgs, 3), 4);
    assert_eq!(find_tail_cut(&msgs, 4, 0, 2), 5);
    assert_eq!(align_boundary_backward(&msgs, 6), 5);
    let p = plan(&msgs, &opts(3, 0, 2)).unwrap();
    assert_eq!(ids(&p.middle), ["m4"]);

    // Out of range or at a plain message: unchanged.
    assert_eq!(align_boundary_forward(&msgs, 0), 0);
    assert_eq!(align_boundary_forward(&msgs, 8), 8);
    assert_eq!(align_boundary_forward(&msgs, 5), 5);
    assert_eq!(align_boundary_backward(&msgs, 0), 0);
    assert_eq!(align_boundary_backward(&msgs, 8), 8);
    assert_eq!(align_boundary_backward(&msgs, 4), 4);
}

#[test]
fn forward_alignment_skips_every_result_and_can_swallow_the_middle() {
    let msgs = vec![
        msg("m0", "user"),
        msg("m1", "user"),
        call("m2", "c1"),
        result("m3", "tool", "c1"),
        result("m4", "user", "c1"),
        msg("m5", "user"),
        msg("m6", "assistant"),
    ];
    assert_eq!(align_boundary_forward(&msgs, 3), 5);
    // Head ends at 5, the minimum tail starts at 5: nothing between.
    assert_eq!(plan(&msgs, &opts(3, 0, 2)), None);
    // A user message with tool calls before the boundary does not move it.
    let mut m = msgs.clone();
    m[2]["role"] = json!("user");
    assert_eq!(align_boundary_forward(&m, 3), 3);
}

#[test]
fn backward_alignment_stops_at_an_assistant_message_with_tool_parts() {
    // As in the reference (docs/REFERENCE.md#tool-pair-alignment): the result carried by an *assistant* message counts
    // as a tool call, so the boundary stays (UIMessages keep call and result in one part, so this rarely matters).
    let msgs = vec![
        msg("m0", "user"),
        msg("m1", "assistant"),
        msg("m2", "user"),
        msg("m3", "user"),
        call("m4", "c1"),
        result("m5", "assistant", "c1"),
        msg("m6", "user"),
    ];
    assert_eq!(align_boundary_backward(&msgs, 5), 5);
    // Several results in a row walk back to the call.
    let mut m = msgs.clone();
    m[5] = result("m5", "tool", "c1");
    m.insert(6, result("m5b", "tool", "c1"));
    assert_eq!(align_boundary_backward(&m, 5), 4);
    // m5b's predecessor is not the call, so m5b alone does not move.
    assert_eq!(align_boundary_backward(&m, 6), 6);
}

// ── Overlay messages and the budget ──────────────────────────────────────────────────────────────────

fn overlay_msg(id: &str, lines: &[&str]) -> Json {
    let parts: Vec<Json> = lines.iter().map(|l| json!({"type": "text", "text": l})).collect();
    json!({"id": id, "role": "assistant", "parts": parts})
}

#[test]
fn overlay_messages_leave_the_middle_and_the_first_gives_the_previous_summary() {
    let msgs = vec![
        msg("m0", "user"),
        msg("m1", "assistant"),
        overlay_msg("compaction_x", &["Summary line 1", "line 2"]),
        msg("m3", "user"),
        msg("m4", "assistant"),
        overlay_msg("compaction_y", &["other"]),
        msg("m6", "user"),
        msg("m7", "assistant"),
        msg("m8", "user"),
        msg("m9", "assistant"),
    ];
    let p = plan(&msgs, &opts(1, 0, 2)).unwrap();
    assert_eq!(ids(&p.middle), ["m1", "m3", "m4", "m6", "m7"]);
    assert_eq!((p.from_message_id.as_str(), p.to_message_id.as_str()), ("m1", "m7"));
    assert_eq!(p.previous_summary.as_deref(), Some("Summary line 1\nline 2"));
    assert!(p.prompt.starts_with("You are updating a conversation summary."));
    assert!(p.prompt.contains("PREVIOUS SUMMARY:\nSummary line 1\nline 2\n\nNEW TURNS TO INCORPORATE:\n[assistant]\n"));
    assert_eq!(p.prompt, build_summary_prompt(&p.middle, Some("Summary line 1\nline 2"), p.budget));

    // The overlay message may sit in the protected head: still the previous summary.
    let p = plan(&msgs, &opts(3, 0, 2)).unwrap();
    assert_eq!(ids(&p.middle), ["m3", "m4", "m6", "m7"]);
    assert_eq!(p.previous_summary.as_deref(), Some("Summary line 1\nline 2"));

    // A middle of overlay messages only: nothing to do.
    let only = vec![
        msg("m0", "user"),
        msg("m1", "assistant"),
        msg("m2", "user"),
        overlay_msg("compaction_z", &["s"]),
        msg("m4", "user"),
        msg("m5", "assistant"),
    ];
    assert_eq!(plan(&only, &opts(3, 0, 2)), None);

    // No overlay, or an empty one: the first-compaction prompt.
    let p = plan(&linear(8), &opts(3, 0, 2)).unwrap();
    assert_eq!(p.previous_summary, None);
    assert!(p.prompt.starts_with("Create a concise summary"));
    let mut m = linear(8);
    m[0] = overlay_msg("compaction_e", &[]);
    let p = plan(&m, &opts(3, 0, 2)).unwrap();
    assert_eq!(p.previous_summary, None);
    assert!(p.prompt.starts_with("Create a concise summary"));
}

#[test]
fn summary_budget() {
    // Floor of 100.
    assert_eq!(compute_summary_budget(&[]), 100);
    assert_eq!(compute_summary_budget(&linear(30)), 100); // 420 tokens → 84
                                                          // 20%, rounded down: 4 + 1000 tokens → 200.8 → 200.
    let big = text("b", "user", &"x".repeat(4000));
    assert_eq!(estimate_message(&big), 1004);
    assert_eq!(compute_summary_budget(std::slice::from_ref(&big)), 200);
    assert_eq!(compute_summary_budget(&[big.clone(), big.clone(), big.clone()]), 602); // 3012 * 0.2
                                                                                       // No upper clamp.
    let huge = text("h", "user", &"x".repeat(200_000));
    assert_eq!(compute_summary_budget(&[huge]), 10000); // 50004 * 0.2 = 10000.8

    // Through the plan.
    let mut msgs = linear(6);
    msgs[3] = big;
    let p = plan(&msgs, &opts(3, 0, 2)).unwrap();
    assert_eq!(p.budget, 200);
    assert!(p.prompt.ends_with("Target ~200 tokens. Be factual \u{2014} only include information that was explicitly discussed in the conversation. Do NOT invent file paths, commands, or details that were not mentioned. Write only the summary body."));
}

// ── Prompts ──────────────────────────────────────────────────────────────────────────────────────────

fn prompt_middle() -> Vec<Json> {
    vec![
        json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Find the deploy date."}]}),
        json!({"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Searching."},
            {"type": "dynamic-tool", "toolName": "search", "toolCallId": "c1", "state": "output-available",
             "input": {"q": "deploy"}, "output": "Friday"},
            {"type": "tool-weather", "toolCallId": "c2", "state": "output-available",
             "input": {"city": "Oslo"}, "output": {"temp": 3}},
            {"type": "reasoning", "text": "not rendered"},
            {"type": "text", "text": "It is Friday."}
        ]}),
        json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Thanks"}]}),
    ]
}

#[test]
fn first_compaction_prompt() {
    let expected = r#"Create a concise summary of this conversation that preserves the important information for future context.

CONVERSATION TO SUMMARIZE:
[user]
Find the deploy date.

---

[assistant]
Searching.
It is Friday.
[Tool: search]
Input: {"q":"deploy"}
Output: Friday
[Tool: weather]
Input: {"city":"Oslo"}
Output: {"temp":3}

---

[user]
Thanks

Use this structure:

## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now — what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]

Target ~123 tokens. Be factual — only include information that was explicitly discussed in the conversation. Do NOT invent file paths, commands, or details that were not mentioned. Write only the summary body."#;
    assert_eq!(build_summary_prompt(&prompt_middle(), None, 123), expected);
    // An empty previous summary is falsy: same prompt.
    assert_eq!(build_summary_prompt(&prompt_middle(), Some(""), 123), expected);
    assert!(expected.contains("Where things stand now \u{2014} what"));
}

#[test]
fn iterative_prompt() {
    let expected = r#"You are updating a conversation summary. A previous summary exists below. New conversation turns have occurred since then and need to be incorporated.

PREVIOUS SUMMARY:
## Topic
Deploys.

NEW TURNS TO INCORPORATE:
[user]
Find the deploy date.

---

[assistant]
Searching.
It is Friday.
[Tool: search]
Input: {"q":"deploy"}
Output: Friday
[Tool: weather]
Input: {"city":"Oslo"}
Output: {"temp":3}

---

[user]
Thanks

Update the summary. PRESERVE existing information that is still relevant. ADD new information. Remove information only if it is clearly obsolete.

## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now — what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]

Target ~100 tokens. Be factual — only include information that was explicitly discussed in the conversation. Do NOT invent file paths, commands, or details that were not mentioned. Write only the summary body."#;
    assert_eq!(build_summary_prompt(&prompt_middle(), Some("## Topic\nDeploys."), 100), expected);
}

#[test]
fn tool_lines() {
    let tool = |part: Json| {
        let m = json!({"id": "a", "role": "assistant", "parts": [part]});
        let p = build_summary_prompt(&[m], None, 100);
        let start = p.find("[assistant]\n").unwrap();
        let end = p.find("\n\nUse this structure:").unwrap();
        p[start..end].to_string()
    };
    // No text parts: an empty text line before the tool lines.
    assert_eq!(tool(json!({"type": "tool-x", "output": "ok"})), "[assistant]\n\n[Tool: x]\nOutput: ok");
    // Objects and arrays print as JSON, not "[object Object]" (docs/REFERENCE.md#d-summary-object-output).
    assert_eq!(
        tool(json!({"type": "tool-x", "output": {"a": 1, "b": [1, 2]}})),
        "[assistant]\n\n[Tool: x]\nOutput: {\"a\":1,\"b\":[1,2]}"
    );
    assert_eq!(tool(json!({"type": "tool-x", "output": [1, "two"]})), "[assistant]\n\n[Tool: x]\nOutput: [1,\"two\"]");
    assert_eq!(tool(json!({"type": "tool-x", "output": {}})), "[assistant]\n\n[Tool: x]\nOutput: {}");
    // Numbers and booleans as JavaScript's String().
    assert_eq!(tool(json!({"type": "tool-x", "output": 2.5})), "[assistant]\n\n[Tool: x]\nOutput: 2.5");
    assert_eq!(tool(json!({"type": "tool-x", "output": 3.0})), "[assistant]\n\n[Tool: x]\nOutput: 3");
    assert_eq!(tool(json!({"type": "tool-x", "output": true})), "[assistant]\n\n[Tool: x]\nOutput: true");
    // Falsy input and output are left out; an empty object is truthy.
    for falsy in [json!(null), json!(false), json!(0), json!(""), json!(0.0)] {
        assert_eq!(tool(json!({"type": "tool-x", "input": falsy, "output": falsy})), "[assistant]\n\n[Tool: x]");
    }
    assert_eq!(tool(json!({"type": "tool-x", "input": {}})), "[assistant]\n\n[Tool: x]\nInput: {}");
    // Input is JSON.stringify'd: a string input is quoted.
    assert_eq!(tool(json!({"type": "tool-x", "input": "q\"1"})), "[assistant]\n\n[Tool: x]\nInput: \"q\\\"1\"");
    // Tool names: toolName, else the type's suffix, else unknown.
    assert_eq!(tool(json!({"type": "tool-x", "toolName": "named"})), "[assistant]\n\n[Tool: named]");
    assert_eq!(tool(json!({"type": "dynamic-tool"})), "[assistant]\n\n[Tool: unknown]");
    assert_eq!(tool(json!({"type": "tool-"})), "[assistant]\n\n[Tool: unknown]");
    // Both cut to 500 UTF-16 units.
    let long = "é".repeat(700);
    let line = tool(json!({"type": "tool-x", "input": {"k": long}, "output": long}));
    let want_in = format!("{{\"k\":\"{}", "é".repeat(494));
    assert_eq!(line, format!("[assistant]\n\n[Tool: x]\nInput: {want_in}\nOutput: {}", "é".repeat(500)));
    // A cut through a surrogate pair drops the whole character.
    let line = tool(json!({"type": "tool-x", "output": format!("{}😀", "a".repeat(499))}));
    assert_eq!(line, format!("[assistant]\n\n[Tool: x]\nOutput: {}", "a".repeat(499)));
    // Two tool parts: joined with a newline, after the text.
    let m = json!({"id": "a", "role": "assistant", "parts": [
        {"type": "tool-a", "output": "1"}, {"type": "text", "text": "t"}, {"type": "tool-b"}
    ]});
    assert!(build_summary_prompt(&[m], None, 100).contains("[assistant]\nt\n[Tool: a]\nOutput: 1\n[Tool: b]\n\nUse"));
}

// ── Summaries ────────────────────────────────────────────────────────────────────────────────────────

// invariant 17 (docs/ARCHITECTURE.md)
#[test]
fn skeleton_and_blank_summaries_are_rejected() {
    let template = "## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now — what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]";
    assert!(accept_summary(template).is_err());
    assert!(accept_summary("## Topic\n\n## Key Points\n\n## Current State\n\n## Open Items\n").is_err());
    assert!(accept_summary("  # topic:\n### KEY POINTS\n\t\n## Open Items  ").is_err());
    assert!(accept_summary("").is_err());
    assert!(accept_summary(" \n\t ").is_err());
    assert_ne!(accept_summary("").unwrap_err(), accept_summary(template).unwrap_err());

    // One real line is enough; accepted summaries come back unchanged.
    let real = "## Topic\nDeploy planning.\n\n## Key Points\n[What the conversation is about]\n";
    assert_eq!(accept_summary(real).unwrap(), real);
    assert_eq!(accept_summary("  The user deploys on Friday.\n").unwrap(), "  The user deploys on Friday.\n");
    // Other headings or brackets are content.
    assert!(accept_summary("## Topic\n## Decisions").is_ok());
    assert!(accept_summary("## Topic\n[Deploys]").is_ok());
    assert!(accept_summary("Topic").is_ok());
}

// ── Iterative overlays ───────────────────────────────────────────────────────────────────────────────

fn ov(id: &str, from: &str, to: &str) -> (String, String, String) {
    (id.to_string(), from.to_string(), to.to_string())
}

#[test]
fn iterative_from_on_sibling_branches() {
    // m0 m1 m2, then branch A: a3 a4, branch B: b3 b4.
    // c1 covers m1..a3 (branch A); c2 covers m0..b4 (branch B); c3 covers m2..a4 (A, newer than c1).
    let existing = [ov("c1", "m1", "a3"), ov("c2", "m0", "b4"), ov("c3", "m2", "a4")];

    // A with overlays applied: c1's synthetic message stands in the history.
    let a = ["m0", "compaction_c1", "a4"];
    assert_eq!(iterative_from("a4", &existing, &a), "m1");
    // A raw: c1 (m1 and a3 present) is the oldest visible; c3 too, but c1 wins.
    let a_raw = ["m0", "m1", "m2", "a3", "a4"];
    assert_eq!(iterative_from("m2", &existing, &a_raw), "m1");
    // B: c2 (m0 and b4 present); c1 has m1 but not a3, c3 has m2 but not a4.
    let b = ["m0", "m1", "m2", "b3", "b4"];
    assert_eq!(iterative_from("m1", &existing, &b), "m0");
    let b_applied = ["compaction_c2"];
    assert_eq!(iterative_from("x", &existing, &b_applied), "m0");
    // A third branch with none visible: the plan's own start.
    let c = ["m0", "m1", "m2", "c3x", "c4x"];
    assert_eq!(iterative_from("m1", &existing, &c), "m1");
    assert_eq!(iterative_from("m1", &[], &a_raw), "m1");
}

// ── Config ───────────────────────────────────────────────────────────────────────────────────────────

#[test]
fn compaction_config() {
    assert_eq!(CompactionConfig::from_json(None).unwrap(), CompactionConfig::default());
    assert_eq!(CompactionConfig::from_json(Some(&Json::Null)).unwrap(), CompactionConfig::default());
    let c = CompactionConfig::default();
    assert_eq!((c.after, c.options()), (None, CompactOptions::default()));

    let c = CompactionConfig::from_json(Some(&json!({"after": 1000, "tailTokenBudget": 150, "minTailMessages": 1})))
        .unwrap();
    assert_eq!(c.after, Some(1000));
    assert_eq!(c.options(), opts(3, 150, 1));
    let c = CompactionConfig::from_json(Some(&json!({"protectHead": 0, "after": null}))).unwrap();
    assert_eq!((c.after, c.options()), (None, opts(0, 20000, 2)));

    let err = CompactionConfig::from_json(Some(&json!({"after": 5, "protect_head": 1}))).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidRequest);
    assert!(err.message.starts_with("compaction: unknown field `protect_head`"), "{}", err.message);
    assert!(err.message.contains("protectHead"), "{}", err.message);
    for bad in [
        json!({"after": -1}),
        json!({"tailTokenBudget": -1}),
        json!({"protectHead": -1}),
        json!({"after": 1.5}),
        json!({"minTailMessages": "2"}),
        json!([1]),
        json!(7),
    ] {
        let err = CompactionConfig::from_json(Some(&bad)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidRequest, "{bad}");
        assert!(err.message.starts_with("compaction: "), "{}", err.message);
    }

    // CompactOptions alone: camelCase, each key defaulted.
    let o: CompactOptions = serde_json::from_value(json!({"protectHead": 1})).unwrap();
    assert_eq!(o, opts(1, 20000, 2));
}
