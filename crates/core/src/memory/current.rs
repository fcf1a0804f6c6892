//! What holds now among recalled facts: when two memories that hold now say the same kind of
//! thing about the same subject and nothing marks one as replacing the other, the newer ranks
//! first, so an outdated fact never ranks above its correction ("lives in Paris", then "moved to
//! Berlin": whichever matched the query better, Berlin comes first).
//!
//! "The same subject" is read from the two facts themselves, never from the query's wording: with
//! embeddings, the cosine similarity of their vectors ([`SAME_SUBJECT`] of the way from the
//! memories' baseline to 1, [`Scale`]: 0.3 with all-MiniLM-L6-v2, where 94 % of the bench's
//! fact/correction pairs reach it); without, the share of content words (their first five letters,
//! stop words left out) the shorter fact has in common with the other ([`SAME_WORDS`]).
//!
//! A query that names a fact keeps it above a newer one ([`names`]): one that is not a question
//! and whose every content word the fact has ("knee surgery", "working remotely") finds that
//! fact first, even when a newer fact near it ("stopped running after a knee injury") would
//! otherwise take its place. A question may still find the correction first ("what car does my
//! sister drive?": "sold the Volvo" above "drives a red Volvo car").

use super::recall::{self, Hit};
use super::store::{columns, filter_sql, from_row};
use crate::error::Result;
use crate::query::is_stopword;
use crate::sort;
use crate::sql::{json_ids, Sql, Value};
use crate::time::Now;
use crate::vectors::code::{cosine, decode};
use crate::vectors::index::{ItemKind, Within};
use crate::vectors::{Meaning, Scale};

/// How far from the memories' baseline to 1 the cosine similarity of two facts' vectors is for
/// them to be about the same subject (0.3 at all-MiniLM-L6-v2's baseline 0.2).
pub(crate) const SAME_SUBJECT: f64 = 0.125;

/// Least cosine similarity of two facts about the same subject on `scale`.
fn same_subject(scale: &Scale) -> f64 {
    scale.support() + (1.0 - scale.support()) * SAME_SUBJECT
}
/// Least share of shared content words, when a fact has no vector.
pub(crate) const SAME_WORDS: f64 = 0.5;
/// Least relevance to the query, relative to the older fact's, for a newer fact to move above
/// it: a correction needs to answer the question too, not just be near the old fact.
pub(crate) const LEAST_RELEVANCE: f64 = 0.3;
/// Or, when both were found by meaning, the least similarity to the query relative to the older
/// fact's (a correction seldom repeats the question's words: "sold the Zoe" for "which car").
pub(crate) const LEAST_MEANING: f64 = 0.7;

/// The content words of a fact, cut to their first five letters (a light stem: "lives"/"lived").
fn words(text: &str) -> Vec<String> {
    let mut words = phrase(text);
    sort::ascending(&mut words);
    words.dedup();
    words
}

/// The share of content words the shorter of `a` and `b` has in common with the other.
fn shared_words(a: &[String], b: &[String]) -> f64 {
    let common = a.iter().filter(|w| b.binary_search(w).is_ok()).count() as f64;
    common / a.len().min(b.len()).max(1) as f64
}

/// The stored vectors of memories `seqs` (those that have one, by the model in use: another
/// model's are not comparable).
fn vectors(sql: &dyn Sql, seqs: &[i64]) -> Result<Vec<(i64, Vec<f32>)>> {
    let mut out = Vec::new();
    let rows = sql.query(
        "SELECT v.item, v.vector FROM json_each(?) j CROSS JOIN vectors v ON v.kind = ? AND v.item = j.value
          WHERE v.model = (SELECT model FROM embedding_model WHERE id = 1)",
        &[json_ids(seqs.iter().copied()).into(), Value::Int(ItemKind::Memory.number())],
    )?;
    for r in rows {
        if let Some(Value::Blob(b)) = r.0.get(1) {
            out.push((r.int(0)?, decode(b)));
        }
    }
    Ok(out)
}

/// Most newer neighbours looked up for each hit by [`with_corrections`].
const NEIGHBOURS: usize = 5;
/// Most hits whose corrections are looked up: each lookup is a search of the index (its codes
/// in memory, then the vectors of its best candidates read for the exact cosine), so a recall
/// pays for a few, not for every hit.
const CORRECTED: usize = 3;

