//! How requests reach a model: the [`Transport`] trait (Workers `fetch` and the `AI` binding in
//! the DO, a script in tests) and the HTTP request and answer it carries.

use serde_json::Value as Json;

use crate::blobs::BoxFuture;
use crate::error::Result;

/// Default time allowed for one LLM call.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

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
