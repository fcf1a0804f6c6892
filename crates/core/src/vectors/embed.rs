//! The embedding work after an answer: every row that waits for its vector (`unembedded`,
//! queued by the triggers of migration 0013 whoever wrote the row) is embedded in batches
//! ([`CALLS`] calls of [`BATCH`] texts at once) and its vector stored with its model, its code
//! and the hash of its text. A failing call leaves its rows waiting for the next write's run
//! (the other calls' rows are stored); a row changed or deleted during the call is not given
//! the vector of its old text.
//!
//! What is embedded: a memory's content, a search entry's content, each by its beginning
//! ([`beginning`]); a message's indexed text (its text parts, as full-text search has it; a
//! message without text has no vector) in [`parts`] of at most [`PART_BYTES`]: the first is the
//! message's vector ([`ItemKind::Message`]), each further one a [`ItemKind::Part`] of it, so a long
//! answer is found by what its middle says. A text embedded before (a fork's copies, an edit
//! that kept the words, the same entry ingested twice) reuses that vector without a call.
//!
//! A turn is embedded alone: each context tried, measured alone with all-MiniLM-L6-v2
//! (`bench/embed-context.mjs`, the service's fusion; hit@10 / MRR@10, ours · LoCoMo), lost on
//! one corpus at least. Its own text 0.49 / 0.36 · 0.69 / 0.43; the previous turn's first 200
//! bytes before it 0.47 / 0.35 · 0.69 / 0.41 (the service: 0.46 / 0.35 · 0.68 / 0.40); the
//! role 0.49 / 0.36 · 0.69 / 0.42; the session's date 0.47 / 0.37 (one date: ours has none) ·
//! 0.69 / 0.43. So a vector depends on its own text only, and an edit of the previous turn
//! leaves the next one's right. No turn of either corpus passes 800 bytes, so parts change
//! none of them; on messages of 10 turns each (`bench/embed-chunks.mjs`: LoCoMo, a median 1,265
//! bytes, past the 256 tokens the model reads), a message's best part found more than one
//! vector of its beginning (see [`PART_BYTES`]). docs/REFERENCE.md#search-by-meaning.

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

/// Bytes of one part of a message (`parts`): about 250 English tokens, all-MiniLM-L6-v2's window (256
/// tokens; `@cf/baai/bge-*` read 512). On messages of 10 LoCoMo turns (a median 1,265 bytes),
/// with the model, hit@10 / MRR@10 by meaning alone and fused as the service fuses
/// (`bench/embed-chunks.mjs`): one vector of the first 2,000 bytes 0.67 / 0.39 by meaning, 0.890 /
/// 0.664 fused; parts of 1,000 bytes 0.76 / 0.44 and 0.916 / 0.712; of 600 bytes 0.79 and 0.916 /
/// 0.721, for more calls (a part per 600 bytes) and a window `@cf/baai/bge-*` would leave half empty.
pub const PART_BYTES: usize = 1000;

/// Most parts of one message, its first included: the rest of a longer message is found by its
/// words. A part `p` of message `seq` (p ≥ 1) is stored as item `seq × PARTS + p` of
/// [`ItemKind::Part`].
pub const PARTS: i64 = 16;

/// The item of part `p` (≥ 1) of message `seq`.
pub(crate) fn part_item(seq: i64, p: usize) -> i64 {
    seq * PARTS + p as i64
}

/// The message a [`ItemKind::Part`] item is a part of.
pub(crate) fn message_of(part: i64) -> i64 {
    part.div_euclid(PARTS)
}

/// The beginning of `text` that is embedded: at most [`MAX_TEXT_BYTES`], cut after the last
/// white space of the second half when there is one (else at a character).
pub fn beginning(text: &str) -> &str {
    cut(text.trim(), MAX_TEXT_BYTES)
}

/// At most `max` bytes of the beginning of `text`, cut after the last white space of the second
/// half when there is one (else at a character).
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &text[..end];
    match cut.rfind(char::is_whitespace) {
        Some(i) if i > max / 2 => cut[..i].trim_end(),
        _ => cut,
    }
}

