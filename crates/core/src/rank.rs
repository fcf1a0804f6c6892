//! Ranking the rows of an FTS5 table for a [`Query`] at a cost bounded by [`CANDIDATES`], not by
//! the table (docs/REFERENCE.md#bounded-ranking).
//!
//! An OR of common words matches most of a big table, and FTS5 computes bm25 for every match
//! before `ORDER BY … LIMIT`; its bm25 also counts, on first use in a statement, every row of
//! each term's to weigh it (the IDF). Both grow with the table. So a search asks FTS5 for pieces
//! that stop early instead, newest first (`ORDER BY rowid DESC LIMIT`, which FTS5 answers
//! without a sort):
//!
//! 1. **windows**: each term's newest `CANDIDATES + 1` matches in scope. A term with at most
//!    `CANDIDATES` matches in the whole table is *rare*: all its rows are candidates and bm25
//!    weighs it exactly. A *common* term's newest `CANDIDATES` are candidates, and its document
//!    frequency is estimated from how far back they reach.
//! 2. **memberships**: which candidates have which common term beyond that term's own window:
//!    each common term ANDed with the rare ones (bounded by their rows), and the newest
//!    `CANDIDATES` rows having both of a pair of common terms (the [`PAIRED`] sparsest), within
//!    [`DEPTH`] times the sparser one's window. Those rows are candidates too: a row with
//!    several of the words, older than each word's window, is still found.
//! 3. **scores**: FTS5's own `bm25()` of the rare terms (cheap: their rows are few), plus, per
//!    common term a row has, bm25's term for one occurrence with the estimated IDF and the
//!    row's length (`<fts>_docsize`, the statistics of `<fts>_data`), as FTS5 computes them.
//!
//! When every term is rare (a small table, or rare words) the ranking is FTS5's bm25 of the
//! whole OR query exactly. Prefix terms are the exception to the bound: FTS5 merges the rows of
//! every word a prefix begins before giving the first one.

use crate::error::{Error, Result};
use crate::query::{Query, Term, TermKind};
use crate::sort;
use crate::sql::{json_ids, Row, Sql, Value};

/// The newest matches taken per term and per pair of common terms: the candidate cap
/// (docs/REFERENCE.md#bounded-ranking).
pub(crate) const CANDIDATES: usize = 200;
/// A pair of common terms is looked for back to this many times the span of the sparser
/// term's window.
const DEPTH: i64 = 10;
/// Common terms paired with one another: the sparsest ones.
const PAIRED: usize = 4;
/// FTS5's bm25 constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// An FTS5 table that can be ranked.
pub(crate) struct Index {
    /// The FTS5 table (its rowid is its rows' `seq`).
    pub(crate) fts: &'static str,
    /// The column query words are looked for in, if not all of them.
    pub(crate) column: Option<&'static str>,
    /// The arguments of `bm25()` after the table: the columns' weights.
    pub(crate) weights: &'static str,
    /// The weight of a common term's occurrence (the weight of the column it is looked for in).
    pub(crate) weight: f64,
}

/// What a search is restricted to, beside its words.
#[derive(Default)]
pub(crate) struct Scope<'a> {
    /// An FTS5 expression every match must satisfy as well (the tokens of sessions).
    pub(crate) words: Option<String>,
    /// A table joined to the FTS rows and a condition on it.
    pub(crate) rows: Option<Rows<'a>>,
}

/// `join` (naming the FTS table `f`) and a condition `cond` with its `params`. The join is a
/// `CROSS JOIN`, so SQLite reads the FTS matches first, newest first, and stops at the limit
/// (starting from an index of the joined table would read every row the condition selects).
pub(crate) struct Rows<'a> {
    pub(crate) join: &'a str,
    pub(crate) cond: &'a str,
    pub(crate) params: &'a [Value],
}

/// What becomes of a word no row of the table has (in any form).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unmatched {
    /// It matches nothing.
    Nothing,
    /// Words of three or more characters are looked up as prefixes: a word typed in part.
    Prefix,
}

/// One ranked row: its rowid and its score (bm25 made positive: higher is better).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ranked {
    pub(crate) rowid: i64,
    pub(crate) score: f64,
}

