//! The conversation an agent turn sends to the model, and the guard on continuations a client sends back.
//!
//! Stored history is AI SDK `UIMessage` JSON (`{id, role, parts}`): one assistant message holds a tool call *and*
//! its result in the same part. The model wants [`ChatMessage`]s instead: an assistant turn with its calls, then
//! one tool message per result. A turn builds its conversation in three pure steps:
//!
//! ```text
//! history (read-time truncated) ──to_model_messages──▶ ──sanitize──▶ ──cap(max)──▶ ChatRequest.messages
//! ```
//!
//! 1. [`to_model_messages`] converts, leaving out what the model must not see (reasoning, system messages).
//! 2. [`sanitize`] (the reference's `sanitizeConversation`, docs/REFERENCE.md#sanitize) drops half-finished tool
//!    exchanges, so a history interrupted mid-turn never replays into a provider 400 (a dangling `tool_use` on
//!    Anthropic, an orphan `role: "tool"` on OpenAI-compatible providers).
//! 3. [`cap`] keeps the newest [`DEFAULT_MAX_MESSAGES`](crate::config::DEFAULT_MAX_MESSAGES) (configurable)
//!    without splitting a call from its results.
//!
//! The second half is [`validate_continuation`]: when a turn stopped on a client-side tool call (or an approval
//! request), the client answers by sending the whole branch back with the results filled in. That history is
//! client-supplied, so it is checked against the stored one before anything is trusted: no rewritten or
//! reordered messages (`not_a_prefix`, e.g. continuing another user's thread), no result the server did not wait
//! for (`forged_tool_result`), no approval that was never requested (`forged_approval`).

use std::borrow::{Borrow, Cow};
use std::collections::HashSet;

use serde_json::{Map, Value as Json};

#[cfg(doc)]
use crate::compaction::truncate::truncate_older_messages;
use crate::compaction::truncate::{truncate_message, TruncateOptions};
use crate::error::Error;
use crate::js;
use crate::llm::{ChatMessage, ToolCall};
use crate::parts::{parts, str_field, Part, ToolState};
use crate::store::overlay;

// ── Part helpers ─────────────────────────────────────────────────────────────────────────────────────

/// What the model reads as the result of a tool part, or `None` while the part has no result.
///
/// - `output-available`: the `output`, a string as is, anything else as its `JSON.stringify` (an absent output
///   reads as the empty string);
/// - `output-error`: `Error: <errorText>` (`Error: tool failed` without one). An `errorText` that already starts
///   with `Error:` (the server writes its own failures that way) is not prefixed twice;
/// - `output-denied` (an approval the user refused): `Error: tool execution denied` plus the reason, if any, so the
///   model learns why the call did not run instead of losing the call altogether.
fn tool_result(p: Part<'_>) -> Option<String> {
    match p.state()? {
        ToolState::OutputAvailable => Some(p.output().map(js::string).unwrap_or_default()),
        ToolState::OutputError => {
            let text = p.error_text().filter(|v| !v.is_null()).map(js::string).unwrap_or_default();
            Some(if text.is_empty() {
                "Error: tool failed".to_owned()
            } else if text.starts_with("Error:") {
                text
            } else {
                format!("Error: {text}")
            })
        }
        ToolState::OutputDenied => {
            let reason = p.approval().and_then(|a| str_field(a, "reason")).filter(|r| !r.is_empty());
            Some(match reason {
                Some(r) => format!("Error: tool execution denied: {r}"),
                None => "Error: tool execution denied".to_owned(),
            })
        }
        _ => None,
    }
}

/// The non-empty `text` of a message's `text` parts, in order. (`reasoning` parts are not `text` parts.)
fn texts(parts: &[Json]) -> impl Iterator<Item = &str> {
    parts.iter().map(Part::new).filter(|p| p.is_text()).filter_map(Part::text).filter(|t| !t.is_empty())
}

// ── UIMessage → model conversation ───────────────────────────────────────────────────────────────────

