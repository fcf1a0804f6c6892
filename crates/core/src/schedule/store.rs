//! The store of schedules: [`Timing`] (once `at` a time, `every` so many seconds, a cron
//! expression) and when it runs next, [`RunReach`] (what its runs read across sessions),
//! [`Schedule`] as stored and shown, and create, list, change, delete (a schedule's runs are
//! [`super::run`]'s).

use serde_json::{json, Value as Json};

use super::cron::Cron;
use crate::access::Reach;
use crate::env::Env;
use crate::error::{Error, ErrorKind, Result};
use crate::ids::{check_name, new_id};
use crate::sql::{atomically, Row, Sql, Value};
use crate::time::{iso_millis, parse_iso};

/// The shortest interval of `every`, in seconds.
pub const MIN_EVERY: i64 = 60;
/// The longest interval of `every`: a year.
pub const MAX_EVERY: i64 = 366 * 86_400;
/// Most characters of a schedule's name.
pub const MAX_NAME_CHARS: usize = 256;
/// Pages of `GET /schedules` and `GET /schedules/{id}/runs`: by default and at most.
pub const DEFAULT_PAGE: i64 = 50;
pub const MAX_PAGE: i64 = 100;

/// When a schedule runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Timing {
    /// Once, at this time (ms).
    At(i64),
    /// Every so many seconds, from its creation.
    Every(i64),
    /// At the minutes of a five-field expression (its text kept as given).
    Cron(String),
}

impl Timing {
    /// `at`: an ISO-8601 time in the future of `now_ms`.
    pub fn at(text: &str, now_ms: i64) -> Result<Timing> {
        let ms = parse_iso(text).ok_or_else(|| Error::invalid(format!("at {text:?} is not an ISO-8601 UTC time")))?;
        if ms <= now_ms {
            return Err(Error::invalid(format!("at {text:?} is not in the future (now is {})", iso_millis(now_ms))));
        }
        Ok(Timing::At(ms))
    }

    /// `every`: seconds, from 60 to a year.
    pub fn every(seconds: &Json) -> Result<Timing> {
        match seconds.as_i64() {
            Some(s) if (MIN_EVERY..=MAX_EVERY).contains(&s) => Ok(Timing::Every(s)),
            _ => {
                Err(Error::invalid(format!("every must be a whole number of seconds from {MIN_EVERY} to {MAX_EVERY}")))
            }
        }
    }

    /// `cron`: five fields in UTC ([`Cron::parse`]).
    pub fn cron(text: &str) -> Result<Timing> {
        Cron::parse(text)?;
        Ok(Timing::Cron(text.split_whitespace().collect::<Vec<_>>().join(" ")))
    }

    /// The first run after `now_ms`: `at` itself (while it is ahead), `every` one interval after
    /// `anchor` (the time it was due, or now) stepped past now, the expression's next minute.
    /// `None`: nothing more to run (a one-shot whose time passed).
    pub(crate) fn next(&self, now_ms: i64, anchor: i64) -> Option<i64> {
        match self {
            Timing::At(ms) => (*ms > now_ms).then_some(*ms),
            Timing::Every(s) => {
                let step = s * 1000;
                let behind = (now_ms - anchor).max(0);
                Some(anchor + (behind / step + 1) * step)
            }
            Timing::Cron(text) => Cron::parse(text).ok()?.next_after(now_ms),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Timing::At(_) => "at",
            Timing::Every(_) => "every",
            Timing::Cron(_) => "cron",
        }
    }

    fn spec(&self) -> String {
        match self {
            Timing::At(ms) => iso_millis(*ms),
            Timing::Every(s) => s.to_string(),
            Timing::Cron(text) => text.clone(),
        }
    }

    /// The timing of an imported schedule: `kind` and `spec` as this store writes them (`at`
    /// a time with milliseconds, `every` seconds in range, `cron` a valid expression as kept),
    /// else `400` naming `at` (the record).
    pub(crate) fn imported(kind: &str, spec: &str, at: &str) -> Result<Timing> {
        let timing = match kind {
            "at" => parse_iso(spec).filter(|ms| iso_millis(*ms) == spec).map(Timing::At),
            "every" => spec.parse().ok().filter(|s| (MIN_EVERY..=MAX_EVERY).contains(s)).map(Timing::Every),
            "cron" => Timing::cron(spec).ok().filter(|t| t.spec() == spec),
            _ => None,
        };
        timing.ok_or_else(|| {
            Error::invalid(format!(
                "{at}: timing {kind:?} with spec {spec:?} is not one this service writes (at: a time like \
                 2026-11-22T11:00:00.000Z, every: {MIN_EVERY}-{MAX_EVERY} seconds, cron: five fields)"
            ))
        })
    }

