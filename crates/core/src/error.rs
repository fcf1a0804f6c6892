//! The one error type of the core, carrying the API error code it maps to.
//!
//! # What it keeps
//!
//! The invariant `docs/ARCHITECTURE.md` numbers for it, whole (a test cites it with a comment
//! `// invariant 37`):
//!
//! 37. **An error speaks the API's terms, never the storage's or a provider's.** The SQL backends
//!     make every failure `Error::storage` (message "the agent's storage failed", the SQL text in
//!     `Error::log`); an LLM provider's words (its error message, an excerpt of its body, a URL) go to
//!     `log` too. `api::http::Response::error` puts `log` into the answer's warnings, which the Workers
//!     layer logs; no answer, frame or event carries it. The native suite (`tests/it/support.rs`:
//!     `assert_speaks_no_storage`, every request of every test), the end-to-end harness (every error
//!     answer and `error` frame) and the fuzzer (`errors_name_no_storage`) check every error they
//!     provoke for SQL phrases and the underscore names of `migrations/`.

use std::fmt;

/// The error codes of the HTTP contract (`docs/openapi.yaml`), plus `Internal` for bugs and
/// storage failures (the only kind that becomes a 5xx on bad luck rather than bad input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    TooLarge,
    OverBudget,
    RateLimited,
    NotConfigured,
    LlmUnavailable,
    /// The agent's memory space could not be reached (a request that needs it: a shared block).
    SpaceUnavailable,
    Internal,
}

impl ErrorKind {
    /// The HTTP status of this kind.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::InvalidRequest => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::MethodNotAllowed => 405,
            ErrorKind::Conflict => 409,
            ErrorKind::TooLarge => 413,
            ErrorKind::OverBudget => 422,
            ErrorKind::RateLimited => 429,
            ErrorKind::NotConfigured | ErrorKind::LlmUnavailable | ErrorKind::SpaceUnavailable => 503,
            ErrorKind::Internal => 500,
        }
    }

    /// The `error.code` string of the JSON error body.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::Conflict => "conflict",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::OverBudget => "over_budget",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::NotConfigured => "not_configured",
            ErrorKind::LlmUnavailable => "llm_unavailable",
            ErrorKind::SpaceUnavailable => "space_unavailable",
            ErrorKind::Internal => "internal",
        }
    }

    /// The kind whose [`ErrorKind::code`] is `code` (a more specific code is not one).
    pub fn from_code(code: &str) -> Option<ErrorKind> {
        use ErrorKind::*;
        [
            InvalidRequest,
            Unauthorized,
            Forbidden,
            NotFound,
            MethodNotAllowed,
            Conflict,
            TooLarge,
            OverBudget,
            RateLimited,
            NotConfigured,
            LlmUnavailable,
            SpaceUnavailable,
            Internal,
        ]
        .into_iter()
        .find(|k| k.code() == code)
    }
}

/// An error with its kind and a message meant for the API caller.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// A more specific `error.code` than the kind's (e.g. `not_a_prefix` for a 409).
    pub(crate) detail: Option<&'static str>,
    /// Seconds after which a `429` may be retried (its `Retry-After`).
    pub retry_after: Option<i64>,
    /// What the operator's log gets beside the message, never the caller: the words of a
    /// storage or provider failure (SQL, table and column names, an upstream body).
    pub log: Option<String>,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), detail: None, retry_after: None, log: None }
    }
    /// The same error with `text` for the operator's log (never sent to the caller).
    pub fn with_log(mut self, text: impl Into<String>) -> Self {
        self.log = Some(text.into());
        self
    }
    /// A failure of the agent's storage: the caller learns that much; the storage's own words
    /// (`text`: SQL, table and column names) go to the log only.
    pub fn storage(text: impl Into<String>) -> Self {
        Error::internal("the agent's storage failed").with_log(text)
    }
    /// The same error with the seconds to wait before a retry (`Retry-After`).
    pub fn with_retry(mut self, seconds: i64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
    /// The same error with a specific `error.code` (the HTTP status stays the kind's).
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.detail = Some(code);
        self
    }
    /// The `error.code` of the JSON body: the specific one, else the kind's.
    pub fn code(&self) -> &'static str {
        self.detail.unwrap_or(self.kind.code())
    }
    /// What a client is shown of it: `{code, message}` (never the operator's `log`).
    pub fn shown(&self) -> serde_json::Value {
        serde_json::json!({"code": self.code(), "message": self.message})
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidRequest, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::NotFound, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::TooLarge, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Conflict, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Forbidden, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unauthorized, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message)
    }
}

impl std::error::Error for Error {}

/// Result with the core's error.
pub type Result<T> = std::result::Result<T, Error>;

/// A value with the warnings of what could not be read back for it (an R2 object that is
/// missing, say): the answer is still given, the warnings go with it.
#[derive(Debug, PartialEq)]
pub struct Warned<T> {
    pub value: T,
    pub warnings: Vec<String>,
}

impl<T> Warned<T> {
    /// A value without warnings.
    pub(crate) fn clean(value: T) -> Self {
        Warned { value, warnings: Vec::new() }
    }
}