/// Converts stored `UIMessage`s (already read-time truncated by the caller) into the model's conversation.
///
/// - `user`: `User { text }`, the text parts joined with `"\n"`; a user message without text (only files, say)
///   is left out.
/// - `assistant`: `Assistant { text, tool_calls }` with the text parts joined with `"\n"` and one call per tool
///   part that has a `toolCallId` (name from `toolName` or the `tool-<name>` type; `input`, `{}` when absent),
///   followed by one `Tool` message per tool part that has a result (see the states below). Calls still waiting
///   (`input-available`) are converted too; [`sanitize`] then drops them, since no provider accepts an unanswered
///   call. `reasoning` parts are never sent back. An assistant message with neither text nor calls is left out.
///   The synthetic compaction summaries (`compaction_…` ids, role `assistant`, one text part) are ordinary
///   assistant text here.
/// - `system` messages (and any other role) are left out: the system prompt comes from the context blocks.
///
/// Result states: `output-available` gives the output (a string as is, anything else as JSON);
/// `output-error` gives `Error: <errorText>`; `output-denied` gives `Error: tool execution denied`.
///
/// A message that ran several steps (text, a tool call, then more text after the result) is split where a text
/// part follows a tool part, so the model reads `Assistant{text1, calls} → Tool… → Assistant{text2}` in the
/// order it happened, rather than its later text before the results it was based on.
pub fn to_model_messages(history: &[Json]) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(history.len());
    for m in history {
        match str_field(m, "role") {
            Some("user") => {
                let text = texts(parts(m)).collect::<Vec<_>>().join("\n");
                if !text.is_empty() {
                    out.push(ChatMessage::User { text });
                }
            }
            Some("assistant") => assistant(parts(m), &mut out),
            _ => {}
        }
    }
    out
}

/// One assistant step being collected: its text, its calls and the results that answer them.
#[derive(Default)]
struct Step {
    text: Vec<String>,
    calls: Vec<ToolCall>,
    results: Vec<ChatMessage>,
}

impl Step {
    fn flush(&mut self, out: &mut Vec<ChatMessage>) {
        let Step { text, calls, results } = std::mem::take(self);
        if text.is_empty() && calls.is_empty() {
            return;
        }
        out.push(ChatMessage::Assistant { text: text.join("\n"), tool_calls: calls });
        out.extend(results);
    }
}

fn assistant(parts: &[Json], out: &mut Vec<ChatMessage>) {
    let mut step = Step::default();
    for p in parts.iter().map(Part::new) {
        if p.is_tool() {
            let Some(id) = p.call_id() else { continue };
            let name = p.tool_name().to_owned();
            let input = p.input().filter(|v| !v.is_null()).cloned().unwrap_or_else(|| Json::Object(Map::new()));
            if let Some(output) = tool_result(p) {
                step.results.push(ChatMessage::Tool { call_id: id.to_owned(), name: name.clone(), output });
            }
            step.calls.push(ToolCall { id: id.to_owned(), name, input });
        } else if p.is_text() {
            let Some(text) = p.text().filter(|t| !t.is_empty()) else { continue };
            if !step.calls.is_empty() {
                step.flush(out);
            }
            step.text.push(text.to_owned());
        }
    }
    step.flush(out);
}

// ── sanitize ─────────────────────────────────────────────────────────────────────────────────────────

