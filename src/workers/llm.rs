//! The core's LLM [`Transport`] in Workers: `fetch` with a timeout for HTTP providers, and the
//! `AI` binding for Workers AI.

use std::time::Duration;

use futures::future::{select, Either};
use serde::Serialize;
use serde_json::Value as Json;
use worker::{AbortController, Ai, Delay, Fetch, Headers, Method, RequestInit};

use crate::core::blobs::BoxFuture;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::llm::{HttpRequest, HttpResponse, Transport};

/// The binding Workers AI is reached through.
pub const AI_BINDING: &str = "AI";

/// `fetch` for HTTP providers; the `AI` binding if the Worker has one.
pub struct WorkersTransport {
    pub ai: Option<Ai>,
}

fn unavailable(message: String) -> Error {
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

impl Transport for WorkersTransport {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        Box::pin(async move {
            let headers = Headers::new();
            for (k, v) in &req.headers {
                headers.set(k, v).map_err(|e| Error::internal(format!("header {k}: {e}")))?;
            }
            let mut init = RequestInit::new();
            init.with_method(Method::Post).with_headers(headers).with_body(Some(req.body.clone().into()));
            let request = worker::Request::new_with_init(&req.url, &init)
                .map_err(|e| unavailable(format!("bad LLM_BASE_URL {:?}: {e}", req.url)))?;
            let controller = AbortController::default();
            let signal = controller.signal();
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
                Either::Left((Err(e), _)) => Err(unavailable(format!("calling {}: {e}", req.url))),
                Either::Right(_) => {
                    controller.abort();
                    Err(unavailable(format!("no answer from {} within {} ms", req.url, req.timeout_ms)))
                }
            }
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
            ai.run::<_, Json>(model, typed).await.map_err(|e| unavailable(format!("Workers AI {model}: {e}")))
        })
    }
}
