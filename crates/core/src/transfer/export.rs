//! Exports: one session as a JSON document, the whole agent (or memory space) as NDJSON handed
//! out in chunks.
//!
//! A session document: `{"format", "session": {…}, "messages": [{parentId, createdAt,
//! message}…], "compactions": […], "contextBlocks": […], "contextDefs": […], "loadedSkills":
//! […], "prompts": […], "sharedBlockReads": […]}`, messages in the order they were written (a
//! parent always before its children) with spilled fields put back. The agent's NDJSON: a
//! first record `{"format", "kind": "agent"}`; per session a `session` record, its `message`
//! records and its other rows (each with `sessionId`); the agent-scoped block texts
//! (`contextBlock` with `sessionId: ""`); `memory`, `memoryVersion`, `entry`, `schedule`,
//! `scheduleRun`, `usage`, `spaceChoice` and `skill` records; a last `end` record with the
//! counts, so a cut-off export is never taken for a whole one. A space's: `{"format", "kind":
//! "space"}`, `memory`, `memoryVersion`, `sharedBlock` and `sharedBlockFloor` records, `end`.

use serde_json::{json, Map, Value as Json};

use super::tables::{
    Table, AGENT_ROWS, AGENT_SINGLES, BLOCKS, ENTRIES, SESSIONS, SESSION_TABLES, SPACE_ROWS, SPACE_SINGLES,
};
use super::{kind_of, Counts, FORMAT};
use crate::blobs::BoxFuture;
use crate::config::{BlockConfig, BlockKind, BlockScope};
use crate::context::entry_labels;
use crate::env::Env;
use crate::error::{Error, Result, Warned};
use crate::ids::Role;
use crate::sort;
use crate::sql::{Sql, Value};
use crate::store::message::raw;
use crate::store::spill;

/// Messages read (and rehydrated) at a time.
const PAGE: i64 = 500;
/// Rows of one agent-wide kind per chunk.
const ROWS_PER_CHUNK: i64 = 2_000;

/// The export of session `sid` as one JSON document (`not_found` when it does not exist), and
/// warnings (a spilled field whose object is missing keeps its placeholder).
pub async fn session(env: &Env<'_>, sid: &str) -> Result<Warned<String>> {
    let info = session_row(env.sql, sid)?.ok_or_else(|| Error::not_found(format!("session {sid} not found")))?;
    let mut out = format!("{{\"format\":{},\"session\":{},\"messages\":[", json!(FORMAT), Json::Object(info));
    let mut warnings = Vec::new();
    let mut first = true;
    let mut after = 0;
    loop {
        let (entries, last, w) = messages(env, sid, after).await?;
        warnings.extend(w);
        for e in &entries {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(e);
        }
        match last {
            Some(l) => after = l,
            None => break,
        }
    }
    out.push(']');
    for t in SESSION_TABLES {
        let rows: Vec<Json> = t.rows(env.sql, Some(sid), "", &[])?.into_iter().map(Json::Object).collect();
        out.push_str(&format!(",\"{}s\":{}", t.kind, Json::Array(rows)));
    }
    out.push('}');
    Ok(Warned { value: out, warnings })
}

/// The `session` fields of `sid`, if it exists.
fn session_row(sql: &dyn Sql, sid: &str) -> Result<Option<Map<String, Json>>> {
    Ok(SESSIONS.rows(sql, None, "id = ?", &[sid.into()])?.pop())
}

/// One page of `sid`'s messages after row `after`, each as `{"parentId","createdAt","message"}`
/// text, with the last row read (`None`: no more) and warnings.
async fn messages(env: &Env<'_>, sid: &str, after: i64) -> Result<(Vec<String>, Option<i64>, Vec<String>)> {
    let rows = env.sql.query(
        "SELECT seq, parent_id, created_at, content FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        &[sid.into(), Value::Int(after), Value::Int(PAGE)],
    )?;
    let Some(last) = rows.last().map(|r| r.int(0)).transpose()? else { return Ok((Vec::new(), None, Vec::new())) };
    let contents = rows.iter().map(|r| raw(r.text(3)?)).collect::<Result<Vec<_>>>()?;
    let Warned { value: whole, warnings } = spill::rehydrate(env.sql, env.blobs, sid, contents).await?;
    let mut out = Vec::with_capacity(rows.len());
    for (r, m) in rows.iter().zip(whole) {
        let parent = r.opt_text(1)?.map_or(Json::Null, Json::String);
        out.push(format!("{{\"parentId\":{parent},\"createdAt\":{},\"message\":{}}}", json!(r.text(2)?), m.get()));
    }
    Ok((out, Some(last), warnings))
}

