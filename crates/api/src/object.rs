//! The Durable Object itself, runtime free: [`Object`] holds one agent's (or memory space's)
//! state between requests and decides what the object does around them. The Workers layer
//! (`src/agent.rs`) builds it with the platform's parts and forwards to it; the native tests
//! build the same object with native parts.
//!
//! What it decides, beside answering through the route table:
//! - **opening**: the store migrated, the schedule runs a crash cut short recovered, the
//!   embeddings model adopted, the configuration checked ([`Object::open`]); an object that
//!   cannot serve answers every request with why (`503`);
//! - **the rate limit** (`RATE_LIMIT`): requests and socket frames alike;
//! - **one route match and one admission** per request ([`Object::fetch`]), then the answer the
//!   route's row says (`routes::Delivery`): whole, a stream (a turn's server-sent events, the
//!   resume request, the export), or a WebSocket upgrade ([`Reply`]);
//! - **the directory's mark**: after a write that succeeded (a request answered 2xx, a socket
//!   frame, a streamed turn, the alarm's wake-up, the work after an answer) the object is marked
//!   dirty in the same turn as the write (`directory::report::mark`), when the platform binds a
//!   [`Directory`]; refused writes (rolled back, yet counted in `Sql::changes`) are taken as
//!   seen, never marked. The alarm then sends the report ([`Directory::send`]), retried later on
//!   a failure;
//! - **the alarm**: set for the next time the object needs it (`schedule::alarm::due`) after
//!   every write and wake-up, unless one is set for that time or sooner ([`Alarm`]);
//! - **the work after an answer** (`After`): in a task of its own once the answer is out, the
//!   embedding through one flight (`after::Flight`).
//!
//! What only the platform does is behind small traits: [`Alarm`] (the one alarm),
//! [`Directory`] (a report to the directory's shard), [`Tasks`] (work on its own, timers), and
//! the core's `Sql`, `Blobs`, `Transport`, `Events` and `Spaces`, with a clock. Futures cross
//! the crate boundary boxed; nothing is `Send` (the wasm is single-threaded).

use std::cell::Cell;
use std::rc::Rc;

use futures::channel::mpsc;
use futures::future::{select, Either};
use futures::stream::{self, LocalBoxStream};
use futures::StreamExt;
use session_agent_core::access::{RateLimit, Reach};
use session_agent_core::after::{After, Ask, Flight, Next as FlightNext};
use session_agent_core::blobs::{Blobs, BoxFuture};
use session_agent_core::cache::{self, ReadCache};
use session_agent_core::config::SessionConfig;
use session_agent_core::context::mcp::McpServers;
use session_agent_core::databases::Databases;
use session_agent_core::directory::report::{self, REPORT_DELAY_MS};
use session_agent_core::directory::Report;
use session_agent_core::env::{Env, Secrets};
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::events::Events;
use session_agent_core::ids::Role;
use session_agent_core::live::stop::Stop;
use session_agent_core::live::Live;
use session_agent_core::llm::embeddings::EmbeddingsConfig;
use session_agent_core::llm::rerank::RerankConfig;
use session_agent_core::llm::{LlmConfig, Transport};
use session_agent_core::schedule::{self, alarm, alarm::Woken};
use session_agent_core::space::Spaces;
use session_agent_core::sql::Sql;
use session_agent_core::store;
use session_agent_core::time::{iso_millis, Now};
use session_agent_core::transfer::export::AgentExport;
use session_agent_core::vectors::{self, Vectors};

use super::access::{claims_of, Claims};
use super::call::{Call, Params};
use super::chat::{self, Dialect, Streamed};
use super::http::{Request, Response};
use super::openai;
use super::routes::{Delivery, Op, Stream};
use super::running::{Running, Then};
use super::socket_tags::SocketTags;
use super::{enter, transfer, written, ws, Entry};

/// The object's one alarm, as the platform keeps it.
pub trait Alarm {
    /// When it is set for (ms since the epoch), if it is.
    fn get(&self) -> BoxFuture<'_, Result<Option<i64>>>;
    /// Sets it for `at_ms`. The call itself queues the write, in the current turn, so it
    /// commits with that turn's SQL writes; the future only says when it is stored.
    fn set(&self, at_ms: i64) -> BoxFuture<'static, Result<()>>;
}