/// The best `limit` rows of `index` within `scope` for `query`, best first (equal scores:
/// newest first).
pub(crate) fn rank(
    sql: &dyn Sql,
    index: &Index,
    scope: &Scope,
    query: &Query,
    unmatched: Unmatched,
    limit: usize,
) -> Result<Vec<Ranked>> {
    let plan = Plan::new(index, scope, query);
    let mut found = plan.windows(sql, &query.ranked)?;
    let Some(table) = found.table else { return Ok(Vec::new()) };
    if unmatched == Unmatched::Prefix {
        let partial: Vec<Term> = found
            .terms
            .iter()
            .map(|t| match t.term.kind == TermKind::Word && t.global == 0 && t.term.text.chars().count() >= 3 {
                true => t.term.as_prefix(),
                false => t.term.clone(),
            })
            .collect();
        if partial.iter().any(|t| t.kind == TermKind::Prefix) && partial.iter().ne(query.ranked.iter()) {
            found = plan.windows(sql, &partial)?;
        }
    }
    let terms = &found.terms;
    // Sets of rowids are sorted `Vec`s searched with `binary_search`, not `HashSet`s: a hash
    // table is a few KB of wasm per key type, and one `sort_unstable` of `i64` serves them all.
    let mut known: Vec<Vec<i64>> = terms.iter().map(|t| t.window().to_vec()).collect();
    for (rows, tags) in plan.memberships(sql, terms)? {
        for t in tags {
            known[t].extend(&rows);
        }
    }
    for k in &mut known {
        sorted_set(k);
    }
    // Every row of a membership list is known to have one of its terms at least.
    let mut candidates = known.concat();
    sorted_set(&mut candidates);
    let weights: Vec<Option<f64>> = terms.iter().map(|t| (!t.rare()).then(|| t.idf(&table) * index.weight)).collect();
    let rare: Vec<&Term> = terms.iter().filter(|t| t.rare()).map(|t| &t.term).collect();
    let (lengths, exact) = plan.scores(sql, &candidates, &rare)?;
    let mut ranked: Vec<Ranked> = candidates
        .iter()
        .zip(lengths)
        .zip(exact)
        .filter_map(|((&rowid, len), exact)| {
            let norm = (K1 + 1.0) / (1.0 + K1 * (1.0 - B + B * len? / table.avgdl));
            let has = |k: &Vec<i64>| k.binary_search(&rowid).is_ok();
            let common: f64 = weights.iter().zip(&known).filter_map(|(w, k)| w.filter(|_| has(k))).sum();
            Some(Ranked { rowid, score: exact + norm * common })
        })
        .collect();
    sort::by(&mut ranked, |a, b| b.score.total_cmp(&a.score).then(b.rowid.cmp(&a.rowid)));
    ranked.truncate(limit);
    Ok(ranked)
}

/// The table's statistics, as bm25 reads them.
struct Table {
    /// Rows.
    rows: f64,
    /// Tokens per row, on average (all columns).
    avgdl: f64,
    /// The smallest and largest rowid.
    first: i64,
    last: i64,
}

/// What the windows found of one term.
struct Found {
    term: Term,
    /// Its newest matches in scope, newest first: `CANDIDATES + 1` at most.
    newest: Vec<i64>,
    /// Its matches in the whole table, counted up to `CANDIDATES + 1`.
    global: usize,
    /// The oldest of its newest `CANDIDATES + 1` matches in the whole table.
    global_oldest: Option<i64>,
}

impl Found {
    /// The candidates it gives: its newest `CANDIDATES` matches in scope.
    fn window(&self) -> &[i64] {
        &self.newest[..self.newest.len().min(CANDIDATES)]
    }

    /// Whether all its matches in the whole table are known (so bm25 weighs it cheaply).
    fn rare(&self) -> bool {
        self.global <= CANDIDATES
    }

    /// Whether some of its matches in scope are older than its window.
    fn open(&self) -> bool {
        self.newest.len() > CANDIDATES
    }

    /// bm25's IDF with its document frequency estimated from how far back its newest matches
    /// reach in the table (FTS5's formula and floor).
    fn idf(&self, t: &Table) -> f64 {
        let n = match (self.rare(), self.global_oldest) {
            (false, Some(oldest)) => {
                let covered = (t.last - oldest + 1).max(1) as f64;
                let n = (CANDIDATES + 1) as f64 * (t.last - t.first + 1) as f64 / covered;
                n.clamp((CANDIDATES + 1) as f64, t.rows.max((CANDIDATES + 1) as f64))
            }
            _ => self.global as f64,
        };
        ((t.rows - n + 0.5) / (n + 0.5)).ln().max(1e-6)
    }

