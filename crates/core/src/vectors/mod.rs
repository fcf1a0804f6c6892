//! Meaning for every store: the vectors of memories, messages and search entries (made after the
//! answer that wrote them, `embed`), and an index of them kept in the object's memory that
//! answers "the nearest rows to this query" without reading every vector.
//!
//! The index (`index`) holds one sign bit per dimension of each vector (at most 512, `code`),
//! loaded from SQLite's code index alone when a kind is first searched after the object starts,
//! and following every later write of a vector through `vector_log` (migration 0013) before each
//! search: whoever wrote a vector, a search sees it (invariant 39). A search takes the
//! [`RERANK`] items whose codes are nearest to the query's, reads their vectors by seq and ranks
//! them by exact cosine; a hit found by meaning alone needs the `Scale::floor` of the object's own
//! vectors.
//!
//! `messages` fuses it with full-text search of messages; `fuse` is the fusion.
//!
//! # Its modules
//!
//! | module | what it is for |
//! |---|---|
//! | `mod.rs` | `Vectors` (the indexes of one agent, kept in the DO instance, and recent query vectors), `Meaning` (what a search by meaning runs against: `query`, `nearest` = index candidates, then exact cosine of their stored vectors; `reranked`, the re-ranker's order of the best hits), `adopt` (at start: record the model in use; a new model queues every row again), `Scale` (the floor and support from a kind's baseline, measured from its own vectors), `RERANK` |
//! | `code.rs` | a vector as stored (little-endian `f32`s), its sign code (one bit per dimension, at most 512), hamming distance, cosine, the FNV-1a hash of an embedded text |
//! | `index.rs` | `Index`: one kind's codes in memory (sorted by seq, with a scope id each), `load` from the code index of SQLite, `follow` of `vector_log` before each search, `nearest` by hamming distance (a histogram pass, no sort of all items), `MAX_ITEMS` |
//! | `embed.rs` | `run`: every row queued in `unembedded` embedded in batches after the answer (`CALLS` calls of `BATCH` texts at once; a text embedded before reuses its vector; a row changed during the call waits for its new text); `beginning`, what of a long text is embedded; a turn is embedded alone (the previous turn, the role or the date before it measured worse: docs/REFERENCE.md#turn-context) |
//! | `fuse.rs` | reciprocal rank fusion of a full-text list and a list by meaning |
//! | `messages.rs` | message search by words and meaning (a session, or across the sessions a reach opens), fused |
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 39. **Whoever writes a row, its vector follows, and a search sees every vector stored.**
//!     Triggers of migration 0013 queue every new or changed memory, message and search entry in
//!     `unembedded` (while a model is recorded in `embedding_model`), drop the vector of a changed
//!     or deleted text, and log every write of `vectors` in `vector_log`; an index kept in memory
//!     applies the log after its mark before each search (or loads again when the log was trimmed
//!     past it), so an import, a fork, a delete or an erase needs no code of its own here.
//! 40. **A hit by meaning alone passes the `Scale::floor` of its kind**, measured from the
//!     object's own vectors so that it follows the model (`bench/similarity.mjs`, two models): a
//!     query unrelated to everything finds nothing, and `memory_forget {query}` forgets nothing
//!     rather than the nearest unrelated memory.

pub(crate) mod code;
pub(crate) mod embed;
pub(crate) mod fuse;
pub(crate) mod index;
pub(crate) mod messages;

use std::cell::RefCell;
use std::rc::Rc;

use code::{cosine, decode, sign_code};
pub use embed::{PARTS, PART_BYTES};
pub use index::ItemKind;
use index::{Followed, Index, Within, MAX_ITEMS};

use crate::blobs::BoxFuture;
use crate::error::{Result, Warned};
use crate::events::Events;
use crate::llm::embeddings::{embed_one, EmbeddingsConfig};
use crate::llm::rerank::{self, RerankConfig};
use crate::llm::Transport;
use crate::sort;
use crate::sql::{atomically, json_ids, Sql, Value};

