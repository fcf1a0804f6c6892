//! The memories in SQLite: limits, duplicates by normalized text, expiry, versions, filters and
//! newest-first pages. Plain SQL functions; [`super::memories::Memories`] wraps them in transactions.

use serde::Serialize;
use serde_json::Value as Json;

use super::by::By;
use crate::access::Reach;
use crate::config::category::Category;
use crate::config::MemoryConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::ids::new_id;
use crate::metadata::{self, Metadata};
use crate::page::Cursor;
use crate::sql::{json_texts, Row, Sql, Value};
use crate::table::{Col, Table, Ty};
use crate::time::{iso_millis, parse_iso, Now};

/// Longest memory text, in characters.
pub(crate) const MAX_CONTENT_CHARS: usize = 4000;
/// Most tags of one memory.
pub(crate) const MAX_TAGS: usize = 16;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;
/// Largest page of `GET /memories`.
pub const MAX_PAGE: i64 = 100;

/// Where a memory came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Source {
    pub(crate) session_id: String,
    pub(crate) message_id: Option<String>,
}

/// One memory, as the API shows it (and as an agent reads one back from its space:
/// `Memory::from_json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    #[serde(skip)]
    pub(crate) seq: i64,
    pub(crate) id: String,
    pub(crate) content: String,
    pub(crate) category: Category,
    pub(crate) tags: Vec<String>,
    /// The caller's own facts about it (`core::metadata`); `{}` when none.
    pub(crate) metadata: Metadata,
    pub(crate) score: Option<f64>,
    pub(crate) source: Option<Source>,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) expires_at: Option<String>,
    pub(crate) recalled_at: Option<String>,
    pub(crate) recall_count: i64,
    /// When the fact became true (given on create, else when it was stored).
    pub(crate) valid_from: String,
    /// When it stopped being true; `None` while it holds.
    pub(crate) invalid_at: Option<String>,
    /// The memory that replaced it, if one did.
    pub(crate) superseded_by: Option<String>,
    /// When the vector of its text (by the embeddings model in use) was made; `None` until it
    /// exists, and always without embeddings.
    pub(crate) embedded_at: Option<String>,
}

impl Memory {
    /// A memory as the API shows it (`GET /memories/{id}` of a memory space), read back; `None`
    /// when it is not one. (Read by hand: a derived `Deserialize` of this struct costs the wasm
    /// more than this does.)
    pub(crate) fn from_json(j: &Json) -> Option<Memory> {
        let text = |k: &str| j.get(k).and_then(Json::as_str).map(str::to_owned);
        let opt = |k: &str| match j.get(k) {
            None | Some(Json::Null) => Some(None),
            Some(Json::String(s)) => Some(Some(s.clone())),
            Some(_) => None,
        };
        let source = match j.get("source") {
            None | Some(Json::Null) => None,
            Some(s) => Some(Source {
                session_id: s.get("sessionId")?.as_str()?.to_owned(),
                message_id: s.get("messageId").and_then(Json::as_str).map(str::to_owned),
            }),
        };
        Some(Memory {
            seq: 0,
            id: text("id")?,
            content: text("content")?,
            category: Category::parse(j.get("category")?.as_str()?).ok()?,
            tags: j.get("tags")?.as_array()?.iter().map(|t| t.as_str().map(str::to_owned)).collect::<Option<_>>()?,
            metadata: j.get("metadata").and_then(Json::as_object).cloned().unwrap_or_default(),
            score: j.get("score").and_then(Json::as_f64),
            source,
            created_at: text("createdAt")?,
            updated_at: text("updatedAt")?,
            expires_at: opt("expiresAt")?,
            recalled_at: opt("recalledAt")?,
            recall_count: j.get("recallCount").and_then(Json::as_i64).unwrap_or(0),
            valid_from: text("validFrom")?,
            invalid_at: opt("invalidAt")?,
            superseded_by: opt("supersededBy")?,
            embedded_at: opt("embeddedAt")?,
        })
    }
}

/// A memory to store.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewMemory {
    pub content: String,
    pub category: Category,
    pub tags: Vec<String>,
    /// Checked again when stored ([`metadata::check`]).
    pub metadata: Metadata,
    pub score: Option<f64>,
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    /// ISO-8601; `None` = never, or `dailyTtlDays` for a `daily` memory.
    pub expires_at: Option<String>,
    /// ISO-8601: when the fact became true; `None` = when it is stored.
    pub valid_from: Option<String>,
    /// Memories this one replaces: each must hold now (and be within the request's reach); they
    /// stop holding at this one's `valid_from` and name it as `supersededBy`.
    pub supersedes: Vec<String>,
}

