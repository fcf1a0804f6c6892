//! Compaction overlay routes: `GET/POST /sessions/{sid}/compactions`, and the originals behind
//! one: `GET /sessions/{sid}/compactions/{cid}/messages`.

use serde_json::json;

use super::http::{int_param, req_str, Request, Response};
use super::Ctx;
use crate::core::compaction::expand::{self, DEFAULT_LIMIT, MAX_LIMIT};
use crate::core::error::Result;
use crate::core::sql::atomically;
use crate::core::store::overlay;
use crate::core::store::sessions;
use crate::core::store::spill;

/// `GET /sessions/{sid}/compactions`: oldest first.
pub fn list(ctx: &Ctx, sid: &str) -> Result<Response> {
    Ok(Response::json(200, &json!({ "compactions": overlay::list(ctx.sql, sid)? })))
}

/// `POST /sessions/{sid}/compactions` `{summary, fromMessageId, toMessageId}` → 201.
pub fn add(ctx: &Ctx, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let summary = req_str(&body, "summary")?;
    let from = req_str(&body, "fromMessageId")?;
    let to = req_str(&body, "toMessageId")?;
    let c = atomically(ctx.sql, || {
        let c = overlay::add(ctx.sql, sid, &summary, &from, &to, &ctx.now)?;
        sessions::touch(ctx.sql, sid, &ctx.now)?;
        Ok(c)
    })?;
    Ok(Response::json(201, &c))
}

/// `GET /sessions/{sid}/compactions/{cid}/messages?offset=0&limit=20`: the stored messages the
/// overlay stands for, oldest first, paged (`limit` at most 100) →
/// `{compaction, total, offset, messages, nextOffset}` (`nextOffset` null on the last page).
pub async fn messages(ctx: &Ctx<'_>, sid: &str, cid: &str, req: &Request) -> Result<Response> {
    let q = req.query_map()?;
    let offset = int_param(&q, "offset", 0, i64::MAX)?.unwrap_or(0) as usize;
    let limit = int_param(&q, "limit", 1, MAX_LIMIT as i64)?.map_or(DEFAULT_LIMIT, |n| n as usize);
    let c = expand::find(ctx.sql, sid, cid)?;
    let page = expand::page(ctx.sql, sid, c, offset, limit)?;
    let (messages, warnings) = spill::rehydrate(ctx.sql, ctx.blobs, sid, page.messages).await?;
    let page = expand::Page { messages, ..page };
    let resp = Response::json(
        200,
        &json!({
            "compaction": page.compaction,
            "total": page.total,
            "offset": page.offset,
            "messages": page.messages,
            "nextOffset": page.next_offset(),
        }),
    );
    Ok(warnings.into_iter().fold(resp, Response::warn))
}
