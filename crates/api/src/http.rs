//! Plain HTTP values for the Durable Object's API, and the helpers every route uses: JSON
//! bodies and answers, query strings, path parameters and error bodies.

use serde::Serialize;
use serde_json::{Map, Value as Json};

use session_agent_core::after::After;
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::store::message::check_id;

/// Largest request body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// A request as the Durable Object sees it (the front door has stripped `/agents/{agent}`).
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub method: Method,
    /// The raw (still percent-encoded) path, e.g. `/sessions/s1/messages/a%2Fb`.
    pub path: String,
    /// The raw query string without `?`.
    pub query: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The stop signal of the agent turn this request runs (a WebSocket `cancel` frame sets
    /// it; the Durable Object sets a streamed turn's when its client goes away).
    pub stop: Option<session_agent_core::live::stop::Stop>,
}

impl Request {
    /// A request with no body.
    pub fn new(method: Method, path_and_query: &str) -> Self {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        Request { method, path: path.to_owned(), query: query.to_owned(), ..Request::default() }
    }

    /// The same request with a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// The value of header `name` (lower case), if sent.
    pub(crate) fn header_value(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Whether the client asked for server-sent events (`Accept: text/event-stream`).
    pub(crate) fn wants_event_stream(&self) -> bool {
        self.header_value("accept").is_some_and(|a| a.contains("text/event-stream"))
    }

    /// The same request with a JSON body.
    pub fn json(mut self, body: &Json) -> Self {
        self.body = body.to_string().into_bytes();
        self
    }

    /// The body as a JSON object; an empty body is an empty object.
    pub fn json_object(&self) -> Result<Map<String, Json>> {
        if self.body.len() > MAX_BODY_BYTES {
            return Err(Error::too_large(format!("request body is over {MAX_BODY_BYTES} bytes")));
        }
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        match serde_json::from_slice(&self.body) {
            Ok(Json::Object(map)) => Ok(map),
            Ok(_) => Err(Error::invalid("request body must be a JSON object")),
            Err(e) => Err(Error::invalid(format!("request body is not valid JSON: {e}"))),
        }
    }
}

/// An answer: status, headers and body bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Warnings for the operator's log (the Workers layer prints them); not sent to the client.
    pub warnings: Vec<String>,
    /// Work to run once the answer is sent (the sweep, compaction, memory work): see [`super::after()`].
    pub after: Vec<After>,
}

impl Response {
    /// A JSON answer whose text is already made (it must be JSON).
    pub(crate) fn json_text(status: u16, body: String) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "application/json; charset=utf-8".into())],
            body: body.into_bytes(),
            warnings: Vec::new(),
            after: Vec::new(),
        }
    }

    /// A JSON answer.
    pub(crate) fn json<T: Serialize + ?Sized>(status: u16, value: &T) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response {
                status,
                headers: vec![("content-type".into(), "application/json; charset=utf-8".into())],
                body,
                warnings: Vec::new(),
                after: Vec::new(),
            },
            Err(e) => Response::error(&Error::internal(format!("serializing the answer: {e}"))),
        }
    }

    /// A plain-text answer.
    pub(crate) fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "text/plain;charset=UTF-8".into())],
            body: body.as_bytes().to_vec(),
            warnings: Vec::new(),
            after: Vec::new(),
        }
    }

    /// `204 No Content`.
    pub(crate) fn no_content() -> Response {
        Response { status: 204, headers: Vec::new(), body: Vec::new(), warnings: Vec::new(), after: Vec::new() }
    }

    /// The JSON error body `{"error": {"code", "message"}}` with the kind's status.
    pub fn error(e: &Error) -> Response {
        let body = serde_json::json!({"error": e.shown()});
        let mut headers = vec![("content-type".into(), "application/json; charset=utf-8".into())];
        if let Some(s) = e.retry_after {
            headers.push(("retry-after".into(), s.to_string()));
        }
        if e.kind == ErrorKind::Unauthorized {
            headers.push(("www-authenticate".into(), "Bearer".into()));
        }
        Response {
            status: e.kind.status(),
            headers,
            body: body.to_string().into_bytes(),
            // What the failure said in the storage's or the provider's words: the log's only.
            warnings: e.log.iter().cloned().collect(),
            after: Vec::new(),
        }
    }

    /// The same answer with a warning for the log.
    pub(crate) fn warn(mut self, warning: impl Into<String>) -> Response {
        self.warnings.push(warning.into());
        self
    }

    /// The body parsed as JSON (for tests and callers that want a value).
    pub fn body_json(&self) -> Json {
        serde_json::from_slice(&self.body).unwrap_or(Json::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Decodes an `application/x-www-form-urlencoded` query (`+` is a space, `%XX` a byte) into its
/// pairs, in order. Unlike a lossy decoder it refuses what is not UTF-8 after decoding, as path
/// segments are refused.
pub(crate) fn parse_query(query: &str) -> Result<Vec<(String, String)>> {
    let decode = |s: &str| {
        let spaced = s.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8()
            .map(|d| d.into_owned())
            .map_err(|_| Error::invalid("the query string is not valid UTF-8 after percent-decoding"))
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

pub(crate) use session_agent_core::ids::check_name;

/// Percent-decodes one path segment as UTF-8.
pub(crate) fn decode_segment(what: &str, raw: &str) -> Result<String> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| Error::invalid(format!("{what} is not valid UTF-8 after percent-decoding")))
}

/// A session id from the path, decoded and checked.
pub(crate) fn session_param(raw: &str) -> Result<String> {
    let sid = decode_segment("session id", raw)?;
    check_name("session id", &sid)?;
    Ok(sid)
}

/// A message id from the path, decoded and checked.
pub(crate) fn message_param(raw: &str) -> Result<String> {
    let mid = decode_segment("message id", raw)?;
    check_id("message id", &mid)?;
    Ok(mid)
}

/// An optional string field of a JSON body (`null` counts as absent).
pub(crate) fn opt_str(body: &Map<String, Json>, key: &str) -> Result<Option<String>> {
    match body.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{key} must be a string"))),
    }
}

/// A required string field of a JSON body.
pub(crate) fn req_str(body: &Map<String, Json>, key: &str) -> Result<String> {
    opt_str(body, key)?.ok_or_else(|| Error::invalid(format!("{key} is required")))
}

/// The query parameters of one request, as the route that answers it declares them: a handler
/// reads only the names its route's row lists (in `routes`), which is also what
/// `docs/openapi.yaml` says it takes (a test compares the two). Reading a name the row does not
/// list is a bug, caught by the native tests (a debug assertion).
#[derive(Clone, Debug, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
    declared: &'static [&'static str],
}

