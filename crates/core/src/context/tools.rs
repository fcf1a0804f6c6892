//! The LLM tools generated from a session's blocks (docs/REFERENCE.md#tools): their names, descriptions
//! and JSON Schemas, and their execution. Outputs are the strings the model sees, word for word
//! as the reference; a failure is an `Error: …` output, never an exception.

use serde_json::{json, Map, Value as Json};

use crate::compaction::expand::{self, DEFAULT_LIMIT, MAX_LIMIT};
use crate::config::BlockKind;
use crate::context::entry_key::entry_key;
use crate::context::http;
use crate::context::prompt::usage_percent;
use crate::context::skills;
use crate::context::{d1, entries};
use crate::context::{Block, Context, Origin, SharedWrite};
use crate::error::{Error, Result};
use crate::llm::ToolSpec;
use crate::sql::atomically;
use crate::store::overlay;
use crate::tokens::estimate_str;
use crate::vectors::messages::{self as by_meaning, Scope};

/// How many hits `session_search` and the history block return.
pub(crate) const SESSION_SEARCH_LIMIT: i64 = 10;

/// The tools a session can offer; every dispatch on a tool goes through this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tool {
    SetContext,
    LoadContext,
    UnloadContext,
    SearchContext,
    SessionSearch,
    ExpandCompaction,
    /// The memory tools (offered when `SESSION_CONFIG.memory` is set; run by `core::memory`).
    MemoryStore,
    MemoryRecall,
    MemoryForget,
}

impl Tool {
    pub(crate) const ALL: [Tool; 9] = [
        Tool::SetContext,
        Tool::LoadContext,
        Tool::UnloadContext,
        Tool::SearchContext,
        Tool::SessionSearch,
        Tool::ExpandCompaction,
        Tool::MemoryStore,
        Tool::MemoryRecall,
        Tool::MemoryForget,
    ];

    /// The name the model calls it by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tool::SetContext => "set_context",
            Tool::LoadContext => "load_context",
            Tool::UnloadContext => "unload_context",
            Tool::SearchContext => "search_context",
            Tool::SessionSearch => "session_search",
            Tool::ExpandCompaction => "expand_compaction",
            Tool::MemoryStore => "memory_store",
            Tool::MemoryRecall => "memory_recall",
            Tool::MemoryForget => "memory_forget",
        }
    }

    /// Whether `core::memory` runs it.
    pub(crate) fn is_memory(self) -> bool {
        matches!(self, Tool::MemoryStore | Tool::MemoryRecall | Tool::MemoryForget)
    }

    /// The tool called `name`, if there is one.
    pub(crate) fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The string fields of its input: required, then optional.
    fn fields(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Tool::SetContext => (&["label", "content"], &["action"]),
            Tool::ExpandCompaction => (&[], &["compactionId"]),
            Tool::LoadContext | Tool::UnloadContext => (&["label", "key"], &[]),
            Tool::SearchContext => (&["label", "query"], &[]),
            Tool::SessionSearch => (&["query"], &[]),
            // Checked by core::memory::tools, which knows their arrays and numbers.
            Tool::MemoryStore | Tool::MemoryRecall | Tool::MemoryForget => (&[], &[]),
        }
    }
}

fn spec(tool: Tool, description: String, input_schema: Json) -> ToolSpec {
    ToolSpec { name: tool.name().to_owned(), description, input_schema }
}

fn quoted(labels: &[&str]) -> String {
    labels.iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(", ")
}

/// The tools of a session as the model is offered them (see [`definitions`]): `expand_compaction`
/// is offered when compaction is configured or the session already has a summary.
pub(crate) fn for_session(ctx: &Context<'_>) -> Result<Vec<ToolSpec>> {
    offered(ctx, &ctx.blocks()?)
}

