//! What the blocks that read from outside the agent share (`http`: the operator's service,
//! `d1`: the operator's database): the `Caller` that reaches outside for a session, and the last
//! text each block was given there, kept per session in SQLite (`fetched_block_texts`) and shown
//! when the outside cannot answer now.

use crate::config::BlockConfig;
use crate::databases::Databases;
use crate::error::{Error, ErrorKind, Result};
use crate::events::Events;
use crate::llm::Transport;
use crate::secrets::Secrets;
use crate::sql::Sql;

/// What reaches outside for one session: the transport (and its clock), the secrets, the D1
/// databases, the log, and where the last texts are kept.
pub(crate) struct Caller<'a> {
    pub(crate) sql: &'a dyn Sql,
    pub(crate) transport: &'a dyn Transport,
    pub(crate) secrets: &'a dyn Secrets,
    pub(crate) databases: &'a dyn Databases,
    pub(crate) events: &'a dyn Events,
    pub(crate) agent: &'a str,
    pub(crate) session: &'a str,
}

impl Caller<'_> {
    /// Logs `e` as the warning of `op` on block `b` (`<kind> block "<label>" <op>: <message>
    /// (<detail>)<then>`).
    pub(crate) fn warn(&self, b: &BlockConfig, op: &str, e: &Error, then: &str) {
        let log = e.log.as_deref().unwrap_or_default();
        let kind = b.kind.as_str();
        self.events.warn(&format!("{kind} block \"{}\" {op}: {} ({log}){then}", b.label, e.message));
    }

    /// The block's text as `got` says, kept as its last text; when `got` failed, the last text
    /// kept (empty if there never was one), with a warning.
    pub(crate) fn text_or_last(&self, b: &BlockConfig, got: Result<String>) -> Result<String> {
        match got {
            Ok(text) => {
                remember(self.sql, self.session, &b.label, &text)?;
                Ok(text)
            }
            Err(e) => {
                let last = last_text(self.sql, self.session, &b.label)?;
                let then = if last.is_some() { "; the last text read is shown" } else { "; no text was read yet" };
                self.warn(b, "get", &e, then);
                Ok(last.unwrap_or_default())
            }
        }
    }
}

/// A call outside that gave nothing usable: `said` is what the model reads (never a URL, a
/// secret, a binding's name or what came back), `log` the operator's detail. (Its kind is never
/// an answer's status: a `get` falls back to the last text, a tool's failure is its output.)
pub(crate) fn failed(said: impl Into<String>, log: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, said).with_log(log)
}

/// Keeps `text` as the last text of block `label` in `session` (writing only when it changed).
pub(crate) fn remember(sql: &dyn Sql, session: &str, label: &str, text: &str) -> Result<()> {
    sql.execute(
        "INSERT INTO fetched_block_texts (session_id, label, content) VALUES (?, ?, ?)
         ON CONFLICT (session_id, label) DO UPDATE SET content = excluded.content
          WHERE fetched_block_texts.content IS NOT excluded.content",
        &[session.into(), label.into(), text.into()],
    )
}

/// The last text block `label` of `session` was given, if any.
fn last_text(sql: &dyn Sql, session: &str, label: &str) -> Result<Option<String>> {
    sql.query_row(
        "SELECT content FROM fetched_block_texts WHERE session_id = ? AND label = ?",
        &[session.into(), label.into()],
    )?
    .map(|r| r.text(0))
    .transpose()
}

/// Forgets the last text of block `label` in `session` (the block removed or replaced).
pub(crate) fn forget(sql: &dyn Sql, session: &str, label: &str) -> Result<()> {
    sql.execute("DELETE FROM fetched_block_texts WHERE session_id = ? AND label = ?", &[session.into(), label.into()])
}
