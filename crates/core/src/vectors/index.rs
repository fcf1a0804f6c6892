//! The index of one kind of row kept in memory: each item's sign code (`code`), its scope (a
//! message's session, an entry's label) and its seq, sorted by seq. Loaded from the codes in
//! SQLite (never the vectors), it follows every later write of a vector through `vector_log`
//! before each search, so it is never stale; past [`MAX_ITEMS`] it keeps the newest.
//!
//! A search asks for the `k` items whose codes differ from the query's in the fewest bits: a
//! pass over the codes counting distances into a histogram, then one over the distances. The
//! exact cosine of those candidates is the caller's (`Vectors::nearest` reads their vectors).

use std::collections::BTreeMap;

use super::code::{code_words, hamming};
use crate::error::Result;
use crate::sort;
use crate::sql::{Sql, Value};

/// Most items one index holds: at ≤ 76 bytes each (a code of at most 512 bits, an 8-byte seq
/// and a 4-byte scope), 150,000 items take at most 11.4 MB (9.0 MB with 384-dimension vectors,
/// 60 bytes each). Past it the newest are kept; older rows are found by their words only.
pub(crate) const MAX_ITEMS: usize = 150_000;

/// Changes applied one by one when a search follows the log; more are merged in one pass.
const ONE_BY_ONE: usize = 64;

/// The state of an item now: its scope and code, or `None` when it has no vector of the model.
type Live = Option<(Option<String>, Vec<u64>)>;

/// No scope (memories).
const NO_SCOPE: u32 = u32::MAX;

/// The kinds of rows that have vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    Memory,
    /// A message, by its first part (`embed::parts`).
    Message,
    Entry,
    /// A further part of a long message (item: `embed::part_item`).
    Part,
}

impl ItemKind {
    /// The kind as stored (`vectors.kind`).
    pub(crate) fn number(self) -> i64 {
        match self {
            ItemKind::Memory => 1,
            ItemKind::Message => 2,
            ItemKind::Entry => 3,
            ItemKind::Part => 4,
        }
    }

    pub(crate) fn from_number(n: i64) -> Option<ItemKind> {
        [ItemKind::Memory, ItemKind::Message, ItemKind::Entry, ItemKind::Part].into_iter().find(|k| k.number() == n)
    }

    pub(crate) fn slot(self) -> usize {
        self.number() as usize - 1
    }
}

/// Which items a search may return.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Within<'a> {
    /// Every item.
    All,
    /// The items of these scopes (sessions, labels).
    Scopes(&'a [&'a str]),
    /// These items (sorted seqs).
    Items(&'a [i64]),
}

/// What following the log found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Followed {
    /// The index is current.
    Current,
    /// Rows it had not applied were trimmed from the log (or the log was erased): load again.
    Lost,
}

/// One kind's codes, in memory.
pub(crate) struct Index {
    kind: ItemKind,
    model: String,
    /// Code words per item (0 until the first code).
    words: usize,
    ids: Vec<i64>,
    scopes: Vec<u32>,
    codes: Vec<u64>,
    names: Vec<String>,
    by_name: BTreeMap<String, u32>,
    /// The last `vector_log` seq applied.
    mark: i64,
    cap: usize,
    /// Whether older items were left out past the cap.
    pub(crate) capped: bool,
    /// The baseline of its items (`super::Scale`) and how many items it held when measured.
    pub(crate) baseline: Option<(usize, f64)>,
}

impl Index {
    /// An empty index of `kind` for vectors of `model`, holding at most `cap` items.
    pub(crate) fn empty(kind: ItemKind, model: &str, cap: usize) -> Index {
        Index {
            kind,
            model: model.to_owned(),
            words: 0,
            ids: Vec::new(),
            scopes: Vec::new(),
            codes: Vec::new(),
            names: Vec::new(),
            by_name: BTreeMap::new(),
            mark: 0,
            cap,
            capped: false,
            baseline: None,
        }
    }

