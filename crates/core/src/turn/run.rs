//! The agent turn: a user message (or a continuation after client tools) in, **one** stored
//! assistant message out.
//!
//! ```text
//! start: validate, read the branch (the question's vector asked for meanwhile) ──▶ the
//! memories for the user's text (a `<user-memory>` block after the prompt) ──▶ the frozen prompt, the conversation (truncated, sanitized,
//! capped keeping summaries), the tools ──▶ `start` (the turn runs: followed and stopped
//! through `Live`) ──▶ steps: the model, server tools, the model again (bounded) ──▶ one
//! transaction (Session::commit_turn) ──▶ frames ──▶ compaction ──▶ after the answer: memory
//! extraction (`memory::After`)
//! ```
//!
//! **A failure changes nothing**: nothing is written until the model is done; a provider or
//! tool-store failure writes nothing (with `chat.onDisconnect: "finish"`, the user message was
//! stored at the start and stays). Effects of server tools that already ran (a `set_context`
//! write) are not undone. **A stop keeps what was shown**: a turn told to stop (its
//! [`Stop`] set, or its caller unable to take the next event) ends its model call at once and
//! stores the reply as far as it streamed, marked `metadata.stopped` (a stop before the first
//! piece stores the user message alone). **Continuations are checked against storage** before
//! any model call. A caller's own system text for one turn (`TurnRequest::instructions`: an
//! OpenAI client's system message) goes after the frozen prompt and is never stored; a turn
//! with [`Record::Discard`] (a Responses `store: false`) answers and stores no message.

use std::rc::Rc;

use serde_json::{json, Map, Value as Json};

use super::conversation::{
    build, client_views, cut_back, is_empty_reply, validate_continuation, with_results, Rejection, NOT_A_PREFIX,
};
use super::AssistantParts;
use crate::after::{After, Cap};
use crate::blobs::BoxFuture;
use crate::compaction::truncate::TruncateOptions;
use crate::config::category::Category;
use crate::config::{CacheConfig, InjectConfig, MemoryConfig, OnDisconnect};
use crate::context::mcp::Offered;
use crate::context::tools::Tool;
use crate::directory::usage::Measured;
use crate::error::{Error, ErrorKind, Result};
use crate::ids::new_id;
pub use crate::live::event::{ChatEvent, Outcome, Runner};
use crate::live::stop::{until_stopped, Stop};
use crate::live::{Ending, Registered};
use crate::llm::{chat, ChatMessage, ChatRequest, Format, LlmConfig, Piece, PromptCache, ToolCall, ToolSpec, Usage};
use crate::memory::inject::render;
use crate::memory::recall::{Query, MAX_LIMIT};
use crate::memory::shared;
use crate::memory::{Filter, Memories};
use crate::parts::{parts, str_field, ToolState};
use crate::session::{Placement, Session, TurnWrite};
use crate::store::history::Overlays;
use crate::store::message::indexed_text;
use crate::store::message::NewMessage;
use crate::store::tree::Parent;
use crate::tokens::estimate_str;
use crate::wire::{Delta, Frame, ToolAnswer};

/// The error stored for a remote tool's call that a stop ended before the server answered.
const STOPPED_DURING_TOOL: &str = "Error: the turn was stopped before the tool answered";

/// What a client asked for.
pub enum Ask {
    /// A new user message, attached like an append (`parentId` absent / null / an id).
    Message { msg: NewMessage, parent: Parent },
    /// A continuation after client-side tools: the branch with their results. The reply is a
    /// new message under the last one.
    Continue { messages: Vec<Json> },
    /// The AI SDK's `useChat` body: the branch as the client holds it, ending in a new user
    /// message, a stored user message to answer (again), or a stored assistant message with
    /// client tool results to continue, in that same message.
    Chat { messages: Vec<Json>, trigger: Trigger },
}

/// Why a `useChat` client sent its messages (its `trigger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// `submit-message`: a new user message, or tool results to continue with.
    Submit,
    /// `regenerate-message`: another answer under the user message the branch ends with.
    Regenerate,
}

/// A turn as asked: the message or continuation, and the caller's own tools (offered to the
/// model after the session's, answered by the caller).
pub struct TurnRequest {
    pub ask: Ask,
    pub tools: Vec<ToolSpec>,
    /// How long-term memory takes part (the `memory` of a chat body: `false` skips inject and
    /// extract for this turn, an object overrides the configuration for it).
    pub memory: MemoryUse,
    /// The turn's stop signal (see [`Stop`]): set by the caller's transport when its client goes
    /// away or cancels, and by `POST …/chat/stop` through the running turns.
    pub stop: Stop,
    /// What the provider's prompt cache keeps of this turn's steps.
    pub cache: CacheUse,
    /// The caller's own system text for this turn only (an OpenAI client's system message, a
    /// Responses `instructions`): sent after the frozen prompt, never stored, never frozen.
    pub instructions: Option<String>,
    /// Whether the turn's messages are stored (a Responses `store: false` keeps nothing).
    pub record: Record,
    /// Another model of the configured provider for this turn, one `chat.models` names (an
    /// OpenAI client's `model`); `None`: `LLM_MODEL`.
    pub model: Option<String>,
}

/// Whether a turn stores what it exchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Record {
    /// The user message and the reply are stored (and compaction and extraction follow).
    #[default]
    Store,
    /// The turn runs and answers, and writes no message (server tools' own effects stay).
    Discard,
}

/// What the provider's prompt cache keeps of a turn's steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheUse {
    /// As configured (`SESSION_CONFIG.chat.cache`).
    #[default]
    AsConfigured,
    /// This turn's own `cache` (`None`: nothing, `cache: false`).
    Instead(Option<CacheConfig>),
}

