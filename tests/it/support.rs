//! Shared helpers for the native tests: a migrated SQLite database and an API client over it.

use session_agent_api::http::Method;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use serde_json::{json, Value as Json};
use session_agent_api::object::{self, Object, Parts, Reply, Settings};
use session_agent_api::{self as api, Request, Response};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::blobs::MemBlobs;
use session_agent_core::cache::{ReadCache, DEFAULT_BUDGET};
use session_agent_core::config::SessionConfig;
use session_agent_core::databases::{unbound, Databases, NoDatabases};
use session_agent_core::directory::Report;
use session_agent_core::env::{Env, NoSecrets};
use session_agent_core::error::{Error as CoreError, Result as CoreResult};
use session_agent_core::ids::Role;
use session_agent_core::llm::embeddings::EmbeddingsConfig;
use session_agent_core::llm::rerank::{RerankConfig, RerankProvider};
use session_agent_core::llm::{HttpRequest, HttpResponse, LlmConfig, Provider, ToolUse, Transport};
use session_agent_core::space::{NoSpaces, Operation, SpaceReply, Spaces};
use session_agent_core::sql::{Row, Sql, Value};
use session_agent_core::sqlite::SqliteDb;
use session_agent_core::store;
use session_agent_core::vectors::Vectors;

/// A fresh in-memory database with the schema applied.
pub fn db() -> SqliteDb {
    let db = SqliteDb::memory().expect("open sqlite");
    store::open(&db, 0).expect("migrate");
    db
}

/// An in-memory database at schema version `version`, as an agent left it before a later one.
pub fn db_at(version: usize) -> SqliteDb {
    use session_agent_core::sql::{Sql, Value};
    use session_agent_core::store::schema;
    let db = SqliteDb::memory().expect("open sqlite");
    db.execute_batch(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .expect("schema_version");
    for (v, name, body) in &schema::MIGRATIONS[..version] {
        db.execute_batch(body).expect("a migration");
        db.execute("INSERT INTO schema_version VALUES (?, ?, 't')", &[Value::Int(*v), (*name).into()])
            .expect("its row");
    }
    db
}

/// The Durable Object of agent `agent` ([`Object`], the one the Workers layer runs) on an
/// in-memory database and object store with the native platform ([`Native`]), its requests one
/// millisecond apart (or frozen). The fields below `object` are what it was opened with:
/// changed, they count once it is opened again ([`Api::reopen`], a new instance).
pub struct Api {
    pub db: Rc<SqliteDb>,
    pub blobs: Rc<MemBlobs>,
    pub model: Rc<Model>,
    pub events: Rc<Frames>,
    /// The clock of every request (the object's clock reads it).
    pub now: Rc<Cell<i64>>,
    pub frozen: bool,
    /// The alarm, the directory and the tasks of this object.
    pub native: Rc<Native>,
    pub object: Object,
    pub config: SessionConfig,
    pub agent: String,
    pub llm: LlmConfig,
    pub embeddings: EmbeddingsConfig,
    /// The re-ranker (none by default; [`Api::with_rerank`]), answered by [`Model`].
    pub rerank: RerankConfig,
    /// An agent, or a memory space.
    pub role: Role,
    /// The memory spaces this object reaches (none by default).
    pub spaces: Rc<dyn Spaces>,
    /// `RATE_LIMIT` (none by default), as the variable says it.
    pub rate: Option<&'static str>,
    /// The vector indexes' ceiling (the default when `None`).
    pub vectors_cap: Option<usize>,
    /// Whether the object reports to the directory ([`Native::reports`]); off by default.
    pub directory: Directory,
    /// The Worker's secrets the object reads (none by default).
    pub secrets: HashMap<String, String>,
    /// The D1 databases the object reads, by binding name (none by default).
    pub d1: Rc<NativeD1>,
}

/// D1 natively: SQLite databases by binding name ([`NativeD1::bind`]).
#[derive(Default)]
pub struct NativeD1 {
    pub dbs: RefCell<HashMap<String, SqliteDb>>,
    /// Every query run: `{binding, sql, params}`.
    pub queries: RefCell<Vec<Json>>,
    /// While set, every query fails (a database that cannot be reached).
    pub down: Cell<bool>,
    /// While set, no query ever answers.
    pub hangs: Cell<bool>,
}

impl NativeD1 {
    /// Binds a fresh database as `binding`, with `schema` run on it.
    pub fn bind(&self, binding: &str, schema: &str) {
        let db = SqliteDb::memory().expect("sqlite");
        db.execute_batch(schema).expect("schema");
        self.dbs.borrow_mut().insert(binding.to_owned(), db);
    }
}

impl Databases for NativeD1 {
    fn query<'a>(&'a self, binding: &'a str, sql: &'a str, params: &'a [Value]) -> BoxFuture<'a, CoreResult<Vec<Row>>> {
        let shown: Vec<Json> = params
            .iter()
            .map(|p| match p {
                Value::Text(t) => json!(t),
                other => json!(format!("{other:?}")),
            })
            .collect();
        self.queries.borrow_mut().push(json!({"binding": binding, "sql": sql, "params": shown}));
        if self.hangs.get() {
            return Box::pin(futures::future::pending());
        }
        let out = if self.down.get() {
            Err(CoreError::internal("D1 is down"))
        } else {
            match self.dbs.borrow().get(binding) {
                Some(db) => db.query(sql, params),
                None => Err(unbound(binding)),
            }
        };
        Box::pin(async move { out })
    }
}

/// Whether an object keeps the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Directory {
    Off,
    On,
}

