//! What a session's sockets hear about its changes, whatever the entry point (HTTP, a stub, a
//! WebSocket, a turn): `message` for every stored message, `deleted` / `cleared`, `context` for
//! block changes, and `status` frames (docs/REFERENCE.md#status-frames) with the branch's token estimate.
//! Frames are built only when someone listens.

use serde_json::{json, Value as Json};

use super::Session;
use crate::context::tools::Ran;

impl Session<'_> {
    fn listening(&self) -> bool {
        self.env.events.has_listeners(self.id)
    }

    /// `{type:"message", sessionId, message}` for a stored message (its JSON as the client sent it).
    pub fn publish_message(&self, json: &str) {
        if !self.listening() {
            return;
        }
        if let Ok(message) = serde_json::from_str::<Json>(json) {
            self.env.events.publish(self.id, &json!({"type": "message", "sessionId": self.id, "message": message}));
        }
    }

    /// A stored message as it reads now (whole), e.g. after a tool rewrote it; nothing when it
    /// cannot be read.
    pub async fn publish_stored(&self, id: &str) {
        if !self.listening() {
            return;
        }
        if let Ok(m) = self.message(id).await {
            self.publish_message(m.get());
        }
    }

    /// A change that is not a stored message: `deleted`, `cleared` or `context` (the frame's
    /// other fields in `fields`).
    pub fn publish_change(&self, kind: &str, fields: Json) {
        if !self.listening() {
            return;
        }
        let mut frame = json!({"type": kind, "sessionId": self.id});
        if let (Some(f), Json::Object(extra)) = (frame.as_object_mut(), fields) {
            f.extend(extra);
        }
        self.env.events.publish(self.id, &frame);
    }

    /// `{type:"context", sessionId, label}` after a block changed.
    pub fn publish_context(&self, label: &str) {
        self.publish_change("context", json!({ "label": label }));
    }

    /// What a tool run changed: a `context` frame when it stored something for its block, and
    /// the rewritten message (then an `idle` status) when it rewrote one.
    pub async fn publish_tool_effects(&self, input: &Json, ran: &Ran) {
        if let Some(label) = input.get("label").and_then(Json::as_str).filter(|_| ran.wrote) {
            self.publish_context(label);
        }
        if let Some(id) = &ran.rewrote {
            self.publish_stored(id).await;
            self.publish_idle().await;
        }
    }

    /// `{type:"status", sessionId, phase, tokenEstimate, tokenThreshold, …extra}`.
    pub(super) fn publish_status(
        &self,
        phase: &str,
        estimate: i64,
        threshold: Option<i64>,
        extra: Option<(&str, Json)>,
    ) {
        if !self.listening() {
            return;
        }
        let mut frame = json!({"type": "status", "sessionId": self.id, "phase": phase,
            "tokenEstimate": estimate, "tokenThreshold": threshold});
        if let Some((k, v)) = extra {
            frame[k] = v;
        }
        self.env.events.publish(self.id, &frame);
    }

    /// After a change of the session's messages: `phase: "idle"` with the estimate of the latest
    /// leaf's branch (the system prompt alone when the session is empty).
    pub async fn publish_idle(&self) {
        if !self.listening() {
            return;
        }
        let threshold = self.env.config.compaction.and_then(|c| c.after);
        let estimate = match self.tree().latest_leaf_id() {
            Ok(Some(leaf)) => self.estimate_with_prompt(&leaf).await,
            Ok(None) => self.prompt_tokens().await,
            Err(e) => Err(e),
        };
        if let Ok(estimate) = estimate {
            self.publish_status("idle", estimate, threshold, None);
        }
    }
}
