//! The sessions registry of one agent: create, list, get, rename, delete, fork and usage sums.

use serde::Serialize;
use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::ids::new_id;
use crate::metadata::{self, Metadata};
use crate::page::Cursor;
use crate::sql::{Row, Sql, Value};
use crate::store::message::{indexed_text, NewMessage};
use crate::store::overlay;
use crate::store::search;
use crate::store::spill;
use crate::store::tree::{chunks, Tree};

/// Longest session name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 256;

/// A session as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) parent_session_id: Option<String>,
    pub model: Option<String>,
    pub(crate) source: Option<String>,
    /// The caller's own facts about it (`core::metadata`); `{}` when none.
    pub(crate) metadata: Metadata,
    pub(crate) input_tokens: i64,
    pub(crate) output_tokens: i64,
    pub(crate) estimated_cost: f64,
    pub(crate) end_reason: Option<String>,
    /// Messages on the session's active path (root to the latest leaf), the reference's `getMessageCount`
    /// (docs/REFERENCE.md#sessions).
    pub(crate) message_count: i64,
    /// Messages stored in the session, on every branch.
    pub(crate) total_messages: i64,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

/// The fields a new session may set.
#[derive(Clone, Debug, Default)]
pub struct NewSession {
    pub name: String,
    pub parent_session_id: Option<String>,
    pub model: Option<String>,
    pub source: Option<String>,
    /// Checked again when stored ([`metadata::check`]).
    pub metadata: Metadata,
}

/// A change to a session (`PATCH /sessions/{sid}`): each field set replaces the stored one.
#[derive(Clone, Debug, Default)]
pub struct Change {
    pub name: Option<String>,
    pub metadata: Option<Metadata>,
}

/// The columns of [`SessionInfo`] but its counts, and the session's version (12 and 13), which
/// moves whenever the counts may have.
fn select() -> String {
    format!(
        "SELECT s.id, s.name, s.parent_session_id, s.model, s.source, s.input_tokens,
                s.output_tokens, s.estimated_cost, s.end_reason, s.created_at, s.updated_at, s.metadata, {}
           FROM sessions s",
        version_columns("s.id")
    )
}

/// [`select`] with the update order as its last column (14), for the list's cursor.
fn select_with_touch() -> String {
    select().replacen(" FROM sessions s", ", s.touch_seq FROM sessions s", 1)
}

/// The two columns of the version of the session that the SQL expression `session` names: the
/// seq of its newest message (0 without one; an insert moves it) and the count of its other
/// writes to messages and overlays (`migrations/0009_versions.sql`). Any write to what the
/// session's history reads changes the pair, and no pair comes back.
pub(crate) fn version_columns(session: &str) -> String {
    format!(
        "COALESCE((SELECT MAX(seq) FROM messages WHERE session_id = {session}), 0),
         COALESCE((SELECT n FROM session_versions WHERE session_id = {session}), 0)"
    )
}

/// How many messages a session holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Stored, on every branch.
    pub(crate) total: i64,
    /// On the active path.
    pub(crate) path: i64,
}

/// What a text was read at: two counters that change with every write to what it was read
/// from, and never come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    /// A session's newest message's seq (an insert moves it); across sessions,
    /// [`Sql::changes`](crate::sql::Sql::changes).
    pub(crate) newest: u64,
    /// A session's row of `session_versions`, which triggers count up on every other write to
    /// its messages and overlays; 0 across sessions.
    pub(crate) writes: u64,
}

/// Where the counts of a session come from: given its id and its version, the counts.
pub(crate) type CountsOf<'a> = &'a dyn Fn(&str, Version) -> Result<Counts>;

/// The counts of session `id`: its rows, and its active path from the latest leaf (the
/// session's newest row) as every path is walked ([`Tree::path_len`]).
pub(crate) fn counts(sql: &dyn Sql, id: &str) -> Result<Counts> {
    let total = sql
        .query_row("SELECT COUNT(*) FROM messages WHERE session_id = ?", &[id.into()])?
        .ok_or_else(|| Error::internal("COUNT answered no row"))?
        .int(0)?;
    let tree = Tree::new(sql, id);
    let path = match tree.latest_leaf_id()? {
        Some(leaf) => tree.path_len(&leaf)?,
        None => 0,
    };
    Ok(Counts { total, path })
}

