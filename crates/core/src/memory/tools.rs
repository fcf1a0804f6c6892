//! The memory tools the model is offered when `SESSION_CONFIG.memory` is set: `memory_store`,
//! `memory_recall`, `memory_forget` (docs/tools.md), within the agent's scope (`memory.tags`,
//! `memory.categories`: recall and forget by query see only those memories, and what it stores
//! gets the scope's tags). Outputs are the strings the model sees; a
//! mistake of the model is an `Error: …` output, never an exception.

use serde_json::{json, Map, Value as Json};

use super::by::By;
use super::memories::{Match, Memories};
use super::recall::{Query, DEFAULT_LIMIT, MAX_LIMIT};
use super::shared;
use super::store::{line, Filter, NewMemory, Stored};
use crate::config::category::Category;
use crate::context::tools::{Ran, Tool};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::ToolSpec;

fn spec(tool: Tool, description: &str, input_schema: Json) -> ToolSpec {
    ToolSpec { name: tool.name().to_owned(), description: description.to_owned(), input_schema }
}

/// The three memory tools, in this order.
pub(crate) fn definitions() -> Vec<ToolSpec> {
    let category = json!({"type": "string", "enum": ["core", "daily", "conversation"]});
    vec![
        spec(
            Tool::MemoryStore,
            "Store a fact about the user in long-term memory, so that later conversations know it. Use it for \
             lasting facts and preferences the user states, one fact per call, as a short sentence. Categories: core \
             (permanent, the default), daily (a note that expires after some days), conversation (only for this \
             conversation). Storing the same fact again updates it.",
            json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The fact, as a short sentence about the user"},
                    "category": {"allOf": [category], "description": "core (default), daily or conversation"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16, "description": "Short topic words"}
                },
                "required": ["content"]
            }),
        ),
        spec(
            Tool::MemoryRecall,
            "Recall facts about the user from long-term memory, best matches first, with their ids. Use it when \
             earlier conversations may hold something relevant.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for"},
                    "category": {"allOf": [category], "description": "Only this category"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("How many (default {DEFAULT_LIMIT})")}
                },
                "required": ["query"]
            }),
        ),
        spec(
            Tool::MemoryForget,
            "Forget a fact in long-term memory: by its id (as memory_recall shows it), or the best match for a query. \
             Use it when the user asks you to forget something or a fact is no longer true.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Id of the memory to forget"},
                    "query": {"type": "string", "description": "Forget the best match for this, when no id is given"}
                },
                "required": []
            }),
        ),
    ]
}

fn text<'j>(input: &'j Map<String, Json>, key: &str) -> Result<Option<&'j str>> {
    match input.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::invalid(format!("input.{key} must be a string"))),
    }
}

fn category(input: &Map<String, Json>) -> Result<Option<Category>> {
    text(input, "category")?.map(Category::parse).transpose()
}

/// Runs memory tool `tool` for session `session`. `Err` only for input of the wrong shape
/// (`invalid_request`) or a storage failure; everything else is an `Error: …` output.
pub(crate) async fn execute(memories: &Memories<'_>, session: &str, tool: Tool, input: &Json) -> Result<Ran> {
    let name = tool.name();
    let input = input.as_object().ok_or_else(|| Error::invalid(format!("{name}: input must be an object")))?;
    check_input(tool, input).map_err(|e| Error::invalid(format!("{name}: {}", e.message)))?;
    let out = match tool {
        Tool::MemoryStore => store(memories, session, input).await,
        Tool::MemoryRecall => recall(memories, session, input).await,
        Tool::MemoryForget => forget(memories, input).await,
        _ => return Err(Error::not_found(format!("{name} is not a memory tool"))),
    };
    match out {
        Ok(ran) => Ok(ran),
        Err(e) if e.kind == ErrorKind::Internal => Err(e),
        Err(e) => Ok(Ran::read(format!("Error: {}", e.message))),
    }
}

/// The input's shape: strings where strings belong, tags an array of strings, limit a number.
/// (Values the tool refuses, such as an unknown category, are `Error: …` outputs instead.)
fn check_input(tool: Tool, input: &Map<String, Json>) -> Result<()> {
    let strings: &[&str] = match tool {
        Tool::MemoryStore => &["content", "category"],
        Tool::MemoryRecall => &["query", "category"],
        _ => &["id", "query"],
    };
    for key in strings {
        text(input, key)?;
    }
    let required = match tool {
        Tool::MemoryStore => Some("content"),
        Tool::MemoryRecall => Some("query"),
        _ => None,
    };
    if let Some(key) = required.filter(|k| !input.get(*k).is_some_and(Json::is_string)) {
        return Err(Error::invalid(format!("input.{key} must be a string")));
    }
    if let Some(t) = input.get("tags").filter(|t| !t.is_null()) {
        if !t.as_array().is_some_and(|a| a.iter().all(Json::is_string)) {
            return Err(Error::invalid("input.tags must be an array of strings"));
        }
    }
    if input.get("limit").is_some_and(|l| !l.is_null() && !l.is_i64()) {
        return Err(Error::invalid("input.limit must be an integer"));
    }
    Ok(())
}