    /// Loads the codes of `kind` made by `model` (the newest `cap`), reading the code index only.
    pub(crate) fn load(sql: &dyn Sql, kind: ItemKind, model: &str, cap: usize) -> Result<Index> {
        let mut ix = Index::empty(kind, model, cap);
        ix.mark = sql.query_row("SELECT COALESCE(max(seq), 0) FROM vector_log", &[])?.map_or(Ok(0), |r| r.int(0))?;
        let rows = sql.query(
            "SELECT item, scope, code FROM vectors WHERE kind = ? AND model = ? AND code IS NOT NULL
              ORDER BY item DESC LIMIT ?",
            &[Value::Int(kind.number()), model.into(), Value::Int(cap as i64 + 1)],
        )?;
        ix.capped = rows.len() > cap;
        let mut loaded = Vec::with_capacity(rows.len().min(cap));
        for r in rows.iter().take(cap).rev() {
            let Some(Value::Blob(b)) = r.0.get(2) else { continue };
            let Some(code) = code_words(b) else { continue };
            loaded.push((r.int(0)?, r.opt_text(1)?, code));
        }
        for (item, scope, code) in loaded {
            if ix.words == 0 {
                ix.words = code.len();
                ix.codes.reserve(rows.len().min(cap) * code.len());
            }
            if code.len() != ix.words {
                continue;
            }
            let s = ix.scope_id(scope.as_deref());
            ix.ids.push(item);
            ix.scopes.push(s);
            ix.codes.extend_from_slice(&code);
        }
        Ok(ix)
    }

    /// How many items it holds.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// At most `n` of its items, spread evenly over them (oldest to newest).
    pub(crate) fn spread(&self, n: usize) -> Vec<i64> {
        let len = self.ids.len();
        if len <= n {
            return self.ids.clone();
        }
        (0..n).map(|i| self.ids[i * len / n]).collect()
    }

    /// Bytes its items take in memory (codes, seqs, scopes).
    pub(crate) fn bytes(&self) -> usize {
        self.codes.len() * 8 + self.ids.len() * 8 + self.scopes.len() * 4
    }

    fn scope_id(&mut self, scope: Option<&str>) -> u32 {
        let Some(name) = scope else { return NO_SCOPE };
        if let Some(id) = self.by_name.get(name) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.by_name.insert(name.to_owned(), id);
        id
    }

    /// Applies the writes of `vector_log` after its mark: each logged item is read as it is now
    /// (a vector of this model: kept; none, or another model's: removed).
    pub(crate) fn follow(&mut self, sql: &dyn Sql) -> Result<Followed> {
        let r = sql.query_row("SELECT min(seq), max(seq) FROM vector_log", &[])?;
        let (min, max) = match r {
            Some(r) if r.0.first() != Some(&Value::Null) => (r.int(0)?, r.int(1)?),
            _ => return Ok(if self.mark == 0 { Followed::Current } else { Followed::Lost }),
        };
        if max == self.mark {
            return Ok(Followed::Current);
        }
        if min > self.mark + 1 || max < self.mark {
            return Ok(Followed::Lost);
        }
        let rows = sql.query(
            "SELECT l.item, v.model, v.scope, v.code FROM vector_log l
               LEFT JOIN vectors v ON v.kind = l.kind AND v.item = l.item
              WHERE l.seq > ? AND l.kind = ? ORDER BY l.seq",
            &[Value::Int(self.mark), Value::Int(self.kind.number())],
        )?;
        // The newest state of each item (the join reads it as it is now, so the last row wins).
        let mut now: BTreeMap<i64, Live> = BTreeMap::new();
        for r in &rows {
            let scope = r.opt_text(2)?;
            let live = match (r.opt_text(1)?, r.0.get(3)) {
                (Some(model), Some(Value::Blob(b))) if model == self.model => {
                    code_words(b).filter(|c| self.words == 0 || c.len() == self.words).map(|c| (scope, c))
                }
                _ => None,
            };
            now.insert(r.int(0)?, live);
        }
        if now.len() <= ONE_BY_ONE {
            for (item, live) in now {
                match live {
                    Some((scope, code)) => self.upsert(item, scope.as_deref(), &code),
                    None => self.remove(item),
                }
            }
        } else {
            self.merge(now);
        }
        self.trim();
        self.mark = max;
        Ok(Followed::Current)
    }

