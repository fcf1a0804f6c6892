//! Imports: a session document into a session that does not exist yet, an agent's (or a
//! space's) NDJSON into an agent (a space) that holds nothing. Everything is read and checked
//! first (a bad record is a `400` naming it, and nothing is written); then oversize message
//! fields and skills go to R2 under keys committed as pending (a crash before the commit leaves
//! them to the start-up recovery and the sweep); then every row is written in one transaction.
//! Its answer (a `2xx` write) arms the alarm for the schedules it brought, as any write does.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value as Json};

use super::tables::{
    text_of, Col, Table, BLOCKS, BLOCK_FLOOR, BLOCK_READS, COMPACTIONS, DEFS, ENTRIES, LOADED_SKILLS, MEMORIES,
    MEMORY_VERSIONS, PROMPTS, SCHEDULES, SCHEDULE_RUNS, SESSIONS, SESSION_TABLES, SHARED_BLOCKS, SPACE_CHOICE, USAGE,
};
use super::{check_format, kind_of, Counts, Transfer, TABLES};
use crate::blobs::Blob;
use crate::config::category::Category;
use crate::config::{check_label, BlockConfig};
use crate::context::entries;
use crate::context::{compose, entry_labels, Block, Origin};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::ids::check_name;
use crate::ids::Role;
use crate::memory::store::{self as memory_store, check_content, check_score, check_tags, normalize};
use crate::schedule::store::{check_prompt, check_schedule_name, RunReach, Timing};
use crate::sort;
use crate::space::blocks::{MAX_BLOCKS, MAX_BLOCK_BYTES, MAX_TOMBSTONES};
use crate::sql::{atomically, Sql, Value};
use crate::store::message::{check_id, NewMessage, MAX_INDEXED_BYTES};
use crate::store::sessions::{self, SessionInfo};
use crate::store::spill;
use crate::store::tree::Tree;

/// One imported message: where it hangs, when it was written, the message.
struct Message {
    parent: Option<String>,
    created_at: String,
    msg: NewMessage,
}

