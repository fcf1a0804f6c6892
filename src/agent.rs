//! The `SessionAgent` Durable Object: one agent's memory. [`Agent`] holds what a request needs
//! (SQLite, R2, the config, the LLM, the agent's name, its WebSockets) and answers through
//! [`session_agent_api::handle`]; it is public so a Durable Object of your own can embed it with a
//! config built in code. It is a cheap handle (`Clone`): a streamed chat turn keeps a copy
//! while the response body is being written.

use std::cell::Cell;
use std::rc::Rc;

use futures::channel::mpsc;
use futures::future::{select, Either};
use futures::StreamExt;
use worker::{
    console_error, console_log, console_warn, durable_object, wasm_bindgen_futures::spawn_local, Date, DurableObject,
    Env, Request, Response, Result, State, Storage, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

use super::{
    convert,
    directory::{self, AGENT_DIRECTORY},
    do_sql::DoSql,
    llm::{WorkersTransport, AI_BINDING},
    r2::R2Blobs,
    sockets::Sockets,
    spaces::{WorkersSpaces, SPACE_BINDING},
};
use session_agent_api as api;
use session_agent_api::access::{self, CLAIMS_HEADER};
use session_agent_api::chat::Streamed;
use session_agent_api::running::{Running, Then};
use session_agent_core::access::RateLimit;
use session_agent_core::after::{After, Ask, Flight, Next as FlightNext};
use session_agent_core::cache::{self, ReadCache};
use session_agent_core::config::SessionConfig;
use session_agent_core::directory::report::{self, REPORT_DELAY_MS};
use session_agent_core::error::{Error, ErrorKind};
use session_agent_core::ids::Role;
use session_agent_core::live::stop::Stop;
use session_agent_core::live::Live;
use session_agent_core::llm::embeddings::EmbeddingsConfig;
use session_agent_core::llm::rerank::RerankConfig;
use session_agent_core::llm::LlmConfig;
use session_agent_core::schedule::{self, alarm};
use session_agent_core::sql::Sql;
use session_agent_core::store;
use session_agent_core::time::{iso_millis, Now};
use session_agent_core::transfer::export::AgentExport;
use session_agent_core::vectors::{self, Vectors};

/// The binding of the skills bucket.
pub(crate) const SKILLS_BUCKET: &str = "SKILLS_BUCKET";

/// One agent's memory, ready to answer requests.
#[derive(Clone)]
pub struct Agent {
    inner: Rc<Inner>,
}

struct Inner {
    db: DoSql,
    /// What requests read from `db` and the next ones may reuse until a write.
    cache: ReadCache,
    /// The vector indexes of memories, messages and search entries (loaded on first use).
    vectors: Vectors,
    blobs: R2Blobs,
    config: SessionConfig,
    llm: LlmConfig,
    embeddings: EmbeddingsConfig,
    /// The re-ranker of searches and recalls (`RERANK_*`).
    rerank: RerankConfig,
    transport: WorkersTransport,
    sockets: Sockets,
    name: String,
    /// Why the agent cannot serve (schema or config), if it cannot.
    broken: Option<Error>,
    /// The task embedding the rows that wait for a vector: one is enough (it runs until none
    /// waits), and two would embed the same rows twice.
    embedding: Flight,
    /// Whether a request came since the object started: the first one starts the embedding
    /// of what waits (a new model's re-embedding, what a failure left) in the background.
    woke: Cell<bool>,
    /// The agent's request limit (`RATE_LIMIT`), if set.
    rate: Option<RateLimit>,
    /// The stop signals of the frames each socket is running: a `cancel` frame of that socket
    /// sets them all (only a turn reads its flag).
    running: Running,
    /// The turns running now: followed by resume requests, stopped by `POST …/chat/stop`.
    live: Live,
    /// The object's storage, for its one alarm.
    storage: Storage,
    /// The alarm as this instance last set or read it.
    armed: Cell<Armed>,
    /// An agent, or a memory space.
    role: Role,
    /// The memory spaces, reached through `MEMORY_SPACE`.
    spaces: WorkersSpaces,
    /// The directory's shards (`AGENT_DIRECTORY`), if the Worker binds them: every write then
    /// marks the object dirty and its alarm reports it (none bound: nothing is marked).
    directory: Option<worker::ObjectNamespace>,
    /// What the object is in the directory (`Agent::reporting_as`).
    kind: Cell<Role>,
    /// The object's `idFromName` name when the runtime told it (not when an alarm woke it).
    named: Option<String>,
    /// How long (ms) a report waits after the write that needs it (`DIRECTORY_REPORT_MS`).
    report_delay: i64,
    /// `db.changes()` when the object was last marked dirty or reported: a count that moved
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
    fn env(&self) -> session_agent_core::env::Env<'_> {
        session_agent_core::env::Env {
            sql: &self.db,
            cache: &self.cache,
            vectors: &self.vectors,
            blobs: &self.blobs,
            config: &self.config,
            agent: &self.name,
            llm: &self.llm,
            embeddings: &self.embeddings,
            rerank: &self.rerank,
            transport: &self.transport,
            events: &self.sockets,
            live: &self.live,
            now: Now::at(now_ms()),
            clock: &now_ms,
            reach: Default::default(),
            role: self.role,
            spaces: &self.spaces,
        }
    }
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

impl Agent {
    /// Opens the agent with `config`: migrates its SQLite schema (synchronous in a DO, so it is
    /// done before any request) and binds `SKILLS_BUCKET` if the Worker has it.
    pub fn new(state: &State, env: &Env, config: SessionConfig) -> Self {
        Agent::open(state, env, config, Role::Agent)
    }

    /// Opens the Durable Object as `role`: an agent, or a memory space (the same schema and
    /// memory code; the space's own routes, `api::routes::SPACE_ROUTES`).
    pub fn open(state: &State, env: &Env, config: SessionConfig, role: Role) -> Self {
        let db = DoSql::new(&state.storage());
        // The store (migrations, spill recovery), then the schedule runs a crash cut short.
        let now = now_ms();
        let opened = store::open(&db, now).and_then(|_| schedule::run::recover(&db, &iso_millis(now)));
        let broken = opened.err().map(|e| {
            console_error!("SessionAgent: opening the storage failed: {e}");
            Error::internal(format!("storage is not ready: {e}"))
        });
        // The name given to idFromName; an object made otherwise keys its skills by its id.
        let id = state.id();
        let named = id.name();
        // Started by its alarm (or a hibernated socket) the object is not told its name: the
        // one its writes kept for the directory, else its id. (Its skills, spilled objects and
        // tokens are keyed by the name: with the id, a token for the agent would be refused.)
        let kept = || broken.is_none().then(|| report::kept_name(&db).ok().flatten()).flatten();
        let name = named.clone().or_else(kept).unwrap_or_else(|| id.to_string());
        // LLM_API_KEY is a secret; a plain var is accepted too (local .dev.vars sets either).
        let var = |k: &str| env.secret(k).map(|v| v.to_string()).or_else(|_| env.var(k).map(|v| v.to_string())).ok();
        let (llm, llm_error) = match LlmConfig::from_vars(var) {
            Ok(l) => (l, None),
            Err(e) => (LlmConfig::none(), Some(Error::new(ErrorKind::NotConfigured, e.message))),
        };
        let (embeddings, embeddings_error) = match EmbeddingsConfig::from_vars(var) {
            Ok(e) => (e, None),
            Err(e) => (EmbeddingsConfig::none(), Some(Error::new(ErrorKind::NotConfigured, e.message))),
        };
        let (rerank, rerank_error) = match RerankConfig::from_vars(var) {
            Ok(r) => (r, None),
            Err(e) => (RerankConfig::none(), Some(Error::new(ErrorKind::NotConfigured, e.message))),
        };
        let (rate, rate_error) = match var("RATE_LIMIT").filter(|v| !v.trim().is_empty()).map(|v| RateLimit::parse(&v))
        {
            None => (None, None),
            Some(Ok(r)) => (Some(r), None),
            Some(Err(e)) => (None, Some(Error::new(ErrorKind::NotConfigured, e.message))),
        };
        // The model in use recorded (a new one queues every row for a vector of it).
        let vectors_error = match broken.is_none() {
            true => vectors::adopt(&db, &embeddings).err().map(|e| {
                console_error!("SessionAgent: embeddings model: {e}");
                Error::internal(format!("storage is not ready: {e}"))
            }),
            false => None,
        };
        let broken = broken.or(llm_error).or(embeddings_error).or(rerank_error).or(rate_error).or(vectors_error);
        let transport = WorkersTransport { ai: env.ai(AI_BINDING).ok() };
        let report_delay =
            var("DIRECTORY_REPORT_MS").and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(REPORT_DELAY_MS);
        let marked = Cell::new(db.changes());
        let inner = Inner {
            db,
            cache: ReadCache::new(cache::DEFAULT_BUDGET),
            vectors: Vectors::new(),
            blobs: R2Blobs::new(env.bucket(SKILLS_BUCKET).ok()),
            config,
            llm,
            embeddings,
            rerank,
            transport,
            sockets: Sockets::new(state),
            name,
            broken,
            embedding: Flight::default(),
            woke: Cell::new(false),
            rate,
            running: Default::default(),
            live: Live::default(),
            storage: state.storage(),
            armed: Cell::new(Armed::Unknown),
            role,
            spaces: WorkersSpaces::new(env.durable_object(SPACE_BINDING).ok(), var("SPACE_TIMEOUT_MS")),
            directory: env.durable_object(AGENT_DIRECTORY).ok(),
            kind: Cell::new(role),
            named,
            report_delay: report_delay.clamp(0, 3_600_000),
            marked,
        };
        Agent { inner: Rc::new(inner) }
    }

    /// Opens the agent with the config of the `SESSION_CONFIG` variable. A config that does not
    /// parse makes every request a 503 `not_configured` naming the problem.
    pub fn from_env(state: &State, env: &Env) -> Self {
        Agent::from_env_as(state, env, Role::Agent)
    }

    /// [`Agent::from_env`] as `role`.
    pub fn from_env_as(state: &State, env: &Env, role: Role) -> Self {
        match config_text(env).and_then(|text| SessionConfig::from_json(&text)) {
            Ok(cfg) => Agent::open(state, env, cfg, role),
            Err(e) => {
                console_error!("SessionAgent: {}", e.message);
                let mut agent = Agent::open(state, env, SessionConfig::default(), role);
                if let Some(inner) = Rc::get_mut(&mut agent.inner) {
                    inner.broken.get_or_insert(Error::new(ErrorKind::NotConfigured, e.message));
                }
                agent
            }
        }
    }

    /// The agent's name (its `idFromName` name).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The same object, listed in the directory as `kind` (a `SessionAgent` is an
    /// [`Role::Agent`]; a Durable Object of your own that embeds `Agent` may be another kind).
    pub fn reporting_as(self, kind: Role) -> Self {
        self.inner.kind.set(kind);
        self
    }

    /// Answers one request of the DO API (`docs/openapi.yaml`): WebSocket upgrades, streamed
    /// chat turns, and everything else through [`api::handle`].
    pub async fn fetch(&self, mut req: Request) -> Result<Response> {
        if let Some(e) = &self.inner.broken {
            convert::drain(&mut req).await;
            return convert::error(e);
        }
        if let Some(e) = self.over_limit() {
            convert::drain(&mut req).await;
            return convert::error(&e);
        }
        if !self.inner.woke.replace(true) {
            if self.inner.embeddings.is_on() {
                self.later(vec![After::Embed]);
            }
            self.rearm();
        }
        let method = req.inner().method();
        let url = req.inner().url();
        let path = convert::split_url(&url).0;
        let agent = self.inner.role == Role::Agent;
        if let Some(sid) = api::socket_session(&method, path).filter(|_| agent) {
            return self.upgrade(&req, path, sid);
        }
        let req = match convert::read(&mut req).await {
            Ok(r) => r,
            Err(e) => return convert::error(&e),
        };
        // A memory space streams nothing: every request of its own route table goes below.
        if let Some(dialect) = api::chat_stream(&req).filter(|_| agent) {
            // Answered as a stream, outside `api::handle` (`api::stream_chat` admits it).
            return self.chat_stream(req, dialect).await;
        }
        if agent && api::is_resume(&req) {
            // Answered as a stream, outside `api::handle` (`api::resume` admits it).
            return self.resume_stream(&req);
        }
        if agent && api::is_agent_export(&req) {
            // Answered as a stream, outside `api::handle`: the token is checked here.
            if let Err(e) = api::admit(&self.inner.env(), &req) {
                return convert::error(&e);
            }
            return self.export_stream();
        }
        let mut resp = api::handle(&self.inner.env(), &req).await;
        log(req.method.as_str(), &req.path, &resp);
        // Only an answer that succeeded wrote something: a refused one changes nothing, not
        // even the directory's mark, now or after it (its rolled-back writes still count in
        // `changes`: they are taken as seen).
        match resp.status {
            200..=299 => self.mark(),
            _ => self.unmarked(),
        }
        self.later(std::mem::take(&mut resp.after));
        convert::write(resp)
    }

    /// `GET /sessions/{sid}/ws`: accepts a hibernatable socket tagged with the session and what
    /// its token allows (checked like any request first).
    fn upgrade(&self, req: &Request, path: &str, sid: session_agent_core::error::Result<String>) -> Result<Response> {
        let claims = req.headers().get(CLAIMS_HEADER).ok().flatten();
        let probe = match &claims {
            Some(c) => api::Request::new(api::http::Method::Get, path).header(CLAIMS_HEADER, c),
            None => api::Request::new(api::http::Method::Get, path),
        };
        let env = self.inner.env();
        let claims = sid.and_then(|sid| {
            api::admit(&env, &probe)?;
            Ok((sid, access::claims_of(&probe)?))
        });
        let (sid, claims) = match claims {
            Ok(c) => c,
            Err(e) => return convert::error(&e),
        };
        let upgrade = req.headers().get("upgrade").ok().flatten().unwrap_or_default();
        if !upgrade.eq_ignore_ascii_case("websocket") {
            return convert::error(&Error::invalid("expected a WebSocket upgrade (Upgrade: websocket)"));
        }
        let pair = WebSocketPair::new()?;
        if let Err(e) = self.inner.sockets.accept(&pair.server, &sid, claims.as_ref()) {
            return convert::error(&e);
        }
        // The socket's frames may come after the object was evicted, which is then not told
        // its name: kept for the directory report their writes make.
        if let (Some(_), Some(name)) = (&self.inner.directory, &self.inner.named) {
            if let Err(e) = report::name(&self.inner.db, name) {
                console_warn!("SessionAgent: keeping the name for the directory: {}", e.message);
            }
            self.inner.marked.set(self.inner.db.changes());
        }
        Response::from_websocket(pair.client)
    }

    /// `GET /export`: the agent's NDJSON, read chunk by chunk as the client takes it. An error
    /// midway ends the body early, without the `end` record (so no import takes it for whole).
    fn export_stream(&self) -> Result<Response> {
        let export = match AgentExport::new(&self.inner.db) {
            Ok(e) => e,
            Err(e) => return convert::error(&e),
        };
        let body = futures::stream::unfold(Some((self.clone(), export)), |state| async move {
            let (agent, mut export) = state?;
            let chunk = export.next(&agent.inner.env()).await;
            for w in export.warnings.drain(..) {
                console_warn!("GET /export: {w}");
            }
            match chunk {
                Ok(Some(text)) => Some((Ok::<Vec<u8>, worker::Error>(text.into_bytes()), Some((agent, export)))),
                Ok(None) => None,
                Err(e) => {
                    console_error!("GET /export stopped: {e}");
                    None
                }
            }
        });
        let headers = worker::Headers::new();
        headers.set("content-type", api::transfer::NDJSON)?;
        headers.set("cache-control", "no-store")?;
        Ok(Response::from_stream(body)?.with_headers(headers))
    }

    /// A chat turn as server-sent events, written as they come. The turn runs in its own task
    /// holding a copy of the agent; if the client goes away the body stream is dropped, which
    /// sets `gone` (the turn stops and keeps what was shown, unless `chat.onDisconnect` is
    /// `"finish"`).
    async fn chat_stream(&self, req: api::Request, dialect: api::chat::Dialect) -> Result<Response> {
        let (tx, mut rx) = mpsc::unbounded::<Streamed>();
        let agent = self.clone();
        let gone = Stop::default();
        let guard = SetOnDrop(gone.clone());
        spawn_local(async move {
            let env = agent.inner.env();
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
            let after = api::stream_chat(&env, &req, dialect, &gone, &mut send).await;
            // The stream ends here; the sweep and the work the turn left come after the answer
            // (the embeddings through the one flight).
            drop(tx);
            match refused.get() {
                true => agent.unmarked(),
                false => agent.mark(),
            }
            agent.later(after);
        });
        match rx.next().await {
            Some(Streamed::Fail(e)) => {
                if e.kind.status() >= 500 {
                    console_error!("POST chat (stream) -> {}: {}", e.kind.status(), e.message);
                }
                convert::error(&e)
            }
            Some(Streamed::Data(first)) => {
                // A failure after the first event comes as the dialect's error event (Data). The
                // guard goes with the body: dropped (the client gone), it sets `gone`. While the
                // model is silent a comment line goes out every 250 ms, so a client that left
                // is noticed then (the runtime drops a body it cannot write), not at the next
                // piece of the reply.
                let rest = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
                    let beat = worker::Delay::from(std::time::Duration::from_millis(KEEP_ALIVE_MS));
                    let next = match select(rx.next(), beat).await {
                        Either::Left((Some(Streamed::Data(d)), _)) => d.into_bytes(),
                        Either::Left((Some(Streamed::Fail(_)), _)) => Vec::new(),
                        Either::Left((None, _)) => return None,
                        Either::Right(_) => KEEP_ALIVE.to_vec(),
                    };
                    Some((Ok::<Vec<u8>, worker::Error>(next), (rx, guard)))
                });
                let body =
                    futures::stream::once(async move { Ok::<Vec<u8>, worker::Error>(first.into_bytes()) }).chain(rest);
                let headers = worker::Headers::new();
                for (name, value) in dialect.headers() {
                    headers.set(&name, &value)?;
                }
                Ok(Response::from_stream(body)?.with_headers(headers))
            }
            None => convert::error(&Error::internal("the chat turn ended without an answer")),
        }
    }

    /// The AI SDK's resume request: the session's running turn replayed from its start and
    /// followed live, or `204` when none runs. A reader going away never stops the turn.
    fn resume_stream(&self, req: &api::Request) -> Result<Response> {
        let resume = match api::resume(&self.inner.env(), req) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Response::empty()?.with_status(204)),
            Err(e) => return convert::error(&e),
        };
        let buffered = resume.buffered;
        let body = futures::stream::unfold(resume, |mut r| async move {
            r.next().await.map(|text| (Ok::<Vec<u8>, worker::Error>(text.into_bytes()), r))
        });
        let headers = worker::Headers::new();
        for (name, value) in api::chat::Dialect::UiMessages.headers() {
            headers.set(&name, &value)?;
        }
        headers.set(api::chat::REPLAY_BYTES_HEADER, &buffered.to_string())?;
        Ok(Response::from_stream(body)?.with_headers(headers))
    }

    /// One frame from a socket: answered to that socket (`history`, `pong`, `error`); writes
    /// reach every socket of the session through the event hub.
    pub async fn socket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        let Some(tags) = self.inner.sockets.tags_of(&ws, &self.inner.name) else { return Ok(()) };
        let (sid, claims, socket) = (tags.session, tags.claims, tags.id);
        // This frame's flag, among the socket's running ones while it runs: a `cancel` frame of
        // the same socket sets them.
        let flag = self.inner.running.start(&socket);
        let answer = match (self.over_limit().or_else(|| self.inner.broken.clone()), message) {
            (Some(e), _) => api::ws::Handled {
                frames: vec![api::ws::error_frame(&sid, e.code(), &e.message)],
                warnings: vec![],
                after: vec![],
                cancel: false,
            },
            (None, WebSocketIncomingMessage::String(text)) => {
                // The sender sees its own message at once, pending until the reply is stored.
                if let Some(echo) = api::ws::pending_echo(&sid, claims.as_ref(), &text) {
                    let _ = ws.send_with_str(echo.to_string());
                }
                api::ws::frame(&self.inner.env(), &sid, claims.as_ref(), &text, &flag).await
            }
            (None, WebSocketIncomingMessage::Binary(_)) => api::ws::Handled {
                frames: vec![api::ws::error_frame(&sid, "invalid_request", "frames must be text (JSON)")],
                warnings: vec![],
                after: vec![],
                cancel: false,
            },
        };
        let then = if answer.cancel { Then::Cancel } else { Then::Nothing };
        self.inner.running.end(&socket, &flag, then);
        for w in &answer.warnings {
            console_warn!("ws {sid}: {w}");
        }
        // A frame answered with an error changed nothing (as a refused request).
        let refused = answer.frames.iter().any(|f| f["type"] == "error");
        for f in answer.frames {
            let _ = ws.send_with_str(f.to_string());
        }
        match refused {
            true => self.unmarked(),
            false => self.mark(),
        }
        self.later(answer.after);
        Ok(())
    }

    /// `rate_limited` when this request is over the agent's `RATE_LIMIT` (requests and socket
    /// frames count alike); the error names the seconds to wait.
    fn over_limit(&self) -> Option<Error> {
        let retry = self.inner.rate.as_ref()?.take(now_ms())?;
        Some(
            Error::new(
                ErrorKind::RateLimited,
                format!("over this agent's request limit (RATE_LIMIT); retry in {retry} s"),
            )
            .with_retry(retry),
        )
    }

    /// Runs the work an answer left for after it is sent (memory extraction after a turn) in
    /// its own task, so the answer goes out first.
    fn later(&self, mut work: Vec<After>) {
        let embeds = work.contains(&After::Embed);
        work.retain(|w| *w != After::Embed);
        if embeds && self.inner.embedding.ask() == Ask::Run {
            work.push(After::Embed);
        }
        if work.is_empty() {
            return;
        }
        let agent = self.clone();
        spawn_local(async move {
            // Embedding reads SQLite before its first call: let the answer go out first.
            if work.contains(&After::Embed) {
                worker::Delay::from(std::time::Duration::ZERO).await;
            }
            api::after(&agent.inner.env(), &work).await;
            if work.contains(&After::Embed) {
                while agent.inner.embedding.next() == FlightNext::Again {
                    api::after(&agent.inner.env(), &[After::Embed]).await;
                }
            }
            // What the work wrote (memories extracted, say) is reported too; the sweep of
            // spilled objects alone (after every write, refused ones included) is housekeeping.
            if work.iter().any(|w| *w != After::Sweep) {
                agent.mark();
            }
            // What the write changed may need the alarm sooner (a schedule, an expiry, a retry).
            agent.arm().await;
        });
    }

    /// The object's alarm (`DurableObject::alarm`): one bounded wake-up of
    /// [`alarm::wake`] (due schedules one after another, expired memories, then the left-over
    /// sweep and embedding as after an answer), and the alarm set again for what is left.
    pub async fn alarm(&self) -> Result<Response> {
        if self.inner.broken.is_some() {
            return Response::ok("");
        }
        // The alarm that fired is spent.
        self.inner.armed.set(Armed::Unset);
        let started = now_ms();
        let inner = &self.inner;
        let env = || inner.env();
        let woken = alarm::wake(&env).await;
        self.mark();
        console_log!(
            "SessionAgent alarm: {} runs, {} expired memories purged, {} ms; {} memories consolidated, {} retired",
            woken.runs,
            woken.purged,
            now_ms() - started,
            woken.consolidated.checked,
            woken.consolidated.retired
        );
        self.later(woken.after);
        self.report().await;
        self.arm().await;
        Response::ok("")
    }

    /// Marks the object dirty after a write (when the Worker binds the directory; called after
    /// a request answered 2xx, a socket's frame, a streamed turn, the alarm's wake-up and the
    /// work after an answer, and a no-op when nothing was written since the last mark): in the
    /// same turn as the write, so both commit together, with the alarm set for its report (the
    /// alarm's call is made now, not awaited: the write is queued in this turn). A crash after
    /// the write is then repaired by that alarm, with no request.
    fn mark(&self) {
        let inner = &self.inner;
        if inner.directory.is_none() || inner.db.changes() == inner.marked.get() {
            return;
        }
        let due = match report::mark(&inner.db, now_ms(), inner.report_delay, inner.named.as_deref()) {
            Ok(due) => due,
            Err(e) => return console_warn!("SessionAgent: marking the directory report: {}", e.message),
        };
        inner.marked.set(inner.db.changes());
        if matches!(inner.armed.get(), Armed::At(t) if t <= due && t > now_ms()) {
            return;
        }
        match inner.db.set_alarm_now(due) {
            Ok(promise) => {
                inner.armed.set(Armed::At(due));
                spawn_local(async move {
                    if let Err(e) = worker::wasm_bindgen_futures::JsFuture::from(promise).await {
                        console_warn!("SessionAgent: setting the alarm: {e:?}");
                    }
                });
            }
            Err(e) => console_warn!("SessionAgent: setting the alarm: {e:?}"),
        }
    }

    /// Takes every write counted so far as seen without a mark: those of a request that was
    /// refused (rolled back, yet counted in `changes`).
    fn unmarked(&self) {
        self.inner.marked.set(self.inner.db.changes());
    }

    /// The object's report to its directory shard, when one is due: its figures (or its
    /// removal when it holds nothing), then the mark cleared; a failure is retried later.
    async fn report(&self) {
        let inner = &self.inner;
        let generation = match report::pending(&inner.db, now_ms()) {
            Ok(Some(g)) => g,
            Ok(None) => return,
            Err(e) => return console_warn!("SessionAgent: the directory report: {}", e.message),
        };
        let Some(ns) = &inner.directory else {
            // Marked while the Worker bound the directory, which it no longer does.
            if let Err(e) = report::forget(&inner.db) {
                console_warn!("SessionAgent: the directory report: {}", e.message);
            }
            return inner.marked.set(inner.db.changes());
        };
        let started = now_ms();
        let done = match report::stats(&inner.db, inner.kind.get(), &inner.name, inner.db.database_size(), started) {
            Ok(r) => match directory::send(ns, &r).await {
                Ok(()) => report::sent(&inner.db, &r, generation, now_ms(), inner.report_delay),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            console_warn!("SessionAgent: the directory report failed (retried later): {}", e.message);
            if let Err(e) = report::failed(&inner.db, now_ms()) {
                console_warn!("SessionAgent: the directory report: {}", e.message);
            }
        }
        console_log!("SessionAgent: directory report, {} ms", now_ms() - started);
        inner.marked.set(inner.db.changes());
    }

    /// Sets the alarm again in the background ([`Agent::arm`]).
    fn rearm(&self) {
        let agent = self.clone();
        spawn_local(async move { agent.arm().await });
    }

    /// Sets the object's alarm for the next time the agent needs it ([`alarm::due`]) when no
    /// alarm is set for that time or sooner (a sooner one wakes it for nothing, harmlessly, and
    /// that wake-up sets it again). Failures are logged: the next write tries again.
    async fn arm(&self) {
        let inner = &self.inner;
        let due = match alarm::due(&inner.env()) {
            Ok(Some(due)) => due,
            Ok(None) => return,
            Err(e) => return console_warn!("SessionAgent: the alarm's next time: {}", e.message),
        };
        let now = now_ms();
        let set = match inner.armed.get() {
            Armed::At(t) => Some(t),
            Armed::Unset => None,
            Armed::Unknown => match inner.storage.get_alarm().await {
                Ok(t) => t,
                Err(e) => return console_warn!("SessionAgent: reading the alarm: {e}"),
            },
        };
        if let Some(t) = set.filter(|&t| t <= due && t > now) {
            inner.armed.set(Armed::At(t));
            return;
        }
        match inner.storage.set_alarm((due - now).max(0)).await {
            Ok(()) => inner.armed.set(Armed::At(due)),
            Err(e) => console_warn!("SessionAgent: setting the alarm: {e}"),
        }
    }
}

