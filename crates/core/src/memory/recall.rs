//! Ranked recall of memories (docs/REFERENCE.md#memory-ranking).
//!
//! Candidates come from full text (FTS5 over text and tags: the plain-language query of every
//! search, `core::query`, ranked at a bounded cost by `core::rank`; a word no memory has is
//! looked up as a prefix) and, when a query vector is given, from the nearest vectors of the
//! index kept in memory (`crate::vectors`: no vector is read but those of its best candidates).
//! Relevance in [0, 1] is the stronger of the two signals (bm25 relative to the best text
//! candidate; similarity rescaled from [0.2, 1]) plus a tenth of the weaker one when both agree,
//! so a strong text match is never outranked by a weak vector neighbour. Then it is combined with
//! what the agent knows of each memory:
//!
//! ```text
//! rank = 0.70 · relevance + 0.15 · confidence (score; 0.5 when unknown)
//!      + 0.10 · recency (halves every 30 days since the last change)
//!      + 0.05 · frequency (ln(1 + recalls) / ln 11, at most 1)
//! ```
//!
//! Each hit says why it ranked (`why`, and the signals as numbers).

use serde::Serialize;
use serde_json::Value as Json;

use super::store::{columns, filter_sql, from_row, Filter, Memory, WIDTH};
use crate::error::Result;
use crate::query::{self, Query as Words};
use crate::rank::{self, Index, Rows, Scope, Unmatched};
use crate::sort;
use crate::sql::{json_ids, Sql, Value};
use crate::time::{parse_iso, Now};
use crate::vectors::index::Within;
use crate::vectors::{ItemKind, Meaning, Scale};

/// Hits of `GET /memories/search` and `memory_recall` by default.
pub const DEFAULT_LIMIT: i64 = 10;
/// Most hits of one recall.
pub const MAX_LIMIT: i64 = 50;
/// Candidates taken from each source before ranking.
const CANDIDATES: i64 = 50;
/// Days after which recency halves.
const HALF_LIFE_DAYS: f64 = 30.0;

/// What to recall.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Query {
    pub text: String,
    pub filter: Filter,
    pub limit: i64,
}

/// The signals a rank was made of, each in [0, 1].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Signals {
    /// Full-text relevance (bm25, relative to the best candidate); 0 when the text did not match.
    pub(crate) text: f64,
    /// Cosine similarity to the query; `null` without embeddings.
    pub(crate) semantic: Option<f64>,
    pub(crate) relevance: f64,
    pub(crate) confidence: f64,
    pub(crate) recency: f64,
    pub(crate) frequency: f64,
}

/// One recalled memory (of the agent, or of its space).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    pub(crate) memory: Memory,
    /// The combined rank, in [0, 1].
    pub(crate) score: f64,
    /// Why it ranked, in words.
    pub(crate) why: String,
    pub(crate) signals: Signals,
}

impl Hit {
    /// A hit as `GET /memories/search` shows it, read back (a memory space's answer); `None`
    /// when it is not one.
    pub(crate) fn from_json(j: &Json) -> Option<Hit> {
        let s = j.get("signals")?;
        let num = |k: &str| s.get(k).and_then(Json::as_f64).unwrap_or(0.0);
        Some(Hit {
            memory: Memory::from_json(j.get("memory")?)?,
            score: j.get("score")?.as_f64()?,
            why: j.get("why").and_then(Json::as_str).unwrap_or_default().to_owned(),
            signals: Signals {
                text: num("text"),
                semantic: s.get("semantic").and_then(Json::as_f64),
                relevance: num("relevance"),
                confidence: num("confidence"),
                recency: num("recency"),
                frequency: num("frequency"),
            },
        })
    }
}

/// Words dropped from a recall's query beside the English stop words: the subject of every
/// memory ("the user lives in Lisbon").
const SUBJECT: &[&str] = &["user", "users"];

/// The memory index: its text and tags, ranked as `bm25(memories_fts, 1.0, 0.5)`.
const MEMORIES: Index = Index { fts: "memories_fts", column: None, weights: "1.0, 0.5", weight: 1.0 };

/// The query of a recall: the plain-language query of every search (`core::query`) without
/// [`SUBJECT`], unless nothing else is left.
pub(crate) fn compile(text: &str) -> Option<Words> {
    query::compile(text).map(|q| q.without(SUBJECT))
}

struct Candidate {
    memory: Memory,
    bm25: Option<f64>,
    similarity: Option<f64>,
}