thread_local! {
    /// The tasks of every object of a test (each test runs on its own thread).
    /// With its spawner (the pool is borrowed while it runs, and a running task may spawn).
    static POOL: (RefCell<LocalPool>, futures::executor::LocalSpawner) = {
        let pool = LocalPool::new();
        let spawner = pool.spawner();
        (RefCell::new(pool), spawner)
    };
}

/// Runs `fut` to its end on the test's pool, with every task it starts, then the tasks left
/// (the work after an answer) until none can go on.
pub fn run<T>(fut: impl std::future::Future<Output = T>) -> T {
    POOL.with(|p| {
        let mut pool = p.0.borrow_mut();
        let out = pool.run_until(fut);
        pool.run_until_stalled();
        out
    })
}

/// Starts `fut` on the test's pool (run by [`run`] and [`stall`]).
pub fn spawn(fut: impl std::future::Future<Output = ()> + 'static) {
    POOL.with(|p| p.1.spawn_local(fut)).expect("spawn a task");
}

/// Runs the test's pool until no task can go on.
pub fn stall() {
    POOL.with(|p| p.0.borrow_mut().run_until_stalled());
}

/// The platform of native tests: the alarm as a value, the directory's reports as a list,
/// tasks on the test's pool. Time passes only when a test moves the clock: a timer of a
/// positive length never fires (so a streamed turn gets no keep-alive comments).
#[derive(Default)]
pub struct Native {
    /// The alarm (ms), if set.
    pub alarm: Cell<Option<i64>>,
    /// Every time the alarm was set, in order.
    pub alarm_sets: RefCell<Vec<i64>>,
    /// The reports the directory was sent, as JSON.
    pub reports: RefCell<Vec<Json>>,
    /// While set, a report is not taken.
    pub directory_down: Cell<bool>,
}

impl object::Alarm for Native {
    fn get(&self) -> BoxFuture<'_, CoreResult<Option<i64>>> {
        Box::pin(async move { Ok(self.alarm.get()) })
    }
    fn set(&self, at_ms: i64) -> BoxFuture<'static, CoreResult<()>> {
        self.alarm.set(Some(at_ms));
        self.alarm_sets.borrow_mut().push(at_ms);
        Box::pin(async { Ok(()) })
    }
}

impl object::Directory for Native {
    fn send<'a>(&'a self, report: &'a Report) -> BoxFuture<'a, CoreResult<()>> {
        Box::pin(async move {
            if self.directory_down.get() {
                return Err(CoreError::internal("the shard did not answer"));
            }
            self.reports.borrow_mut().push(report.to_json());
            Ok(())
        })
    }
}

impl object::Tasks for Native {
    fn spawn(&self, work: BoxFuture<'static, ()>) {
        POOL.with(|p| p.1.spawn_local(work)).expect("spawn a task");
    }
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        match ms {
            0 => Box::pin(async {}),
            _ => Box::pin(futures::future::pending()),
        }
    }
}

/// Memory spaces in process: each a Durable Object of its own (an [`Api`] in `Role::Space` on
/// its own SQLite), reached through the same `api::handle` the Workers layer calls. A space
/// marked `down` cannot be reached (as a timeout would say).
#[derive(Default)]
pub struct InProcess {
    pub spaces: RefCell<HashMap<String, Rc<Api>>>,
    pub down: Cell<bool>,
    /// Requests sent, as `METHOD path`.
    pub calls: RefCell<Vec<String>>,
}

