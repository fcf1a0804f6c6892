//! The one LLM client: a conversation with tools ([`ChatRequest`]) in, one step's answer
//! ([`ChatReply`]) out, streamed where the provider can, usage counted the same way for every
//! caller (the agent turn's steps and compaction's summaries alike). The call goes through the
//! [`Transport`] trait (Workers `fetch` or the `AI` binding in the DO, anything natively), so
//! everything here is plain data and tested natively.
//!
//! - `model`, `transport`, `wire`: the request/answer model, how calls reach a model, and the
//!   helpers every wire format reads with;
//! - `api`: what a provider is, the one trait ([`Api`]) each provider's type implements;
//! - [`openai`], [`anthropic`], [`workers_ai`]: the providers, one file each;
//! - `registry`: every provider by name and [`Provider`] variant, the one place they are listed;
//! - [`sse`]: the server-sent-events decoder;
//! - `stream`: a streamed answer put together event by event, and the streamed call;
//! - `surrogates`: UTF-16 surrogate pairs split across streamed events, made whole;
//! - [`embeddings`]: the embeddings client (memory recall by meaning), through the same providers;
//! - [`rerank`]: the re-ranker (`RERANK_*`), which re-orders the best hits of a search.
//!
//! Providers (`LLM_PROVIDER`): `openai` (any OpenAI-compatible `/chat/completions`: OpenAI,
//! Groq, vLLM, Ollama, AI Gateway, Workers AI's own `/ai/v1`), `anthropic` (Messages API),
//! `workers-ai` (the `AI` binding; tools per `LLM_TOOLS`), `none`.
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 26. **Usage is counted the same way for every caller**: turn steps (`llm::chat`) and
//!     summaries (`llm::complete`) go through one step on the same provider type, whose `Api::reply`
//!     and `Api::decode` read its own usage type, so cache reads and writes count as input on
//!     Anthropic, and Workers AI answers of any shape parse, whether a turn or a compaction asked.

pub mod anthropic;
mod api;
pub mod embeddings;
mod model;
pub mod openai;
mod registry;
pub mod rerank;
pub mod sse;
mod stream;
mod surrogates;
mod transport;
pub(crate) mod wire;
pub mod workers_ai;

use std::cell::Cell;

use registry::Purpose;
use transport::within;
use wire::{http_answer, unavailable, without_error};

use crate::error::{Error, ErrorKind, Result};
pub use api::{Accum, Api};
pub use model::{
    ChatMessage, ChatReply, ChatRequest, Delivery, Format, Piece, PromptCache, ToolCall, ToolSpec, Usage,
    DEFAULT_MAX_TOKENS,
};
pub use registry::Provider;
pub use sse::{SseDecoder, SseEvent};
pub use stream::StreamState;
pub use transport::{
    Call, Endpoint, HttpRequest, HttpResponse, Returned, ToolUse, Transport, DEFAULT_TIMEOUT_MS, MAX_ANSWER_BYTES,
};

// ── Configuration ────────────────────────────────────────────────────────────────────────────────────

/// The LLM settings of the deployment (`LLM_*` variables).
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    pub provider: Provider,
    /// Endpoint root, e.g. `https://api.openai.com/v1` (no trailing `/chat/completions`).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout_ms: u64,
    /// Whether the model is offered tools (`LLM_TOOLS`; `workers-ai` only).
    pub tools: ToolUse,
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
            tools: ToolUse::Auto,
        }
    }

    /// Reads `LLM_PROVIDER`, `LLM_BASE_URL`, `LLM_MODEL`, `LLM_API_KEY`, `LLM_TIMEOUT_MS`,
    /// `LLM_TOOLS` through `var` (absent or empty = unset). Unknown providers and missing settings are
    /// `invalid_request` naming the variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| var(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let Some(name) = get("LLM_PROVIDER") else { return Ok(LlmConfig::none()) };
        let provider = Provider::named("LLM_PROVIDER", &name, Purpose::Chat)?;
        let Some(api) = provider.api() else { return Ok(LlmConfig::none()) };
        let base_url = match get("LLM_BASE_URL") {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => api.default_base_url().to_owned(),
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
        let tools = match get("LLM_TOOLS") {
            None => ToolUse::Auto,
            Some(t) => ToolUse::named(&t).ok_or_else(|| Error::invalid("LLM_TOOLS must be auto, on or off"))?,
        };
        Ok(LlmConfig { provider, base_url, model, api_key: get("LLM_API_KEY"), timeout_ms, tools })
    }

    /// Where chat calls go and who they go as.
    pub fn endpoint(&self) -> Endpoint<'_> {
        Endpoint {
            base_url: &self.base_url,
            model: &self.model,
            api_key: self.api_key.as_deref(),
            timeout_ms: self.timeout_ms,
            tools: self.tools,
        }
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
    let only_http = || Error::internal("build_chat_request is only for HTTP providers");
    match cfg.provider.api().ok_or_else(only_http)?.chat_call(&cfg.endpoint(), req, delivery)? {
        Call::Http(http) => Ok(http),
        Call::Binding { .. } => Err(only_http()),
    }
}

/// Parses a provider's whole (non-streamed) answer over HTTP, read by the configured provider.
/// A non-2xx status is `llm_unavailable` with the provider's own message; an answer with neither
/// text nor tool calls is returned as is.
pub fn parse_chat_response(cfg: &LlmConfig, resp: &HttpResponse) -> Result<ChatReply> {
    let answer = http_answer(resp)?;
    match cfg.provider.api() {
        Some(api) => api.reply(answer),
        None => Err(Error::internal("parse_chat_response is only for HTTP providers")),
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
    step(t, cfg, req, Delivery::Streamed, on_delta).await
}

/// The same step without streaming, for a caller that wants only the whole answer (a summary):
/// one request and one answer, parsed and counted exactly as [`chat`] parses and counts.
pub async fn complete(t: &dyn Transport, cfg: &LlmConfig, req: &ChatRequest) -> Result<ChatReply> {
    step(t, cfg, req, Delivery::Whole, &mut |_| Ok(())).await
}

/// One step on the configured provider, whatever its [`Call`]: an HTTP request or a run through
/// the `AI` binding, streamed or answered whole. A whole answer is handed to `on_delta` as one
/// piece of reasoning and one of text.
async fn step(
    t: &dyn Transport,
    cfg: &LlmConfig,
    req: &ChatRequest,
    delivery: Delivery,
    on_delta: &mut dyn FnMut(&Piece) -> Result<()>,
) -> Result<ChatReply> {
    let api = cfg.provider.api().ok_or_else(not_configured)?;
    let reply = match api.chat_call(&cfg.endpoint(), req, delivery)? {
        call if delivery == Delivery::Streamed => return stream::run(t, api, call, on_delta).await,
        Call::Http(http) => {
            let resp = t.send(http).await.map_err(|e| unavailable(e.message))?;
            api.reply(http_answer(&resp)?)?
        }
        Call::Binding { model, input, timeout_ms } => {
            let call = std::pin::pin!(t.workers_ai(&model, input));
            let answer = within(t, timeout_ms, &Cell::new(false), call).await.map_err(|e| unavailable(e.message))?;
            api.reply(without_error(answer)?)?
        }
    };
    reply.hand_out(on_delta)?;
    Ok(reply)
}