    fn read(kind: &str, spec: &str) -> Result<Timing> {
        let bad = || Error::internal(format!("a stored schedule has an unreadable timing ({kind})"));
        match kind {
            "at" => parse_iso(spec).map(Timing::At).ok_or_else(bad),
            "every" => spec.parse().map(Timing::Every).map_err(|_| bad()),
            "cron" => Ok(Timing::Cron(spec.to_owned())),
            _ => Err(bad()),
        }
    }
}

/// What a run reads across sessions: its schedule's sessions only, or every session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunReach {
    /// The schedule's session only (none for a run without one), as a token limited to it: a
    /// run in a session stores its turn there, for that session's tokens to read.
    Session,
    /// Every session of the agent, as the schedule says explicitly.
    Agent,
}

impl RunReach {
    /// `"session"` or `"agent"`.
    pub fn parse(text: &str) -> Result<RunReach> {
        match text {
            "session" => Ok(RunReach::Session),
            "agent" => Ok(RunReach::Agent),
            _ => Err(Error::invalid(format!("reach must be \"session\" or \"agent\" (got {text:?})"))),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            RunReach::Session => "session",
            RunReach::Agent => "agent",
        }
    }

    /// What a schedule of `session_id` reaches when it does not say: its session, if it has
    /// one; every session for a run without one (it stores nothing in a session, and its reply
    /// is read by agent-wide tokens only).
    fn default_for(session_id: Option<&str>) -> RunReach {
        match session_id {
            Some(_) => RunReach::Session,
            None => RunReach::Agent,
        }
    }
}

/// A stored schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub id: String,
    pub name: String,
    pub prompt: String,
    pub timing: Timing,
    pub session_id: Option<String>,
    pub reach: RunReach,
    pub paused: bool,
    pub next_run_at: Option<String>,
    pub last_run_at: Option<String>,
    pub created_at: String,
    seq: i64,
}

const COLUMNS: &str =
    "seq, id, name, prompt, kind, spec, session_id, paused, next_run_at, last_run_at, created_at, reach";

impl Schedule {
    fn from_row(r: &Row) -> Result<Schedule> {
        Ok(Schedule {
            seq: r.int(0)?,
            id: r.text(1)?,
            name: r.text(2)?,
            prompt: r.text(3)?,
            timing: Timing::read(&r.text(4)?, &r.text(5)?)?,
            session_id: r.opt_text(6)?,
            paused: r.int(7)? != 0,
            next_run_at: r.opt_text(8)?,
            last_run_at: r.opt_text(9)?,
            created_at: r.text(10)?,
            reach: RunReach::parse(&r.text(11)?)?,
        })
    }

    /// The sessions its runs read across sessions (`session_search`, the history block, the
    /// memory tools and the memories injected).
    pub(crate) fn reaches(&self) -> Reach {
        match self.reach {
            RunReach::Agent => Reach::All,
            RunReach::Session => Reach::Sessions(self.session_id.iter().cloned().collect()),
        }
    }

    /// The schedule as the API shows it: `at`, `every` and `cron` all present, the two that do
    /// not apply `null`.
    pub fn to_json(&self) -> Json {
        let (at, every, cron) = match &self.timing {
            Timing::At(ms) => (json!(iso_millis(*ms)), Json::Null, Json::Null),
            Timing::Every(s) => (Json::Null, json!(s), Json::Null),
            Timing::Cron(c) => (Json::Null, Json::Null, json!(c)),
        };
        json!({"id": self.id, "name": self.name, "prompt": self.prompt, "at": at, "every": every, "cron": cron,
               "sessionId": self.session_id, "reach": self.reach.as_str(), "paused": self.paused, "nextRunAt": self.next_run_at,
               "lastRunAt": self.last_run_at, "createdAt": self.created_at})
    }
}

/// A new schedule as asked (`POST /schedules`).
#[derive(Clone, Debug)]
pub struct NewSchedule {
    pub prompt: String,
    pub name: Option<String>,
    pub timing: Timing,
    pub session_id: Option<String>,
    /// `None`: `session` with a session, `agent` without.
    pub reach: Option<RunReach>,
}