/// How a turn uses long-term memory: as `SESSION_CONFIG.memory` says, but for what a call's
/// memory spec sets (the seeds' per-call `memory`; docs/REFERENCE.md#memory-scope). Each field
/// `None` is as configured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryUse {
    /// Inject the memories recalled for the user's text (`true` with memory not configured:
    /// with the defaults).
    pub inject: Option<bool>,
    /// Distill the exchange into memories after the answer.
    pub extract: Option<bool>,
    /// The scope by tags for this turn, instead of `memory.tags`: inject only memories holding
    /// one of them (none: every memory), and extraction tags what it stores with them.
    pub tags: Option<Vec<String>>,
    /// Inject only memories of these categories (instead of `memory.categories` and
    /// `memory.inject.categories`).
    pub categories: Option<Vec<Category>>,
    /// Inject at most this many (instead of `memory.inject.limit`).
    pub limit: Option<i64>,
}

impl MemoryUse {
    /// Neither inject nor extract (`memory: false`).
    pub fn skip() -> MemoryUse {
        MemoryUse { inject: Some(false), extract: Some(false), ..MemoryUse::default() }
    }

    /// The values within their ranges: tags as `memory.tags`, categories not empty, `limit` 1-50.
    pub fn check(&self) -> Result<()> {
        if let Some(t) = &self.tags {
            crate::config::memory::check_scope_tags("memory.tags", t)?;
        }
        if self.categories.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::invalid("memory.categories must be a non-empty array"));
        }
        match self.limit {
            Some(n) => crate::config::memory::in_range(n, "memory.limit", 1, 50),
            None => Ok(()),
        }
    }

    /// What a turn does with memory under `config` (`SESSION_CONFIG.memory`).
    fn plan(&self, config: Option<&MemoryConfig>) -> MemoryPlan {
        let defaults = MemoryConfig::default();
        let base = config.unwrap_or(&defaults);
        let configured = config.and_then(|m| m.inject.clone());
        let inject = match self.inject {
            Some(false) => None,
            Some(true) => Some(configured.unwrap_or_default()),
            None => configured,
        };
        let inject = inject.map(|i| InjectConfig {
            categories: self.categories.clone().unwrap_or_else(|| base.inject_categories(&i)),
            limit: self.limit.unwrap_or(i.limit),
            ..i
        });
        let extract = self.extract.unwrap_or(config.is_some_and(|m| m.extract.is_some()));
        let tags = self.tags.clone().unwrap_or_else(|| base.tags.clone());
        MemoryPlan { inject, tags, extract }
    }
}

/// What one turn does with long-term memory.
#[derive(Default)]
struct MemoryPlan {
    /// The injection it makes, if any (its categories and limit as the call and config say).
    inject: Option<InjectConfig>,
    /// The scope by tags: injected memories hold one of them, extracted ones get them.
    tags: Vec<String>,
    extract: bool,
}

/// A finished turn: the stored assistant message, how the turn ended, and the work it leaves
/// for after its answer (compaction, memory extraction).
pub struct Turn {
    /// The stored reply; `None` when a stop came before anything of it was shown.
    pub message: Option<Json>,
    pub ended: Ended,
    pub after: Vec<After>,
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The model answered (text, or a client tool's call to answer).
    Answered,
    /// It was stopped: stored as far as it streamed, with `metadata.stopped`.
    Stopped,
}

/// What the model sees first, and what will be written with the reply.
struct Start {
    /// The branch as clients see it, the new user message last.
    base: Vec<Json>,
    user: Option<NewMessage>,
    parent: Option<String>,
    updates: Vec<NewMessage>,
    /// The stored assistant message the reply extends (with the client's tool results in it),
    /// instead of a new message.
    extends: Option<Json>,
}

/// Runs one turn of `session`. `on_event` gets the turn's events as they come; an `Err` from it
/// (the caller cannot take more) stops the turn as `req.stop` does. Returns the stored
/// assistant message.
pub async fn turn(
    session: &Session<'_>,
    req: TurnRequest,
    on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
) -> Result<Turn> {
    match req.model.clone() {
        None => run_turn(session, req, on_event).await,
        // The named model answers, on the configured provider: its name is in the reply's
        // metadata and the usage ledger, and the token calibration is its own.
        Some(model) => {
            let llm = LlmConfig { model, ..session.env.llm.clone() };
            let env = session.env.with_llm(&llm);
            run_turn(&Session::new(&env, session.id), req, on_event).await
        }
    }
}

/// [`turn`] with `session`'s model. Boxed: the callers that inlined it each held a copy (a
/// schedule's run and the requests' turns; wasm gzip -9: about −7.5 KB).
fn run_turn<'a>(
    session: &'a Session<'a>,
    req: TurnRequest,
    on_event: &'a mut dyn FnMut(ChatEvent) -> Result<()>,
) -> BoxFuture<'a, Result<Turn>> {
    Box::pin(turn_body(session, req, on_event))
}