    fn upsert(&mut self, item: i64, scope: Option<&str>, code: &[u64]) {
        if self.words == 0 {
            self.words = code.len();
        }
        let s = self.scope_id(scope);
        let w = self.words;
        match self.ids.binary_search(&item) {
            Ok(i) => {
                self.scopes[i] = s;
                self.codes[i * w..(i + 1) * w].copy_from_slice(code);
            }
            Err(i) if i == self.ids.len() => {
                self.ids.push(item);
                self.scopes.push(s);
                self.codes.extend_from_slice(code);
            }
            Err(i) => {
                self.ids.insert(i, item);
                self.scopes.insert(i, s);
                self.codes.splice(i * w..i * w, code.iter().copied());
            }
        }
    }

    fn remove(&mut self, item: i64) {
        if let Ok(i) = self.ids.binary_search(&item) {
            let w = self.words;
            self.ids.remove(i);
            self.scopes.remove(i);
            self.codes.drain(i * w..(i + 1) * w);
        }
    }

    /// Applies many changes in one pass: the kept items and the changed ones, merged by seq.
    fn merge(&mut self, changes: BTreeMap<i64, Live>) {
        if self.words == 0 {
            self.words = changes.values().flatten().map(|(_, c)| c.len()).next().unwrap_or(0);
        }
        let w = self.words;
        let (ids, scopes, codes) =
            (std::mem::take(&mut self.ids), std::mem::take(&mut self.scopes), std::mem::take(&mut self.codes));
        self.ids.reserve(ids.len() + changes.len());
        self.scopes.reserve(ids.len() + changes.len());
        self.codes.reserve(codes.len() + changes.len() * w);
        let mut changes = changes.into_iter().peekable();
        for (i, id) in ids.into_iter().enumerate() {
            while let Some((c, _)) = changes.peek() {
                if *c >= id {
                    break;
                }
                let (c, live) = changes.next().expect("peeked");
                if let Some((scope, code)) = live {
                    self.push(c, scope.as_deref(), &code);
                }
            }
            if changes.peek().is_some_and(|(c, _)| *c == id) {
                continue; // its new state comes with the changes
            }
            self.ids.push(id);
            self.scopes.push(scopes[i]);
            self.codes.extend_from_slice(&codes[i * w..(i + 1) * w]);
        }
        for (c, live) in changes {
            if let Some((scope, code)) = live {
                self.push(c, scope.as_deref(), &code);
            }
        }
    }

    fn push(&mut self, item: i64, scope: Option<&str>, code: &[u64]) {
        if code.len() != self.words {
            return;
        }
        let s = self.scope_id(scope);
        self.ids.push(item);
        self.scopes.push(s);
        self.codes.extend_from_slice(code);
    }

    /// Adds an item after every other (tests building an index without SQLite).
    #[cfg(test)]
    pub(crate) fn push_for_test(&mut self, item: i64, code: &[u64]) {
        self.upsert(item, None, code);
    }

    /// Past the cap, the oldest items go.
    fn trim(&mut self) {
        let over = self.ids.len().saturating_sub(self.cap);
        if over > 0 {
            self.capped = true;
            self.ids.drain(..over);
            self.scopes.drain(..over);
            self.codes.drain(..over * self.words);
        }
    }

