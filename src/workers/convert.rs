//! Conversions between `worker` requests/responses and the runtime-independent
//! [`crate::api::http`] types, with the body size limit applied while reading.

use worker::{Headers, Request, Response};

use crate::api::http::{self, MAX_BODY_BYTES};
use crate::core::error::Error;

/// `Content-Length` over the limit, read before the body.
pub fn declared_too_large(req: &Request) -> bool {
    req.headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
}

/// Reads a worker request into an API request. A body over the limit is `too_large`.
pub async fn read(mut req: Request) -> Result<http::Request, Error> {
    if declared_too_large(&req) {
        return Err(Error::too_large(format!("request body is over {MAX_BODY_BYTES} bytes")));
    }
    let url = req.url().map_err(|e| Error::invalid(format!("bad url: {e}")))?;
    let body = match req.method() {
        worker::Method::Get | worker::Method::Head => Vec::new(),
        _ => req.bytes().await.map_err(|e| Error::invalid(format!("reading the body: {e}")))?,
    };
    if body.len() > MAX_BODY_BYTES {
        return Err(Error::too_large(format!("request body is over {MAX_BODY_BYTES} bytes")));
    }
    let headers = req.headers().entries().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
    Ok(http::Request {
        method: req.method().to_string(),
        path: url.path().to_owned(),
        query: url.query().unwrap_or_default().to_owned(),
        headers,
        body,
    })
}

/// Turns an API response into a worker response.
pub fn write(r: http::Response) -> worker::Result<Response> {
    let headers = Headers::new();
    for (k, v) in &r.headers {
        headers.set(k, v)?;
    }
    let resp = if r.body.is_empty() { Response::empty()? } else { Response::from_bytes(r.body)? };
    Ok(resp.with_status(r.status).with_headers(headers))
}

/// A JSON error response.
pub fn error(e: &Error) -> worker::Result<Response> {
    write(http::Response::error(e))
}
