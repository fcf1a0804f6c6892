//! Full-text search over messages (FTS5, porter unicode61, bm25 ranking), in one session or
//! across all of them: a plain-language [`Query`] (`core::query`, never user text passed
//! through) ranked at a bounded cost (`core::rank`).

use serde::Serialize;

use crate::access::Reach;
use crate::error::Result;
use crate::metadata;
use crate::query::Query;
use crate::rank::{rank, rowids, Index, Ranked, Scope, Unmatched};
use crate::sql::{json_texts, Sql, Value};

/// Default number of results.
pub const DEFAULT_LIMIT: i64 = 20;
/// Largest `limit` accepted.
pub const MAX_LIMIT: i64 = 100;

/// One hit. `content` is the indexed text of the message (its text parts joined by a space).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    pub(crate) id: String,
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) created_at: String,
    /// Its lexical relevance (`core::rank`: bm25, higher is better), not shown: what another
    /// signal is fused with.
    #[serde(skip)]
    pub(crate) score: f64,
}

/// The message index: words in `content`, ranked as `bm25(messages_fts, 1.0, 0.0)` (the
/// `session` column holds the session's token, which never counts).
const MESSAGES: Index = Index { fts: "messages_fts", column: Some("content"), weights: "1.0, 0.0", weight: 1.0 };

/// Searches one session, best match first. The index holds a token for each message's session
/// ([`index`]), asked for beside the words: FTS5 looks only at this session's matches, so the
/// cost follows the session's newest matches, not the agent's.
pub(crate) fn in_session(sql: &dyn Sql, session: &str, query: &Query, limit: i64) -> Result<Vec<Hit>> {
    let scope = Scope { words: Some(format!("session : \"{}\"", session_token(session))), rows: None };
    let ranked = rank(sql, &MESSAGES, &scope, query, Unmatched::Nothing, limit.max(0) as usize)?;
    hits(sql, &ranked, "m.session_id = ?2", &[session.into()], HitSession::Omitted)
}

/// Searches every session of the agent within `reach` whose metadata matches `metadata`, best
/// match first; hits carry their session id. A reach of some sessions asks for their tokens
/// beside the words (as [`in_session`] does for one), and the hits keep to them too; a metadata
/// filter is the reach of the sessions it selects.
pub(crate) fn across_sessions(
    sql: &dyn Sql,
    query: &Query,
    limit: i64,
    reach: &Reach,
    metadata: &metadata::Filter,
) -> Result<Vec<Hit>> {
    let narrowed;
    let reach = match metadata.is_empty() {
        true => reach,
        false => {
            narrowed = narrow(sql, reach, metadata)?;
            &narrowed
        }
    };
    let limit = limit.max(0) as usize;
    match reach {
        Reach::All => {
            let ranked = rank(sql, &MESSAGES, &Scope::default(), query, Unmatched::Nothing, limit)?;
            hits(sql, &ranked, "1", &[], HitSession::Shown)
        }
        Reach::Sessions(list) if list.is_empty() => Ok(Vec::new()),
        Reach::Sessions(list) => {
            let tokens: Vec<String> = list.iter().map(|s| format!("\"{}\"", session_token(s))).collect();
            let scope = Scope { words: Some(format!("session : ({})", tokens.join(" OR "))), rows: None };
            let ranked = rank(sql, &MESSAGES, &scope, query, Unmatched::Nothing, limit)?;
            let sessions = json_texts(list.iter().map(String::as_str));
            hits(
                sql,
                &ranked,
                "m.session_id IN (SELECT value FROM json_each(?2))",
                &[sessions.into()],
                HitSession::Shown,
            )
        }
    }
}

/// The sessions within `reach` whose metadata matches `metadata` (a non-empty filter), as a
/// reach: what a search across sessions with a metadata filter keeps to, by words and by meaning.
pub(crate) fn narrow(sql: &dyn Sql, reach: &Reach, metadata: &metadata::Filter) -> Result<Reach> {
    let rows = match metadata.condition("s.metadata") {
        Some((cond, value)) => sql.query(&format!("SELECT s.id FROM sessions s WHERE {cond}"), &[value])?,
        None => sql.query("SELECT s.id FROM sessions s", &[])?,
    };
    let mut ids: Vec<String> = rows.iter().map(|r| r.text(0)).collect::<Result<_>>()?;
    if let Reach::Sessions(list) = reach {
        ids.retain(|id| list.contains(id));
    }
    Ok(Reach::Sessions(ids))
}

/// Whether hits name their session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HitSession {
    Shown,
    Omitted,
}

/// The hits of `ranked` in its order, of the messages that pass `cond` (on `m`, whose
/// parameters start at `?2`). `CROSS JOIN` keeps SQLite's planner from starting with the
/// session's messages (its index on `session_id`), which would read all of them.
fn hits(sql: &dyn Sql, ranked: &[Ranked], cond: &str, params: &[Value], session: HitSession) -> Result<Vec<Hit>> {
    if ranked.is_empty() {
        return Ok(Vec::new());
    }
    let mut all: Vec<Value> = vec![rowids(ranked).into()];
    all.extend(params.iter().cloned());
    let rows = sql.query(
        &format!(
            "SELECT j.key, m.session_id, m.id, m.role, f.content, m.created_at
               FROM json_each(?1) j CROSS JOIN messages m ON m.seq = j.value CROSS JOIN messages_fts f ON f.rowid = m.seq
              WHERE {cond} ORDER BY j.key"
        ),
        &all,
    )?;
    let mut hits = Vec::with_capacity(rows.len());
    for r in rows {
        hits.push(Hit {
            session_id: (session == HitSession::Shown).then(|| r.text(1)).transpose()?,
            id: r.text(2)?,
            role: r.text(3)?,
            content: r.text(4)?,
            created_at: r.text(5)?,
            score: ranked.get(r.int(0)? as usize).map_or(0.0, |x| x.score),
        });
    }
    Ok(hits)
}

/// Indexes the text of the message `seq` of `session` (nothing for an empty text): its words in
/// the `content` column, and in the `session` column one token naming the session,
/// [`session_token`] (letters and digits only, so the tokenizer keeps it whole).
pub(crate) fn index(sql: &dyn Sql, session: &str, seq: i64, text: &str) -> Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    sql.execute(
        "INSERT INTO messages_fts (rowid, content, session) VALUES (?, ?, ?)",
        &[Value::Int(seq), text.into(), session_token(session).into()],
    )
}

/// The token of `session` in the index: `x` and the upper-case hex of its UTF-8 bytes, as
/// SQLite's `'x' || hex(session_id)` (migration 0008 indexed the messages stored before it so).
pub fn session_token(session: &str) -> String {
    use std::fmt::Write;
    let mut token = String::with_capacity(1 + 2 * session.len());
    token.push('x');
    for b in session.bytes() {
        let _ = write!(token, "{b:02X}");
    }
    token
}
