//! Schedule routes: `/schedules` (create, list), `/schedules/{schedule}` (get, change, delete),
//! `…/runs` (the recorded runs) and `…/run` (a run now, by hand). Agent-wide: a token limited to
//! some sessions may not use them (the route table says so).

use serde_json::{json, Map, Value as Json};

use super::call::{Call, Pending};
use super::http::{opt_str, req_str, Response};
use session_agent_core::error::{Error, Result};
use session_agent_core::schedule::run::{self, tick, Tick};
use session_agent_core::schedule::store::{self as schedule, Change, NewSchedule, RunReach, Timing, MAX_PAGE};

/// Refuses a body field this route does not take.
fn known(body: &Map<String, Json>, keys: &[&str]) -> Result<()> {
    match body.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(Error::invalid(format!("unknown field {k:?}: expected one of {}", keys.join(", ")))),
        None => Ok(()),
    }
}

/// The body's timing: exactly one of `at`, `every`, `cron` (`null` counts as absent); `None`
/// when none is given.
fn timing(body: &Map<String, Json>, now_ms: i64) -> Result<Option<Timing>> {
    let given: Vec<&str> =
        ["at", "every", "cron"].into_iter().filter(|k| body.get(*k).is_some_and(|v| !v.is_null())).collect();
    match given.as_slice() {
        [] => Ok(None),
        ["at"] => Timing::at(&req_str(body, "at")?, now_ms).map(Some),
        ["every"] => Timing::every(&body["every"]).map(Some),
        ["cron"] => Timing::cron(&req_str(body, "cron")?).map(Some),
        _ => Err(Error::invalid(format!("give one of at, every and cron (got {})", given.join(" and ")))),
    }
}

/// The body's `reach` (`null` counts as absent).
fn reach(body: &Map<String, Json>) -> Result<Option<RunReach>> {
    match body.get("reach") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => RunReach::parse(s).map(Some),
        Some(_) => Err(Error::invalid("reach must be \"session\" or \"agent\"")),
    }
}

/// `POST /schedules` `{prompt, name?, at? | every? | cron?, sessionId?, reach?}` → 201 Schedule.
pub(crate) fn create(c: &Call<'_>) -> Result<Response> {
    let body = c.req.json_object()?;
    known(&body, &["prompt", "name", "at", "every", "cron", "sessionId", "reach"])?;
    let new = NewSchedule {
        prompt: req_str(&body, "prompt")?,
        name: opt_str(&body, "name")?,
        timing: timing(&body, c.env.now.ms())?.ok_or_else(|| Error::invalid("give one of at, every and cron"))?,
        session_id: opt_str(&body, "sessionId")?,
        reach: reach(&body)?,
    };
    Ok(Response::json(201, &schedule::create(c.env, new)?.to_json()))
}

/// `GET /schedules?limit=&cursor=`: by `nextRunAt` ascending, finished one-shots last.
pub(crate) fn list(c: &Call<'_>) -> Result<Response> {
    let limit = c.query.int("limit", 1, MAX_PAGE)?;
    let (list, next) = schedule::list(c.env.sql, limit, c.query.get("cursor").filter(|c| !c.is_empty()))?;
    let schedules: Vec<Json> = list.iter().map(|s| s.to_json()).collect();
    Ok(Response::json(200, &json!({"schedules": schedules, "nextCursor": next})))
}

/// `GET /schedules/{schedule}`.
pub(crate) fn get(c: &Call<'_>) -> Result<Response> {
    Ok(Response::json(200, &schedule::get(c.env.sql, &c.params.schedule)?.to_json()))
}

/// `PATCH /schedules/{schedule}` `{paused?, prompt?, name?, at? | every? | cron?, reach?}`.
pub(crate) fn update(c: &Call<'_>) -> Result<Response> {
    let body = c.req.json_object()?;
    known(&body, &["paused", "prompt", "name", "at", "every", "cron", "reach"])?;
    let paused = match body.get("paused") {
        None | Some(Json::Null) => None,
        Some(Json::Bool(b)) => Some(*b),
        Some(_) => return Err(Error::invalid("paused must be a boolean")),
    };
    let change = Change {
        paused,
        prompt: opt_str(&body, "prompt")?,
        name: opt_str(&body, "name")?,
        timing: timing(&body, c.env.now.ms())?,
        reach: reach(&body)?,
    };
    Ok(Response::json(200, &schedule::update(c.env, &c.params.schedule, change)?.to_json()))
}

/// `DELETE /schedules/{schedule}` → 204, its runs with it.
pub(crate) fn delete(c: &Call<'_>) -> Result<Response> {
    schedule::delete(c.env.sql, &c.params.schedule)?;
    Ok(Response::no_content())
}

/// `GET /schedules/{schedule}/runs?limit=&cursor=`: newest first.
pub(crate) fn runs(c: &Call<'_>) -> Result<Response> {
    let limit = c.query.int("limit", 1, MAX_PAGE)?;
    let (runs, next) =
        run::list(c.env.sql, &c.params.schedule, limit, c.query.get("cursor").filter(|c| !c.is_empty()))?;
    Ok(Response::json(200, &json!({"runs": runs, "nextCursor": next})))
}

/// `POST /schedules/{schedule}/run`: a run now (its timing unchanged) → 200 the run.
pub(crate) fn run<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let ran = tick(c.env, &c.params.schedule, Tick::Manual).await?;
        let ran = ran.ok_or_else(|| Error::internal("a run by hand was not claimed"))?;
        let mut resp = Response::json(200, &ran.run);
        resp.after.extend(ran.after);
        Ok(resp)
    })
}