/// A change to a memory: each field set replaces the stored one (`expires_at: Some(None)`
/// clears the expiry, `score: Some(None)` the score).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Patch {
    pub content: Option<String>,
    pub tags: Option<Vec<String>>,
    /// Replaces the stored metadata (`{}` clears it).
    pub metadata: Option<Metadata>,
    pub score: Option<Option<f64>>,
    pub category: Option<Category>,
    pub expires_at: Option<Option<String>>,
}

/// Which memories a list, a recall or a `forgetAll` is about: every condition set must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// One of these categories (any without one).
    pub categories: Vec<Category>,
    /// Every one of these tags (compared exactly with the stored, trimmed tags).
    pub tags: Vec<String>,
    /// At least one of these tags (no condition when empty).
    pub any_tags: Vec<String>,
    /// `createdAt` within these bounds.
    pub created: Span,
    /// `updatedAt` within these bounds.
    pub updated: Span,
    /// `metadata.<key>=<value>`, each.
    pub metadata: metadata::Filter,
    pub session_id: Option<String>,
    /// Whose `conversation` memories may be seen: those of these sessions only, or all.
    pub reach: Reach,
    /// Which facts: those that hold now, those that held at a time, or all of them.
    pub held: Held,
}

/// Which facts a read sees, by their validity (`validFrom` .. `invalidAt`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Held {
    /// The facts that hold now: those not superseded (one given a `validFrom` ahead of the
    /// clock included: clocks differ, and it was stored to be known).
    #[default]
    Now,
    /// The facts that held at this time (normalized ISO-8601): `asOf`.
    At(String),
    /// Every fact, superseded or not: `includeSuperseded`.
    Ever,
}

impl Held {
    /// The condition on alias `m` and its values.
    fn cond(&self) -> (String, Vec<Value>) {
        match self {
            Held::Now => ("m.invalid_at IS NULL".into(), Vec::new()),
            Held::At(t) => (
                "m.valid_from <= ? AND (m.invalid_at IS NULL OR m.invalid_at > ?)".into(),
                vec![t.as_str().into(), t.as_str().into()],
            ),
            Held::Ever => ("1".into(), Vec::new()),
        }
    }
}

/// A time given to read the past with (`asOf`), as stored: ISO-8601, normalized to milliseconds.
pub fn check_as_of(at: &str) -> Result<String> {
    parse_iso(at).map(iso_millis).ok_or_else(|| Error::invalid(format!("asOf {at:?} is not an ISO-8601 UTC timestamp")))
}

/// Times strictly after `after` and strictly before `before` (each ISO-8601 with milliseconds,
/// as stored: see [`crate::time::instant`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub after: Option<String>,
    pub before: Option<String>,
}

impl Span {
    fn conditions(&self, column: &str, cond: &mut Vec<String>, params: &mut Vec<Value>) {
        for (bound, op) in [(&self.after, '>'), (&self.before, '<')] {
            if let Some(at) = bound {
                cond.push(format!("{column} {op} ?"));
                params.push(at.as_str().into());
            }
        }
    }
}

/// Whether `m` is within `reach`: a `conversation` memory belongs to its session.
pub(crate) fn within(reach: &Reach, m: &Memory) -> bool {
    m.category != Category::Conversation || m.source.as_ref().is_some_and(|s| reach.sees(&s.session_id))
}

/// Whether a write made a new memory or merged into one already stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    Created,
    Merged,
    /// Replaced by a `PUT` (`put`).
    Replaced,
}

/// One version of a memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Version {
    pub(crate) content: String,
    pub(crate) tags: Vec<String>,
    pub(crate) metadata: Metadata,
    pub(crate) score: Option<f64>,
    pub(crate) category: Category,
    pub(crate) at: String,
    pub(crate) by: &'static str,
}

/// The text duplicates are found by: trimmed, white space collapsed to one space, lower case.
pub(crate) fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Checks memory text: 1–4,000 characters, not blank.
pub(crate) fn check_content(content: &str) -> Result<()> {
    let n = content.chars().count();
    if content.trim().is_empty() || n > MAX_CONTENT_CHARS {
        return Err(Error::invalid(format!(
            "content must be 1-{MAX_CONTENT_CHARS} characters and not blank (got {n})"
        )));
    }
    Ok(())
}

/// Checks and cleans tags: at most 16 of 1–64 characters (trimmed), no control characters,
/// duplicates dropped.
pub(crate) fn check_tags(tags: &[String]) -> Result<Vec<String>> {
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid(format!("at most {MAX_TAGS} tags (got {})", tags.len())));
    }
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim();
        let n = t.chars().count();
        if n == 0 || n > MAX_TAG_CHARS || t.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "a tag must be 1-{MAX_TAG_CHARS} characters without control characters"
            )));
        }
        if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
    }
    Ok(out)
}

/// Checks metadata given as a map (a caller of the core may have built it by hand).
fn check_metadata(m: &Metadata) -> Result<Metadata> {
    metadata::check("metadata", &Json::Object(m.clone()))
}

