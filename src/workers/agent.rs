//! The `SessionAgent` Durable Object: one agent's memory. [`Agent`] holds what a request needs
//! (SQLite, R2, the config, the agent's name) and answers through [`crate::api::handle`]; it is
//! public so a Durable Object of your own can embed it with a config built in code.

use worker::{console_error, console_warn, durable_object, Date, DurableObject, Env, Request, Response, Result, State};

use super::{convert, do_sql::DoSql, llm::{WorkersTransport, AI_BINDING}, r2::R2Blobs};
use crate::api;
use crate::core::config::SessionConfig;
use crate::core::error::{Error, ErrorKind};
use crate::core::llm::LlmConfig;

/// The binding of the skills bucket.
pub const SKILLS_BUCKET: &str = "SKILLS_BUCKET";

/// One agent's memory, ready to answer requests.
pub struct Agent {
    db: DoSql,
    blobs: R2Blobs,
    config: SessionConfig,
    llm: LlmConfig,
    transport: WorkersTransport,
    name: String,
    /// Why the agent cannot serve (schema or config), if it cannot.
    broken: Option<Error>,
}

impl Agent {
    /// Opens the agent with `config`: migrates its SQLite schema (synchronous in a DO, so it is
    /// done before any request) and binds `SKILLS_BUCKET` if the Worker has it.
    pub fn new(state: &State, env: &Env, config: SessionConfig) -> Self {
        let db = DoSql::new(&state.storage());
        let broken = api::open(&db, Date::now().as_millis() as i64).err().map(|e| {
            console_error!("SessionAgent: schema migration failed: {e}");
            Error::internal(format!("storage is not ready: {e}"))
        });
        // The name given to idFromName; an object made otherwise keys its skills by its id.
        let id = state.id();
        let name = id.name().unwrap_or_else(|| id.to_string());
        // LLM_API_KEY is a secret; a plain var is accepted too (local .dev.vars sets either).
        let var = |k: &str| {
            env.secret(k).map(|v| v.to_string()).or_else(|_| env.var(k).map(|v| v.to_string())).ok()
        };
        let (llm, llm_error) = match LlmConfig::from_vars(var) {
            Ok(l) => (l, None),
            Err(e) => (LlmConfig::none(), Some(Error::new(ErrorKind::NotConfigured, e.message))),
        };
        let broken = broken.or(llm_error);
        let transport = WorkersTransport { ai: env.ai(AI_BINDING).ok() };
        Agent { db, blobs: R2Blobs::new(env.bucket(SKILLS_BUCKET).ok()), config, llm, transport, name, broken }
    }

    /// Opens the agent with the config of the `SESSION_CONFIG` variable. A config that does not
    /// parse makes every request a 503 `not_configured` naming the problem.
    pub fn from_env(state: &State, env: &Env) -> Self {
        let text = env.var("SESSION_CONFIG").map(|v| v.to_string()).unwrap_or_default();
        match SessionConfig::from_json(&text) {
            Ok(cfg) => Agent::new(state, env, cfg),
            Err(e) => {
                console_error!("SessionAgent: {}", e.message);
                let mut agent = Agent::new(state, env, SessionConfig::default());
                agent.broken.get_or_insert(Error::new(ErrorKind::NotConfigured, e.message));
                agent
            }
        }
    }

    /// The agent's name (its `idFromName` name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Answers one request of the DO API (`../shared/API.md`).
    pub async fn fetch(&self, req: Request) -> Result<Response> {
        if let Some(e) = &self.broken {
            return convert::error(e);
        }
        let req = match convert::read(req).await {
            Ok(r) => r,
            Err(e) => return convert::error(&e),
        };
        let env = api::Env {
            sql: &self.db,
            blobs: &self.blobs,
            config: &self.config,
            agent: &self.name,
            llm: &self.llm,
            transport: &self.transport,
        };
        let resp = api::handle(env, Date::now().as_millis() as i64, &req).await;
        if resp.status >= 500 {
            console_error!("{} {} -> {}: {}", req.method, req.path, resp.status, String::from_utf8_lossy(&resp.body));
        }
        for w in &resp.warnings {
            console_warn!("{} {}: {w}", req.method, req.path);
        }
        convert::write(resp)
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
}