/// One session to write.
struct SessionPlan {
    id: String,
    values: Vec<Value>,
    messages: Vec<Message>,
    rows: Vec<(&'static Table, Vec<Value>)>,
}

/// An agent-scoped R2 skill.
struct Skill {
    prefix: String,
    key: String,
    description: Option<String>,
    content: String,
}

/// Everything an import writes, checked.
#[derive(Default)]
struct Plan {
    sessions: Vec<SessionPlan>,
    /// Agent-wide rows (agent-scoped block texts under session `""`, memories, their versions,
    /// entries), in order.
    rows: Vec<(&'static Table, Vec<Value>)>,
    skills: Vec<Skill>,
}

/// `POST /sessions/import`: session `doc` (a session export) as session `as_id` (default: its
/// own id). `conflict` when that session exists.
pub async fn session(env: &Env<'_>, doc: &Map<String, Json>, as_id: Option<&str>) -> Result<SessionInfo> {
    check_format(doc.get("format").and_then(Json::as_str))?;
    let known = ["format", "session", "messages"];
    if let Some(k) = doc
        .keys()
        .find(|k| !known.contains(&k.as_str()) && !SESSION_TABLES.iter().any(|t| **k == format!("{}s", t.kind)))
    {
        return Err(Error::invalid(format!("unknown field {k:?} in a session export")));
    }
    let info =
        doc.get("session").and_then(Json::as_object).ok_or_else(|| Error::invalid("session must be an object"))?;
    let mut plan = SessionPlan::read(info, as_id, "session")?;
    let list = |key: &str| -> Result<Vec<Json>> {
        match doc.get(key) {
            None | Some(Json::Null) => Ok(Vec::new()),
            Some(Json::Array(a)) => Ok(a.clone()),
            Some(_) => Err(Error::invalid(format!("{key} must be an array"))),
        }
    };
    for (i, m) in list("messages")?.iter().enumerate() {
        plan.message(
            m.as_object().ok_or_else(|| Error::invalid(format!("messages[{i}] must be an object")))?,
            &[],
            &format!("messages[{i}]"),
        )?;
    }
    for t in SESSION_TABLES {
        let key = format!("{}s", t.kind);
        for (i, r) in list(&key)?.iter().enumerate() {
            let obj = r.as_object().ok_or_else(|| Error::invalid(format!("{key}[{i}] must be an object")))?;
            plan.row(env, t, obj, &[], &format!("{key}[{i}]"))?;
        }
    }
    plan.check(env)?;
    if as_id.is_some() {
        // Overlay ids are the agent's, not the session's: a copy gets its own.
        for (t, values) in &mut plan.rows {
            if t.kind == COMPACTIONS.kind {
                values[0] = Value::Text(crate::ids::new_id()?);
            }
        }
    }
    let id = plan.id.clone();
    let plan = Plan { sessions: vec![plan], ..Plan::default() };
    write(env, plan, Target::Session).await?;
    sessions::require(env.sql, &id)
}

/// `POST /import`: an agent export (NDJSON) into this agent, which must hold nothing yet; in a
/// memory space (`Env::role`), a space's export into this space.
pub async fn agent(env: &Env<'_>, body: &[u8]) -> Result<Counts> {
    let text = std::str::from_utf8(body).map_err(|_| Error::invalid("an agent export is UTF-8 text (NDJSON)"))?;
    let mut plan = Plan::default();
    let mut lines = text.split('\n').enumerate().filter(|(_, l)| !l.trim().is_empty());
    let parse = |n: usize, l: &str| -> Result<Map<String, Json>> {
        match serde_json::from_str(l) {
            Ok(Json::Object(o)) => Ok(o),
            _ => Err(Error::invalid(format!("line {}: not a JSON object", n + 1))),
        }
    };
    let (n, first) = lines.next().ok_or_else(|| Error::invalid("an empty body is not an export"))?;
    let head = parse(n, first)?;
    check_format(head.get("format").and_then(Json::as_str))?;
    let kind = kind_of(env.role);
    if head.get("kind").and_then(Json::as_str) != Some(kind) {
        return Err(Error::invalid(match env.role {
            Role::Agent => "line 1: the first record of an agent export has kind \"agent\" (a session export goes to POST /sessions/import, a space's to POST /spaces/{space}/import)",
            Role::Space => "line 1: the first record of a space export has kind \"space\" (an agent's goes to POST /agents/{agent}/import)",
        }));
    }
    let mut end = None;
    for (n, line) in lines {
        let at = format!("line {}", n + 1);
        if end.is_some() {
            return Err(Error::invalid(format!("{at}: records after the end record")));
        }
        let mut rec = parse(n, line)?;
        let kind = rec.remove("kind").and_then(|k| k.as_str().map(str::to_owned)).unwrap_or_default();
        match kind.as_str() {
            "end" => end = Some(rec),
            "" => return Err(Error::invalid(format!("{at}: a record needs its kind"))),
            _ => plan.take(env, &kind, &rec, &at)?,
        }
    }
    if let Some(last) = plan.sessions.last() {
        last.check(env)?;
    }
    let end = end.ok_or_else(|| Error::invalid("the export ends without its end record: it was cut off"))?;
    plan.check(env)?;
    check_skill_prefixes(env, &plan)?;
    let counts = plan.counts();
    let cap = env.config.memory.as_ref().map_or(crate::config::DEFAULT_MAX_MEMORIES, |m| m.cap());
    let over = |what: String| Err(Error::new(crate::error::ErrorKind::OverBudget, what));
    if counts.memories > cap {
        return over(format!(
            "the export holds {} memories; this {kind} keeps at most {cap} (memory.maxMemories)",
            counts.memories
        ));
    }
    let max = env.config.schedules.max_schedules;
    if counts.schedules as i64 > max {
        let n = counts.schedules;
        return over(format!("the export holds {n} schedules; this agent has at most {max} (schedules.maxSchedules)"));
    }
    let keep = env.config.schedules.max_runs;
    if let Some(id) = plan.runs_over(keep) {
        return over(format!(
            "the export holds more than {keep} runs of schedule {id}; this agent keeps {keep} (schedules.maxRuns)"
        ));
    }
    // An export made before a kind existed (an earlier format) does not count it: none.
    let expected = counts.to_json(env.role);
    let declared = end.get("counts").and_then(Json::as_object);
    let matches = declared.is_some_and(|d| {
        let expected = expected.as_object().into_iter().flatten();
        d.keys().all(|k| expected.clone().any(|(e, _)| e == k))
            && expected.clone().all(|(k, v)| d.get(k).unwrap_or(&Json::from(0)) == v)
    });
    if !matches {
        let declared = end.get("counts").cloned().unwrap_or(Json::Null);
        return Err(Error::invalid(format!(
            "the end record counts {declared} but the export holds {expected}: it is incomplete"
        )));
    }
    write(env, plan, Target::Agent).await?;
    Ok(counts)
}

/// The kinds of record only a space's export holds, and those only an agent's holds.
const SPACE_ONLY: [&str; 2] = ["sharedBlock", "sharedBlockFloor"];
const AGENT_ONLY: [&str; 14] = [
    "session",
    "message",
    "compaction",
    "contextBlock",
    "contextDef",
    "loadedSkill",
    "prompt",
    "sharedBlockRead",
    "entry",
    "skill",
    "schedule",
    "scheduleRun",
    "usage",
    "spaceChoice",
];

impl Plan {
    /// Takes record `rec` of `kind` (at `at`, e.g. `line 7`) of an agent export into the plan,
    /// checked as its kind requires; a record of a session follows that session's record.
    fn take(&mut self, env: &Env<'_>, kind: &str, rec: &Map<String, Json>, at: &str) -> Result<()> {
        let elsewhere = match env.role {
            Role::Agent => SPACE_ONLY.contains(&kind),
            Role::Space => AGENT_ONLY.contains(&kind),
        };
        if elsewhere {
            let role = kind_of(env.role);
            return Err(Error::invalid(format!("{at}: a {kind} record has no place in the export of a {role}")));
        }
        let sid = rec.get("sessionId").and_then(Json::as_str).map(str::to_owned);
        let in_session = |plan: &Plan| -> Result<usize> {
            let last = plan.sessions.len().checked_sub(1);
            match (last, &sid) {
                (Some(i), Some(s)) if plan.sessions[i].id == *s => Ok(i),
                _ => Err(Error::invalid(format!(
                    "{at}: a {kind} record follows the session record it belongs to (sessionId)"
                ))),
            }
        };
        match kind {
            "session" => {
                let info = rec
                    .get("session")
                    .and_then(Json::as_object)
                    .ok_or_else(|| Error::invalid(format!("{at}: session must be an object")))?;
                let s = SessionPlan::read(info, None, at)?;
                if self.sessions.iter().any(|o| o.id == s.id) {
                    return Err(Error::invalid(format!("{at}: session {} appears twice", s.id)));
                }
                if let Some(prev) = self.sessions.last() {
                    prev.check(env)?;
                }
                self.sessions.push(s);
            }
            "message" => {
                let i = in_session(self)?;
                self.sessions[i].message(rec, &["sessionId"], at)?;
            }
            "contextBlock" if sid.as_deref() == Some("") => {
                let values = BLOCKS.values(rec, &["sessionId"], at)?;
                check_label(text_of(&BLOCKS, &values, "label").unwrap_or_default())?;
                self.rows.push((&BLOCKS, values));
            }
            "compaction" | "contextBlock" | "contextDef" | "loadedSkill" | "prompt" | "sharedBlockRead" => {
                let i = in_session(self)?;
                let t = SESSION_TABLES.into_iter().find(|t| t.kind == kind).unwrap_or(&COMPACTIONS);
                self.sessions[i].row(env, t, rec, &["sessionId"], at)?;
            }
            "memory" => self.rows.push((&MEMORIES, memory(rec, at)?)),
            "memoryVersion" => {
                let values = MEMORY_VERSIONS.values(rec, &[], at)?;
                Category::parse(text_of(&MEMORY_VERSIONS, &values, "category").unwrap_or_default())?;
                if !["api", "tool", "extract"].contains(&text_of(&MEMORY_VERSIONS, &values, "by").unwrap_or_default()) {
                    return Err(Error::invalid(format!("{at}: by must be api, tool or extract")));
                }
                self.rows.push((&MEMORY_VERSIONS, values));
            }
            "entry" => {
                let values = ENTRIES.values(rec, &[], at)?;
                check_label(text_of(&ENTRIES, &values, "label").unwrap_or_default())?;
                check_id("entry key", text_of(&ENTRIES, &values, "key").unwrap_or_default())?;
                if text_of(&ENTRIES, &values, "content").is_some_and(|c| c.len() > MAX_INDEXED_BYTES) {
                    return Err(Error::invalid(format!("{at}: an entry holds at most {MAX_INDEXED_BYTES} bytes")));
                }
                self.rows.push((&ENTRIES, values));
            }
            "skill" => self.skills.push(skill(rec, at)?),
            "schedule" => self.rows.push((&SCHEDULES, schedule(env, rec, at)?)),
            "scheduleRun" => self.rows.push((&SCHEDULE_RUNS, run(env, rec, at)?)),
            "usage" => {
                let values = USAGE.values(rec, &[], at)?;
                check_id("sessionId", text_of(&USAGE, &values, "sessionId").unwrap_or_default())?;
                check_id("model", text_of(&USAGE, &values, "model").unwrap_or_default())?;
                self.rows.push((&USAGE, values));
            }
            "spaceChoice" => {
                let values = SPACE_CHOICE.values(rec, &[], at)?;
                if let Some(space) = text_of(&SPACE_CHOICE, &values, "space") {
                    check_name("space", space)?;
                }
                self.rows.push((&SPACE_CHOICE, values));
            }
            "sharedBlock" => self.rows.push((&SHARED_BLOCKS, shared_block(rec, at)?)),
            "sharedBlockFloor" => self.rows.push((&BLOCK_FLOOR, BLOCK_FLOOR.values(rec, &[], at)?)),
            other => return Err(Error::invalid(format!("{at}: unknown record kind {other:?}"))),
        }
        Ok(())
    }