/// Makes a conversation replay-safe (the reference's `sanitizeConversation`, docs/REFERENCE.md#sanitize): pure and
/// idempotent (`sanitize(sanitize(x)) == sanitize(x)`).
///
/// A tool exchange is an `Assistant` with calls followed by the run of `Tool` messages right after it (up to the next
/// `User` or `Assistant`). Within each exchange:
/// - a **dangling call** (no `Tool` message of the run answers its id) is dropped from the `Assistant`, and the
///   `Assistant` itself is dropped if that leaves it with neither text nor calls;
/// - an **orphan result** (a `Tool` message whose `call_id` the `Assistant` just before did not call, or that follows a
///   `User` message) is dropped, and so is a second answer to the same call, or a second call with an id already called
///   in the same turn.
///
/// Everything else is kept, in order. An `Assistant` with empty text and no calls is dropped as well, since providers
/// reject empty assistant turns.
pub fn sanitize(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();
    while let Some(m) = rest.next() {
        match m {
            // Not preceded by an assistant turn (the run after an Assistant is consumed below): an orphan.
            ChatMessage::Tool { .. } => {}
            ChatMessage::User { .. } => out.push(m),
            ChatMessage::Assistant { text, tool_calls } => {
                let mut run = Vec::new();
                while let Some(ChatMessage::Tool { .. }) = rest.peek() {
                    run.extend(rest.next());
                }
                let mut seen = HashSet::new();
                let calls: Vec<ToolCall> = tool_calls.into_iter().filter(|c| seen.insert(c.id.clone())).collect();
                let mut answered = HashSet::new();
                let results: Vec<ChatMessage> = run
                    .into_iter()
                    .filter(|r| match r {
                        ChatMessage::Tool { call_id, .. } => seen.contains(call_id) && answered.insert(call_id.clone()),
                        _ => false,
                    })
                    .collect();
                let calls: Vec<ToolCall> = calls.into_iter().filter(|c| answered.contains(&c.id)).collect();
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                out.push(ChatMessage::Assistant { text, tool_calls: calls });
                out.extend(results);
            }
        }
    }
    out
}

// ── cap ──────────────────────────────────────────────────────────────────────────────────────────────

/// Keeps at most `max` of the newest messages (`max == 0`: no cap), without splitting a call from its results.
///
/// Results always come right after their call, so the only way to split a pair is a window that starts on a
/// `Tool` message; the cut moves later, past such messages, and the window may hold fewer than `max`.
///
/// When that leaves nothing (the last `max` messages are all results of one long exchange), the minimal valid
/// suffix is kept instead: from the last non-`Tool` message (the `Assistant` that made the calls) to the end, which
/// is more than `max`. A last `User` message is therefore always kept. Run [`sanitize`] first: `cap` assumes
/// every `Tool` message answers the `Assistant` before it.
pub fn cap(mut messages: Vec<ChatMessage>, max: usize) -> Vec<ChatMessage> {
    let n = messages.len();
    if max == 0 || n <= max {
        return messages;
    }
    let is_tool = |m: &ChatMessage| matches!(m, ChatMessage::Tool { .. });
    let mut start = n - max;
    while start < n && is_tool(&messages[start]) {
        start += 1;
    }
    if start == n {
        match messages.iter().rposition(|m| !is_tool(m)) {
            Some(i) => start = i,
            None => return Vec::new(),
        }
    }
    messages.split_off(start)
}

// ── The whole pipeline ───────────────────────────────────────────────────────────────────────────────

/// What a turn sends the model, and how many messages the cap left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    pub messages: Vec<ChatMessage>,
    /// Messages of the converted history that the cap did not send (0: none was left out):
    /// when compaction is configured, a turn that drops some compacts afterwards, so the next
    /// one sees a summary. The conversion stops once the cap is passed, so on a long branch
    /// this counts the left-out messages it converted, not all of them.
    pub dropped: usize,
}

