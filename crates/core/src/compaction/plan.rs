//! The compaction algorithm of the reference (docs/REFERENCE.md#compaction-plan, docs/REFERENCE.md#summary-prompts):
//! where to cut, what to summarize, and the summary prompts.
//!
//! Everything here is a pure function over AI SDK `UIMessage` JSON (`{id, role, parts: [...]}`); nothing calls an LLM
//! or touches storage. The caller (the compaction route / auto-compaction) does:
//!
//! 1. [`plan`] on the path's history (overlays applied, so `compaction_…` messages may be in it). `None` means "nothing
//!    to compact" (the reference's `null` before `summarize` is called, docs/REFERENCE.md#compaction-plan).
//! 2. Send [`Plan::prompt`] to the LLM.
//! 3. [`accept_summary`] on the answer: a blank or skeleton answer means "no compaction" (the reference rejects only
//!    blank ones, docs/REFERENCE.md#d-skeleton).
//! 4. [`iterative_from`] to widen the range to the oldest overlay visible on the branch
//!    (docs/REFERENCE.md#iterative-overlays), then store `(summary, from, plan.to_message_id)`.
//!
//! Deliberate differences from the reference (docs/REFERENCE.md#differences), all documented at the item:
//! - tool parts of the static `tool-<name>` shape get `<name>` as their tool name instead of `unknown`;
//! - an object or array tool output renders as its JSON, not `[object Object]`
//!   (docs/REFERENCE.md#d-summary-object-output);
//! - skeleton summaries are rejected, not only blank ones.
//!
//! The tail counter is always the heuristic of [`crate::tokens`], one message at a time.

use std::collections::HashSet;

use serde_json::Value as Json;

use crate::config::CompactOptions;
use crate::js;
use crate::parts::{is_tool_part, message_id, part_type, parts, tool_name};
use crate::store::overlay;
use crate::tokens::estimate_message;

// ── Message helpers ──────────────────────────────────────────────────────────────────────────────────

fn is_assistant(m: &Json) -> bool {
    m.get("role").and_then(Json::as_str) == Some("assistant")
}

/// A synthetic overlay message (id prefix `compaction_`).
pub(crate) fn is_compaction_message(m: &Json) -> bool {
    overlay::is_synthetic_id(message_id(m))
}

/// Any tool part (call, result, or both, as UIMessages keep them in one part).
pub fn has_tool_calls(m: &Json) -> bool {
    parts(m).iter().any(is_tool_part)
}

/// The `toolCallId`s of the message's tool parts (parts without one, or with a non-string one, are skipped).
pub fn call_ids(m: &Json) -> HashSet<&str> {
    parts(m).iter().filter(|p| is_tool_part(p)).filter_map(|p| p.get("toolCallId").and_then(Json::as_str)).collect()
}

/// Any tool part whose `toolCallId` is in `ids`.
pub fn is_tool_result_for(m: &Json, ids: &HashSet<&str>) -> bool {
    parts(m)
        .iter()
        .filter(|p| is_tool_part(p))
        .any(|p| p.get("toolCallId").and_then(Json::as_str).is_some_and(|id| ids.contains(id)))
}

/// Moves a head boundary past the results of the calls made just before it, so a call and its result are not split.
pub fn align_boundary_forward(msgs: &[Json], mut idx: usize) -> usize {
    let n = msgs.len();
    if idx == 0 || idx >= n {
        return idx;
    }
    let prev = &msgs[idx - 1];
    if is_assistant(prev) && has_tool_calls(prev) {
        let ids = call_ids(prev);
        while idx < n && is_tool_result_for(&msgs[idx], &ids) {
            idx += 1;
        }
    }
    idx
}

/// Moves a tail boundary back onto the call whose results it would otherwise split off. Stops at once when the message
/// at the boundary is itself an assistant message with tool parts (as the reference does,
/// docs/REFERENCE.md#tool-pair-alignment; so a result carried by an *assistant* message never moves the boundary).
pub fn align_boundary_backward(msgs: &[Json], mut idx: usize) -> usize {
    let n = msgs.len();
    if idx == 0 || idx >= n {
        return idx;
    }
    while idx > 0 {
        let msg = &msgs[idx];
        if is_assistant(msg) && has_tool_calls(msg) {
            break;
        }
        let prev = &msgs[idx - 1];
        if is_assistant(prev) && has_tool_calls(prev) && is_tool_result_for(msg, &call_ids(prev)) {
            idx -= 1;
            continue;
        }
        break;
    }
    idx
}

/// Where the protected tail starts: walk back from the newest message, adding each message's estimate, until the
/// budget would be exceeded (the newest message always counts, even over budget); then keep at least `min_tail`
/// messages unless that would reach into the head; then [`align_boundary_backward`].
pub fn find_tail_cut(msgs: &[Json], head_end: usize, budget: i64, min_tail: usize) -> usize {
    let n = msgs.len();
    let mut acc: i64 = 0;
    let mut cut = n;
    for i in (head_end..n).rev() {
        let t = estimate_message(&msgs[i]);
        if acc + t > budget && cut < n {
            break;
        }
        acc += t;
        cut = i;
    }
    let cut = match n.checked_sub(min_tail) {
        Some(min_cut) if min_cut >= head_end => cut.min(min_cut),
        _ => cut,
    };
    align_boundary_backward(msgs, cut)
}