fn info(r: &Row, counts: CountsOf) -> Result<SessionInfo> {
    let id = r.text(0)?;
    let c = counts(&id, Version { newest: r.int(12)? as u64, writes: r.int(13)? as u64 })?;
    Ok(SessionInfo {
        id,
        name: r.text(1)?,
        parent_session_id: r.opt_text(2)?,
        model: r.opt_text(3)?,
        source: r.opt_text(4)?,
        metadata: metadata::read(&r.text(11)?),
        input_tokens: r.int(5)?,
        output_tokens: r.int(6)?,
        estimated_cost: r.real(7)?,
        end_reason: r.opt_text(8)?,
        created_at: r.text(9)?,
        updated_at: r.text(10)?,
        total_messages: c.total,
        message_count: c.path,
    })
}

/// Checks a session name: 1–256 characters, no control characters.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let n = name.chars().count();
    if n == 0 || n > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(Error::invalid(format!("name must be 1-{MAX_NAME_CHARS} characters without control characters")));
    }
    Ok(())
}

/// One session, or `None`.
pub(crate) fn get(sql: &dyn Sql, id: &str) -> Result<Option<SessionInfo>> {
    get_with(sql, id, &|id, _| counts(sql, id))
}

/// One session, or `None`, with its counts from `counts_of`.
pub(crate) fn get_with(sql: &dyn Sql, id: &str, counts_of: CountsOf) -> Result<Option<SessionInfo>> {
    sql.query_row(&format!("{} WHERE s.id = ?", select()), &[id.into()])?.map(|r| info(&r, counts_of)).transpose()
}

/// One session, or `not_found`.
pub(crate) fn require(sql: &dyn Sql, id: &str) -> Result<SessionInfo> {
    get(sql, id)?.ok_or_else(|| Error::not_found(format!("session {id} not found")))
}

/// Every session `page.metadata` selects, most recently updated first (ties: the later update
/// first), with its counts from `counts_of`.
pub(crate) fn list_with(sql: &dyn Sql, counts_of: CountsOf, page: &Page) -> Result<(Vec<SessionInfo>, Option<Cursor>)> {
    let (mut conds, mut params): (Vec<String>, Vec<Value>) =
        page.metadata.condition("s.metadata").map(|(c, v)| (vec![c], vec![v])).unwrap_or_default();
    if let Some(c) = &page.after {
        let (cond, values) = c.after("s.updated_at", "s.touch_seq");
        conds.push(cond);
        params.extend(values);
    }
    let cond = if conds.is_empty() { String::new() } else { format!(" WHERE {}", conds.join(" AND ")) };
    let limit = match page.limit {
        Some(n) => {
            params.push(Value::Int(n + 1));
            " LIMIT ?"
        }
        None => "",
    };
    let q = format!("{}{cond} ORDER BY s.updated_at DESC, s.touch_seq DESC{limit}", select_with_touch());
    let rows = sql.query(&q, &params)?;
    let more = page.limit.is_some_and(|n| rows.len() as i64 > n);
    let rows = &rows[..page.limit.map_or(rows.len(), |n| rows.len().min(n as usize))];
    let next = match (more, rows.last()) {
        (true, Some(last)) => Some(Cursor { at: last.text(10)?, seq: last.int(14)? }),
        _ => None,
    };
    Ok((rows.iter().map(|r| info(r, counts_of)).collect::<Result<_>>()?, next))
}

/// A page of the sessions list: at most `limit` sessions (all of them without one), after the
/// session `after` ended the page before, of those whose metadata matches `metadata`.
#[derive(Clone, Debug, Default)]
pub struct Page {
    pub limit: Option<i64>,
    pub after: Option<Cursor>,
    pub metadata: metadata::Filter,
}

/// Largest page of `GET /sessions`.
pub const MAX_PAGE: i64 = 100;

/// The update order a session takes when it is written: after every other (`updated_at` ties
/// are broken by it).
const NEXT_TOUCH: &str = "(SELECT COALESCE(MAX(touch_seq), 0) + 1 FROM sessions)";

