//! Search answers, kept between writes: a session's until its next write, one across sessions
//! until any write. They are kept under the compiled query, so texts that search the same
//! (`deploy  database`, `"deploy" database`) share one. The searching itself is
//! [`store::search`](crate::core::store::search).

use serde::Serialize;

use crate::core::cache::Read;
use crate::core::env::Env;
use crate::core::error::{Error, Result};
use crate::core::session::Session;
use crate::core::store::search::{self, Hit};

/// The answer `{"results": […]}` to a search of `session` for `query`, best match first
/// ([`search::in_session`]).
pub async fn in_session(session: &Session<'_>, query: &str, limit: i64) -> Result<String> {
    let Some(compiled) = search::compile(query) else { return answer(&[]) };
    let key = format!("search\n{}\n{limit}\n{compiled}", session.id);
    let read = || async {
        Ok(Read::text(answer(&search::in_session(session.env.sql, session.id, query, limit)?)?, Vec::new()))
    };
    Ok(session.kept(key, session.version()?, read).await?.0)
}

/// The answer `{"results": […]}` to a search of every session of the agent of `env`
/// ([`search::across_sessions`]). Its version is [`Sql::changes`](crate::core::sql::Sql::changes):
/// any row written.
pub async fn across(env: &Env<'_>, query: &str, limit: i64) -> Result<String> {
    let Some(compiled) = search::compile(query) else { return answer(&[]) };
    let key = format!("across\n{limit}\n{compiled}");
    let read = || async { Ok(Read::text(answer(&search::across_sessions(env.sql, query, limit)?)?, Vec::new())) };
    let now = || Ok((env.sql.changes(), 0));
    Ok(env.cache.kept(&key, now()?, now, read).await?.0)
}

fn answer(results: &[Hit]) -> Result<String> {
    #[derive(Serialize)]
    struct Answer<'a> {
        results: &'a [Hit],
    }
    serde_json::to_string(&Answer { results }).map_err(|e| Error::internal(e.to_string()))
}
