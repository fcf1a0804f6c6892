//! How requests reach a model: the [`Transport`] trait (Workers `fetch` and the `AI` binding in
//! the DO, a script in tests), the [`Call`] a provider builds for it (an HTTP request or the
//! binding's input), the [`Returned`] that comes back, and the [`Endpoint`] settings a call is
//! built from (with [`ToolUse`], whether tools are offered).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;

use futures::future::{select, Either};
use serde_json::Value as Json;

use super::model::Delivery;
use crate::blobs::BoxFuture;
use crate::error::{Error, ErrorKind, Result};

/// Default time allowed for one LLM call.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// Most bytes of an answer [`Transport::send`] reads: a larger one is an `Err` (a whole chat
/// answer, a batch of embeddings and an MCP server's `initialize` answer are far smaller; the
/// Durable Object's memory is not left to the peer's goodwill).
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// An outgoing HTTP request.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub timeout_ms: u64,
}

impl HttpRequest {
    /// A request with a JSON `body` to `url`: `content-type: application/json` and, when the
    /// answer is [`Delivery::Streamed`], `accept: text/event-stream`. A provider adds its own
    /// headers (its key, its version) after these.
    pub(crate) fn json(url: String, body: String, delivery: Delivery, timeout_ms: u64) -> HttpRequest {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if delivery == Delivery::Streamed {
            headers.push(("accept".into(), "text/event-stream".into()));
        }
        HttpRequest { url, headers, body, timeout_ms }
    }
}

/// What came back: status, headers (names in lower case; the MCP client reads
/// `mcp-session-id`, no provider reads any) and body text.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    /// The value of header `name` (any case), if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// How requests reach a model. `Err` from either method is a transport failure (network,
/// timeout, missing binding), reported as `llm_unavailable`.
pub trait Transport {
    /// Sends `req` and reads its whole answer within `req.timeout_ms`, at most
    /// [`MAX_ANSWER_BYTES`] of it (more is an `Err`).
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
    /// Runs a Workers AI model through the `AI` binding with `input` that asks for a stream
    /// (`stream: true`), and hands the answer's server-sent events to `on_chunk` piece by piece
    /// as they arrive; an answer that comes back whole instead is handed over as its JSON text.
    /// An `Err` from `on_chunk` stops reading and is returned. The default runs
    /// [`Transport::workers_ai`] and hands its JSON over as one piece.
    fn workers_ai_stream<'a>(
        &'a self,
        model: &'a str,
        input: Json,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { on_chunk(&self.workers_ai(model, input).await?.to_string()) })
    }
    /// Resolves after `ms` milliseconds: what bounds a call as a whole (a re-ranking call,
    /// `super::rerank`, answer read included). The default never resolves: a transport without
    /// a clock bounds its calls by their own `timeout_ms` only.
    fn sleep(&self, _ms: u64) -> BoxFuture<'_, ()> {
        Box::pin(futures::future::pending())
    }
}

/// One request to a model as a provider builds it: the [`Transport`] method that carries it
/// follows from the variant, so the client sends any provider's calls without knowing which
/// provider built them.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// An HTTP request ([`Transport::send`], or [`Transport::send_stream`] for a streamed
    /// answer).
    Http(HttpRequest),
    /// A model run through the `AI` binding with this input ([`Transport::workers_ai`], or
    /// [`Transport::workers_ai_stream`] for a streamed answer): the answer, or a stream's first
    /// piece, must come within `timeout_ms`.
    Binding { model: String, input: Json, timeout_ms: u64 },
}

/// Runs `call` (one through the `AI` binding) until it ends, unless nothing has `started` within
/// `timeout_ms`: then it is dropped and `llm_unavailable`. A stream sets `started` on its first
/// piece and then runs as long as it sends, as an HTTP stream is bounded until its answer starts
/// (`fetch` in the Workers adapter bounds those; the binding has no timeout of its own).
pub(crate) async fn within<T>(
    t: &dyn Transport,
    timeout_ms: u64,
    started: &Cell<bool>,
    call: Pin<&mut dyn Future<Output = Result<T>>>,
) -> Result<T> {
    let watch = std::pin::pin!(async {
        t.sleep(timeout_ms).await;
        if started.get() {
            std::future::pending::<()>().await;
        }
    });
    match select(call, watch).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => {
            Err(Error::new(ErrorKind::LlmUnavailable, format!("the model did not answer within {timeout_ms} ms")))
        }
    }
}

/// The answer to a [`Call`], as it came back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Returned<'a> {
    /// The body of an HTTP answer (its status already checked).
    Body(&'a str),
    /// What the `AI` binding returned.
    Binding(&'a Json),
}

/// Where a provider's calls go and who they go as: the settings every provider reads, from
/// `LLM_*` for chat and from `EMBEDDINGS_*` for embeddings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Endpoint<'a> {
    /// The endpoint root, e.g. `https://api.openai.com/v1` (empty for the `AI` binding).
    pub(crate) base_url: &'a str,
    pub model: &'a str,
    pub(crate) api_key: Option<&'a str>,
    pub(crate) timeout_ms: u64,
    /// Whether the model is offered tools (`LLM_TOOLS`, read by `workers-ai` only).
    pub(crate) tools: ToolUse,
}

/// Whether the model is offered tools (`LLM_TOOLS`; read by `workers-ai`, whose models differ:
/// the other providers always offer them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolUse {
    /// `auto` (the default): tools for the models documented as calling functions
    /// (`workers_ai::FUNCTION_CALLING_MODELS`).
    #[default]
    Auto,
    /// `on`: tools whatever the model.
    On,
    /// `off`: text only (no tools; earlier tool results as user text).
    Off,
}

impl ToolUse {
    /// `auto`, `on` or `off`; anything else is `None`.
    pub(crate) fn named(name: &str) -> Option<ToolUse> {
        match name {
            "auto" => Some(ToolUse::Auto),
            "on" => Some(ToolUse::On),
            "off" => Some(ToolUse::Off),
            _ => None,
        }
    }
}
