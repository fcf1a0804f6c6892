//! The one LLM client: a conversation with tools ([`ChatRequest`]) in, one step's answer
//! ([`ChatReply`]) out, streamed where the provider can, usage counted the same way for every
//! caller (the agent turn's steps and compaction's summaries alike). The HTTP call goes through
//! the [`Transport`] trait (Workers `fetch` in the DO, anything natively), so everything here is
//! plain data and tested natively.
//!
//! - `model`, `transport`, `wire`: the request/answer model, how requests reach a model, and the
//!   helpers every wire format reads with;
//! - [`openai`], [`anthropic`], [`workers_ai`]: each provider's wire format, as serde types;
//! - [`sse`]: the server-sent-events decoder;
//! - [`embeddings`]: the embeddings client (memory recall by meaning);
//! - `stream`: a streamed answer put together event by event;
//! - `surrogates`: UTF-16 surrogate pairs split across streamed events, made whole.
//!
//! Providers (`LLM_PROVIDER`): `openai` (any OpenAI-compatible `/chat/completions`: OpenAI,
//! Groq, vLLM, Ollama, AI Gateway), `anthropic` (Messages API), `workers-ai` (the `AI`
//! binding), `none`.

pub mod anthropic;
pub mod embeddings;
mod model;
pub mod openai;
pub mod sse;
mod stream;
mod surrogates;
mod transport;
mod wire;
pub mod workers_ai;

use serde_json::Value as Json;
use wire::{error_message, excerpt, http_failure, unavailable};

use crate::error::{Error, ErrorKind, Result};
pub use model::{
    ChatMessage, ChatReply, ChatRequest, Delivery, Format, Piece, ToolCall, ToolSpec, Usage, DEFAULT_MAX_TOKENS,
};
pub use sse::{SseDecoder, SseEvent};
pub use stream::StreamState;
pub use transport::{HttpRequest, HttpResponse, Transport, DEFAULT_TIMEOUT_MS};

// ── Configuration ────────────────────────────────────────────────────────────────────────────────────

/// Which API the configured model speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    WorkersAi,
    None,
}

/// The LLM settings of the deployment (`LLM_*` variables).
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    pub provider: Provider,
    /// Endpoint root, e.g. `https://api.openai.com/v1` (no trailing `/chat/completions`).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout_ms: u64,
}

impl LlmConfig {
    /// No LLM: every call is `503 not_configured`.
    pub fn none() -> Self {
        LlmConfig {
            provider: Provider::None,
            base_url: String::new(),
            model: String::new(),
            api_key: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }

    /// Reads `LLM_PROVIDER`, `LLM_BASE_URL`, `LLM_MODEL`, `LLM_API_KEY`, `LLM_TIMEOUT_MS`
    /// through `var` (absent or empty = unset). Unknown providers and missing settings are
    /// `invalid_request` naming the variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| var(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let provider = match get("LLM_PROVIDER").as_deref() {
            None | Some("none") => return Ok(LlmConfig::none()),
            Some("openai") => Provider::OpenAi,
            Some("anthropic") => Provider::Anthropic,
            Some("workers-ai") => Provider::WorkersAi,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "LLM_PROVIDER {other:?} is not one of openai, anthropic, workers-ai, none"
                )))
            }
        };
        let base_url = match (provider, get("LLM_BASE_URL")) {
            (_, Some(u)) => u.trim_end_matches('/').to_owned(),
            (Provider::OpenAi, None) => "https://api.openai.com/v1".to_owned(),
            (Provider::Anthropic, None) => "https://api.anthropic.com/v1".to_owned(),
            _ => String::new(),
        };
        let model = get("LLM_MODEL").ok_or_else(|| Error::invalid("LLM_MODEL is not set"))?;
        let timeout_ms = match get("LLM_TIMEOUT_MS") {
            None => DEFAULT_TIMEOUT_MS,
            Some(t) => t
                .parse()
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| Error::invalid("LLM_TIMEOUT_MS must be a positive integer"))?,
        };
        Ok(LlmConfig { provider, base_url, model, api_key: get("LLM_API_KEY"), timeout_ms })
    }
}

/// No LLM configured: `503 not_configured`.
fn not_configured() -> Error {
    Error::new(
        ErrorKind::NotConfigured,
        "no LLM is configured: set LLM_PROVIDER, LLM_BASE_URL, LLM_MODEL (and the secret LLM_API_KEY)",
    )
}