/// The tools offered for the session's `blocks` (already read).
fn offered(ctx: &Context<'_>, blocks: &[Block]) -> Result<Vec<ToolSpec>> {
    let loaded = skills::loaded(ctx.sql, ctx.session)?;
    let expand = if ctx.config.compaction.is_some() || overlay::exists(ctx.sql, ctx.session)? {
        Expand::Offered
    } else {
        Expand::Hidden
    };
    Ok(definitions(blocks, &loaded, expand))
}

/// Whether `expand_compaction` is among a session's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expand {
    /// Compaction is configured or the session already has a summary.
    Offered,
    Hidden,
}

/// The tools for `blocks`: `set_context` if a block is writable, `load_context` and
/// `unload_context` if one is a skills block, `search_context` if one is searchable, then
/// `session_search` always, and `expand_compaction` when offered. `loaded` lists `label:key` of
/// the loaded skills.
pub(crate) fn definitions(blocks: &[Block], loaded: &[String], expand: Expand) -> Vec<ToolSpec> {
    let mut tools = Vec::new();
    let writable: Vec<&Block> = blocks.iter().filter(|b| b.writable()).collect();
    if !writable.is_empty() {
        tools.push(set_context(&writable));
    }
    let skill_labels: Vec<&str> = blocks.iter().filter(|b| b.loadable()).map(Block::label).collect();
    if !skill_labels.is_empty() {
        tools.push(spec(
            Tool::LoadContext,
            format!(
                "Load a document from a skill block by key. Available skill blocks: {}. Check the system prompt for available keys.",
                quoted(&skill_labels)
            ),
            label_key_schema(&skill_labels, "Skill key to load"),
        ));
        let state = if loaded.is_empty() {
            " No skills currently loaded.".to_owned()
        } else {
            format!(" Currently loaded: {}.", loaded.join(", "))
        };
        tools.push(spec(
            Tool::UnloadContext,
            format!(
                "Unload a previously loaded skill to free context space. The skill remains available for re-loading.{state}"
            ),
            label_key_schema(&skill_labels, "Skill key to unload"),
        ));
    }
    let search_labels: Vec<&str> = blocks.iter().filter(|b| b.is_searchable()).map(Block::label).collect();
    if !search_labels.is_empty() {
        tools.push(spec(
            Tool::SearchContext,
            format!(
                "Search for information in a searchable context block. ONLY these blocks are searchable: {}. Other blocks cannot be searched.",
                quoted(&search_labels)
            ),
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "enum": search_labels, "description": "Searchable block label"},
                    "query": {"type": "string", "description": "Search query"}
                },
                "required": ["label", "query"]
            }),
        ));
    }
    tools.push(spec(
        Tool::SessionSearch,
        "Search past conversations for relevant context. Searches across all sessions.".to_owned(),
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "Search query"}},
            "required": ["query"]
        }),
    ));
    if expand == Expand::Offered {
        tools.push(expand_compaction_def());
    }
    tools
}

