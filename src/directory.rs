//! The directory of agents and spaces on Workers: the `AgentDirectory` Durable Object (one
//! shard of the directory, `AGENT_DIRECTORY.idFromName("directory-<n>")`), an object's report
//! sent to its shard ([`send`]), and the front door's `GET /directory`, `/directory/usage` and
//! `/directory/export`, which ask every shard in parallel and merge their pages by name.

use std::collections::VecDeque;

use futures::future::join_all;
use futures::StreamExt;
use worker::wasm_bindgen::JsValue;
use worker::{
    console_error, durable_object, ByteStream, Date, DurableObject, Env, ObjectNamespace, Request, Response, Result,
    State,
};

use super::{convert, do_sql::DoSql};
use session_agent_api::directory as api;
use session_agent_core::directory::{shard_name, shard_of, Listing, Page, Report, DIRECTORY_SHARDS};
use session_agent_core::error::{Error, Result as CoreResult};
use session_agent_core::store::schema;
use session_agent_core::time::iso_millis;

/// The binding of the directory's shards.
pub(crate) const AGENT_DIRECTORY: &str = "AGENT_DIRECTORY";
/// The binding of the agents.
const SESSION_AGENT: &str = "SESSION_AGENT";

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

/// One shard of the directory: a table of the objects whose name hashes to it.
#[durable_object]
pub struct AgentDirectory {
    db: DoSql,
    /// Why the shard cannot serve (its schema), if it cannot.
    broken: Option<Error>,
}

impl DurableObject for AgentDirectory {
    fn new(state: State, _env: Env) -> Self {
        let db = DoSql::new(&state.storage());
        let broken = schema::migrate(&db, &iso_millis(now_ms())).err().map(|e| {
            console_error!("AgentDirectory: schema migration failed: {e}");
            Error::internal(format!("storage is not ready: {e}"))
        });
        AgentDirectory { db, broken }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        if let Some(e) = &self.broken {
            convert::drain(&mut req).await;
            return convert::error(e);
        }
        let req = match convert::read(&mut req).await {
            Ok(r) => r,
            Err(e) => return convert::error(&e),
        };
        convert::write(api::shard(&self.db, &req, &iso_millis(now_ms())))
    }
}

/// A request to a Durable Object of `ns` called `name`: `path` (with its query), `body` if any.
async fn call(ns: &ObjectNamespace, name: &str, path: &str, body: Option<String>) -> Result<Response> {
    let (method, body) = match body {
        Some(b) => ("POST", Some(JsValue::from_str(&b))),
        None => ("GET", None),
    };
    let req = convert::request(&format!("https://do{path}"), method, None, body)?;
    ns.id_from_name(name)?.get_stub()?.fetch_with_request(req).await
}

/// Sends `report` to its shard. An error says why it was not taken (the caller retries).
async fn send(ns: &ObjectNamespace, report: &Report) -> CoreResult<()> {
    let (kind, name) = report.key();
    let body = serde_json::json!({ "reports": [report.to_json()] }).to_string();
    let shard = shard_name(shard_of(kind, name));
    let mut resp = call(ns, &shard, "/report", Some(body)).await.map_err(|e| Error::internal(e.to_string()))?;
    match resp.status_code() {
        204 => Ok(()),
        s => Err(Error::internal(format!("the shard answered {s}: {}", resp.text().await.unwrap_or_default()))),
    }
}

/// The directory's shards as the object sees them.
pub(crate) struct WorkersDirectory(pub(crate) ObjectNamespace);

impl session_agent_api::object::Directory for WorkersDirectory {
    fn send<'a>(&'a self, report: &'a Report) -> session_agent_core::blobs::BoxFuture<'a, CoreResult<()>> {
        Box::pin(send(&self.0, report))
    }
}

/// A namespace binding, or `not_configured` naming it.
fn binding(env: &Env, name: &str) -> CoreResult<ObjectNamespace> {
    env.durable_object(name).map_err(|_| {
        Error::new(
            session_agent_core::error::ErrorKind::NotConfigured,
            format!("this deployment has no {name} binding, so it keeps no directory (see README, \"The directory\")"),
        )
    })
}

/// One page of the directory: every shard asked in parallel for its first rows after the
/// cursor, merged by name.
async fn page(dir: &ObjectNamespace, listing: &Listing) -> CoreResult<Page> {
    let path = format!("/list?{}", listing.shard_query());
    let asks = (0..DIRECTORY_SHARDS).map(|n| {
        let path = path.clone();
        async move {
            let mut resp = call(dir, &shard_name(n), &path, None).await.map_err(|e| Error::internal(e.to_string()))?;
            let body = resp.bytes().await.map_err(|e| Error::internal(e.to_string()))?;
            api::shard_answer(resp.status_code(), &body)
        }
    });
    api::page(listing, join_all(asks).await)
}

/// `GET /directory` (admin): a page of entries.
pub(crate) async fn list(env: &Env, query: &str) -> Result<Response> {
    let answer = async {
        let listing = api::listing(query)?;
        let dir = binding(env, AGENT_DIRECTORY)?;
        Ok::<_, Error>(page(&dir, &listing).await?.to_json())
    };
    match answer.await {
        Ok(json) => Response::from_json(&json),
        Err(e) => convert::error(&e),
    }
}

