//! The embedding work after an answer: every row that waits for its vector (`unembedded`,
//! queued by the triggers of migration 0013 whoever wrote the row) is embedded in batches
//! ([`CALLS`] calls of [`BATCH`] texts at once) and its vector stored with its model, its code
//! and the hash of its text. A failing call leaves its rows waiting for the next write's run
//! (the other calls' rows are stored); a row changed or deleted during the call is not given
//! the vector of its old text.
//!
//! What is embedded: a memory's content, a message's indexed text (its text parts, as full-text
//! search has it; a message without text has no vector), a search entry's content; of a long
//! text, its beginning ([`beginning`]). A text embedded before (a fork's copies, an edit that
//! kept the words, the same entry ingested twice) reuses that vector without a call.
//!
//! A turn is embedded alone: each context tried, measured alone with all-MiniLM-L6-v2
//! (`bench/embed-context.mjs`, the service's fusion; hit@10 / MRR@10, ours · LoCoMo), lost on
//! one corpus at least. Its own text 0.49 / 0.36 · 0.69 / 0.43; the previous turn's first 200
//! bytes before it 0.47 / 0.35 · 0.69 / 0.41 (the service: 0.46 / 0.35 · 0.68 / 0.40); the
//! role 0.49 / 0.36 · 0.69 / 0.42; the session's date 0.47 / 0.37 (one date: ours has none) ·
//! 0.69 / 0.43. So a vector depends on its own text only, and an edit of the previous turn
//! leaves the next one's right. No turn of either corpus passes 800 bytes, so chunks would
//! change none; on messages of 10 turns each (LoCoMo, a median 1,265 bytes, past the 256
//! tokens the model reads) a message's best chunk of at most 600 bytes found more (0.89 / 0.66
//! → 0.92 / 0.72; ours, 874 bytes, 0.60 / 0.42 → 0.59 / 0.44): not done yet (a vector per
//! chunk needs the vectors' key and the index to change). docs/REFERENCE.md#search-by-meaning.

use futures::future::join4;

use super::code::{code_bytes, decode, encode, sign_code, text_hash};
use super::index::ItemKind;
use crate::error::Result;
use crate::events::Events;
use crate::llm::embeddings::{embed, EmbeddingsConfig};
use crate::llm::Transport;
use crate::sql::{atomically, Sql, Value};

/// Texts embedded per call.
pub const BATCH: i64 = 32;

/// Calls of one batch in flight at once (four: `join4`): a batch is up to `CALLS` × [`BATCH`]
/// rows. 1,000 memories in one request, until the last has its vector (`bench/vectors.mjs`):
/// with an endpoint that answers each call in 200 ms, side by side as a hosted one does, 7.1 s
/// one call at a time, 2.0 s four at once; with all-MiniLM-L6-v2 local, which computes one call
/// at a time on this machine's 2 shared cores, 8.8–9.5 s and 8.1–8.2 s.
pub const CALLS: usize = 4;

/// Bytes of a text that are embedded: its beginning, cut at a word. About 450 English tokens,
/// inside the window of `@cf/baai/bge-*` (512 tokens); all-MiniLM-L6-v2 reads the first 256
/// tokens of it. The rest of a long message is found by its words.
pub const MAX_TEXT_BYTES: usize = 2000;

/// Rows of `vector_log` kept: an index kept in memory that is further behind loads again.
const LOG_KEPT: i64 = 10_000;

/// Most batches of one run (a run goes on until nothing waits; a later write starts another).
const ROUNDS: usize = 10_000;

/// The beginning of `text` that is embedded: at most [`MAX_TEXT_BYTES`], cut after the last
/// white space of the second half when there is one (else at a character).
pub fn beginning(text: &str) -> &str {
    let text = text.trim();
    if text.len() <= MAX_TEXT_BYTES {
        return text;
    }
    let mut end = MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &text[..end];
    match cut.rfind(char::is_whitespace) {
        Some(i) if i > MAX_TEXT_BYTES / 2 => cut[..i].trim_end(),
        _ => cut,
    }
}

/// The text of row `item` of `kind` as it is now, its scope (a message's session, an entry's
/// label) and when it was written; `None` when the row is gone or has no text.
fn text_of(sql: &dyn Sql, kind: ItemKind, item: i64) -> Result<Option<(Option<String>, String, String)>> {
    let q = match kind {
        ItemKind::Memory => "SELECT NULL, content, updated_at FROM memories WHERE seq = ?",
        ItemKind::Message => {
            "SELECT m.session_id, (SELECT content FROM messages_fts WHERE rowid = m.seq), m.created_at
               FROM messages m WHERE m.seq = ?"
        }
        ItemKind::Entry => "SELECT label, content, updated_at FROM search_entries WHERE seq = ?",
    };
    let Some(r) = sql.query_row(q, &[Value::Int(item)])? else { return Ok(None) };
    let text = r.opt_text(1)?.map(|t| beginning(&t).to_owned()).filter(|t| !t.is_empty());
    text.map(|t| Ok((r.opt_text(0)?, t, r.text(2)?))).transpose()
}

/// One row to embed.
struct Work {
    kind: ItemKind,
    item: i64,
    scope: Option<String>,
    text: String,
    hash: i64,
    vector: Option<Vec<f32>>,
    /// When its vector is made: the run's time, or the row's own when it was written after
    /// the run began (a run goes on with what later writes queue).
    at: String,
}

