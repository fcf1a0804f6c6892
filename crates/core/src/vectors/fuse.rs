//! Two ranked lists made one: reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009). An
//! item scores `weight / (K + rank)` in each list it is in (ranks from 1), summed. Ranks, not
//! scores, because bm25 and cosine are on scales that do not compare; an item both lists found
//! comes before one only one list found, and with equal weights the first of either list ties
//! (the full-text one first). The weights are the knobs a measurement with the real model sets.

/// The constant of reciprocal rank fusion (60, as the paper and most search engines use).
pub(crate) const K: f64 = 60.0;
/// Weight of the full-text list.
pub(crate) const LEXICAL_WEIGHT: f64 = 1.0;
/// Weight of the list by meaning.
pub(crate) const SEMANTIC_WEIGHT: f64 = 1.0;

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
    fn both_lists_first_then_alternating_full_text_first() {
        assert_eq!(fuse(&["a", "b", "c"], &["x", "c", "y"], 10), vec!["c", "a", "x", "b", "y"]);
        assert_eq!(fuse(&["a", "b"], &[], 10), vec!["a", "b"], "without meaning: the full-text order");
        assert_eq!(fuse::<&str>(&[], &["x", "y"], 1), vec!["x"]);
    }
}