    /// The first schedule of which the plan holds more than `keep` runs.
    fn runs_over(&self, keep: i64) -> Option<String> {
        let mut per: HashMap<&str, i64> = HashMap::new();
        for v in self.of(&SCHEDULE_RUNS) {
            let id = text_of(&SCHEDULE_RUNS, v, "scheduleId").unwrap_or_default();
            let n = per.entry(id).or_default();
            *n += 1;
            if *n > keep {
                return Some(id.to_owned());
            }
        }
        None
    }

    /// What the plan holds, as an export's `end` record counts it.
    fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        counts.add("session", self.sessions.len());
        counts.add("message", self.sessions.iter().map(|s| s.messages.len()).sum());
        counts.add("skill", self.skills.len());
        for (t, _) in &self.rows {
            counts.add(t.kind, 1);
        }
        counts
    }
}

impl SessionPlan {
    fn read(info: &Map<String, Json>, as_id: Option<&str>, at: &str) -> Result<SessionPlan> {
        let mut values = SESSIONS.values(info, &["messageCount", "totalMessages"], at)?;
        let id = match as_id {
            Some(id) => {
                values[0] = Value::Text(id.to_owned());
                id.to_owned()
            }
            None => text_of(&SESSIONS, &values, "id").unwrap_or_default().to_owned(),
        };
        check_name("session id", &id)?;
        sessions::check_name(text_of(&SESSIONS, &values, "name").unwrap_or_default())?;
        for f in ["model", "source", "endReason"] {
            if text_of(&SESSIONS, &values, f).is_some_and(|v| v.chars().count() > sessions::MAX_NAME_CHARS) {
                return Err(Error::invalid(format!(
                    "{at}: {f} is longer than {} characters",
                    sessions::MAX_NAME_CHARS
                )));
            }
        }
        if let Some(p) = text_of(&SESSIONS, &values, "parentSessionId") {
            check_name("parentSessionId", p)?;
        }
        Ok(SessionPlan { id, values, messages: Vec::new(), rows: Vec::new() })
    }

    fn message(&mut self, rec: &Map<String, Json>, extra: &[&str], at: &str) -> Result<()> {
        if let Some(k) = rec
            .keys()
            .find(|k| !["parentId", "createdAt", "message"].contains(&k.as_str()) && !extra.contains(&k.as_str()))
        {
            return Err(Error::invalid(format!("{at}: unknown field {k:?} in a message record")));
        }
        let parent = match rec.get("parentId") {
            None | Some(Json::Null) => None,
            Some(Json::String(p)) => Some(p.clone()),
            Some(_) => return Err(Error::invalid(format!("{at}: parentId must be a string or null"))),
        };
        let created_at = rec
            .get("createdAt")
            .and_then(Json::as_str)
            .filter(|t| crate::time::parse_iso(t).is_some())
            .ok_or_else(|| Error::invalid(format!("{at}: createdAt must be an ISO-8601 timestamp")))?
            .to_owned();
        let msg = NewMessage::from_json(rec.get("message").unwrap_or(&Json::Null))
            .map_err(|e| Error::new(e.kind, format!("{at}: {}", e.message)))?;
        if crate::store::overlay::is_synthetic_id(&msg.id) {
            return Err(Error::invalid(format!("{at}: {} is the id of a summary, which is never stored", msg.id)));
        }
        self.messages.push(Message { parent, created_at, msg });
        Ok(())
    }