/// `expand_compaction`: our addition (the reference has no way back from a summary,
/// docs/REFERENCE.md#d-expand-compaction).
fn expand_compaction_def() -> ToolSpec {
    spec(
        Tool::ExpandCompaction,
        format!(
            "Read the original messages that a summary of earlier conversation stands for (nothing was deleted). \
             Without compactionId, reads the newest summary in this conversation. Up to {MAX_LIMIT} messages per call; \
             use offset to read on."
        ),
        json!({
            "type": "object",
            "properties": {
                "compactionId": {"type": "string", "description": "Id of the summary (the summary message's id, with or without its compaction_ prefix). Default: the newest summary"},
                "offset": {"type": "integer", "minimum": 0, "description": "Index of the first message to read (0 = the oldest summarized message)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("How many messages to read (default {DEFAULT_LIMIT})")}
            },
            "required": []
        }),
    )
}

fn set_context(writable: &[&Block]) -> ToolSpec {
    let lines: Vec<String> = writable
        .iter()
        .map(|b| {
            let kind = if b.is_http() {
                "writable, kept by the operator's service"
            } else if b.is_skill() {
                "skill collection, keyed entries"
            } else if b.is_searchable() {
                "searchable, keyed entries"
            } else if b.agent_wide() {
                "writable"
            } else {
                "writable, this conversation only"
            };
            let desc = b.cfg.description.as_deref().unwrap_or("no description");
            format!("- \"{}\" ({kind}): {desc}", b.label())
        })
        .collect();
    let keyed: Vec<&str> = writable.iter().filter(|b| b.keyed()).map(|b| b.label()).collect();
    let hint = if keyed.is_empty() {
        ""
    } else {
        "\n\nFor keyed blocks (skill collections / searchable), pass `metadata: { title, description }` \u{2014} title stabilises updates, description helps the model pick entries. Metadata is optional; short content rarely needs it, long loadable entries benefit most."
    };
    let labels: Vec<&str> = writable.iter().map(|b| b.label()).collect();
    let mut props = json!({
        "label": {"type": "string", "enum": labels, "description": "Block label to write to"},
        "content": {"type": "string", "description": "The main content to write to the block."},
        "action": {"type": "string", "enum": ["replace", "append"], "description": "replace (default) or append"}
    });
    if !keyed.is_empty() {
        props["metadata"] = json!({
            "type": "object",
            "description": format!(
                "Optional metadata for keyed entries (skill collections, searchable blocks: {}). Short content doesn't need metadata; longer loadable entries (skills) benefit from a title and description so the model can pick the right one without loading it.",
                quoted(&keyed)
            ),
            "properties": {
                "title": {"type": "string", "description": "Short title. Used as a stable identifier \u{2014} entries with the same title are updated in place, different titles create new entries."},
                "description": {"type": "string", "description": "One-line summary shown alongside the title in the system prompt so the model can decide when to load the entry."}
            }
        });
    }
    spec(
        Tool::SetContext,
        format!("Write to a context block. Available blocks:\n{}\n\n{}{hint}", lines.join("\n"), durability(writable)),
        json!({"type": "object", "required": ["label", "content"], "properties": props}),
    )
}

/// The reference's "Writes are durable and persist across sessions.", true for each scope: a
/// writable block is per session unless it has `scope: "agent"`.
fn durability(writable: &[&Block]) -> &'static str {
    if writable.iter().all(|b| b.agent_wide()) {
        "Writes are durable and persist across sessions."
    } else if writable.iter().all(|b| !b.agent_wide()) {
        "Writes are durable for this conversation; other conversations do not see them."
    } else {
        "Writes are durable. Blocks marked \"this conversation only\" are kept for this conversation; the others \
         persist across sessions."
    }
}

fn label_key_schema(labels: &[&str], key_description: &str) -> Json {
    json!({
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": labels, "description": "Skill block label"},
            "key": {"type": "string", "description": key_description}
        },
        "required": ["label", "key"]
    })
}

/// The fields the tools take, with their JSON types (`docs/openapi.yaml`, `ToolRunRequest`):
/// whichever tool runs, a field named here has its type or is `null`.
const FIELDS: &[(&str, &str)] = &[
    ("label", "string"),
    ("content", "string"),
    ("action", "string"),
    ("metadata", "object"),
    ("key", "string"),
    ("query", "string"),
    ("id", "string"),
    ("category", "string"),
    ("tags", "array of strings"),
    ("limit", "integer"),
    ("compactionId", "string"),
    ("offset", "integer"),
];

/// Checks that every field of `input` the tools know has its type (or is `null`), whichever
/// tool `name` is: the one shape of a tool input, as the spec describes it.
pub(crate) fn check_fields(name: &str, input: &Json) -> Result<()> {
    let Some(obj) = input.as_object() else { return Err(Error::invalid(format!("{name}: input must be an object"))) };
    for (field, ty) in FIELDS {
        let ok = match (obj.get(*field), *ty) {
            (None | Some(Json::Null), _) => true,
            (Some(v), "string") => v.is_string(),
            (Some(v), "object") => v.is_object(),
            (Some(v), "integer") => v.is_i64() || v.is_u64(),
            (Some(v), _) => v.as_array().is_some_and(|a| a.iter().all(Json::is_string)),
        };
        if !ok {
            return Err(Error::invalid(format!("{name}: input.{field} must be {} (or null)", article(ty))));
        }
    }
    Ok(())
}

