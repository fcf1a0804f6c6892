//! What every provider's wire format needs read the same way: a provider's failure as
//! `llm_unavailable` (its own words for the log only), a whole answer checked before the
//! provider reads it, JSON fields read leniently, tool arguments parsed, and the request body
//! serialized.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value as Json;

use super::model::Usage;
use super::transport::HttpResponse;
use crate::error::{Error, ErrorKind, Result};

/// A provider failure: `503 llm_unavailable`.
pub(crate) fn unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, message)
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
pub(crate) fn http_failure(status: u16, body: &str) -> Error {
    let detail = serde_json::from_str::<Json>(body)
        .ok()
        .and_then(|j| j.pointer("/error/message").and_then(Json::as_str).map(str::to_owned))
        .unwrap_or_else(|| excerpt(body, 300));
    unavailable(format!("the model answered HTTP {status}"))
        .with_log(format!("the model answered HTTP {status}: {detail}"))
}

/// A whole answer over HTTP as JSON, for the provider to read: a non-2xx status is
/// `llm_unavailable` with the provider's own message (for the log), and so are a body that is
/// not JSON and an `error` in it.
pub(crate) fn http_answer(resp: &HttpResponse) -> Result<Json> {
    if !(200..300).contains(&resp.status) {
        return Err(http_failure(resp.status, &resp.body));
    }
    let j: Json = serde_json::from_str(&resp.body).map_err(|_| {
        unavailable("the model's answer is not JSON")
            .with_log(format!("the model's answer is not JSON: {}", excerpt(&resp.body, 200)))
    })?;
    without_error(j)
}

/// A whole answer (an HTTP body's JSON, or what the `AI` binding returned), unless it holds an
/// `error`: that is `llm_unavailable` with its message for the log.
pub(crate) fn without_error(answer: Json) -> Result<Json> {
    if let Some(detail) = error_message(answer.get("error")) {
        return Err(unavailable("the model failed").with_log(format!("the model failed: {detail}")));
    }
    Ok(answer)
}

/// A streamed event's data as JSON; anything else is `llm_unavailable`.
pub(crate) fn event_json(data: &str) -> Result<Json> {
    serde_json::from_str(data).map_err(|_| {
        unavailable("the model streamed an event that is not JSON")
            .with_log(format!("the model streamed an event that is not JSON: {}", excerpt(data, 200)))
    })
}

/// A request body as JSON text; a value serde cannot write is an internal error.
pub(crate) fn request_body(body: &impl Serialize) -> Result<String> {
    serde_json::to_string(body).map_err(|e| Error::internal(format!("serializing the model request: {e}")))
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

/// Usage as OpenAI-compatible servers report it (OpenAI's own API, and Workers AI with the
/// same field names), read leniently.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct CompatUsage {
    #[serde(deserialize_with = "lenient")]
    prompt_tokens: i64,
    #[serde(deserialize_with = "lenient")]
    completion_tokens: i64,
    #[serde(deserialize_with = "lenient")]
    prompt_tokens_details: PromptDetails,
}

/// `usage.prompt_tokens_details`: the prompt tokens read from the provider's cache.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct PromptDetails {
    #[serde(deserialize_with = "lenient")]
    cached_tokens: i64,
}

impl From<CompatUsage> for Usage {
    fn from(u: CompatUsage) -> Usage {
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cached_input_tokens: u.prompt_tokens_details.cached_tokens,
        }
    }
}