/// [`truncate_older_messages`] → [`to_model_messages`] → [`sanitize`] → [`cap`], except that the
/// cap never drops a compaction summary, nor what comes before it (the protected head): the
/// history up to and including the last summary (a `compaction_…` message) is always sent, and
/// the newest messages after it fill the rest of `max` (at least the last exchange). Without a
/// summary, this is the plain cap.
///
/// Only what the cap can reach is converted: the tail from its newest message back until its
/// room is filled (a branch of 1,000 messages under a cap of 50 converts about 50). The
/// same conversation as converting all of it, because each stored message converts on its own
/// and never starts with a tool result, so `sanitize` of the whole is `sanitize` of each, and
/// `cap` reads only the newest (`tests/it/conversation.rs` compares the two on random branches).
pub fn build(history: &[Json], max: usize, older: &TruncateOptions) -> Conversation {
    let n = history.len();
    let split =
        history.iter().rposition(|m| str_field(m, "id").is_some_and(overlay::is_synthetic_id)).map_or(0, |i| i + 1);
    let convert = |i: usize| -> Vec<ChatMessage> {
        let m = &history[i];
        if i + older.keep_recent < n {
            let mut m = m.clone();
            truncate_message(&mut m, older);
            sanitize(to_model_messages(std::slice::from_ref(&m)))
        } else {
            sanitize(to_model_messages(std::slice::from_ref(m)))
        }
    };
    let head: Vec<ChatMessage> = (0..split).flat_map(convert).collect();
    // `max == 0` means no cap: a head that fills `max` still leaves room for the last exchange.
    let room = if max == 0 { usize::MAX } else { max.saturating_sub(head.len()).max(1) };
    let (mut first, mut made, mut groups) = (n, 0, Vec::new());
    while first > split && made < room {
        first -= 1;
        let group = convert(first);
        made += group.len();
        groups.push(group);
    }
    let tail: Vec<ChatMessage> = groups.into_iter().rev().flatten().collect();
    let tail = if max == 0 { tail } else { cap(tail, room) };
    // Nothing of what was converted left out (a call kept whole with its results): then an
    // older message that converts to anything was.
    let mut dropped = made - tail.len();
    while dropped == 0 && first > split {
        first -= 1;
        dropped = convert(first).len();
    }
    let mut messages = head;
    messages.extend(tail);
    Conversation { messages, dropped }
}

// ── Continuation validation ──────────────────────────────────────────────────────────────────────────

/// Rejection code: the continuation is not the stored history (a message was rewritten, added, dropped or
/// reordered; or a part changed beyond a tool result or an approval response).
pub const NOT_A_PREFIX: &str = "not_a_prefix";
/// Rejection code: a tool result the server was not waiting for from the client.
pub const FORGED_TOOL_RESULT: &str = "forged_tool_result";
/// Rejection code: an approval response to an approval that was never requested.
pub const FORGED_APPROVAL: &str = "forged_approval";

/// Why a continuation was refused: the reference's `{ ok: false, code, reason, index }` verdict
/// (docs/REFERENCE.md#continuations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// [`NOT_A_PREFIX`], [`FORGED_TOOL_RESULT`] or [`FORGED_APPROVAL`].
    pub code: &'static str,
    /// For the API caller: which message and part, and what is wrong with it.
    pub reason: String,
    /// The index of the offending message in the continuation (for a length mismatch, the first index present in
    /// only one of the two histories).
    pub index: usize,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.reason)
    }
}

