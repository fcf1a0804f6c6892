//! Compaction routes: the stored overlays (`GET/POST /sessions/{sid}/compactions`), the
//! originals behind one (`GET …/compactions/{cid}/messages`), and compaction with the LLM
//! (`POST …/compact`).

use super::call::{Call, Pending};
use serde_json::json;

use super::http::{opt_str, req_str, Response};
use session_agent_core::compaction::expand::{self, DEFAULT_LIMIT, MAX_LIMIT};
use session_agent_core::error::{Result, Warned};
use session_agent_core::store::overlay;

/// `GET /sessions/{sid}/compactions`: oldest first.
pub(crate) fn list(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    Ok(Response::json(200, &json!({ "compactions": overlay::list(s.env.sql, s.id)? })))
}

/// `POST /sessions/{sid}/compactions` `{summary, fromMessageId, toMessageId}` → 201.
pub(crate) fn add(c: &Call<'_>) -> Result<Response> {
    let s = &c.session();
    let req = c.req;
    let body = req.json_object()?;
    let summary = req_str(&body, "summary")?;
    let from = req_str(&body, "fromMessageId")?;
    let to = req_str(&body, "toMessageId")?;
    Ok(Response::json(201, &s.add_overlay(&summary, &from, &to)?))
}

/// `GET /sessions/{sid}/compactions/{cid}/messages?offset=0&limit=20`: the stored messages the
/// overlay stands for, oldest first, paged (`limit` at most 100) →
/// `{compaction, total, offset, messages, nextOffset}` (`nextOffset` null on the last page).
pub(crate) fn messages<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let cid = c.params.cid.as_str();
        let _req = c.req;
        let q = &c.query;
        let offset = q.int("offset", 0, i64::MAX)?.unwrap_or(0) as usize;
        let limit = q.int("limit", 1, MAX_LIMIT as i64)?.map_or(DEFAULT_LIMIT, |n| n as usize);
        let c = expand::find(s.env.sql, s.id, cid)?;
        let page = expand::page(s.env.sql, s.id, c, offset, limit)?;
        let Warned { value: messages, warnings } = s.whole(page.messages).await?;
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
    })
}

/// `POST /sessions/{sid}/compact` `{leafId?}` → `{compaction}` (the stored overlay) or
/// `{compaction: null}` when there is nothing to compact. The model failing, or answering a
/// blank or skeleton summary, is `503 llm_unavailable` and nothing is stored.
pub(crate) fn compact<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        let leaf = opt_str(&req.json_object()?, "leafId")?;
        Ok(Response::json(200, &json!({ "compaction": s.compact(leaf.as_deref()).await? })))
    })
}