/// Checks a score: a number in [0, 1].
pub(crate) fn check_score(score: Option<f64>) -> Result<()> {
    match score {
        Some(s) if !(0.0..=1.0).contains(&s) => Err(Error::invalid("score must be a number from 0 to 1")),
        _ => Ok(()),
    }
}

/// An expiry as stored (normalized to milliseconds), not in the past.
pub(crate) fn check_expiry(expires_at: &str, now: &str) -> Result<String> {
    let ms = parse_iso(expires_at)
        .ok_or_else(|| Error::invalid(format!("expiresAt {expires_at:?} is not an ISO-8601 UTC timestamp")))?;
    let at = iso_millis(ms);
    if at.as_str() <= now {
        return Err(Error::invalid("expiresAt is in the past"));
    }
    Ok(at)
}

/// Checks a memory to store (its text, score, session, expiry and `validFrom`).
pub(crate) fn check_new(new: &NewMemory, now: &str) -> Result<()> {
    check_content(&new.content)?;
    if let Some(v) = &new.valid_from {
        parse_iso(v).ok_or_else(|| Error::invalid(format!("validFrom {v:?} is not an ISO-8601 UTC timestamp")))?;
    }
    check_score(new.score)?;
    if new.category == Category::Conversation && new.session_id.is_none() {
        return Err(Error::invalid("a conversation memory needs the session it belongs to (sessionId)"));
    }
    if new.message_id.is_some() && new.session_id.is_none() {
        return Err(Error::invalid("messageId needs a sessionId"));
    }
    if let Some(e) = &new.expires_at {
        check_expiry(e, now)?;
    }
    Ok(())
}

/// The memory row: what a memory is, once. Its fields are the export's (`memory` records) and
/// the API's `Memory` (with `sessionId` and `messageId` as `source`); its columns are those of
/// `migrations/0006_memories.sql` that are not derived (`norm`, the FTS row, the vector).
pub(crate) const ROW: Table = Table {
    kind: "memory",
    table: "memories",
    session: None,
    cols: &[
        Col("id", "id", Ty::Text),
        Col("content", "content", Ty::Text),
        Col("category", "category", Ty::Text),
        Col("tags", "tags", Ty::Json),
        Col("metadata", "metadata", Ty::Meta),
        Col("score", "score", Ty::OptReal),
        Col("sessionId", "session_id", Ty::OptText),
        Col("messageId", "message_id", Ty::OptText),
        Col("createdAt", "created_at", Ty::Time),
        Col("updatedAt", "updated_at", Ty::Time),
        Col("expiresAt", "expires_at", Ty::OptTime),
        Col("recalledAt", "recalled_at", Ty::OptTime),
        Col("recallCount", "recall_count", Ty::Int),
        Col("validFrom", "valid_from", Ty::OptTime),
        Col("invalidAt", "invalid_at", Ty::OptTime),
        Col("supersededBy", "superseded_by", Ty::OptText),
    ],
};

/// The columns every read of memories selects: `seq`, then [`ROW`]'s, then when its vector
/// was made (by the model in use), on alias `alias`: [`WIDTH`] columns.
pub(crate) fn columns(alias: &str) -> String {
    let mut out = format!("{alias}.seq");
    for Col(_, column, _) in ROW.cols {
        out.push_str(&format!(", {alias}.{column}"));
    }
    out.push_str(&format!(
        ", (SELECT v.at FROM vectors v WHERE v.kind = 1 AND v.item = {alias}.seq
              AND v.model = (SELECT model FROM embedding_model WHERE id = 1))"
    ));
    out
}

/// How many columns [`columns`] selects (a query's own columns come after them).
pub(crate) const WIDTH: usize = ROW.cols.len() + 2;

/// A memory from a row of [`columns`] (starting at column `at`).
pub(crate) fn from_row(r: &Row, at: usize) -> Result<Memory> {
    // Column `field` of the row, by its place in [`ROW`] (after `seq`); a name that is not there
    // reads no column (an error, not a panic).
    let col = |field: &str| ROW.cols.iter().position(|c| c.0 == field).map_or(usize::MAX, |i| at + 1 + i);
    let tags: Vec<String> = serde_json::from_str(&r.text(col("tags"))?).unwrap_or_default();
    let category = Category::parse(&r.text(col("category"))?)?;
    let source = r.opt_text(col("sessionId"))?.map(|session_id| Source { session_id, message_id: None });
    let source = match (source, r.opt_text(col("messageId"))?) {
        (Some(s), message_id) => Some(Source { message_id, ..s }),
        (None, _) => None,
    };
    Ok(Memory {
        seq: r.int(at)?,
        id: r.text(col("id"))?,
        content: r.text(col("content"))?,
        category,
        tags,
        metadata: metadata::read(&r.text(col("metadata"))?),
        score: match r.0.get(col("score")) {
            Some(Value::Null) | None => None,
            _ => Some(r.real(col("score"))?),
        },
        source,
        created_at: r.text(col("createdAt"))?,
        updated_at: r.text(col("updatedAt"))?,
        expires_at: r.opt_text(col("expiresAt"))?,
        recalled_at: r.opt_text(col("recalledAt"))?,
        recall_count: r.int(col("recallCount"))?,
        valid_from: match r.opt_text(col("validFrom"))? {
            Some(v) => v,
            None => r.text(col("createdAt"))?,
        },
        invalid_at: r.opt_text(col("invalidAt"))?,
        superseded_by: r.opt_text(col("supersededBy"))?,
        embedded_at: r.opt_text(at + WIDTH - 1)?,
    })
}