async fn turn_body(
    session: &Session<'_>,
    req: TurnRequest,
    on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
) -> Result<Turn> {
    let mut spans = Spans::start(session.env.timer);
    let mut server = session.tools()?;
    let remote = session.remote_tools().await;
    server.extend(remote.specs().cloned());
    for (i, t) in req.tools.iter().enumerate() {
        let clash = server.iter().chain(&req.tools[..i]).any(|s| s.name == t.name);
        if clash {
            return Err(Error::invalid(format!("tools[{i}]: a tool named {:?} already exists", t.name)));
        }
    }
    let continuation = match &req.ask {
        Ask::Message { .. } => false,
        Ask::Continue { .. } => true,
        // Memory takes part when the branch ends with a user message (new or stored).
        Ask::Chat { messages, trigger } => {
            *trigger == Trigger::Submit && messages.last().and_then(|m| str_field(m, "role")) == Some("assistant")
        }
    };
    let memory = match continuation {
        true => MemoryPlan::default(),
        false => req.memory.plan(session.env.config.memory.as_ref()),
    };
    // The question's vector is asked for while the branch is read (the embeddings call waits on
    // the network, the read on SQLite; the call is made first) and recall then uses it. A
    // request the read refuses does not wait for the vector.
    let early = match (&memory.inject, session.env.meaning().is_on()) {
        (Some(_), true) => question_text(&req.ask),
        _ => None,
    };
    spans.mark("tools");
    let asks_early = early.is_some();
    let mut vector_at = None;
    let ask_early = async {
        let asked = match &early {
            Some(text) => Some(session.env.meaning().query(text.trim()).await),
            None => None,
        };
        vector_at = Some(spans.since_start());
        Ok(asked)
    };
    let (asked, mut start) = futures::future::try_join(ask_early, start(session, req.ask, &server)).await?;
    spans.mark("branch and question vector");
    // The question: the new user message, or the stored one answered again.
    let question = match &start.user {
        Some(user) => Some(user.to_value()?),
        None => start.base.last().filter(|m| str_field(m, "role") == Some("user")).cloned(),
    };
    let injected = match (&memory.inject, &question) {
        (Some(cfg), Some(q)) => inject(session, cfg, &memory.tags, q, early.zip(asked)).await?,
        _ => None,
    };
    spans.mark("recall and injection");
    // Frozen with the turn's writes: a turn that fails stores nothing, not even the prompt.
    let (system, to_freeze) = session.context().prompt_for_turn().await?;
    spans.mark("prompt");
    let conversation =
        build(&std::mem::take(&mut start.base), session.env.config.chat.max_messages, &TruncateOptions::default());
    spans.mark("history window");
    if let Some(at) = vector_at.filter(|_| asks_early) {
        spans.note("question vector ready (from the start)", at);
    }
    session.env.events.spans("turn", &spans.done());
    if session.env.config.chat.on_disconnect == OnDisconnect::Finish && req.record == Record::Store {
        store_user_first(session, &mut start).await?;
    }
    let stop = req.stop;
    let running = session.env.live.start(session.id, &stop);
    let cache = match req.cache {
        CacheUse::AsConfigured => session.env.config.chat.cache,
        CacheUse::Instead(c) => c,
    };
    let reply = Reply {
        session,
        server: &server,
        remote: &remote,
        client: &req.tools,
        start,
        system,
        to_freeze,
        cache,
        injected,
        instructions: req.instructions,
        injects: memory.inject.is_some(),
        extracts: memory.extract.then_some(memory.tags),
        record: req.record,
    };
    let result = reply.run(conversation, &running, &stop, on_event).await;
    running.end(match &result {
        Ok(t) => Ending::Stored(t.message.clone()),
        Err(e) => Ending::Failed(e.clone()),
    });
    result
}

/// The phases of a turn before its model call, timed by the env's timer (`Events::spans`).
struct Spans<'a> {
    timer: &'a dyn Fn() -> f64,
    started: f64,
    last: f64,
    phases: Vec<(&'static str, f64)>,
}