/// The parts of a message's text that are embedded, in order: pieces of at most [`PART_BYTES`],
/// each cut at a word as [`beginning`] cuts, at most [`PARTS`] of them.
pub fn parts(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() && out.len() < PARTS as usize {
        let piece = cut(rest, PART_BYTES);
        out.push(piece);
        rest = rest[piece.len()..].trim_start();
    }
    out
}

/// The texts embedded for row `item` of `kind` as it is now (a message's [`parts`], a part's
/// own, another row's [`beginning`]), its scope (a message's session, an entry's label) and when
/// it was written; `None` when the row is gone or has no text.
fn text_of(sql: &dyn Sql, kind: ItemKind, item: i64) -> Result<Option<Texts>> {
    let q = match kind {
        ItemKind::Memory => "SELECT NULL, content, updated_at FROM memories WHERE seq = ?",
        ItemKind::Message | ItemKind::Part => {
            "SELECT m.session_id, (SELECT content FROM messages_fts WHERE rowid = m.seq), m.created_at
               FROM messages m WHERE m.seq = ?"
        }
        ItemKind::Entry => "SELECT label, content, updated_at FROM search_entries WHERE seq = ?",
    };
    let row = if kind == ItemKind::Part { message_of(item) } else { item };
    let Some(r) = sql.query_row(q, &[Value::Int(row)])? else { return Ok(None) };
    let Some(text) = r.opt_text(1)? else { return Ok(None) };
    let texts: Vec<String> = match kind {
        ItemKind::Memory | ItemKind::Entry => vec![beginning(&text).to_owned()],
        ItemKind::Message => parts(&text).into_iter().map(str::to_owned).collect(),
        ItemKind::Part => {
            parts(&text).get((item - row * PARTS) as usize).map(|t| (*t).to_owned()).into_iter().collect()
        }
    };
    if texts.first().is_none_or(|t| t.is_empty()) {
        return Ok(None);
    }
    Ok(Some(Texts { scope: r.opt_text(0)?, texts, written: r.text(2)? }))
}

/// What [`text_of`] reads of a row.
struct Texts {
    scope: Option<String>,
    texts: Vec<String>,
    written: String,
}

/// One row to embed: one text, or a message's parts (stored together or not at all).
struct Work {
    kind: ItemKind,
    item: i64,
    scope: Option<String>,
    texts: Vec<String>,
    hashes: Vec<i64>,
    vectors: Vec<Option<Vec<f32>>>,
    /// When its vectors are made: the run's time, or the row's own when it was written after
    /// the run began (a run goes on with what later writes queue).
    at: String,
}