/// The condition "not expired at `now`" on alias `m`.
pub(crate) const LIVE: &str = "(m.expires_at IS NULL OR m.expires_at > ?)";

/// Deletes what has expired (with its index rows, vectors and versions). Returns how many.
pub(crate) fn purge_expired(sql: &dyn Sql, now: &str) -> Result<usize> {
    let rows = sql.query("SELECT seq FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?", &[now.into()])?;
    let seqs: Vec<i64> = rows.iter().map(|r| r.int(0)).collect::<Result<_>>()?;
    delete(sql, &seqs)?;
    Ok(seqs.len())
}

/// Deletes memories by `seq`, with their index rows, vectors (a trigger of migration 0013) and
/// versions.
pub(crate) fn delete(sql: &dyn Sql, seqs: &[i64]) -> Result<()> {
    for &seq in seqs {
        let s = [Value::Int(seq)];
        sql.execute("DELETE FROM memories_fts WHERE rowid = ?", &s)?;
        sql.execute("DELETE FROM memory_versions WHERE memory_id = (SELECT id FROM memories WHERE seq = ?)", &s)?;
        sql.execute(
            "UPDATE memories SET superseded_by = NULL WHERE superseded_by = (SELECT id FROM memories WHERE seq = ?)",
            &s,
        )?;
        sql.execute("DELETE FROM memories WHERE seq = ?", &s)?;
    }
    Ok(())
}

/// The memory `id`, unless it does not exist or has expired.
pub fn get(sql: &dyn Sql, id: &str, now: &str) -> Result<Option<Memory>> {
    let q = format!("SELECT {} FROM memories m WHERE m.id = ? AND {LIVE}", columns("m"));
    sql.query_row(&q, &[id.into(), now.into()])?.map(|r| from_row(&r, 0)).transpose()
}

/// How many memories the agent holds (expired ones not yet purged included), from the counter
/// the triggers of migration 0006 keep.
pub(crate) fn count(sql: &dyn Sql) -> Result<i64> {
    Ok(sql.query_row("SELECT n FROM memory_count WHERE id = 1", &[])?.map(|r| r.int(0)).transpose()?.unwrap_or(0))
}

/// Where duplicates of a memory are looked for: its category and normalized text, and for a
/// `conversation` memory its session (the key of the unique index of migration 0010).
struct Key<'a> {
    category: Category,
    norm: &'a str,
    session: Option<&'a str>,
}

impl Key<'_> {
    /// The condition on alias `m` (no alias for a bare `memories` statement) and its values.
    fn cond(&self, alias: &str) -> (String, Vec<Value>) {
        let cond = format!(
            "{alias}category = ? AND {alias}norm = ? AND ({alias}category <> 'conversation' OR {alias}session_id IS ?)"
        );
        (cond, vec![self.category.as_str().into(), self.norm.into(), self.session.into()])
    }
}

fn live_duplicate(sql: &dyn Sql, key: &Key<'_>, now: &str) -> Result<Option<Memory>> {
    let (cond, mut params) = key.cond("m.");
    params.push(now.into());
    let q = format!("SELECT {} FROM memories m WHERE {cond} AND {LIVE} AND m.invalid_at IS NULL", columns("m"));
    sql.query_row(&q, &params)?.map(|r| from_row(&r, 0)).transpose()
}

/// Deletes a row of `key` that expired but was not purged yet (but `seq`), so it does not block
/// the unique index.
fn drop_expired(sql: &dyn Sql, key: &Key<'_>, now: &str, but: i64) -> Result<()> {
    let (cond, mut params) = key.cond("");
    params.extend([now.into(), Value::Int(but)]);
    sql.execute(
        &format!("DELETE FROM memories WHERE {cond} AND expires_at <= ? AND seq != ? AND invalid_at IS NULL"),
        &params,
    )
}

fn tags_json(tags: &[String]) -> String {
    Json::from(tags.to_vec()).to_string()
}

