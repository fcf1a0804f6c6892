//! Meaning for every store: the vectors of memories, messages and search entries (made after the
//! answer that wrote them, `embed`), and an index of them kept in the object's memory that
//! answers "the nearest rows to this query" without reading every vector.
//!
//! The index (`index`) holds one sign bit per dimension of each vector (at most 512, `code`),
//! loaded from SQLite's code index alone when a kind is first searched after the object starts,
//! and following every later write of a vector through `vector_log` (migration 0013) before each
//! search: whoever wrote a vector, a search sees it (invariant 39). A search takes the
//! [`RERANK`] items whose codes are nearest to the query's, reads their vectors by seq and ranks
//! them by exact cosine; a hit found by meaning alone needs [`MIN_SIMILARITY`].
//!
//! `messages` fuses it with full-text search of messages; `fuse` is the fusion.

pub(crate) mod code;
pub(crate) mod embed;
pub(crate) mod fuse;
pub(crate) mod index;
pub(crate) mod messages;

use std::cell::RefCell;
use std::rc::Rc;

use code::{cosine, decode, sign_code};
pub use index::Kind;
use index::{Followed, Index, Within, MAX_ITEMS};

use crate::error::{Result, Warned};
use crate::events::Events;
use crate::llm::embeddings::{embed_one, EmbeddingsConfig};
use crate::llm::rerank::{self, RerankConfig};
use crate::llm::Transport;
use crate::sql::{atomically, json_ids, Sql, Value};

/// Least cosine similarity of a row found by meaning alone (no word of the query matched it).
/// Measured with all-MiniLM-L6-v2 (`bench/similarity.mjs`, docs/REFERENCE.md#search-by-meaning):
/// questions about nothing stored reach at most 0.41 to the nearest of 1,113 facts and turns
/// (median 0.27), so at 0.42 they find nothing, while 65 % of questions still reach the fact that
/// answers them by meaning alone (those that share a word with it are found by it anyway).
pub const MIN_SIMILARITY: f64 = 0.42;

/// Least cosine similarity counted as evidence beside a word match (a row the full-text search
/// found too): below it, a similarity says nothing (the nearest unrelated text of a question
/// measures 0.2 and more in 95 % of cases).
pub const SUPPORT: f64 = 0.2;

/// Keeps of `near` (item, similarity) the rows found by meaning alone with at least
/// [`MIN_SIMILARITY`], and the rows the full-text search found too (`lexical`) with at least
/// [`SUPPORT`] (what `nearest` asked for).
pub(crate) fn evidence<T: PartialEq>(near: Vec<(T, f64)>, lexical: &[T]) -> Vec<(T, f64)> {
    near.into_iter().filter(|(t, s)| *s >= MIN_SIMILARITY || lexical.contains(t)).collect()
}

/// Candidates whose vectors a search reads and ranks exactly (at least; four times the hits
/// asked for when that is more). Among 20,000 384-dimension vectors in 200 loose topics, the
/// true 10 nearest by cosine are among the 200 nearest codes 94 times in 100 (the test below);
/// a search reads 200 vectors (300 KB at 384 dimensions) whatever the store's size.
pub const RERANK: usize = 200;

/// Query vectors kept by text (a repeated search is not embedded again).
const QUERIES: usize = 32;

/// The indexes of one agent, kept in the Durable Object's instance (the native tests: one per
/// database), and the query vectors of recent searches.
#[derive(Default)]
pub struct Vectors {
    indexes: RefCell<[Option<Index>; 3]>,
    queries: RefCell<Vec<(String, Rc<[f32]>)>>,
    /// Most items per index ([`MAX_ITEMS`] unless a test says less).
    cap: Option<usize>,
}

impl Vectors {
    pub fn new() -> Self {
        Vectors::default()
    }

    /// Indexes that hold at most `cap` items each (tests of the ceiling).
    pub fn with_cap(cap: usize) -> Self {
        Vectors { cap: Some(cap), ..Vectors::default() }
    }

    /// Forgets every index (the erase: the next search loads from what is stored).
    pub fn clear(&self) {
        *self.indexes.borrow_mut() = Default::default();
    }

    /// Bytes the loaded indexes hold.
    pub fn held(&self) -> usize {
        self.indexes.borrow().iter().flatten().map(Index::bytes).sum()
    }