impl<'a> Spans<'a> {
    fn start(timer: &'a dyn Fn() -> f64) -> Spans<'a> {
        let now = timer();
        Spans { timer, started: now, last: now, phases: Vec::new() }
    }
    /// The phase `name` ended now.
    fn mark(&mut self, name: &'static str) {
        let now = (self.timer)();
        self.phases.push((name, now - self.last));
        self.last = now;
    }
    fn since_start(&self) -> f64 {
        (self.timer)() - self.started
    }
    /// A figure beside the phases (not one of them).
    fn note(&mut self, name: &'static str, ms: f64) {
        self.phases.push((name, ms));
    }
    /// The phases, and their total as `before the model call`.
    fn done(mut self) -> Vec<(&'static str, f64)> {
        let total = self.last - self.started;
        self.phases.push(("before the model call", total));
        self.phases
    }
}

/// `chat.onDisconnect: "finish"`: the turn's user message is stored before the model is
/// called, so a client that reloads finds it; the reply goes under it.
async fn store_user_first(session: &Session<'_>, start: &mut Start) -> Result<()> {
    let Some(user) = start.user.take() else { return Ok(()) };
    let id = user.id.clone();
    let write = TurnWrite {
        user: Some(user),
        updates: std::mem::take(&mut start.updates),
        assistant: None,
        placement: Placement::New,
        parent: start.parent.take(),
        usage: Usage::default(),
        freeze: None,
        recalled: Vec::new(),
        ledger: None,
        input_estimate: 0,
    };
    session.commit_turn(write).await?;
    start.parent = Some(id);
    Ok(())
}

/// A turn past its checks: what the reply is written with.
struct Reply<'r, 'a> {
    session: &'r Session<'a>,
    server: &'r [ToolSpec],
    /// The remote tools among `server` (`SESSION_CONFIG.tools.mcp`).
    remote: &'r Offered,
    client: &'r [ToolSpec],
    start: Start,
    system: String,
    /// Whether `system` is to be frozen with the turn.
    to_freeze: bool,
    /// What the provider's prompt cache keeps of the steps.
    cache: Option<CacheConfig>,
    /// The `<user-memory>` block and the ids of the memories in it.
    injected: Option<(String, Vec<String>)>,
    /// The caller's system text for this turn (before the memory block).
    instructions: Option<String>,
    /// The tags extraction gives what it stores, when the turn extracts.
    extracts: Option<Vec<String>>,
    injects: bool,
    record: Record,
}

impl Reply<'_, '_> {
    /// Announces the reply (`start`), runs the model's steps and stores the reply (whole, or as
    /// far as it streamed when stopped). Every event goes to `running`'s followers too.
    async fn run(
        self,
        conversation: super::conversation::Conversation,
        running: &Registered<'_>,
        stop: &Stop,
        on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
    ) -> Result<Turn> {
        let session = self.session;
        let start = self.start;
        let (assistant_id, parts, created_at, mut meta) = match &start.extends {
            Some(m) => (
                str_field(m, "id").unwrap_or_default().to_owned(),
                AssistantParts::after(parts(m).to_vec()),
                str_field(m, "createdAt").unwrap_or(session.env.now.iso()).to_owned(),
                m.get("metadata").and_then(Json::as_object).cloned().unwrap_or_default(),
            ),
            None => (new_id()?, AssistantParts::default(), session.env.now.iso().to_owned(), Map::new()),
        };
        let before = parts.parts.len();
        let freeze = self.to_freeze.then(|| self.system.clone());
        // The caller's events, kept for followers; a caller that cannot take one stops the turn.
        let mut emit = |e: ChatEvent| -> Result<()> {
            running.record(&e);
            if on_event(e).is_err() {
                stop.stop();
            }
            match stop.is_stopped() {
                true => Err(Error::conflict("the turn was stopped")),
                false => Ok(()),
            }
        };
        let (mut parts, spent, ended) = match emit(ChatEvent::Start { message_id: assistant_id.clone() }) {
            Err(_) => (parts, Spent::default(), Ended::Stopped),
            Ok(()) => {
                let memory = self.injected.as_ref().map(|i| i.0.as_str());
                let tail = [self.instructions.as_deref(), memory].into_iter().flatten().collect::<Vec<_>>();
                let tail = (!tail.is_empty()).then(|| tail.join("\n\n"));
                let steps = Steps {
                    session,
                    server: self.server,
                    remote: self.remote,
                    client: self.client,
                    system: self.system,
                    memory: tail,
                    assistant_id: &assistant_id,
                    cache: self.cache,
                };
                let (parts, spent, ended) = steps.run(conversation.messages, parts, stop, &mut emit).await?;
                if ended == Ended::Answered {
                    let _ = emit(ChatEvent::Storing);
                }
                (parts, spent, ended)
            }
        };
        let usage = spent.usage;
        // An extended message's usage is that of all the turns that wrote it.
        let earlier = |key: &str| meta.get("usage").and_then(|u| u.get(key)).and_then(Json::as_i64).unwrap_or(0);
        let mut total = json!({"inputTokens": earlier("inputTokens") + usage.input_tokens,
            "outputTokens": earlier("outputTokens") + usage.output_tokens});
        // Of the input, what the provider read from its prompt cache (when it said any).
        let cached = earlier("cachedInputTokens") + usage.cached_input_tokens;
        if cached > 0 {
            total["cachedInputTokens"] = json!(cached);
        }
        meta.insert("model".into(), json!(session.env.llm.model));
        meta.insert("usage".into(), total);
        let recalled = self.injected.map(|i| i.1).unwrap_or_default();
        if self.injects {
            meta.insert("memories".into(), json!(recalled));
        }
        if ended == Ended::Stopped {
            meta.insert("stopped".into(), json!(true));
            parts.drop_unanswered();
        }
        // A stop before anything was shown stores no reply (an extended message keeps the
        // client's results it came with).
        let shown = parts.parts.len() > before || start.extends.is_some();
        let message = shown.then(|| parts.message(&assistant_id, &created_at, meta));
        let assistant = message.as_ref().map(NewMessage::from_json).transpose()?;
        let placement = if start.extends.is_some() { Placement::Extends } else { Placement::New };
        let write = TurnWrite {
            user: start.user,
            updates: start.updates,
            assistant,
            placement,
            parent: start.parent,
            usage,
            freeze,
            recalled,
            // A stopped turn's input tokens are estimated when the provider had not said.
            ledger: Some(if ended == Ended::Stopped { Measured::Estimated } else { Measured::Provider }),
            input_estimate: spent.input_estimate,
        };
        if self.record == Record::Discard {
            return Ok(Turn { message, ended, after: Vec::new() });
        }
        session.commit_turn(write).await?;
        // After the answer: compaction as after an append, or, when the cap left messages out
        // (the model forgot them), in any case when configured, so the next turn sees them in a
        // summary; then memory extraction (not of a stopped reply).
        let cap = if conversation.dropped > 0 { Cap::Dropped } else { Cap::Kept };
        let mut after = Vec::new();
        if let Some(leaf) = message.as_ref().and_then(|m| str_field(m, "id")) {
            let (sid, leaf) = (session.id.to_owned(), leaf.to_owned());
            after.push(After::Compact { session: sid.clone(), leaf: leaf.clone(), cap });
            if let Some(tags) = self.extracts.filter(|_| ended == Ended::Answered) {
                after.push(After::ExtractMemories { session: sid, leaf, tags });
            }
        }
        Ok(Turn { message, ended, after })
    }
}

/// What the steps of a turn spent: the provider's usage (estimated for a step cut short), and
/// our estimate of the input of the steps the provider counted.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Spent {
    pub(crate) usage: Usage,
    pub(crate) input_estimate: i64,
}