/// Stores `new`, or merges it into the live memory of the same category and normalized text:
/// tags merged, the higher score kept, the new expiry (if given) taken.
pub(crate) fn remember(
    sql: &dyn Sql,
    cfg: &MemoryConfig,
    new: &NewMemory,
    by: By,
    now: &Now,
) -> Result<(Memory, Stored)> {
    let now = now.iso();
    check_new(new, now)?;
    let tags = check_tags(&new.tags)?;
    let meta = check_metadata(&new.metadata)?;
    let norm = normalize(&new.content);
    let key = Key { category: new.category, norm: &norm, session: new.session_id.as_deref() };
    if let Some(old) = live_duplicate(sql, &key, now)? {
        let mut merged = old.tags.clone();
        merged.extend(tags.into_iter().filter(|t| !old.tags.contains(t)));
        if merged.len() > MAX_TAGS {
            merged.truncate(MAX_TAGS);
        }
        let score = match (old.score, new.score) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let expires_at = new.expires_at.as_deref().map(|e| check_expiry(e, now)).transpose()?;
        // The request's keys over the stored ones.
        let mut merged_meta = old.metadata.clone();
        merged_meta.extend(meta);
        if merged_meta.len() > metadata::MAX_KEYS {
            return Err(Error::invalid(format!(
                "memory {} already says this; merged, its metadata would hold {} keys (at most {})",
                old.id,
                merged_meta.len(),
                metadata::MAX_KEYS
            )));
        }
        let patch = Patch {
            tags: Some(merged),
            metadata: Some(merged_meta),
            score: Some(score),
            expires_at: expires_at.map(Some),
            ..Patch::default()
        };
        return Ok((patch_memory(sql, &old, &patch, by, now)?, Stored::Merged));
    }
    Ok((insert(sql, cfg, new, &format!("mem_{}", new_id()?), by, now)?, Stored::Created))
}

/// Inserts `new` (checked) as a new memory of id `id`, within the memory cap, its history begun.
fn insert(sql: &dyn Sql, cfg: &MemoryConfig, new: &NewMemory, id: &str, by: By, now: &str) -> Result<Memory> {
    let tags = check_tags(&new.tags)?;
    let meta = check_metadata(&new.metadata)?;
    let norm = normalize(&new.content);
    let key = Key { category: new.category, norm: &norm, session: new.session_id.as_deref() };
    if count(sql)? >= cfg.max_memories {
        return Err(Error::new(
            ErrorKind::OverBudget,
            format!(
                "this agent holds {} memories, its limit (memory.maxMemories): forget some before storing more",
                cfg.max_memories
            ),
        ));
    }
    let expires_at = expiry(cfg, new, now)?;
    drop_expired(sql, &key, now, 0)?;
    let valid_from = new.valid_from.as_deref().and_then(parse_iso).map_or_else(|| now.to_owned(), iso_millis);
    let row = sql
        .query_row(
            "INSERT INTO memories (id, content, norm, category, tags, metadata, score, session_id, message_id,
               created_at, updated_at, expires_at, valid_from)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
            &[
                id.into(),
                new.content.as_str().into(),
                norm.into(),
                new.category.as_str().into(),
                tags_json(&tags).into(),
                metadata::text(&meta).into(),
                new.score.into(),
                new.session_id.clone().into(),
                new.message_id.clone().into(),
                now.into(),
                now.into(),
                expires_at.into(),
                valid_from.into(),
            ],
        )?
        .ok_or_else(|| Error::internal("INSERT returned no row"))?;
    let seq = row.int(0)?;
    index(sql, seq, &new.content, &tags)?;
    let m = by_seq(sql, seq)?;
    version(sql, &m, by, now)?;
    Ok(m)
}

/// The expiry of `new` as stored: its own, or for a `daily` memory `dailyTtlDays` from now.
fn expiry(cfg: &MemoryConfig, new: &NewMemory, now: &str) -> Result<Option<String>> {
    Ok(match (&new.expires_at, new.category) {
        (Some(e), _) => Some(check_expiry(e, now)?),
        (None, Category::Daily) => Some(iso_millis(parse_iso(now).unwrap_or(0) + cfg.daily_ttl_days * 86_400_000)),
        (None, _) => None,
    })
}