/// How much a similarity means in one object, for one kind of row: its **baseline**, how similar
/// two of its rows are on average (the mean cosine over pairs of a spread sample of
/// [`SAMPLE`] stored vectors). It is a property of the model and of what the object holds: all
/// vectors of a model share a direction (all-MiniLM-L6-v2: two facts of one user 0.20 on average,
/// two turns of our corpus 0.08, of a LoCoMo conversation, whose turns all begin with a speaker's
/// name, 0.35; token vectors averaged, a static model, 0.59–0.76), and a cosine says something only
/// above it. Measured again when the kind's items double or halve. With fewer than
/// [`MIN_SAMPLE`] vectors stored, [`DEFAULT_BASELINE`] (all-MiniLM-L6-v2's, facts of one user).
///
/// - A row found by meaning alone (no word of the query matched it) needs [`Scale::floor`]: the
///   baseline and [`ABOVE_BASELINE`] of the way from it to 1.
/// - Beside a word match, a similarity counts from the baseline ([`Scale::support`]), as
///   [`Scale::strength`] from 0 at the baseline to 1 at the same text.
///
/// Measured by `bench/similarity.mjs` (docs/REFERENCE.md#search-by-meaning): with
/// all-MiniLM-L6-v2, questions about nothing stored find nothing by meaning alone in 100 % of
/// cases on facts (floor 0.43), 92 % on our conversations (0.34) and 100 % on LoCoMo (0.54),
/// where the fixed 0.42 it replaces kept them out too; with the static model, 100 %, 86 % and 100 %
/// (the fixed 0.42: 25 %, 0 % and 6 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Scale {
    baseline: f64,
}

/// The baseline of a store too small to measure: all-MiniLM-L6-v2's between facts of one user,
/// which makes the floor 0.42 (the constant measured with that model before the floor followed
/// the model).
pub(crate) const DEFAULT_BASELINE: f64 = 0.2;

/// How far from the baseline to 1 a hit by meaning alone must be: 0.275 gives all-MiniLM-L6-v2's
/// measured 0.42 on facts (baseline 0.2).
pub(crate) const ABOVE_BASELINE: f64 = 0.275;

/// Vectors read to measure a baseline (at 384 dimensions, 384 KB).
pub(crate) const SAMPLE: usize = 256;

/// Fewer stored vectors than this: [`DEFAULT_BASELINE`].
pub(crate) const MIN_SAMPLE: usize = 16;

impl Scale {
    /// The scale of a store whose rows are `baseline` similar on average (clamped to [0, 0.95]:
    /// a baseline near 1 would leave no room above it).
    pub(crate) fn new(baseline: f64) -> Scale {
        Scale { baseline: if baseline.is_finite() { baseline.clamp(0.0, 0.95) } else { DEFAULT_BASELINE } }
    }

    /// Least similarity of a row found by meaning alone.
    pub(crate) fn floor(&self) -> f64 {
        self.baseline + (1.0 - self.baseline) * ABOVE_BASELINE
    }

    /// Least similarity that counts beside a word match.
    pub(crate) fn support(&self) -> f64 {
        self.baseline
    }

    /// `similarity` as evidence: 0 at the baseline (and below), 1 at the same text.
    pub(crate) fn strength(&self, similarity: f64) -> f64 {
        ((similarity - self.baseline) / (1.0 - self.baseline)).clamp(0.0, 1.0)
    }
}

impl Default for Scale {
    fn default() -> Scale {
        Scale::new(DEFAULT_BASELINE)
    }
}

/// The mean cosine over the pairs of `vectors` (each of length 1 after normalizing; none with
/// fewer than [`MIN_SAMPLE`]): `(|Σv|² − n) / (n(n − 1))`, the sum's square without each vector's
/// similarity to itself.
pub(crate) fn baseline(vectors: &[Vec<f32>]) -> Option<f64> {
    let n = vectors.len();
    if n < MIN_SAMPLE {
        return None;
    }
    let dims = vectors.iter().map(Vec::len).max()?;
    let mut sum = vec![0.0_f64; dims];
    let mut counted = 0usize;
    for v in vectors {
        let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
        if norm == 0.0 || v.len() != dims {
            continue;
        }
        counted += 1;
        for (s, x) in sum.iter_mut().zip(v) {
            *s += f64::from(*x) / norm;
        }
    }
    if counted < MIN_SAMPLE {
        return None;
    }
    let k = counted as f64;
    Some((sum.iter().map(|s| s * s).sum::<f64>() - k) / (k * (k - 1.0)))
}

