//! What a handler is given: one request, matched to its route, with the agent as that request
//! sees it (its token's reach included), the decoded path parameters and the query parameters
//! its route declares. A handler is one of two shapes ([`Handler`]), so the route table can
//! hold them: one that answers at once, one that waits (a boxed future).

use session_agent_core::blobs::BoxFuture;
use session_agent_core::env::Env;
use session_agent_core::error::Result;
use session_agent_core::session::Session;

use super::http::{Query, Request, Response};

/// What a handler answers: a future of the response (boxed, so that every handler has one type).
pub type Answer<'c> = BoxFuture<'c, Result<Response>>;

/// A route's handler for one method.
#[derive(Clone, Copy)]
pub enum Handler {
    /// It answers at once.
    Now(fn(&Call<'_>) -> Result<Response>),
    /// It waits on something (the object store, the model) before it answers.
    Later(for<'c> fn(&'c Call<'c>) -> Answer<'c>),
}

impl Handler {
    /// Runs it for `call`.
    pub async fn run(self, call: &Call<'_>) -> Result<Response> {
        match self {
            Handler::Now(f) => f(call),
            Handler::Later(f) => f(call).await,
        }
    }
}

/// The decoded and checked path parameters of a request (absent ones are empty).
#[derive(Clone, Debug, Default)]
pub struct Params {
    pub sid: String,
    pub mid: String,
    pub label: String,
    pub name: String,
    pub cid: String,
    pub memory: String,
    pub key: String,
}

/// One request on its way to its handler.
pub struct Call<'c> {
    pub env: &'c Env<'c>,
    pub req: &'c Request,
    pub params: Params,
    pub query: Query,
}

impl<'c> Call<'c> {
    /// The session the path names (`{sid}`, or the one a route's row names itself).
    pub fn session(&'c self) -> Session<'c> {
        Session::new(self.env, &self.params.sid)
    }
}
