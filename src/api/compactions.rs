//! Compaction overlay routes: `GET/POST /sessions/{sid}/compactions`.

use serde_json::json;

use super::http::{req_str, Request, Response};
use super::Ctx;
use crate::core::compaction;
use crate::core::error::Result;
use crate::core::sessions;
use crate::core::sql::atomically;

/// `GET /sessions/{sid}/compactions`: oldest first.
pub fn list(ctx: &Ctx, sid: &str) -> Result<Response> {
    Ok(Response::json(200, &json!({ "compactions": compaction::list(ctx.sql, sid)? })))
}

/// `POST /sessions/{sid}/compactions` `{summary, fromMessageId, toMessageId}` → 201.
pub fn add(ctx: &Ctx, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let summary = req_str(&body, "summary")?;
    let from = req_str(&body, "fromMessageId")?;
    let to = req_str(&body, "toMessageId")?;
    let c = atomically(ctx.sql, || {
        let c = compaction::add(ctx.sql, sid, &summary, &from, &to, &ctx.now)?;
        sessions::touch(ctx.sql, sid, &ctx.now)?;
        Ok(c)
    })?;
    Ok(Response::json(201, &c))
}