/// Adds to `hits` (best first) the newer facts about the subject of each of the first `n` (at
/// most [`CORRECTED`]) that
/// the query did not find (a correction seldom shares the question's words, nor is it always
/// near the question: "sold the Zoe and bought an ID.3" for "which car do I drive these
/// days?"): each hit's own nearest vectors about the same subject ([`SAME_SUBJECT`]), holding now
/// within the recall's filter (`asked`), stated later. They count by their similarity to the
/// `query` vector and stay
/// only if [`newer_first`] moves them above the fact they correct: a query unrelated to
/// everything still finds nothing. Then [`newer_first`] over all of them.
pub(crate) fn with_corrections(
    meaning: &Meaning<'_>,
    hits: &mut Vec<Hit>,
    asked: &recall::Query,
    query: &[f32],
    n: usize,
    now: &Now,
) -> Result<()> {
    let (filter, query_text) = (&asked.filter, asked.text.as_str());
    let sql = meaning.sql;
    let n = n.min(CORRECTED);
    let firsts: Vec<i64> = hits.iter().take(n).map(|h| h.memory.seq).collect();
    let own = vectors(sql, &firsts)?;
    let mut found: Vec<i64> = Vec::new();
    let scale = meaning.scale(ItemKind::Memory)?;
    for (seq, v) in &own {
        for (item, _) in meaning.nearest(ItemKind::Memory, v, Within::All, NEIGHBOURS, same_subject(&scale))? {
            if item != *seq && !hits.iter().any(|h| h.memory.seq == item) && !found.contains(&item) {
                found.push(item);
            }
        }
    }
    let mut extra = Vec::new();
    if !found.is_empty() {
        let (cond, params) = filter_sql(filter, now.iso());
        let q = format!(
            "SELECT {} FROM json_each(?) j CROSS JOIN memories m ON m.seq = j.value WHERE {cond}",
            columns("m")
        );
        let mut all: Vec<Value> = vec![json_ids(found.iter().copied()).into()];
        all.extend(params);
        let theirs = vectors(sql, &found)?;
        for r in sql.query(&q, &all)? {
            let m = from_row(&r, 0)?;
            let Some((_, v)) = theirs.iter().find(|(seq, _)| *seq == m.seq) else { continue };
            let newer = hits.iter().take(n).any(|h| h.memory.valid_from < m.valid_from);
            if newer && v.len() == query.len() {
                extra.push(m.seq);
                hits.push(recall::by_meaning(m, cosine(query, v), &scale, now));
            }
        }
    }
    let moved = newer_first(sql, hits, Some(&scale), query_text)?;
    hits.retain(|h| !extra.contains(&h.memory.seq) || moved.contains(&h.memory.seq));
    Ok(())
}

/// Reorders `hits` (best first) so that of two facts about the same subject the newer (by
/// `validFrom`) comes first: the newer takes the place of the older one most like it (the fact it
/// corrects), if that ranks above it, and its score, and each says why. Returns the seqs of the
/// hits it moved. `scale`: the memories' (with embeddings); `query`: the words of the recall.
pub(crate) fn newer_first(sql: &dyn Sql, hits: &mut Vec<Hit>, scale: Option<&Scale>, query: &str) -> Result<Vec<i64>> {
    let mut moved = Vec::new();
    if hits.len() < 2 {
        return Ok(moved);
    }
    let seqs: Vec<i64> = hits.iter().map(|h| h.memory.seq).collect();
    let vectors = vectors(sql, &seqs)?;
    let vector = |h: &Hit| vectors.iter().find(|(seq, _)| *seq == h.memory.seq).map(|(_, v)| v.as_slice());
    // Each fact's content words once, not once per pair it is compared in.
    let words: Vec<(i64, Vec<String>)> = hits.iter().map(|h| (h.memory.seq, words(&h.memory.content))).collect();
    let words_of = |h: &Hit| words.iter().find(|(seq, _)| *seq == h.memory.seq).map_or(&[][..], |(_, w)| w.as_slice());
    // How alike two facts are, and whether that is enough for one subject.
    let same = same_subject(scale.unwrap_or(&Scale::default()));
    // By seq, as the words: the loop below moves hits.
    let named: Vec<i64> = hits.iter().filter(|h| names(query, &h.memory.content)).map(|h| h.memory.seq).collect();
    let is_named = |h: &Hit| named.contains(&h.memory.seq);
    let likeness = |a: &Hit, b: &Hit| match (vector(a), vector(b)) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            let c = cosine(x, y);
            (c, c >= same)
        }
        _ => {
            let w = shared_words(words_of(a), words_of(b));
            (w, w >= SAME_WORDS)
        }
    };
    // Facts stored in the same instant (one batch) are not newer than one another.
    let newer = |a: &Hit, b: &Hit| a.memory.valid_from > b.memory.valid_from;
    for j in 1..hits.len() {
        let relevant = |i: usize| {
            let (new, old) = (&hits[j].signals, &hits[i].signals);
            let meaning = matches!((new.semantic, old.semantic), (Some(n), Some(o)) if n >= LEAST_MEANING * o);
            meaning || new.relevance >= LEAST_RELEVANCE * old.relevance
        };
        // Nothing above it that it could take the place of: nothing to look for (the common
        // case, at the cost the rule had before it was narrowed).
        if !(0..j).any(|i| newer(&hits[j], &hits[i]) && relevant(i) && likeness(&hits[j], &hits[i]).1) {
            continue;
        }
        // The fact a newer one corrects is the older fact most like it, wherever it ranks: a
        // newer fact near several older ones ("switched to a Pixel" near "has an iPhone" and
        // "hates phone calls") takes the place of that one only, never of another it is merely
        // near.
        let corrected = (0..hits.len())
            .filter(|&i| i != j && newer(&hits[j], &hits[i]))
            .map(|i| (i, likeness(&hits[j], &hits[i])))
            .filter(|(_, (_, same))| *same)
            .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
            .map(|(i, _)| i);
        let Some(i) = corrected.filter(|&i| i < j && relevant(i)) else {
            continue;
        };
        if is_named(&hits[i]) && !is_named(&hits[j]) {
            continue;
        }
        let mut hit = hits.remove(j);
        let older = &mut hits[i];
        hit.score = hit.score.max(older.score);
        hit.why.push_str(&format!(", newer than {}, which says the same kind of thing", older.memory.id));
        older.why.push_str(&format!(", older than {}", hit.memory.id));
        moved.push(hit.memory.seq);
        hits.insert(i, hit);
    }
    Ok(moved)
}