/// The input tokens of a model call, estimated: the system prompt, the messages and the tools'
/// definitions (for a call stopped before the provider said, and to calibrate estimates).
fn estimate_request(req: &ChatRequest) -> i64 {
    let text = |m: &ChatMessage| match m {
        ChatMessage::User { text } | ChatMessage::Assistant { text, .. } => estimate_str(text),
        ChatMessage::Tool { output, .. } => estimate_str(output),
    };
    let system = req.system.as_deref().map_or(0, estimate_str) + req.system_tail.as_deref().map_or(0, estimate_str);
    let tools: i64 = req
        .tools
        .iter()
        .map(|t| estimate_str(&t.name) + estimate_str(&t.description) + estimate_str(&t.input_schema.to_string()))
        .sum();
    system + req.messages.iter().map(text).sum::<i64>() + tools
}

/// The memories recalled for the user's message, as the `<user-memory>` block and their ids;
/// `None` when nothing relevant is stored. Conversation memories of other sessions stay out, and
/// with `tags` those holding none of them.
/// `asked`: a text's vector asked for already, or why it could not be made (used when it is the
/// question's text).
async fn inject(
    session: &Session<'_>,
    cfg: &InjectConfig,
    tags: &[String],
    question: &Json,
    asked: Option<(String, Result<Rc<[f32]>>)>,
) -> Result<Option<(String, Vec<String>)>> {
    let text = indexed_text(parts(question));
    if text.trim().is_empty() {
        return Ok(None);
    }
    let filter = Filter { any_tags: tags.to_vec(), ..Filter::default() };
    let query = Query { text: text.clone(), limit: MAX_LIMIT, filter };
    let memories = match asked {
        Some((asked_text, vector)) => Memories::new(session.env).with_vector(&asked_text, vector),
        None => Memories::new(session.env),
    };
    let own = memories.rank(&query);
    let scope = shared::Scope { categories: &cfg.categories, tags };
    let mut hits = shared::with_space(session.env, session.id, &text, MAX_LIMIT, scope, own).await?;
    hits.retain(|h| {
        (tags.is_empty() || h.memory.tags.iter().any(|t| tags.contains(t)))
            && cfg.categories.contains(&h.memory.category)
            && (h.memory.category != Category::Conversation
                || h.memory.source.as_ref().is_some_and(|s| s.session_id == session.id))
    });
    hits.truncate(cfg.limit as usize);
    Ok(render(&hits, cfg.token_budget))
}

/// The text a turn's memory recall will be asked with, as far as the request says before the
/// branch is read: the new user message's, or the last message's when it is a user's (a
/// `useChat` body). `None` for a continuation or an empty text.
fn question_text(ask: &Ask) -> Option<String> {
    let text = match ask {
        Ask::Message { msg, .. } => indexed_text(parts(&msg.to_value().ok()?)),
        Ask::Continue { .. } => return None,
        Ask::Chat { messages, .. } => {
            let last = messages.last().filter(|m| str_field(m, "role") == Some("user"))?;
            indexed_text(parts(last))
        }
    };
    (!text.trim().is_empty()).then_some(text)
}

/// Checks what was asked against what is stored and reads the branch the model will see.
async fn start(session: &Session<'_>, ask: Ask, server: &[ToolSpec]) -> Result<Start> {
    let (tree, sid) = (session.tree(), session.id);
    match ask {
        Ask::Message { msg, parent } => {
            tree.check_parent(&parent)?;
            if tree.contains(&msg.id)? {
                if !unanswered(session, &msg.id)? {
                    return Err(Error::conflict(format!("message {} is already in session {sid}", msg.id)));
                }
                // Sent again after a stop: answered again, beside the stopped reply.
                let base = branch(session, Some(&msg.id)).await?;
                return Ok(Start { base, user: None, parent: Some(msg.id), updates: Vec::new(), extends: None });
            }
            let parent_id = tree.parent_id(&parent)?;
            let mut base = branch(session, parent_id.as_deref()).await?;
            base.push(msg.to_value()?);
            Ok(Start { base, user: Some(msg), parent: parent_id, updates: Vec::new(), extends: None })
        }
        Ask::Continue { messages } => {
            let leaf = messages
                .last()
                .and_then(|m| m.get("id"))
                .and_then(Json::as_str)
                .ok_or_else(|| Error::invalid("messages: the last message needs an id"))?
                .to_owned();
            if !tree.contains(&leaf)? {
                let reason = format!("message {leaf} is not in session {sid}");
                return Err(Rejection { code: NOT_A_PREFIX, reason, index: messages.len() - 1 }.into());
            }
            let mut stored = branch(session, Some(&leaf)).await?;
            let names: Vec<&str> = server.iter().map(|d| d.name.as_str()).collect();
            let cut = cut_stopped(&mut stored, &messages);
            let changed = validate_continuation(&stored, &messages, &names)?;
            let cut = cut.into_iter().filter(|i| !changed.contains(i)).map(|i| &stored[i]);
            let changed = changed.iter().map(|&i| &messages[i]);
            let updates = changed.chain(cut).map(NewMessage::from_json).collect::<Result<_>>()?;
            Ok(Start { base: messages, user: None, parent: Some(leaf), updates, extends: None })
        }
        Ask::Chat { messages, trigger } => chat_start(session, messages, trigger, server).await,
    }
}