/// Checks a client-supplied continuation against the stored history of its branch, and returns the indices of the
/// messages that changed (those that got tool results or approval responses): the ones to write back.
///
/// `stored` is the branch root → leaf as the client was given it; `incoming` is what the client sent back after
/// running its tools. The rules:
///
/// - Same length, same order: the client fills in results, it does not add, drop or reorder messages. Otherwise
///   `not_a_prefix` at the first index present in only one of them.
/// - Every message equals its stored counterpart, except for tool parts the server was waiting on:
///   - a part that was `input-available` may come back `output-available` with an `output`, or `output-error`
///     with a string `errorText`; nothing else of the part (`type`, `toolCallId`, `toolName`, `input`, …) may
///     change;
///   - a part that was `approval-requested` may come back `approval-responded`, its `approval` gaining a boolean
///     `approved` (and optionally a `reason`) under the same `approval.id`.
/// - A result for a part that was not pending (it already had one, it is not in the stored message, or it belongs
///   to one of `server_tools`, which only the server answers) is `forged_tool_result`.
/// - An `approval-responded` part where no `approval-requested` part with the same `approval.id` was stored is
///   `forged_approval`.
/// - Any other difference is `not_a_prefix` at that message.
///
/// Equality is structural and **order-insensitive for objects** (a tool input whose keys came back reordered is
/// not a forgery), and numbers compare by value as JavaScript sees them (`1.0` stored, `1` sent back is the same
/// number: the client parsed it into a double and printed it again). Messages are checked in order and the first
/// problem wins; within a message, its fields other than `parts` are checked before its parts.
pub fn validate_continuation<S: Borrow<Json>, M: Borrow<Json>>(
    stored: &[S],
    incoming: &[M],
    server_tools: &[&str],
) -> Result<Vec<usize>, Rejection> {
    let mut changed = Vec::new();
    for (i, (s, m)) in stored.iter().zip(incoming).enumerate() {
        let (s, m) = (s.borrow(), m.borrow());
        let label = match str_field(s, "id") {
            Some(id) => format!("message {i} ({id})"),
            None => format!("message {i}"),
        };
        match check_message(s, m, server_tools) {
            Ok(true) => changed.push(i),
            Ok(false) => {}
            Err((code, why)) => return Err(Rejection { code, reason: format!("{label}: {why}"), index: i }),
        }
    }
    let (s, m) = (stored.len(), incoming.len());
    if s != m {
        let reason = if m > s {
            format!("the continuation adds {} message(s) after the stored history ({s} stored, {m} sent)", m - s)
        } else {
            format!("the continuation drops {} message(s) of the stored history ({s} stored, {m} sent)", s - m)
        };
        return Err(Rejection { code: NOT_A_PREFIX, reason, index: s.min(m) });
    }
    Ok(changed)
}

