//! The core's LLM [`Transport`] in Workers: `fetch` with a timeout for HTTP providers, and the
//! `AI` binding for Workers AI.

use std::time::Duration;

use futures::future::{select, Either};
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value as Json;
use worker::{AbortController, AbortSignal, Ai, Delay, Fetch, Headers, Method, RequestInit};

use session_agent_core::blobs::BoxFuture;
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::llm::{HttpRequest, HttpResponse, Transport};

/// The binding Workers AI is reached through.
pub(crate) const AI_BINDING: &str = "AI";

/// `fetch` for HTTP providers; the `AI` binding if the Worker has one.
pub(crate) struct WorkersTransport {
    pub(crate) ai: Option<Ai>,
}

fn unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, message)
}

#[derive(Serialize)]
struct AiMessage {
    role: String,
    content: String,
}

#[derive(Serialize)]
struct AiInput {
    messages: Vec<AiMessage>,
    max_tokens: u64,
}

/// Aborts its fetch when dropped: a call whose caller stopped waiting (a stopped turn drops
/// the model call's future) closes its connection at once instead of reading on.
struct AbortOnDrop(Option<AbortController>);

impl AbortOnDrop {
    /// A new controller and the signal its fetch is sent with.
    fn new() -> (Self, AbortSignal) {
        let controller = AbortController::default();
        let signal = controller.signal();
        (AbortOnDrop(Some(controller)), signal)
    }

    fn abort(&mut self) {
        if let Some(c) = self.0.take() {
            c.abort();
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.abort();
    }
}

/// A call that failed on the way (connection, reading the body): the caller learns that much,
/// the log the endpoint and the runtime's words.
fn unreachable(url: &str, e: impl std::fmt::Display) -> Error {
    unavailable("the model could not be reached").with_log(format!("calling {url}: {e}"))
}

/// A call that got no answer in time.
fn too_slow(url: &str, timeout_ms: u64) -> Error {
    unavailable(format!("the model did not answer within {timeout_ms} ms"))
        .with_log(format!("no answer from {url} within {timeout_ms} ms"))
}

/// The `fetch` request for `req`.
fn build(req: &HttpRequest) -> Result<worker::Request> {
    let headers = Headers::new();
    for (k, v) in &req.headers {
        headers.set(k, v).map_err(|e| Error::internal(format!("header {k}: {e}")))?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(req.body.clone().into()));
    worker::Request::new_with_init(&req.url, &init).map_err(|e| {
        unavailable("LLM_BASE_URL is not a usable URL").with_log(format!("bad LLM_BASE_URL {:?}: {e}", req.url))
    })
}

impl Transport for WorkersTransport {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        Box::pin(async move {
            let request = build(&req)?;
            let (mut controller, signal) = AbortOnDrop::new();
            let fetch = Fetch::Request(request);
            let call = Box::pin(async move {
                let mut resp = fetch.send_with_signal(&signal).await?;
                let status = resp.status_code();
                let body = resp.text().await?;
                Ok::<_, worker::Error>(HttpResponse { status, body })
            });
            let timer = Delay::from(Duration::from_millis(req.timeout_ms));
            match select(call, timer).await {
                Either::Left((Ok(r), _)) => Ok(r),
                Either::Left((Err(e), _)) => Err(unreachable(&req.url, e)),
                Either::Right(_) => {
                    controller.abort();
                    Err(too_slow(&req.url, req.timeout_ms))
                }
            }
        })
    }

    fn send_stream<'a>(
        &'a self,
        req: HttpRequest,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<u16>> {
        Box::pin(async move {
            let request = build(&req)?;
            // A turn that is stopped drops this future: the guard then closes the connection.
            let (mut controller, signal) = AbortOnDrop::new();
            let url = req.url.clone();
            // The timeout covers the wait for the answer's headers; a stream then runs as long
            // as it keeps sending (the turn as a whole is bounded by the model's max_tokens).
            let started = Box::pin(async move { Fetch::Request(request).send_with_signal(&signal).await });
            let timer = Delay::from(Duration::from_millis(req.timeout_ms));
            let mut resp = match select(started, timer).await {
                Either::Left((Ok(r), _)) => r,
                Either::Left((Err(e), _)) => return Err(unreachable(&url, e)),
                Either::Right(_) => {
                    controller.abort();
                    return Err(too_slow(&url, req.timeout_ms));
                }
            };
            let status = resp.status_code();
            let mut body = resp.stream().map_err(|e| unreachable(&url, e))?;
            // Bytes of a character split across chunks wait for the rest.
            let mut pending: Vec<u8> = Vec::new();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| unreachable(&url, e))?;
                pending.extend_from_slice(&chunk);
                let valid = match std::str::from_utf8(&pending) {
                    Ok(_) => pending.len(),
                    Err(e) => e.valid_up_to(),
                };
                if valid > 0 {
                    let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
                    pending.drain(..valid);
                    if let Err(e) = on_chunk(&text) {
                        controller.abort();
                        return Err(e);
                    }
                }
            }
            if !pending.is_empty() {
                on_chunk(&String::from_utf8_lossy(&pending))?;
            }
            Ok(status)
        })
    }

    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>> {
        Box::pin(async move {
            let ai = self.ai.as_ref().ok_or_else(|| unavailable(format!("the {AI_BINDING} binding is missing")))?;
            let messages = input["messages"]
                .as_array()
                .map(|ms| {
                    ms.iter()
                        .map(|m| AiMessage {
                            role: m["role"].as_str().unwrap_or("user").to_owned(),
                            content: m["content"].as_str().unwrap_or_default().to_owned(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let typed = AiInput { messages, max_tokens: input["max_tokens"].as_u64().unwrap_or(4096) };
            ai.run::<_, Json>(model, typed)
                .await
                .map_err(|e| unavailable("the model failed").with_log(format!("Workers AI {model}: {e}")))
        })
    }
}