/// A record of kind `kind` of session `sid` (a row's fields after `kind` and `sessionId`).
fn record(kind: &str, sid: Option<&str>, fields: Map<String, Json>) -> String {
    let mut obj = Map::with_capacity(fields.len() + 2);
    obj.insert("kind".into(), json!(kind));
    if let Some(s) = sid {
        obj.insert("sessionId".into(), json!(s));
    }
    obj.extend(fields);
    Json::Object(obj).to_string()
}

/// The paged kinds of row an object of `role` exports, in order.
pub(crate) fn rows_of(role: Role) -> &'static [&'static Table] {
    match role {
        Role::Agent => &AGENT_ROWS,
        Role::Space => &SPACE_ROWS,
    }
}

/// The kinds of which an object of `role` holds one row at most.
pub(crate) fn singles_of(role: Role) -> &'static [&'static Table] {
    match role {
        Role::Agent => &AGENT_SINGLES,
        Role::Space => &SPACE_SINGLES,
    }
}

/// Where the export stands.
enum Phase {
    Header,
    Session(usize),
    AgentBlocks,
    /// The kind of row of [`rows_of`] at this index, after this rowid.
    Rows(usize, i64),
    Singles,
    Skills,
    End,
    Done,
}

/// The agent's (or the space's: `Env::role`) NDJSON export, chunk by chunk
/// ([`AgentExport::next`]).
pub struct AgentExport {
    sessions: Vec<String>,
    phase: Phase,
    counts: Counts,
    /// Spilled fields whose objects were missing (their placeholders were exported).
    pub warnings: Vec<String>,
}

impl AgentExport {
    /// Starts an export of every session that exists now.
    pub fn new(sql: &dyn Sql) -> Result<AgentExport> {
        let sessions =
            sql.query("SELECT id FROM sessions ORDER BY seq", &[])?.iter().map(|r| r.text(0)).collect::<Result<_>>()?;
        Ok(AgentExport { sessions, phase: Phase::Header, counts: Counts::default(), warnings: Vec::new() })
    }

    /// The next chunk of lines (each ending in `\n`), or `None` once the `end` record is out.
    /// (A boxed future: its code is made once, here, whoever awaits it.)
    pub fn next<'a>(&'a mut self, env: &'a Env<'a>) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(self.chunk(env))
    }

    async fn chunk(&mut self, env: &Env<'_>) -> Result<Option<String>> {
        let mut out = String::new();
        match self.phase {
            Phase::Header => {
                out = format!("{}\n", json!({"format": FORMAT, "kind": kind_of(env.role)}));
                self.phase = match env.role {
                    Role::Agent => Phase::Session(0),
                    Role::Space => Phase::Rows(0, 0),
                };
            }
            Phase::Session(i) => {
                self.phase = if i + 1 < self.sessions.len() { Phase::Session(i + 1) } else { Phase::AgentBlocks };
                let Some(sid) = self.sessions.get(i).cloned() else { return Box::pin(self.chunk(env)).await };
                // Deleted since the export started: left out.
                let Some(info) = session_row(env.sql, &sid)? else { return Box::pin(self.chunk(env)).await };
                self.session(env, &sid, info, &mut out).await?;
            }
            Phase::AgentBlocks => {
                for row in BLOCKS.rows(env.sql, Some(""), "", &[])? {
                    out.push_str(&record(BLOCKS.kind, Some(""), row));
                    out.push('\n');
                }
                self.phase = Phase::Rows(0, 0);
            }
            Phase::Rows(i, after) => self.rows(env, i, after, &mut out)?,
            Phase::Singles => {
                for t in singles_of(env.role) {
                    for row in t.rows(env.sql, None, "", &[])? {
                        out.push_str(&record(t.kind, None, row));
                        out.push('\n');
                    }
                }
                self.phase = match env.role {
                    Role::Agent => Phase::Skills,
                    Role::Space => Phase::End,
                };
            }
            Phase::Skills => {
                self.skills(env, &mut out).await?;
                self.phase = Phase::End;
            }
            Phase::End => {
                out = format!("{}\n", json!({"kind": "end", "counts": self.counts.to_json(env.role)}));
                self.phase = Phase::Done;
            }
            Phase::Done => return Ok(None),
        }
        Ok(Some(out))
    }

    /// Session `sid` (its `info`) with its messages and rows, onto `out`.
    async fn session(&mut self, env: &Env<'_>, sid: &str, info: Map<String, Json>, out: &mut String) -> Result<()> {
        out.push_str(&format!("{}\n", json!({"kind": "session", "session": info})));
        self.counts.add("session", 1);
        let mut after = 0;
        loop {
            let (entries, last, w) = messages(env, sid, after).await?;
            self.warnings.extend(w);
            self.counts.add("message", entries.len());
            for e in entries {
                // `{"parentId"…}` → `{"kind":"message","sessionId":…,"parentId"…}`
                out.push_str(&format!("{{\"kind\":\"message\",\"sessionId\":{},{}\n", json!(sid), &e[1..]));
            }
            match last {
                Some(l) => after = l,
                None => break,
            }
        }
        for t in SESSION_TABLES {
            for row in t.rows(env.sql, Some(sid), "", &[])? {
                out.push_str(&record(t.kind, Some(sid), row));
                out.push('\n');
            }
        }
        Ok(())
    }

    /// Up to [`ROWS_PER_CHUNK`] rows of kind `i` of [`rows_of`] after rowid `after` onto `out`,
    /// then the next phase.
    fn rows(&mut self, env: &Env<'_>, i: usize, after: i64, out: &mut String) -> Result<()> {
        let kinds = rows_of(env.role);
        let Some(t) = kinds.get(i) else {
            self.phase = Phase::Singles;
            return Ok(());
        };
        let (page, last) = page(env.sql, t, after)?;
        let read = page.len();
        // Entries no search block reads (their runtime block was removed, or its session
        // deleted) are left out: no import could take them.
        let readable = match t.kind == ENTRIES.kind {
            true => Some(entry_labels(env.config, env.agent, stored_defs(env.sql)?.iter().map(String::as_str))),
            false => None,
        };
        let page: Vec<_> = page
            .into_iter()
            .filter(|row| {
                readable.as_ref().is_none_or(|labels| {
                    row.get("label").and_then(Json::as_str).is_some_and(|l| labels.iter().any(|x| x == l))
                })
            })
            .collect();
        let n = page.len();
        for row in page {
            out.push_str(&record(t.kind, None, row));
            out.push('\n');
        }
        self.counts.add(t.kind, n);
        self.phase = match (read as i64 == ROWS_PER_CHUNK, i + 1 < kinds.len()) {
            (true, _) => Phase::Rows(i, last),
            (false, true) => Phase::Rows(i + 1, 0),
            (false, false) => Phase::Singles,
        };
        Ok(())
    }

    /// The agent-scoped skills onto `out` (those waiting for the sweep left out).
    async fn skills(&mut self, env: &Env<'_>, out: &mut String) -> Result<()> {
        for prefix in skill_prefixes(env)? {
            let root = format!("{prefix}{}/", env.agent);
            for info in spill::live(env.sql, env.blobs.list(&root).await?)? {
                let Some(blob) = env.blobs.get(&info.key).await? else { continue };
                let key = info.key.strip_prefix(&root).unwrap_or(&info.key);
                let rec = json!({"kind": "skill", "prefix": prefix, "key": key,
                                 "description": blob.description, "content": blob.text});
                out.push_str(&format!("{rec}\n"));
                self.counts.add("skill", 1);
            }
        }
        Ok(())
    }
}