/// The directory of agents and spaces, as the platform reaches it.
pub trait Directory {
    /// Sends `report` to its shard.
    fn send<'a>(&'a self, report: &'a Report) -> BoxFuture<'a, Result<()>>;
}

/// Work the platform runs on its own.
pub trait Tasks {
    /// Runs `work` in a task of its own (it starts after the current turn).
    fn spawn(&self, work: BoxFuture<'static, ()>);
    /// Ready after `ms` milliseconds.
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()>;
}

/// What the object runs on: the platform's parts.
pub struct Parts {
    pub sql: Rc<dyn Sql>,
    pub blobs: Rc<dyn Blobs>,
    pub transport: Rc<dyn Transport>,
    /// The sessions' listeners (the WebSockets), and where warnings go.
    pub events: Rc<dyn Events>,
    pub spaces: Rc<dyn Spaces>,
    pub alarm: Rc<dyn Alarm>,
    /// The directory, if the deployment keeps one: every write then marks the object dirty and
    /// its alarm reports it (none: nothing is marked).
    pub directory: Option<Rc<dyn Directory>>,
    pub tasks: Rc<dyn Tasks>,
    /// The time now, in milliseconds since the epoch.
    pub clock: Rc<dyn Fn() -> i64>,
    /// A clock for spans: milliseconds with fractions, only differences meaningful.
    pub timer: Rc<dyn Fn() -> f64>,
    /// The Worker's secrets, by the names the config gives.
    pub secrets: Rc<dyn Secrets>,
    /// The Worker's D1 bindings, by the names the config gives.
    pub databases: Rc<dyn Databases>,
}

/// What the object is and how it is configured.
pub struct Settings {
    pub role: Role,
    /// The object's `idFromName` name when the runtime told it (not when an alarm woke it).
    pub named: Option<String>,
    /// Its id: its name when it has no other (see [`Object::open`]).
    pub id: String,
    /// `SESSION_CONFIG`, or why it does not read.
    pub config: Result<SessionConfig>,
    pub llm: LlmConfig,
    pub embeddings: EmbeddingsConfig,
    pub rerank: RerankConfig,
    /// `RATE_LIMIT`, if set.
    pub rate: Option<RateLimit>,
    /// How long (ms) a directory report waits after the write that needs it.
    pub report_delay: i64,
    /// The vector indexes' ceiling of rows (`None`: the default).
    pub vectors_cap: Option<usize>,
    /// A setting that does not read: the object answers every request with it.
    pub broken: Option<Error>,
}

impl Settings {
    /// The settings of an object of `role` whose variables `var` reads (the Worker's vars and
    /// secrets: `LLM_*`, `EMBEDDINGS_*`, `RERANK_*`, `RATE_LIMIT`, `DIRECTORY_REPORT_MS`); a
    /// variable that does not read makes the object answer `503 not_configured` naming it.
    pub fn from_vars(role: Role, config: Result<SessionConfig>, var: &dyn Fn(&str) -> Option<String>) -> Settings {
        let unset = |e: Error| Some(Error::new(ErrorKind::NotConfigured, e.message));
        let (llm, llm_error) = LlmConfig::from_vars(var).map_or_else(|e| (LlmConfig::none(), unset(e)), |l| (l, None));
        let (embeddings, embeddings_error) =
            EmbeddingsConfig::from_vars(var).map_or_else(|e| (EmbeddingsConfig::none(), unset(e)), |c| (c, None));
        let (rerank, rerank_error) =
            RerankConfig::from_vars(var).map_or_else(|e| (RerankConfig::none(), unset(e)), |c| (c, None));
        let (rate, rate_error) = match var("RATE_LIMIT").filter(|v| !v.trim().is_empty()).map(|v| RateLimit::parse(&v))
        {
            None => (None, None),
            Some(Ok(r)) => (Some(r), None),
            Some(Err(e)) => (None, unset(e)),
        };
        let report_delay =
            var("DIRECTORY_REPORT_MS").and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(REPORT_DELAY_MS);
        Settings {
            role,
            named: None,
            id: String::new(),
            config,
            llm,
            embeddings,
            rerank,
            rate,
            report_delay,
            vectors_cap: None,
            broken: llm_error.or(embeddings_error).or(rerank_error).or(rate_error),
        }
    }
}

/// How a request is answered.
pub enum Reply {
    /// A whole answer.
    Whole(Response),
    /// A body written as it comes, with these headers (status 200).
    Stream { headers: Vec<(String, String)>, body: LocalBoxStream<'static, Vec<u8>> },
    /// A WebSocket to accept for `session`, opened with the scoped token `claims` (none: the
    /// admin token or a binding).
    Upgrade { session: String, claims: Option<Claims> },
}

/// A socket's message.
pub enum SocketMessage<'m> {
    Text(&'m str),
    Binary,
}

/// What one alarm did, for the platform's log.
pub struct Woke {
    pub woken: Woken,
    /// How long the wake-up ran (ms), the report not included.
    pub ms: i64,
}

/// Milliseconds of silence after which a streamed turn's body gets a [`KEEP_ALIVE`] comment:
/// a client that left is noticed at the second write after it left (the first is taken), so
/// a stop while the model is silent ends its call about twice this late (bench/turns.mjs).
const KEEP_ALIVE_MS: u64 = 250;
/// A server-sent events comment: every SSE reader skips it.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// One agent's memory (or one memory space), ready to answer requests. A cheap handle
/// (`Clone`): a streamed answer and the work after an answer keep a copy.
#[derive(Clone)]
pub struct Object {
    inner: Rc<Inner>,
}

struct Inner {
    parts: Parts,
    /// What requests read from `sql` and the next ones may reuse until a write.
    cache: ReadCache,
    /// The vector indexes of memories, messages and search entries (loaded on first use).
    vectors: Vectors,
    config: SessionConfig,
    llm: LlmConfig,
    embeddings: EmbeddingsConfig,
    rerank: RerankConfig,
    role: Role,
    /// The name its skills, spilled objects and tokens are keyed by.
    name: String,
    named: Option<String>,
    /// Why the object cannot serve (schema or config), if it cannot.
    broken: Option<Error>,
    /// The task embedding the rows that wait for a vector: one is enough (it runs until none
    /// waits), and two would embed the same rows twice.
    embedding: Flight,
    /// Whether a request came since the object started: the first one starts the embedding of
    /// what waits (a new model's re-embedding, what a failure left) and sets the alarm.
    woke: Cell<bool>,
    rate: Option<RateLimit>,
    /// The cancel flags of the frames each socket is running: a `cancel` frame of that socket
    /// sets them all (only a turn reads its flag).
    running: Running,
    /// The turns running now: followed by resume requests, stopped by `POST …/chat/stop`.
    live: Live,
    /// The configured MCP servers' sessions and tool lists.
    mcp: McpServers,
    /// The alarm as this instance last set or read it.
    armed: Cell<Armed>,
    /// What the object is in the directory.
    kind: Cell<Role>,
    report_delay: i64,
    /// `sql.changes()` when the object was last marked dirty or reported: a count that moved
    /// since means a write.
    marked: Cell<u64>,
}

/// What this instance knows of the object's alarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Armed {
    /// Not read yet (the object just started: an alarm set before survives).
    Unknown,
    /// None is set (it fired, or none was ever needed).
    Unset,
    /// Set for this time (ms).
    At(i64),
}

impl Inner {
    /// What a request at this moment runs against.
    fn env(&self) -> Env<'_> {
        let p = &self.parts;
        Env {
            sql: &*p.sql,
            cache: &self.cache,
            vectors: &self.vectors,
            blobs: &*p.blobs,
            config: &self.config,
            agent: &self.name,
            llm: &self.llm,
            embeddings: &self.embeddings,
            rerank: &self.rerank,
            transport: &*p.transport,
            events: &*p.events,
            live: &self.live,
            now: Now::at((p.clock)()),
            clock: &*p.clock,
            timer: &*p.timer,
            reach: Reach::default(),
            role: self.role,
            spaces: &*p.spaces,
            secrets: &*p.secrets,
            mcp: &self.mcp,
            databases: &*p.databases,
        }
    }