/// A message as the AI SDK's chat client holds it, for comparing what a `useChat` client sends with what is
/// stored. The client drops `createdAt`, merges `metadata` from the stream, adds a `step-start` part per step,
/// gives text and reasoning parts a `state` (`streaming`, `done`) and the stream's part `id` (reasoning, in
/// `ai` 7), and tool parts the stream's `providerExecuted`,
/// provider metadata, `title` and `preliminary`: none of that is a change to the conversation, so all of it is
/// left out here, on both sides.
pub(crate) fn client_view(m: &Json) -> Json {
    let Some(o) = m.as_object() else { return m.clone() };
    let mut out: Map<String, Json> = o
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "createdAt" | "metadata"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(Json::Array(ps)) = o.get("parts") {
        let kept = ps.iter().filter(|p| Part::new(p).kind() != "step-start").map(|p| {
            let Some(po) = p.as_object() else { return p.clone() };
            let part = Part::new(p);
            let dropped: &[&str] = match part.kind() {
                "text" | "reasoning" => &["state", "providerMetadata", "id"],
                _ if part.is_tool() => {
                    &["providerExecuted", "callProviderMetadata", "resultProviderMetadata", "title", "preliminary"]
                }
                _ => &[],
            };
            Json::Object(
                po.iter()
                    .filter(|(k, _)| !dropped.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        });
        out.insert("parts".into(), Json::Array(kept.collect()));
    }
    Json::Object(out)
}

/// The stored messages and the client's, each pair as [`client_view`] sees it, for
/// [`validate_continuation`]. A pair that is already equal (a message the client loaded from the
/// history and sends back as it was) is compared as it is, without copies: only the pairs that
/// differ are normalized.
pub(crate) fn client_views<'a>(stored: &'a [Json], theirs: &'a [Json]) -> (Vec<Cow<'a, Json>>, Vec<Cow<'a, Json>>) {
    let mut ours_out = Vec::with_capacity(stored.len());
    let mut theirs_out = Vec::with_capacity(theirs.len());
    for i in 0..stored.len().max(theirs.len()) {
        match (stored.get(i), theirs.get(i)) {
            (Some(a), Some(b)) if same(a, b) => {
                ours_out.push(Cow::Borrowed(a));
                theirs_out.push(Cow::Borrowed(b));
            }
            (a, b) => {
                ours_out.extend(a.map(|a| Cow::Owned(client_view(a))));
                theirs_out.extend(b.map(|b| Cow::Owned(client_view(b))));
            }
        }
    }
    (ours_out, theirs_out)
}

/// Whether the client's `m` is an assistant message with nothing in it (a reply stopped before
/// its first piece, as the AI SDK keeps it): it stands for no reply at all.
pub(crate) fn is_empty_reply(m: &Json) -> bool {
    str_field(m, "role") == Some("assistant") && parts(m).iter().all(|p| Part::new(p).kind() == "step-start")
}

/// The stored reply `stored`, stopped (`metadata.stopped`), cut back to the client's copy
/// `theirs` when that holds less of it (the chunks in flight when it stopped never reached the
/// client): its parts must be a prefix of the stored ones, the last of them a text or reasoning
/// part whose text may be a prefix of the stored text. `None` when `stored` is not a stopped
/// reply, the copy holds all of it, or it is not such a prefix (then the usual checks judge it).
pub(crate) fn cut_back(stored: &Json, theirs: &Json) -> Option<Json> {
    let stopped = stored.get("metadata").and_then(|m| m.get("stopped")) == Some(&Json::Bool(true));
    if !stopped || str_field(stored, "role") != Some("assistant") || str_field(stored, "id") != str_field(theirs, "id")
    {
        return None;
    }
    let (ours, mine) = (client_view(stored), client_view(theirs));
    let (ours, mine) = (parts(&ours), parts(&mine));
    let n = mine.len();
    if n == 0 || n > ours.len() {
        return None;
    }
    if (0..n - 1).any(|j| !same(&ours[j], &mine[j])) {
        return None;
    }
    let (a, b) = (Part::new(&ours[n - 1]), Part::new(&mine[n - 1]));
    let text = match (a.kind(), a.str("text"), b.str("text")) {
        _ if same(&ours[n - 1], &mine[n - 1]) => None,
        (kind @ ("text" | "reasoning"), Some(long), Some(short)) if b.kind() == kind && long.starts_with(short) => {
            Some(short.to_owned())
        }
        _ => return None,
    };
    if n == ours.len() && text.is_none() {
        return None;
    }
    let mut cut = stored.clone();
    if let Some(Json::Array(ps)) = cut.get_mut("parts") {
        ps.truncate(n);
        if let (Some(t), Some(last)) = (text, ps.last_mut().and_then(Json::as_object_mut)) {
            last.insert("text".into(), Json::String(t));
        }
    }
    Some(cut)
}

/// `stored` with the tool results and approval answers of `theirs` (its validated counterpart, see
/// [`validate_continuation`]) filled into the parts that waited for them, matched by `toolCallId`; everything else
/// stays as stored.
pub(crate) fn with_results(stored: &Json, theirs: &Json) -> Json {
    let mut out = stored.clone();
    let answers = parts(theirs);
    if let Some(Json::Array(ps)) = out.get_mut("parts") {
        for p in ps.iter_mut().filter(|p| Part::new(p).is_tool()) {
            let ours = Part::new(p);
            let waiting = ours.state().is_some_and(ToolState::is_waiting);
            let id = ours.call_id().map(str::to_owned);
            let answer = answers.iter().map(Part::new).find(|a| a.is_tool() && a.call_id() == id.as_deref());
            let (true, Some(a), Some(po)) = (waiting, answer, p.as_object_mut()) else { continue };
            for key in ["state", "output", "errorText", "approval"] {
                if let Some(v) = a.json().get(key) {
                    po.insert(key.to_owned(), v.clone());
                }
            }
        }
    }
    out
}

/// The 409 for a rejected continuation: `Error::conflict` with the message `"<code> at message <index>: <reason>"`,
/// and the rejection code as the specific `error.code` of the JSON body ([`Error::with_code`]), so a client can
/// tell a rewritten history (`not_a_prefix`) from a forgery without parsing the message.
impl From<Rejection> for Error {
    fn from(r: Rejection) -> Error {
        Error::conflict(format!("{} at message {}: {}", r.code, r.index, r.reason)).with_code(r.code)
    }
}

type Verdict<T> = Result<T, (&'static str, String)>;

fn not_a_prefix<T>(why: impl Into<String>) -> Verdict<T> {
    Err((NOT_A_PREFIX, why.into()))
}

/// `Ok(true)` when `m` is `s` with tool results or approval responses filled in, `Ok(false)` when equal.
fn check_message(s: &Json, m: &Json, server_tools: &[&str]) -> Verdict<bool> {
    if same(s, m) {
        return Ok(false);
    }
    let (Some(so), Some(mo)) = (s.as_object(), m.as_object()) else {
        return not_a_prefix("differs from the stored message");
    };
    if let Some(key) = differing_key(so, mo, &["parts"]) {
        return not_a_prefix(format!("`{key}` differs from the stored message"));
    }
    let (Some(sp), Some(mp)) = (so.get("parts").and_then(Json::as_array), mo.get("parts").and_then(Json::as_array))
    else {
        return not_a_prefix("`parts` differs from the stored message");
    };
    if mp.len() < sp.len() {
        return not_a_prefix(format!("{} part(s) of the stored message are missing", sp.len() - mp.len()));
    }
    let mut changed = false;
    for j in 0..mp.len() {
        match (sp.get(j), mp.get(j)) {
            (Some(a), Some(b)) => changed |= check_part(a, b, j, sp, server_tools)?,
            (None, Some(b)) => {
                let b = Part::new(b);
                let id = b.call_id().unwrap_or_default();
                return match (b.is_tool(), b.state()) {
                    (true, Some(ToolState::OutputAvailable | ToolState::OutputError)) => Err((
                        FORGED_TOOL_RESULT,
                        format!("part {j} is a result for tool call `{id}`, which the stored message does not have"),
                    )),
                    (true, Some(ToolState::ApprovalResponded)) => Err((
                        FORGED_APPROVAL,
                        format!("part {j} answers an approval of tool call `{id}` that was never requested"),
                    )),
                    _ => not_a_prefix(format!("part {j} is not in the stored message")),
                };
            }
            (_, None) => unreachable!("j < mp.len()"),
        }
    }
    Ok(changed)
}

/// `Ok(true)` when `b` is the pending stored part `a` with its result or approval response filled in. `stored` is
/// all of the stored message's parts: a result for a call that is in the message, only elsewhere, means the parts
/// moved (`not_a_prefix`); a result for a call that is nowhere in it is forged.
fn check_part(a: &Json, b: &Json, j: usize, stored: &[Json], server_tools: &[&str]) -> Verdict<bool> {
    if same(a, b) {
        return Ok(false);
    }
    let (a, b) = (Part::new(a), Part::new(b));
    match b.state().filter(|_| b.is_tool()) {
        Some(state @ (ToolState::OutputAvailable | ToolState::OutputError)) => {
            check_result(a, b, state, j, stored, server_tools)
        }
        Some(ToolState::ApprovalResponded) => check_approval(a, b, j),
        _ => not_a_prefix(format!("part {j} differs from the stored message")),
    }
}

/// [`check_part`] for a part `b` that came back answered (`state`: `output-available` or
/// `output-error`): `a` must be the same call, of a client tool, waiting for that answer, and
/// only `state` and the answer's field may differ.
fn check_result(
    a: Part<'_>,
    b: Part<'_>,
    state: ToolState,
    j: usize,
    stored: &[Json],
    server_tools: &[&str],
) -> Verdict<bool> {
    let id = b.call_id().unwrap_or_default();
    if !a.is_tool() || a.call_id() != Some(id) {
        if stored.iter().map(Part::new).any(|p| p.is_tool() && p.call_id() == Some(id)) {
            return not_a_prefix(format!("part {j}: the parts of the stored message moved"));
        }
        return Err((
            FORGED_TOOL_RESULT,
            format!("part {j} is a result for tool call `{id}`, which the stored message does not have"),
        ));
    }
    let name = a.tool_name();
    if server_tools.contains(&name) {
        return Err((
            FORGED_TOOL_RESULT,
            format!("part {j}: `{name}` is a server tool; only the server answers call `{id}`"),
        ));
    }
    match a.state() {
        Some(ToolState::InputAvailable) => {}
        Some(ToolState::OutputAvailable | ToolState::OutputError | ToolState::OutputDenied) => {
            return Err((FORGED_TOOL_RESULT, format!("part {j}: tool call `{id}` already has a result")))
        }
        _ => {
            // The stored state as written (any string: a part stored before states were checked).
            let other = a.str("state").unwrap_or_default();
            return Err((
                FORGED_TOOL_RESULT,
                format!("part {j}: tool call `{id}` is not waiting for a result (state `{other}`)"),
            ));
        }
    }
    let (field, answer) = match state {
        ToolState::OutputAvailable => ("output", b.output()),
        _ => ("errorText", b.error_text()),
    };
    match answer {
        None => return not_a_prefix(format!("part {j}: state `{state}` without `{field}`")),
        Some(v) if field == "errorText" && !v.is_string() => {
            return not_a_prefix(format!("part {j}: `errorText` is not a string"))
        }
        Some(_) => {}
    }
    let empty = Map::new();
    let (ao, bo) = (a.json().as_object().unwrap_or(&empty), b.json().as_object().unwrap_or(&empty));
    if let Some(key) = differing_key(ao, bo, &["state", field]) {
        return not_a_prefix(format!("part {j}: tool call `{id}` changed `{key}`, not only its result"));
    }
    Ok(true)
}

/// [`check_part`] for a part `b` that came back `approval-responded`: `a` must be the same call,
/// `approval-requested` under the same `approval.id`, and only `state` and the approval's
/// `approved` (a boolean) and `reason` may differ.
fn check_approval(a: Part<'_>, b: Part<'_>, j: usize) -> Verdict<bool> {
    let requested = a.is_tool()
        && a.call_id() == b.call_id()
        && a.state() == Some(ToolState::ApprovalRequested)
        && a.approval_id().is_some()
        && a.approval_id() == b.approval_id();
    if !requested {
        let id = b.approval_id().unwrap_or_default();
        return Err((FORGED_APPROVAL, format!("part {j} answers approval `{id}`, which was not requested there")));
    }
    let empty = Map::new();
    let sa = a.approval().and_then(Json::as_object).unwrap_or(&empty);
    let Some(ma) = b.approval().and_then(Json::as_object) else { unreachable!("approval.id was read") };
    if !ma.get("approved").is_some_and(Json::is_boolean) {
        return not_a_prefix(format!("part {j}: the approval response has no boolean `approved`"));
    }
    if let Some(key) = differing_key(sa, ma, &["approved", "reason"]) {
        return not_a_prefix(format!("part {j}: the approval changed `{key}`"));
    }
    let (ao, bo) = (a.json().as_object().unwrap_or(&empty), b.json().as_object().unwrap_or(&empty));
    if let Some(key) = differing_key(ao, bo, &["state", "approval"]) {
        return not_a_prefix(format!("part {j}: changed `{key}`, not only the approval"));
    }
    Ok(true)
}

/// The first key (of `a`, then of `b`) outside `ignore` whose values differ or that only one side has.
fn differing_key<'a>(a: &'a Map<String, Json>, b: &'a Map<String, Json>, ignore: &[&str]) -> Option<&'a str> {
    let differs = |k: &str| match (a.get(k), b.get(k)) {
        (Some(x), Some(y)) => !same(x, y),
        (None, None) => false,
        _ => true,
    };
    a.keys().chain(b.keys()).map(String::as_str).filter(|k| !ignore.contains(k)).find(|k| differs(k))
}

/// Structural equality as a JavaScript client sees values: objects as maps (key order does not matter, as for
/// `serde_json::Value`'s own `==`), arrays in order, numbers by their double value.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