/// The heuristic estimate of several messages (the reference's `estimateMessageTokens(msgs)`,
/// docs/REFERENCE.md#tokens).
fn estimate_messages(msgs: &[Json]) -> i64 {
    msgs.iter().map(estimate_message).sum()
}

/// Target size of the summary: 20% of what it replaces, at least 100 (no upper clamp, whatever the JSDoc says).
pub fn compute_summary_budget(middle: &[Json]) -> i64 {
    ((estimate_messages(middle) as f64 * 0.2).floor() as i64).max(100)
}

// ── Plan ─────────────────────────────────────────────────────────────────────────────────────────────

/// What to summarize: the range `from..=to` of the path, the messages in it, and the prompt for the LLM.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Id of the first summarized message (before [`iterative_from`] widens it).
    pub from_message_id: String,
    /// Id of the last summarized message.
    pub to_message_id: String,
    /// The messages between the head and the tail, without `compaction_…` overlay messages.
    pub middle: Vec<Json>,
    /// Text of the first overlay message of the path, if any and not empty (an empty one is falsy in the
    /// reference and gives the first-compaction prompt, docs/REFERENCE.md#compaction-plan).
    pub previous_summary: Option<String>,
    /// [`compute_summary_budget`] of `middle`.
    pub budget: i64,
    /// [`build_summary_prompt`]`(middle, previous_summary, budget)`.
    pub prompt: String,
}

/// Steps 1–8 of the reference's `createCompactFunction` (docs/REFERENCE.md#compaction-plan). `None` when there is
/// nothing to summarize: the path is no longer than head + minimum tail, the tail reaches the head, or the middle holds
/// only overlay messages.
pub fn plan(messages: &[Json], opts: &CompactOptions) -> Option<Plan> {
    let n = messages.len();
    if n <= opts.protect_head.saturating_add(opts.min_tail_messages) {
        return None;
    }
    let start = align_boundary_forward(messages, opts.protect_head);
    let end = find_tail_cut(messages, start, opts.tail_token_budget, opts.min_tail_messages);
    if end <= start {
        return None;
    }
    let middle: Vec<Json> = messages[start..end].iter().filter(|m| !is_compaction_message(m)).cloned().collect();
    let (first, last) = (middle.first()?, middle.last()?);
    let previous_summary = messages.iter().find(|m| is_compaction_message(m)).map(text_of).filter(|s| !s.is_empty());
    let budget = compute_summary_budget(&middle);
    let prompt = build_summary_prompt(&middle, previous_summary.as_deref(), budget);
    Some(Plan {
        from_message_id: message_id(first).to_string(),
        to_message_id: message_id(last).to_string(),
        previous_summary,
        budget,
        prompt,
        middle,
    })
}

// ── Prompt ───────────────────────────────────────────────────────────────────────────────────────────