/// Keeps of `near` (item, similarity) the rows found by meaning alone with at least the
/// [`Scale::floor`], and the rows the full-text search found too (`lexical`; `nearest` asked
/// for them from the [`Scale::support`]).
pub(crate) fn evidence<T: PartialEq>(near: Vec<(T, f64)>, lexical: &[T], scale: &Scale) -> Vec<(T, f64)> {
    near.into_iter().filter(|(t, s)| *s >= scale.floor() || lexical.contains(t)).collect()
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
    indexes: RefCell<[Option<Index>; 4]>,
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
    pub fn loaded(&self, kind: ItemKind) -> Option<usize> {
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

    /// The vector of `text` as a query (kept for the next searches of the same text). Boxed, so
    /// its code is made once for its callers (each held a copy: 1.5 KB of wasm).
    pub(crate) fn query<'t>(&'t self, text: &'t str) -> BoxFuture<'t, Result<Rc<[f32]>>> {
        Box::pin(self.query_vector(text))
    }

    async fn query_vector(&self, text: &str) -> Result<Rc<[f32]>> {
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

    /// Runs `f` on the index of `kind`, loaded (or loaded again) and following every write.
    fn with_index<T>(&self, kind: ItemKind, f: impl FnOnce(&mut Index) -> T) -> Result<T> {
        let model = self.embeddings.model.as_str();
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
        Ok(f(slot.as_mut().expect("loaded above")))
    }

    /// The [`Scale`] of `kind` in this object: its baseline measured on a spread sample of its
    /// vectors, kept until the kind's items double or halve.
    pub(crate) fn scale(&self, kind: ItemKind) -> Result<Scale> {
        // The index as loaded, without following the log when it is: a search follows it anyway,
        // and a baseline a few writes behind is the same figure.
        let read = |ix: &Index| {
            let len = ix.len();
            match ix.baseline {
                Some((at, b)) if len <= 2 * at && 2 * len >= at && (at >= MIN_SAMPLE || len < MIN_SAMPLE) => {
                    (Some(b), len, Vec::new())
                }
                _ => (None, len, ix.spread(SAMPLE)),
            }
        };
        let loaded = self.vectors.indexes.borrow()[kind.slot()]
            .as_ref()
            .filter(|ix| ix.model() == self.embeddings.model)
            .map(&read);
        let (kept, len, sample) = match loaded {
            Some(found) => found,
            None => self.with_index(kind, |ix| read(ix))?,
        };
        if let Some(b) = kept {
            return Ok(Scale::new(b));
        }
        let measured = match sample.len() >= MIN_SAMPLE {
            true => baseline(&self.vectors_of(kind, &sample)?.into_iter().map(|(_, v)| v).collect::<Vec<_>>()),
            false => None,
        };
        let b = measured.unwrap_or(DEFAULT_BASELINE);
        if let Some(ix) = self.vectors.indexes.borrow_mut()[kind.slot()].as_mut() {
            ix.baseline = Some((len, b));
        }
        Ok(Scale::new(b))
    }

    /// The stored vectors of `items` of `kind` made by the model in use (the missing left out).
    fn vectors_of(&self, kind: ItemKind, items: &[i64]) -> Result<Vec<(i64, Vec<f32>)>> {
        let ids = json_ids(items.iter().copied());
        // CROSS JOIN keeps the items outside: each is one index lookup (with a plain JOIN
        // SQLite may scan every vector of the kind and probe the list for each).
        let rows = self.sql.query(
            "SELECT v.item, v.vector FROM json_each(?) j CROSS JOIN vectors v ON v.kind = ? AND v.item = j.value
              WHERE v.model = ?",
            &[ids.into(), Value::Int(kind.number()), self.embeddings.model.as_str().into()],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let Some(Value::Blob(b)) = r.0.get(1) else { continue };
            out.push((r.int(0)?, decode(b)));
        }
        Ok(out)
    }

    /// The (at most) `n` rows of `kind` within `within` most similar to `query`, with their
    /// cosine similarity (at least `min`), most similar first (ties: the newer first).
    pub(crate) fn nearest(
        &self,
        kind: ItemKind,
        query: &[f32],
        within: Within<'_>,
        n: usize,
        min: f64,
    ) -> Result<Vec<(i64, f64)>> {
        let candidates = self.with_index(kind, |ix| ix.nearest(&sign_code(query), within, RERANK.max(4 * n)))?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut out: Vec<(i64, f64)> = self
            .vectors_of(kind, &candidates)?
            .into_iter()
            .map(|(item, v)| (item, cosine(query, &v)))
            .filter(|(_, s)| *s >= min)
            .collect();
        sort::by(&mut out, |a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
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
                for (kind, table) in [
                    (ItemKind::Memory, "memories"),
                    (ItemKind::Message, "messages"),
                    (ItemKind::Entry, "search_entries"),
                ] {
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
    use super::index::{Index, ItemKind, Within};
    use super::{baseline, Scale, DEFAULT_BASELINE, MIN_SAMPLE, RERANK};

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
        let mut ix = Index::empty(ItemKind::Memory, "m", ITEMS);
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

    /// The baseline is the mean cosine over pairs, whatever the vectors' lengths: about 0 for
    /// vectors in no common direction, about `c² / (c² + 1)` for vectors sharing a direction of
    /// weight `c` (noise of length ~1 besides); the floor and support follow it.
    #[test]
    fn the_baseline_is_the_mean_similarity_of_pairs_and_the_floor_follows_it() {
        const DIMS: usize = 384;
        let mut noise = Noise(0x2545_f491_4f6c_dd1d);
        let common: Vec<f32> = (0..DIMS).map(|_| noise.next()).collect();
        let norm = common.iter().map(|x| x * x).sum::<f32>().sqrt();
        let mut draw = |weight: f32| -> Vec<Vec<f32>> {
            (0..256)
                .map(|_| {
                    let v: Vec<f32> = (0..DIMS).map(|_| noise.next() * 3.0_f32.sqrt()).collect();
                    let n = (v.iter().map(|x| x * x).sum::<f32>()).sqrt();
                    v.iter().zip(&common).map(|(x, c)| 2.0 * x / n + weight * c / norm).collect()
                })
                .collect()
        };
        // Noise of length 2 and a shared direction of length 0, 2, 4: pairs 0, 0.5, 0.8 alike.
        for (weight, expected) in [(0.0, 0.0), (2.0, 0.5), (4.0, 0.8)] {
            let vs = draw(weight);
            let b = baseline(&vs).expect("enough vectors");
            assert!((b - expected).abs() < 0.03, "weight {weight}: baseline {b}, expected {expected}");
            let pairs: Vec<f64> = (0..40).map(|i| cosine(&vs[i], &vs[i + 100])).collect();
            let mean = pairs.iter().sum::<f64>() / pairs.len() as f64;
            assert!((b - mean).abs() < 0.05, "weight {weight}: baseline {b}, sampled pairs {mean}");
            let scale = Scale::new(b);
            assert!(scale.floor() > b && scale.floor() < 1.0);
            assert!((scale.strength(b) - 0.0).abs() < 1e-9 && (scale.strength(1.0) - 1.0).abs() < 1e-9);
        }
        assert!(Scale::new(0.8).floor() > Scale::new(0.5).floor() + 0.1, "the floor rises with the baseline");
        assert_eq!(baseline(&draw(2.0)[..MIN_SAMPLE - 1]), None, "too few to measure");
        assert!((Scale::default().floor() - 0.42).abs() < 1e-9, "the default: all-MiniLM-L6-v2's measured floor");
        assert!((Scale::new(DEFAULT_BASELINE).support() - 0.2).abs() < 1e-9);
        assert_eq!(Scale::new(f64::NAN), Scale::default());
    }
}