fn article(ty: &str) -> String {
    match ty {
        "integer" | "object" | "array of strings" => format!("an {ty}"),
        _ => format!("a {ty}"),
    }
}

/// Checks `input` against the shape of tool `name`: an object whose required fields are
/// present and whose fields have the schema's types. Enum membership is left to the tool,
/// which answers with the reference's `Error: …` text (docs/REFERENCE.md#tools).
fn check_input(tool: Tool, input: &Json) -> Result<()> {
    let name = tool.name();
    let obj = input.as_object().ok_or_else(|| Error::invalid(format!("{name}: input must be an object")))?;
    if tool == Tool::ExpandCompaction {
        page_param(obj, "offset", 0, usize::MAX)?;
        page_param(obj, "limit", 1, MAX_LIMIT)?;
    }
    let (required, optional) = tool.fields();
    for f in required {
        if !obj.get(*f).is_some_and(Json::is_string) {
            return Err(Error::invalid(format!("{name}: input.{f} must be a string")));
        }
    }
    for f in optional {
        if obj.get(*f).is_some_and(|v| !v.is_string()) {
            return Err(Error::invalid(format!("{name}: input.{f} must be a string")));
        }
    }
    if tool == Tool::SetContext {
        if let Some(m) = obj.get("metadata") {
            let m = m.as_object().ok_or_else(|| Error::invalid("set_context: input.metadata must be an object"))?;
            for f in ["title", "description"] {
                if m.get(f).is_some_and(|v| !v.is_string()) {
                    return Err(Error::invalid(format!("set_context: input.metadata.{f} must be a string")));
                }
            }
        }
    }
    Ok(())
}

/// An optional integer field of `expand_compaction`'s input, within `min..=max`.
fn page_param(obj: &Map<String, Json>, key: &str, min: usize, max: usize) -> Result<Option<usize>> {
    let Some(v) = obj.get(key) else { return Ok(None) };
    match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(Error::invalid(format!("expand_compaction: input.{key} must be an integer from {min} to {max}"))),
    }
}

fn s<'j>(input: &'j Map<String, Json>, key: &str) -> &'j str {
    input.get(key).and_then(Json::as_str).unwrap_or_default()
}

/// What a tool run gives back.
#[derive(Clone, Debug, PartialEq)]
pub struct Ran {
    /// The string the model sees.
    pub output: String,
    /// Whether the run stored something for the session (a block write, a skill loaded or
    /// unloaded): such a run registers the session.
    pub(crate) wrote: bool,
    /// The id of a stored message the run rewrote (`unload_context` replaces the output of the
    /// skill's `load_context` call), for the session's listeners.
    pub(crate) rewrote: Option<String>,
}

impl Ran {
    /// A run that stored nothing.
    pub(crate) fn read(output: String) -> Ran {
        Ran { output, wrote: false, rewrote: None }
    }

    /// A run that stored something for the session.
    pub(crate) fn stored(output: String) -> Ran {
        Ran { output, wrote: true, rewrote: None }
    }
}

