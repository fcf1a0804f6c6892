//! The embeddings client of semantic memory recall (`EMBEDDINGS_*`): an OpenAI-compatible
//! `/embeddings` endpoint or a Workers AI model, over the same [`Transport`] as the chat client.

use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::transport::{HttpRequest, Transport, DEFAULT_TIMEOUT_MS};
use crate::error::{Error, ErrorKind, Result};

/// Which embeddings API is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingsProvider {
    None,
    OpenAi,
    WorkersAi,
}

/// The `EMBEDDINGS_*` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingsConfig {
    pub provider: EmbeddingsProvider,
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
}

impl EmbeddingsConfig {
    /// No embeddings: recall is full text only.
    pub fn none() -> Self {
        EmbeddingsConfig {
            provider: EmbeddingsProvider::None,
            base_url: String::new(),
            model: String::new(),
            api_key: None,
        }
    }

    /// Whether memories are embedded.
    pub fn is_on(&self) -> bool {
        self.provider != EmbeddingsProvider::None
    }

    /// Reads `EMBEDDINGS_PROVIDER` (`openai`, `workers-ai`, `none`), `EMBEDDINGS_BASE_URL`
    /// (default: `LLM_BASE_URL`), `EMBEDDINGS_MODEL` and the secret `EMBEDDINGS_API_KEY`
    /// (default: `LLM_API_KEY`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| var(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let provider = match get("EMBEDDINGS_PROVIDER").as_deref() {
            None | Some("none") => return Ok(EmbeddingsConfig::none()),
            Some("openai") => EmbeddingsProvider::OpenAi,
            Some("workers-ai") => EmbeddingsProvider::WorkersAi,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "EMBEDDINGS_PROVIDER {other:?} is not one of openai, workers-ai, none"
                )))
            }
        };
        let base_url = match (provider, get("EMBEDDINGS_BASE_URL").or_else(|| get("LLM_BASE_URL"))) {
            (_, Some(u)) => u.trim_end_matches('/').to_owned(),
            (EmbeddingsProvider::OpenAi, None) => "https://api.openai.com/v1".to_owned(),
            _ => String::new(),
        };
        let model = get("EMBEDDINGS_MODEL").ok_or_else(|| Error::invalid("EMBEDDINGS_MODEL is not set"))?;
        let api_key = get("EMBEDDINGS_API_KEY").or_else(|| get("LLM_API_KEY"));
        Ok(EmbeddingsConfig { provider, base_url, model, api_key })
    }
}

fn failed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, message)
}

/// The HTTP request of an OpenAI-compatible embeddings call.
pub fn openai_request(cfg: &EmbeddingsConfig, texts: &[String]) -> HttpRequest {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(k) = &cfg.api_key {
        headers.push(("authorization".into(), format!("Bearer {k}")));
    }
    let body = json!({"model": cfg.model, "input": texts}).to_string();
    HttpRequest { url: format!("{}/embeddings", cfg.base_url), headers, body, timeout_ms: DEFAULT_TIMEOUT_MS }
}

#[derive(Deserialize)]
struct OpenAiAnswer {
    data: Vec<OpenAiVector>,
}

#[derive(Deserialize)]
struct OpenAiVector {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// The vectors of an OpenAI-compatible answer, in the order of the inputs.
pub fn parse_openai(body: &str, n: usize) -> Result<Vec<Vec<f32>>> {
    let a: OpenAiAnswer =
        serde_json::from_str(body).map_err(|e| failed(format!("the embeddings answer is not understood: {e}")))?;
    let mut out = vec![Vec::new(); n];
    for (i, v) in a.data.into_iter().enumerate() {
        let at = v.index.unwrap_or(i);
        if at < n {
            out[at] = v.embedding;
        }
    }
    check(out)
}

/// The input of a Workers AI embeddings model (`@cf/baai/bge-*`): `{text: [...]}`.
pub fn workers_ai_input(texts: &[String]) -> Json {
    json!({ "text": texts })
}

/// The vectors of a Workers AI answer (`{shape, data: [[...], ...]}`).
pub fn parse_workers_ai(answer: &Json, n: usize) -> Result<Vec<Vec<f32>>> {
    let data =
        answer.get("data").and_then(Json::as_array).ok_or_else(|| failed("the embeddings answer has no data"))?;
    let out: Vec<Vec<f32>> = data
        .iter()
        .map(|row| row.as_array().map(|r| r.iter().filter_map(Json::as_f64).map(|f| f as f32).collect()))
        .collect::<Option<_>>()
        .ok_or_else(|| failed("the embeddings answer's data is not a list of vectors"))?;
    if out.len() != n {
        return Err(failed(format!("asked for {n} embeddings, got {}", out.len())));
    }
    check(out)
}

fn check(out: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>> {
    if out.iter().any(|v| v.is_empty() || v.iter().any(|f| !f.is_finite())) {
        return Err(failed("the embeddings answer lacks a vector or holds a non-number"));
    }
    Ok(out)
}

/// Embeds `texts` with the configured model.
pub async fn embed(t: &dyn Transport, cfg: &EmbeddingsConfig, texts: &[String]) -> Result<Vec<Vec<f32>>> {
    match cfg.provider {
        EmbeddingsProvider::None => Err(Error::new(ErrorKind::NotConfigured, "no embeddings are configured")),
        EmbeddingsProvider::OpenAi => {
            let resp = t.send(openai_request(cfg, texts)).await.map_err(|e| failed(e.message))?;
            if !(200..300).contains(&resp.status) {
                let excerpt: String = resp.body.chars().take(200).collect();
                return Err(failed(format!("embeddings endpoint answered {}: {excerpt}", resp.status)));
            }
            parse_openai(&resp.body, texts.len())
        }
        EmbeddingsProvider::WorkersAi => {
            let answer = t.workers_ai(&cfg.model, workers_ai_input(texts)).await.map_err(|e| failed(e.message))?;
            parse_workers_ai(&answer, texts.len())
        }
    }
}

/// Embeds one text.
pub async fn embed_one(t: &dyn Transport, cfg: &EmbeddingsConfig, text: &str) -> Result<Vec<f32>> {
    embed(t, cfg, &[text.to_owned()]).await?.pop().ok_or_else(|| failed("no embedding came back"))
}