/// Milliseconds of silence after which a streamed turn's body gets a [`KEEP_ALIVE`] comment:
/// a client that left is noticed at the second write after it left (the first is taken), so
/// a stop while the model is silent ends its call about twice this late (bench/turns.mjs).
const KEEP_ALIVE_MS: u64 = 250;
/// A server-sent events comment: every SSE reader skips it.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Sets its signal when dropped: the body of a streamed turn holds one, so a client that goes
/// away (the runtime drops the body) tells the turn at once, even while the model is silent.
struct SetOnDrop(Stop);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// `SESSION_CONFIG` as JSON text: a string var as it is, an object var (wrangler allows JSON
/// object vars) serialized, absent as empty (the default config). Anything else is an error, so
/// the agent answers 503 instead of silently running without its config.
fn config_text(env: &Env) -> session_agent_core::error::Result<String> {
    let value = worker::js_sys::Reflect::get(env.as_ref(), &"SESSION_CONFIG".into())
        .map_err(|_| Error::invalid("SESSION_CONFIG could not be read"))?;
    if value.is_undefined() || value.is_null() {
        return Ok(String::new());
    }
    if let Some(text) = value.as_string() {
        return Ok(text);
    }
    if value.is_object() {
        return worker::js_sys::JSON::stringify(&value)
            .ok()
            .and_then(|s| s.as_string())
            .ok_or_else(|| Error::invalid("SESSION_CONFIG: the object var could not be read as JSON"));
    }
    Err(Error::invalid("SESSION_CONFIG must be a JSON string or a JSON object var"))
}

