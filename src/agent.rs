//! The `SessionAgent` Durable Object: one agent's memory. [`Agent`] builds the object of the
//! API layer ([`session_agent_api::object::Object`], where its state and policy live) with the
//! platform's parts (SQLite, R2, the LLM, the sockets, the alarm, the directory, tasks) and
//! forwards each request, socket message and alarm to it; it is public so a Durable Object of
//! your own can embed it with a config built in code.

use std::rc::Rc;
use std::time::Duration;

use futures::StreamExt;
use worker::{
    console_error, console_log, console_warn, durable_object, wasm_bindgen_futures::spawn_local, Date, Delay,
    DurableObject, Env, Request, Response, Result, State, Storage, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

use super::{
    convert,
    d1::WorkersDatabases,
    directory::{WorkersDirectory, AGENT_DIRECTORY},
    do_sql::DoSql,
    llm::{WorkersTransport, AI_BINDING},
    r2::R2Blobs,
    sockets::{Sockets, SpanLog},
    spaces::{WorkersSpaces, SPACE_BINDING},
};
use session_agent_api as api;
use session_agent_api::object::{self, Object, Parts, Reply, Settings, SocketMessage};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::config::SessionConfig;
use session_agent_core::env::Secrets;
use session_agent_core::error::{Error, Result as CoreResult};
use session_agent_core::ids::Role;

/// The binding of the skills bucket.
pub(crate) const SKILLS_BUCKET: &str = "SKILLS_BUCKET";

/// One agent's memory, ready to answer requests: the API layer's object and the sockets it
/// accepts.
#[derive(Clone)]
pub struct Agent {
    object: Object,
    sockets: Rc<Sockets>,
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

/// `performance.now()`: milliseconds with fractions (locally; Cloudflare's advances with I/O
/// only), the spans' clock.
fn performance_now() -> f64 {
    let global = worker::js_sys::global();
    worker::js_sys::Reflect::get(&global, &"performance".into())
        .and_then(|p| worker::js_sys::Reflect::get(&p, &"now".into()).map(|now| (p, now)))
        .ok()
        .and_then(|(p, now)| {
            worker::wasm_bindgen::JsCast::dyn_ref::<worker::js_sys::Function>(&now).and_then(|f| f.call0(&p).ok())
        })
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}

/// The object's alarm in its storage.
struct DoAlarm {
    db: Rc<DoSql>,
    storage: Storage,
}

impl object::Alarm for DoAlarm {
    fn get(&self) -> BoxFuture<'_, CoreResult<Option<i64>>> {
        Box::pin(async move { self.storage.get_alarm().await.map_err(|e| Error::internal(e.to_string())) })
    }

    fn set(&self, at_ms: i64) -> BoxFuture<'static, CoreResult<()>> {
        // Called now, so the write is queued in this turn; awaited, it says when it is stored.
        let queued = self.db.set_alarm_now(at_ms);
        Box::pin(async move {
            let promise = queued.map_err(|e| Error::internal(format!("{e:?}")))?;
            worker::wasm_bindgen_futures::JsFuture::from(promise)
                .await
                .map(|_| ())
                .map_err(|e| Error::internal(format!("{e:?}")))
        })
    }
}

/// Tasks of the Workers runtime.
struct WorkersTasks;

impl object::Tasks for WorkersTasks {
    fn spawn(&self, work: BoxFuture<'static, ()>) {
        spawn_local(work);
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(Delay::from(Duration::from_millis(ms)))
    }
}

/// The Worker's secrets (a plain var of the same name too: local `.dev.vars` sets either),
/// read when the config names one.
struct WorkersSecrets(Env);