/// A change (`PATCH /schedules/{id}`): each field set replaces the stored one.
#[derive(Clone, Debug, Default)]
pub struct Change {
    pub paused: Option<bool>,
    pub prompt: Option<String>,
    pub name: Option<String>,
    pub timing: Option<Timing>,
    pub reach: Option<RunReach>,
}

pub(crate) fn check_prompt(env: &Env<'_>, prompt: &str) -> Result<()> {
    let max = env.config.schedules.max_prompt_chars;
    if prompt.trim().is_empty() {
        return Err(Error::invalid("prompt must not be empty"));
    }
    let n = prompt.chars().count();
    if n > max {
        return Err(Error::invalid(format!("prompt must be at most {max} characters (got {n})")));
    }
    Ok(())
}

pub(crate) fn check_schedule_name(name: &str) -> Result<()> {
    let n = name.chars().count();
    if n == 0 || n > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(Error::invalid(format!("name must be 1-{MAX_NAME_CHARS} characters without control characters")));
    }
    Ok(())
}

/// The name a schedule gets when none is given: its prompt's first line, shortened.
fn default_name(prompt: &str) -> String {
    let line = prompt.trim().lines().next().unwrap_or_default();
    let mut name: String = line.chars().filter(|c| !c.is_control()).take(80).collect();
    if line.chars().count() > 80 {
        name.push('…');
    }
    if name.trim().is_empty() {
        name = "schedule".to_owned();
    }
    name
}

/// The schedule `id`, or `not_found`.
pub fn get(sql: &dyn Sql, id: &str) -> Result<Schedule> {
    sql.query_row(&format!("SELECT {COLUMNS} FROM schedules WHERE id = ?"), &[id.into()])?
        .map(|r| Schedule::from_row(&r))
        .transpose()?
        .ok_or_else(|| Error::not_found(format!("schedule {id} not found")))
}

/// Stores a new schedule (`over_budget` past `SESSION_CONFIG.schedules.maxSchedules`).
pub fn create(env: &Env<'_>, new: NewSchedule) -> Result<Schedule> {
    let now = env.now.ms();
    check_prompt(env, &new.prompt)?;
    let name = match new.name {
        Some(n) => {
            check_schedule_name(&n)?;
            n
        }
        None => default_name(&new.prompt),
    };
    if let Some(s) = &new.session_id {
        check_name("sessionId", s)?;
    }
    let next = new.timing.next(now, now).map(iso_millis);
    let id = format!("sch_{}", new_id()?);
    let max = env.config.schedules.max_schedules;
    atomically(env.sql, || {
        let n = env.sql.query_row("SELECT count(*) FROM schedules", &[])?.map(|r| r.int(0)).transpose()?.unwrap_or(0);
        if n >= max {
            return Err(Error::new(
                ErrorKind::OverBudget,
                format!("this agent has {n} schedules, the most it may have (SESSION_CONFIG.schedules.maxSchedules)"),
            ));
        }
        let reach = new.reach.unwrap_or(RunReach::default_for(new.session_id.as_deref()));
        env.sql.execute(
            "INSERT INTO schedules (id, name, prompt, kind, spec, session_id, reach, next_run_at, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                id.as_str().into(),
                name.into(),
                new.prompt.into(),
                new.timing.kind().into(),
                new.timing.spec().into(),
                new.session_id.into(),
                reach.as_str().into(),
                next.into(),
                env.now.iso().into(),
            ],
        )
    })?;
    get(env.sql, &id)
}

/// Changes a schedule. A new timing starts from now (its next run computed afresh); pausing
/// keeps `nextRunAt` (a tick missed while paused runs once when it resumes).
pub fn update(env: &Env<'_>, id: &str, change: Change) -> Result<Schedule> {
    let now = env.now.ms();
    if let Some(p) = &change.prompt {
        check_prompt(env, p)?;
    }
    if let Some(n) = &change.name {
        check_schedule_name(n)?;
    }
    atomically(env.sql, || {
        let s = get(env.sql, id)?;
        let timing = change.timing.clone().unwrap_or(s.timing.clone());
        let next = match &change.timing {
            Some(t) => t.next(now, now).map(iso_millis),
            None => s.next_run_at.clone(),
        };
        env.sql.execute(
            "UPDATE schedules SET name = ?, prompt = ?, kind = ?, spec = ?, paused = ?, next_run_at = ?, reach = ?
             WHERE id = ?",
            &[
                change.name.clone().unwrap_or(s.name).into(),
                change.prompt.clone().unwrap_or(s.prompt).into(),
                timing.kind().into(),
                timing.spec().into(),
                Value::Int(change.paused.unwrap_or(s.paused).into()),
                next.into(),
                change.reach.unwrap_or(s.reach).as_str().into(),
                id.into(),
            ],
        )
    })?;
    get(env.sql, id)
}

