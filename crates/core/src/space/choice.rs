//! Which space an agent uses: the one an admin chose for it (`PUT /agents/{agent}/space`, a row
//! of `space_choice`; `null` for none), else the one `memory.space`'s rule derives from its name
//! (the part before the first separator: `alice:planner` → `alice`), else none.

use serde::Serialize;

use crate::config::{SessionConfig, SpaceMode};
use crate::error::Result;
use crate::sql::Sql;

/// Where an agent's space comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `memory.space`'s rule, from the agent's name.
    Rule,
    /// An admin's choice.
    Chosen,
    /// Neither gives one.
    None,
}

/// The space an agent uses and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    pub space: Option<String>,
    pub source: Source,
    #[serde(serialize_with = "mode_name")]
    pub mode: SpaceMode,
}

fn mode_name<S: serde::Serializer>(m: &SpaceMode, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(match m {
        SpaceMode::Alongside => "alongside",
        SpaceMode::Instead => "instead",
    })
}

/// The space `memory.space`'s rule gives the agent named `agent`, if any.
pub fn by_rule(config: &SessionConfig, agent: &str) -> Option<String> {
    let sep = config.memory.as_ref()?.space.as_ref()?.separator.as_deref()?;
    let (space, _) = agent.split_once(sep)?;
    (!space.is_empty()).then(|| space.to_owned())
}

/// The space of the agent named `agent`.
pub fn of(sql: &dyn Sql, config: &SessionConfig, agent: &str) -> Result<Choice> {
    let mode = config.memory.as_ref().and_then(|m| m.space.as_ref()).map(|s| s.mode).unwrap_or_default();
    if let Some(row) = sql.query_row("SELECT space FROM space_choice WHERE id = 1", &[])? {
        let space = row.opt_text(0)?;
        let source = if space.is_some() { Source::Chosen } else { Source::None };
        return Ok(Choice { space, source, mode });
    }
    let space = by_rule(config, agent);
    let source = if space.is_some() { Source::Rule } else { Source::None };
    Ok(Choice { space, source, mode })
}

/// Records an admin's choice: `space`, or none (`None`) whatever the rule says.
pub fn choose(sql: &dyn Sql, space: Option<&str>, now: &str) -> Result<()> {
    sql.execute(
        "INSERT INTO space_choice (id, space, set_at) VALUES (1, ?, ?)
         ON CONFLICT (id) DO UPDATE SET space = excluded.space, set_at = excluded.set_at",
        &[space.into(), now.into()],
    )
}

/// Forgets an admin's choice: the rule decides again.
pub fn forget(sql: &dyn Sql) -> Result<()> {
    sql.execute("DELETE FROM space_choice", &[])
}
