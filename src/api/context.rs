//! Routes of context blocks, the system prompt and the tools: `/sessions/{sid}/context…`,
//! `…/prompt`, `…/prompt/refresh`, `…/tools`, `…/tools/{name}`.

use serde_json::{json, Map, Value as Json};

use super::http::{req_str, Request, Response};
use crate::core::config::BlockConfig;
use crate::core::error::{Error, Result};
use crate::core::session::blocks::Write;
use crate::core::session::Session;

/// `GET /sessions/{sid}/context`: every block with its content, in prompt order.
pub async fn list(s: &Session<'_>) -> Result<Response> {
    Ok(Response::json(200, &json!({ "blocks": s.blocks().await? })))
}

/// `GET /sessions/{sid}/context/{label}`.
pub async fn get(s: &Session<'_>, label: &str) -> Result<Response> {
    Ok(Response::json(200, &s.block(label).await?))
}

/// `PUT /sessions/{sid}/context/{label}` `{content}`.
pub async fn replace(s: &Session<'_>, label: &str, req: &Request) -> Result<Response> {
    let content = req_str(&req.json_object()?, "content")?;
    Ok(Response::json(200, &s.write_block(label, &content, Write::Replace).await?))
}

/// `POST /sessions/{sid}/context/{label}/append` `{content}`.
pub async fn append(s: &Session<'_>, label: &str, req: &Request) -> Result<Response> {
    let content = req_str(&req.json_object()?, "content")?;
    Ok(Response::json(200, &s.write_block(label, &content, Write::Append).await?))
}

/// `POST /sessions/{sid}/context` `{label, kind, …}`: adds a block to this session → 201.
pub async fn add(s: &Session<'_>, req: &Request) -> Result<Response> {
    let cfg: BlockConfig =
        serde_json::from_value(Json::Object(req.json_object()?)).map_err(|e| Error::invalid(format!("block: {e}")))?;
    Ok(Response::json(201, &s.add_block(cfg).await?))
}

/// `DELETE /sessions/{sid}/context/{label}` → 204, 404 when the session has no such block.
pub fn remove(s: &Session, label: &str) -> Result<Response> {
    s.remove_block(label)?;
    Ok(Response::no_content())
}

/// `GET /sessions/{sid}/prompt` → `{prompt, frozen}`: the stored copy, rendered and stored the
/// first time.
pub async fn prompt(s: &Session<'_>) -> Result<Response> {
    let (prompt, frozen) = s.prompt().await?;
    Ok(Response::json(200, &json!({ "prompt": prompt, "frozen": frozen })))
}

/// `POST /sessions/{sid}/prompt/refresh` → `{prompt}` rendered now and stored.
pub async fn refresh(s: &Session<'_>) -> Result<Response> {
    Ok(Response::json(200, &json!({ "prompt": s.refresh_prompt().await? })))
}

/// `GET /sessions/{sid}/tools` → `{tools: [{name, description, inputSchema}]}`.
pub fn tools(s: &Session) -> Result<Response> {
    Ok(Response::json(200, &json!({ "tools": s.tools()? })))
}

/// `POST /sessions/{sid}/tools/{name}` `{input}` → `{output}`, the string the model sees.
pub async fn run_tool(s: &Session<'_>, name: &str, req: &Request) -> Result<Response> {
    let input = req.json_object()?.remove("input").unwrap_or_else(|| Json::Object(Map::new()));
    Ok(Response::json(200, &json!({ "output": s.run_tool(name, &input).await?.output })))
}