impl InProcess {
    /// The space `name`, made on first use (as `idFromName` would), with `config`.
    pub fn space(&self, name: &str, config: Json) -> Rc<Api> {
        self.spaces
            .borrow_mut()
            .entry(name.to_owned())
            .or_insert_with(|| {
                let mut api = Api::with_config(config).with_model();
                api.role = Role::Space;
                api = api.named(name);
                Rc::new(api.reopen())
            })
            .clone()
    }
}

impl Spaces for InProcess {
    fn send<'a>(&'a self, space: &'a str, op: &'a Operation) -> BoxFuture<'a, CoreResult<SpaceReply>> {
        Box::pin(async move {
            let req = api::spaces::request(op);
            self.calls.borrow_mut().push(format!("{} {}", req.method, req.path));
            if self.down.get() {
                return Err(session_agent_core::space::unavailable(format!("the memory space {space} did not answer")));
            }
            let Some(api) = self.spaces.borrow().get(space).cloned() else {
                return Err(session_agent_core::space::unavailable(format!("no space {space} in this test")));
            };
            api.tick();
            match api.object.fetch(req).await {
                Reply::Whole(resp) => Ok(SpaceReply { status: resp.status, body: resp.body_json() }),
                _ => Err(session_agent_core::space::unavailable("the space answered with a stream")),
            }
        })
    }
}

/// The listeners of native tests: every session listens, and every frame is recorded.
#[derive(Default)]
pub struct Frames {
    pub frames: RefCell<Vec<(String, Json)>>,
    pub warnings: RefCell<Vec<String>>,
    /// Every `spans` report: what, and its phases.
    pub spans: RefCell<Vec<(String, Phases)>>,
}

/// The phases of a `spans` report, in their order (ms).
pub type Phases = Vec<(&'static str, f64)>;

/// The spans' clock of native tests: milliseconds since it was made.
fn timer() -> impl Fn() -> f64 {
    let start = std::time::Instant::now();
    move || start.elapsed().as_secs_f64() * 1000.0
}

impl Frames {
    /// The frames published so far to `session`, and forgets them.
    pub fn take(&self, session: &str) -> Vec<Json> {
        let mut all = self.frames.borrow_mut();
        let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(s, _)| s == session);
        *all = rest;
        mine.into_iter().map(|(_, f)| f).collect()
    }
}