/// `PUT /memories/{id}`: stores `new` as memory `id` when none of that id is stored
/// ([`Stored::Created`]; the id 1-128 characters of `[A-Za-z0-9._:-]`, and a memory of another
/// id that says the same is `conflict`), else replaces the stored one with it
/// ([`Stored::Replaced`]): its text, category, tags, metadata, score and expiry become `new`'s
/// (absent ones their defaults), a new version in its history. A memory's source and
/// `validFrom` stay: given, they must be the stored ones (`conflict` otherwise).
pub(crate) fn put(
    sql: &dyn Sql,
    cfg: &MemoryConfig,
    id: &str,
    new: &NewMemory,
    by: By,
    at: &Now,
) -> Result<(Memory, Stored)> {
    let now = at.iso();
    let Some(old) = get(sql, id, now)? else {
        crate::ids::check_name("memory id", id)?;
        check_new(new, now)?;
        let norm = normalize(&new.content);
        let key = Key { category: new.category, norm: &norm, session: new.session_id.as_deref() };
        if let Some(other) = live_duplicate(sql, &key, now)? {
            return Err(Error::conflict(format!(
                "memory {} already says this (category {}): nothing stored as {id}",
                other.id,
                new.category.as_str()
            )));
        }
        return Ok((insert(sql, cfg, new, id, by, now)?, Stored::Created));
    };
    let source = old.source.as_ref();
    let differs = |given: &Option<String>, stored: Option<&String>| given.is_some() && given.as_ref() != stored;
    if differs(&new.session_id, source.map(|s| &s.session_id))
        || differs(&new.message_id, source.and_then(|s| s.message_id.as_ref()))
    {
        return Err(Error::conflict(format!("memory {id}: its source (sessionId, messageId) cannot change")));
    }
    if let Some(v) = &new.valid_from {
        let at =
            parse_iso(v).ok_or_else(|| Error::invalid(format!("validFrom {v:?} is not an ISO-8601 UTC timestamp")))?;
        if iso_millis(at) != old.valid_from {
            return Err(Error::conflict(format!("memory {id}: its validFrom cannot change")));
        }
    }
    let p = Patch {
        content: Some(new.content.clone()),
        tags: Some(new.tags.clone()),
        metadata: Some(new.metadata.clone()),
        score: Some(new.score),
        category: Some(new.category),
        expires_at: Some(expiry(cfg, new, now)?),
    };
    Ok((patch(sql, cfg, id, &p, by, at)?, Stored::Replaced))
}

/// Marks memory `old` as no longer holding from `at` (not before it began to hold), replaced by
/// memory `by` when one replaced it. Its text and versions stay.
pub(crate) fn invalidate(sql: &dyn Sql, old: &Memory, at: &str, by: Option<&str>, now: &str) -> Result<Memory> {
    let at = if at < old.valid_from.as_str() { old.valid_from.as_str() } else { at };
    sql.execute(
        "UPDATE memories SET invalid_at = ?, superseded_by = ?, updated_at = ? WHERE seq = ?",
        &[at.into(), by.into(), now.into(), Value::Int(old.seq)],
    )?;
    by_seq(sql, old.seq)
}

/// Makes memory `new` replace the memories `ids` (each must exist, hold now and be within
/// `reach`; else `not_found`, or `conflict` for one already replaced): they stop holding at its
/// `valid_from`. Returns them as they now are.
pub(crate) fn supersede(sql: &dyn Sql, new: &Memory, ids: &[String], reach: &Reach, now: &str) -> Result<Vec<Memory>> {
    let mut done: Vec<Memory> = Vec::with_capacity(ids.len());
    for id in ids {
        if *id == new.id {
            return Err(Error::invalid(format!("memory {id} cannot supersede itself")));
        }
        if done.iter().any(|m| m.id == *id) {
            continue;
        }
        let old = superseded(sql, id, reach, now)?;
        done.push(invalidate(sql, &old, &new.valid_from, Some(&new.id), now)?);
    }
    Ok(done)
}

/// Memory `id` as one that `supersedes` may name: there, within `reach`, and holding now
/// (`not_found`, `conflict` otherwise).
fn superseded(sql: &dyn Sql, id: &str, reach: &Reach, now: &str) -> Result<Memory> {
    let old = get(sql, id, now)?
        .filter(|m| within(reach, m))
        .ok_or_else(|| Error::not_found(format!("memory {id} not found (supersedes)")))?;
    if old.invalid_at.is_some() {
        return Err(Error::conflict(format!(
            "memory {id} no longer holds (superseded by {})",
            old.superseded_by.as_deref().unwrap_or("nothing")
        )));
    }
    Ok(old)
}

/// Checks, writing nothing, that [`supersede`] could retire every memory `ids` names: what a
/// write that asks someone first (a consolidation asks the model) checks before asking.
pub(crate) fn check_supersedes(sql: &dyn Sql, ids: &[String], reach: &Reach, now: &str) -> Result<()> {
    ids.iter().try_for_each(|id| superseded(sql, id, reach, now).map(|_| ()))
}

fn by_seq(sql: &dyn Sql, seq: i64) -> Result<Memory> {
    let q = format!("SELECT {} FROM memories m WHERE m.seq = ?", columns("m"));
    from_row(&sql.query_row(&q, &[Value::Int(seq)])?.ok_or_else(|| Error::internal("memory vanished"))?, 0)
}

pub(crate) fn index(sql: &dyn Sql, seq: i64, content: &str, tags: &[String]) -> Result<()> {
    sql.execute("DELETE FROM memories_fts WHERE rowid = ?", &[Value::Int(seq)])?;
    sql.execute(
        "INSERT INTO memories_fts (rowid, content, tags) VALUES (?, ?, ?)",
        &[Value::Int(seq), content.into(), tags.join(" ").into()],
    )
}