/// [`start`] for the AI SDK's `useChat` body. What the client holds is checked against the
/// stored branch as the AI SDK changes messages ([`client_view`]: no `createdAt`, `step-start`
/// parts, part states, provider fields): only a new user message at the end, client tool results
/// and approval answers may differ. The model then reads the stored messages (with those
/// results), never the client's copies.
async fn chat_start(
    session: &Session<'_>,
    messages: Vec<Json>,
    trigger: Trigger,
    server: &[ToolSpec],
) -> Result<Start> {
    let (tree, sid) = (session.tree(), session.id);
    // A reply the client holds empty (stopped before its first piece) stands for none.
    let last = messages.len() - 1;
    let messages: Vec<Json> =
        messages.into_iter().enumerate().filter(|(i, m)| *i == last || !is_empty_reply(m)).map(|(_, m)| m).collect();
    let id_of = |i: usize| -> Result<String> {
        str_field(&messages[i], "id")
            .map(str::to_owned)
            .ok_or_else(|| Error::invalid(format!("messages[{i}].id must be a string")))
    };
    let last = messages.len() - 1;
    let last_id = id_of(last)?;
    let names: Vec<&str> = server.iter().map(|d| d.name.as_str()).collect();
    // The stored branch the client's messages up to `upto` must be, with their results merged.
    // (Stopped replies the client holds shorter are cut back to its copy, and written so.)
    let checked = |mut stored: Vec<Json>, upto: usize| -> Result<(Vec<Json>, Vec<NewMessage>, Vec<usize>)> {
        let cut = cut_stopped(&mut stored, &messages[..upto]);
        let (ours, theirs) = client_views(&stored, &messages[..upto]);
        let changed = validate_continuation(&ours, &theirs, &names)?;
        let mut merged = stored;
        for &i in &changed {
            merged[i] = with_results(&merged[i], &messages[i]);
        }
        let written = changed.iter().chain(cut.iter().filter(|i| !changed.contains(i)));
        let updates = written.map(|&i| NewMessage::from_json(&merged[i])).collect::<Result<_>>()?;
        Ok((merged, updates, changed))
    };
    if !tree.contains(&last_id)? {
        if trigger == Trigger::Regenerate {
            return Err(Error::invalid(format!(
                "regenerate-message answers again under a stored user message; message {last_id} is not in session {sid}"
            )));
        }
        let msg = NewMessage::from_json(&messages[last])?;
        if msg.role != "user" || crate::session::is_synthetic(&msg) {
            return Err(Error::invalid("the last of messages, when it is new, must be a user message"));
        }
        let parent = if last == 0 { None } else { Some(id_of(last - 1)?) };
        if let Some(p) = parent.as_deref() {
            if !tree.contains(p)? {
                let reason = format!("message {p} is not in session {sid}");
                return Err(Rejection { code: NOT_A_PREFIX, reason, index: last - 1 }.into());
            }
        }
        let stored = branch(session, parent.as_deref()).await?;
        let (mut base, updates, _) = checked(stored, last)?;
        base.push(msg.to_value()?);
        return Ok(Start { base, user: Some(msg), parent, updates, extends: None });
    }
    let stored = branch(session, Some(&last_id)).await?;
    let (base, mut updates, changed) = checked(stored, messages.len())?;
    match (str_field(&base[last], "role"), trigger) {
        (Some("user"), _) => Ok(Start { base, user: None, parent: Some(last_id), updates, extends: None }),
        (Some("assistant"), Trigger::Submit) => {
            // The last message is the one the reply extends: it is written once, with the reply.
            if changed.last() == Some(&last) {
                updates.pop();
            }
            let extends = Some(base[last].clone());
            Ok(Start { base, user: None, parent: None, updates, extends })
        }
        (Some("assistant"), Trigger::Regenerate) => Err(Error::invalid(
            "regenerate-message: end messages with the user message to answer again (the AI SDK drops the \
             assistant message it regenerates)",
        )),
        _ => Err(Error::invalid("the last of messages must be a user or an assistant message")),
    }
}

/// Stopped replies that the client's `theirs` holds shorter than `stored` (see [`cut_back`]) are
/// cut back to the client's copy; the indices of those cut.
fn cut_stopped(stored: &mut [Json], theirs: &[Json]) -> Vec<usize> {
    let mut cut = Vec::new();
    for (i, (s, t)) in stored.iter_mut().zip(theirs).enumerate() {
        if let Some(c) = cut_back(s, t) {
            *s = c;
            cut.push(i);
        }
    }
    cut
}

/// Whether the stored message `id` is a user message with no reply but stopped ones (then the
/// same message sent again is answered again).
fn unanswered(session: &Session<'_>, id: &str) -> Result<bool> {
    let tree = session.tree();
    let as_json = |raw: &crate::store::message::RawMessage| serde_json::from_str::<Json>(raw.get()).ok();
    let Some(stored) = tree.get(id)?.as_ref().and_then(as_json) else { return Ok(false) };
    if str_field(&stored, "role") != Some("user") {
        return Ok(false);
    }
    let (replies, _) = tree.children(id, None, None)?;
    Ok(replies
        .iter()
        .filter_map(as_json)
        .all(|r| r.get("metadata").and_then(|m| m.get("stopped")) == Some(&Json::Bool(true))))
}

/// The stored messages of the path to `leaf` as clients see them (overlays applied, whole).
async fn branch(session: &Session<'_>, leaf: Option<&str>) -> Result<Vec<Json>> {
    let Some(leaf) = leaf else { return Ok(Vec::new()) };
    let text = session.history_text(Some(leaf), Overlays::Applied).await?.value;
    serde_json::from_str(&text).map_err(|e| Error::internal(format!("stored history is not JSON: {e}")))
}