/// Embeds every row waiting for its vector (nothing without embeddings); a failing call is a
/// warning, and what is left waits for a later run. Returns how many rows got a vector.
pub async fn run(sql: &dyn Sql, t: &dyn Transport, cfg: &EmbeddingsConfig, events: &dyn Events, now: &str) -> usize {
    if !cfg.is_on() {
        return 0;
    }
    let mut done = 0;
    for _ in 0..ROUNDS {
        match round(sql, t, cfg, now).await {
            // Nothing waits, or every row of the batch changed during its call (a later run
            // embeds the new texts).
            Ok(None) | Ok(Some(Round { stored: 0, dropped: 0 })) => break,
            Ok(Some(r)) => done += r.stored,
            Err(e) => {
                events.warn(&format!("embeddings: {} (the rows are kept and embedded after a later write)", e.message));
                break;
            }
        }
    }
    done
}

/// What one batch did.
struct Round {
    /// Rows that got their vector.
    stored: usize,
    /// Rows that left the queue without one (gone, or without text).
    dropped: usize,
}

/// One batch; `None` when nothing waits.
async fn round(sql: &dyn Sql, t: &dyn Transport, cfg: &EmbeddingsConfig, now: &str) -> Result<Option<Round>> {
    let queued = sql
        .query("SELECT kind, item FROM unembedded ORDER BY kind, item LIMIT ?", &[Value::Int(BATCH * CALLS as i64)])?;
    if queued.is_empty() {
        return Ok(None);
    }
    let model = cfg.model.as_str();
    let mut work = Vec::with_capacity(queued.len());
    let mut gone = Vec::new();
    for r in &queued {
        let (number, item) = (r.int(0)?, r.int(1)?);
        let text = match ItemKind::from_number(number) {
            Some(kind) => text_of(sql, kind, item)?.map(|(scope, text, written)| (kind, scope, text, written)),
            None => None,
        };
        match text {
            Some((kind, scope, text, written)) => {
                let hash = text_hash(&text);
                // The same text embedded by this model before: its vector, without a call.
                let vector = sql
                    .query_row(
                        "SELECT vector FROM vectors WHERE model = ? AND hash = ? LIMIT 1",
                        &[model.into(), Value::Int(hash)],
                    )?
                    .and_then(|r| match r.0.into_iter().next() {
                        Some(Value::Blob(b)) => Some(decode(&b)),
                        _ => None,
                    });
                let at = if written.as_str() > now { written } else { now.to_owned() };
                work.push(Work { kind, item, scope, text, hash, vector, at });
            }
            None => gone.push((number, item)),
        }
    }
    // The texts without a vector, BATCH a call, the calls at once; what a failed call asked
    // keeps waiting, what the others answered is stored.
    let asked: Vec<String> = work.iter().filter(|w| w.vector.is_none()).map(|w| w.text.clone()).collect();
    let chunks: Vec<&[String]> = asked.chunks(BATCH as usize).collect();
    let call = |i: usize| {
        let texts = chunks.get(i).copied();
        async move {
            match texts {
                Some(texts) => Some(embed(t, cfg, texts).await),
                None => None,
            }
        }
    };
    let (a, b, c, d) = join4(call(0), call(1), call(2), call(3)).await;
    let answers = [a, b, c, d].into_iter().flatten();
    let mut failed = None;
    let mut answered = Vec::with_capacity(asked.len());
    for (texts, answer) in chunks.iter().zip(answers) {
        match answer {
            Ok(vectors) => answered.extend(vectors.into_iter().map(Some)),
            Err(e) => {
                answered.extend(texts.iter().map(|_| None));
                failed.get_or_insert(e);
            }
        }
    }
    let mut answered = answered.into_iter();
    for w in work.iter_mut().filter(|w| w.vector.is_none()) {
        w.vector = answered.next().flatten();
    }
    let mut stored = 0;
    atomically(sql, || {
        let dequeue = "DELETE FROM unembedded WHERE kind = ? AND item = ?";
        for (number, item) in &gone {
            sql.execute(dequeue, &[Value::Int(*number), Value::Int(*item)])?;
        }
        for w in &work {
            let Some(v) = &w.vector else { continue };
            // Changed or deleted during the call: its new text waits (the triggers queued it).
            if text_of(sql, w.kind, w.item)?.map(|(_, text, _)| text).as_deref() != Some(w.text.as_str()) {
                continue;
            }
            sql.execute(
                "INSERT INTO vectors (kind, item, scope, model, hash, at, code, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (kind, item) DO UPDATE SET scope = excluded.scope, model = excluded.model,
                   hash = excluded.hash, at = excluded.at, code = excluded.code, vector = excluded.vector",
                &[
                    Value::Int(w.kind.number()),
                    Value::Int(w.item),
                    w.scope.clone().into(),
                    model.into(),
                    Value::Int(w.hash),
                    w.at.as_str().into(),
                    Value::Blob(code_bytes(&sign_code(v))),
                    Value::Blob(encode(v)),
                ],
            )?;
            sql.execute(dequeue, &[Value::Int(w.kind.number()), Value::Int(w.item)])?;
            stored += 1;
        }
        sql.execute(
            "DELETE FROM vector_log WHERE seq <= (SELECT max(seq) FROM vector_log) - ?",
            &[Value::Int(LOG_KEPT)],
        )
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(Some(Round { stored, dropped: gone.len() })),
    }
}

#[cfg(test)]
mod tests {
    use super::{beginning, MAX_TEXT_BYTES};

    #[test]
    fn a_long_text_is_embedded_by_its_beginning_cut_at_a_word() {
        assert_eq!(beginning("  short text \n"), "short text");
        let long = "word ".repeat(1000);
        let b = beginning(&long);
        assert!(b.len() <= MAX_TEXT_BYTES && b.len() > MAX_TEXT_BYTES - 10, "{}", b.len());
        assert!(b.ends_with("word"));
        let wide = "é".repeat(3000);
        let b = beginning(&wide);
        assert!(b.len() <= MAX_TEXT_BYTES && b.chars().all(|c| c == 'é'));
    }
}