fn version(sql: &dyn Sql, m: &Memory, by: By, now: &str) -> Result<()> {
    sql.execute(
        "INSERT INTO memory_versions (memory_id, content, tags, metadata, score, category, at, by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            m.id.as_str().into(),
            m.content.as_str().into(),
            tags_json(&m.tags).into(),
            metadata::text(&m.metadata).into(),
            m.score.into(),
            m.category.as_str().into(),
            now.into(),
            by.as_str().into(),
        ],
    )
}

/// Changes memory `id` (live ones only). A change that would make it the duplicate of another
/// memory of its category is `conflict`.
pub(crate) fn patch(sql: &dyn Sql, cfg: &MemoryConfig, id: &str, patch: &Patch, by: By, now: &Now) -> Result<Memory> {
    let (now_ms, now) = (now.ms(), now.iso());
    let old = get(sql, id, now)?.ok_or_else(|| Error::not_found(format!("memory {id} not found")))?;
    if let Some(c) = &patch.content {
        check_content(c)?;
    }
    if let Some(s) = patch.score {
        check_score(s)?;
    }
    if patch.category == Some(Category::Conversation) && old.source.is_none() {
        return Err(Error::invalid("a conversation memory needs the session it belongs to (sessionId)"));
    }
    let mut patch = patch.clone();
    if let Some(Some(e)) = &patch.expires_at {
        patch.expires_at = Some(Some(check_expiry(e, now)?));
    } else if patch.category == Some(Category::Daily) && old.category != Category::Daily && old.expires_at.is_none() {
        let ms = now_ms + cfg.daily_ttl_days * 86_400_000;
        patch.expires_at.get_or_insert(Some(iso_millis(ms)));
    }
    if let Some(t) = &patch.tags {
        patch.tags = Some(check_tags(t)?);
    }
    if let Some(m) = &patch.metadata {
        patch.metadata = Some(check_metadata(m)?);
    }
    patch_memory(sql, &old, &patch, by, now)
}

/// Writes `p` over `old`. A changed text loses its vector and waits for a new one (the triggers
/// of migration 0013).
fn patch_memory(sql: &dyn Sql, old: &Memory, p: &Patch, by: By, now: &str) -> Result<Memory> {
    let content = p.content.clone().unwrap_or_else(|| old.content.clone());
    let category = p.category.unwrap_or(old.category);
    let norm = normalize(&content);
    let key = Key { category, norm: &norm, session: old.source.as_ref().map(|s| s.session_id.as_str()) };
    if let Some(other) = live_duplicate(sql, &key, now)?.filter(|o| o.id != old.id) {
        return Err(Error::conflict(format!("memory {} already says this (category {})", other.id, category.as_str())));
    }
    drop_expired(sql, &key, now, old.seq)?;
    let tags = p.tags.clone().unwrap_or_else(|| old.tags.clone());
    let meta = p.metadata.as_ref().unwrap_or(&old.metadata);
    let score = p.score.unwrap_or(old.score);
    let expires_at = p.expires_at.clone().unwrap_or_else(|| old.expires_at.clone());
    sql.execute(
        "UPDATE memories SET content = ?, norm = ?, category = ?, tags = ?, metadata = ?, score = ?, expires_at = ?,
           updated_at = ?
         WHERE seq = ?",
        &[
            content.as_str().into(),
            norm.into(),
            category.as_str().into(),
            tags_json(&tags).into(),
            metadata::text(meta).into(),
            score.into(),
            expires_at.into(),
            now.into(),
            Value::Int(old.seq),
        ],
    )?;
    index(sql, old.seq, &content, &tags)?;
    let m = by_seq(sql, old.seq)?;
    version(sql, &m, by, now)?;
    Ok(m)
}

