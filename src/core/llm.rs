//! LLM providers behind one interface: the request each provider expects, its answer parsed
//! into a [`Completion`] with usage, and its failures as `503 llm_unavailable`. The HTTP call
//! itself goes through the [`Transport`] trait (Workers `fetch` in the DO, anything natively),
//! so everything here is plain data and tested natively.
//!
//! Providers (`LLM_PROVIDER`): `openai` (any OpenAI-compatible `/chat/completions`: OpenAI,
//! Groq, vLLM, Ollama, AI Gateway), `anthropic` (Messages API), `workers-ai` (the `AI`
//! binding), `none`.

use serde_json::{json, Value as Json};

use crate::core::blobs::BoxFuture;
use crate::core::error::{Error, ErrorKind, Result};

/// Default time allowed for one LLM call.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Default `max_tokens` of a call (Anthropic requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

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

/// A single-turn text request: optional system text and alternating user/assistant turns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prompt {
    pub system: Option<String>,
    /// `(role, text)` with role `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    pub max_tokens: Option<u32>,
    /// A stable key for provider-side prompt caching (OpenAI `prompt_cache_key`).
    pub cache_key: Option<String>,
}

impl Prompt {
    /// One user message.
    pub fn user(text: impl Into<String>) -> Self {
        Prompt { messages: vec![("user".into(), text.into())], ..Prompt::default() }
    }
}

/// Tokens a call consumed, for the session's usage totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// The model's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    pub usage: Usage,
    pub finish_reason: Option<String>,
}

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

/// A provider failure: `503 llm_unavailable`.
pub(crate) fn unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, message)
}

/// At most `n` characters of a provider's error text, for our error message.
pub(crate) fn excerpt(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

/// The HTTP request carrying `body` to the configured provider: its endpoint (`/chat/completions`
/// or `/messages` under `LLM_BASE_URL`) and the headers it expects (the key as `Authorization:
/// Bearer` or `x-api-key`, Anthropic's version, `accept: text/event-stream` when `stream`).
pub(crate) fn http_request(cfg: &LlmConfig, body: &Json, stream: bool) -> Result<HttpRequest> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if stream {
        headers.push(("accept".into(), "text/event-stream".into()));
    }
    let url = match cfg.provider {
        Provider::OpenAi => {
            if let Some(key) = &cfg.api_key {
                headers.push(("authorization".into(), format!("Bearer {key}")));
            }
            format!("{}/chat/completions", cfg.base_url)
        }
        Provider::Anthropic => {
            if let Some(key) = &cfg.api_key {
                headers.push(("x-api-key".into(), key.clone()));
            }
            headers.push(("anthropic-version".into(), "2023-06-01".into()));
            format!("{}/messages", cfg.base_url)
        }
        Provider::WorkersAi | Provider::None => {
            return Err(Error::internal("an HTTP request is only for HTTP providers"));
        }
    };
    Ok(HttpRequest { url, headers, body: body.to_string(), timeout_ms: cfg.timeout_ms })
}

/// The HTTP request for `prompt` (OpenAI-compatible or Anthropic).
pub fn build_request(cfg: &LlmConfig, prompt: &Prompt) -> Result<HttpRequest> {
    let max_tokens = prompt.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let body = match cfg.provider {
        Provider::OpenAi => {
            let mut messages = Vec::new();
            if let Some(s) = &prompt.system {
                messages.push(json!({"role": "system", "content": s}));
            }
            messages.extend(prompt.messages.iter().map(|(r, t)| json!({"role": r, "content": t})));
            let mut body = json!({"model": cfg.model, "messages": messages, "max_tokens": max_tokens, "stream": false});
            if let Some(k) = &prompt.cache_key {
                body["prompt_cache_key"] = json!(k);
            }
            body
        }
        Provider::Anthropic => {
            let messages: Vec<Json> = prompt.messages.iter().map(|(r, t)| json!({"role": r, "content": t})).collect();
            let mut body = json!({"model": cfg.model, "max_tokens": max_tokens, "messages": messages});
            if let Some(s) = &prompt.system {
                // The system prompt is frozen per session: mark it cacheable.
                body["system"] = json!([{"type": "text", "text": s, "cache_control": {"type": "ephemeral"}}]);
            }
            body
        }
        Provider::WorkersAi | Provider::None => {
            return Err(Error::internal("build_request is only for HTTP providers"));
        }
    };
    http_request(cfg, &body, false)
}