    fn now(&self) -> i64 {
        (self.parts.clock)()
    }

    fn warn(&self, message: &str) {
        self.parts.events.warn(message);
    }
}

impl Object {
    /// Opens the object: its store migrated and its crash recovered (synchronous, as a Durable
    /// Object's SQL is, so before any request), the schedule runs a crash cut short recovered,
    /// the embeddings model in use recorded (a new one queues every row for a vector of it).
    /// Its name is the one the runtime gave (`idFromName`); started by its alarm or a
    /// hibernated socket it is not told it, and takes the one its writes kept for the
    /// directory, else its id.
    pub fn open(parts: Parts, settings: Settings) -> Object {
        let now = (parts.clock)();
        let db = &*parts.sql;
        let opened = store::open(db, now).and_then(|_| schedule::run::recover(db, &iso_millis(now)));
        let opening = opened.err().map(|e| Error::internal(format!("storage is not ready: {e}")));
        let kept = || opening.is_none().then(|| report::kept_name(db).ok().flatten()).flatten();
        let name = settings.named.clone().or_else(kept).unwrap_or_else(|| settings.id.clone());
        let adopted = match opening.is_none() {
            true => vectors::adopt(db, &settings.embeddings)
                .err()
                .map(|e| Error::internal(format!("storage is not ready: {e}"))),
            false => None,
        };
        let (config, config_error) = match settings.config {
            Ok(c) => (c, None),
            Err(e) => (SessionConfig::default(), Some(Error::new(ErrorKind::NotConfigured, e.message))),
        };
        let broken = opening.or(settings.broken).or(adopted).or(config_error);
        if let Some(e) = &broken {
            parts.events.warn(&format!("the object cannot serve: {}", e.message));
        }
        let marked = Cell::new(db.changes());
        let kind = settings.role;
        let inner = Inner {
            cache: ReadCache::new(cache::DEFAULT_BUDGET),
            vectors: settings.vectors_cap.map_or_else(Vectors::new, Vectors::with_cap),
            config,
            llm: settings.llm,
            embeddings: settings.embeddings,
            rerank: settings.rerank,
            role: settings.role,
            name,
            named: settings.named,
            broken,
            embedding: Flight::default(),
            woke: Cell::new(false),
            rate: settings.rate,
            running: Running::default(),
            live: Live::default(),
            mcp: McpServers::default(),
            armed: Cell::new(Armed::Unknown),
            kind: Cell::new(kind),
            report_delay: settings.report_delay.clamp(0, 3_600_000),
            marked,
            parts,
        };
        Object { inner: Rc::new(inner) }
    }