/// Runs tool `name` of the session. `Err` only for a tool the session does not offer
/// (`not_found`), input of the wrong shape (`invalid_request`) or a storage failure; everything
/// the model did wrong is an `Ok("Error: …")` output.
pub(crate) async fn execute(ctx: &Context<'_>, name: &str, input: &Json, now: &str) -> Result<Ran> {
    let blocks = ctx.blocks()?;
    let offered = offered(ctx, &blocks)?;
    let tool = Tool::from_name(name)
        .filter(|_| offered.iter().any(|t| t.name == name))
        .ok_or_else(|| Error::not_found(format!("no tool named {name:?} in this session")))?;
    check_input(tool, input)?;
    let empty = Map::new();
    let input = input.as_object().unwrap_or(&empty);
    let out = match tool {
        Tool::ExpandCompaction => expand_compaction_run(ctx, input).map(Ran::read),
        Tool::SetContext => set_context_run(ctx, &blocks, input, now).await.map(Ran::stored),
        Tool::LoadContext => load_context_run(ctx, &blocks, input).await,
        Tool::UnloadContext => unload_context_run(ctx, &blocks, input),
        Tool::SearchContext => search_context_run(ctx, &blocks, input).await.map(Ran::read),
        Tool::SessionSearch => session_search(ctx, s(input, "query")).await.map(Ran::read),
        Tool::MemoryStore | Tool::MemoryRecall | Tool::MemoryForget => {
            return Err(Error::not_found(format!("{name} is run by the session's memory, not its blocks")))
        }
    };
    Ok(out.unwrap_or_else(|e| Ran::read(format!("Error: {}", e.message))))
}

async fn set_context_run(ctx: &Context<'_>, blocks: &[Block], input: &Map<String, Json>, now: &str) -> Result<String> {
    let label = s(input, "label");
    let content = s(input, "content");
    let Some(b) = blocks.iter().find(|b| b.label() == label) else {
        return Err(Error::not_found(format!("block \"{label}\" not found")));
    };
    if b.is_http() {
        let action = if s(input, "action") == "append" { "append" } else { "replace" };
        return http::set(&ctx.caller(), &b.cfg, content, action, input.get("metadata")).await;
    }
    if b.keyed() {
        let meta = input.get("metadata");
        let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Json::as_str);
        let key = entry_key(field("title"), content);
        if b.is_skill() {
            ctx.put_skill(b, &key, content, field("description").or(field("title"))).await?;
        } else if !b.writable() {
            return Err(Error::conflict(format!("Block \"{label}\" does not support writes")));
        } else {
            atomically(ctx.sql, || entries::set(ctx.sql, label, &key, content, now))?;
        }
        return Ok(format!("Indexed \"{key}\" in {label}."));
    }
    let append = s(input, "action") == "append";
    let tokens = if b.in_space() {
        let how = if append { SharedWrite::Append } else { SharedWrite::Replace(None) };
        match ctx.write_shared(b, content, how).await {
            Ok((text, _)) => estimate_str(&text),
            // The text the model replaces changed since it read it: it gets the text as it is
            // now (read again, so its next replace names that version).
            Err(e) if e.code() == crate::space::VERSION_CONFLICT => {
                let now_text = ctx.load(b).await.map(|l| l.content).unwrap_or_default();
                return Err(Error::conflict(format!(
                    "{} Its text now:\n{now_text}\nWrite again with that in mind.",
                    e.message
                )));
            }
            Err(e) => return Err(e),
        }
    } else {
        let b = if append { ctx.append(label, content, now)? } else { ctx.set(label, content, now)? };
        estimate_str(&ctx.load(&b).await?.content)
    };
    let usage = match b.cfg.max_tokens {
        Some(max) if max != 0 => format!("{}% ({tokens}/{max} tokens)", usage_percent(tokens, max)),
        _ => format!("{tokens} tokens"),
    };
    Ok(format!("Written to {label}. Usage: {usage}"))
}

fn not_a_skill(label: &str, blocks: &[Block]) -> Error {
    let labels: Vec<&str> = blocks.iter().filter(|b| b.loadable()).map(Block::label).collect();
    Error::invalid(format!("\"{label}\" is not a skill block. Skill blocks: {}", labels.join(", ")))
}