/// Up to [`ROWS_PER_CHUNK`] rows of `t` after rowid `after`, and the last rowid read.
fn page(sql: &dyn Sql, t: &Table, after: i64) -> Result<(Vec<Map<String, Json>>, i64)> {
    let q = format!("SELECT {}, rowid FROM {} WHERE rowid > ? ORDER BY rowid LIMIT ?", t.columns(), t.table);
    let rows = sql.query(&q, &[Value::Int(after), Value::Int(ROWS_PER_CHUNK)])?;
    let last = rows.last().map(|r| r.int(t.cols.len())).transpose()?.unwrap_or(after);
    Ok((rows.iter().map(|r| t.to_json(r)).collect::<Result<_>>()?, last))
}

/// The prefix of `b` when it is a skills block of scope `agent` (whose objects are the agent's).
pub(crate) fn agent_skills_prefix(b: &BlockConfig) -> Option<&str> {
    (b.kind == BlockKind::Skills && b.scope.unwrap_or_default() == BlockScope::Agent).then(|| b.skills_prefix())
}

/// The `prefix`es of the agent's skills blocks of scope `agent`: configured ones and those
/// sessions added at run time (their objects live under `<prefix><agent>/`).
pub(crate) fn skill_prefixes(env: &Env<'_>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |b: &BlockConfig| {
        if let Some(p) = agent_skills_prefix(b).filter(|p| !out.iter().any(|o| o == p)) {
            out.push(p.to_owned());
        }
    };
    env.config.context.iter().for_each(&mut add);
    for def in stored_defs(env.sql)? {
        // Runtime blocks count only where they are confined to this agent's space, as reads do.
        if let Ok(b) = serde_json::from_str::<BlockConfig>(&def) {
            if env.config.check_runtime(&b, env.agent).is_ok() {
                add(&b);
            }
        }
    }
    sort::ascending(&mut out);
    Ok(out)
}

/// The definitions of every block the agent's sessions added at run time (JSON), oldest first.
fn stored_defs(sql: &dyn Sql) -> Result<Vec<String>> {
    sql.query("SELECT def FROM context_defs WHERE def IS NOT NULL ORDER BY seq", &[])?
        .iter()
        .map(|r| r.text(0))
        .collect()
}
