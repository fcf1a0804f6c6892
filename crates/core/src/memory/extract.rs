//! Auto-extract (docs/REFERENCE.md#memory-extract): after a turn, the model distills facts from
//! the new user/assistant exchange (`{"facts":[{"fact","score","tags"}]}`); facts under
//! `minScore` are dropped; each survivor is shown with the most similar stored memories (their
//! real ids) and the model decides, mem0's way, to add it, update one of them, delete one, or do
//! nothing (`{"memory":[{"id","text","event"}]}`). Every model call is made before anything is
//! written, and an answer that cannot be read is a failure: nothing is written.

use serde_json::{json, Value as Json};

use super::by::By;
use super::memories::Memories;
use super::recall::Query;
use super::shared;
use super::store::{self, Filter, Memory, NewMemory, Patch, Stored};
use crate::access::Reach;
use crate::config::category::Category;
use crate::config::ExtractConfig;
use crate::env::Env;
use crate::error::{Error, ErrorKind, Result};
use crate::llm::{complete, ChatRequest, Format, LlmConfig, Provider, Usage};
use crate::parts::{part_type, parts, str_field};
use crate::space::Operation;
use crate::store::message::parse_all;
use crate::store::tree::Tree;

/// Similar memories shown with each candidate fact.
pub(crate) const SIMILAR: i64 = 5;
/// Most facts taken from one exchange.
pub(crate) const MAX_FACTS: usize = 10;
/// Most characters of each side of the exchange sent to the model.
const MAX_EXCHANGE_CHARS: usize = 8000;

/// The instructions of the extraction request.
pub(crate) const EXTRACT_PROMPT: &str =
    "You keep a long-term memory of facts about a user. From the exchange below, extract \
the facts about the user that will still matter in later conversations: who they are, their preferences, plans, \
relationships, work, and corrections of what they said before. Leave out facts about the assistant, small talk and \
one-off requests. Write each fact as one short sentence about the user (\"The user lives in Berlin.\"). Give each a \
score from 0 to 1: how sure you are that it is true and lasting. Add a few short topic tags. Answer with JSON only, in \
this shape: {\"facts\":[{\"fact\":\"...\",\"score\":0.9,\"tags\":[\"...\"]}]}. When there is nothing worth \
remembering, answer {\"facts\":[]}.";

/// The instructions of the consolidation request (one per fact).
pub(crate) const CONSOLIDATE_PROMPT: &str =
    "You manage a long-term memory of facts about a user. You are given the stored \
memories most similar to a new fact, each with its id, and the new fact. Decide what to do: ADD the new fact when no \
memory says it; UPDATE a memory (keep its id, give the new full text) when the new fact refines or corrects it, for \
example the user moved and the place changes; DELETE a memory (by its id) that the new fact shows to be no longer \
true; NONE when a memory already says it. Use only the ids given. Answer with JSON only, in this shape: \
{\"memory\":[{\"id\":\"<id, or new>\",\"text\":\"...\",\"event\":\"ADD\"}]} where event is ADD, UPDATE, DELETE or \
NONE.";

/// A fact the model distilled.
#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    pub fact: String,
    pub score: f64,
    pub tags: Vec<String>,
}

/// What the model decided for one fact.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Add { text: String },
    Update { id: String, text: String },
    Delete { id: String },
    Nothing,
}

/// What an extraction changed.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Extracted {
    /// New memories (an UPDATE's new text is a new memory that supersedes the old one).
    pub(crate) added: Vec<Memory>,
    /// Memories changed in place (merged with the same text, or re-scored).
    pub(crate) updated: Vec<Memory>,
    /// Ids of the memories that no longer hold (invalidated, not erased: their versions stay).
    pub(crate) deleted: Vec<String>,
    /// Model calls made, and their tokens.
    #[serde(skip)]
    pub(crate) calls: usize,
    #[serde(skip)]
    pub(crate) usage: Usage,
}

/// The exchange facts are taken from: the last user message of a path and the assistant's
/// answer after it (sent as it is to the agent's space, which extracts from it).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exchange {
    pub(crate) user_id: String,
    pub(crate) user: String,
    pub(crate) assistant: String,
}

