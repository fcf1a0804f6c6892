//! One run of a schedule. Claimed first, in one transaction: the run recorded as started
//! (status `NULL`), and for a tick of the alarm the schedule's `nextRunAt` moved to its next
//! time after now (`null` for a one-shot). So an alarm delivered twice finds the tick taken and
//! runs nothing, and a run a crash cut short is found started when the object opens again and
//! marked failed ([`recover`]); no tick runs twice. Then the model, then the run's end recorded,
//! the oldest runs past `SESSION_CONFIG.schedules.maxRuns` dropped, and a `schedule` frame to
//! the agent's sockets.
//!
//! A run without `sessionId` is a turn on a **fresh, empty history** (`turn::run::fresh`): the
//! configured blocks with their configured content (the prompt is rendered for a session id no
//! session can have, `FRESH`, so no session's writable state, loaded skills or frozen prompt
//! is read), the `core` memories recalled for the prompt, and the tools that need no session
//! ([`FRESH_TOOLS`]); nothing is stored but the run, and nothing is extracted. With
//! `sessionId` it is that session's turn (`turn::run::turn`), history included, stored there.
//!
//! What a run reads across sessions (`session_search`, the history block, the memory tools and
//! the memories injected) is its schedule's [`reach`](super::store::RunReach), never the
//! alarm's or the caller's: a run in a session reaches that session only, as a token limited to
//! it would, unless the schedule says `"reach": "agent"`. A turn stored in a session is read by
//! that session's tokens, so a wider reach would let the run copy another session's words into
//! it (and let this session's messages, in the run's context, ask for them).

use serde_json::{json, Value as Json};

use super::store::{get, Schedule, DEFAULT_PAGE};
use crate::after::After;
use crate::blobs::BoxFuture;
use crate::directory::usage::{self as ledger, Measured};
use crate::env::Env;
use crate::error::{Error, ErrorKind, Result};
use crate::ids::new_id;
use crate::live::stop::Stop;
use crate::llm::{Provider, Usage};
use crate::parts::{parts, str_field};
use crate::session::Session;
use crate::sql::{atomically, Row, Sql, Value};
use crate::store::message::NewMessage;
use crate::store::tree::Parent;
use crate::time::iso_millis;
use crate::turn::run::{fresh, turn, Ask, CacheUse, MemoryUse, Record, TurnRequest};
use crate::wire::{Frame, ScheduleOp};

/// The session id a fresh run renders its prompt for: `#` is in no session id, so it has no
/// state of its own.
pub(crate) const FRESH: &str = "#schedule";

/// The tools a fresh run offers: those that read or write nothing of a session (searching the
/// search blocks and the sessions, recalling memories). `set_context`, the skills tools and
/// `expand_compaction` act on a session's state, which the run has none of; `memory_store` and
/// `memory_forget` would record or judge a session the run does not have.
pub const FRESH_TOOLS: [&str; 3] = ["search_context", "session_search", "memory_recall"];

pub(crate) const COLUMNS: &str = "seq, id, started_at, ended_at, status, reply, usage, error";

/// A stored run as the API shows it (`status` is `running` until it ends), with its `seq`.
pub(crate) fn from_row(r: &Row) -> Result<(i64, Json)> {
    let usage = r.opt_text(6)?.and_then(|u| serde_json::from_str::<Json>(&u).ok()).unwrap_or(Json::Null);
    Ok((
        r.int(0)?,
        json!({"id": r.text(1)?, "startedAt": r.text(2)?, "endedAt": r.opt_text(3)?,
               "status": r.opt_text(4)?.unwrap_or_else(|| "running".to_owned()), "reply": r.opt_text(5)?,
               "usage": usage, "error": r.opt_text(7)?}),
    ))
}

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// The alarm: the schedule was due; its `nextRunAt` moves on.
    Due,
    /// `POST /schedules/{id}/run`: its timing stays as it is.
    Manual,
}

/// Marks every run still recorded as started as failed: called when the object opens, when no
/// run can be going (they all belong to an instance that is gone). Returns how many.
pub fn recover(sql: &dyn Sql, now: &str) -> Result<usize> {
    let n = sql
        .query_row("SELECT count(*) FROM schedule_runs WHERE status IS NULL", &[])?
        .map(|r| r.int(0))
        .transpose()?
        .unwrap_or(0);
    if n > 0 {
        sql.execute(
            "UPDATE schedule_runs SET status = 'error', ended_at = ?,
             error = 'interrupted: the agent restarted during the run; it is not run again' WHERE status IS NULL",
            &[now.into()],
        )?;
    }
    Ok(n as usize)
}

