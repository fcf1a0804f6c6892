//! Export, import, erase and split: `GET /sessions/{sid}/export`, `POST /sessions/import`,
//! `GET /export` (NDJSON; an agent's Durable Object streams it chunk by chunk, a space's answers
//! it whole), `POST /import`, `DELETE /` (with `Confirm: erase`), `POST /sessions/{sid}/split`.
//! The same `GET /export`, `POST /import` and `DELETE /` are a memory space's.

use super::call::{Call, Pending};
use serde_json::json;

use super::http::{opt_str, Response};
use session_agent_core::error::{Error, Warned};
use session_agent_core::ids::check_name;
use session_agent_core::transfer::{erase as wipe, export, import};

/// The content type of the agent's export.
pub const NDJSON: &str = "application/x-ndjson; charset=utf-8";

/// `GET /sessions/{sid}/export` → the session's document.
pub(crate) fn export_session<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let Warned { value: doc, warnings } = export::session(s.env, s.id).await?;
        let resp = Response { body: doc.into_bytes(), ..Response::json(200, &()) };
        Ok(warnings.into_iter().fold(resp, Response::warn))
    })
}

/// `POST /sessions/import?as=<sid>` (a session document) → 201 SessionInfo.
pub(crate) fn import_session<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let req = c.req;
        let q = &c.query;
        let as_id = q.get("as");
        if let Some(id) = as_id {
            check_name("as", id)?;
        }
        let doc = req.json_object()?;
        Ok(Response::json(201, &import::session(env, &doc, as_id).await?))
    })
}

/// `GET /export` answered whole: a memory space's (bounded: its memories, their versions, at
/// most 1,100 shared blocks), and an agent's natively (an agent's Durable Object streams it
/// instead; see [`export::AgentExport`]).
pub(crate) fn export_agent<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let mut exp = export::AgentExport::new(env.sql)?;
        let mut body = String::new();
        while let Some(chunk) = exp.next(env).await? {
            body.push_str(&chunk);
        }
        let mut resp = Response { body: body.into_bytes(), ..Response::json(200, &()) };
        resp.headers = vec![("content-type".into(), NDJSON.into())];
        Ok(exp.warnings.into_iter().fold(resp, Response::warn))
    })
}

/// `POST /import` (an agent export; in a space, a space's) → 201 with the counts of what it
/// wrote ([`Counts::to_json`](session_agent_core::transfer::Counts::to_json)); what it stored
/// is embedded after the answer when embeddings are configured (as after every write), and the
/// alarm is armed for the schedules it brought (as after every write).
pub(crate) fn import_agent<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let counts = import::agent(c.env, &c.req.body).await?;
        Ok(Response::json(201, &counts.to_json(c.env.role)))
    })
}

/// `DELETE /` with `Confirm: erase` → 204 (see [`wipe::erase`]).
pub(crate) fn erase<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let env = c.env;
        let req = c.req;
        if !req.header_value("confirm").is_some_and(|c| c.trim().eq_ignore_ascii_case("erase")) {
            return Err(Error::invalid(
                "erasing an agent deletes everything it holds: send the header Confirm: erase to mean it",
            ));
        }
        let warnings = wipe::erase(env).await?;
        Ok(warnings.into_iter().fold(Response::no_content(), Response::warn))
    })
}

/// `POST /sessions/{sid}/split` `{name?, summary?}` → 201 SessionInfo of the new session.
pub(crate) fn split<'c>(c: &'c Call<'c>) -> Pending<'c> {
    Box::pin(async move {
        let s = &c.session();
        let req = c.req;
        let body = req.json_object()?;
        if let Some(k) = body.keys().find(|k| !matches!(k.as_str(), "name" | "summary")) {
            return Err(Error::invalid(format!("unknown field {k:?}: the body is {{name?, summary?}}")));
        }
        let info = s.split(opt_str(&body, "name")?.as_deref(), opt_str(&body, "summary")?).await?;
        Ok(Response::json(201, &json!(info)))
    })
}