/// Deletes a schedule and its runs (`not_found` if there is none).
pub fn delete(sql: &dyn Sql, id: &str) -> Result<()> {
    atomically(sql, || {
        get(sql, id)?;
        sql.execute("DELETE FROM schedule_runs WHERE schedule_id = ?", &[id.into()])?;
        sql.execute("DELETE FROM schedules WHERE id = ?", &[id.into()])
    })
}

/// Where a page of schedules ends: after the one whose order key this is.
fn list_cursor(s: &Schedule) -> String {
    format!("{}~{}", s.next_run_at.as_deref().unwrap_or("-"), s.seq)
}

/// A page of schedules by `nextRunAt` ascending (ties by creation), those with none (finished
/// one-shots) last; the cursor of the next page, if any.
pub fn list(sql: &dyn Sql, limit: Option<i64>, cursor: Option<&str>) -> Result<(Vec<Schedule>, Option<String>)> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    let bad = || Error::invalid("cursor is not one this list handed out");
    let (cond, params): (&str, Vec<Value>) = match cursor {
        None => ("1", vec![]),
        Some(c) => {
            let (at, seq) = c.rsplit_once('~').ok_or_else(bad)?;
            let seq: i64 = seq.parse().map_err(|_| bad())?;
            if at == "-" {
                ("next_run_at IS NULL AND seq > ?", vec![seq.into()])
            } else {
                parse_iso(at).ok_or_else(bad)?;
                (
                    "next_run_at IS NULL OR next_run_at > ? OR (next_run_at = ? AND seq > ?)",
                    vec![at.into(), at.into(), seq.into()],
                )
            }
        }
    };
    let mut params = params;
    params.push(Value::Int(limit + 1));
    let rows = sql.query(
        &format!("SELECT {COLUMNS} FROM schedules WHERE {cond} ORDER BY next_run_at IS NULL, next_run_at, seq LIMIT ?"),
        &params,
    )?;
    let mut list = rows.iter().map(Schedule::from_row).collect::<Result<Vec<_>>>()?;
    let next = if list.len() as i64 > limit {
        list.truncate(limit as usize);
        list.last().map(list_cursor)
    } else {
        None
    };
    Ok((list, next))
}

#[cfg(test)]
mod tests {
    use super::Timing;
    use crate::time::parse_iso;

    fn ms(t: &str) -> i64 {
        parse_iso(t).expect("a time")
    }

    #[test]
    fn at_runs_once_in_the_future() {
        let now = ms("2026-11-22T11:00:00Z");
        assert!(Timing::at("2026-11-22T10:59:59Z", now).is_err(), "past");
        assert!(Timing::at("2026-11-22T11:00:00Z", now).is_err(), "now is not the future");
        assert!(Timing::at("tomorrow", now).is_err());
        let t = Timing::at("2026-11-22T11:00:02Z", now).expect("ahead");
        assert_eq!(t.next(now, now), Some(ms("2026-11-22T11:00:02Z")));
        assert_eq!(t.next(ms("2026-11-22T11:00:02Z"), now), None, "after its run, nothing more");
    }

    #[test]
    fn every_steps_past_now_once_however_long_it_was_away() {
        for bad in [serde_json::json!(59), serde_json::json!(60.5), serde_json::json!("60"), serde_json::json!(-60)] {
            assert!(Timing::every(&bad).is_err(), "{bad}");
        }
        let t = Timing::every(&serde_json::json!(60)).expect("a minute");
        let created = ms("2026-11-22T11:00:00Z");
        assert_eq!(t.next(created, created), Some(ms("2026-11-22T11:01:00Z")));
        // Due at 11:01, woken at 11:07:30 (six ticks missed): the next one is 11:08, once.
        assert_eq!(t.next(ms("2026-11-22T11:07:30Z"), ms("2026-11-22T11:01:00Z")), Some(ms("2026-11-22T11:08:00Z")));
        assert_eq!(t.next(ms("2026-11-22T11:01:00Z"), ms("2026-11-22T11:01:00Z")), Some(ms("2026-11-22T11:02:00Z")));
    }
}