/// An integer field of a provider's JSON, 0 when absent.
pub(crate) fn int(v: &Json, key: &str) -> i64 {
    v.get(key).and_then(Json::as_i64).unwrap_or(0)
}

/// Parses a provider's answer. A non-2xx status or an answer without text is `llm_unavailable`
/// with the provider's own message.
pub fn parse_response(cfg: &LlmConfig, resp: &HttpResponse) -> Result<Completion> {
    let parsed: Option<Json> = serde_json::from_str(&resp.body).ok();
    if !(200..300).contains(&resp.status) {
        let detail = parsed
            .as_ref()
            .and_then(|j| j.pointer("/error/message").and_then(Json::as_str).map(str::to_owned))
            .unwrap_or_else(|| excerpt(&resp.body, 300));
        return Err(unavailable(format!("the model answered HTTP {}: {detail}", resp.status)));
    }
    let j =
        parsed.ok_or_else(|| unavailable(format!("the model's answer is not JSON: {}", excerpt(&resp.body, 200))))?;
    match cfg.provider {
        Provider::OpenAi => {
            let choice = j.pointer("/choices/0").ok_or_else(|| unavailable("the model's answer has no choices"))?;
            let text = choice.pointer("/message/content").and_then(Json::as_str).unwrap_or_default().to_owned();
            let usage = j.get("usage").cloned().unwrap_or(Json::Null);
            Ok(Completion {
                text,
                usage: Usage {
                    input_tokens: int(&usage, "prompt_tokens"),
                    output_tokens: int(&usage, "completion_tokens"),
                },
                finish_reason: choice.get("finish_reason").and_then(Json::as_str).map(str::to_owned),
            })
        }
        Provider::Anthropic => {
            let text = j
                .get("content")
                .and_then(Json::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
                        .filter_map(|p| p.get("text").and_then(Json::as_str))
                        .collect::<Vec<_>>()
                        .join("")
                })
                .unwrap_or_default();
            let usage = j.get("usage").cloned().unwrap_or(Json::Null);
            Ok(Completion {
                text,
                usage: Usage { input_tokens: int(&usage, "input_tokens"), output_tokens: int(&usage, "output_tokens") },
                finish_reason: j.get("stop_reason").and_then(Json::as_str).map(str::to_owned),
            })
        }
        Provider::WorkersAi | Provider::None => Err(Error::internal("parse_response is only for HTTP providers")),
    }
}

/// Runs `prompt` on the configured model.
pub async fn complete(t: &dyn Transport, cfg: &LlmConfig, prompt: &Prompt) -> Result<Completion> {
    match cfg.provider {
        Provider::None => Err(Error::new(
            ErrorKind::NotConfigured,
            "no LLM is configured: set LLM_PROVIDER, LLM_BASE_URL, LLM_MODEL (and the secret LLM_API_KEY)",
        )),
        Provider::WorkersAi => {
            let mut messages = Vec::new();
            if let Some(s) = &prompt.system {
                messages.push(json!({"role": "system", "content": s}));
            }
            messages.extend(prompt.messages.iter().map(|(r, t)| json!({"role": r, "content": t})));
            let input = json!({"messages": messages, "max_tokens": prompt.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)});
            let out = t.workers_ai(&cfg.model, input).await.map_err(|e| unavailable(e.message))?;
            let text = out.get("response").and_then(Json::as_str).unwrap_or_default().to_owned();
            let usage = out.get("usage").cloned().unwrap_or(Json::Null);
            Ok(Completion {
                text,
                usage: Usage {
                    input_tokens: int(&usage, "prompt_tokens"),
                    output_tokens: int(&usage, "completion_tokens"),
                },
                finish_reason: None,
            })
        }
        Provider::OpenAi | Provider::Anthropic => {
            let req = build_request(cfg, prompt)?;
            let resp = t.send(req).await.map_err(|e| unavailable(e.message))?;
            parse_response(cfg, &resp)
        }
    }
}