    /// How far back a pair with this term is looked for.
    fn floor(&self) -> i64 {
        let w = self.window();
        match (w.first(), w.last()) {
            (Some(&top), Some(&low)) => top - DEPTH * (top - low + 1),
            _ => i64::MIN,
        }
    }
}

/// What the windows found: every term, and the table's statistics (`None`: an empty table).
struct Windows {
    terms: Vec<Found>,
    table: Option<Table>,
}

/// The statements of one ranking.
struct Plan<'a> {
    index: &'a Index,
    scope: &'a Scope<'a>,
    /// The FTS5 expression of the scope: its words and the query's required phrases.
    base: Option<String>,
    /// The join and the condition of the scope's rows (`?1`, `?2`… for its parameters, which
    /// come first in every statement: each is bound once however many parts use it; a Durable
    /// Object binds at most 100 parameters).
    rows: Option<(&'a str, String)>,
}

/// The parameters of one statement, each named by its number.
struct Params(Vec<Value>);

impl Params {
    /// Adds `v`; its placeholder.
    fn add(&mut self, v: impl Into<Value>) -> String {
        self.0.push(v.into());
        format!("?{}", self.0.len())
    }
}

impl<'a> Plan<'a> {
    fn new(index: &'a Index, scope: &'a Scope<'a>, query: &Query) -> Plan<'a> {
        let mut base: Vec<String> = scope.words.iter().cloned().collect();
        base.extend(query.required.iter().map(|t| column(index, &t.fts())));
        let rows = scope.rows.as_ref().map(|r| {
            let mut n = 0;
            let cond = r.cond.split('?').fold(String::new(), |mut out, piece| {
                if n > 0 {
                    out.push_str(&format!("?{n}"));
                }
                n += 1;
                out.push_str(piece);
                out
            });
            (r.join, cond)
        });
        Plan { index, scope, base: (!base.is_empty()).then(|| base.join(" AND ")), rows }
    }

    /// A statement's parameters, starting with the scope's.
    fn params(&self) -> Params {
        Params(self.scope.rows.as_ref().map_or_else(Vec::new, |r| r.params.to_vec()))
    }

    /// Whether the scope is narrower than the table.
    fn scoped(&self) -> bool {
        self.base.is_some() || self.scope.rows.is_some()
    }

    /// The expression of `terms` (one FTS5 expression each, ANDed) in scope.
    fn expr(&self, terms: &[String]) -> String {
        let words = terms.iter().map(|t| column(self.index, t)).collect::<Vec<_>>().join(" AND ");
        match &self.base {
            Some(b) => format!("{b} AND {words}"),
            None => words,
        }
    }

    /// A subquery: the newest `limit` rowids (as `r`) matching `expr` in scope, from `floor` on.
    fn newest(&self, expr: String, floor: Option<i64>, limit: usize, params: &mut Params) -> String {
        let fts = self.index.fts;
        let (join, cond) = match &self.rows {
            Some((join, cond)) => (*join, format!(" AND {cond}")),
            None => ("", String::new()),
        };
        let floor = floor.map_or(String::new(), |f| format!(" AND f.rowid >= {f}"));
        let m = params.add(expr);
        format!("SELECT f.rowid AS r FROM {fts} f {join} WHERE {fts} MATCH {m}{cond}{floor} ORDER BY f.rowid DESC LIMIT {limit}")
    }

    /// Statement 1: each term's window, its count in the whole table, the table's statistics.
    /// One row of scalar subqueries, never a compound SELECT: a Durable Object's SQLite allows
    /// at most 5 terms in one.
    fn windows(&self, sql: &dyn Sql, terms: &[Term]) -> Result<Windows> {
        let fts = self.index.fts;
        let mut cols = Vec::new();
        let mut params = self.params();
        for t in terms {
            let sub = self.newest(self.expr(&[t.fts()]), None, CANDIDATES + 1, &mut params);
            cols.push(format!("(SELECT json_group_array(r) FROM ({sub}))"));
            if self.scoped() {
                let m = params.add(column(self.index, &t.fts()));
                cols.push(format!(
                    "(SELECT json_array(count(*), min(r)) FROM (SELECT rowid AS r FROM {fts} WHERE {fts} MATCH {m} ORDER BY rowid DESC LIMIT {}))",
                    CANDIDATES + 1
                ));
            }
        }
        cols.push(format!("(SELECT block FROM {fts}_data WHERE id = 1)"));
        // min() and max() apart: either alone reads one end of the rowid b-tree, both in one
        // SELECT read the whole table.
        cols.push(format!("json_array((SELECT min(id) FROM {fts}_docsize), (SELECT max(id) FROM {fts}_docsize))"));
        let row = sql.query_row(&format!("SELECT {}", cols.join(", ")), &params.0)?;
        let row = row.ok_or_else(|| Error::internal("a SELECT of values answered no row"))?;
        let mut at = 0;
        let mut found = Vec::with_capacity(terms.len());
        for t in terms {
            // A rowid is never null.
            let mut newest: Vec<i64> = ints(&row, at)?.into_iter().flatten().collect();
            at += 1;
            sort::ascending(&mut newest);
            newest.reverse();
            let (global, global_oldest) = match self.scoped() {
                true => {
                    let counted = match ints(&row, at)?[..] {
                        [Some(count), oldest] => (count as usize, oldest),
                        _ => return Err(Error::internal(format!("rank: column {at}: not [count, min]"))),
                    };
                    at += 1;
                    counted
                }
                false => (newest.len(), newest.last().copied()),
            };
            found.push(Found { term: t.clone(), newest, global, global_oldest });
        }
        let averages = blob(&row, at);
        let ends = match ints(&row, at + 1)?[..] {
            [first, last] => first.zip(last),
            _ => return Err(Error::internal(format!("rank: column {}: not [min, max]", at + 1))),
        };
        let table = averages.zip(ends).and_then(|(a, (first, last))| {
            let mut at = 0;
            let rows = varint(&a, &mut at)? as f64;
            let mut tokens = 0.0;
            while at < a.len() {
                tokens += varint(&a, &mut at)? as f64;
            }
            (rows > 0.0).then(|| Table { rows, avgdl: (tokens / rows).max(1.0), first, last })
        });
        Ok(Windows { terms: found, table })
    }

    /// Statement 2: lists of rows known to have some terms (the rows, the terms' places), one
    /// row of scalar subqueries as statement 1.
    fn memberships(&self, sql: &dyn Sql, terms: &[Found]) -> Result<Vec<(Vec<i64>, Vec<usize>)>> {
        let mut lists: Vec<(String, Option<i64>, usize, Vec<usize>)> = Vec::new();
        let complete: Vec<&Found> = terms.iter().filter(|t| !t.open() && !t.newest.is_empty()).collect();
        let mut open: Vec<usize> = (0..terms.len()).filter(|&i| terms[i].open()).collect();
        if !complete.is_empty() {
            let any = complete.iter().map(|t| t.term.fts()).collect::<Vec<_>>().join(" OR ");
            let bound: usize = complete.iter().map(|t| t.newest.len()).sum();
            for &i in &open {
                lists.push((self.expr(&[terms[i].term.fts(), any.clone()]), None, bound, vec![i]));
            }
        }
        // The PAIRED sparsest (lowest floor; of equal floors, the first): picked one by one,
        // which for so few is as quick as a sort and less code.
        let mut sparsest = Vec::with_capacity(PAIRED);
        while sparsest.len() < PAIRED {
            let Some(at) = (0..open.len()).min_by_key(|&a| terms[open[a]].floor()) else { break };
            sparsest.push(open.remove(at));
        }
        let open = sparsest;
        for (a, &i) in open.iter().enumerate() {
            for &j in &open[a + 1..] {
                let floor = terms[i].floor().min(terms[j].floor());
                lists.push((
                    self.expr(&[terms[i].term.fts(), terms[j].term.fts()]),
                    Some(floor),
                    CANDIDATES,
                    vec![i, j],
                ));
            }
        }
        if lists.is_empty() {
            return Ok(Vec::new());
        }
        let mut params = self.params();
        let cols: Vec<String> = lists
            .iter()
            .map(|(expr, floor, limit, _)| {
                format!(
                    "(SELECT json_group_array(r) FROM ({}))",
                    self.newest(expr.clone(), *floor, *limit, &mut params)
                )
            })
            .collect();
        let row = sql.query_row(&format!("SELECT {}", cols.join(", ")), &params.0)?;
        let row = row.ok_or_else(|| Error::internal("a SELECT of values answered no row"))?;
        let mut out = Vec::with_capacity(lists.len());
        for (n, (.., tags)) in lists.into_iter().enumerate() {
            out.push((ints(&row, n)?.into_iter().flatten().collect(), tags));
        }
        Ok(out)
    }

    /// Statement 3: the length of each of the `candidates` (sorted) and FTS5's bm25 of the
    /// `rare` terms for it (0 if it has none), in their order (no length: no such row). That bm25 is asked for the rare terms alone, in the whole table:
    /// their rows are few, while the scope's words (a session's token, a phrase) may be in
    /// many rows, all of which bm25 would count to weigh them. The rows outside the scope are
    /// not candidates and are left out here.
    fn scores(&self, sql: &dyn Sql, candidates: &[i64], rare: &[&Term]) -> Result<(Vec<Option<f64>>, Vec<f64>)> {
        let Index { fts, weights, .. } = self.index;
        let (mut lengths, mut exact) = (vec![None; candidates.len()], vec![0.0; candidates.len()]);
        if candidates.is_empty() {
            return Ok((lengths, exact));
        }
        let ids = json_ids(candidates.iter().copied());
        let mut q = format!("SELECT 0, d.id, d.sz FROM json_each(?) j JOIN {fts}_docsize d ON d.id = j.value");
        let mut params: Vec<Value> = vec![ids.into()];
        if !rare.is_empty() {
            let any = rare.iter().map(|t| t.fts()).collect::<Vec<_>>().join(" OR ");
            params.push(column(self.index, &any).into());
            q.push_str(&format!(" UNION ALL SELECT 1, rowid, -bm25({fts}, {weights}) FROM {fts} WHERE {fts} MATCH ?"));
        }
        for r in sql.query(&q, &params)? {
            let Ok(k) = candidates.binary_search(&r.int(1)?) else { continue };
            if r.int(0)? == 0 {
                let (sz, mut at, mut len) = (blob(&r, 2).unwrap_or_default(), 0, 0.0);
                while let Some(n) = varint(&sz, &mut at) {
                    len += n as f64;
                }
                lengths[k] = Some(len);
            } else {
                exact[k] = r.real(2)?;
            }
        }
        Ok((lengths, exact))
    }
}

/// `expr` restricted to the index's column.
fn column(index: &Index, expr: &str) -> String {
    match index.column {
        Some(c) => format!("{c} : ({expr})"),
        None => format!("({expr})"),
    }
}

/// The rowids of `ranked` as a JSON array, for `json_each(?) j`: joined to the rows and
/// ordered `BY j.key`, the rows come in the ranking's order, `j.key` each one's place in
/// `ranked` (no map from rowid back to the ranking: a hash table is KBs of wasm per type).
pub(crate) fn rowids(ranked: &[Ranked]) -> String {
    json_ids(ranked.iter().map(|r| r.rowid))
}

/// Sorts `v` and drops its repeats: a set of rowids.
fn sorted_set(v: &mut Vec<i64>) {
    sort::ascending(v);
    v.dedup();
}

/// Column `i` of `r`, a JSON array of integers and nulls as SQLite writes it
/// (`json_group_array`, `json_array`: no spaces). Read by hand: `serde_json` would bring a
/// deserializer per type read into the wasm.
fn ints(r: &Row, i: usize) -> Result<Vec<Option<i64>>> {
    let text = r.text(i)?;
    let bad = || Error::internal(format!("rank: column {i}: not a JSON array of integers"));
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or_else(bad)?;
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    // A loop, not `collect::<Result<_>>()`: each of those is an iterator adapter's code.
    let mut out = Vec::new();
    for n in inner.split(',') {
        out.push(match n {
            "null" => None,
            _ => Some(n.parse().map_err(|_| bad())?),
        });
    }
    Ok(out)
}

/// Column `i` of `r` if it is a blob.
fn blob(r: &Row, i: usize) -> Option<Vec<u8>> {
    match r.0.get(i) {
        Some(Value::Blob(b)) => Some(b.clone()),
        _ => None,
    }
}

/// The SQLite varint at `at` in `b` (FTS5's records are made of them), moving `at` past it.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let x = *b.get(*at)?;
        *at += 1;
        if i == 8 {
            return Some((v << 8) | u64::from(x));
        }
        v = (v << 7) | u64::from(x & 0x7f);
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::varint;

    #[test]
    fn varints() {
        let b = [0x05, 0x81, 0x00, 0x82, 0x80, 0x01];
        let mut at = 0;
        assert_eq!(varint(&b, &mut at), Some(5));
        assert_eq!(varint(&b, &mut at), Some(128));
        assert_eq!(varint(&b, &mut at), Some((2 << 14) | 1));
        assert_eq!(varint(&b, &mut at), None);
    }
}
