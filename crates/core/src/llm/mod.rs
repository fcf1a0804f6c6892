//! The one LLM client: a conversation with tools ([`ChatRequest`]) in, one step's answer
//! ([`ChatReply`]) out, streamed where the provider can, usage counted the same way for every
//! caller (the agent turn's steps and compaction's summaries alike). The HTTP call goes through
//! the [`Transport`] trait (Workers `fetch` in the DO, anything natively), so everything here is
//! plain data and tested natively.
//!
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
pub mod openai;
pub mod sse;
mod stream;
mod surrogates;
pub mod workers_ai;

use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;

use crate::blobs::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
pub use sse::{SseDecoder, SseEvent};
pub use stream::StreamState;

/// Default time allowed for one LLM call.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Default `max_tokens` of a call (Anthropic requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

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

// ── The conversation ─────────────────────────────────────────────────────────────────────────────────

/// One message of the conversation sent to the model.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatMessage {
    User {
        text: String,
    },
    /// The model's earlier turn: its text and the tools it called.
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, as the model reads it.
    Tool {
        call_id: String,
        name: String,
        output: String,
    },
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments, parsed (`{}` when the model sent none or invalid JSON).
    pub input: Json,
}

/// A tool offered to the model (and listed by `GET …/tools`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Json,
}

/// One step of a conversation (a turn's step, or a summary: one user message, no tools).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    /// Provider-side prompt caching key (OpenAI `prompt_cache_key`): the session id.
    pub cache_key: Option<String>,
    /// Per-turn system text sent after `system`, outside what the prompt cache keeps (the
    /// memories recalled for this turn), so `system` stays byte-identical between turns.
    pub system_tail: Option<String>,
    /// What the answer's text must be.
    pub format: Format,
}

/// The shape asked of the answer's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Free text.
    #[default]
    Text,
    /// One JSON object (OpenAI-compatible `response_format: json_object`; other providers are
    /// asked in the prompt and parsed leniently).
    JsonObject,
}

impl ChatRequest {
    /// A single user message, nothing else.
    pub fn user(text: impl Into<String>) -> Self {
        ChatRequest { messages: vec![ChatMessage::User { text: text.into() }], ..ChatRequest::default() }
    }
}

/// Tokens a call consumed, for the session's usage totals. Input tokens include the prompt
/// cache's reads and writes wherever the provider reports them apart (Anthropic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// A piece of a streamed answer, handed out as it arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// More of the reply's text.
    Text(String),
    /// More of the model's reasoning (providers that send it apart: Anthropic thinking,
    /// `reasoning_content` / `reasoning` of OpenAI-compatible ones).
    Reasoning(String),
}

/// What the model answered in one step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatReply {
    pub text: String,
    /// Reasoning text, when the provider sends it separately.
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
}

// ── Transport ────────────────────────────────────────────────────────────────────────────────────────

/// An outgoing HTTP request.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub timeout_ms: u64,
}

/// What came back: status and body text.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

/// How requests reach a model. `Err` from either method is a transport failure (network,
/// timeout, missing binding), reported as `llm_unavailable`.
pub trait Transport {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>>;
    /// Sends `req` and hands the response body to `on_chunk` piece by piece as it arrives
    /// (server-sent events); returns the HTTP status. An `Err` from `on_chunk` (the client went
    /// away) stops reading and is returned. The default reads the whole body with
    /// [`Transport::send`] and hands it over as one piece.
    fn send_stream<'a>(
        &'a self,
        req: HttpRequest,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<u16>> {
        Box::pin(async move {
            let resp = self.send(req).await?;
            on_chunk(&resp.body)?;
            Ok(resp.status)
        })
    }
    /// Runs a Workers AI model through the `AI` binding with `input`.
    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>>;
}

// ── Errors ───────────────────────────────────────────────────────────────────────────────────────────

/// A provider failure: `503 llm_unavailable`.
pub(crate) fn unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, message)
}

/// No LLM configured: `503 not_configured`.
fn not_configured() -> Error {
    Error::new(
        ErrorKind::NotConfigured,
        "no LLM is configured: set LLM_PROVIDER, LLM_BASE_URL, LLM_MODEL (and the secret LLM_API_KEY)",
    )
}

/// At most `n` characters of a provider's text, for our error message.
pub(crate) fn excerpt(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

/// The message of an `error` a provider put in its answer, an event, or a Workers AI result:
/// its `message`, a plain string, or anything else as JSON; `None` when absent or `null`.
pub(crate) fn error_message(e: Option<&Json>) -> Option<String> {
    match e? {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        e => Some(e.get("message").and_then(Json::as_str).map_or_else(|| excerpt(&e.to_string(), 300), str::to_owned)),
    }
}

/// `llm_unavailable` for a non-2xx answer: the status for the caller; the provider's
/// `error.message` (or an excerpt of its body) for the log only, as everything a provider says:
/// an upstream body is never echoed to the caller.
fn http_failure(status: u16, body: &str) -> Error {
    let detail = serde_json::from_str::<Json>(body)
        .ok()
        .and_then(|j| j.pointer("/error/message").and_then(Json::as_str).map(str::to_owned))
        .unwrap_or_else(|| excerpt(body, 300));
    unavailable(format!("the model answered HTTP {status}"))
        .with_log(format!("the model answered HTTP {status}: {detail}"))
}

/// A field of a provider's JSON read leniently: a value of another shape counts as absent, so
/// a loose server never turns into a parse failure of the whole answer.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned + Default>(
    d: D,
) -> std::result::Result<T, D::Error> {
    Ok(serde_json::from_value(Json::deserialize(d)?).unwrap_or_default())
}

/// Tool arguments as the model sent them (a JSON string, or an object from lenient servers),
/// parsed; `{}` when empty, invalid or not an object.
pub(crate) fn parse_arguments(v: Option<&Json>) -> Json {
    let parsed = match v {
        Some(Json::String(s)) => serde_json::from_str::<Json>(s).ok(),
        Some(o @ Json::Object(_)) => Some(o.clone()),
        _ => None,
    };
    parsed.filter(Json::is_object).unwrap_or_else(|| Json::Object(Default::default()))
}

/// `v` if it is a JSON object, else `{}` (a tool input as providers require it).
pub(crate) fn object_or_empty(v: &Json) -> Json {
    if v.is_object() {
        v.clone()
    } else {
        Json::Object(Default::default())
    }
}

// ── One step ─────────────────────────────────────────────────────────────────────────────────────────

/// How a step's answer comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// One JSON answer (summaries, and chat steps that need no live text).
    Whole,
    /// Server-sent events, with the usage at the end.
    Streamed,
}

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