/// `GET /directory/usage` (admin): a page of agents, each with its usage over the range (the
/// agents asked in parallel).
pub(crate) async fn usage(env: &Env, query: &str) -> Result<Response> {
    let answer = async {
        let (listing, forwarded) = api::usage_listing(query, &iso_millis(now_ms()))?;
        let (dir, agents) = (binding(env, AGENT_DIRECTORY)?, binding(env, SESSION_AGENT)?);
        let page = page(&dir, &listing).await?;
        let path = format!("/usage?{forwarded}");
        let asks = page.items.iter().map(|e| {
            let (agents, path) = (&agents, &path);
            async move {
                let mut resp = call(agents, &e.name, path, None).await.map_err(|e| Error::internal(e.to_string()))?;
                let body = resp.bytes().await.map_err(|e| Error::internal(e.to_string()))?;
                api::shard_answer(resp.status_code(), &body)
            }
        });
        let answers = join_all(asks).await;
        api::usage_page(&page, answers)
    };
    match answer.await {
        Ok(resp) => convert::write(resp),
        Err(e) => convert::error(&e),
    }
}

/// Where the cross-agent export is.
struct Export {
    dir: ObjectNamespace,
    agents: ObjectNamespace,
    /// The next page of agents to list (`None` once the last was listed).
    listing: Option<Listing>,
    /// The agents of the page listed, still to export.
    queue: VecDeque<String>,
    /// The agent being exported: its name, its body, the part of a line read so far, and
    /// whether its `end` record came.
    current: Option<(String, ByteStream, Vec<u8>, bool)>,
}

/// The lines of `buf` that are whole, wrapped for `agent`; what follows the last newline stays.
fn whole_lines(agent: &str, buf: &mut Vec<u8>, ended: &mut bool, out: &mut Vec<u8>) {
    let Some(last) = buf.iter().rposition(|&b| b == b'\n') else { return };
    let rest = buf.split_off(last + 1);
    for line in buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        *ended = line.starts_with(br#"{"kind":"end""#);
        out.extend(api::export_record(agent, line));
    }
    *buf = rest;
}

impl Export {
    /// The next piece of the body; `None` at the end (or at an error, logged: the body ends
    /// without the cursor line of the agent it stopped in).
    async fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some((agent, body, buf, ended)) = &mut self.current {
                match body.next().await {
                    Some(Ok(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        let mut out = Vec::new();
                        whole_lines(agent, buf, ended, &mut out);
                        if !out.is_empty() {
                            return Some(out);
                        }
                    }
                    Some(Err(e)) => {
                        console_error!("GET /directory/export: {agent}: {e}");
                        return None;
                    }
                    None => {
                        buf.push(b'\n');
                        let mut out = Vec::new();
                        whole_lines(agent, buf, ended, &mut out);
                        if !*ended {
                            console_error!("GET /directory/export: {agent}'s export ended early");
                            return None;
                        }
                        out.extend(api::export_cursor(agent));
                        self.current = None;
                        return Some(out);
                    }
                }
                continue;
            }
            if let Some(agent) = self.queue.pop_front() {
                let mut resp = match call(&self.agents, &agent, "/export", None).await {
                    Ok(r) if r.status_code() == 200 => r,
                    Ok(r) => {
                        console_error!("GET /directory/export: {agent}'s export answered {}", r.status_code());
                        return None;
                    }
                    Err(e) => {
                        console_error!("GET /directory/export: {agent}: {e}");
                        return None;
                    }
                };
                match resp.stream() {
                    Ok(s) => self.current = Some((agent, s, Vec::new(), false)),
                    Err(e) => {
                        console_error!("GET /directory/export: {agent}: {e}");
                        return None;
                    }
                }
                continue;
            }
            let mut listing = self.listing.take()?;
            match page(&self.dir, &listing).await {
                Ok(p) => {
                    self.queue.extend(p.items.into_iter().map(|e| e.name));
                    if let Some(next) = p.next {
                        listing.after = Some(next);
                        self.listing = Some(listing);
                    }
                }
                Err(e) => {
                    console_error!("GET /directory/export: listing: {}", e.message);
                    return None;
                }
            }
        }
    }
}

/// `GET /directory/export` (admin): NDJSON, each agent's export after the cursor in name order,
/// one agent at a time, streamed as it is read.
pub(crate) async fn export(env: &Env, query: &str) -> Result<Response> {
    let start = (|| {
        let listing = api::export_listing(query)?;
        Ok::<_, Error>((listing, binding(env, AGENT_DIRECTORY)?, binding(env, SESSION_AGENT)?))
    })();
    let (listing, dir, agents) = match start {
        Ok(s) => s,
        Err(e) => return convert::error(&e),
    };
    let state = Export { dir, agents, listing: Some(listing), queue: VecDeque::new(), current: None };
    let body = futures::stream::unfold(state, |mut s| async move {
        s.next().await.map(|chunk| (Ok::<Vec<u8>, worker::Error>(chunk), s))
    });
    let headers = worker::Headers::new();
    headers.set("content-type", session_agent_api::transfer::NDJSON)?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::from_stream(body)?.with_headers(headers))
}