    fn row(
        &mut self,
        env: &Env<'_>,
        t: &'static Table,
        rec: &Map<String, Json>,
        extra: &[&str],
        at: &str,
    ) -> Result<()> {
        let values = t.values(rec, extra, at)?;
        if t.kind == COMPACTIONS.kind {
            for f in ["id", "summary", "fromMessageId", "toMessageId"] {
                if text_of(t, &values, f).is_none_or(|v| v.trim().is_empty()) {
                    return Err(Error::invalid(format!("{at}: {f} must not be empty")));
                }
            }
        }
        if let Some(label) = text_of(t, &values, "label") {
            check_label(label)?;
        }
        if t.kind == DEFS.kind {
            if let Some(def) = text_of(t, &values, "def") {
                let cfg: BlockConfig =
                    serde_json::from_str(def).map_err(|e| Error::invalid(format!("{at}: def: {e}")))?;
                cfg.validate()?;
                // As for a block added with POST …/context: nothing outside this agent's space.
                env.config
                    .check_runtime(&cfg, env.agent)
                    .map_err(|e| Error::invalid(format!("{at}: {}", e.message)))?;
            }
        }
        self.rows.push((t, values));
        Ok(())
    }

    /// Checks what only the whole session shows: message ids unique, each parent an earlier
    /// message of the session (a deleted parent leaves its children roots), each overlay's
    /// `from` an ancestor-or-self of its `to` and its id unique, one prompt, one row per block
    /// label and per loaded skill, and every block text and loaded skill of a block this session
    /// has (a text of a writable block of its own, a loaded skill of a skills block).
    fn check(&self, env: &Env<'_>) -> Result<()> {
        let sid = &self.id;
        let all: HashSet<&str> = self.messages.iter().map(|m| m.msg.id.as_str()).collect();
        if all.len() != self.messages.len() {
            return Err(Error::invalid(format!("session {sid}: a message id appears twice")));
        }
        let mut seen = HashSet::with_capacity(all.len());
        let mut parents = HashMap::with_capacity(all.len());
        for m in &self.messages {
            if let Some(p) = m.parent.as_deref().filter(|p| !seen.contains(p)) {
                return Err(Error::invalid(format!(
                    "session {sid}: message {} names parent {p}, which is not an earlier message of this session",
                    m.msg.id
                )));
            }
            seen.insert(m.msg.id.as_str());
            parents.insert(m.msg.id.as_str(), m.parent.as_deref());
        }
        for values in self.of(&COMPACTIONS) {
            let (from, to) = (
                text_of(&COMPACTIONS, values, "fromMessageId").unwrap_or_default(),
                text_of(&COMPACTIONS, values, "toMessageId").unwrap_or_default(),
            );
            let mut at = Some(to);
            while let Some(id) = at {
                if id == from {
                    break;
                }
                at = parents.get(id).copied().flatten();
            }
            if at.is_none() || !all.contains(to) {
                return Err(Error::invalid(format!(
                    "session {sid}: compaction from {from} to {to} is not on one path"
                )));
            }
        }
        if self.of(&PROMPTS).count() > 1 {
            return Err(Error::invalid(format!("session {sid}: more than one frozen prompt")));
        }
        for (t, fields) in [
            (&COMPACTIONS, &["id"][..]),
            (&BLOCKS, &["label"]),
            (&DEFS, &["label"]),
            (&LOADED_SKILLS, &["label", "key"]),
            (&BLOCK_READS, &["label"]),
        ] {
            let twice = format!("session {sid}: two {} records with the same {}", t.kind, fields.join(" and "));
            unique(self.of(t).map(|v| key_of(t, v, fields)).collect(), &twice)?;
        }
        let blocks = compose(env.config, env.agent, &self.defs())?;
        let block = |label: &str| blocks.iter().find(|b| b.label() == label);
        for values in self.of(&BLOCKS) {
            let label = text_of(&BLOCKS, values, "label").unwrap_or_default();
            match block(label) {
                Some(b) if b.holds_text() && !b.agent_wide() => {}
                Some(b) => {
                    return Err(Error::invalid(format!(
                        "session {sid}: a text of block {label}, which is {} here: only a writable block of the session holds one",
                        if b.holds_text() { "shared by the agent's sessions" } else { b.kind().as_str() }
                    )))
                }
                None => return Err(Error::invalid(format!("session {sid}: a text of block {label}, which it does not have"))),
            }
        }
        for values in self.of(&BLOCK_READS) {
            let label = text_of(&BLOCK_READS, values, "label").unwrap_or_default();
            if !block(label).is_some_and(|b| b.in_space()) {
                return Err(Error::invalid(format!(
                    "session {sid}: a version read of block {label}, which is not a block kept in a memory space here"
                )));
            }
        }
        for values in self.of(&LOADED_SKILLS) {
            let label = text_of(&LOADED_SKILLS, values, "label").unwrap_or_default();
            if !block(label).is_some_and(|b| b.loadable()) {
                return Err(Error::invalid(format!(
                    "session {sid}: a skill loaded from {label}, which is not a skills block here"
                )));
            }
        }
        Ok(())
    }

    /// The values of this session's rows of kind `t`.
    fn of<'p>(&'p self, t: &'static Table) -> impl Iterator<Item = &'p Vec<Value>> {
        self.rows.iter().filter(move |(k, _)| k.kind == t.kind).map(|(_, v)| v)
    }

