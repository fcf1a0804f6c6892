//! Sleep-time consolidation (`SESSION_CONFIG.memory.maintenance`, off by default), run by the
//! alarm: every `everyHours` a pass begins, and it checks the `core` and `daily` memories that
//! hold now and changed since the last pass, oldest change first, `batch` of them per wake-up.
//! Each is shown to the model beside its most similar memories with extraction's consolidation
//! request (`extract::consolidation_request`); a memory the model marks as saying the same
//! (update) or as outdated (delete) stops holding, superseded by the memory checked: its
//! versions stay, as for any correction. A pass that has memories left goes on at the next
//! wake-up, at once. Two rows of the `maintenance` table keep where it is: when the current pass
//! began (`consolidate`), and how far it has checked (`consolidate:upto`, an `updatedAt`).

use super::extract::{consolidation_request, model, parse_decisions, Decision, Fact, SIMILAR};
use super::memories::Memories;
use super::recall::Query;
use super::store::{self, Filter};
use crate::access::Reach;
use crate::config::MaintenanceConfig;
use crate::env::Env;
use crate::error::Result;
use crate::llm::{complete, Provider};
use crate::sql::{atomically, Sql, Value};
use crate::time::{iso_millis, parse_iso};

const BEGAN: &str = "consolidate";
const UPTO: &str = "consolidate:upto";

/// What one wake-up's consolidation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consolidated {
    /// Memories shown to the model (one call each).
    pub checked: usize,
    /// Memories that stopped holding, superseded by the one checked.
    pub retired: usize,
}

fn config<'e>(env: &'e Env<'_>) -> Option<&'e MaintenanceConfig> {
    env.config.memory.as_ref()?.maintenance.as_ref().filter(|_| env.llm.provider != Provider::None)
}

fn read(sql: &dyn Sql, kind: &str) -> Result<Option<String>> {
    sql.query_row("SELECT last_at FROM maintenance WHERE kind = ?", &[kind.into()])?.map(|r| r.text(0)).transpose()
}

fn write(sql: &dyn Sql, kind: &str, at: &str) -> Result<()> {
    sql.execute(
        "INSERT INTO maintenance (kind, last_at) VALUES (?, ?) ON CONFLICT (kind) DO UPDATE SET last_at = excluded.last_at",
        &[kind.into(), at.into()],
    )
}

/// When the next consolidation is due (ms), if it is configured (and a model is): at once for
/// a first pass or one with memories left, else `everyHours` after the last pass began.
pub fn due(env: &Env<'_>) -> Result<Option<i64>> {
    let Some(cfg) = config(env) else { return Ok(None) };
    let now = env.now.ms();
    let (Some(began), upto) = (read(env.sql, BEGAN)?, read(env.sql, UPTO)?) else { return Ok(Some(now)) };
    if upto.as_deref() < Some(began.as_str()) {
        return Ok(Some(now));
    }
    Ok(Some(parse_iso(&began).unwrap_or(0) + cfg.every_hours * 3_600_000))
}

/// One wake-up's share of the consolidation, when it is due; a failed model call leaves the
/// memory for the next wake-up.
pub async fn run(env: &Env<'_>) -> Result<Consolidated> {
    let mut done = Consolidated::default();
    let Some(cfg) = config(env) else { return Ok(done) };
    let now = env.now.ms();
    if due(env)?.is_none_or(|t| t > now) {
        return Ok(done);
    }
    let sql = env.sql;
    let began = atomically(sql, || {
        let (began, upto) = (read(sql, BEGAN)?, read(sql, UPTO)?);
        match began {
            Some(b) if upto.as_deref() < Some(b.as_str()) => Ok(b),
            _ => {
                write(sql, BEGAN, env.now.iso())?;
                Ok(env.now.iso().to_owned())
            }
        }
    })?;
    let upto = read(sql, UPTO)?.unwrap_or_else(|| iso_millis(0));
    let rows = sql.query(
        &format!(
            "SELECT {} FROM memories m WHERE m.category IN ('core', 'daily') AND m.invalid_at IS NULL AND {}
             AND m.updated_at > ? AND m.updated_at <= ? ORDER BY m.updated_at, m.seq LIMIT ?",
            store::columns("m"),
            store::LIVE
        ),
        &[env.now.iso().into(), upto.into(), began.as_str().into(), Value::Int(cfg.batch)],
    )?;
    let candidates = rows.iter().map(|r| store::from_row(r, 0)).collect::<Result<Vec<_>>>()?;
    let memories = Memories::new(env);
    let llm = model(env.llm, &memories.config().extract.unwrap_or_default());
    for m in &candidates {
        // Retired by an earlier one of this batch: nothing to check.
        if store::get(sql, &m.id, env.now.iso())?.is_none_or(|now| now.invalid_at.is_some()) {
            write(sql, UPTO, &m.updated_at)?;
            continue;
        }
        let query = Query {
            text: format!("{} {}", m.content, m.tags.join(" ")),
            limit: SIMILAR + 1,
            filter: Filter { reach: Reach::Sessions(Vec::new()), ..Filter::default() },
        };
        let similar: Vec<_> = memories.similar(&query).await?.into_iter().filter(|s| s.id != m.id).collect();
        if !similar.is_empty() {
            let fact = Fact { fact: m.content.clone(), score: m.score.unwrap_or(1.0), tags: m.tags.clone() };
            let reply = complete(env.transport, &llm, &consolidation_request(&fact, &similar)).await?;
            done.checked += 1;
            let known: Vec<String> = similar.iter().map(|s| s.id.clone()).collect();
            for d in parse_decisions(&reply.text, &known, &fact.fact)? {
                if let Decision::Update { id, .. } | Decision::Delete { id } = d {
                    if memories.invalidate(&id, Some(&m.id)).is_ok() {
                        done.retired += 1;
                    }
                }
            }
        }
        write(sql, UPTO, &m.updated_at)?;
    }
    if (candidates.len() as i64) < cfg.batch {
        write(sql, UPTO, &began)?;
    }
    Ok(done)
}
