//! [`Memories`]: the one way into long-term memory. Every write goes through it, so each one
//! purges what has expired, records its version, and tells the agent's sockets (`memory`
//! frames). A new or changed text waits for its vector, made after the answer
//! (`crate::vectors::embed`, `Memory::embedded_at` says when).

use std::rc::Rc;

use super::by::By;
use super::current;
use super::recall;
use super::store::{self, Filter, Held, Memory, NewMemory, Patch, Stored};
use crate::access::Reach;
use crate::blobs::BoxFuture;
use crate::config::category::Category;
use crate::config::MemoryConfig;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::ids::Role;
use crate::sort;
use crate::sql::atomically;
use crate::store::sessions;
use crate::wire::Frame;
/// What a memory change was, for the `memory` frame (the frame's own enum, under the name the
/// memory code knows it by).
pub use crate::wire::MemoryOp as Op;

/// How far ahead of the next match the best must be for `memory_forget {query}` to forget it:
/// the next one's relevance below this share of the best's. Closer than that, the query does
/// not say which memory it means, and nothing is forgotten.
pub(crate) const CLEAR_LEAD: f64 = 0.8;
/// Most memories a [`Match::Several`] names.
const MAX_SHOWN: usize = 5;

/// Whether a recall's best are re-ordered by the re-ranker (`crate::llm::rerank`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// As ranked and re-ranked: what a recall shows.
    Reranked,
    /// As ranked: the same memories without the re-ranker's call.
    Ranked,
}

/// The memories a query names for forgetting.
pub(crate) enum Match {
    None,
    /// One memory, clearly the best match.
    One(Box<Memory>),
    /// Several that match about as well (best first): the query is ambiguous.
    Several(Vec<Memory>),
}

/// The agent's long-term memory, as one request sees it.
pub struct Memories<'a> {
    pub(crate) env: &'a Env<'a>,
    /// A text's vector asked for already (a turn asks for its question's while it reads its
    /// branch), or why it could not be made: a recall of that text uses it rather than asking
    /// the model again.
    asked: Option<(String, Result<Rc<[f32]>>)>,
}

impl<'a> Memories<'a> {
    pub fn new(env: &'a Env<'a>) -> Self {
        Memories { env, asked: None }
    }

    /// The same memories, whose recall of `text` uses `vector` (or its failure).
    pub(crate) fn with_vector(self, text: &str, vector: Result<Rc<[f32]>>) -> Self {
        Memories { asked: Some((text.trim().to_owned(), vector)), ..self }
    }

    /// The configuration in effect (the defaults when `SESSION_CONFIG.memory` is absent: the
    /// routes work either way; only the tools, inject and extract need it set).
    pub(crate) fn config(&self) -> MemoryConfig {
        self.env.config.memory.clone().unwrap_or_default()
    }

    /// The one way memories are written: `write` runs in one transaction after what has expired
    /// is purged, with the config in effect.
    fn write<T>(&self, write: impl FnOnce(&MemoryConfig) -> Result<T>) -> Result<T> {
        let e = self.env;
        let cfg = self.config();
        atomically(e.sql, || {
            store::purge_expired(e.sql, e.now.iso())?;
            write(&cfg)
        })
    }

    /// Refuses what these memories cannot hold: a memory space has no sessions, so a
    /// `conversation` memory (one session's) would be one no route recalls or deletes.
    pub(crate) fn admits(&self, category: Category) -> Result<()> {
        if self.env.role == Role::Space && category == Category::Conversation {
            return Err(Error::invalid(
                "a memory space has no sessions, so it keeps no conversation memory: store it as core or daily",
            ));
        }
        Ok(())
    }

    /// Registers the session a `conversation` memory belongs to (`name = id`), as any write
    /// into a session does: the memory then goes when that session is deleted. Inside the
    /// memory's transaction.
    fn register_session(&self, m: &Memory) -> Result<()> {
        match (&m.category, &m.source) {
            (Category::Conversation, Some(s)) => sessions::ensure(self.env.sql, &s.session_id, self.env.now.iso()),
            _ => Ok(()),
        }
    }

    /// Stores a memory, or merges it into the one of the same category and normalized text
    /// that holds now (tags merged, the higher score kept); the memories it `supersedes` stop
    /// holding (all or nothing: an unknown one is `not_found` and nothing is stored). Its vector,
    /// when embeddings are configured, is made after the answer ([`crate::after::After::Embed`]);
    /// `extract::consolidate` asks the model first, then calls this.
    pub async fn remember(&self, new: NewMemory, by: By) -> Result<(Memory, Stored)> {
        let e = self.env;
        self.admits(new.category)?;
        let (m, stored, replaced) = self.write(|cfg| {
            let (m, stored) = store::remember(e.sql, cfg, &new, by, &e.now)?;
            self.register_session(&m)?;
            let replaced = store::supersede(e.sql, &m, &new.supersedes, &e.reach, e.now.iso())?;
            Ok((m, stored, replaced))
        })?;
        self.publish(if stored == Stored::Created { Op::Created } else { Op::Updated }, &m);
        for old in &replaced {
            self.publish(Op::Updated, old);
        }
        Ok((m, stored))
    }