    /// Its block definitions as `context_defs` holds them: label, removed, the added block.
    fn defs(&self) -> Vec<(String, bool, Option<String>)> {
        self.of(&DEFS)
            .map(|v| {
                let removed = matches!(v.get(1), Some(Value::Int(1)));
                (
                    text_of(&DEFS, v, "label").unwrap_or_default().to_owned(),
                    removed,
                    text_of(&DEFS, v, "def").map(str::to_owned),
                )
            })
            .collect()
    }
}

/// The fields `fields` of a row of `t` as one key: their texts (a number by its digits, a score
/// by its bits), joined by a character no text of an export holds.
fn key_of(t: &Table, values: &[Value], fields: &[&str]) -> String {
    let mut key = String::new();
    for (i, Col(field, _, _)) in t.cols.iter().enumerate() {
        if fields.is_empty() || fields.contains(field) {
            match &values[i] {
                Value::Text(s) => key.push_str(s),
                Value::Real(r) => key.push_str(&r.to_bits().to_string()),
                Value::Int(n) => key.push_str(&n.to_string()),
                Value::Null | Value::Blob(_) => {}
            }
            key.push('\u{0}');
        }
    }
    key
}

/// A chain of replacements (`supersededBy`, `id → by`) ends: one that comes back to a memory it
/// passed (A → B → A) would retire every memory on it, and none would ever be found again.
fn no_circle(next: &[(&str, &str)]) -> Result<()> {
    let by: HashMap<&str, &str> = next.iter().copied().collect();
    let mut ends: HashSet<&str> = HashSet::new();
    for &(start, _) in next {
        // The memories of this walk, each with its place on it.
        let mut walk: HashMap<&str, usize> = HashMap::new();
        let mut at = start;
        while !ends.contains(at) {
            if let Some(from) = walk.get(at) {
                return Err(Error::invalid(format!(
                    "memory {at}: its supersededBy chain comes back to it ({} memories in a circle), so none of them \
                     would hold: a chain of replacements ends at a memory that names no supersededBy",
                    walk.len() - from
                )));
            }
            walk.insert(at, walk.len());
            match by.get(at) {
                Some(b) => at = b,
                None => break,
            }
        }
        ends.extend(walk.into_keys());
    }
    Ok(())
}

/// Refuses a second occurrence of any key in `keys`: `400` saying `twice`.
fn unique(mut keys: Vec<String>, twice: &str) -> Result<()> {
    sort::ascending(&mut keys);
    match keys.windows(2).any(|w| w[0] == w[1]) {
        true => Err(Error::invalid(twice)),
        false => Ok(()),
    }
}

impl Plan {
    /// The values of the agent-wide rows of kind `t`.
    fn of<'p>(&'p self, t: &'static Table) -> impl Iterator<Item = &'p Vec<Value>> {
        self.rows.iter().filter(move |(k, _)| k.kind == t.kind).map(|(_, v)| v)
    }

    /// Checks what only the whole agent shows, so that it holds what the API could have written:
    /// overlay ids unique across sessions; one agent-wide text per label, each of a writable
    /// block the agent's sessions share; memories with unique ids and texts (per category, and
    /// per session for `conversation` ones, which name a session of the export); versions of
    /// memories of the export, none repeated; entries of search blocks, one per label and key;
    /// one skill per prefix and key.
    fn check(&self, env: &Env<'_>) -> Result<()> {
        let compactions = self.sessions.iter().flat_map(|s| s.of(&COMPACTIONS));
        let twice = "two compaction records with the same id (overlay ids are the agent's)";
        unique(compactions.map(|v| key_of(&COMPACTIONS, v, &["id"])).collect(), twice)?;
        // Agent-wide texts: of a writable block shared by the sessions (configured, or added at
        // run time by a session of the export).
        let mut shared: Vec<Block> =
            env.config.context.iter().map(|c| Block { cfg: c.clone(), origin: Origin::Config }).collect();
        for s in &self.sessions {
            shared.extend(compose(env.config, env.agent, &s.defs())?);
        }
        shared.retain(|b| b.holds_text() && b.agent_wide());
        unique(
            self.of(&BLOCKS).map(|v| key_of(&BLOCKS, v, &["label"])).collect(),
            "two agent-wide contextBlock records with the same label",
        )?;
        for v in self.of(&BLOCKS) {
            let label = text_of(&BLOCKS, v, "label").unwrap_or_default();
            if !shared.iter().any(|b| b.label() == label) {
                return Err(Error::invalid(format!(
                    "an agent-wide text of block {label}, which is not a writable block shared by the agent's sessions"
                )));
            }
        }
        // Memories: ids and texts unique; a conversation memory of a session of the export;
        // supersededBy names another memory of it, and a chain of them ends.
        let text = |v: &'_ Vec<Value>, f: &str| text_of(&MEMORIES, v, f).unwrap_or_default().to_owned();
        unique(self.of(&MEMORIES).map(|v| text(v, "id")).collect(), "two memory records with the same id")?;
        let mut said = Vec::new();
        for v in self.of(&MEMORIES) {
            let (id, session) = (text(v, "id"), text_of(&MEMORIES, v, "sessionId"));
            if text_of(&MEMORIES, v, "messageId").is_some() && session.is_none() {
                return Err(Error::invalid(format!("memory {id}: messageId needs a sessionId")));
            }
            let conversation = text(v, "category") == Category::Conversation.as_str();
            if conversation && !session.is_some_and(|s| self.sessions.iter().any(|p| p.id == s)) {
                return Err(Error::invalid(format!(
                    "memory {id}: a conversation memory belongs to a session of the export (sessionId)"
                )));
            }
            // Only the memories that hold now are one per text: a superseded one may say it again.
            if text_of(&MEMORIES, v, "invalidAt").is_none() {
                let owner = if conversation { session.unwrap_or_default() } else { "" };
                said.push(format!("{}\u{0}{}\u{0}{owner}", text(v, "category"), normalize(&text(v, "content"))));
            }
        }
        let twice =
            "two memory records say the same (same category and text, and for conversation memories the same session)";
        unique(said, twice)?;
        let mut memories: Vec<String> = self.of(&MEMORIES).map(|v| text(v, "id")).collect();
        sort::ascending(&mut memories);
        let mut next: Vec<(&str, &str)> = Vec::new();
        for v in self.of(&MEMORIES) {
            let Some(by) = text_of(&MEMORIES, v, "supersededBy") else { continue };
            let id = text_of(&MEMORIES, v, "id").unwrap_or_default();
            if by == id || memories.binary_search_by(|m| m.as_str().cmp(by)).is_err() {
                return Err(Error::invalid(format!(
                    "memory {id}: supersededBy names {by}, which is not another memory of the export"
                )));
            }
            next.push((id, by));
        }
        no_circle(&next)?;
        for v in self.of(&MEMORY_VERSIONS) {
            let of = text_of(&MEMORY_VERSIONS, v, "memoryId").unwrap_or_default();
            if memories.binary_search_by(|m| m.as_str().cmp(of)).is_err() {
                return Err(Error::invalid(format!(
                    "a memoryVersion record of memory {of}, which the export does not hold"
                )));
            }
        }
        unique(
            self.of(&MEMORY_VERSIONS).map(|v| key_of(&MEMORY_VERSIONS, v, &[])).collect(),
            "a memoryVersion record appears twice",
        )?;
        // Entries: of a search block (configured, or added at run time by a session of the export).
        let defs: Vec<String> = self.sessions.iter().flat_map(|s| s.defs()).filter_map(|d| d.2).collect();
        let labels = entry_labels(env.config, env.agent, defs.iter().map(String::as_str));
        for v in self.of(&ENTRIES) {
            let label = text_of(&ENTRIES, v, "label").unwrap_or_default();
            if !labels.iter().any(|l| l == label) {
                return Err(Error::invalid(format!(
                    "an entry of block {label}, which is not a search block of this agent"
                )));
            }
        }
        unique(
            self.of(&ENTRIES).map(|v| key_of(&ENTRIES, v, &["label", "key"])).collect(),
            "two entry records with the same label and key",
        )?;
        self.check_schedules()?;
        self.check_shared_blocks()?;
        for t in [&SPACE_CHOICE, &BLOCK_FLOOR] {
            if self.of(t).count() > 1 {
                return Err(Error::invalid(format!("more than one {} record", t.kind)));
            }
        }
        unique(
            self.skills.iter().map(|s| format!("{}\u{0}{}", s.prefix, s.key)).collect(),
            "two skill records with the same prefix and key",
        )
    }

