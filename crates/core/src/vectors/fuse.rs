//! Two ranked lists made one: reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009). An
//! item scores `weight / (K + rank)` in each list it is in (ranks from 1), summed. Ranks, not
//! scores, because bm25 and cosine are on scales that do not compare; an item both lists found
//! comes before one only one list found. The weights were set by measurement with
//! all-MiniLM-L6-v2 (`bench/similarity.mjs`, questions over the conversations corpus, the
//! full-text list an OR of the question's words ranked by bm25): meaning weighed twice the words
//! ranks the answering turn higher (MRR@10 0.42 against 0.40 at 1 : 1 and 0.38 at 1 : 0.5, the
//! same hit@10 of 0.53; words alone 0.32, meaning alone 0.43 but fewer hits of rare words).

/// The constant of reciprocal rank fusion (60, as the paper and most search engines use).
pub(crate) const K: f64 = 60.0;
/// Weight of the full-text list.
pub(crate) const LEXICAL_WEIGHT: f64 = 1.0;
/// Weight of the list by meaning.
pub(crate) const SEMANTIC_WEIGHT: f64 = 2.0;

/// The items of `lexical` and `semantic` (each best first, each item once), fused, best first,
/// at most `n`. Ties: the better full-text rank first, then the better rank by meaning.
pub(crate) fn fuse<T: PartialEq + Clone>(lexical: &[T], semantic: &[T], n: usize) -> Vec<T> {
    let mut all: Vec<(T, Option<usize>, Option<usize>)> =
        lexical.iter().enumerate().map(|(i, t)| (t.clone(), Some(i + 1), None)).collect();
    for (i, t) in semantic.iter().enumerate() {
        match all.iter_mut().find(|(u, _, _)| u == t) {
            Some(found) => found.2 = Some(i + 1),
            None => all.push((t.clone(), None, Some(i + 1))),
        }
    }
    let score = |lex: Option<usize>, sem: Option<usize>| {
        lex.map_or(0.0, |r| LEXICAL_WEIGHT / (K + r as f64)) + sem.map_or(0.0, |r| SEMANTIC_WEIGHT / (K + r as f64))
    };
    all.sort_by(|a, b| {
        score(b.1, b.2)
            .total_cmp(&score(a.1, a.2))
            .then(a.1.unwrap_or(usize::MAX).cmp(&b.1.unwrap_or(usize::MAX)))
            .then(a.2.unwrap_or(usize::MAX).cmp(&b.2.unwrap_or(usize::MAX)))
    });
    all.into_iter().take(n).map(|(t, _, _)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::fuse;

    #[test]
    fn both_lists_first_then_meaning_weighed_twice() {
        assert_eq!(fuse(&["a", "b", "c"], &["x", "c", "y"], 10), vec!["c", "x", "y", "a", "b"]);
        // A first by words alone ranks with a third by meaning alone: 1/61 vs 2/63 < 2/62.
        assert_eq!(fuse(&["a"], &["x", "y", "z"], 10), vec!["x", "y", "z", "a"]);
        assert_eq!(fuse(&["a", "b"], &[], 10), vec!["a", "b"], "without meaning: the full-text order");
        assert_eq!(fuse::<&str>(&[], &["x", "y"], 1), vec!["x"]);
    }
}
