//! `SESSION_CONFIG.chat`: the agent turn's policy (how much history a step sends, how many
//! steps a turn takes, each call's `max_tokens`, what a client going away does to its turn).

use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;

use crate::error::{Error, Result};

/// Model messages sent per step, by default (a tool call is never separated from its result).
pub const DEFAULT_MAX_MESSAGES: usize = 50;
/// Model calls per turn, by default: a turn whose model keeps calling server tools stops there.
pub const DEFAULT_MAX_STEPS: usize = 8;

/// `SESSION_CONFIG.chat` `{maxMessages?, maxSteps?, maxTokens?, onDisconnect?, cache?, models?}`.
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
    /// What the provider's prompt cache keeps of each step (`None`: nothing, `cache: false`).
    #[serde(deserialize_with = "cache_setting")]
    pub cache: Option<CacheConfig>,
    /// Other models of the configured provider that a caller may name for one turn (an OpenAI
    /// client's `model`); any other name is ignored and `LLM_MODEL` answers.
    pub models: Vec<String>,
}

/// Most names in `chat.models`.
pub const MAX_MODELS: usize = 16;
/// Longest name in `chat.models`.
pub const MAX_MODEL_NAME_BYTES: usize = 128;

/// `chat.cache` (and a turn's own `cache`): what of a step's request the provider's prompt cache
/// keeps. `false`: nothing (no marks, no OpenAI `prompt_cache_key`); `true` or absent: the
/// defaults (`null` is refused, as for `memory`); an object: `{instructions = true, tools = true, messages = 0, ttl = "5m"}`.
/// Anthropic marks the frozen system prompt, the last tool and the `messages`-th message from the
/// end of the conversation sent (1: the newest, so the next step reads everything before it)
/// with `cache_control` (`ttl` `"1h"` asks for the hour-long cache); OpenAI routes by the
/// session's `prompt_cache_key`; other providers ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CacheConfig {
    pub instructions: bool,
    pub tools: bool,
    /// Which message from the end closes the cached prefix (0: none; at most [`MAX_CACHED_FROM_END`]).
    pub messages: usize,
    pub ttl: CacheTtl,
}

/// Most `chat.cache.messages`: a mark further back caches less than one nearer would.
pub const MAX_CACHED_FROM_END: usize = 100;

/// How long a cached prefix lives (Anthropic's two lifetimes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum CacheTtl {
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { instructions: true, tools: true, messages: 0, ttl: CacheTtl::FiveMinutes }
    }
}

impl CacheConfig {
    /// Reads a cache setting (`false`, `true`, or an object; `what` names it in errors).
    pub fn from_json(v: &Json, what: &str) -> Result<Option<CacheConfig>> {
        let bad = |why: String| {
            Error::invalid(format!("{what} must be false, true or {{instructions?, tools?, messages?, ttl?}}: {why}"))
        };
        let c = match v {
            Json::Bool(false) => return Ok(None),
            Json::Bool(true) => CacheConfig::default(),
            Json::Object(_) => CacheConfig::deserialize(v).map_err(|e| bad(e.to_string()))?,
            other => return Err(bad(format!("not {other}"))),
        };
        if c.messages > MAX_CACHED_FROM_END {
            return Err(bad(format!("messages is at most {MAX_CACHED_FROM_END}")));
        }
        Ok(Some(c))
    }
}

/// `chat.cache` as [`CacheConfig::from_json`] reads it.
fn cache_setting<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<CacheConfig>, D::Error> {
    let v = Json::deserialize(d)?;
    CacheConfig::from_json(&v, "chat.cache").map_err(|e| serde::de::Error::custom(e.message))
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
            cache: Some(CacheConfig::default()),
            models: Vec::new(),
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
        if self.models.len() > MAX_MODELS {
            return Err(Error::invalid(format!("chat.models names at most {MAX_MODELS} models")));
        }
        let bad = |m: &String| m.is_empty() || m.len() > MAX_MODEL_NAME_BYTES || m.chars().any(char::is_control);
        if let Some(m) = self.models.iter().find(|m| bad(m)) {
            return Err(Error::invalid(format!(
                "chat.models: {m:?} is not a model name (1-{MAX_MODEL_NAME_BYTES} bytes, no control characters)"
            )));
        }
        Ok(())
    }

    /// The model a caller named, when it is one of `models` (else `None`: the configured one).
    pub fn allowed_model(&self, asked: &str) -> Option<&str> {
        self.models.iter().find(|m| *m == asked).map(String::as_str)
    }
}