/// The model's steps of one turn.
struct Steps<'s, 'a> {
    session: &'s Session<'a>,
    server: &'s [ToolSpec],
    /// The remote tools among `server`, run by their MCP servers.
    remote: &'s Offered,
    client: &'s [ToolSpec],
    system: String,
    /// The `<user-memory>` block of this turn, sent after the frozen prompt.
    memory: Option<String>,
    assistant_id: &'s str,
    /// What the provider's prompt cache keeps of each step.
    cache: Option<CacheConfig>,
}

impl Steps<'_, '_> {
    /// [`Steps::steps`], boxed: a turn and a schedule's fresh run both call it, and through the
    /// box its code is made once rather than copied into each caller (wasm gzip -9: −2 KB).
    fn run<'a>(
        &'a self,
        messages: Vec<ChatMessage>,
        parts: AssistantParts,
        stop: &'a Stop,
        on_event: &'a mut dyn FnMut(ChatEvent) -> Result<()>,
    ) -> BoxFuture<'a, Result<(AssistantParts, Spent, Ended)>> {
        Box::pin(self.steps(messages, parts, stop, on_event))
    }

    /// Calls the model, runs the server tools it called and calls it again, until it answers
    /// without tools, calls a client tool (the turn ends with that call pending), the
    /// configured most steps are done, or `stop` is set (the model call in flight is dropped:
    /// its connection closes). Returns the reply's parts, the usage of all steps (an estimate
    /// for a step cut short) and how the turn ended. `on_event` fails only once stopped.
    async fn steps(
        &self,
        mut messages: Vec<ChatMessage>,
        mut parts: AssistantParts,
        stop: &Stop,
        on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
    ) -> Result<(AssistantParts, Spent, Ended)> {
        let (env, sid) = (self.session.env, self.session.id);
        let cfg = &env.config.chat;
        let tools: Vec<ToolSpec> = self.server.iter().chain(self.client).cloned().collect();
        let mut spent = Spent::default();
        for _step in 0..cfg.max_steps {
            let request = ChatRequest {
                system: Some(self.system.clone()),
                messages: messages.clone(),
                tools: tools.clone(),
                max_tokens: cfg.max_tokens,
                cache: self.cache.map(|marks| PromptCache { key: sid.to_owned(), marks }),
                system_tail: self.memory.clone(),
                format: Format::Text,
            };
            if on_event(ChatEvent::Step).is_err() {
                return Ok((parts, spent, Ended::Stopped));
            }
            // The text streamed in this step, for an estimate of its output if it is cut short.
            let mut streamed = 0usize;
            let mut forward = |piece: &Piece| -> Result<()> {
                parts.piece(piece);
                match piece {
                    Piece::Text(text) => {
                        streamed += text.len();
                        let delta = Delta { message_id: self.assistant_id, text };
                        self.session.publish(&Frame::Delta { session_id: sid, delta });
                        on_event(ChatEvent::Delta { message_id: self.assistant_id.to_owned(), text: text.clone() })
                    }
                    Piece::Reasoning(text) => {
                        streamed += text.len();
                        on_event(ChatEvent::Reasoning { text: text.clone() })
                    }
                }
            };
            let outcome = {
                let call = std::pin::pin!(chat(env.transport, env.llm, &request, &mut forward));
                until_stopped(stop, call).await
            };
            let reply = match outcome {
                Some(Ok(reply)) => reply,
                Some(Err(e)) if !stop.is_stopped() => return Err(e),
                _ => {
                    parts.end_step();
                    spent.usage.input_tokens += estimate_request(&request);
                    spent.usage.output_tokens += (streamed as i64 + 3) / 4;
                    return Ok((parts, spent, Ended::Stopped));
                }
            };
            parts.end_step();
            spent.usage.input_tokens += reply.usage.input_tokens;
            spent.usage.output_tokens += reply.usage.output_tokens;
            spent.usage.cached_input_tokens += reply.usage.cached_input_tokens;
            // What we estimated for what the provider counted (`directory::usage::calibration`);
            // a provider that reported no input tokens counted nothing to compare with.
            if reply.usage.input_tokens > 0 {
                spent.input_estimate += estimate_request(&request);
            }
            if reply.text.trim().is_empty() && reply.tool_calls.is_empty() {
                return Err(Error::new(ErrorKind::LlmUnavailable, "the model answered neither text nor a tool call"));
            }
            if !reply.reasoning.is_empty() {
                let (text, message_id) = (reply.reasoning.as_str(), self.assistant_id);
                self.session.publish(&Frame::Reasoning { text, session_id: sid, message_id });
            }
            if reply.tool_calls.is_empty() {
                let _ = on_event(ChatEvent::StepEnd);
                break;
            }
            let (results, pending) = match self.tools(&reply.tool_calls, &mut parts, stop, on_event).await {
                Err(_) if stop.is_stopped() => return Ok((parts, spent, Ended::Stopped)),
                other => other?,
            };
            if on_event(ChatEvent::StepEnd).is_err() && !pending {
                return Ok((parts, spent, Ended::Stopped));
            }
            if pending {
                break;
            }
            messages.push(ChatMessage::Assistant { text: reply.text.clone(), tool_calls: reply.tool_calls.clone() });
            messages.extend(results);
        }
        Ok((parts, spent, Ended::Answered))
    }

    /// Tells the session's sockets about one of the reply's tool calls (a `tool` frame): made,
    /// while it has no `outcome`, or answered by the server.
    fn publish_call(&self, call: &ToolCall, outcome: Option<&Outcome>) {
        let (state, answer) = match outcome {
            None => (ToolState::InputAvailable, None),
            Some(Outcome::Output(o)) => (ToolState::OutputAvailable, Some(ToolAnswer::Output(o))),
            Some(Outcome::Error(e)) => (ToolState::OutputError, Some(ToolAnswer::Error(e))),
        };
        self.session.publish(&Frame::Tool {
            tool_call_id: &call.id,
            tool_name: &call.name,
            state,
            input: &call.input,
            answer,
            session_id: self.session.id,
            message_id: self.assistant_id,
        });
    }

    /// Answers one step's tool calls: server tools run (their results go back to the model),
    /// client tools stay pending (`true`: the turn ends), unknown ones are errors the model
    /// reads. Each call and answer is an event of the turn. A remote tool's call is awaited
    /// beside `stop`: a stop ends it at once (its connection dropped), stored as a tool error.
    async fn tools(
        &self,
        calls: &[ToolCall],
        parts: &mut AssistantParts,
        stop: &Stop,
        on_event: &mut dyn FnMut(ChatEvent) -> Result<()>,
    ) -> Result<(Vec<ChatMessage>, bool)> {
        let mut results = Vec::new();
        let mut pending = false;
        for call in calls {
            let ToolCall { id, name, input } = call;
            self.publish_call(call, None);
            let server = Tool::from_name(name).filter(|_| self.server.iter().any(|t| &t.name == name));
            let remote = self.remote.find(name);
            let runner = if server.is_none() && remote.is_none() && self.client.iter().any(|c| &c.name == name) {
                Runner::Client
            } else {
                Runner::Server
            };
            on_event(ChatEvent::ToolCall { call_id: id.clone(), name: name.clone(), input: input.clone(), runner })?;
            let mut done = |outcome: Outcome| {
                self.publish_call(call, Some(&outcome));
                on_event(ChatEvent::ToolResult { call_id: id.clone(), outcome })
            };
            if server.is_some() {
                // A storage failure fails the whole turn; the model's mistakes (input of the
                // wrong shape included) are outputs it can correct.
                let output = match self.session.execute_tool(name, input).await {
                    Ok(ran) => ran.output,
                    Err(e) if matches!(e.kind, ErrorKind::InvalidRequest | ErrorKind::NotFound) => {
                        format!("Error: {}", e.message)
                    }
                    Err(e) => return Err(e),
                };
                parts.tool_done(name, id, input, &output);
                done(Outcome::Output(output.clone()))?;
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output });
            } else if let Some(tool) = remote {
                // Whatever goes wrong at the server is an error the model reads, never the turn's.
                let answer = {
                    let call = std::pin::pin!(self.session.call_remote(tool, input));
                    until_stopped(stop, call).await
                };
                let Some(answer) = answer else {
                    // Stopped while the server worked: what was shown (the call) is kept, with
                    // an error where its result would be, so the tree holds no call left open.
                    let error = STOPPED_DURING_TOOL.to_owned();
                    parts.tool_failed(name, id, input, &error);
                    self.publish_call(call, Some(&Outcome::Error(error)));
                    return Err(Error::conflict("the turn was stopped"));
                };
                let (output, outcome) = match answer {
                    Ok(output) => {
                        parts.tool_done(name, id, input, &output);
                        (output.clone(), Outcome::Output(output))
                    }
                    Err(error) => {
                        parts.tool_failed(name, id, input, &error);
                        (error.clone(), Outcome::Error(error))
                    }
                };
                done(outcome)?;
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output });
            } else if runner == Runner::Client {
                parts.tool_pending(name, id, input);
                pending = true;
            } else {
                let error = format!("Error: there is no tool named {name:?}");
                parts.tool_failed(name, id, input, &error);
                done(Outcome::Error(error.clone()))?;
                results.push(ChatMessage::Tool { call_id: id.clone(), name: name.clone(), output: error });
            }
        }
        Ok((results, pending))
    }
}