/// Claims a run of schedule `id`: `None` when the alarm's tick is no longer due (taken by an
/// earlier delivery, paused, deleted). A manual run of a schedule with a run going is `conflict`.
fn claim(env: &Env<'_>, id: &str, tick: Tick) -> Result<Option<(Schedule, String)>> {
    let now = env.now.ms();
    let run_id = format!("run_{}", new_id()?);
    atomically(env.sql, || {
        let s = match (get(env.sql, id), tick) {
            (Ok(s), _) => s,
            (Err(e), Tick::Manual) => return Err(e),
            (Err(_), Tick::Due) => return Ok(None),
        };
        let next = match tick {
            Tick::Due => {
                let due = s.next_run_at.as_deref().and_then(crate::time::parse_iso);
                match due {
                    Some(at) if at <= now && !s.paused => s.timing.next(now, at).map(iso_millis),
                    _ => return Ok(None),
                }
            }
            Tick::Manual => {
                let going = env
                    .sql
                    .query_row("SELECT 1 FROM schedule_runs WHERE schedule_id = ? AND status IS NULL", &[id.into()])?;
                if going.is_some() {
                    return Err(Error::conflict(format!("a run of schedule {id} is going; try again when it ends")));
                }
                s.next_run_at.clone()
            }
        };
        env.sql.execute(
            "INSERT INTO schedule_runs (id, schedule_id, started_at) VALUES (?, ?, ?)",
            &[run_id.as_str().into(), id.into(), env.now.iso().into()],
        )?;
        env.sql.execute(
            "UPDATE schedules SET next_run_at = ?, last_run_at = ? WHERE id = ?",
            &[next.into(), env.now.iso().into(), id.into()],
        )?;
        Ok(Some((get(env.sql, id)?, run_id.clone())))
    })
}

/// The reply's text: its text parts, in order.
fn reply_text(message: &Json) -> String {
    let texts: Vec<&str> = parts(message)
        .iter()
        .filter(|p| str_field(p, "type") == Some("text"))
        .filter_map(|p| str_field(p, "text"))
        .collect();
    texts.join("\n\n")
}

/// What a run answered, and the work its turn left for after it (a session's compaction and
/// memory extraction), run as after any turn.
type Executed = (String, Usage, Vec<After>);

/// Runs the schedule's prompt: on a fresh history, or as a turn of its session; either reads
/// across sessions within the schedule's reach only, whoever started the run.
async fn execute(env: &Env<'_>, s: &Schedule) -> Result<Executed> {
    let env = &env.reaching(s.reaches());
    let user = json!({"id": new_id()?, "role": "user", "parts": [{"type": "text", "text": s.prompt}]});
    match &s.session_id {
        Some(sid) => {
            let session = Session::new(env, sid);
            let ask = Ask::Message { msg: NewMessage::from_json(&user)?, parent: Parent::Latest };
            let req = TurnRequest {
                ask,
                tools: Vec::new(),
                memory: MemoryUse::default(),
                stop: Stop::default(),
                cache: CacheUse::AsConfigured,
                instructions: None,
                record: Record::Store,
                model: None,
            };
            let done = turn(&session, req, &mut |_| Ok(())).await?;
            // Nothing stops a scheduled run: its reply is always there.
            let message = done.message.unwrap_or_default();
            let usage = message.get("metadata").and_then(|m| m.get("usage"));
            let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(Json::as_i64).unwrap_or(0);
            let usage = Usage {
                input_tokens: count("inputTokens"),
                output_tokens: count("outputTokens"),
                cached_input_tokens: count("cachedInputTokens"),
            };
            Ok((reply_text(&message), usage, done.after))
        }
        None => {
            let session = Session::new(env, FRESH);
            let tools = session.tools()?.into_iter().filter(|t| FRESH_TOOLS.contains(&t.name.as_str())).collect();
            let (message, usage) = fresh(&session, &user, tools).await?;
            Ok((reply_text(&message), usage, Vec::new()))
        }
    }
}