impl Secrets for WorkersSecrets {
    fn secret(&self, name: &str) -> Option<String> {
        let env = &self.0;
        env.secret(name).map(|v| v.to_string()).or_else(|_| env.var(name).map(|v| v.to_string())).ok()
    }
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
        Agent::opened(state, env, Ok(config), role)
    }

    /// [`Agent::open`] with a config that may not have read: every request is then a 503
    /// `not_configured` naming the problem.
    fn opened(state: &State, env: &Env, config: CoreResult<SessionConfig>, role: Role) -> Self {
        // LLM_API_KEY is a secret; a plain var is accepted too (local .dev.vars sets either).
        let var = |k: &str| env.secret(k).map(|v| v.to_string()).or_else(|_| env.var(k).map(|v| v.to_string())).ok();
        let db = Rc::new(DoSql::new(&state.storage()));
        let spans = match var("TURN_SPANS").is_some_and(|v| !v.is_empty() && v != "0") {
            true => SpanLog::Logged,
            false => SpanLog::Off,
        };
        let sockets = Rc::new(Sockets::new(state, spans));
        let parts = Parts {
            sql: db.clone(),
            blobs: Rc::new(R2Blobs::new(env.bucket(SKILLS_BUCKET).ok())),
            transport: Rc::new(WorkersTransport { ai: env.ai(AI_BINDING).ok() }),
            events: sockets.clone(),
            spaces: Rc::new(WorkersSpaces::new(env.durable_object(SPACE_BINDING).ok(), var("SPACE_TIMEOUT_MS"))),
            alarm: Rc::new(DoAlarm { db, storage: state.storage() }),
            directory: env
                .durable_object(AGENT_DIRECTORY)
                .ok()
                .map(|ns| Rc::new(WorkersDirectory(ns)) as Rc<dyn object::Directory>),
            tasks: Rc::new(WorkersTasks),
            clock: Rc::new(now_ms),
            timer: Rc::new(performance_now),
            secrets: Rc::new(WorkersSecrets(env.clone())),
            databases: Rc::new(WorkersDatabases(env.clone())),
        };
        let id = state.id();
        let settings = Settings { named: id.name(), id: id.to_string(), ..Settings::from_vars(role, config, &var) };
        Agent { object: Object::open(parts, settings), sockets }
    }

    /// Opens the agent with the config of the `SESSION_CONFIG` variable. A config that does not
    /// parse makes every request a 503 `not_configured` naming the problem.
    pub fn from_env(state: &State, env: &Env) -> Self {
        Agent::from_env_as(state, env, Role::Agent)
    }

    /// [`Agent::from_env`] as `role`.
    pub fn from_env_as(state: &State, env: &Env, role: Role) -> Self {
        let config = config_text(env).and_then(|text| SessionConfig::from_json(&text));
        Agent::opened(state, env, config, role)
    }

    /// The agent's name (its `idFromName` name).
    pub fn name(&self) -> &str {
        self.object.name()
    }

    /// The same object, listed in the directory as `kind` (a `SessionAgent` is an
    /// [`Role::Agent`]; a Durable Object of your own that embeds `Agent` may be another kind).
    pub fn reporting_as(self, kind: Role) -> Self {
        self.object.report_as(kind);
        self
    }

    /// Answers one request of the DO API (`docs/openapi.yaml`) as the object replies: whole,
    /// streamed, or a WebSocket accepted.
    pub async fn fetch(&self, mut req: Request) -> Result<Response> {
        if let Some(e) = self.object.broken() {
            convert::drain(&mut req).await;
            return convert::error(e);
        }
        let req = match convert::read(&mut req).await {
            Ok(r) => r,
            Err(e) => return convert::error(&e),
        };
        let (method, path) = (req.method.as_str(), req.path.clone());
        match self.object.fetch(req).await {
            Reply::Whole(resp) => {
                log(method, &path, &resp);
                convert::write(resp)
            }
            Reply::Stream { headers, body } => {
                let h = worker::Headers::new();
                for (name, value) in headers {
                    h.set(&name, &value)?;
                }
                Ok(Response::from_stream(body.map(Ok::<Vec<u8>, worker::Error>))?.with_headers(h))
            }
            Reply::Upgrade { session, claims } => {
                let pair = WebSocketPair::new()?;
                if let Err(e) = self.sockets.accept(&pair.server, &session, claims.as_ref()) {
                    return convert::error(&e);
                }
                Response::from_websocket(pair.client)
            }
        }
    }

    /// One message from a socket: the object's frames answered to that socket.
    pub async fn socket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        let Some(tags) = self.sockets.tags_of(&ws, self.object.name()) else { return Ok(()) };
        let message = match &message {
            WebSocketIncomingMessage::String(text) => SocketMessage::Text(text),
            WebSocketIncomingMessage::Binary(_) => SocketMessage::Binary,
        };
        let echo = |frame: &serde_json::Value| {
            let _ = ws.send_with_str(frame.to_string());
        };
        for f in self.object.socket_message(&tags, message, &echo).await {
            let _ = ws.send_with_str(f.to_string());
        }
        Ok(())
    }

    /// The object's alarm (`DurableObject::alarm`).
    pub async fn alarm(&self) -> Result<Response> {
        if let Some(w) = self.object.alarm().await {
            console_log!(
                "SessionAgent alarm: {} runs, {} expired memories purged, {} ms; {} memories consolidated, {} retired",
                w.woken.runs,
                w.woken.purged,
                w.ms,
                w.woken.consolidated.checked,
                w.woken.consolidated.retired
            );
        }
        Response::ok("")
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