/// The content words of `text` cut to their first four letters (a stem loose enough for word
/// forms: "working"/"works", "remotely"/"remote").
fn stems(text: &str) -> Vec<String> {
    phrase(text).into_iter().map(|w| w.chars().take(4).collect()).collect()
}

/// Words that open a question (a query opening with one asks about a fact, it does not name one).
const QUESTION_WORDS: [&str; 24] = [
    "what", "which", "where", "when", "who", "whom", "whose", "why", "how", "does", "do", "did", "is", "are", "was",
    "were", "can", "could", "has", "have", "had", "will", "would", "should",
];

/// Whether `query` names `fact`: it is no question (no question mark, no question word first) and
/// the fact has every one of its content words ([`stems`]); a query without content words names
/// nothing.
fn names(query: &str, fact: &str) -> bool {
    let first = query.split_whitespace().next().unwrap_or("").to_lowercase();
    if query.contains('?') || QUESTION_WORDS.contains(&first.as_str()) {
        return false;
    }
    let (asked, have) = (stems(query), stems(fact));
    !asked.is_empty() && asked.iter().all(|w| have.contains(w))
}

/// Least content words a query has for it to quote a fact: fewer say too little to single one
/// out, unless they are the whole fact.
pub(crate) const QUOTE_WORDS: usize = 3;

/// The content words of a text in their order, cut as [`words`] cuts them.
fn phrase(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| !w.is_empty() && w != "s" && w != "user" && !is_stopword(w))
        .map(|w| w.chars().take(5).collect())
        .collect()
}

/// Moves the fact `query` quotes to the front of `hits` (best first), whatever reordering
/// ranked it lower: a query that states a stored fact finds that fact first. The query quotes a
/// fact when its content words ([`phrase`]) are a run of the fact's, in order, and they are at
/// least [`QUOTE_WORDS`] or the whole fact; and exactly one hit is quoted so. A question about
/// a fact is no quote ("what car does my sister drive" of "my sister drives a red Volvo car"):
/// a correction may still rank above what it corrects. The quoted fact takes the first place's
/// score and says why.
pub(crate) fn quoted_first(query: &str, hits: &mut [Hit]) {
    let asked = phrase(query);
    if asked.is_empty() {
        return;
    }
    let quotes = |h: &Hit| {
        let fact = phrase(&h.memory.content);
        let long_enough = asked.len() >= QUOTE_WORDS || asked.len() == fact.len();
        long_enough && fact.windows(asked.len()).any(|run| run == asked.as_slice())
    };
    let mut quoted = hits.iter().enumerate().filter(|(_, h)| quotes(h)).map(|(i, _)| i);
    let (Some(i), None) = (quoted.next(), quoted.next()) else { return };
    if i == 0 {
        return;
    }
    let first = hits[0].score;
    hits[..=i].rotate_right(1);
    let hit = &mut hits[0];
    hit.score = hit.score.max(first);
    hit.why.push_str(", the query quotes it");
}

#[cfg(test)]
mod tests {
    use super::{shared_words, words};

    #[test]
    fn shared_words_of_the_shorter_fact() {
        let a = words("The user lives in Paris.");
        let b = words("The user still lives in Paris but works in Berlin.");
        // A ratio: compared within a tolerance.
        let near = |x: f64, want: f64| (x - want).abs() < 1e-12;
        assert!(near(shared_words(&a, &b), 1.0));
        let c = words("The user likes green tea.");
        assert!(near(shared_words(&a, &c), 0.0));
        assert!(near(shared_words(&words("the and of"), &c), 0.0));
    }
}