impl Query {
    /// The decoded pairs of `raw` (see [`parse_query`]) for a route that reads `declared`.
    pub(crate) fn parse(raw: &str, declared: &'static [&'static str]) -> Result<Query> {
        Ok(Query { pairs: parse_query(raw)?, declared })
    }

    fn declared(&self, name: &str) {
        debug_assert!(
            self.declared.contains(&name),
            "a handler reads query parameter {name:?}, which its route does not declare"
        );
    }

    /// The value of `name` (the last one when repeated).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.declared(name);
        self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order (a parameter that may be repeated).
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.declared(name);
        self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone()).collect()
    }

    /// The parameters of a family: every name that starts with `prefix` (`metadata.`), without
    /// it, with its value, in order. The route declares the family as `<prefix><key>`.
    pub(crate) fn family(&self, prefix: &str) -> Vec<(String, String)> {
        debug_assert!(
            self.declared.iter().any(|d| d.strip_suffix("<key>") == Some(prefix)),
            "a handler reads the query parameters {prefix}<key>, which its route does not declare"
        );
        self.pairs.iter().filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_owned(), v.clone()))).collect()
    }

    /// A required value.
    pub(crate) fn require(&self, name: &str) -> Result<&str> {
        self.get(name).ok_or_else(|| Error::invalid(format!("{name} is required")))
    }

    /// An optional integer within `min..=max`.
    pub(crate) fn int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>> {
        let Some(v) = self.get(name) else { return Ok(None) };
        match v.trim().parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(Error::invalid(format!("{name} must be an integer from {min} to {max}"))),
        }
    }

    /// A boolean flag: `1`/`true` (or the bare name) on, `0`/`false`/absent off.
    pub(crate) fn flag(&self, name: &str) -> Result<bool> {
        match self.get(name) {
            None | Some("0") | Some("false") => Ok(false),
            Some("1") | Some("true") | Some("") => Ok(true),
            Some(_) => Err(Error::invalid(format!("{name} must be 1 or 0"))),
        }
    }

    /// A message id (`leaf`, or `before`: a page's cursor), checked as ids are; empty is absent.
    pub(crate) fn id(&self, name: &str) -> Result<Option<String>> {
        match self.get(name).filter(|v| !v.is_empty()) {
            Some(id) => {
                check_id(name, id)?;
                Ok(Some(id.to_owned()))
            }
            None => Ok(None),
        }
    }
}

/// A request's method. The route table lists `GET`, `POST`, `PUT`, `PATCH` and `DELETE`; any
/// other method is `405` on every path (`HEAD` and `OPTIONS` are named for the front door,
/// which answers them; the rest are [`Method::Other`], taken as sent and never allowed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
    Options,
    /// A method the API does not know.
    Other,
}

impl Method {
    /// The method called `name` as sent (upper case; any other name is [`Method::Other`]).
    pub fn parse(name: &str) -> Method {
        [Method::Get, Method::Head, Method::Post, Method::Put, Method::Patch, Method::Delete, Method::Options]
            .into_iter()
            .find(|m| m.as_str() == name)
            .unwrap_or(Method::Other)
    }

    /// Its name on the wire (`OTHER` for one the API does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Other => "OTHER",
        }
    }

    /// Whether it only reads (`GET`, `HEAD`): what a read-only token may send.
    pub fn reads(self) -> bool {
        matches!(self, Method::Get | Method::Head)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `405` naming the allowed methods.
pub(crate) fn method_not_allowed(allowed: &[Method]) -> Response {
    let names: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
    let mut r =
        Response::error(&Error::new(ErrorKind::MethodNotAllowed, format!("allowed methods: {}", names.join(", "))));
    r.headers.push(("allow".into(), names.join(", ")));
    r
}