/// The text of a message's `text` parts.
fn text_of(m: &Json) -> String {
    let texts: Vec<&str> =
        parts(m).iter().filter(|p| part_type(p) == "text").filter_map(|p| str_field(p, "text")).collect();
    texts.join("\n")
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_EXCHANGE_CHARS).collect()
}

/// The latest exchange on the path to `leaf` (default: the latest leaf), if it has a user message.
pub(crate) fn exchange(memories: &Memories<'_>, session: &str, leaf: Option<&str>) -> Result<Option<Exchange>> {
    let tree = Tree::new(memories.env.sql, session);
    let Some(leaf) = tree.resolve_leaf(leaf)? else { return Ok(None) };
    // The walk reads ids and roles only; just the exchange itself is read whole.
    let rows = tree.path(&leaf)?;
    let Some(at) = rows.iter().rposition(|r| r.role == "user") else { return Ok(None) };
    let path = parse_all(&tree.hydrate(&rows[at..])?)?;
    let Some(at) = path.iter().position(|m| str_field(m, "role") == Some("user")) else { return Ok(None) };
    let assistant: Vec<String> = path[at + 1..]
        .iter()
        .filter(|m| str_field(m, "role") == Some("assistant"))
        .map(text_of)
        .filter(|t| !t.trim().is_empty())
        .collect();
    let user = text_of(&path[at]);
    if user.trim().is_empty() {
        return Ok(None);
    }
    let user_id = str_field(&path[at], "id").unwrap_or_default().to_owned();
    Ok(Some(Exchange { user_id, user: cut(&user), assistant: cut(&assistant.join("\n")) }))
}

/// The first JSON object in a model's answer: the whole text, or inside a code fence or prose.
pub(crate) fn json_object(text: &str) -> Option<Json> {
    let t = text.trim();
    if let Ok(v @ Json::Object(_)) = serde_json::from_str::<Json>(t) {
        return Some(v);
    }
    let start = t.find('{')?;
    let end = t.rfind('}')?;
    (end > start).then(|| serde_json::from_str::<Json>(&t[start..=end]).ok()).flatten().filter(Json::is_object)
}

fn unreadable(what: &str, text: &str) -> Error {
    let excerpt: String = text.chars().take(200).collect();
    Error::new(ErrorKind::LlmUnavailable, format!("the model's {what} answer is not the JSON asked for: {excerpt}"))
}

/// The facts of an extraction answer (each with a non-empty fact and a score in [0, 1]; tags
/// that are not strings are dropped). An answer without a `facts` list is `llm_unavailable`.
pub fn parse_facts(text: &str) -> Result<Vec<Fact>> {
    let v = json_object(text).ok_or_else(|| unreadable("extraction", text))?;
    let list = v.get("facts").and_then(Json::as_array).ok_or_else(|| unreadable("extraction", text))?;
    Ok(list
        .iter()
        .filter_map(|f| {
            let fact = f.get("fact").and_then(Json::as_str)?.trim().to_owned();
            let score = f.get("score").and_then(Json::as_f64).filter(|s| (0.0..=1.0).contains(s))?;
            let tags = f
                .get("tags")
                .and_then(Json::as_array)
                .map(|t| t.iter().filter_map(Json::as_str).map(str::to_owned).take(16).collect())
                .unwrap_or_default();
            (!fact.is_empty()).then_some(Fact { fact, score, tags })
        })
        .take(MAX_FACTS)
        .collect())
}