    /// Marks memory `id` as no longer holding from now, replaced by memory `by` if one replaced
    /// it (a consolidation's UPDATE or DELETE): its text and versions stay. `not_found` when
    /// there is none that holds now within the request's reach.
    pub(crate) fn invalidate(&self, id: &str, by: Option<&str>) -> Result<Memory> {
        let e = self.env;
        let m = self.write(|_| {
            let old = store::get(e.sql, id, e.now.iso())?
                .filter(|m| store::within(&e.reach, m) && m.invalid_at.is_none())
                .ok_or_else(|| Error::not_found(format!("memory {id} not found")))?;
            store::invalidate(e.sql, &old, e.now.iso(), by, e.now.iso())
        })?;
        self.publish(Op::Updated, &m);
        Ok(m)
    }

    /// Stores many memories in one transaction (all or none; duplicates merge and `supersedes`
    /// retires as in [`Memories::remember`]); their vectors are made after the answer, as one's is.
    pub async fn remember_all(&self, all: &[NewMemory], by: By) -> Result<Vec<(Memory, Stored)>> {
        let e = self.env;
        let (done, replaced) = self.write(|cfg| {
            let mut done = Vec::with_capacity(all.len());
            let mut replaced = Vec::new();
            for (i, new) in all.iter().enumerate() {
                let at = |err: Error| Error::new(err.kind, format!("memories[{i}]: {}", err.message));
                self.admits(new.category).map_err(at)?;
                let one = store::remember(e.sql, cfg, new, by, &e.now).map_err(at)?;
                self.register_session(&one.0)?;
                replaced.extend(store::supersede(e.sql, &one.0, &new.supersedes, &e.reach, e.now.iso()).map_err(at)?);
                done.push(one);
            }
            Ok((done, replaced))
        })?;
        for (m, stored) in &done {
            self.publish(if *stored == Stored::Created { Op::Created } else { Op::Updated }, m);
        }
        for old in &replaced {
            self.publish(Op::Updated, old);
        }
        Ok(done)
    }

    /// Stores `new` as memory `id`, or replaces the memory of that id (`PUT /memories/{id}`:
    /// `store::put`); its earlier version stays in its history.
    pub async fn put(&self, id: &str, new: &NewMemory, by: By) -> Result<(Memory, Stored)> {
        let e = self.env;
        self.admits(new.category)?;
        let (m, stored) = self.write(|cfg| {
            let done = store::put(e.sql, cfg, id, new, by, &e.now)?;
            self.register_session(&done.0)?;
            Ok(done)
        })?;
        self.publish(if stored == Stored::Created { Op::Created } else { Op::Updated }, &m);
        Ok((m, stored))
    }

    /// Changes a memory; its earlier version stays in its history.
    pub async fn patch(&self, id: &str, patch: &Patch, by: By) -> Result<Memory> {
        let e = self.env;
        if let Some(c) = patch.category {
            self.admits(c)?;
        }
        let m = self.write(|cfg| {
            let m = store::patch(e.sql, cfg, id, patch, by, &e.now)?;
            self.register_session(&m)?;
            Ok(m)
        })?;
        self.publish(Op::Updated, &m);
        Ok(m)
    }

    /// Forgets one memory; `not_found` when there is none (or it expired, or it is another
    /// session's `conversation` memory than the request reaches).
    pub fn forget(&self, id: &str) -> Result<Memory> {
        let e = self.env;
        let m = self.write(|_| {
            let m = store::get(e.sql, id, e.now.iso())?
                .filter(|m| store::within(&e.reach, m))
                .ok_or_else(|| Error::not_found(format!("memory {id} not found")))?;
            store::delete(e.sql, &[m.seq])?;
            Ok(m)
        })?;
        self.publish(Op::Deleted, &m);
        Ok(m)
    }

    /// Forgets every memory the filter selects (all of them without one), superseded ones
    /// included: `forgetAll`.
    pub fn forget_all(&self, filter: &Filter) -> Result<usize> {
        let e = self.env;
        let filter = Filter { held: Held::Ever, ..filter.clone() };
        let gone = self.write(|_| {
            let gone = store::select_all(e.sql, &filter, e.now.iso())?;
            store::delete(e.sql, &gone.iter().map(|m| m.seq).collect::<Vec<_>>())?;
            Ok(gone)
        })?;
        for m in &gone {
            self.publish(Op::Deleted, m);
        }
        Ok(gone.len())
    }

    /// Ranked recall for `query`; the recall counters of the hits move.
    pub async fn recall(&self, query: &recall::Query) -> Result<Vec<recall::Hit>> {
        let mut hits = self.rank(query).await?;
        let e = self.env;
        atomically(e.sql, || recall::count(e.sql, &mut hits, e.now.iso()))?;
        Ok(hits)
    }