impl session_agent_core::events::Events for Frames {
    fn has_listeners(&self, _session: &str) -> bool {
        true
    }
    fn publish(&self, session: &str, frame: &Json) {
        self.frames.borrow_mut().push((session.to_owned(), frame.clone()));
    }
    /// Agent-wide frames are recorded under the session `*`.
    fn publish_agent(&self, frame: &Json) {
        self.frames.borrow_mut().push(("*".to_owned(), frame.clone()));
    }
    fn warn(&self, message: &str) {
        self.warnings.borrow_mut().push(message.to_owned());
    }
    fn spans(&self, what: &str, spans: &[(&'static str, f64)]) {
        self.spans.borrow_mut().push((what.to_owned(), spans.to_vec()));
    }
}

/// The LLM peer of native tests: an OpenAI-compatible endpoint answering from a queue of
/// replies (default: a fixed summary) and recording every request body it was sent.
#[derive(Default)]
pub struct Model {
    pub replies: RefCell<VecDeque<CoreResult<HttpResponse>>>,
    pub requests: RefCell<Vec<Json>>,
    /// `/embeddings` calls answered (with [`embedding`] vectors), and whether they fail.
    pub embed_calls: Cell<usize>,
    /// The texts of every `/embeddings` call, in order.
    pub embed_inputs: RefCell<Vec<Vec<String>>>,
    pub embed_fails: Cell<bool>,
    /// An `/embeddings` call with a text containing this fails (the others are answered).
    pub embed_refuses: RefCell<Option<String>>,
    /// When set, the next chat call waits for it before answering (a model still thinking).
    pub gate: RefCell<Option<futures::channel::oneshot::Receiver<()>>>,
    /// Chat calls never answer while set (a model call a crash cuts short).
    pub hangs: Cell<bool>,
    /// How the next re-ranking calls are answered, in turn (with none queued:
    /// [`Rerank::Reversed`]).
    pub rerank_replies: RefCell<VecDeque<Rerank>>,
    /// Every re-ranking call: `{url, authorization, body}` over HTTP, `{model, input}` through
    /// the binding.
    pub rerank_calls: RefCell<Vec<Json>>,
    /// Other HTTP peers (an MCP server, the service of http blocks), by the start of their URL,
    /// the first that matches answering: each request to one goes to its handler and to
    /// `peer_requests`. Set with [`Model::serve`].
    pub peers: RefCell<Vec<(String, Peer)>>,
    /// Every request sent to one of `peers`, oldest first.
    pub peer_requests: RefCell<Vec<HttpRequest>>,
}

/// A scripted HTTP peer of [`Model`]: a request in, its answer or a transport error out (`None`:
/// no answer ever, time runs out).
pub type Peer = Rc<dyn Fn(&HttpRequest) -> Option<CoreResult<HttpResponse>>>;

/// Where the http blocks of native tests send their calls (a peer of [`Model`] answers them).
pub const SERVICE: &str = "http://blocks.test/";

/// How [`Model`] answers a re-ranking call (`POST …/rerank`, or a binding run with `contexts`).
pub enum Rerank {
    /// Scores that put the candidates in the reverse of their order (the last first), in the
    /// shape of the call (`results` over HTTP, `response` through the binding).
    Reversed,
    /// This HTTP status and body (over HTTP; through the binding: the body parsed as the answer).
    Answer(u16, String),
    /// No answer ever (time runs out: [`Model`]'s clock is always past due).
    Never,
}

/// Asserts a computed float is within `1e-9` of `expected` (a sum, a ratio, a cosine: the last
/// bits depend on the order of the operations, which the test does not fix). `None`, or a JSON
/// value that is not a number, fails.
#[track_caller]
pub fn assert_near(actual: Option<f64>, expected: f64) {
    match actual {
        Some(a) if (a - expected).abs() <= 1e-9 => {}
        _ => panic!("expected {expected} (within 1e-9), got {actual:?}"),
    }
}

/// A deterministic embedding for native tests: each word (lower case, letters and digits) adds
/// 1 to one of 64 dimensions chosen by its hash, so texts that share words are similar.
pub fn embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0.0_f32; 64];
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let h = w.to_lowercase().bytes().fold(2166136261_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
        v[(h % 64) as usize] += 1.0;
    }
    v
}

/// The text of an OpenAI-compatible completion answer.
/// An OpenAI-compatible answer calling tools `(id, name, arguments)`.
pub fn tool_calls(list: &[(&str, &str, Json)]) -> HttpResponse {
    let tool_calls: Vec<Json> = list
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    let body = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": tool_calls}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5}});
    HttpResponse { headers: Vec::new(), status: 200, body: body.to_string() }
}

pub fn completion(text: &str) -> HttpResponse {
    completion_with_usage(text, json!({"prompt_tokens": 100, "completion_tokens": 20}))
}

/// An OpenAI-compatible answer of `text` whose provider reports `usage`.
pub fn completion_with_usage(text: &str, usage: Json) -> HttpResponse {
    let body = json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage});
    HttpResponse { headers: Vec::new(), status: 200, body: body.to_string() }
}

