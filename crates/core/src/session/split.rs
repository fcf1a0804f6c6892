//! Ending a long session and going on in a new one from its summary (the reference's
//! `compactAndSplit`, docs/REFERENCE.md#split).

use serde_json::json;

use super::Session;
use crate::error::{Error, Result};
use crate::ids::new_id;
use crate::sql::atomically;
use crate::store::message::NewMessage;
use crate::store::overlay;
use crate::store::sessions::{self, NewSession, SessionInfo};
use crate::store::tree::{Parent, Tree};

/// The text the new session starts from, before the summary (the reference's words).
pub(crate) const CONTEXT_PREFIX: &str = "[Context from previous session]\n\n";

/// `endReason` of a session that was split.
pub(crate) const END_REASON: &str = "split";

impl Session<'_> {
    /// Splits the session: the summary is `summary` when given, else the one a compaction of the
    /// latest branch writes now (or, with nothing left to compact, the session's newest
    /// overlay). The session gets `endReason: "split"`; a new session (`parentSessionId` = this
    /// one, same model, source and metadata, named `name` or as this one) starts with one assistant
    /// message holding the summary. `conflict` when there is no summary to start from.
    pub async fn split(&self, name: Option<&str>, summary: Option<String>) -> Result<SessionInfo> {
        let e = self.env;
        let old = sessions::require(e.sql, self.id)?;
        if let Some(n) = name {
            sessions::check_name(n)?;
        }
        let summary = match summary {
            Some(s) if s.trim().is_empty() => return Err(Error::invalid("summary must not be blank")),
            Some(s) => s,
            None => match self.compact(None).await? {
                Some(c) => c.summary,
                None => overlay::list(e.sql, self.id)?.pop().map(|c| c.summary).ok_or_else(|| {
                    Error::conflict("nothing to summarize yet: the session is too short to compact (or pass a summary)")
                })?,
            },
        };
        let text = format!("{CONTEXT_PREFIX}{summary}");
        let msg = NewMessage::from_json(
            &json!({"id": new_id()?, "role": "assistant", "parts": [{"type": "text", "text": text}]}),
        )?;
        let info = atomically(e.sql, || {
            e.sql.execute("UPDATE sessions SET end_reason = ? WHERE id = ?", &[END_REASON.into(), self.id.into()])?;
            sessions::touch(e.sql, self.id, e.now.iso())?;
            let new = NewSession {
                name: name.map_or_else(|| old.name.clone(), str::to_owned),
                parent_session_id: Some(self.id.to_owned()),
                model: old.model.clone(),
                source: old.source.clone(),
                metadata: old.metadata.clone(),
            };
            let info = sessions::create(e.sql, &new, e.now.iso())?;
            Tree::new(e.sql, &info.id).append(&msg, &Parent::Root, e.now.iso())?;
            sessions::require(e.sql, &info.id)
        })?;
        self.publish_idle().await;
        Ok(info)
    }
}