async fn store(memories: &Memories<'_>, session: &str, input: &Map<String, Json>) -> Result<Ran> {
    let content = text(input, "content")?.ok_or_else(|| Error::invalid("input.content must be a string"))?;
    let tags = match input.get("tags") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(a)) => a
            .iter()
            .map(|t| t.as_str().map(str::to_owned).ok_or_else(|| Error::invalid("input.tags must be strings")))
            .collect::<Result<_>>()?,
        Some(_) => return Err(Error::invalid("input.tags must be an array of strings")),
    };
    let category = category(input)?.unwrap_or_default();
    // What the agent stores is within its own scope, so it recalls it.
    let scope = memories.config().tags;
    let tags: Vec<String> = scope.iter().cloned().chain(tags.into_iter().filter(|t| !scope.contains(t))).collect();
    let new = NewMemory {
        content: content.trim().to_owned(),
        category,
        tags,
        metadata: Default::default(),
        score: None,
        session_id: Some(session.to_owned()),
        ..NewMemory::default()
    };
    let (m, stored) = memories.remember(new, By::Tool).await?;
    Ok(Ran::stored(match stored {
        Stored::Created => format!("Stored memory {} ({}).", m.id, m.category.as_str()),
        Stored::Merged | Stored::Replaced => format!("Memory {} already said this; updated it.", m.id),
    }))
}

async fn recall(memories: &Memories<'_>, session: &str, input: &Map<String, Json>) -> Result<Ran> {
    let query = text(input, "query")?.ok_or_else(|| Error::invalid("input.query must be a string"))?;
    let limit = match input.get("limit") {
        None | Some(Json::Null) => DEFAULT_LIMIT,
        Some(v) => v
            .as_i64()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| Error::invalid(format!("input.limit must be an integer from 1 to {MAX_LIMIT}")))?,
    };
    // Within the agent's scope (`memory.tags`, `memory.categories`).
    let cfg = memories.config();
    let categories: Vec<Category> = match category(input)? {
        Some(c) if !cfg.categories.contains(&c) => {
            return Err(Error::invalid(format!("category {} is outside this agent's memory", c.as_str())))
        }
        Some(c) => vec![c],
        None => cfg.categories.clone(),
    };
    let filter = Filter { categories: categories.clone(), any_tags: cfg.tags.clone(), ..Filter::default() };
    let q = Query { text: query.to_owned(), filter, limit };
    let env = memories.env;
    let scope = shared::Scope { categories: &categories, tags: &cfg.tags };
    let hits = shared::with_space(env, session, &q.text, limit, scope, memories.recall(&q)).await?;
    if hits.is_empty() {
        return Ok(Ran::read("No memories found.".to_owned()));
    }
    Ok(Ran::read(hits.iter().map(|h| line(&h.memory)).collect::<Vec<_>>().join("\n")))
}

async fn forget(memories: &Memories<'_>, input: &Map<String, Json>) -> Result<Ran> {
    let id = match (text(input, "id")?, text(input, "query")?) {
        (Some(id), _) => id.to_owned(),
        (None, Some(query)) => {
            let cfg = memories.config();
            let filter = Filter { categories: cfg.categories, any_tags: cfg.tags, ..Filter::default() };
            let q = Query { text: query.to_owned(), limit: MAX_LIMIT, filter };
            match memories.to_forget(&q).await? {
                Match::One(m) => m.id,
                Match::None => return Ok(Ran::read(format!("No memory matches {query:?}."))),
                Match::Several(all) => {
                    let lines: Vec<String> = all.iter().map(line).collect();
                    return Ok(Ran::read(format!(
                        "Several memories match {query:?} about as well; nothing was forgotten. \
                         Forget one by its id:\n{}",
                        lines.join("\n")
                    )));
                }
            }
        }
        (None, None) => return Err(Error::invalid("give the id of the memory to forget, or a query")),
    };
    let m = memories.forget(&id)?;
    Ok(Ran::stored(format!("Forgot memory {}: {}", m.id, m.content)))
}
