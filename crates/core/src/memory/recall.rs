//! Ranked recall of memories (docs/REFERENCE.md#memory-ranking).
//!
//! Candidates come from full text (FTS5 over text and tags; any word of the query may match,
//! word forms through the porter stemmer, and prefixes, an exact word counting more than a
//! prefix) and, when a query vector is given, from the nearest vectors of the index kept in
//! memory (`crate::vectors`: no vector is read but those of its best candidates).
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

use super::store::{columns, filter_sql, from_row, Filter, Memory, WIDTH};
use crate::error::Result;
use crate::sql::{Sql, Value};
use crate::time::parse_iso;
use crate::vectors::index::Within;
use crate::vectors::{Kind, Meaning, MIN_SIMILARITY, SUPPORT};

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

/// One recalled memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    pub(crate) memory: Memory,
    /// The combined rank, in [0, 1].
    pub(crate) score: f64,
    /// Why it ranked, in words.
    pub(crate) why: String,
    pub(crate) signals: Signals,
}

const STOPWORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "doing", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "now", "of", "on", "or", "our", "she", "should", "so", "some", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "was",
    "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
    "user", "user's", "users",
];

/// The query's words as an FTS5 query where any of them may match (prefixes included), or
/// `None` when nothing is left to search for. Stop words are dropped unless nothing else is left.
pub(crate) fn compile(text: &str) -> Option<String> {
    let words: Vec<String> =
        text.split(|c: char| !c.is_alphanumeric() && c != '\'').map(|w| w.trim_matches('\'').to_lowercase()).collect();
    let mut terms: Vec<&str> = words.iter().map(String::as_str).filter(|w| !w.is_empty()).collect();
    let content: Vec<&str> = terms.iter().copied().filter(|w| !STOPWORDS.contains(w)).collect();
    if !content.is_empty() {
        terms = content;
    }
    let mut seen = Vec::new();
    terms.retain(|t| {
        let new = !seen.contains(t);
        seen.push(*t);
        new
    });
    let parts: Vec<String> = terms
        .iter()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(|w| {
            let q = w.replace('"', "\"\"");
            // The word itself, and (3+ letters) every word it begins: a document with the
            // word matches both, so it ranks above one that only has a longer word.
            if w.chars().count() >= 3 {
                format!("\"{q}\" OR \"{q}\" *")
            } else {
                format!("\"{q}\"")
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" OR "))
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

/// The best `query.limit` live memories for `query` (with `vector`, the query's embedding,
/// semantic candidates too), best first. Moves no counter: a recall adds [`count`].
pub(crate) fn rank(meaning: &Meaning<'_>, query: &Query, vector: Option<&[f32]>, now: &str) -> Result<Vec<Hit>> {
    let mut found = text_candidates(meaning.sql, query, now)?;
    if let Some(v) = vector {
        for (memory, similarity) in vector_candidates(meaning, &query.filter, v, now)? {
            match found.iter_mut().find(|c| c.memory.seq == memory.seq) {
                Some(c) => c.similarity = Some(similarity),
                // Found by meaning alone: only when near enough (an unrelated query finds nothing).
                None if similarity >= MIN_SIMILARITY => {
                    found.push(Candidate { memory, bm25: None, similarity: Some(similarity) })
                }
                None => {}
            }
        }
    }
    let now_ms = parse_iso(now).unwrap_or(0);
    let best_bm25 = found.iter().filter_map(|c| c.bm25).fold(0.0_f64, f64::max);
    let mut hits: Vec<Hit> = found
        .into_iter()
        .map(|c| {
            let text = match (c.bm25, best_bm25 > 0.0) {
                (Some(b), true) => b / best_bm25,
                _ => 0.0,
            };
            let meaning = c.similarity.map_or(0.0, |s| ((s - SUPPORT) / (1.0 - SUPPORT)).clamp(0.0, 1.0));
            let relevance = (text.max(meaning) + 0.1 * text.min(meaning)).min(1.0);
            score(c.memory, text, c.similarity, relevance, now_ms)
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.memory.seq.cmp(&a.memory.seq)));
    hits.truncate(query.limit.clamp(1, MAX_LIMIT) as usize);
    Ok(hits)
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

fn text_candidates(sql: &dyn Sql, query: &Query, now: &str) -> Result<Vec<Candidate>> {
    let Some(fts) = compile(&query.text) else { return Ok(Vec::new()) };
    let (cond, filter_params) = filter_sql(&query.filter, now);
    let q = format!(
        "SELECT {}, bm25(memories_fts, 1.0, 0.5) FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid
          WHERE memories_fts MATCH ? AND {cond}
          ORDER BY bm25(memories_fts, 1.0, 0.5), m.seq DESC LIMIT ?",
        columns("m")
    );
    let mut params: Vec<Value> = vec![fts.into()];
    params.extend(filter_params);
    params.push(Value::Int(CANDIDATES));
    let rows = sql.query(&q, &params)?;
    rows.iter()
        .map(|r| Ok(Candidate { memory: from_row(r, 0)?, bm25: Some(-r.real(WIDTH)?), similarity: None }))
        .collect()
}

/// The memories `filter` selects whose vectors are nearest to `v` (at least [`SUPPORT`]),
/// most similar first. A filter that narrows (a category, a tag, a session) names the memories
/// the index may return; the reach of a limited token only drops the other sessions'
/// `conversation` memories from the nearest of all.
fn vector_candidates(meaning: &Meaning<'_>, filter: &Filter, v: &[f32], now: &str) -> Result<Vec<(Memory, f64)>> {
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
    let near = meaning.nearest(Kind::Memory, v, within, CANDIDATES as usize, SUPPORT)?;
    if near.is_empty() {
        return Ok(Vec::new());
    }
    let ids = format!("[{}]", near.iter().map(|n| n.0.to_string()).collect::<Vec<_>>().join(","));
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
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.seq.cmp(&a.0.seq)));
    Ok(scored)
}

#[cfg(test)]
mod tests {
    use super::compile;

    #[test]
    fn any_content_word_matches_with_prefixes() {
        assert_eq!(compile("Where does the user live now?").as_deref(), Some("\"live\" OR \"live\" *"));
        assert_eq!(compile("food, ox").as_deref(), Some("\"food\" OR \"food\" * OR \"ox\""));
        assert_eq!(compile("the"), Some("\"the\" OR \"the\" *".to_owned()));
        assert_eq!(compile("  ?! "), None);
        assert_eq!(compile("a\"b NEAR(x) OR"), Some("\"b\" OR \"near\" OR \"near\" * OR \"x\"".to_owned()));
        assert_eq!(compile("pizza Pizza"), Some("\"pizza\" OR \"pizza\" *".to_owned()));
    }
}
