//! `SESSION_CONFIG.chat`: the agent turn's policy (how much history a step sends, how many
//! steps a turn takes, each call's `max_tokens`, what a client going away does to its turn).

use serde::Deserialize;

use crate::error::{Error, Result};

/// Model messages sent per step, by default (a tool call is never separated from its result).
pub const DEFAULT_MAX_MESSAGES: usize = 50;
/// Model calls per turn, by default: a turn whose model keeps calling server tools stops there.
pub const DEFAULT_MAX_STEPS: usize = 8;

/// `SESSION_CONFIG.chat` `{maxMessages?, maxSteps?, maxTokens?, onDisconnect?}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ChatConfig {
    /// Most model messages sent per step (0 = no cap).
    pub max_messages: usize,
    /// Most model calls per turn (1–50).
    pub max_steps: usize,
    /// `max_tokens` of each call (default: the provider layer's).
    pub max_tokens: Option<u32>,
    /// What a turn does when the client that started it goes away (`"stop"` by default).
    pub on_disconnect: OnDisconnect,
}

/// `chat.onDisconnect`: what a turn does when the client that started it goes away (its
/// request aborted, its connection dropped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDisconnect {
    /// The turn stops and keeps what was streamed (`metadata.stopped`).
    #[default]
    Stop,
    /// The turn runs to its end and is stored whole, for a reloaded client to follow with the
    /// resume request; its user message is stored when it starts. Only `POST …/chat/stop` or a
    /// WebSocket `cancel` frame stop it.
    Finish,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            max_messages: DEFAULT_MAX_MESSAGES,
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: None,
            on_disconnect: OnDisconnect::Stop,
        }
    }
}

impl ChatConfig {
    /// The values within their ranges (`chat.…` otherwise).
    pub(crate) fn check(&self) -> Result<()> {
        if !(1..=50).contains(&self.max_steps) {
            return Err(Error::invalid("chat.maxSteps must be from 1 to 50"));
        }
        if self.max_tokens == Some(0) {
            return Err(Error::invalid("chat.maxTokens must be positive"));
        }
        Ok(())
    }
}
