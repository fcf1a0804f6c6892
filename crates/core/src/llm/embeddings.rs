//! The embeddings client of semantic memory recall (`EMBEDDINGS_*`): the same providers as
//! chat ([`Api::embeddings_call`], [`Api::vectors`]: an OpenAI-compatible `/embeddings`
//! endpoint or a Workers AI model), over the same [`Transport`].

use super::api::Api;
use super::registry::{Provider, Purpose};
use std::cell::Cell;

use super::transport::{within, Call, Endpoint, Returned, ToolUse, Transport, DEFAULT_TIMEOUT_MS};
use super::wire::unavailable;
use crate::error::{Error, ErrorKind, Result};

/// The `EMBEDDINGS_*` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingsConfig {
    /// One with an embeddings API ([`Api::has_embeddings`]), or [`Provider::None`].
    pub provider: Provider,
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
}

impl EmbeddingsConfig {
    /// No embeddings: recall is full text only.
    pub fn none() -> Self {
        EmbeddingsConfig { provider: Provider::None, base_url: String::new(), model: String::new(), api_key: None }
    }

    /// Whether memories are embedded.
    pub fn is_on(&self) -> bool {
        self.provider != Provider::None
    }

    /// Reads `EMBEDDINGS_PROVIDER` (`openai`, `workers-ai`, `none`), `EMBEDDINGS_BASE_URL`
    /// (default: `LLM_BASE_URL`), `EMBEDDINGS_MODEL` and the secret `EMBEDDINGS_API_KEY`
    /// (default: `LLM_API_KEY`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| var(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let Some(name) = get("EMBEDDINGS_PROVIDER") else { return Ok(EmbeddingsConfig::none()) };
        let provider = Provider::named("EMBEDDINGS_PROVIDER", &name, Purpose::Embeddings)?;
        let Some(api) = provider.api() else { return Ok(EmbeddingsConfig::none()) };
        let base_url = match get("EMBEDDINGS_BASE_URL").or_else(|| get("LLM_BASE_URL")) {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => api.default_base_url().to_owned(),
        };
        let model = get("EMBEDDINGS_MODEL").ok_or_else(|| Error::invalid("EMBEDDINGS_MODEL is not set"))?;
        let api_key = get("EMBEDDINGS_API_KEY").or_else(|| get("LLM_API_KEY"));
        Ok(EmbeddingsConfig { provider, base_url, model, api_key })
    }

    /// Where embeddings calls go and who they go as (the default timeout of an LLM call).
    pub fn endpoint(&self) -> Endpoint<'_> {
        Endpoint {
            base_url: &self.base_url,
            model: &self.model,
            api_key: self.api_key.as_deref(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            tools: ToolUse::Off,
        }
    }
}

/// The vectors `api` reads from `answer`, `n` of them in the order of the texts; a missing
/// vector or a non-number is `llm_unavailable`.
pub fn vectors(api: &dyn Api, answer: Returned<'_>, n: usize) -> Result<Vec<Vec<f32>>> {
    let out = api.vectors(answer, n)?;
    if out.iter().any(|v| v.is_empty() || v.iter().any(|f| !f.is_finite())) {
        return Err(unavailable("the embeddings answer lacks a vector or holds a non-number"));
    }
    Ok(out)
}

/// Embeds `texts` with the configured model.
pub(crate) async fn embed(t: &dyn Transport, cfg: &EmbeddingsConfig, texts: &[String]) -> Result<Vec<Vec<f32>>> {
    let Some(api) = cfg.provider.api() else {
        return Err(Error::new(ErrorKind::NotConfigured, "no embeddings are configured"));
    };
    match api.embeddings_call(&cfg.endpoint(), texts)? {
        Call::Http(req) => {
            let resp = t.send(req).await.map_err(|e| unavailable(e.message))?;
            if !(200..300).contains(&resp.status) {
                let excerpt: String = resp.body.chars().take(200).collect();
                return Err(unavailable(format!("embeddings endpoint answered {}: {excerpt}", resp.status)));
            }
            vectors(api, Returned::Body(&resp.body), texts.len())
        }
        Call::Binding { model, input, timeout_ms } => {
            let call = std::pin::pin!(t.workers_ai(&model, input));
            let answer = within(t, timeout_ms, &Cell::new(false), call).await.map_err(|e| unavailable(e.message))?;
            vectors(api, Returned::Binding(&answer), texts.len())
        }
    }
}

/// Embeds one text.
pub(crate) async fn embed_one(t: &dyn Transport, cfg: &EmbeddingsConfig, text: &str) -> Result<Vec<f32>> {
    embed(t, cfg, &[text.to_owned()]).await?.pop().ok_or_else(|| unavailable("no embedding came back"))
}
