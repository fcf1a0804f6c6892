//! The directory of agents and spaces over HTTP: the shard objects' own API ([`shard()`]: reports
//! in, pages out), the agent's `GET /usage` (its usage ledger over a time range), and what the
//! front door needs to answer `GET /directory`, `GET /directory/usage` and
//! `GET /directory/export` (admin only) from the shards' pages and the agents' answers: the
//! parameters checked, the pages merged, the export's lines wrapped.

use serde_json::{json, Value as Json};

use super::call::Call;
use super::http::{parse_query, Method, Request, Response};
use session_agent_core::directory::shard::{self, MAX_REPORTS};
use session_agent_core::directory::usage;
use session_agent_core::directory::{entries_of, merge, After, Listing, Page, Report};
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::ids::Role;
use session_agent_core::sql::Sql;
use session_agent_core::time::{instant, parse_iso};

/// The earliest time a usage range starts at when `from` is not given.
const EPOCH: &str = "1970-01-01T00:00:00.000Z";

/// The value of query parameter `name` in `pairs` (the last one when repeated).
fn lookup(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// A directory shard's API (reached only through its binding): `POST /report`
/// `{reports: [Report, …]}` (at most 1,000) → 204; `GET /list?kind&prefix&activeAfter&
/// activeBefore&cursor&limit` → `{items}`, its first `limit` entries after `cursor`.
pub fn shard(sql: &dyn Sql, req: &Request, now: &str) -> Response {
    let answer = match (req.method, req.path.as_str()) {
        (Method::Post, "/report") => take(sql, req, now),
        (Method::Get, "/list") => list(sql, &req.query),
        _ => Err(Error::not_found(format!("no route for {} {} of a directory shard", req.method, req.path))),
    };
    answer.unwrap_or_else(|e| Response::error(&e))
}

fn take(sql: &dyn Sql, req: &Request, now: &str) -> Result<Response> {
    let body = req.json_object()?;
    let list = body.get("reports").and_then(Json::as_array).ok_or_else(|| Error::invalid("reports is required"))?;
    if list.len() > MAX_REPORTS {
        return Err(Error::invalid(format!("at most {MAX_REPORTS} reports at a time")));
    }
    let reports = list.iter().map(Report::from_json).collect::<Result<Vec<_>>>()?;
    shard::take(sql, &reports, now)?;
    Ok(Response::no_content())
}

fn list(sql: &dyn Sql, query: &str) -> Result<Response> {
    let pairs = parse_query(query)?;
    // A shard is asked for one row more than the page (`Listing::shard_query`).
    let mut listing = Listing::parse(&|k| if k == "limit" { None } else { lookup(&pairs, k) })?;
    listing.limit = match lookup(&pairs, "limit").map(|l| l.parse::<i64>()) {
        Some(Ok(n)) if n >= 1 => n,
        None => listing.limit,
        _ => return Err(Error::invalid("limit must be a positive integer")),
    };
    let items = shard::list(sql, &listing)?;
    Ok(Response::json(200, &json!({ "items": items })))
}

/// `GET /directory`'s parameters: `kind`, `prefix`, `activeAfter`, `activeBefore`, `limit`
/// (1–1,000, default 50), `cursor`; anything wrong is `400`.
pub fn listing(query: &str) -> Result<Listing> {
    let pairs = parse_query(query)?;
    Listing::parse(&|k| lookup(&pairs, k))
}

/// The page the shards' answers make (each `{items}`, or the error that kept it): `{items,
/// nextCursor}`. A shard that failed fails the listing (`500`): a page without its rows would
/// skip them for good once its cursor is taken.
pub fn page(listing: &Listing, shards: Vec<Result<Json>>) -> Result<Page> {
    let mut pages = Vec::with_capacity(shards.len());
    for s in shards {
        pages.push(entries_of(&s?)?);
    }
    Ok(merge(pages, listing.limit))
}

/// A shard's answer to a listing, read: its JSON when `status` is 200, else its error.
pub fn shard_answer(status: u16, body: &[u8]) -> Result<Json> {
    let json: Json = serde_json::from_slice(body).map_err(|_| Error::internal("a directory shard answered no JSON"))?;
    if status == 200 {
        return Ok(json);
    }
    let message = json["error"]["message"].as_str().unwrap_or("a directory shard failed").to_owned();
    Err(Error::new(if status == 400 { ErrorKind::InvalidRequest } else { ErrorKind::Internal }, message))
}

/// The checked usage range of `from`/`to` (ISO times; `from` defaults to the epoch, `to` to
/// `now`): `[from, to)`.
fn range(from: Option<String>, to: Option<String>, now: &str) -> Result<(String, String)> {
    let time = |k: &str, v: Option<String>, default: &str| -> Result<(String, i64)> {
        let t = instant(k, &v.unwrap_or_else(|| default.to_owned()))?;
        let ms = parse_iso(&t).ok_or_else(|| Error::invalid(format!("{k} must be an ISO-8601 time")))?;
        Ok((t, ms))
    };
    let (from, from_ms) = time("from", from, EPOCH)?;
    let (to, to_ms) = time("to", to, now)?;
    if from_ms > to_ms {
        return Err(Error::invalid("from must not be after to"));
    }
    Ok((from, to))
}

/// `GET /usage?from&to` → `{from, to, turns, inputTokens, outputTokens, estimatedTurns,
/// bySession, calibration}`: the agent's usage ledger over `[from, to)`, and how our token
/// estimates compare with the configured model's counts now.
pub(crate) fn usage(c: &Call<'_>) -> Result<Response> {
    let get = |k: &str| c.query.get(k).map(str::to_owned);
    let (from, to) = range(get("from"), get("to"), c.env.now.iso())?;
    let (totals, by) = usage::over(c.env.sql, &from, &to)?;
    let calibration = usage::calibration(c.env.sql, &c.env.llm.model)?;
    let mut out = json!({"from": from, "to": to});
    if let (Some(o), Json::Object(t)) = (out.as_object_mut(), serde_json::to_value(&totals).unwrap_or_default()) {
        o.extend(t);
        o.insert("bySession".into(), serde_json::to_value(&by).unwrap_or_default());
        let mut cal = serde_json::to_value(&calibration).unwrap_or_default();
        cal["ratio"] = json!(calibration.ratio());
        o.insert("calibration".into(), cal);
    }
    Ok(Response::json(200, &out))
}

/// `GET /directory/usage`'s parameters: the page of agents (`prefix`, `limit`, `cursor`) and
/// the query each agent's `GET /usage` is asked with (`from`, `to`, checked here so a bad one
/// is one `400`).
pub fn usage_listing(query: &str, now: &str) -> Result<(Listing, String)> {
    let pairs = parse_query(query)?;
    let mut listing = Listing::parse(&|k| match k {
        "prefix" | "limit" | "cursor" => lookup(&pairs, k),
        _ => None,
    })?;
    listing.kind = Some(Role::Agent);
    let (from, to) = range(lookup(&pairs, "from"), lookup(&pairs, "to"), now)?;
    let forwarded =
        form_urlencoded::Serializer::new(String::new()).append_pair("from", &from).append_pair("to", &to).finish();
    Ok((listing, forwarded))
}

/// `{items: [{name, turns, inputTokens, outputTokens, estimatedTurns}], nextCursor}`: the page's
/// agents with their `GET /usage` answers (in the page's order); an agent that failed fails the
/// page.
pub fn usage_page(page: &Page, answers: Vec<Result<Json>>) -> Result<Response> {
    let mut items = Vec::with_capacity(page.items.len());
    for (e, a) in page.items.iter().zip(answers) {
        let a = a?;
        let n = |k: &str| a[k].as_i64().unwrap_or(0);
        items.push(json!({"name": e.name, "turns": n("turns"), "inputTokens": n("inputTokens"),
            "outputTokens": n("outputTokens"), "estimatedTurns": n("estimatedTurns")}));
    }
    let next = page.next.as_ref().map(After::text);
    Ok(Response::json(200, &json!({"items": items, "nextCursor": next})))
}

/// The agents one round of the cross-agent export lists.
pub const EXPORT_BATCH: i64 = 20;

/// `GET /directory/export`'s parameters (`prefix`, `cursor`): the agents in name order.
pub fn export_listing(query: &str) -> Result<Listing> {
    let pairs = parse_query(query)?;
    let mut listing = Listing::parse(&|k| match k {
        "prefix" | "cursor" => lookup(&pairs, k),
        _ => None,
    })?;
    listing.kind = Some(Role::Agent);
    listing.limit = EXPORT_BATCH;
    Ok(listing)
}

/// One line of an agent's `GET /export` (without its newline), as a line of the cross-agent
/// export: `{"agent":"<name>","record":<line>}` and a newline.
pub fn export_record(agent: &str, line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() + agent.len() + 24);
    out.extend_from_slice(b"{\"agent\":");
    out.extend_from_slice(Json::String(agent.to_owned()).to_string().as_bytes());
    out.extend_from_slice(b",\"record\":");
    out.extend_from_slice(line);
    out.extend_from_slice(b"}\n");
    out
}

/// The line after an agent's last record: `{"cursor":"agent:<name>"}`, where a later export
/// resumes (with the next agent).
pub fn export_cursor(agent: &str) -> Vec<u8> {
    let after = After { name: agent.to_owned(), kind: Role::Agent };
    format!("{}\n", json!({ "cursor": after.text() })).into_bytes()
}
