//! Routes of context blocks, the system prompt and the tools: `/sessions/{sid}/context…`,
//! `…/prompt`, `…/prompt/refresh`, `…/tools`, `…/tools/{name}`.

use serde_json::{json, Map, Value as Json};

use super::http::{req_str, Request, Response};
use super::Ctx;
use crate::core::config::BlockConfig;
use crate::core::context::tools::{self, Ran};
use crate::core::context::{Block, Context, Origin};
use crate::core::error::{Error, Result};
use crate::core::sql::atomically;
use crate::core::store::sessions;

/// The context of session `sid` for this request.
fn context<'a>(ctx: &'a Ctx, sid: &'a str) -> Context<'a> {
    Context { sql: ctx.sql, blobs: ctx.blobs, config: ctx.config, agent: ctx.agent, session: sid }
}

/// Registers the session (writes do; reads never).
fn register(ctx: &Ctx, sid: &str) -> Result<()> {
    sessions::ensure(ctx.sql, sid, &ctx.now)?;
    sessions::touch(ctx.sql, sid, &ctx.now)
}

/// `GET /sessions/{sid}/context`: every block with its content, in prompt order.
pub async fn list(ctx: &Ctx<'_>, sid: &str) -> Result<Response> {
    let blocks: Vec<_> = context(ctx, sid).load_all().await?.into_iter().map(|(_, l)| l).collect();
    Ok(Response::json(200, &json!({ "blocks": blocks })))
}

/// `GET /sessions/{sid}/context/{label}`.
pub async fn get(ctx: &Ctx<'_>, sid: &str, label: &str) -> Result<Response> {
    let c = context(ctx, sid);
    let b = c.require(label)?;
    Ok(Response::json(200, &c.load(&b).await?))
}

/// `PUT /sessions/{sid}/context/{label}` `{content}` and `POST …/append` `{content}`.
pub async fn write(ctx: &Ctx<'_>, sid: &str, label: &str, req: &Request, append: bool) -> Result<Response> {
    let content = req_str(&req.json_object()?, "content")?;
    let c = context(ctx, sid);
    let b = atomically(ctx.sql, || {
        let b = if append { c.append(label, &content, &ctx.now)? } else { c.set(label, &content, &ctx.now)? };
        register(ctx, sid)?;
        Ok(b)
    })?;
    publish_context(ctx, sid, label);
    Ok(Response::json(200, &c.load(&b).await?))
}

/// What the session's sockets hear of a tool run: a `context` frame when it stored something
/// for its block, and the rewritten message (then an `idle` status) when it rewrote one.
pub async fn publish_tool_effects(ctx: &Ctx<'_>, sid: &str, input: &Json, ran: &Ran) {
    if let Some(label) = input.get("label").and_then(Json::as_str).filter(|_| ran.wrote) {
        publish_context(ctx, sid, label);
    }
    if let Some(id) = &ran.rewrote {
        super::messages::publish_stored(ctx, sid, id).await;
        super::compact::publish_idle(ctx, sid).await;
    }
}

/// `{type:"context", sessionId, label}` to the session's sockets after a block changed.
pub fn publish_context(ctx: &Ctx, sid: &str, label: &str) {
    super::compact::publish_change(ctx, sid, "context", json!({ "label": label }));
}

/// `POST /sessions/{sid}/context` `{label, kind, …}`: adds a block to this session → 201.
pub async fn add(ctx: &Ctx<'_>, sid: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let cfg: BlockConfig =
        serde_json::from_value(Json::Object(body)).map_err(|e| Error::invalid(format!("block: {e}")))?;
    let c = context(ctx, sid);
    // Read the new block's content (R2 for skills and r2Key blocks) before storing it, so a
    // store that cannot be read refuses the add instead of answering an error after it.
    c.check_add(&cfg)?;
    let view = c.load(&Block { cfg: cfg.clone(), origin: Origin::Runtime }).await?;
    atomically(ctx.sql, || {
        c.add(cfg.clone())?;
        register(ctx, sid)
    })?;
    publish_context(ctx, sid, &cfg.label);
    Ok(Response::json(201, &view))
}

/// `DELETE /sessions/{sid}/context/{label}` → 204, 404 when the session has no such block.
pub fn remove(ctx: &Ctx, sid: &str, label: &str) -> Result<Response> {
    let c = context(ctx, sid);
    atomically(ctx.sql, || {
        if !c.remove(label)? {
            return Err(Error::not_found(format!("Block \"{label}\" not found")));
        }
        register(ctx, sid)
    })?;
    publish_context(ctx, sid, label);
    Ok(Response::no_content())
}

/// `GET /sessions/{sid}/prompt` → `{prompt, frozen}`: the stored copy, rendered and stored the
/// first time. Storing it does not register the session.
pub async fn prompt(ctx: &Ctx<'_>, sid: &str) -> Result<Response> {
    let (prompt, frozen) = context(ctx, sid).frozen_prompt(&ctx.now).await?;
    Ok(Response::json(200, &json!({ "prompt": prompt, "frozen": frozen })))
}

/// `POST /sessions/{sid}/prompt/refresh` → `{prompt}` rendered now and stored.
pub async fn refresh(ctx: &Ctx<'_>, sid: &str) -> Result<Response> {
    let prompt = context(ctx, sid).refresh_prompt(&ctx.now).await?;
    atomically(ctx.sql, || register(ctx, sid))?;
    Ok(Response::json(200, &json!({ "prompt": prompt })))
}

/// `GET /sessions/{sid}/tools` → `{tools: [{name, description, inputSchema}]}`.
pub fn list_tools(ctx: &Ctx, sid: &str) -> Result<Response> {
    let defs = tools::for_session(&context(ctx, sid))?;
    Ok(Response::json(200, &json!({ "tools": defs })))
}

/// `POST /sessions/{sid}/tools/{name}` `{input}` → `{output}`, the string the model sees.
pub async fn run_tool(ctx: &Ctx<'_>, sid: &str, name: &str, req: &Request) -> Result<Response> {
    let body = req.json_object()?;
    let input = body.get("input").cloned().unwrap_or_else(|| Json::Object(Map::new()));
    let ran = tools::execute(&context(ctx, sid), name, &input, &ctx.now).await?;
    if ran.wrote {
        atomically(ctx.sql, || register(ctx, sid))?;
    }
    publish_tool_effects(ctx, sid, &input, &ran).await;
    Ok(Response::json(200, &json!({ "output": ran.output })))
}
