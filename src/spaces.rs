//! The core's [`Spaces`] in Workers: a request to a memory space's Durable Object (the
//! `MEMORY_SPACE` namespace, `idFromName(space)`), with a timeout (`SPACE_TIMEOUT_MS`, 5 s by
//! default). No claims go with it: a binding is a capability, and the space's `/link/…` routes
//! are the admin's, which the front door never forwards. What each [`Operation`] is as a request
//! is the api crate's (`api::spaces::request`).

use std::time::Duration;

use futures::future::{select, Either};
use serde_json::Value as Json;
use worker::{Delay, ObjectNamespace};

use crate::convert;

use session_agent_api as api;
use session_agent_core::blobs::BoxFuture;
use session_agent_core::error::Result;
use session_agent_core::space::{unavailable, Operation, SpaceReply, Spaces};

/// The binding memory spaces are reached through.
pub(crate) const SPACE_BINDING: &str = "MEMORY_SPACE";
/// How long a request to a space may take by default (ms).
const DEFAULT_TIMEOUT_MS: u64 = 5_000;

/// The `MEMORY_SPACE` namespace, if the Worker has it.
pub(crate) struct WorkersSpaces {
    pub(crate) namespace: Option<ObjectNamespace>,
    pub(crate) timeout_ms: u64,
}

impl WorkersSpaces {
    pub(crate) fn new(namespace: Option<ObjectNamespace>, timeout: Option<String>) -> Self {
        let timeout_ms = timeout.and_then(|t| t.trim().parse().ok()).filter(|t| *t > 0).unwrap_or(DEFAULT_TIMEOUT_MS);
        WorkersSpaces { namespace, timeout_ms }
    }

    async fn call(&self, space: &str, call: &api::Request) -> worker::Result<SpaceReply> {
        let Some(ns) = &self.namespace else {
            return Err(worker::Error::RustError("the Worker has no MEMORY_SPACE binding".into()));
        };
        let stub = ns.id_from_name(space)?.get_stub()?;
        let body = (!call.body.is_empty()).then(|| String::from_utf8_lossy(&call.body).into_owned().into());
        let query = if call.query.is_empty() { String::new() } else { format!("?{}", call.query) };
        let headers = worker::Headers::new();
        headers.set("content-type", "application/json")?;
        let req = convert::request(
            &format!("https://space{}{query}", call.path),
            call.method.as_str(),
            Some(&headers),
            body,
        )?;
        let mut resp = stub.fetch_with_request(req).await?;
        let status = resp.status_code();
        let text = resp.text().await?;
        let body = if text.is_empty() { Json::Null } else { serde_json::from_str(&text).unwrap_or(Json::Null) };
        Ok(SpaceReply { status, body })
    }
}

impl Spaces for WorkersSpaces {
    fn send<'a>(&'a self, space: &'a str, op: &'a Operation) -> BoxFuture<'a, Result<SpaceReply>> {
        Box::pin(async move {
            let call = api::spaces::request(op);
            let timeout = Delay::from(Duration::from_millis(self.timeout_ms));
            let work = self.call(space, &call);
            futures::pin_mut!(work);
            match select(work, timeout).await {
                Either::Left((Ok(answer), _)) => Ok(answer),
                Either::Left((Err(e), _)) => Err(unavailable(format!("the memory space {space} could not be reached"))
                    .with_log(format!("{} {}: {e}", call.method, call.path))),
                Either::Right(_) => {
                    Err(unavailable(format!("the memory space {space} did not answer within {} ms", self.timeout_ms)))
                }
            }
        })
    }
}