async fn load_context_run(ctx: &Context<'_>, blocks: &[Block], input: &Map<String, Json>) -> Result<Ran> {
    let (label, key) = (s(input, "label"), s(input, "key"));
    let Some(b) = blocks.iter().find(|b| b.label() == label && b.loadable()) else {
        return Err(not_a_skill(label, blocks));
    };
    let text = if b.is_http() { http::load(&ctx.caller(), &b.cfg, key).await? } else { ctx.skill_text(b, key).await? };
    match text {
        Some(text) => {
            skills::mark_loaded(ctx.sql, ctx.session, label, key)?;
            Ok(Ran::stored(text))
        }
        None => Ok(Ran::read(format!("Not found: {key}"))),
    }
}

fn unload_context_run(ctx: &Context<'_>, blocks: &[Block], input: &Map<String, Json>) -> Result<Ran> {
    let (label, key) = (s(input, "label"), s(input, "key"));
    if !blocks.iter().any(|b| b.label() == label && b.loadable()) {
        return Err(not_a_skill(label, blocks));
    }
    let (unloaded, rewrote) = atomically(ctx.sql, || {
        if !skills::mark_unloaded(ctx.sql, ctx.session, label, key)? {
            return Ok((false, None));
        }
        Ok((true, skills::reclaim(ctx.sql, ctx.session, label, key)?))
    })?;
    let output = if unloaded {
        format!("Unloaded \"{key}\" from {label}. Context reclaimed.")
    } else {
        format!("Skill \"{key}\" is not currently loaded in \"{label}\".")
    };
    Ok(Ran { output, wrote: unloaded, rewrote })
}

async fn search_context_run(ctx: &Context<'_>, blocks: &[Block], input: &Map<String, Json>) -> Result<String> {
    let (label, query) = (s(input, "label"), s(input, "query"));
    let Some(b) = blocks.iter().find(|b| b.label() == label && b.is_searchable()) else {
        let labels: Vec<&str> = blocks.iter().filter(|b| b.is_searchable()).map(Block::label).collect();
        return Err(Error::invalid(format!("\"{label}\" is not searchable. Searchable blocks: {}", labels.join(", "))));
    };
    let found = match b.origin {
        Origin::History => history_search(ctx, query).await?,
        _ if b.is_http() => http::search(&ctx.caller(), &b.cfg, query).await?,
        _ if b.kind() == BlockKind::D1 => d1::search(&ctx.caller(), &b.cfg, query).await?,
        _ => entries::search(&ctx.meaning, label, query).await?,
    };
    Ok(found.unwrap_or_else(|| "No results found.".to_owned()))
}

/// Cross-session search as the model sees it: `[role] content` joined by `\n---\n`; only the
/// sessions within the request's reach (by words, and with embeddings by meaning too).
async fn history_search(ctx: &Context<'_>, query: &str) -> Result<Option<String>> {
    let found = by_meaning::search(&ctx.meaning, Scope::Across(ctx.reach), query, SESSION_SEARCH_LIMIT).await?;
    found.warnings.iter().for_each(|w| ctx.meaning.events.warn(w));
    let hits = found.value;
    if hits.is_empty() {
        return Ok(None);
    }
    Ok(Some(hits.iter().map(|h| format!("[{}] {}", h.role, h.content)).collect::<Vec<_>>().join("\n---\n")))
}

fn expand_compaction_run(ctx: &Context<'_>, input: &Map<String, Json>) -> Result<String> {
    let offset = page_param(input, "offset", 0, usize::MAX)?.unwrap_or(0);
    let limit = page_param(input, "limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    let c = match input.get("compactionId").and_then(Json::as_str) {
        Some(id) => expand::find(ctx.sql, ctx.session, id)?,
        None => expand::latest_visible(ctx.sql, ctx.session)?
            .ok_or_else(|| Error::not_found("there is no summary in this conversation to expand"))?,
    };
    expand::render_for_model(&expand::page(ctx.sql, ctx.session, c, offset, limit)?)
}

async fn session_search(ctx: &Context<'_>, query: &str) -> Result<String> {
    Ok(history_search(ctx, query).await?.unwrap_or_else(|| "No results found.".to_owned()))
}