/// Moves the recall counters of memories `ids` to `now` (the ones still there).
pub(crate) fn count_ids(sql: &dyn Sql, ids: &[String], now: &str) -> Result<()> {
    for id in ids {
        sql.execute(
            "UPDATE memories SET recall_count = recall_count + 1, recalled_at = ? WHERE id = ?",
            &[now.into(), id.as_str().into()],
        )?;
    }
    Ok(())
}

/// Moves the recall counters of `hits` (and of their copies here) to `now`.
pub(crate) fn count(sql: &dyn Sql, hits: &mut [Hit], now: &str) -> Result<()> {
    for h in hits {
        sql.execute(
            "UPDATE memories SET recall_count = recall_count + 1, recalled_at = ? WHERE seq = ?",
            &[now.into(), Value::Int(h.memory.seq)],
        )?;
        h.memory.recall_count += 1;
        h.memory.recalled_at = Some(now.to_owned());
    }
    Ok(())
}

/// Every candidate memory for `query` (with `vector`, the query's embedding, semantic candidates
/// too), best first: the caller keeps `query.limit` of them. Moves no counter: a recall adds
/// [`count`].
pub(crate) fn rank(meaning: &Meaning<'_>, query: &Query, vector: Option<&[f32]>, now: &Now) -> Result<Vec<Hit>> {
    let (now_ms, now) = (now.ms(), now.iso());
    let mut found = text_candidates(meaning.sql, query, now)?;
    let scale = match vector {
        Some(_) => meaning.scale(ItemKind::Memory)?,
        None => Scale::default(),
    };
    if let Some(v) = vector {
        for (memory, similarity) in vector_candidates(meaning, &query.filter, v, &scale, now)? {
            match found.iter_mut().find(|c| c.memory.seq == memory.seq) {
                Some(c) => c.similarity = Some(similarity),
                // Found by meaning alone: only when near enough (an unrelated query finds nothing).
                None if similarity >= scale.floor() => {
                    found.push(Candidate { memory, bm25: None, similarity: Some(similarity) })
                }
                None => {}
            }
        }
    }
    let best_bm25 = found.iter().filter_map(|c| c.bm25).fold(0.0_f64, f64::max);
    let mut hits: Vec<Hit> = found
        .into_iter()
        .map(|c| {
            let text = match (c.bm25, best_bm25 > 0.0) {
                (Some(b), true) => b / best_bm25,
                _ => 0.0,
            };
            let meaning = c.similarity.map_or(0.0, |s| scale.strength(s));
            let relevance = (text.max(meaning) + 0.1 * text.min(meaning)).min(1.0);
            score(c.memory, text, c.similarity, relevance, now_ms)
        })
        .collect();
    sort::by(&mut hits, |a, b| b.score.total_cmp(&a.score).then(b.memory.seq.cmp(&a.memory.seq)));
    Ok(hits)
}

/// A memory no word of the query matched, as a hit by its `similarity` to the query alone
/// (relevance as [`rank`] gives it, on the memories' `scale`).
pub(crate) fn by_meaning(memory: Memory, similarity: f64, scale: &Scale, now: &Now) -> Hit {
    let relevance = scale.strength(similarity);
    score(memory, 0.0, Some(similarity), relevance, now.ms())
}

fn score(memory: Memory, text: f64, semantic: Option<f64>, relevance: f64, now_ms: i64) -> Hit {
    let confidence = memory.score.unwrap_or(0.5);
    let age_days = (now_ms - parse_iso(&memory.updated_at).unwrap_or(now_ms)).max(0) as f64 / 86_400_000.0;
    let recency = 0.5_f64.powf(age_days / HALF_LIFE_DAYS);
    let frequency = ((1.0 + memory.recall_count as f64).ln() / 11.0_f64.ln()).min(1.0);
    let score = 0.70 * relevance + 0.15 * confidence + 0.10 * recency + 0.05 * frequency;
    let mut why = Vec::new();
    if text > 0.0 {
        why.push(format!("text match {}", two(text)));
    }
    if let Some(s) = semantic {
        why.push(format!("meaning {}", two(s)));
    }
    match memory.score {
        Some(s) => why.push(format!("confidence {}", two(s))),
        None => why.push("confidence unknown (0.50)".to_owned()),
    }
    why.push(format!("changed {} ago ({})", days(age_days), two(recency)));
    why.push(format!("recalled {} times before ({})", memory.recall_count, two(frequency)));
    let signals = Signals { text, semantic, relevance, confidence, recency, frequency };
    Hit { memory, score: (score * 1e4).round() / 1e4, why: why.join(", "), signals }
}

/// `x` with two decimals, formatted with integers (float formatting would pull a large part of
/// the standard library into the wasm).
fn two(x: f64) -> String {
    let n = (x * 100.0).round() as i64;
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", n.abs() / 100, n.abs() % 100)
}