    /// The object's name (its `idFromName` name).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Lists the object in the directory as `kind` (an agent's object is [`Role::Agent`]; a
    /// Durable Object of your own that embeds it may be another kind).
    pub fn report_as(&self, kind: Role) {
        self.inner.kind.set(kind);
    }

    /// What a request at this moment runs against (the tests drive the core with it).
    pub fn env(&self) -> Env<'_> {
        self.inner.env()
    }

    /// Why the object cannot serve, if it cannot.
    pub fn broken(&self) -> Option<&Error> {
        self.inner.broken.as_ref()
    }

    /// The read cache this instance keeps.
    pub fn cache(&self) -> &ReadCache {
        &self.inner.cache
    }

    /// The vector indexes this instance keeps.
    pub fn vectors(&self) -> &Vectors {
        &self.inner.vectors
    }

    /// Answers one request of the Durable Object's API (`docs/openapi.yaml`): its route matched
    /// and the request admitted once, then answered as the route's row says.
    pub fn fetch(&self, req: Request) -> BoxFuture<'_, Reply> {
        Box::pin(async move {
            // OpenAI's routes answer errors in OpenAI's shape, whoever refused.
            match openai::is_openai(&req.path) {
                true => match self.serve(req).await {
                    Reply::Whole(resp) => Reply::Whole(openai::shaped(resp)),
                    other => other,
                },
                false => self.serve(req).await,
            }
        })
    }

    async fn serve(&self, req: Request) -> Reply {
        {
            if let Some(e) = &self.inner.broken {
                return Reply::Whole(Response::error(e));
            }
            if let Some(e) = self.over_limit() {
                return Reply::Whole(Response::error(&e));
            }
            if !self.inner.woke.replace(true) {
                if self.inner.embeddings.is_on() {
                    self.later(vec![After::Embed]);
                }
                self.rearm();
            }
            let env = self.inner.env();
            let (admitted, op, params, query) = match enter(&env, &req) {
                Entry::Refused(resp) => return self.answered(resp),
                Entry::Answered(resp) => return self.answered(written(&env, &req, resp)),
                Entry::Admitted { env, op, params, query } => (env, op, params, query),
            };
            let reach = admitted.reach.clone();
            match op.delivery {
                // A turn asked for whole (no `Accept: text/event-stream`, no `useChat` body) is
                // answered whole.
                Delivery::Stream(Stream::Chat) => {
                    if let Some(dialect) = Dialect::of(&req) {
                        return self.chat(req, params, reach, dialect).await;
                    }
                }
                Delivery::Stream(Stream::OpenAi) => {
                    if let Some(dialect) = openai::dialect(&req) {
                        return self.chat(req, params, reach, dialect).await;
                    }
                }
                Delivery::Stream(Stream::Resume) => return self.resume(&admitted, &req, &params),
                Delivery::Stream(Stream::Export) => return self.export(),
                Delivery::Upgrade => return self.upgrade(&req, params),
                Delivery::Whole => {}
            }
            let resp = whole(op, &Call { env: &admitted, req: &req, params, query }).await;
            self.answered(written(&env, &req, resp))
        }
    }

    /// A whole answer: only one that succeeded wrote something (a refused one changes nothing,
    /// not even the directory's mark, now or after it); its work after it, once it is out.
    fn answered(&self, mut resp: Response) -> Reply {
        match resp.status {
            200..=299 => self.mark(),
            _ => self.unmarked(),
        }
        self.later(std::mem::take(&mut resp.after));
        Reply::Whole(resp)
    }

    /// A socket's upgrade (checked like any request first): its session and claims, the name
    /// kept for the directory report its frames' writes make (they may come after the object
    /// was evicted, which is then not told its name).
    fn upgrade(&self, req: &Request, params: Params) -> Reply {
        let upgrade = req.header_value("upgrade").unwrap_or_default();
        if !upgrade.eq_ignore_ascii_case("websocket") {
            return Reply::Whole(Response::error(&Error::invalid("expected a WebSocket upgrade (Upgrade: websocket)")));
        }
        let claims = match claims_of(req) {
            Ok(c) => c,
            Err(e) => return Reply::Whole(Response::error(&e)),
        };
        let inner = &self.inner;
        if let (Some(_), Some(name)) = (&inner.parts.directory, &inner.named) {
            if let Err(e) = report::name(&*inner.parts.sql, name) {
                inner.warn(&format!("keeping the name for the directory: {}", e.message));
            }
            inner.marked.set(inner.parts.sql.changes());
        }
        Reply::Upgrade { session: params.sid, claims }
    }

    /// `GET /export`: the agent's NDJSON, read chunk by chunk as the client takes it. An error
    /// midway ends the body early, without the `end` record (so no import takes it for whole).
    fn export(&self) -> Reply {
        let export = match AgentExport::new(&*self.inner.parts.sql) {
            Ok(e) => e,
            Err(e) => return Reply::Whole(Response::error(&e)),
        };
        let body = stream::unfold(Some((self.clone(), export)), |state| async move {
            let (object, mut export) = state?;
            let env = object.inner.env();
            let chunk = export.next(&env).await;
            for w in export.warnings.drain(..) {
                object.inner.warn(&format!("GET /export: {w}"));
            }
            let text = match chunk {
                Ok(Some(text)) => text,
                Ok(None) => return None,
                Err(e) => {
                    object.inner.warn(&format!("GET /export stopped: {e}"));
                    return None;
                }
            };
            drop(env);
            Some((text.into_bytes(), Some((object, export))))
        });
        let headers =
            vec![("content-type".to_owned(), transfer::NDJSON.to_owned()), ("cache-control".into(), "no-store".into())];
        Reply::Stream { headers, body: body.boxed_local() }
    }

    /// The AI SDK's resume request: the session's running turn replayed from its start and
    /// followed live, or `204` when none runs. A reader going away never stops the turn.
    fn resume(&self, env: &Env<'_>, req: &Request, params: &Params) -> Reply {
        let sid = match chat::resumed_session(req, params) {
            Ok(sid) => sid,
            Err(e) => return Reply::Whole(Response::error(&e)),
        };
        let Some(follow) = env.live.follow(&sid) else { return Reply::Whole(Response::no_content()) };
        let resume = chat::Resume::new(follow);
        let mut headers = Dialect::UiMessages.headers();
        headers.push((chat::REPLAY_BYTES_HEADER.to_owned(), resume.buffered.to_string()));
        let body = stream::unfold(resume, |mut r| async move { r.next().await.map(|text| (text.into_bytes(), r)) });
        Reply::Stream { headers, body: body.boxed_local() }
    }

    /// A chat turn as server-sent events, written as they come. The turn runs in its own task
    /// holding a copy of the object; if the client goes away the body is dropped, which sets
    /// `gone` (the turn stops and keeps what was shown, unless `chat.onDisconnect` is
    /// `"finish"`). A turn refused before its first event is answered whole (JSON).
    async fn chat(&self, req: Request, params: Params, reach: Reach, dialect: Dialect) -> Reply {
        let sid = match (dialect, params.sid.is_empty()) {
            // An OpenAI request names its session in its own ways (`openai::stream`).
            (Dialect::Completions | Dialect::Responses, _) => Ok(String::new()),
            (_, true) => chat::named_session(&req),
            (_, false) => Ok(params.sid),
        };
        let sid = match sid {
            Ok(sid) => sid,
            Err(e) => return self.answered(Response::error(&e)),
        };
        let (tx, mut rx) = mpsc::unbounded::<Streamed>();
        let object = self.clone();
        let gone = Stop::default();
        let guard = SetOnDrop(gone.clone());
        self.inner.parts.tasks.spawn(Box::pin(async move {
            let env = object.inner.env().reaching(reach);
            // Whether the turn was refused (its first item an error, answered as JSON: it
            // stored nothing), or streamed.
            let (refused, streamed) = (Cell::new(false), Cell::new(false));
            let mut send = |s: Streamed| {
                match &s {
                    Streamed::Fail(_) if !streamed.get() => refused.set(true),
                    Streamed::Fail(_) => {}
                    Streamed::Data(_) => streamed.set(true),
                }
                tx.unbounded_send(s).map_err(|_| Error::new(ErrorKind::Conflict, "the client went away"))
            };
            let after = match dialect {
                Dialect::Completions | Dialect::Responses => {
                    openai::stream_turn(&env, &req, dialect, &gone, &mut send).await
                }
                _ => chat::stream_turn(&env, &sid, &req, dialect, &gone, &mut send).await,
            };
            // The stream ends here; the sweep and the work the turn left come after the answer
            // (the embeddings through the one flight).
            drop(tx);
            match refused.get() {
                true => object.unmarked(),
                false => object.mark(),
            }
            object.later(after);
        }));
        match rx.next().await {
            Some(Streamed::Fail(e)) => Reply::Whole(Response::error(&e)),
            Some(Streamed::Data(first)) => {
                // A failure after the first event comes as the dialect's error event (Data). The
                // guard goes with the body: dropped (the client gone), it sets `gone`. While the
                // model is silent a comment line goes out every 250 ms, so a client that left
                // is noticed then (the runtime drops a body it cannot write), not at the next
                // piece of the reply.
                let tasks = self.inner.parts.tasks.clone();
                let rest = stream::unfold((rx, guard), move |(mut rx, guard)| {
                    let beat = tasks.sleep(KEEP_ALIVE_MS);
                    async move {
                        let next = match select(rx.next(), beat).await {
                            Either::Left((Some(Streamed::Data(d)), _)) => d.into_bytes(),
                            Either::Left((Some(Streamed::Fail(_)), _)) => Vec::new(),
                            Either::Left((None, _)) => return None,
                            Either::Right(_) => KEEP_ALIVE.to_vec(),
                        };
                        Some((next, (rx, guard)))
                    }
                });
                let body = stream::once(async move { first.into_bytes() }).chain(rest);
                Reply::Stream { headers: dialect.headers(), body: body.boxed_local() }
            }
            None => Reply::Whole(Response::error(&Error::internal("the chat turn ended without an answer"))),
        }
    }

    /// One message of a socket accepted with `tags`: the frames to answer that socket with
    /// (`history`, `pong`, `error`); writes reach every socket of the session through the
    /// event hub. `echo` is sent at once: the sender's own message, pending until the reply is
    /// stored.
    pub fn socket_message<'a>(
        &'a self,
        tags: &'a SocketTags,
        message: SocketMessage<'a>,
        echo: &'a dyn Fn(&serde_json::Value),
    ) -> BoxFuture<'a, Vec<serde_json::Value>> {
        Box::pin(async move {
            let (sid, claims) = (&tags.session, tags.claims.as_ref());
            // This frame's flag, among the socket's running ones while it runs: a `cancel` frame
            // of the same socket sets them.
            let flag = self.inner.running.start(&tags.id);
            let only = |frames| ws::Handled { frames, warnings: vec![], after: vec![], cancel: false };
            let answer = match (self.over_limit().or_else(|| self.inner.broken.clone()), message) {
                (Some(e), _) => only(vec![ws::error_frame(sid, e.code(), &e.message)]),
                (None, SocketMessage::Text(text)) => {
                    if let Some(pending) = ws::pending_echo(sid, claims, text) {
                        echo(&pending);
                    }
                    ws::frame(&self.inner.env(), sid, claims, text, &flag).await
                }
                (None, SocketMessage::Binary) => {
                    only(vec![ws::error_frame(sid, "invalid_request", "frames must be text (JSON)")])
                }
            };
            let then = if answer.cancel { Then::Cancel } else { Then::Nothing };
            self.inner.running.end(&tags.id, &flag, then);
            for w in &answer.warnings {
                self.inner.warn(&format!("ws {sid}: {w}"));
            }
            // A frame answered with an error changed nothing (as a refused request).
            match answer.frames.iter().any(|f| f["type"] == "error") {
                true => self.unmarked(),
                false => self.mark(),
            }
            self.later(answer.after);
            answer.frames
        })
    }

    /// The object's alarm: one bounded wake-up of [`alarm::wake`] (due schedules one after
    /// another, expired memories, then the left-over sweep and embedding as after an answer),
    /// the directory report when one is due, and the alarm set again for what is left.
    pub fn alarm(&self) -> BoxFuture<'_, Option<Woke>> {
        Box::pin(async move {
            if self.inner.broken.is_some() {
                return None;
            }
            // The alarm that fired is spent.
            self.inner.armed.set(Armed::Unset);
            let started = self.inner.now();
            let inner = &self.inner;
            let env = || inner.env();
            let mut woken = alarm::wake(&env).await;
            let ms = self.inner.now() - started;
            self.mark();
            self.later(std::mem::take(&mut woken.after));
            self.report().await;
            self.arm().await;
            Some(Woke { woken, ms })
        })
    }

    /// `rate_limited` when this request is over the object's `RATE_LIMIT` (requests and socket
    /// frames count alike); the error names the seconds to wait.
    fn over_limit(&self) -> Option<Error> {
        let retry = self.inner.rate.as_ref()?.take(self.inner.now())?;
        Some(
            Error::new(
                ErrorKind::RateLimited,
                format!("over this agent's request limit (RATE_LIMIT); retry in {retry} s"),
            )
            .with_retry(retry),
        )
    }

    /// Runs the work an answer left for after it is sent in its own task, so the answer goes
    /// out first; the embedding through the one flight.
    fn later(&self, mut work: Vec<After>) {
        let embeds = work.contains(&After::Embed);
        work.retain(|w| *w != After::Embed);
        if embeds && self.inner.embedding.ask() == Ask::Run {
            work.push(After::Embed);
        }
        if work.is_empty() {
            return;
        }
        let object = self.clone();
        self.inner.parts.tasks.spawn(Box::pin(async move {
            let inner = &object.inner;
            // Embedding reads SQLite before its first call: let the answer go out first.
            if work.contains(&After::Embed) {
                inner.parts.tasks.sleep(0).await;
            }
            super::after(&inner.env(), &work).await;
            if work.contains(&After::Embed) {
                while inner.embedding.next() == FlightNext::Again {
                    super::after(&inner.env(), &[After::Embed]).await;
                }
            }
            // What the work wrote (memories extracted, say) is reported too; the sweep of
            // spilled objects alone (after every write, refused ones included) is housekeeping.
            if work.iter().any(|w| *w != After::Sweep) {
                object.mark();
            }
            // What the write changed may need the alarm sooner (a schedule, an expiry, a retry).
            object.arm().await;
        }));
    }

    /// Marks the object dirty after a write (when the directory is kept, and a no-op when
    /// nothing was written since the last mark): in the same turn as the write, so both commit
    /// together, with the alarm set for its report (its call made now, not awaited: the write
    /// is queued in this turn). A crash after the write is then repaired by that alarm, with no
    /// request.
    fn mark(&self) {
        let inner = &self.inner;
        let sql = &*inner.parts.sql;
        if inner.parts.directory.is_none() || sql.changes() == inner.marked.get() {
            return;
        }
        let now = inner.now();
        let due = match report::mark(sql, now, inner.report_delay, inner.named.as_deref()) {
            Ok(due) => due,
            Err(e) => return inner.warn(&format!("marking the directory report: {}", e.message)),
        };
        inner.marked.set(sql.changes());
        if matches!(inner.armed.get(), Armed::At(t) if t <= due && t > now) {
            return;
        }
        let stored = inner.parts.alarm.set(due);
        inner.armed.set(Armed::At(due));
        let object = self.clone();
        inner.parts.tasks.spawn(Box::pin(async move {
            if let Err(e) = stored.await {
                object.inner.armed.set(Armed::Unknown);
                object.inner.warn(&format!("setting the alarm: {}", e.message));
            }
        }));
    }

    /// Takes every write counted so far as seen without a mark: those of a request that was
    /// refused (rolled back, yet counted in `changes`).
    fn unmarked(&self) {
        self.inner.marked.set(self.inner.parts.sql.changes());
    }

    /// The object's report to its directory shard, when one is due: its figures (or its
    /// removal when it holds nothing), then the mark cleared; a failure is retried later.
    async fn report(&self) {
        let inner = &self.inner;
        let sql = &*inner.parts.sql;
        let generation = match report::pending(sql, inner.now()) {
            Ok(Some(g)) => g,
            Ok(None) => return,
            Err(e) => return inner.warn(&format!("the directory report: {}", e.message)),
        };
        let Some(directory) = &inner.parts.directory else {
            // Marked while the directory was kept, which it no longer is.
            if let Err(e) = report::forget(sql) {
                inner.warn(&format!("the directory report: {}", e.message));
            }
            return inner.marked.set(sql.changes());
        };
        let done = match report::stats(sql, inner.kind.get(), &inner.name, sql.size(), inner.now()) {
            Ok(r) => match directory.send(&r).await {
                Ok(()) => report::sent(sql, &r, generation, inner.now(), inner.report_delay),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            inner.warn(&format!("the directory report failed (retried later): {}", e.message));
            if let Err(e) = report::failed(sql, inner.now()) {
                inner.warn(&format!("the directory report: {}", e.message));
            }
        }
        inner.marked.set(sql.changes());
    }

    /// Sets the alarm again in the background ([`Object::arm`]).
    fn rearm(&self) {
        let object = self.clone();
        self.inner.parts.tasks.spawn(Box::pin(async move { object.arm().await }));
    }

    /// Sets the object's alarm for the next time it needs it ([`alarm::due`]) when no alarm is
    /// set for that time or sooner (a sooner one wakes it for nothing, harmlessly, and that
    /// wake-up sets it again). Failures are warned: the next write tries again.
    async fn arm(&self) {
        let inner = &self.inner;
        let due = match alarm::due(&inner.env()) {
            Ok(Some(due)) => due,
            Ok(None) => return,
            Err(e) => return inner.warn(&format!("the alarm's next time: {}", e.message)),
        };
        let set = match inner.armed.get() {
            Armed::At(t) => Some(t),
            Armed::Unset => None,
            Armed::Unknown => match inner.parts.alarm.get().await {
                Ok(t) => t,
                Err(e) => return inner.warn(&format!("reading the alarm: {}", e.message)),
            },
        };
        if let Some(t) = set.filter(|&t| t <= due && t > inner.now()) {
            inner.armed.set(Armed::At(t));
            return;
        }
        match inner.parts.alarm.set(due).await {
            Ok(()) => inner.armed.set(Armed::At(due)),
            Err(e) => inner.warn(&format!("setting the alarm: {}", e.message)),
        }
    }
}

/// Runs `op`'s handler for `call`: its answer, or its error as one.
async fn whole(op: &Op, call: &Call<'_>) -> Response {
    op.handler.run(call).await.unwrap_or_else(|e| Response::error(&e))
}

/// Sets its signal when dropped: the body of a streamed turn holds one, so a client that goes
/// away (the runtime drops the body) tells the turn at once, even while the model is silent.
struct SetOnDrop(Stop);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}