impl Model {
    /// Queues the next answer.
    pub fn reply(&self, r: CoreResult<HttpResponse>) {
        self.replies.borrow_mut().push_back(r);
    }
    /// Makes `peer` answer the requests whose URL starts with `url`, first among the peers,
    /// in place of any other peer of that `url`.
    pub fn serve(&self, url: &str, peer: impl Fn(&HttpRequest) -> Option<CoreResult<HttpResponse>> + 'static) {
        let mut peers = self.peers.borrow_mut();
        peers.retain(|(u, _)| u != url);
        peers.insert(0, (url.to_owned(), Rc::new(peer)));
    }
    /// The user prompts sent so far.
    pub fn prompts(&self) -> Vec<String> {
        self.requests
            .borrow()
            .iter()
            .map(|b| b["messages"][0]["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Model {
    /// The answer to a re-ranking call of `n` candidates: the queued [`Rerank`], else
    /// [`Rerank::Reversed`] in the shape `[list, index, score]`. `None`: it never comes.
    fn rerank_answer(&self, n: usize, [list, index, score]: [&str; 3]) -> Option<(u16, String)> {
        match self.rerank_replies.borrow_mut().pop_front().unwrap_or(Rerank::Reversed) {
            Rerank::Reversed => {
                let entries: Vec<Json> =
                    (0..n).rev().map(|i| json!({ index: i, score: i as f64 / n as f64 })).collect();
                Some((200, json!({ list: entries }).to_string()))
            }
            Rerank::Answer(status, body) => Some((status, body)),
            Rerank::Never => None,
        }
    }
}

impl Transport for Model {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, CoreResult<HttpResponse>> {
        let peer = self.peers.borrow().iter().find(|(url, _)| req.url.starts_with(url.as_str())).map(|p| p.1.clone());
        if let Some(peer) = peer {
            self.peer_requests.borrow_mut().push(req.clone());
            return match peer(&req) {
                Some(answer) => Box::pin(async move { answer }),
                None => Box::pin(futures::future::pending()),
            };
        }
        if req.url.starts_with(SERVICE) {
            // The service of http blocks before a test serves one: it never answers.
            return Box::pin(futures::future::pending());
        }
        if req.url.ends_with("/rerank") {
            let body: Json = serde_json::from_str(&req.body).unwrap_or(Json::Null);
            let authorization = req.headers.iter().find(|(k, _)| k == "authorization").map(|(_, v)| v.clone());
            let n = body["documents"].as_array().map_or(0, Vec::len);
            self.rerank_calls.borrow_mut().push(json!({"url": req.url, "authorization": authorization, "body": body}));
            return match self.rerank_answer(n, ["results", "index", "relevance_score"]) {
                Some((status, body)) => Box::pin(async move { Ok(HttpResponse { headers: Vec::new(), status, body }) }),
                None => Box::pin(futures::future::pending()),
            };
        }
        if req.url.ends_with("/embeddings") {
            self.embed_calls.set(self.embed_calls.get() + 1);
            let body: Json = serde_json::from_str(&req.body).unwrap_or(Json::Null);
            let texts =
                body["input"].as_array().map(|a| a.iter().map(|t| t.as_str().unwrap_or("").to_owned()).collect());
            self.embed_inputs.borrow_mut().push(texts.unwrap_or_default());
            let refused = self.embed_refuses.borrow().clone().is_some_and(|word| {
                body["input"].as_array().is_some_and(|a| a.iter().any(|t| t.as_str().unwrap_or("").contains(&word)))
            });
            let fails = self.embed_fails.get() || refused;
            let data: Vec<Json> = body["input"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .enumerate()
                        .map(|(i, t)| json!({"index": i, "embedding": embedding(t.as_str().unwrap_or(""))}))
                        .collect()
                })
                .unwrap_or_default();
            return Box::pin(async move {
                if fails {
                    return Ok(HttpResponse {
                        headers: Vec::new(),
                        status: 500,
                        body: "{\"error\":{\"message\":\"embeddings down\"}}".into(),
                    });
                }
                Ok(HttpResponse { headers: Vec::new(), status: 200, body: json!({"data": data}).to_string() })
            });
        }
        self.requests.borrow_mut().push(serde_json::from_str(&req.body).unwrap_or(Json::Null));
        if self.hangs.get() {
            return Box::pin(futures::future::pending());
        }
        let next = self.replies.borrow_mut().pop_front();
        let gate = self.gate.borrow_mut().take();
        Box::pin(async move {
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            next.unwrap_or_else(|| Ok(completion("## Topic\nA test chat.\n\n## Key Points\n- summarized")))
        })
    }
    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, CoreResult<Json>> {
        if let Some(n) = input["contexts"].as_array().map(Vec::len) {
            self.rerank_calls.borrow_mut().push(json!({"model": model, "input": input}));
            return match self.rerank_answer(n, ["response", "id", "score"]) {
                Some((_, body)) => {
                    Box::pin(async move { Ok(serde_json::from_str(&body).unwrap_or(Json::String(body))) })
                }
                None => Box::pin(futures::future::pending()),
            };
        }
        Box::pin(async { Ok(json!({"response": "unused"})) })
    }
    /// Always past due: a call bounded by it (a re-ranking call) that does not answer at once
    /// is late.
    fn sleep(&self, _ms: u64) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl Api {
    pub fn new() -> Api {
        Api::with_db(db())
    }

    pub fn with_db(db: SqliteDb) -> Api {
        Api::with_db_embedded(db, EmbeddingsConfig::none())
    }

    /// An API on `db` whose Durable Object starts with `embeddings` from its first open (as an
    /// object with embeddings configured opens a database an older version left).
    pub fn with_db_embedded(db: SqliteDb, embeddings: EmbeddingsConfig) -> Api {
        let now = Rc::new(Cell::new(1_795_345_200_000));
        let db = Rc::new(db);
        let native = Rc::new(Native::default());
        let (blobs, model, events) = (Rc::new(MemBlobs::new()), Rc::new(Model::default()), Rc::new(Frames::default()));
        let spaces: Rc<dyn Spaces> = Rc::new(NoSpaces);
        // Opened for a moment with no settings, then as the fields say.
        let clock = now.clone();
        let parts = Parts {
            sql: db.clone(),
            blobs: blobs.clone(),
            transport: model.clone(),
            events: events.clone(),
            spaces: spaces.clone(),
            alarm: native.clone(),
            directory: None,
            tasks: native.clone(),
            clock: Rc::new(move || clock.get()),
            timer: Rc::new(timer()),
            secrets: Rc::new(NoSecrets),
            databases: Rc::new(NoDatabases),
        };
        let settings = Settings {
            embeddings: embeddings.clone(),
            ..Settings::from_vars(Role::Agent, Ok(SessionConfig::default()), &|_| None)
        };
        let object = Object::open(parts, settings);
        Api {
            db,
            blobs,
            model,
            events,
            now,
            frozen: false,
            native,
            object,
            config: SessionConfig::default(),
            agent: "alice".into(),
            llm: LlmConfig::none(),
            embeddings,
            rerank: RerankConfig::none(),
            role: Role::Agent,
            spaces,
            rate: None,
            vectors_cap: None,
            directory: Directory::Off,
            secrets: HashMap::new(),
            d1: Rc::new(NativeD1::default()),
        }
        .reopen()
    }

    /// The same agent opened again with what its fields say now: a new instance of the Durable
    /// Object (its indexes, cache and running turns start empty) on the same storage, alarm and
    /// directory.
    pub fn reopen(mut self) -> Api {
        // The variables read as the Durable Object reads them (`RATE_LIMIT`); the models' as set.
        let rate = self.rate;
        let vars = move |name: &str| (name == "RATE_LIMIT").then_some(rate).flatten().map(str::to_owned);
        let settings = Settings {
            named: Some(self.agent.clone()),
            id: self.agent.clone(),
            llm: self.llm.clone(),
            embeddings: self.embeddings.clone(),
            rerank: self.rerank.clone(),
            vectors_cap: self.vectors_cap,
            ..Settings::from_vars(self.role, Ok(self.config.clone()), &vars)
        };
        let clock = self.now.clone();
        let parts = Parts {
            sql: self.db.clone(),
            blobs: self.blobs.clone(),
            transport: self.model.clone(),
            events: self.events.clone(),
            spaces: self.spaces.clone(),
            alarm: self.native.clone(),
            directory: match self.directory {
                Directory::On => Some(self.native.clone()),
                Directory::Off => None,
            },
            tasks: self.native.clone(),
            clock: Rc::new(move || clock.get()),
            timer: Rc::new(timer()),
            secrets: Rc::new(self.secrets.clone()),
            databases: self.d1.clone(),
        };
        self.object = Object::open(parts, settings);
        self
    }

    /// The same agent named `name` (reopened).
    pub fn named(mut self, name: &str) -> Api {
        self.agent = name.to_owned();
        self.reopen()
    }

    /// The same agent reaching `spaces` (reopened).
    pub fn with_spaces(mut self, spaces: Rc<dyn Spaces>) -> Api {
        self.spaces = spaces;
        self.reopen()
    }

    /// An API whose agent has `config` (JSON as in `SESSION_CONFIG`).
    pub fn with_config(config: Json) -> Api {
        let mut api = Api::new();
        api.config = SessionConfig::from_json(&config.to_string()).expect("valid config");
        api.reopen()
    }

    /// The same API with an OpenAI-compatible model configured (answered by [`Model`]).
    pub fn with_model(mut self) -> Api {
        self.llm = LlmConfig {
            provider: Provider::OpenAi,
            base_url: "http://model.test/v1".into(),
            model: "test-model".into(),
            api_key: None,
            timeout_ms: 1000,
            tools: ToolUse::Auto,
        };
        self.reopen()
    }

    /// Moves the clock one millisecond on, unless it is frozen (each request is a moment).
    pub fn tick(&self) {
        if !self.frozen {
            self.now.set(self.now.get() + 1);
        }
    }

    /// The environment of a request now (one millisecond after the last, unless frozen).
    pub fn env(&self) -> Env<'_> {
        self.tick();
        self.object.env()
    }

    /// The read cache of the object's instance.
    pub fn cache(&self) -> &ReadCache {
        self.object.cache()
    }

    /// The vector indexes of the object's instance.
    pub fn vectors(&self) -> &Vectors {
        self.object.vectors()
    }

    /// The same agent reporting to the directory ([`Native::reports`]), reopened.
    pub fn with_directory(mut self) -> Api {
        self.directory = Directory::On;
        self.reopen()
    }

    /// The same agent with `RATE_LIMIT` = `limit`, reopened.
    pub fn with_rate(mut self, limit: &'static str) -> Api {
        self.rate = Some(limit);
        self.reopen()
    }

    /// The object's alarm fired now, with what it started done.
    pub fn alarm(&self) -> Option<object::Woke> {
        self.tick();
        run(self.object.alarm())
    }

    /// What the object replies to `req`, with the work it left after it done.
    pub fn reply(&self, req: Request) -> Reply {
        self.tick();
        run(self.object.fetch(req))
    }

    /// Answers `req` as the Durable Object does (a stream read to its end, then answered as one
    /// body), then runs what the answer left for later (memory extraction), as the Durable
    /// Object does once the answer is sent.
    pub fn send(&self, req: Request) -> Response {
        let resp = match self.reply(req.clone()) {
            Reply::Whole(resp) => resp,
            Reply::Stream { headers, body } => {
                let chunks: Vec<Vec<u8>> = run(futures::StreamExt::collect(body));
                Response { status: 200, headers, body: chunks.concat(), warnings: vec![], after: vec![] }
            }
            Reply::Upgrade { session, claims } => {
                let body = json!({"session": session, "claims": claims.map(|c| serde_json::to_value(c).unwrap())});
                Response {
                    status: 101,
                    headers: vec![],
                    body: body.to_string().into_bytes(),
                    warnings: vec![],
                    after: vec![],
                }
            }
        };
        assert_speaks_no_storage(&req, &resp);
        resp
    }

    /// `GET path` answered with an empty read cache: what a read finds with nothing kept (the
    /// API's own cache is left as it is).
    pub fn get_fresh(&self, path: &str) -> Response {
        let empty = ReadCache::new(DEFAULT_BUDGET);
        let env = Env { cache: &empty, ..self.env() };
        futures::executor::block_on(api::handle(&env, &Request::new(Method::Get, path)))
    }

    /// The names of the tools session `sid` offers, in order.
    pub fn tool_names(&self, sid: &str) -> Vec<String> {
        self.get(&format!("/sessions/{sid}/tools")).body_json()["tools"]
            .as_array()
            .expect("a tools list")
            .iter()
            .map(|t| t["name"].as_str().expect("a tool name").to_owned())
            .collect()
    }

    /// The single integer a SQL query answers (for checks of what is stored).
    pub fn count(&self, sql: &str) -> i64 {
        self.db.query_row(sql, &[]).expect("query").expect("a row").int(0).expect("an integer")
    }

    /// The same API with embeddings (OpenAI-compatible, answered by [`Model`]), adopted as the
    /// Durable Object adopts them when it starts.
    pub fn with_embeddings(self) -> Api {
        self.with_embeddings_model("test-embed")
    }

    /// The same API with embeddings by `model` (a new Durable Object instance: the indexes kept
    /// in memory start empty).
    pub fn with_embeddings_model(mut self, model: &str) -> Api {
        self.embeddings = EmbeddingsConfig {
            provider: Provider::OpenAi,
            base_url: "http://model.test/v1".into(),
            model: model.into(),
            api_key: None,
        };
        let api = self.reopen();
        assert!(api.object.broken().is_none(), "adopt the model");
        api
    }

    /// The same API with a re-ranker of `provider` (`Http`: `http://rerank.test/v1`, model
    /// `test-rerank`, key `rerank-key`), answered by [`Model`].
    pub fn with_rerank(mut self, provider: RerankProvider) -> Api {
        let http = provider == RerankProvider::Http;
        self.rerank = RerankConfig {
            provider,
            base_url: if http { "http://rerank.test/v1".into() } else { String::new() },
            model: if http { "test-rerank".into() } else { "@cf/baai/bge-reranker-base".into() },
            api_key: http.then(|| "rerank-key".into()),
            ..RerankConfig::none()
        };
        self.reopen()
    }

    pub fn get(&self, path: &str) -> Response {
        self.send(Request::new(Method::Get, path))
    }

    pub fn delete(&self, path: &str) -> Response {
        self.send(Request::new(Method::Delete, path))
    }

    pub fn post(&self, path: &str, body: Json) -> Response {
        self.send(Request::new(Method::Post, path).json(&body))
    }

    pub fn put(&self, path: &str, body: Json) -> Response {
        self.send(Request::new(Method::Put, path).json(&body))
    }

    pub fn patch(&self, path: &str, body: Json) -> Response {
        self.send(Request::new(Method::Patch, path).json(&body))
    }

    /// Appends a text message and asserts it was stored; returns the answer body.
    pub fn append(&self, sid: &str, id: &str, parent: Option<Option<&str>>, text: &str) -> Json {
        let mut body = json!({ "message": msg(id, "user", text) });
        if let Some(p) = parent {
            body["parentId"] = json!(p);
        }
        let r = self.post(&format!("/sessions/{sid}/messages"), body);
        assert_eq!(r.status, 201, "append {id}: {}", String::from_utf8_lossy(&r.body));
        r.body_json()
    }

    /// The ids of a history answer.
    pub fn history_ids(&self, path: &str) -> Vec<String> {
        let r = self.get(path);
        assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        ids(&r.body_json()["messages"])
    }
}

/// A text message.
pub fn msg(id: &str, role: &str, text: &str) -> Json {
    json!({ "id": id, "role": role, "parts": [{ "type": "text", "text": text }] })
}

/// The `id`s of a JSON array of messages.
pub fn ids(list: &Json) -> Vec<String> {
    list.as_array()
        .map(|a| a.iter().map(|m| m["id"].as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default()
}

/// The ids of the hits of a search at `path` (its `results`), which must answer 200.
pub fn hits(api: &Api, path: &str) -> Vec<String> {
    let r = api.get(path);
    assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
    ids(&r.body_json()["results"])
}

/// The words of the storage that no answer may carry: every name with an underscore in the
/// statements of `migrations/` (tables, columns, indexes, triggers; comments left out), and
/// SQLite's own phrases.
pub fn storage_words() -> &'static [String] {
    static WORDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        let mut words: Vec<String> =
            ["sqlite", "sql:", "constraint failed", "no such table", "no such column", "syntax error", "fts5", "rowid"]
                .map(str::to_owned)
                .to_vec();
        for (_, _, body) in session_agent_core::store::schema::MIGRATIONS {
            let code: String = body.lines().map(|l| format!("{}\n", l.split("--").next().unwrap_or(""))).collect();
            for w in code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                let w = w.to_ascii_lowercase();
                if w.contains('_') && w.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && !words.contains(&w) {
                    words.push(w);
                }
            }
        }
        words
    })
}