    /// Items the index of `kind` holds, if it is loaded.
    pub fn loaded(&self, kind: Kind) -> Option<usize> {
        self.indexes.borrow()[kind.slot()].as_ref().map(Index::len)
    }
}

/// What a search by meaning runs against: the database, the indexes of the instance, the
/// embeddings model and how to reach it, and where a failure to is logged.
#[derive(Clone, Copy)]
pub(crate) struct Meaning<'a> {
    pub(crate) sql: &'a dyn Sql,
    pub(crate) vectors: &'a Vectors,
    pub(crate) embeddings: &'a EmbeddingsConfig,
    /// The re-ranker of the best hits (`crate::llm::rerank`).
    pub(crate) rerank: &'a RerankConfig,
    pub(crate) transport: &'a dyn Transport,
    pub(crate) events: &'a dyn Events,
}

impl Meaning<'_> {
    /// Whether embeddings are configured.
    pub(crate) fn is_on(&self) -> bool {
        self.embeddings.is_on()
    }

    /// `items` with their first [`RerankConfig::candidates`] re-ordered for `query` by the
    /// re-ranker, if one is configured ([`rerank::order`]: nothing dropped; a failure keeps the
    /// order, with a warning). The model reads the beginning of each text and of the query, as
    /// an embeddings model does ([`embed::beginning`]).
    pub(crate) async fn reranked<T>(&self, query: &str, items: Vec<T>, text: impl Fn(&T) -> &str) -> Warned<Vec<T>> {
        let texts: Vec<&str> = items.iter().take(self.rerank.candidates).map(|i| embed::beginning(text(i))).collect();
        let Warned { value: order, warnings } =
            rerank::order(self.transport, self.rerank, embed::beginning(query), &texts).await;
        Warned { value: rerank::put_in_order(items, &order), warnings }
    }

    /// The vector of `text` as a query (kept for the next searches of the same text).
    pub(crate) async fn query(&self, text: &str) -> Result<Rc<[f32]>> {
        let kept = self.vectors.queries.borrow().iter().find(|(t, _)| t == text).map(|(_, v)| v.clone());
        if let Some(v) = kept {
            return Ok(v);
        }
        let v: Rc<[f32]> = embed_one(self.transport, self.embeddings, text).await?.into();
        let mut queries = self.vectors.queries.borrow_mut();
        if queries.len() >= QUERIES {
            queries.remove(0);
        }
        queries.push((text.to_owned(), v.clone()));
        Ok(v)
    }

    /// The (at most) `n` rows of `kind` within `within` most similar to `query`, with their
    /// cosine similarity (at least `min`), most similar first (ties: the newer first).
    pub(crate) fn nearest(
        &self,
        kind: Kind,
        query: &[f32],
        within: Within<'_>,
        n: usize,
        min: f64,
    ) -> Result<Vec<(i64, f64)>> {
        let model = self.embeddings.model.as_str();
        let candidates = {
            let mut indexes = self.vectors.indexes.borrow_mut();
            let slot = &mut indexes[kind.slot()];
            let cap = self.vectors.cap.unwrap_or(MAX_ITEMS);
            let fresh = match slot.as_mut() {
                Some(ix) if ix.model() == model => ix.follow(self.sql)? == Followed::Lost,
                _ => true,
            };
            if fresh {
                *slot = Some(Index::load(self.sql, kind, model, cap)?);
            }
            let ix = slot.as_ref().expect("loaded above");
            ix.nearest(&sign_code(query), within, RERANK.max(4 * n))
        };
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let ids = json_ids(candidates.iter().copied());
        // CROSS JOIN keeps the candidates outside: each is one index lookup (with a plain JOIN
        // SQLite may scan every vector of the kind and probe the list for each).
        let rows = self.sql.query(
            "SELECT v.item, v.vector FROM json_each(?) j CROSS JOIN vectors v ON v.kind = ? AND v.item = j.value
              WHERE v.model = ?",
            &[ids.into(), Value::Int(kind.number()), model.into()],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let Some(Value::Blob(b)) = r.0.get(1) else { continue };
            let s = cosine(query, &decode(b));
            if s >= min {
                out.push((r.int(0)?, s));
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        out.truncate(n);
        Ok(out)
    }
}

/// Makes the stored state agree with the embeddings model in use, when the object starts:
/// with none, nothing is queued any more; with a model other than the one recorded (or the
/// first), every row without a vector of it waits for one (re-embedded in the background,
/// its old vector used by nothing meanwhile); vectors stored before their codes get them.
pub fn adopt(sql: &dyn Sql, embeddings: &EmbeddingsConfig) -> Result<()> {
    let recorded =
        sql.query_row("SELECT model FROM embedding_model WHERE id = 1", &[])?.map(|r| r.text(0)).transpose()?;
    let model = embeddings.is_on().then_some(embeddings.model.as_str());
    match (model, recorded.as_deref()) {
        (None, None) => Ok(()),
        (None, Some(_)) => atomically(sql, || {
            sql.execute("DELETE FROM embedding_model", &[])?;
            sql.execute("DELETE FROM unembedded", &[])
        }),
        (Some(m), recorded) => atomically(sql, || {
            if recorded != Some(m) {
                sql.execute(
                    "INSERT INTO embedding_model (id, model) VALUES (1, ?)
                     ON CONFLICT (id) DO UPDATE SET model = excluded.model",
                    &[m.into()],
                )?;
                for (kind, table) in
                    [(Kind::Memory, "memories"), (Kind::Message, "messages"), (Kind::Entry, "search_entries")]
                {
                    sql.execute(
                        &format!(
                            "INSERT OR IGNORE INTO unembedded (kind, item) SELECT ?1, t.seq FROM {table} t
                              WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.kind = ?1 AND v.item = t.seq AND v.model = ?2)"
                        ),
                        &[Value::Int(kind.number()), m.into()],
                    )?;
                }
            }
            for r in sql.query("SELECT kind, item, vector FROM vectors WHERE code IS NULL", &[])? {
                let Some(Value::Blob(b)) = r.0.get(2) else { continue };
                sql.execute(
                    "UPDATE vectors SET code = ? WHERE kind = ? AND item = ?",
                    &[
                        Value::Blob(code::code_bytes(&sign_code(&decode(b)))),
                        Value::Int(r.int(0)?),
                        Value::Int(r.int(1)?),
                    ],
                )?;
            }
            Ok(())
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::code::{cosine, sign_code};
    use super::index::{Index, Kind, Within};
    use super::RERANK;

    /// A deterministic stream of numbers in [-1, 1) (xorshift).
    struct Noise(u64);
    impl Noise {
        fn next(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
    }

    /// The true 10 nearest by exact cosine are among the [`RERANK`] nearest codes nearly always,
    /// so the exact re-rank of those finds them: items in topics (a centre plus noise, as
    /// sentence vectors of texts about the same things are), queries near an item.
    #[test]
    fn the_exact_top_10_is_among_the_quantized_candidates() {
        const DIMS: usize = 384;
        const ITEMS: usize = 20_000;
        let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
        let centres: Vec<Vec<f32>> = (0..200).map(|_| (0..DIMS).map(|_| noise.next()).collect()).collect();
        let mut vectors = Vec::with_capacity(ITEMS);
        let mut ix = Index::empty(Kind::Memory, "m", ITEMS);
        for i in 0..ITEMS {
            let c = &centres[i % centres.len()];
            let v: Vec<f32> = c.iter().map(|x| x + 1.5 * noise.next()).collect();
            ix.push_for_test(i as i64 + 1, &sign_code(&v));
            vectors.push(v);
        }
        let (mut found, mut wanted) = (0, 0);
        for q in 0..50 {
            let base = &vectors[(q * 397) % ITEMS];
            let query: Vec<f32> = base.iter().map(|x| x + 1.5 * noise.next()).collect();
            let mut exact: Vec<(usize, f64)> =
                vectors.iter().enumerate().map(|(i, v)| (i, cosine(&query, v))).collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let candidates = ix.nearest(&sign_code(&query), Within::All, RERANK);
            assert_eq!(candidates.len(), RERANK);
            for (i, _) in exact.iter().take(10) {
                wanted += 1;
                found += usize::from(candidates.contains(&(*i as i64 + 1)));
            }
        }
        let recall = found as f64 / wanted as f64;
        eprintln!("recall@10 of the {RERANK} candidates among {ITEMS} items: {recall}");
        assert!(recall >= 0.9, "recall@10 of the candidates {recall}");
    }
}