    /// The ranking of a recall without moving its counters (a turn's inject: the counters move
    /// with the turn's commit, so a failed turn counts nothing): the candidates by relevance
    /// and what the agent knows of them ([`recall::rank`]), the best of them re-ordered by the
    /// re-ranker when one is configured (the same ones: [`crate::llm::rerank`]), the newer of
    /// two facts about one subject first ([`current`]), and a fact the query quotes first of
    /// all ([`current::quoted_first`]).
    pub(crate) async fn rank(&self, query: &recall::Query) -> Result<Vec<recall::Hit>> {
        self.ranked(query, Order::Reranked).await
    }

    /// [`Memories::rank`], re-ranked or not. Boxed, so its code is made once for its callers
    /// (each held a copy: 2 KB of wasm).
    fn ranked<'q>(&'q self, query: &'q recall::Query, order: Order) -> BoxFuture<'q, Result<Vec<recall::Hit>>> {
        Box::pin(self.ranked_now(query, order))
    }

    async fn ranked_now(&self, query: &recall::Query, order: Order) -> Result<Vec<recall::Hit>> {
        let e = self.env;
        let (mut hits, vector) = self.candidates(query).await?;
        let limit = query.limit.clamp(1, recall::MAX_LIMIT) as usize;
        let meaning = e.meaning();
        if order == Order::Reranked {
            let rest = hits.split_off(limit.min(hits.len()));
            let reranked = meaning.reranked(&query.text, hits, |h| &h.memory.content).await;
            reranked.warnings.iter().for_each(|w| e.events.warn(w));
            hits = reranked.value;
            hits.extend(rest);
        }
        match &vector {
            Some(v) => current::with_corrections(&meaning, &mut hits, query, v, limit, &e.now)?,
            None => {
                current::newer_first(e.sql, &mut hits, None, &query.text)?;
            }
        }
        current::quoted_first(&query.text, &mut hits);
        hits.truncate(limit);
        Ok(hits)
    }

    /// Every candidate of a recall, ranked by [`recall::rank`] alone (no reordering), within the
    /// request's reach; and the query's vector, when embeddings are on and it could be made.
    async fn candidates(&self, query: &recall::Query) -> Result<(Vec<recall::Hit>, Option<Rc<[f32]>>)> {
        let e = self.env;
        // The request's reach, unless the query keeps to a narrower one itself.
        let narrowed;
        let query = if query.filter.reach == Reach::All && e.reach != Reach::All {
            narrowed =
                recall::Query { filter: Filter { reach: e.reach.clone(), ..query.filter.clone() }, ..query.clone() };
            &narrowed
        } else {
            query
        };
        let meaning = e.meaning();
        let vector = match meaning.is_on() && !query.text.trim().is_empty() {
            true => {
                let made = match &self.asked {
                    Some((text, asked)) if text == query.text.trim() => asked.clone(),
                    _ => meaning.query(query.text.trim()).await,
                };
                match made {
                    Ok(v) => Some(v),
                    Err(err) => {
                        e.events.warn(&format!("recall by meaning: {} (ranked by words only)", err.message));
                        None
                    }
                }
            }
            false => None,
        };
        let hits = recall::rank(&meaning, query, vector.as_deref(), &e.now)?;
        Ok((hits, vector))
    }

    /// The memories most like `query`, ranked as a recall would rank them but without counting
    /// as one, nor asking the re-ranker (extraction's look at what is already known: the same
    /// memories, whatever their order).
    pub(crate) async fn similar(&self, query: &recall::Query) -> Result<Vec<Memory>> {
        Ok(self.ranked(query, Order::Ranked).await?.into_iter().map(|h| h.memory).collect())
    }

    /// What `memory_forget {query}` may forget: the memories that hold now and match `query`,
    /// by relevance to it alone (no recency, confidence or newer-first reordering: a deletion
    /// acts on what was named, never on a guess). [`Match::One`] only when the best is clearly
    /// ahead of the next ([`CLEAR_LEAD`]).
    pub(crate) async fn to_forget(&self, query: &recall::Query) -> Result<Match> {
        let (mut hits, _) = self.candidates(query).await?;
        sort::by(&mut hits, |a, b| b.signals.relevance.total_cmp(&a.signals.relevance));
        let mut hits = hits.into_iter();
        Ok(match (hits.next(), hits.next()) {
            (None, _) => Match::None,
            (Some(best), None) => Match::One(Box::new(best.memory)),
            (Some(best), Some(next)) if next.signals.relevance < CLEAR_LEAD * best.signals.relevance => {
                Match::One(Box::new(best.memory))
            }
            (Some(best), Some(next)) => {
                let close = CLEAR_LEAD * best.signals.relevance;
                let rest = hits.take_while(|h| h.signals.relevance >= close).take(MAX_SHOWN - 2);
                Match::Several([best.memory, next.memory].into_iter().chain(rest.map(|h| h.memory)).collect())
            }
        })
    }

    /// Tells every socket of the agent about a change (`{type:"memory", op, memory}`).
    pub(crate) fn publish(&self, op: Op, m: &Memory) {
        let memory = serde_json::to_value(m).unwrap_or_default();
        self.env.events.publish_agent(&Frame::Memory { op, memory: &memory }.to_json());
    }
}