/// A turn on a fresh, empty history (a schedule's run, `crate::schedule`): the system prompt
/// rendered from the blocks as `session` sees them (a session id that has no state reads the
/// configured blocks with their configured content), the `core` memories recalled for `user` as
/// injection is configured, `tools` only, then the same steps as any turn. Nothing is stored:
/// the reply (an assistant message, `id` new) and the usage of all steps come back.
pub(crate) async fn fresh(session: &Session<'_>, user: &Json, tools: Vec<ToolSpec>) -> Result<(Json, Usage)> {
    let memory = session.env.config.memory.as_ref();
    let injected = match memory.and_then(|m| m.inject.as_ref().map(|i| (m, i))) {
        Some((m, cfg)) => {
            let core = m.categories.contains(&Category::Core).then_some(Category::Core);
            let cfg = InjectConfig { categories: core.into_iter().collect(), ..cfg.clone() };
            inject(session, &cfg, &m.tags, user, None).await?
        }
        None => None,
    };
    let system = session.context().render().await?;
    let conversation = build(std::slice::from_ref(user), 0, &TruncateOptions::default());
    let id = new_id()?;
    let steps = Steps {
        session,
        server: &tools,
        remote: &Offered::default(),
        client: &[],
        system,
        memory: injected.map(|i| i.0),
        assistant_id: &id,
        cache: session.env.config.chat.cache,
    };
    let (parts, spent, _) =
        steps.run(conversation.messages, AssistantParts::default(), &Stop::default(), &mut |_| Ok(())).await?;
    let mut meta = Map::new();
    meta.insert("model".into(), json!(session.env.llm.model));
    Ok((parts.message(&id, session.env.now.iso(), meta), spent.usage))
}