    /// Schedules with unique ids; runs with unique ids, each of a schedule of the export.
    fn check_schedules(&self) -> Result<()> {
        let id = |t: &Table, v: &Vec<Value>| text_of(t, v, "id").unwrap_or_default().to_owned();
        unique(self.of(&SCHEDULES).map(|v| id(&SCHEDULES, v)).collect(), "two schedule records with the same id")?;
        unique(
            self.of(&SCHEDULE_RUNS).map(|v| id(&SCHEDULE_RUNS, v)).collect(),
            "two scheduleRun records with the same id",
        )?;
        let schedules: HashSet<String> = self.of(&SCHEDULES).map(|v| id(&SCHEDULES, v)).collect();
        for v in self.of(&SCHEDULE_RUNS) {
            let of = text_of(&SCHEDULE_RUNS, v, "scheduleId").unwrap_or_default();
            if !schedules.contains(of) {
                return Err(Error::invalid(format!(
                    "a scheduleRun record of schedule {of}, which the export does not hold"
                )));
            }
        }
        Ok(())
    }

    /// Shared blocks: one row per label, within the bounds a space keeps (blocks with text,
    /// tombstones).
    fn check_shared_blocks(&self) -> Result<()> {
        let t = &SHARED_BLOCKS;
        unique(self.of(t).map(|v| key_of(t, v, &["label"])).collect(), "two sharedBlock records with the same label")?;
        let tombstones = self.of(t).filter(|v| text_of(t, v, "deletedAt").is_some()).count() as i64;
        let blocks = self.of(t).count() as i64 - tombstones;
        if blocks > MAX_BLOCKS || tombstones > MAX_TOMBSTONES {
            return Err(Error::invalid(format!(
                "the export holds {blocks} shared blocks and {tombstones} deleted ones; a space keeps at most \
                 {MAX_BLOCKS} and {MAX_TOMBSTONES}"
            )));
        }
        Ok(())
    }
}

/// A `schedule` record, checked as `POST /schedules` checks one (its timing as the store writes
/// it, its prompt within `schedules.maxPromptChars`).
fn schedule(env: &Env<'_>, rec: &Map<String, Json>, at: &str) -> Result<Vec<Value>> {
    let values = SCHEDULES.values(rec, &[], at)?;
    let t = |f: &str| text_of(&SCHEDULES, &values, f).unwrap_or_default();
    check_id("schedule id", t("id"))?;
    if !t("id").starts_with("sch_") {
        return Err(Error::invalid(format!("{at}: a schedule id starts with sch_")));
    }
    check_schedule_name(t("name"))?;
    check_prompt(env, t("prompt"))?;
    Timing::imported(t("timing"), t("spec"), at)?;
    RunReach::parse(t("reach"))?;
    if let Some(s) = text_of(&SCHEDULES, &values, "sessionId") {
        check_name("sessionId", s)?;
    }
    Ok(values)
}

/// A `scheduleRun` record. One still running when it was exported (`status` null) is stored
/// as the start-up recovery leaves a run a restart cut short: failed, never run again.
fn run(env: &Env<'_>, rec: &Map<String, Json>, at: &str) -> Result<Vec<Value>> {
    let mut values = SCHEDULE_RUNS.values(rec, &[], at)?;
    let t = &SCHEDULE_RUNS;
    check_id("run id", text_of(t, &values, "id").unwrap_or_default())?;
    match text_of(t, &values, "status") {
        None => {
            let field = |f: &str| t.cols.iter().position(|c| c.0 == f).unwrap_or(usize::MAX);
            values[field("status")] = Value::Text("error".into());
            values[field("endedAt")] = Value::Text(env.now.iso().to_owned());
            values[field("error")] =
                Value::Text("interrupted: the agent was exported during the run; it is not run again".into());
        }
        Some("ok" | "error") => {}
        Some(other) => return Err(Error::invalid(format!("{at}: status must be ok, error or null (got {other:?})"))),
    }
    Ok(values)
}

/// A `sharedBlock` record: a label, its text within [`MAX_BLOCK_BYTES`] (none for a deleted
/// one), a version from 1.
fn shared_block(rec: &Map<String, Json>, at: &str) -> Result<Vec<Value>> {
    let values = SHARED_BLOCKS.values(rec, &[], at)?;
    let t = &SHARED_BLOCKS;
    check_label(text_of(t, &values, "label").unwrap_or_default())?;
    let content = text_of(t, &values, "content").unwrap_or_default();
    if content.len() > MAX_BLOCK_BYTES {
        return Err(Error::invalid(format!("{at}: a shared block holds at most {MAX_BLOCK_BYTES} bytes")));
    }
    if matches!(values.get(2), Some(Value::Int(0))) {
        return Err(Error::invalid(format!("{at}: version counts from 1")));
    }
    let deleted = text_of(t, &values, "deletedAt").is_some();
    if deleted && (!content.is_empty() || text_of(t, &values, "updatedBy").is_some()) {
        return Err(Error::invalid(format!("{at}: a deleted block (deletedAt) holds no text and no updatedBy")));
    }
    if let Some(by) = text_of(t, &values, "updatedBy") {
        check_name("updatedBy", by)?;
    }
    Ok(values)
}

fn memory(rec: &Map<String, Json>, at: &str) -> Result<Vec<Value>> {
    let mut values = MEMORIES.values(rec, &[], at)?;
    // An export made before validity was recorded: the fact held from when it was stored.
    let field = |f: &str| MEMORIES.cols.iter().position(|c| c.0 == f).unwrap_or(usize::MAX);
    if let (Some(Value::Null), Some(created)) = (values.get(field("validFrom")), values.get(field("createdAt"))) {
        values[field("validFrom")] = created.clone();
    }
    let t = |f: &str| text_of(&MEMORIES, &values, f).unwrap_or_default();
    let (valid_from, invalid_at) = (t("validFrom"), text_of(&MEMORIES, &values, "invalidAt"));
    if invalid_at.is_some_and(|i| i < valid_from) {
        return Err(Error::invalid(format!("{at}: invalidAt is before validFrom")));
    }
    if text_of(&MEMORIES, &values, "supersededBy").is_some() && invalid_at.is_none() {
        return Err(Error::invalid(format!("{at}: a memory with supersededBy no longer holds (invalidAt)")));
    }
    check_id("memory id", t("id"))?;
    if !t("id").starts_with("mem_") {
        return Err(Error::invalid(format!("{at}: a memory id starts with mem_")));
    }
    check_content(t("content"))?;
    Category::parse(t("category"))?;
    let tags: Vec<String> = serde_json::from_str(t("tags"))
        .map_err(|_| Error::invalid(format!("{at}: tags must be an array of strings")))?;
    if check_tags(&tags)? != tags {
        return Err(Error::invalid(format!("{at}: tags must be trimmed, distinct and not empty")));
    }
    check_score(rec.get("score").and_then(Json::as_f64))?;
    Ok(values)
}

fn skill(rec: &Map<String, Json>, at: &str) -> Result<Skill> {
    let s = |k: &str| rec.get(k).and_then(Json::as_str).map(str::to_owned);
    if let Some(k) = rec.keys().find(|k| !["prefix", "key", "description", "content"].contains(&k.as_str())) {
        return Err(Error::invalid(format!("{at}: unknown field {k:?} in a skill record")));
    }
    let (Some(prefix), Some(key), Some(content)) = (s("prefix"), s("key"), s("content")) else {
        return Err(Error::invalid(format!("{at}: a skill has a prefix, a key and content (strings)")));
    };
    if key.is_empty() || key.contains("..") || key.chars().any(char::is_control) {
        return Err(Error::invalid(format!("{at}: skill key {key:?} is not a valid key")));
    }
    let description = match rec.get("description") {
        None | Some(Json::Null) => None,
        Some(Json::String(d)) => Some(d.clone()),
        Some(_) => return Err(Error::invalid(format!("{at}: description must be a string or null"))),
    };
    Ok(Skill { prefix, key, description, content })
}

/// Refuses skills under a prefix that is not one of this agent's skills blocks of scope `agent`
/// (configured, or added at run time by the imported sessions): they would land where no block
/// reads them and no erase finds them.
fn check_skill_prefixes(env: &Env<'_>, plan: &Plan) -> Result<()> {
    let mut allowed = super::export::skill_prefixes(env)?;
    for s in &plan.sessions {
        for (t, values) in &s.rows {
            let def = if t.kind == DEFS.kind { text_of(t, values, "def") } else { None };
            if let Some(cfg) = def.and_then(|d| serde_json::from_str::<BlockConfig>(d).ok()) {
                allowed.extend(super::export::agent_skills_prefix(&cfg).map(str::to_owned));
            }
        }
    }
    match plan.skills.iter().find(|s| !allowed.contains(&s.prefix)) {
        Some(s) => Err(Error::invalid(format!(
            "skill {:?} is under prefix {:?}, which is not a skills block of this agent (its prefixes: {allowed:?})",
            s.key, s.prefix
        ))),
        None => Ok(()),
    }
}

/// What the import goes into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A session that must not exist yet.
    Session,
    /// An agent that must hold nothing yet.
    Agent,
}

