//! The usage ledger: one row per turn that called the model (`usage_ledger`), written in the
//! transaction that stores the turn (`record`), its sums over a time range ([`over`]), and how
//! our token estimates compare with what the provider counted for one model ([`calibration`]).

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

/// One turn of session `session` at `at` with `model`: `input`/`output` tokens (`cached` of the
/// input read from the provider's prompt cache), and our estimate of the input the provider
/// counted (`None` when it did not count).
pub(crate) fn record(
    sql: &dyn Sql,
    at: &str,
    session: &str,
    model: &str,
    (input, output, cached): (i64, i64, i64),
    measured: Measured,
    input_estimate: Option<i64>,
) -> Result<()> {
    sql.execute(
        "INSERT INTO usage_ledger (at, session_id, model, input_tokens, output_tokens, estimated, input_estimate,
           cached_input_tokens)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            at.into(),
            session.into(),
            model.into(),
            Value::Int(input),
            Value::Int(output),
            Value::Int(i64::from(measured == Measured::Estimated)),
            input_estimate.map_or(Value::Null, Value::Int),
            Value::Int(cached),
        ],
    )
}

/// Turns a [`calibration`] reads: the newest of the model that the provider counted.
pub const CALIBRATION_TURNS: i64 = 20;

/// How our token estimates (`crate::tokens`: characters and words, the reference's heuristic)
/// compare with what the provider counted, over the newest [`CALIBRATION_TURNS`] turns of one
/// model: what a budget of the provider's tokens is in our estimate, and back.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
    pub model: String,
    /// Turns read (0: none yet, the estimates are used as they are).
    pub turns: i64,
    /// Our estimate of their input tokens.
    pub estimated_input_tokens: i64,
    /// The provider's count of the same.
    pub input_tokens: i64,
}

impl Calibration {
    /// Tokens the provider counts per token we estimate: 1 until a turn was counted; within
    /// [1/4, 4] (a provider's count farther off is not a tokenizer's difference).
    pub fn ratio(&self) -> f64 {
        if self.turns == 0 || self.estimated_input_tokens <= 0 || self.input_tokens <= 0 {
            return 1.0;
        }
        (self.input_tokens as f64 / self.estimated_input_tokens as f64).clamp(0.25, 4.0)
    }

    /// Our `estimate`, as the provider would count it.
    pub fn billed(&self, estimate: i64) -> i64 {
        (estimate as f64 * self.ratio()).round() as i64
    }

    /// A count of the provider's tokens (a budget), in our estimate's tokens.
    pub fn estimated(&self, billed: i64) -> i64 {
        (billed as f64 / self.ratio()).round() as i64
    }
}

/// The [`Calibration`] of `model` now.
pub fn calibration(sql: &dyn Sql, model: &str) -> Result<Calibration> {
    let r = sql.query_row(
        "SELECT count(*), COALESCE(sum(input_estimate), 0), COALESCE(sum(input_tokens), 0) FROM (
           SELECT input_estimate, input_tokens FROM usage_ledger
            WHERE model = ? AND estimated = 0 AND input_estimate > 0 AND input_tokens > 0 ORDER BY seq DESC LIMIT ?)",
        &[model.into(), Value::Int(CALIBRATION_TURNS)],
    )?;
    let Some(r) = r else { return Ok(Calibration { model: model.to_owned(), ..Calibration::default() }) };
    Ok(Calibration {
        model: model.to_owned(),
        turns: r.int(0)?,
        estimated_input_tokens: r.int(1)?,
        input_tokens: r.int(2)?,
    })
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
    /// Of the input tokens, those the provider read from its prompt cache.
    pub cached_input_tokens: i64,
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
    let sums = "count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(estimated), 0),
                COALESCE(sum(cached_input_tokens), 0)";
    let totals = |r: &crate::sql::Row, at: usize| -> Result<Totals> {
        Ok(Totals {
            turns: r.int(at)?,
            input_tokens: r.int(at + 1)?,
            output_tokens: r.int(at + 2)?,
            estimated_turns: r.int(at + 3)?,
            cached_input_tokens: r.int(at + 4)?,
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