/// The decisions of a consolidation answer. UPDATE and DELETE must name one of `known` (an
/// invented id is ignored); an answer without a `memory` list is `llm_unavailable`.
pub fn parse_decisions(text: &str, known: &[String], fact: &str) -> Result<Vec<Decision>> {
    let v = json_object(text).ok_or_else(|| unreadable("consolidation", text))?;
    let list = v.get("memory").and_then(Json::as_array).ok_or_else(|| unreadable("consolidation", text))?;
    let mut out = Vec::new();
    for d in list {
        let id = d.get("id").and_then(Json::as_str).unwrap_or_default();
        let text = d.get("text").and_then(Json::as_str).map(str::trim).filter(|t| !t.is_empty());
        let event = d.get("event").and_then(Json::as_str).unwrap_or_default().to_ascii_uppercase();
        let known_id = known.iter().any(|k| k == id);
        out.push(match event.as_str() {
            "ADD" => Decision::Add { text: text.unwrap_or(fact).to_owned() },
            "UPDATE" if known_id => Decision::Update { id: id.to_owned(), text: text.unwrap_or(fact).to_owned() },
            "DELETE" if known_id => Decision::Delete { id: id.to_owned() },
            "NONE" | "UPDATE" | "DELETE" => Decision::Nothing,
            _ => return Err(unreadable("consolidation", text.unwrap_or(&event))),
        });
    }
    Ok(out)
}

/// The extraction request for an exchange.
pub(crate) fn extraction_request(x: &Exchange) -> ChatRequest {
    let user = format!("User: {}\n\nAssistant: {}", x.user, x.assistant);
    ChatRequest { system: Some(EXTRACT_PROMPT.to_owned()), format: Format::JsonObject, ..ChatRequest::user(user) }
}

/// The consolidation request for `fact` beside `similar`.
pub(crate) fn consolidation_request(fact: &Fact, similar: &[Memory]) -> ChatRequest {
    let existing: Vec<Json> = similar.iter().map(|m| json!({"id": m.id, "text": m.content})).collect();
    let user = format!("Stored memories:\n{}\n\nNew fact: {}", Json::from(existing), fact.fact);
    ChatRequest { system: Some(CONSOLIDATE_PROMPT.to_owned()), format: Format::JsonObject, ..ChatRequest::user(user) }
}

/// The model extraction uses: the configured one, or `extract.model` on the same provider.
pub(crate) fn model(llm: &LlmConfig, cfg: &ExtractConfig) -> LlmConfig {
    let mut llm = llm.clone();
    if let Some(m) = &cfg.model {
        llm.model = m.clone();
    }
    llm
}

/// Extracts facts from the exchange ending at `leaf` (default: the latest leaf) of `session`
/// and consolidates them into the agent's memories, or into its space when it has one
/// (`memory::shared`); each stored fact gets `tags` (the agent's scope, `memory.tags`, or a
/// turn's) besides its own.
pub async fn run(memories: &Memories<'_>, session: &str, leaf: Option<&str>, tags: &[String]) -> Result<Extracted> {
    let Some(x) = exchange(memories, session, leaf)? else { return Ok(Extracted::default()) };
    match shared::linked(memories.env)? {
        Some(l) => into_space(memories.env, &l.space, session, &x, tags).await,
        None => distill(memories, session, &x, Source { agent: None, tags }).await,
    }
}

/// Where facts being distilled come from, as they are stored with them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Source<'a> {
    /// The agent, when these memories are a space's (each memory's `metadata.agent`).
    pub agent: Option<&'a str>,
    /// Tags each fact gets besides its own (the scope it was distilled in).
    pub tags: &'a [String],
}