    /// The seqs of the (at most) `k` items within `within` whose codes are nearest to `query`
    /// (fewest differing bits; ties: the newer first), nearest first.
    pub(crate) fn nearest(&self, query: &[u64], within: Within<'_>, k: usize) -> Vec<i64> {
        let w = self.words;
        if w == 0 || query.len() != w || k == 0 {
            return Vec::new();
        }
        // The positions a search may look at.
        let positions: Vec<u32> = match within {
            Within::All => Vec::new(),
            Within::Scopes(names) => {
                let wanted: Vec<u32> = names.iter().filter_map(|n| self.by_name.get(*n).copied()).collect();
                if wanted.is_empty() {
                    return Vec::new();
                }
                (0..self.ids.len() as u32).filter(|&p| wanted.contains(&self.scopes[p as usize])).collect()
            }
            Within::Items(items) => {
                items.iter().filter_map(|i| self.ids.binary_search(i).ok()).map(|p| p as u32).collect()
            }
        };
        let all = matches!(within, Within::All);
        let n = if all { self.ids.len() } else { positions.len() };
        let at = |j: usize| if all { j } else { positions[j] as usize };
        // Distances, and how many items lie at each.
        let mut dist = Vec::with_capacity(n);
        let mut histogram = vec![0_usize; w * 64 + 1];
        for j in 0..n {
            let p = at(j);
            let d = hamming(query, &self.codes[p * w..(p + 1) * w]);
            histogram[d as usize] += 1;
            dist.push(d as u16);
        }
        // The distance the k-th nearest lies at, and how many at it are taken.
        let (mut limit, mut below) = (0_usize, 0_usize);
        while limit < histogram.len() && below + histogram[limit] < k {
            below += histogram[limit];
            limit += 1;
        }
        let mut at_limit = k.saturating_sub(below);
        let mut out: Vec<(u16, usize)> = Vec::with_capacity(k.min(n));
        for j in (0..n).rev() {
            let d = dist[j];
            if (d as usize) < limit {
                out.push((d, at(j)));
            } else if d as usize == limit && at_limit > 0 {
                at_limit -= 1;
                out.push((d, at(j)));
            }
        }
        sort::by(&mut out, |a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        out.into_iter().map(|(_, p)| self.ids[p]).collect()
    }

    /// The model its codes are of.
    pub(crate) fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::{Index, ItemKind, Within};

    fn index(items: &[(i64, Option<&str>, u64)]) -> Index {
        let mut ix = Index::empty(ItemKind::Message, "m", 10);
        for (item, scope, code) in items {
            ix.upsert(*item, *scope, &[*code]);
        }
        ix
    }

    #[test]
    fn nearest_by_differing_bits_newer_first_on_ties() {
        let ix = index(&[(1, None, 0b0000), (2, None, 0b0001), (3, None, 0b0011), (4, None, 0b0001)]);
        assert_eq!(ix.nearest(&[0], Within::All, 2), vec![1, 4], "one at 0 bits, then the newer at 1 bit");
        assert_eq!(ix.nearest(&[0], Within::All, 9), vec![1, 4, 2, 3]);
        assert_eq!(ix.nearest(&[0b0011], Within::Items(&[1, 2, 9]), 1), vec![2]);
        assert_eq!(ix.nearest(&[0], Within::All, 0), Vec::<i64>::new());
    }

    #[test]
    fn scopes_keep_a_search_to_their_items() {
        let ix = index(&[(1, Some("a"), 0), (2, Some("b"), 0), (3, Some("a"), 1), (5, None, 0)]);
        assert_eq!(ix.nearest(&[0], Within::Scopes(&["a"]), 5), vec![1, 3]);
        assert_eq!(ix.nearest(&[0], Within::Scopes(&["b", "a"]), 5), vec![2, 1, 3]);
        assert_eq!(ix.nearest(&[0], Within::Scopes(&["z"]), 5), Vec::<i64>::new());
    }

    #[test]
    fn changes_one_by_one_and_merged_agree() {
        let mut a = index(&[(2, None, 2), (4, None, 4), (6, None, 6)]);
        a.upsert(5, None, &[5]);
        a.upsert(1, None, &[1]);
        a.remove(4);
        a.upsert(6, Some("s"), &[7]);
        let mut b = index(&[(2, None, 2), (4, None, 4), (6, None, 6)]);
        b.merge(
            [(1, Some((None, vec![1]))), (4, None), (5, Some((None, vec![5]))), (6, Some((Some("s".into()), vec![7])))]
                .into_iter()
                .collect(),
        );
        for ix in [&a, &b] {
            assert_eq!(ix.ids, vec![1, 2, 5, 6]);
            assert_eq!(ix.codes, vec![1, 2, 5, 7]);
            assert_eq!(ix.nearest(&[7], Within::Scopes(&["s"]), 3), vec![6]);
        }
    }

    #[test]
    fn past_the_cap_the_oldest_go() {
        let mut ix = Index::empty(ItemKind::Memory, "m", 3);
        for i in 1..=5 {
            ix.upsert(i, None, &[0]);
        }
        ix.trim();
        assert_eq!(ix.ids, vec![3, 4, 5]);
        assert!(ix.capped);
        assert_eq!(ix.bytes(), 3 * 20);
    }
}
