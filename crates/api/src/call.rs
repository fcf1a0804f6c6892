//! What a handler is given: one request, matched to its route, with the agent as that request
//! sees it (its token's reach included), the decoded path parameters and the query parameters
//! its route declares. A handler is one of two shapes (`Handler`), so the route table can
//! hold them: one that answers at once, one that waits (a boxed future).

use session_agent_core::blobs::BoxFuture;
use session_agent_core::env::Env;
use session_agent_core::error::Result;
use session_agent_core::session::Session;

use super::http::{Query, Request, Response};

/// What a handler answers: a future of the response (boxed, so that every handler has one type).
pub(crate) type Pending<'c> = BoxFuture<'c, Result<Response>>;

/// A route's handler for one method.
#[derive(Clone, Copy)]
pub(crate) enum Handler {
    /// It answers at once.
    Now(fn(&Call<'_>) -> Result<Response>),
    /// It waits on something (the object store, the model) before it answers.
    Later(for<'c> fn(&'c Call<'c>) -> Pending<'c>),
}

impl Handler {
    /// Runs it for `call`.
    pub(crate) async fn run(self, call: &Call<'_>) -> Result<Response> {
        match self {
            Handler::Now(f) => f(call),
            Handler::Later(f) => f(call).await,
        }
    }
}

/// The decoded and checked path parameters of a request (absent ones are empty).
#[derive(Clone, Debug, Default)]
pub(crate) struct Params {
    pub(crate) sid: String,
    pub(crate) mid: String,
    pub(crate) label: String,
    pub(crate) name: String,
    pub(crate) cid: String,
    pub(crate) memory: String,
    pub(crate) key: String,
    /// The resume request's `{chatId}` (decoded, unchecked: the client may make a new one).
    pub(crate) chat: String,
    pub(crate) schedule: String,
}

/// One request on its way to its handler.
pub(crate) struct Call<'c> {
    pub(crate) env: &'c Env<'c>,
    pub(crate) req: &'c Request,
    pub(crate) params: Params,
    pub(crate) query: Query,
}

impl<'c> Call<'c> {
    /// The session the path names (`{sid}`, or the one a route's row names itself).
    pub(crate) fn session(&'c self) -> Session<'c> {
        Session::new(self.env, &self.params.sid)
    }
}