/// Distills `x`, an exchange of `session`, into these memories, as `from` says.
pub async fn distill(memories: &Memories<'_>, session: &str, x: &Exchange, from: Source<'_>) -> Result<Extracted> {
    let agent = from.agent;
    let cfg = memories.config().extract.unwrap_or_default();
    let env = memories.env;
    let mut out = Extracted::default();
    let x = Exchange { user: cut(&x.user), assistant: cut(&x.assistant), user_id: x.user_id.clone() };
    let llm = model(env.llm, &cfg);
    let reply = complete(env.transport, &llm, &extraction_request(&x)).await?;
    out.calls += 1;
    add_usage(&mut out.usage, reply.usage);
    let facts: Vec<Fact> = parse_facts(&reply.text)?.into_iter().filter(|f| f.score >= cfg.min_score).collect();
    // Every decision first, then the writes: a failing call writes nothing.
    let mut plan = Vec::new();
    for f in facts {
        // Similar by the fact, its tags and what the user said (a correction often names the old
        // value only there: "I moved from Paris to Berlin").
        let text = format!("{} {} {}", f.fact, f.tags.join(" "), x.user);
        // Only this session's `conversation` memories: another session's are not its to change.
        let filter = Filter { reach: Reach::Sessions(vec![session.to_owned()]), ..Filter::default() };
        let q = Query { text, limit: SIMILAR, filter };
        let similar = memories.similar(&q).await?;
        let decisions = if similar.is_empty() {
            vec![Decision::Add { text: f.fact.clone() }]
        } else {
            let reply = complete(env.transport, &llm, &consolidation_request(&f, &similar)).await?;
            out.calls += 1;
            add_usage(&mut out.usage, reply.usage);
            let known: Vec<String> = similar.iter().map(|m| m.id.clone()).collect();
            parse_decisions(&reply.text, &known, &f.fact)?
        };
        plan.push((f, decisions));
    }
    for (f, decisions) in plan {
        let new = NewMemory {
            content: f.fact.clone(),
            category: Category::Core,
            tags: with_scope(&f.tags, from.tags),
            score: Some(f.score),
            session_id: Some(session.to_owned()),
            message_id: Some(x.user_id.clone()).filter(|id| !id.is_empty()),
            metadata: agent.map(|a| [("agent".to_owned(), Json::from(a))].into_iter().collect()).unwrap_or_default(),
            ..NewMemory::default()
        };
        apply(memories, &new, decisions, &mut out).await?;
    }
    Ok(out)
}

/// `POST /memories` with `consolidate: true`: `new` is shown to the model beside the most similar
/// memories that hold now, as extraction does with a fact, and stored as it decides: memories it
/// updates or deletes stop holding, superseded by `new`; when it finds `new` already said, the
/// most similar memory is the answer, unchanged (`Stored::Merged`). The model is asked before
/// anything is written. What the caller named comes first: the memories `new.supersedes` names
/// are checked before the model is asked (`not_found`, `conflict`: nothing stored), and when it
/// names any, `new` is stored superseding them whatever the model answers.
pub async fn consolidate(memories: &Memories<'_>, new: NewMemory, by: By) -> Result<(Memory, Stored)> {
    let env = memories.env;
    store::check_new(&new, env.now.iso())?;
    memories.admits(new.category)?;
    store::check_supersedes(env.sql, &new.supersedes, &env.reach, env.now.iso())?;
    if env.llm.provider == Provider::None {
        return Err(Error::new(ErrorKind::NotConfigured, "consolidate needs a model: no LLM is configured"));
    }
    let cfg = memories.config().extract.unwrap_or_default();
    let llm = model(env.llm, &cfg);
    // The memories it may replace: core and daily ones, and its own session's conversation.
    let reach = Reach::Sessions(new.session_id.iter().cloned().collect());
    let text = format!("{} {}", new.content, new.tags.join(" "));
    let similar =
        memories.similar(&Query { text, limit: SIMILAR, filter: Filter { reach, ..Filter::default() } }).await?;
    if similar.is_empty() {
        return memories.remember(new, by).await;
    }
    let fact = Fact { fact: new.content.clone(), score: new.score.unwrap_or(1.0), tags: new.tags.clone() };
    let reply = complete(env.transport, &llm, &consolidation_request(&fact, &similar)).await?;
    let known: Vec<String> = similar.iter().map(|m| m.id.clone()).collect();
    let mut supersedes = new.supersedes.clone();
    let mut said = false;
    for d in parse_decisions(&reply.text, &known, &fact.fact)? {
        match d {
            Decision::Update { id, .. } | Decision::Delete { id } => supersedes.push(id),
            Decision::Add { .. } => said = true,
            Decision::Nothing => {}
        }
    }
    if !said && supersedes.len() == new.supersedes.len() && new.supersedes.is_empty() {
        return Ok((similar[0].clone(), Stored::Merged));
    }
    memories.remember(NewMemory { supersedes, ..new }, by).await
}

/// A fact's own tags and then the scope's it lacks, at most 16 (the scope's kept first: a fact
/// stored in a scope must be found in it).
fn with_scope(own: &[String], scope: &[String]) -> Vec<String> {
    let mut tags: Vec<String> = scope.to_vec();
    let room = store::MAX_TAGS.saturating_sub(tags.len());
    tags.extend(own.iter().filter(|t| !scope.contains(t)).take(room).cloned());
    tags
}