/// [`NEXT_TOUCH`], read (for a session row written whole: an import).
pub(crate) fn next_touch(sql: &dyn Sql) -> Result<i64> {
    sql.query_row(&format!("SELECT {NEXT_TOUCH}"), &[])?.ok_or_else(|| Error::internal("no touch order"))?.int(0)
}

fn insert(sql: &dyn Sql, id: &str, s: &NewSession, now: &str) -> Result<()> {
    sql.execute(
        &format!(
            "INSERT INTO sessions (id, name, parent_session_id, model, source, metadata, created_at, updated_at,
               touch_seq)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, {NEXT_TOUCH})"
        ),
        &[
            id.into(),
            s.name.as_str().into(),
            s.parent_session_id.clone().into(),
            s.model.clone().into(),
            s.source.clone().into(),
            metadata::text(&s.metadata).into(),
            now.into(),
            now.into(),
        ],
    )
}

/// Registers a new session under a fresh id.
pub fn create(sql: &dyn Sql, s: &NewSession, now: &str) -> Result<SessionInfo> {
    check_name(&s.name)?;
    let s = NewSession { metadata: check_metadata(&s.metadata)?, ..s.clone() };
    let id = new_id()?;
    insert(sql, &id, &s, now)?;
    require(sql, &id)
}

/// Checks metadata given as a map (a caller of the core may have built it by hand).
fn check_metadata(m: &Metadata) -> Result<Metadata> {
    metadata::check("metadata", &Json::Object(m.clone()))
}

/// Registers `id` with `name = id` if no session has that id yet (every write does this).
pub(crate) fn ensure(sql: &dyn Sql, id: &str, now: &str) -> Result<()> {
    if get_exists(sql, id)? {
        return Ok(());
    }
    insert(sql, id, &NewSession { name: id.to_owned(), ..Default::default() }, now)
}

fn get_exists(sql: &dyn Sql, id: &str) -> Result<bool> {
    Ok(sql.query_row("SELECT 1 FROM sessions WHERE id = ?", &[id.into()])?.is_some())
}

/// Marks the session as updated now.
pub(crate) fn touch(sql: &dyn Sql, id: &str, now: &str) -> Result<()> {
    sql.execute(
        &format!("UPDATE sessions SET updated_at = ?, touch_seq = {NEXT_TOUCH} WHERE id = ?"),
        &[now.into(), id.into()],
    )
}

/// Renames a session, replaces its metadata, or both (`not_found` when unknown; `invalid_request`
/// when the change sets neither).
pub fn update(sql: &dyn Sql, id: &str, change: &Change, now: &str) -> Result<SessionInfo> {
    if change.name.is_none() && change.metadata.is_none() {
        return Err(Error::invalid("give the session's new name, its new metadata, or both"));
    }
    if let Some(name) = &change.name {
        check_name(name)?;
    }
    let meta = change.metadata.as_ref().map(check_metadata).transpose()?;
    require(sql, id)?;
    if let Some(name) = &change.name {
        sql.execute("UPDATE sessions SET name = ? WHERE id = ?", &[name.as_str().into(), id.into()])?;
    }
    if let Some(m) = &meta {
        sql.execute("UPDATE sessions SET metadata = ? WHERE id = ?", &[metadata::text(m).into(), id.into()])?;
    }
    touch(sql, id, now)?;
    require(sql, id)
}

/// Deletes a session, its messages and overlays (`not_found` when unknown). Its context rows
/// belong to [`crate::context`], which deletes them in the same transaction.
pub(crate) fn delete(sql: &dyn Sql, id: &str) -> Result<()> {
    require(sql, id)?;
    Tree::new(sql, id).clear()?;
    sql.execute("DELETE FROM sessions WHERE id = ?", &[id.into()])
}

/// The largest token total kept: JavaScript numbers (what most clients parse JSON into) are
/// exact up to 2^53 - 1.
pub(crate) const MAX_TOKENS: i64 = crate::table::MAX_INT;