fn log(method: &str, path: &str, resp: &api::Response) {
    if resp.status >= 500 {
        console_error!("{method} {path} -> {}: {}", resp.status, String::from_utf8_lossy(&resp.body));
    }
    for w in &resp.warnings {
        console_warn!("{method} {path}: {w}");
    }
}

/// The Durable Object class bound as `SESSION_AGENT`, configured by `SESSION_CONFIG`.
#[durable_object]
pub struct SessionAgent {
    agent: Agent,
}

impl DurableObject for SessionAgent {
    fn new(state: State, env: Env) -> Self {
        SessionAgent { agent: Agent::from_env(&state, &env) }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        self.agent.fetch(req).await
    }

    async fn alarm(&self) -> Result<Response> {
        self.agent.alarm().await
    }

    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        self.agent.socket_message(ws, message).await
    }

    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _was_clean: bool) -> Result<()> {
        // Complete the closing handshake; the runtime then forgets the socket.
        let _ = ws.close(Some(1000), Some("closing"));
        Ok(())
    }

    async fn websocket_error(&self, _ws: WebSocket, error: worker::Error) -> Result<()> {
        console_warn!("websocket error: {error}");
        Ok(())
    }
}

/// The Durable Object class bound as `MEMORY_SPACE`: a memory space, the memories and shared
/// blocks of the agents mapped to it (`session_agent_core::space`). The same code as
/// [`SessionAgent`] in [`Role::Space`]: its own routes, no sessions, no sockets.
#[durable_object]
pub struct MemorySpace {
    space: Agent,
}

impl DurableObject for MemorySpace {
    fn new(state: State, env: Env) -> Self {
        MemorySpace { space: Agent::from_env_as(&state, &env, Role::Space) }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        self.space.fetch(req).await
    }

    async fn alarm(&self) -> Result<Response> {
        self.space.alarm().await
    }
}