/// The storage word `text` carries, if any (compared in lower case, as whole names).
pub fn storage_word_in(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    let names: Vec<&str> = lower.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
    storage_words().iter().map(String::as_str).find(|w| {
        if w.contains(['_']) {
            names.contains(w)
        } else {
            lower.contains(w)
        }
    })
}

// invariant 37 (docs/ARCHITECTURE.md): checked on every request of every test.
/// Panics when an error answer carries a storage word (`storage_words`): errors say what went
/// wrong in the API's terms, never in SQL, table or column names.
pub fn assert_speaks_no_storage(req: &Request, resp: &Response) {
    if resp.status < 400 {
        return;
    }
    let message = resp.body_json()["error"]["message"].as_str().unwrap_or_default().to_owned();
    if let Some(w) = storage_word_in(&message) {
        panic!("{} {} answered {} naming the storage ({w:?}): {message}", req.method, req.path, resp.status);
    }
}

/// The error code of an error answer.
pub fn code(r: &Response) -> String {
    r.body_json()["error"]["code"].as_str().unwrap_or_default().to_string()
}

/// `POST /import` of `body` (an export, as NDJSON text) to `api`.
pub fn import(api: &Api, body: &str) -> Response {
    let mut req = Request::new(Method::Post, "/import");
    req.body = body.as_bytes().to_vec();
    api.send(req)
}

/// Each table of `api`'s database with its row count, by name: every table but the FTS5 shadow
/// tables (`messages_fts_data`…), which their own table keeps. Equal before and after: nothing
/// was written.
pub fn table_rows(api: &Api) -> Vec<(String, i64)> {
    let names: Vec<String> = api
        .db
        .query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT GLOB '*_fts_*' ORDER BY name", &[])
        .unwrap()
        .iter()
        .map(|r| r.text(0).unwrap())
        .collect();
    names.into_iter().map(|n| (n.clone(), api.count(&format!("SELECT count(*) FROM \"{n}\"")))).collect()
}

/// A small deterministic generator (xorshift) for random walks and fuzzing: seed it with a
/// non-zero number.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