/// Adds token and cost figures to the session's totals, registering it if needed. Figures that
/// are negative or not finite, or sums that would pass `MAX_TOKENS` or stop being a finite
/// cost, are `invalid_request` and change nothing.
pub fn add_usage(sql: &dyn Sql, id: &str, input: i64, output: i64, cost: f64, now: &str) -> Result<SessionInfo> {
    if input < 0 || output < 0 || !(cost >= 0.0 && cost.is_finite()) {
        return Err(Error::invalid("usage figures must be finite and not negative"));
    }
    let (had_in, had_out, had_cost) = match sql
        .query_row("SELECT input_tokens, output_tokens, estimated_cost FROM sessions WHERE id = ?", &[id.into()])?
    {
        Some(r) => (r.int(0)?, r.int(1)?, r.real(2)?),
        None => (0, 0, 0.0),
    };
    let sum = |had: i64, add: i64, what: &str| {
        had.checked_add(add)
            .filter(|n| *n <= MAX_TOKENS)
            .ok_or_else(|| Error::invalid(format!("{what} would pass {MAX_TOKENS} (the session has {had})")))
    };
    let input = sum(had_in, input, "inputTokens")?;
    let output = sum(had_out, output, "outputTokens")?;
    let cost = had_cost + cost;
    if !cost.is_finite() {
        return Err(Error::invalid(format!("estimatedCost would overflow (the session has {had_cost})")));
    }
    ensure(sql, id, now)?;
    sql.execute(
        "UPDATE sessions SET input_tokens = ?, output_tokens = ?, estimated_cost = ? WHERE id = ?",
        &[Value::Int(input), Value::Int(output), Value::Real(cost), id.into()],
    )?;
    touch(sql, id, now)?;
    require(sql, id)
}

/// Copies the path from the root to `at` into a new session (child of `id`, same model, source
/// and metadata) with fresh message ids, together with the overlays that lie wholly on that path, so
/// the fork reads exactly as the original did at `at`. Run inside a transaction.
pub fn fork(sql: &dyn Sql, id: &str, at: &str, name: Option<&str>, now: &str) -> Result<SessionInfo> {
    let source = require(sql, id)?;
    let tree = Tree::new(sql, id);
    if !tree.contains(at)? {
        return Err(Error::not_found(format!("message {at} not found in session {id}")));
    }
    let name = name.map_or_else(|| format!("{} (fork)", source.name), str::to_owned);
    let copy = create(
        sql,
        &NewSession {
            name,
            parent_session_id: Some(id.to_owned()),
            model: source.model.clone(),
            source: source.source.clone(),
            metadata: source.metadata.clone(),
        },
        now,
    )?;
    let target = Tree::new(sql, &copy.id);
    let path = tree.path(at)?;
    let mut new_ids = std::collections::HashMap::with_capacity(path.len());
    let mut parent: Option<String> = None;
    for chunk in chunks(&path) {
        for (row, raw) in chunk.iter().zip(tree.hydrate(chunk)?) {
            let mut value: Json = serde_json::from_str(raw.get()).map_err(|e| Error::internal(e.to_string()))?;
            let new_id = new_id()?;
            value["id"] = Json::String(new_id.clone());
            let text = value.get("parts").and_then(Json::as_array).map_or_else(String::new, |p| indexed_text(p));
            let msg = NewMessage {
                id: new_id.clone(),
                role: row.role.clone(),
                json: value.to_string(),
                text,
                spills: Vec::new(),
                full: None,
            };
            let seq = target.insert(&msg, parent.as_deref(), now)?;
            // Spilled fields: the copy shares the objects, and indexes the original's full text.
            if spill::copy(sql, row.seq, seq, &copy.id)? {
                let indexed = sql
                    .query_row("SELECT content FROM messages_fts WHERE rowid = ?", &[Value::Int(row.seq)])?
                    .map(|r| r.text(0))
                    .transpose()?;
                sql.execute("DELETE FROM messages_fts WHERE rowid = ?", &[Value::Int(seq)])?;
                if let Some(t) = indexed {
                    search::index(sql, &copy.id, seq, &t)?;
                }
            }
            new_ids.insert(row.id.clone(), new_id.clone());
            parent = Some(new_id);
        }
    }
    for c in overlay::list(sql, id)? {
        if let (Some(from), Some(to)) = (new_ids.get(&c.from_message_id), new_ids.get(&c.to_message_id)) {
            overlay::add(sql, &copy.id, &c.summary, from, to, now)?;
        }
    }
    require(sql, &copy.id)
}