fn add_usage(total: &mut Usage, u: Usage) {
    total.input_tokens += u.input_tokens;
    total.output_tokens += u.output_tokens;
}

/// Carries out the model's decisions for one fact (`new`, the fact as a memory): an ADD stores
/// its text; an UPDATE stores the new text superseding the old memory (the same text again only
/// re-scores it); a DELETE invalidates a memory, superseded by what this fact stored, if anything.
/// A decision that no longer applies (its memory changed meanwhile) is a warning.
async fn apply(memories: &Memories<'_>, new: &NewMemory, decisions: Vec<Decision>, out: &mut Extracted) -> Result<()> {
    let events = memories.env.events;
    let mut stored: Option<String> = None;
    let mut deletes = Vec::new();
    for d in decisions {
        let result = match d {
            Decision::Add { text } => {
                memories.remember(NewMemory { content: text, ..new.clone() }, By::Extract).await.map(Some)
            }
            Decision::Update { id, text } => {
                let same = store::get(memories.env.sql, &id, memories.env.now.iso())?
                    .is_some_and(|old| store::normalize(&old.content) == store::normalize(&text));
                if same {
                    let patch = Patch { score: Some(new.score), ..Patch::default() };
                    memories.patch(&id, &patch, By::Extract).await.map(|m| Some((m, Stored::Merged)))
                } else {
                    let replacing = NewMemory { content: text, supersedes: vec![id.clone()], ..new.clone() };
                    let done = memories.remember(replacing, By::Extract).await;
                    if done.is_ok() {
                        out.deleted.push(id);
                    }
                    done.map(Some)
                }
            }
            Decision::Delete { id } => {
                deletes.push(id);
                Ok(None)
            }
            Decision::Nothing => Ok(None),
        };
        match result {
            Ok(Some((m, stored_as))) => {
                stored.get_or_insert_with(|| m.id.clone());
                match stored_as {
                    Stored::Created => out.added.push(m),
                    Stored::Merged | Stored::Replaced => out.updated.push(m),
                }
            }
            Ok(None) => {}
            Err(e) if e.kind == ErrorKind::Internal => return Err(e),
            Err(e) => events.warn(&format!("memory extract: fact {:?} not stored: {}", new.content, e.message)),
        }
    }
    for id in deletes {
        match memories.invalidate(&id, stored.as_deref()) {
            Ok(m) => out.deleted.push(m.id),
            Err(e) if e.kind == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Distills the exchange that ends at `leaf` into memories, after a turn's answer: a failure
/// is reported to `env.events.warn`.
pub(crate) async fn after(memories: &Memories<'_>, session: &str, leaf: &str, tags: &[String]) {
    if let Err(e) = run(memories, session, Some(leaf), tags).await {
        memories.env.events.warn(&format!("memory extract after the turn of {session}: {}", e.message));
    }
}

/// Hands the exchange of `session` to `space`, which distills it into its memories as the agent
/// would into its own (`POST /link/extract`).
async fn into_space(env: &Env<'_>, space: &str, session: &str, x: &Exchange, tags: &[String]) -> Result<Extracted> {
    let exchange = serde_json::to_value(x).map_err(|e| Error::internal(e.to_string()))?;
    let op =
        Operation::Extract { agent: env.agent.to_owned(), session: session.to_owned(), exchange, tags: tags.to_vec() };
    let answer = crate::space::request(env.spaces, space, &op).await?;
    let memories =
        |k: &str| -> Option<Vec<Memory>> { answer.get(k)?.as_array()?.iter().map(Memory::from_json).collect() };
    let read = || {
        Some(Extracted {
            added: memories("added")?,
            updated: memories("updated")?,
            deleted: answer
                .get("deleted")?
                .as_array()?
                .iter()
                .map(|d| d.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
            ..Extracted::default()
        })
    };
    read().ok_or_else(|| crate::space::unavailable(format!("space {space}: an answer that could not be read")))
}