/// Whether the object holds anything an export would carry: a row of any table of kind
/// [`Transfer::Exported`] (the token revocation time does not count, nor a space's floor, which
/// an erase keeps).
fn holds_anything(sql: &dyn Sql) -> Result<bool> {
    let tables = TABLES.iter().filter(|(t, how)| *how == Transfer::Exported && *t != BLOCK_FLOOR.table);
    for (t, _) in tables {
        if sql.query_row(&format!("SELECT 1 FROM {t} LIMIT 1"), &[])?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Oversize fields and skills to R2 (pending), then every row in one transaction; the objects
/// of a failed write are handed to the sweep.
async fn write(env: &Env<'_>, mut plan: Plan, target: Target) -> Result<()> {
    if target == Target::Agent {
        for prefix in plan.skills.iter().map(|s| s.prefix.clone()).collect::<HashSet<_>>() {
            if !spill::live(env.sql, env.blobs.list(&format!("{prefix}{}/", env.agent)).await?)?.is_empty() {
                return Err(Error::conflict(
                    "this agent already holds skills in R2: an agent import goes into an empty agent",
                ));
            }
        }
    }
    let mut keys: Vec<String> = Vec::new();
    let staged = stage(env, &mut plan, &mut keys).await;
    let done = match staged {
        Ok(()) => atomically(env.sql, || rows(env, &plan, target)),
        Err(e) => Err(e),
    };
    if done.is_err() && !keys.is_empty() {
        // Nothing took them: the next sweep deletes them.
        spill::release_unused(env.sql, &keys)?;
    }
    done
}

async fn stage(env: &Env<'_>, plan: &mut Plan, keys: &mut Vec<String>) -> Result<()> {
    for s in &mut plan.sessions {
        for m in &mut s.messages {
            spill::prepare(env.sql, env.blobs, env.agent, &s.id, &mut m.msg).await?;
            keys.extend(m.msg.spills.iter().map(|r| r.key.clone()));
        }
    }
    for sk in &plan.skills {
        let key = format!("{}{}/{}", sk.prefix, env.agent, sk.key);
        spill::reclaim(env.sql, &key)?;
        env.sql.execute("INSERT OR IGNORE INTO spill_pending (key) VALUES (?)", &[key.as_str().into()])?;
        keys.push(key.clone());
        env.blobs.put(&key, Blob { text: sk.content.clone(), description: sk.description.clone() }).await?;
    }
    Ok(())
}

fn rows(env: &Env<'_>, plan: &Plan, target: Target) -> Result<()> {
    let sql = env.sql;
    match target {
        Target::Agent if holds_anything(sql)? => {
            let kind = kind_of(env.role);
            return Err(Error::conflict(format!(
                "this {kind} already holds data: an import goes into an empty {kind} (erase it first)"
            )));
        }
        Target::Session => {
            if let Some(s) = plan.sessions.first() {
                if sessions::get(sql, &s.id)?.is_some() {
                    return Err(Error::conflict(format!(
                        "session {} exists (import it under another id with ?as=)",
                        s.id
                    )));
                }
            }
        }
        Target::Agent => {}
    }
    for s in &plan.sessions {
        let touch = sessions::next_touch(sql)?;
        SESSIONS.insert(sql, None, s.values.clone(), &[("touch_seq", Value::Int(touch))])?;
        let tree = Tree::new(sql, &s.id);
        for m in &s.messages {
            tree.insert(&m.msg, m.parent.as_deref(), &m.created_at)?;
        }
        for (t, values) in &s.rows {
            t.insert(sql, Some(&s.id), values.clone(), &[])?;
        }
    }
    for (t, values) in &plan.rows {
        match t.kind {
            "memory" => {
                let content = text_of(t, values, "content").unwrap_or_default();
                let tags: Vec<String> =
                    serde_json::from_str(text_of(t, values, "tags").unwrap_or("[]")).unwrap_or_default();
                // Its vector is made after the answer (queued by a trigger of migration 0013).
                let extra = [("norm", Value::Text(normalize(content)))];
                let seq = t.insert(sql, None, values.clone(), &extra)?;
                memory_store::index(sql, seq, content, &tags)?;
            }
            "entry" => {
                let seq = t.insert(sql, None, values.clone(), &[])?;
                entries::index(sql, seq, text_of(t, values, "content").unwrap_or_default())?;
            }
            "contextBlock" => {
                t.insert(sql, Some(""), values.clone(), &[])?;
            }
            "spaceChoice" => {
                t.insert(sql, None, values.clone(), &[("id", Value::Int(1))])?;
            }
            // A floor an erase of this space left stays when it is higher.
            "sharedBlockFloor" => sql.execute(
                "INSERT INTO space_block_floor (id, version) VALUES (1, ?)
                 ON CONFLICT (id) DO UPDATE SET version = max(version, excluded.version)",
                values,
            )?,
            _ => {
                t.insert(sql, None, values.clone(), &[])?;
            }
        }
    }
    // The skills are committed with the rows: they are no longer pending.
    for sk in &plan.skills {
        let key = format!("{}{}/{}", sk.prefix, env.agent, sk.key);
        sql.execute("DELETE FROM spill_pending WHERE key = ?", &[key.as_str().into()])?;
    }
    Ok(())
}
