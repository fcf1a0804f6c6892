//! The usage ledger: one row per turn that called the model (`usage_ledger`), written in the
//! transaction that stores the turn (`record`), and its sums over a time range ([`over`]).

use serde::Serialize;

use crate::error::Result;
use crate::sql::{Sql, Value};

/// Whether a turn's token counts are the provider's or estimated (a turn stopped before the
/// provider said).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measured {
    Provider,
    Estimated,
}

/// The sessions [`over`] lists at most (those with the most tokens first).
pub const MAX_SESSIONS: i64 = 100;

/// One turn of session `session` at `at` with `model`: `input`/`output` tokens.
pub(crate) fn record(
    sql: &dyn Sql,
    at: &str,
    session: &str,
    model: &str,
    (input, output): (i64, i64),
    measured: Measured,
) -> Result<()> {
    sql.execute(
        "INSERT INTO usage_ledger (at, session_id, model, input_tokens, output_tokens, estimated)
         VALUES (?, ?, ?, ?, ?, ?)",
        &[
            at.into(),
            session.into(),
            model.into(),
            Value::Int(input),
            Value::Int(output),
            Value::Int(i64::from(measured == Measured::Estimated)),
        ],
    )
}

/// Turns and tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub turns: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Turns whose counts were estimated.
    pub estimated_turns: i64,
}

/// One session's share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTotals {
    pub session_id: String,
    #[serde(flatten)]
    pub totals: Totals,
}

/// The ledger over `[from, to)` (ISO times): the totals and the [`MAX_SESSIONS`] sessions with
/// the most tokens.
pub fn over(sql: &dyn Sql, from: &str, to: &str) -> Result<(Totals, Vec<SessionTotals>)> {
    let sums = "count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(estimated), 0)";
    let totals = |r: &crate::sql::Row, at: usize| -> Result<Totals> {
        Ok(Totals {
            turns: r.int(at)?,
            input_tokens: r.int(at + 1)?,
            output_tokens: r.int(at + 2)?,
            estimated_turns: r.int(at + 3)?,
        })
    };
    let range = [Value::from(from), Value::from(to)];
    let all = sql
        .query_row(&format!("SELECT {sums} FROM usage_ledger WHERE at >= ? AND at < ?"), &range)?
        .map(|r| totals(&r, 0))
        .transpose()?
        .unwrap_or_default();
    let mut args = range.to_vec();
    args.push(Value::Int(MAX_SESSIONS));
    let by = sql
        .query(
            &format!(
                "SELECT session_id, {sums} FROM usage_ledger WHERE at >= ? AND at < ? GROUP BY session_id
                 ORDER BY sum(input_tokens) + sum(output_tokens) DESC, session_id LIMIT ?"
            ),
            &args,
        )?
        .iter()
        .map(|r| Ok(SessionTotals { session_id: r.text(0)?, totals: totals(r, 1)? }))
        .collect::<Result<_>>()?;
    Ok((all, by))
}