fn days(d: f64) -> String {
    match d {
        d if d < 1.0 / 24.0 => "less than an hour".to_owned(),
        d if d < 1.0 => format!("{} hours", (d * 24.0).round() as i64),
        d if d < 1.5 => "1 day".to_owned(),
        d => format!("{} days", d.round() as i64),
    }
}

/// The best [`CANDIDATES`] memories by text (`core::rank`: FTS5's bm25 at a bounded cost),
/// with their scores. A word of three or more characters that no memory has (in any form) is
/// looked up as a prefix: a word typed in part.
fn text_candidates(sql: &dyn Sql, query: &Query, now: &str) -> Result<Vec<Candidate>> {
    let Some(words) = compile(&query.text) else { return Ok(Vec::new()) };
    let (cond, params) = filter_sql(&query.filter, now);
    let rows = Rows { join: "CROSS JOIN memories m ON m.seq = f.rowid", cond: &cond, params: &params };
    let scope = Scope { words: None, rows: Some(rows) };
    let ranked = rank::rank(sql, &MEMORIES, &scope, &words, Unmatched::Prefix, CANDIDATES as usize)?;
    if ranked.is_empty() {
        return Ok(Vec::new());
    }
    let q =
        format!("SELECT {}, j.key FROM json_each(?) j JOIN memories m ON m.seq = j.value ORDER BY j.key", columns("m"));
    let rows = sql.query(&q, &[rank::rowids(&ranked).into()])?;
    let mut found = Vec::with_capacity(rows.len());
    for r in &rows {
        let bm25 = ranked.get(r.int(WIDTH)? as usize).map(|x| x.score);
        found.push(Candidate { memory: from_row(r, 0)?, bm25, similarity: None });
    }
    Ok(found)
}

/// The memories `filter` selects whose vectors are nearest to `v` (at least the `scale`'s
/// [`Scale::support`]),
/// most similar first. A filter that narrows (a category, a tag, a session) names the memories
/// the index may return; the reach of a limited token only drops the other sessions'
/// `conversation` memories from the nearest of all.
fn vector_candidates(
    meaning: &Meaning<'_>,
    filter: &Filter,
    v: &[f32],
    scale: &Scale,
    now: &str,
) -> Result<Vec<(Memory, f64)>> {
    let sql = meaning.sql;
    let (cond, params) = filter_sql(filter, now);
    let narrowing = Filter { reach: Default::default(), ..filter.clone() } != Filter::default();
    let allowed: Vec<i64> = match narrowing {
        true => {
            let q = format!("SELECT m.seq FROM memories m WHERE {cond} ORDER BY m.seq");
            sql.query(&q, &params)?.iter().map(|r| r.int(0)).collect::<Result<_>>()?
        }
        false => Vec::new(),
    };
    let within = if narrowing { Within::Items(&allowed) } else { Within::All };
    let near = meaning.nearest(ItemKind::Memory, v, within, CANDIDATES as usize, scale.support())?;
    if near.is_empty() {
        return Ok(Vec::new());
    }
    let ids = json_ids(near.iter().map(|n| n.0));
    let q =
        format!("SELECT {} FROM json_each(?) j CROSS JOIN memories m ON m.seq = j.value WHERE {cond}", columns("m"));
    let mut all = vec![Value::Text(ids)];
    all.extend(params);
    let mut scored = Vec::with_capacity(near.len());
    for r in sql.query(&q, &all)? {
        let m = from_row(&r, 0)?;
        if let Some((_, s)) = near.iter().find(|n| n.0 == m.seq) {
            scored.push((m, *s));
        }
    }
    sort::by(&mut scored, |a, b| b.1.total_cmp(&a.1).then(b.0.seq.cmp(&a.0.seq)));
    Ok(scored)
}

#[cfg(test)]
mod tests {
    use super::compile;

    fn fts(q: &str) -> Option<String> {
        compile(q).map(|q| q.fts())
    }

    #[test]
    fn any_content_word_matches() {
        assert_eq!(fts("Where does the user live now?").as_deref(), Some(r#""live""#));
        assert_eq!(fts("food, ox").as_deref(), Some(r#""food" OR "ox""#));
        assert_eq!(fts("the"), Some(r#""the""#.to_owned()));
        assert_eq!(fts("the user's"), Some(r#""user""#.to_owned()));
        assert_eq!(fts("  ?! "), None);
        assert_eq!(fts("a\"b NEAR(x) OR"), Some(r#""b NEAR(x) OR""#.to_owned()));
        assert_eq!(fts("pizza Pizza"), Some(r#""pizza""#.to_owned()));
    }
}