// ── One step ─────────────────────────────────────────────────────────────────────────────────────────

/// The HTTP request of one step on an HTTP provider (OpenAI-compatible or Anthropic): its
/// endpoint under `LLM_BASE_URL`, the headers it expects (the key as `Authorization: Bearer` or
/// `x-api-key`, Anthropic's version, `accept: text/event-stream` when [`Delivery::Streamed`]), and the body.
pub fn build_chat_request(cfg: &LlmConfig, req: &ChatRequest, delivery: Delivery) -> Result<HttpRequest> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if delivery == Delivery::Streamed {
        headers.push(("accept".into(), "text/event-stream".into()));
    }
    let (url, body) = match cfg.provider {
        Provider::OpenAi => {
            if let Some(key) = &cfg.api_key {
                headers.push(("authorization".into(), format!("Bearer {key}")));
            }
            (format!("{}/chat/completions", cfg.base_url), openai::body(cfg, req, delivery))
        }
        Provider::Anthropic => {
            if let Some(key) = &cfg.api_key {
                headers.push(("x-api-key".into(), key.clone()));
            }
            headers.push(("anthropic-version".into(), "2023-06-01".into()));
            (format!("{}/messages", cfg.base_url), anthropic::body(cfg, req, delivery))
        }
        Provider::WorkersAi | Provider::None => {
            return Err(Error::internal("build_chat_request is only for HTTP providers"));
        }
    };
    let body = body.map_err(|e| Error::internal(format!("serializing the model request: {e}")))?;
    Ok(HttpRequest { url, headers, body, timeout_ms: cfg.timeout_ms })
}

/// Parses a provider's whole (non-streamed) answer. A non-2xx status is `llm_unavailable` with
/// the provider's own message; an answer with neither text nor tool calls is returned as is.
pub fn parse_chat_response(cfg: &LlmConfig, resp: &HttpResponse) -> Result<ChatReply> {
    if !(200..300).contains(&resp.status) {
        return Err(http_failure(resp.status, &resp.body));
    }
    let j: Json = serde_json::from_str(&resp.body).map_err(|_| {
        unavailable("the model's answer is not JSON")
            .with_log(format!("the model's answer is not JSON: {}", excerpt(&resp.body, 200)))
    })?;
    if let Some(detail) = error_message(j.get("error")) {
        return Err(unavailable("the model failed").with_log(format!("the model failed: {detail}")));
    }
    match cfg.provider {
        Provider::OpenAi => openai::reply(j),
        Provider::Anthropic => Ok(anthropic::reply(j)),
        Provider::WorkersAi | Provider::None => Err(Error::internal("parse_chat_response is only for HTTP providers")),
    }
}

/// Runs one step of a conversation on the configured model, streamed where the provider can:
/// every piece of text and of reasoning goes to `on_delta` as it arrives.
///
/// Provider failures (transport, non-2xx, a streamed error, an unreadable or cut-off stream)
/// are `llm_unavailable` with the provider's message; no provider is `not_configured`. An error
/// from `on_delta` stops the call and comes back unchanged, so the caller can tell its client
/// going away from the model failing. A reply with neither text nor tool calls is returned as is.
pub async fn chat(
    t: &dyn Transport,
    cfg: &LlmConfig,
    req: &ChatRequest,
    on_delta: &mut dyn FnMut(&Piece) -> Result<()>,
) -> Result<ChatReply> {
    match cfg.provider {
        Provider::None => Err(not_configured()),
        Provider::WorkersAi => workers_ai::chat(t, cfg, req, on_delta).await,
        Provider::OpenAi | Provider::Anthropic => stream::run(t, cfg, req, on_delta).await,
    }
}

/// The same step without streaming, for a caller that wants only the whole answer (a summary):
/// one request and one answer, parsed and counted exactly as [`chat`] parses and counts.
pub async fn complete(t: &dyn Transport, cfg: &LlmConfig, req: &ChatRequest) -> Result<ChatReply> {
    match cfg.provider {
        Provider::None => Err(not_configured()),
        Provider::WorkersAi => workers_ai::chat(t, cfg, req, &mut |_| Ok(())).await,
        Provider::OpenAi | Provider::Anthropic => {
            let resp =
                t.send(build_chat_request(cfg, req, Delivery::Whole)?).await.map_err(|e| unavailable(e.message))?;
            parse_chat_response(cfg, &resp)
        }
    }
}