/// The text parts of a message joined with `\n` (a missing or null `text` is empty, as in `Array.join`).
fn text_of(m: &Json) -> String {
    parts(m)
        .iter()
        .filter(|p| part_type(p) == "text")
        .map(|p| match p.get("text") {
            None | Some(Json::Null) => String::new(),
            Some(t) => js::string(t),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_line(p: &Json) -> String {
    let mut s = format!("[Tool: {}]", tool_name(p));
    let input = p.get("input");
    if let Some(input) = input.filter(|v| truthy(v)) {
        s.push_str("\nInput: ");
        s.push_str(js::utf16_prefix(&js::stringify(input), 500));
    }
    if let Some(output) = p.get("output").filter(|v| truthy(v)) {
        s.push_str("\nOutput: ");
        s.push_str(js::utf16_prefix(&js::string(output), 500));
    }
    s
}

/// A message as the summary prompt shows it: `[role]`, its text, then one `[Tool: name]` block
/// per tool part with input and output cut to 500 units.
pub(crate) fn render_message(m: &Json) -> String {
    let role = match m.get("role") {
        None => "undefined".to_string(),
        Some(r) => js::string(r),
    };
    let tools = parts(m).iter().filter(|p| is_tool_part(p)).map(tool_line).collect::<Vec<_>>().join("\n");
    let mut s = format!("[{role}]\n{}", text_of(m));
    if !tools.is_empty() {
        s.push('\n');
        s.push_str(&tools);
    }
    s
}

const SECTIONS: &str = "## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now \u{2014} what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]";

/// The reference's prompt (docs/REFERENCE.md#summary-prompts), byte for byte. `previous` empty counts as absent (it is
/// falsy in JavaScript).
///
/// Each message renders as `[role]\n` + its text parts joined `\n` + (`\n` + its tool lines joined `\n`, if any);
/// messages are joined `\n\n---\n\n`. A tool line is `[Tool: name]`, then `\nInput: ` + `JSON.stringify(input)` cut to
/// 500 UTF-16 units if `input` is truthy, then `\nOutput: ` + `String(output)` cut to 500 if `output` is truthy —
/// except that an object or array output is its JSON (the reference prints `[object Object]`,
/// docs/REFERENCE.md#d-summary-object-output). Numbers print as JavaScript prints them, and objects keep JavaScript's
/// key order (array-index keys first). A cut that would split a surrogate pair drops the whole character.
pub fn build_summary_prompt(middle: &[Json], previous: Option<&str>, budget: i64) -> String {
    let content = middle.iter().map(render_message).collect::<Vec<_>>().join("\n\n---\n\n");
    let tail = format!(
        "{SECTIONS}\n\nTarget ~{budget} tokens. Be factual \u{2014} only include information that was explicitly \
         discussed in the conversation. Do NOT invent file paths, commands, or details that were not mentioned. \
         Write only the summary body."
    );
    match previous.filter(|p| !p.is_empty()) {
        Some(previous) => format!(
            "You are updating a conversation summary. A previous summary exists below. New conversation turns have \
             occurred since then and need to be incorporated.\n\nPREVIOUS SUMMARY:\n{previous}\n\nNEW TURNS TO \
             INCORPORATE:\n{content}\n\nUpdate the summary. PRESERVE existing information that is still relevant. \
             ADD new information. Remove information only if it is clearly obsolete.\n\n{tail}"
        ),
        None => format!(
            "Create a concise summary of this conversation that preserves the important information for future \
             context.\n\nCONVERSATION TO SUMMARIZE:\n{content}\n\nUse this structure:\n\n{tail}"
        ),
    }
}

// ── Summary check ────────────────────────────────────────────────────────────────────────────────────

const HEADINGS: [&str; 4] = ["topic", "key points", "current state", "open items"];
const PLACEHOLDERS: [&str; 4] = [
    "[What the conversation is about]",
    "[Important information, decisions, and conclusions from the conversation]",
    "[Where things stand now \u{2014} what has been done, what is in progress]",
    "[Unresolved questions, pending tasks, or next steps discussed]",
];

/// A line that is one of the four section headings: one or more `#`, then the name (any case, an optional
/// trailing `:`).
fn is_heading(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('#') else { return false };
    let name = rest.trim_start_matches('#').trim();
    let name = name.strip_suffix(':').unwrap_or(name).trim();
    HEADINGS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Checks the LLM's answer before it becomes an overlay. Blank answers are rejected (as in the reference,
/// docs/REFERENCE.md#summary-check), and so are **skeletons**: answers in which every non-blank line (trimmed) is one
/// of the four section headings (`## Topic`, `## Key Points`, `## Current State`, `## Open Items`, any number of `#`,
/// any case, optional `:`) or one of the four bracketed placeholder lines of the prompt, verbatim — i.e. the template
/// echoed back with nothing filled in. An accepted summary is returned unchanged (not trimmed, as the reference stores
/// it, docs/REFERENCE.md#summary-check).
pub fn accept_summary(summary: &str) -> std::result::Result<String, &'static str> {
    if summary.trim().is_empty() {
        return Err("the summary is empty");
    }
    let skeleton =
        summary.lines().map(str::trim).filter(|l| !l.is_empty()).all(|l| is_heading(l) || PLACEHOLDERS.contains(&l));
    if skeleton {
        return Err("the summary has only the section headings of the prompt and no content");
    }
    Ok(summary.to_string())
}

// ── Iterative overlays ───────────────────────────────────────────────────────────────────────────────

/// Where the new overlay starts (docs/REFERENCE.md#iterative-overlays). `existing` is every overlay of the session as
/// `(id, from, to)` in storage order (oldest first); one is visible on this branch when `"compaction_" + id` is in
/// `history_ids` (its synthetic message stands in the history) or both its `from` and `to` are. The oldest visible
/// overlay's `from` wins, so each branch has one growing overlay; with none visible, `plan_from`. Overlays on
/// sibling branches are ignored.
pub fn iterative_from(plan_from: &str, existing: &[(String, String, String)], history_ids: &[&str]) -> String {
    let ids: HashSet<&str> = history_ids.iter().copied().collect();
    existing
        .iter()
        .find(|(id, from, to)| {
            ids.contains(overlay::synthetic_id(id).as_str())
                || (ids.contains(from.as_str()) && ids.contains(to.as_str()))
        })
        .map_or_else(|| plan_from.to_string(), |(_, from, _)| from.clone())
}

// ── JavaScript conversions ───────────────────────────────────────────────────────────────────────────

/// JavaScript truthiness of a JSON value (null, false, 0 and "" are falsy; every object and array is truthy).
fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}