/// Records how run `run_id` ended, keeps the newest runs of its schedule, and tells the agent's
/// sockets. Returns the run as the API shows it.
fn finish(env: &Env<'_>, s: &Schedule, run_id: &str, outcome: Result<(String, Usage)>) -> Result<Json> {
    // A run on a fresh history stores no turn: its row of the usage ledger is written here (a
    // run in a session got its row with its turn).
    let fresh_tokens = match (&outcome, &s.session_id) {
        (Ok((_, u)), None) => Some((u.input_tokens, u.output_tokens, u.cached_input_tokens)),
        _ => None,
    };
    let (status, reply, usage, error) = match outcome {
        Ok((reply, u)) => {
            let usage = json!({"inputTokens": u.input_tokens, "outputTokens": u.output_tokens}).to_string();
            ("ok", Some(reply), Some(usage), None)
        }
        Err(e) => ("error", None, None, Some(e.message)),
    };
    let keep = env.config.schedules.max_runs;
    // The time it ended, not the moment it started (the request's).
    let ended = iso_millis((env.clock)().max(env.now.ms()));
    let run = atomically(env.sql, || {
        env.sql.execute(
            "UPDATE schedule_runs SET status = ?, ended_at = ?, reply = ?, usage = ?, error = ? WHERE id = ?",
            &[
                status.into(),
                ended.as_str().into(),
                reply.clone().into(),
                usage.clone().into(),
                error.clone().into(),
                run_id.into(),
            ],
        )?;
        if let Some(tokens) = fresh_tokens {
            ledger::record(env.sql, &ended, FRESH, &env.llm.model, tokens, Measured::Provider, None)?;
        }
        env.sql.execute(
            "DELETE FROM schedule_runs WHERE schedule_id = ? AND status IS NOT NULL AND seq <= (
               SELECT seq FROM schedule_runs WHERE schedule_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
            &[s.id.as_str().into(), s.id.as_str().into(), Value::Int(keep)],
        )?;
        env.sql
            .query_row(&format!("SELECT {COLUMNS} FROM schedule_runs WHERE id = ?"), &[run_id.into()])?
            .map(|r| from_row(&r).map(|(_, j)| j))
            .transpose()
    })?;
    // Deleted while it ran: its runs went with it, and nobody is told.
    let run = run.ok_or_else(|| Error::not_found(format!("schedule {} was deleted during its run", s.id)))?;
    env.events.publish_agent(&Frame::Schedule { op: ScheduleOp::Run, schedule_id: &s.id, run: &run }.to_json());
    Ok(run)
}

/// A run that ended: the run as the API shows it, and the work its turn left for after it.
pub struct Ran {
    pub run: Json,
    pub after: Vec<After>,
}

/// One run of schedule `id` as `tick` asks: `None` when the alarm's tick was no longer due.
/// A failure of the model or of the turn is the run's `error`, not this call's; this call fails
/// only when the run cannot be recorded (or, by hand, is refused: `not_found`, `conflict`,
/// `llm_unavailable` without a model).
///
/// Boxed here, as the other futures a crate above awaits: the run's code (a whole turn) is then
/// made once, in this crate, not again where it is awaited.
#[inline(never)]
pub fn tick<'a>(env: &'a Env<'a>, id: &'a str, tick: Tick) -> BoxFuture<'a, Result<Option<Ran>>> {
    Box::pin(async move {
        if tick == Tick::Manual && env.llm.provider == Provider::None {
            get(env.sql, id)?;
            return Err(Error::new(
                ErrorKind::LlmUnavailable,
                "no model is configured (LLM_PROVIDER): a schedule cannot run",
            ));
        }
        let Some((s, run_id)) = claim(env, id, tick)? else { return Ok(None) };
        let (outcome, after) = match execute(env, &s).await {
            Ok((reply, usage, after)) => (Ok((reply, usage)), after),
            Err(e) => (Err(e), Vec::new()),
        };
        Ok(Some(Ran { run: finish(env, &s, &run_id, outcome)?, after }))
    })
}

/// A page of a schedule's runs, newest first, and the cursor of the next page.
pub fn list(sql: &dyn Sql, id: &str, limit: Option<i64>, cursor: Option<&str>) -> Result<(Vec<Json>, Option<String>)> {
    get(sql, id)?;
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    let before = match cursor {
        None => i64::MAX,
        Some(c) => c.parse::<i64>().map_err(|_| Error::invalid("cursor is not one this list handed out"))?,
    };
    let rows = sql.query(
        &format!("SELECT {} FROM schedule_runs WHERE schedule_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?", COLUMNS),
        &[id.into(), before.into(), (limit + 1).into()],
    )?;
    let mut list = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    let next = if list.len() as i64 > limit {
        list.truncate(limit as usize);
        list.last().map(|(seq, _)| seq.to_string())
    } else {
        None
    };
    Ok((list.into_iter().map(|(_, j)| j).collect(), next))
}