impl Work {
    /// The kind and item each of its vectors is stored as: a message's first part as the
    /// message, the others as its [`ItemKind::Part`]s.
    fn keys(&self) -> impl Iterator<Item = (ItemKind, i64)> + '_ {
        (0..self.texts.len()).map(|p| match (self.kind, p) {
            (ItemKind::Message, p) if p > 0 => (ItemKind::Part, part_item(self.item, p)),
            (kind, _) => (kind, self.item),
        })
    }
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
    let most = BATCH as usize * CALLS;
    let queued =
        sql.query("SELECT kind, item FROM unembedded ORDER BY kind, item LIMIT ?", &[Value::Int(most as i64)])?;
    if queued.is_empty() {
        return Ok(None);
    }
    let model = cfg.model.as_str();
    let mut work: Vec<Work> = Vec::with_capacity(queued.len());
    let mut gone = Vec::new();
    let mut texts = 0;
    for r in &queued {
        let (number, item) = (r.int(0)?, r.int(1)?);
        let text = match ItemKind::from_number(number) {
            Some(kind) => text_of(sql, kind, item)?.map(|t| (kind, t)),
            None => None,
        };
        let Some((kind, Texts { scope, texts: row_texts, written })) = text else {
            gone.push((number, item));
            continue;
        };
        // A batch asks for at most `most` texts: a message's parts go whole, in a later batch if
        // they do not fit in this one.
        if texts + row_texts.len() > most && !work.is_empty() {
            break;
        }
        texts += row_texts.len();
        let hashes: Vec<i64> = row_texts.iter().map(|t| text_hash(t)).collect();
        let mut vectors = Vec::with_capacity(hashes.len());
        for hash in &hashes {
            // The same text embedded by this model before: its vector, without a call.
            let found = sql.query_row(
                "SELECT vector FROM vectors WHERE model = ? AND hash = ? LIMIT 1",
                &[model.into(), Value::Int(*hash)],
            )?;
            vectors.push(found.and_then(|r| match r.0.into_iter().next() {
                Some(Value::Blob(b)) => Some(decode(&b)),
                _ => None,
            }));
        }
        let at = if written.as_str() > now { written } else { now.to_owned() };
        work.push(Work { kind, item, scope, texts: row_texts, hashes, vectors, at });
    }
    // The texts without a vector, BATCH a call, the calls at once; what a failed call asked
    // keeps waiting, what the others answered is stored.
    let asked: Vec<String> = work
        .iter()
        .flat_map(|w| w.texts.iter().zip(&w.vectors).filter(|(_, v)| v.is_none()).map(|(t, _)| t.clone()))
        .collect();
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
    for v in work.iter_mut().flat_map(|w| w.vectors.iter_mut()).filter(|v| v.is_none()) {
        *v = answered.next().flatten();
    }
    let mut stored = 0;
    atomically(sql, || {
        let dequeue = "DELETE FROM unembedded WHERE kind = ? AND item = ?";
        for (number, item) in &gone {
            sql.execute(dequeue, &[Value::Int(*number), Value::Int(*item)])?;
        }
        for w in &work {
            // A row is stored whole: every part, or (one failed) none.
            if w.vectors.iter().any(Option::is_none) {
                continue;
            }
            // Changed or deleted during the call: its new text waits (the triggers queued it).
            if text_of(sql, w.kind, w.item)?.map(|t| t.texts).as_ref() != Some(&w.texts) {
                continue;
            }
            for (((kind, item), v), hash) in w.keys().zip(w.vectors.iter().flatten()).zip(&w.hashes) {
                sql.execute(
                    "INSERT INTO vectors (kind, item, scope, model, hash, at, code, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (kind, item) DO UPDATE SET scope = excluded.scope, model = excluded.model,
                       hash = excluded.hash, at = excluded.at, code = excluded.code, vector = excluded.vector",
                    &[
                        Value::Int(kind.number()),
                        Value::Int(item),
                        w.scope.clone().into(),
                        model.into(),
                        Value::Int(*hash),
                        w.at.as_str().into(),
                        Value::Blob(code_bytes(&sign_code(v))),
                        Value::Blob(encode(v)),
                    ],
                )?;
            }
            if w.kind == ItemKind::Message {
                // Parts of an earlier text past this one's last (its edit deleted them; a part
                // embedded on its own keeps them).
                sql.execute(
                    "DELETE FROM vectors WHERE kind = ? AND item >= ? AND item < ?",
                    &[
                        Value::Int(ItemKind::Part.number()),
                        Value::Int(part_item(w.item, w.texts.len())),
                        Value::Int(part_item(w.item + 1, 0)),
                    ],
                )?;
            }
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
    use super::{beginning, message_of, part_item, parts, MAX_TEXT_BYTES, PARTS, PART_BYTES};

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

    #[test]
    fn a_message_is_embedded_in_parts_cut_at_words() {
        assert_eq!(parts("  one short turn \n"), vec!["one short turn"]);
        assert!(parts(" \n ").is_empty());
        let long: String = (0..600).map(|i| format!("w{i} ")).collect();
        let ps = parts(&long);
        assert!(ps.len() >= 3 && ps.len() <= PARTS as usize, "{}", ps.len());
        assert!(ps.iter().all(|p| p.len() <= PART_BYTES && !p.starts_with(' ') && !p.ends_with(' ')));
        // Nothing lost between parts: they are the text's words, in order.
        let words: Vec<&str> = ps.iter().flat_map(|p| p.split_whitespace()).collect();
        assert_eq!(words, long.split_whitespace().collect::<Vec<_>>());
        // Past PARTS parts, the rest is left to the words.
        let longer = "word ".repeat(PART_BYTES * PARTS as usize);
        assert_eq!(parts(&longer).len(), PARTS as usize);
        // A part's item says its message.
        assert_eq!(message_of(part_item(41, 3)), 41);
        assert_eq!(message_of(part_item(41, PARTS as usize - 1)), 41);
        assert_ne!(part_item(41, PARTS as usize - 1), part_item(42, 1));
    }
}