/// The SQL condition and parameters of `filter` on alias `m` (live memories only). Each list
/// (categories, tags, the sessions of the reach, the metadata pairs) is one parameter, so the
/// filter binds a dozen at most whatever it holds (a Durable Object binds at most 100 per
/// statement, and a ranking adds its own).
pub(crate) fn filter_sql(filter: &Filter, now: &str) -> (String, Vec<Value>) {
    let mut cond = vec![LIVE.to_owned()];
    let mut params: Vec<Value> = vec![now.into()];
    let (held, values) = filter.held.cond();
    cond.push(held);
    params.extend(values);
    if !filter.categories.is_empty() {
        cond.push("m.category IN (SELECT value FROM json_each(?))".into());
        params.push(json_texts(filter.categories.iter().map(|c| c.as_str())).into());
    }
    if !filter.tags.is_empty() {
        cond.push(
            "NOT EXISTS (SELECT 1 FROM json_each(?) w WHERE w.value NOT IN (SELECT value FROM json_each(m.tags)))"
                .into(),
        );
        params.push(json_texts(filter.tags.iter().map(String::as_str)).into());
    }
    if !filter.any_tags.is_empty() {
        cond.push(
            "EXISTS (SELECT 1 FROM json_each(m.tags) t WHERE t.value IN (SELECT value FROM json_each(?)))".into(),
        );
        params.push(json_texts(filter.any_tags.iter().map(String::as_str)).into());
    }
    filter.created.conditions("m.created_at", &mut cond, &mut params);
    filter.updated.conditions("m.updated_at", &mut cond, &mut params);
    if let Some((meta, value)) = filter.metadata.condition("m.metadata") {
        cond.push(meta);
        params.push(value);
    }
    if let Some(s) = &filter.session_id {
        cond.push("m.session_id = ?".into());
        params.push(s.as_str().into());
    }
    if let Reach::Sessions(list) = &filter.reach {
        cond.push("(m.category <> 'conversation' OR m.session_id IN (SELECT value FROM json_each(?)))".into());
        params.push(json_texts(list.iter().map(String::as_str)).into());
    }
    (cond.join(" AND "), params)
}

/// Every live memory `filter` selects, oldest first.
pub(crate) fn select_all(sql: &dyn Sql, filter: &Filter, now: &str) -> Result<Vec<Memory>> {
    let (cond, params) = filter_sql(filter, now);
    let q = format!("SELECT {} FROM memories m WHERE {cond} ORDER BY m.seq", columns("m"));
    sql.query(&q, &params)?.iter().map(|r| from_row(r, 0)).collect()
}

/// A page of live memories, newest `createdAt` first (ties: the later insert first), and the
/// cursor of the next page.
pub fn list(
    sql: &dyn Sql,
    filter: &Filter,
    limit: i64,
    cursor: Option<&str>,
    now: &str,
) -> Result<(Vec<Memory>, Option<String>)> {
    let (mut cond, mut params) = filter_sql(filter, now);
    if let Some(c) = cursor {
        let (after, values) = Cursor::parse(c)?.after("m.created_at", "m.seq");
        cond.push_str(&format!(" AND {after}"));
        params.extend(values);
    }
    params.push(Value::Int(limit + 1));
    let q =
        format!("SELECT {} FROM memories m WHERE {cond} ORDER BY m.created_at DESC, m.seq DESC LIMIT ?", columns("m"));
    let mut page: Vec<Memory> = sql.query(&q, &params)?.iter().map(|r| from_row(r, 0)).collect::<Result<_>>()?;
    let next = if page.len() as i64 > limit {
        page.truncate(limit as usize);
        page.last().map(|m| Cursor { at: m.created_at.clone(), seq: m.seq }.text())
    } else {
        None
    };
    Ok((page, next))
}

/// Every version of memory `id`, oldest first; `None` when it does not exist (or expired).
pub fn history(sql: &dyn Sql, id: &str, now: &str) -> Result<Option<Vec<Version>>> {
    if get(sql, id, now)?.is_none() {
        return Ok(None);
    }
    let rows = sql.query(
        "SELECT content, tags, score, category, at, by, metadata FROM memory_versions WHERE memory_id = ? ORDER BY seq",
        &[id.into()],
    )?;
    let versions = rows
        .iter()
        .map(|r| {
            Ok(Version {
                content: r.text(0)?,
                tags: serde_json::from_str(&r.text(1)?).unwrap_or_default(),
                metadata: metadata::read(&r.text(6)?),
                score: match r.0.get(2) {
                    Some(Value::Null) | None => None,
                    _ => Some(r.real(2)?),
                },
                category: Category::parse(&r.text(3)?)?,
                at: r.text(4)?,
                by: match r.text(5)?.as_str() {
                    "tool" => By::Tool.as_str(),
                    "extract" => By::Extract.as_str(),
                    _ => By::Api.as_str(),
                },
            })
        })
        .collect::<Result<_>>()?;
    Ok(Some(versions))
}

/// Deletes the `conversation` memories of a session that is being deleted (`core` and `daily`
/// ones stay). Returns them, as they were.
pub(crate) fn delete_session(sql: &dyn Sql, session: &str) -> Result<Vec<Memory>> {
    let q = format!("SELECT {} FROM memories m WHERE m.category = 'conversation' AND m.session_id = ?", columns("m"));
    let gone: Vec<Memory> = sql.query(&q, &[session.into()])?.iter().map(|r| from_row(r, 0)).collect::<Result<_>>()?;
    delete(sql, &gone.iter().map(|m| m.seq).collect::<Vec<_>>())?;
    Ok(gone)
}

/// The memory as the model reads it in a tool output or the injected block.
pub(crate) fn line(m: &Memory) -> String {
    let tags = if m.tags.is_empty() { String::new() } else { format!(" [{}]", m.tags.join(", ")) };
    format!("- ({}) {}{tags}", m.id, m.content)
}
