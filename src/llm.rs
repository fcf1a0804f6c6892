//! The core's LLM [`Transport`] in Workers: `fetch` with a timeout for HTTP providers, and the
//! `AI` binding for Workers AI, its answers whole or streamed.

use std::time::Duration;

use futures::future::{select, Either};
use futures::StreamExt;
use serde_json::Value as Json;
use wasm_bindgen::JsCast;
use worker::js_sys::{Promise, JSON};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys::ReadableStream;
use worker::{AbortController, AbortSignal, Ai, ByteStream, Delay, Fetch, Headers};

use crate::convert;

use session_agent_core::blobs::BoxFuture;
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::llm::{HttpRequest, HttpResponse, Transport, MAX_ANSWER_BYTES};

/// The binding Workers AI is reached through.
pub(crate) const AI_BINDING: &str = "AI";

/// `fetch` for HTTP providers; the `AI` binding if the Worker has one.
pub(crate) struct WorkersTransport {
    pub(crate) ai: Option<Ai>,
}

fn unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::LlmUnavailable, message)
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
    convert::request(&req.url, "POST", Some(&headers), Some(req.body.as_str().into())).map_err(|e| {
        unavailable("LLM_BASE_URL is not a usable URL").with_log(format!("bad LLM_BASE_URL {:?}: {e}", req.url))
    })
}

impl Transport for WorkersTransport {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        Box::pin(async move {
            let request = build(&req)?;
            let (mut controller, signal) = AbortOnDrop::new();
            let fetch = Fetch::Request(request);
            let url = req.url.as_str();
            let call = Box::pin(async move {
                let mut resp = fetch.send_with_signal(&signal).await.map_err(|e| unreachable(url, e))?;
                let status = resp.status_code();
                let headers = resp.headers().entries().collect();
                // Read piece by piece up to the trait's cap (`text()` would take any size).
                let mut body = String::new();
                if let Ok(stream) = resp.stream() {
                    pump(stream, url, &mut |piece| {
                        if body.len() + piece.len() > MAX_ANSWER_BYTES {
                            return Err(unavailable(format!("the answer is over {MAX_ANSWER_BYTES} bytes"))
                                .with_log(format!("{url} answered over {MAX_ANSWER_BYTES} bytes")));
                        }
                        body.push_str(piece);
                        Ok(())
                    })
                    .await?;
                }
                Ok(HttpResponse { status, headers, body })
            });
            let timer = Delay::from(Duration::from_millis(req.timeout_ms));
            match select(call, timer).await {
                Either::Left((answer, _)) => answer,
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
            let body = resp.stream().map_err(|e| unreachable(&url, e))?;
            if let Err(e) = pump(body, &url, on_chunk).await {
                controller.abort();
                return Err(e);
            }
            Ok(status)
        })
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'_, ()> {
        Box::pin(Delay::from(Duration::from_millis(ms)))
    }

    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>> {
        Box::pin(async move {
            match run_binding(self.ai.as_ref(), model, &input).await? {
                Ran::Whole(answer) => Ok(answer),
                Ran::Stream(_) => Err(unavailable("the model streamed an answer asked for whole")),
            }
        })
    }

    fn workers_ai_stream<'a>(
        &'a self,
        model: &'a str,
        input: Json,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match run_binding(self.ai.as_ref(), model, &input).await? {
                Ran::Whole(answer) => on_chunk(&answer.to_string()),
                Ran::Stream(body) => pump(body, &format!("Workers AI {model}"), on_chunk).await,
            }
        })
    }
}

/// Hands the bytes of `body` to `on_chunk` as text as they arrive: the bytes of a character
/// split across chunks wait for the rest. An `Err` from `on_chunk` stops reading.
async fn pump(mut body: ByteStream, from: &str, on_chunk: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| unreachable(from, e))?;
        pending.extend_from_slice(&chunk);
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) => e.valid_up_to(),
        };
        if valid > 0 {
            let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
            pending.drain(..valid);
            on_chunk(&text)?;
        }
    }
    if !pending.is_empty() {
        on_chunk(&String::from_utf8_lossy(&pending))?;
    }
    Ok(())
}

/// What the binding's `run` gave back.
enum Ran {
    /// An object (a whole answer, or an embeddings model's vectors), as JSON.
    Whole(Json),
    /// The bytes of a streamed answer (`stream: true`): server-sent events.
    Stream(ByteStream),
}

/// Runs `model` with `input` through the binding's own `run`. Called directly rather than
/// through `worker::Ai::run`, which cannot hand back a stream (and `run_bytes` fails on an
/// object); the input and the answer cross as JSON text (`JSON.parse`, `JSON.stringify`), which
/// keeps objects as objects (serde's value types would cross as `Map`s) and costs nothing next
/// to the model's run.
async fn run_binding(ai: Option<&Ai>, model: &str, input: &Json) -> Result<Ran> {
    let ai = ai.ok_or_else(|| unavailable(format!("the {AI_BINDING} binding is missing")))?;
    let failed = |e: String| unavailable("the model failed").with_log(format!("Workers AI {model}: {e}"));
    let js_input = JSON::parse(&input.to_string()).map_err(|e| failed(format!("{e:?}")))?;
    let sys: &worker::worker_sys::Ai = ai.as_ref().unchecked_ref();
    let promise: Promise = sys.run(model, js_input);
    let out = JsFuture::from(promise).await.map_err(|e| failed(worker::Error::from(e).to_string()))?;
    if out.is_instance_of::<ReadableStream>() {
        return Ok(Ran::Stream(ByteStream::from(ReadableStream::unchecked_from_js(out))));
    }
    let text = JSON::stringify(&out).map_err(|e| failed(format!("{e:?}")))?;
    let text = text.as_string().unwrap_or_default();
    serde_json::from_str(&text).map(Ran::Whole).map_err(|e| failed(format!("an answer that is not JSON: {e}")))
}
