//! Conversions between `worker` requests/responses and the runtime-independent
//! [`session_agent_api::http`] types, with the body size limit applied while reading.

use worker::{Headers, Request, Response};

use session_agent_api::http::{self, MAX_BODY_BYTES};
use session_agent_core::error::Error;

/// `Content-Length` over the limit, read before the body.
pub(crate) fn declared_too_large(req: &Request) -> bool {
    req.headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
}

/// Reads and drops the body of a request answered without it, at most [`MAX_BODY_BYTES`] (the
/// rest, if any, is left: the client then gets the connection closed, as it deserves).
pub(crate) async fn drain(req: &mut Request) {
    use futures::StreamExt;
    if req.inner().body().is_none() {
        return;
    }
    let Ok(mut stream) = req.stream() else { return };
    let mut read = 0;
    while let Some(Ok(chunk)) = stream.next().await {
        read += chunk.len();
        if read > MAX_BODY_BYTES {
            break;
        }
    }
}

/// Reads a worker request into an API request. A body over the limit is `too_large`.
pub(crate) async fn read(req: &mut Request) -> Result<http::Request, Error> {
    if declared_too_large(req) {
        return Err(Error::too_large(format!("request body is over {MAX_BODY_BYTES} bytes")));
    }
    // The method as sent: `worker::Method` reads every method it does not know as GET.
    let method = req.inner().method();
    let url = req.inner().url();
    let (path, query) = split_url(&url);
    let body = match method.as_str() {
        "GET" | "HEAD" => Vec::new(),
        _ => req.bytes().await.map_err(|e| Error::invalid(format!("reading the body: {e}")))?,
    };
    if body.len() > MAX_BODY_BYTES {
        return Err(Error::too_large(format!("request body is over {MAX_BODY_BYTES} bytes")));
    }
    let headers = req.headers().entries().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
    Ok(http::Request {
        method: http::Method::parse(&method),
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body,
        stop: None,
    })
}

/// The path (still percent-encoded) and the query (without `?`) of an absolute URL, as sent.
pub(crate) fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    let rest = rest.find('/').map_or("/", |i| &rest[i..]);
    let rest = rest.split('#').next().unwrap_or_default();
    rest.split_once('?').unwrap_or((rest, ""))
}

/// Turns an API response into a worker response.
pub(crate) fn write(r: http::Response) -> worker::Result<Response> {
    let headers = Headers::new();
    for (k, v) in &r.headers {
        headers.set(k, v)?;
    }
    let resp = if r.body.is_empty() { Response::empty()? } else { Response::from_bytes(r.body)? };
    Ok(resp.with_status(r.status).with_headers(headers))
}

/// A JSON error response.
pub(crate) fn error(e: &Error) -> worker::Result<Response> {
    write(http::Response::error(e))
}

/// A request made in JavaScript from its parts: `method` to `url` with `headers` and `body`.
/// (`worker::Request::new_with_init` converts a whole `RequestInit`, Cloudflare's `cf` options
/// included, through `serde_wasm_bindgen`: 11 KB of the wasm for fields we never set.)
pub(crate) fn request(
    url: &str,
    method: &str,
    headers: Option<&Headers>,
    body: Option<worker::wasm_bindgen::JsValue>,
) -> worker::Result<Request> {
    let init = worker::web_sys::RequestInit::new();
    init.set_method(method);
    if let Some(h) = headers {
        init.set_headers(h.as_ref());
    }
    if let Some(b) = &body {
        init.set_body(b);
    }
    worker::web_sys::Request::new_with_str_and_init(url, &init).map(Request::from).map_err(|e| {
        worker::Error::JsError(e.as_string().unwrap_or_else(|| "invalid URL or options for Request".into()))
    })
}
