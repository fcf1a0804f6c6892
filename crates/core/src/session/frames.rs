//! What a session's sockets hear about its changes, whatever the entry point (HTTP, a stub, a
//! WebSocket, a turn): `message` for every stored message, `deleted` / `cleared`, `context` for
//! block changes, and `status` frames (docs/REFERENCE.md#status-frames) with the branch's token estimate.
//! The frames are [`Frame`]s, serialized only when someone listens.

use serde_json::Value as Json;

use super::Session;
use crate::context::tools::Ran;
use crate::wire::{CompactionOutcome, Frame, Phase, Whole};

impl Session<'_> {
    fn listening(&self) -> bool {
        self.env.events.has_listeners(self.id)
    }

    /// Sends `frame` to the session's sockets, if any listen (the one place frames of a session
    /// are serialized).
    pub(crate) fn publish(&self, frame: &Frame<'_>) {
        if self.listening() {
            self.env.events.publish(self.id, &frame.to_json());
        }
    }

    /// `{type:"message", sessionId, message}` for a stored message (its JSON as the client sent it).
    pub(crate) fn publish_message(&self, json: &str) {
        if !self.listening() {
            return;
        }
        if let Ok(message) = serde_json::from_str::<Json>(json) {
            self.publish(&Frame::Message { session_id: self.id, whole: Whole { message: &message }, pending: None });
        }
    }

    /// A stored message as it reads now (whole), e.g. after a tool rewrote it; nothing when it
    /// cannot be read.
    pub(crate) async fn publish_stored(&self, id: &str) {
        if !self.listening() {
            return;
        }
        if let Ok(m) = self.message(id).await {
            self.publish_message(m.get());
        }
    }

    /// `{type:"deleted", sessionId, ids}` after messages were deleted.
    pub(crate) fn publish_deleted(&self, ids: &[&str]) {
        self.publish(&Frame::Deleted { session_id: self.id, ids });
    }

    /// `{type:"cleared", sessionId}` after the session's messages were cleared (or it was deleted).
    pub(crate) fn publish_cleared(&self) {
        self.publish(&Frame::Cleared { session_id: self.id });
    }

    /// `{type:"context", sessionId, label}` after a block changed.
    pub(crate) fn publish_context(&self, label: &str) {
        self.publish(&Frame::Context { session_id: self.id, label });
    }

    /// What a tool run changed: a `context` frame when it stored something for its block, and
    /// the rewritten message (then an `idle` status) when it rewrote one.
    pub(crate) async fn publish_tool_effects(&self, input: &Json, ran: &Ran) {
        if let Some(label) = input.get("label").and_then(Json::as_str).filter(|_| ran.wrote) {
            self.publish_context(label);
        }
        if let Some(id) = &ran.rewrote {
            self.publish_stored(id).await;
            self.publish_idle().await;
        }
    }

    /// `{type:"status", sessionId, phase, tokenEstimate, tokenThreshold}`, and on the `idle`
    /// frame after an automatic compaction what it did (`compacted` or `error`).
    pub(super) fn publish_status(
        &self,
        phase: Phase,
        estimate: i64,
        threshold: Option<i64>,
        compaction: Option<CompactionOutcome<'_>>,
    ) {
        self.publish(&Frame::Status {
            session_id: self.id,
            phase,
            token_estimate: estimate,
            token_threshold: threshold,
            compaction,
        });
    }

    /// After a change of the session's messages: `phase: "idle"` with the estimate of the latest
    /// leaf's branch (the system prompt alone when the session is empty).
    pub(crate) async fn publish_idle(&self) {
        if !self.listening() {
            return;
        }
        let threshold = self.env.config.compaction.as_ref().and_then(|c| c.after);
        let estimate = match self.tree().latest_leaf_id() {
            Ok(Some(leaf)) => self.estimate_with_prompt(&leaf).await,
            Ok(None) => self.prompt_tokens().await,
            Err(e) => Err(e),
        };
        if let Ok(estimate) = estimate {
            self.publish_status(Phase::Idle, estimate, threshold, None);
        }
    }
}
