//! The `SessionAgent` Durable Object: one agent's memory. It migrates its SQLite schema when it
//! starts and answers every request through [`crate::api::handle`].

use worker::{console_error, durable_object, Date, DurableObject, Env, Request, Response, Result, State};

use super::{convert, do_sql::DoSql};
use crate::api;
use crate::core::error::Error;

#[durable_object]
pub struct SessionAgent {
    db: DoSql,
    /// Why the schema could not be brought up to date, if it could not.
    broken: Option<String>,
}

impl DurableObject for SessionAgent {
    fn new(state: State, _env: Env) -> Self {
        let db = DoSql::new(&state.storage());
        // SQL is synchronous in a DO, so migrating here finishes before any request is served.
        let broken = match api::open(&db, Date::now().as_millis() as i64) {
            Ok(_) => None,
            Err(e) => {
                console_error!("SessionAgent: schema migration failed: {e}");
                Some(e.to_string())
            }
        };
        SessionAgent { db, broken }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        if let Some(why) = &self.broken {
            return convert::error(&Error::internal(format!("storage is not ready: {why}")));
        }
        let req = match convert::read(req).await {
            Ok(r) => r,
            Err(e) => return convert::error(&e),
        };
        let resp = api::handle(&self.db, Date::now().as_millis() as i64, &req);
        if resp.status >= 500 {
            console_error!("{} {} -> {}: {}", req.method, req.path, resp.status, String::from_utf8_lossy(&resp.body));
        }
        convert::write(resp)
    }
}
