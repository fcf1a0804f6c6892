//! Reads kept between writes, beside a session's history (which `Session` keeps):
//!
//! - search answers: a session's until its next write, one across sessions until any write,
//!   kept under the compiled query, so texts that search the same (`deploy  database`,
//!   `what about deploy, database?`) share one (the searching itself is
//!   [`store::search`](crate::store::search)); with embeddings, searched by meaning too
//!   (`vectors::messages`), each until any write (a vector stored
//!   after an answer is one) and under the words as written as well (they are what is embedded);
//!   with a re-ranker (`crate::llm::rerank`), with or without embeddings, the same way (it reads
//!   the words as written);
//! - the counts of each session in the sessions registry (its messages, its active path, a walk
//!   of up to 10,001 rows), until the session's next write.

use serde::Serialize;

use crate::cache::{Key, Read};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::metadata;
use crate::page::Cursor;
use crate::query;
use crate::session::Session;
use crate::store::search::{self, Hit};
use crate::store::sessions::{self, Counts, SessionInfo, Version};
use crate::vectors::messages::{self as by_meaning, Scope};

/// The answer `{"results": […]}` to a search of `session` for `query`, best match first
/// (`search::in_session`; with embeddings, fused with the nearest messages by meaning; with a
/// re-ranker, re-ordered by it).
pub async fn search_in_session(session: &Session<'_>, query: &str, limit: i64) -> Result<String> {
    let Some(compiled) = query::compile(query) else { return answer(&[]) };
    let env = session.env;
    if beyond_words(env) {
        let key = Key::Search { session: session.id.to_owned(), limit, query: as_written(compiled.fts(), query) };
        let read = || by_meaning_read(env, Scope::Session(session.id), query, limit);
        let now = || Ok(Version { newest: env.sql.changes(), writes: 0 });
        return Ok(env.cache.kept(key, now()?, now, read).await?.value);
    }
    let key = Key::Search { session: session.id.to_owned(), limit, query: compiled.fts() };
    let read = || async {
        Ok(Read::text(answer(&search::in_session(session.env.sql, session.id, &compiled, limit)?)?, Vec::new()))
    };
    Ok(session.kept(key, session.version()?, read).await?.value)
}

/// Whether a search is more than full-text search: by meaning too, or re-ranked
/// (`vectors::messages`, kept under the words as written).
fn beyond_words(env: &Env<'_>) -> bool {
    env.embeddings.is_on() || env.rerank.is_on()
}

/// The key's query of a search by meaning too: the compiled query and the words as written.
fn as_written(compiled: String, query: &str) -> String {
    format!("{compiled}\n{}", query.trim())
}

/// A search by words and meaning, as a text to keep (a query that could not be embedded is
/// answered by words, logged, and not kept).
async fn by_meaning_read(env: &Env<'_>, scope: Scope<'_>, query: &str, limit: i64) -> Result<Read> {
    let found = by_meaning::search(&env.meaning(), scope, query, limit).await?;
    found.warnings.iter().for_each(|w| env.events.warn(w));
    Ok(Read::text(answer(&found.value)?, found.warnings))
}

/// The answer `{"results": […]}` to a search of every session of the agent of `env` whose
/// metadata matches `metadata` (`search::across_sessions`; with embeddings, fused with the
/// nearest messages by meaning of the same sessions; with a re-ranker, re-ordered by it). Its version is
/// [`Sql::changes`](crate::sql::Sql::changes): any row written (a session's metadata too).
pub async fn search_across(env: &Env<'_>, query: &str, limit: i64, metadata: &metadata::Filter) -> Result<String> {
    let Some(compiled) = query::compile(query) else { return answer(&[]) };
    let now = || Ok(Version { newest: env.sql.changes(), writes: 0 });
    if beyond_words(env) {
        let key = Key::Across {
            reach: env.reach.clone(),
            limit,
            query: as_written(compiled.fts(), query),
            metadata: metadata.clone(),
        };
        let read = || async {
            let reach = match metadata.is_empty() {
                true => env.reach.clone(),
                false => search::narrow(env.sql, &env.reach, metadata)?,
            };
            by_meaning_read(env, Scope::Across(&reach), query, limit).await
        };
        return Ok(env.cache.kept(key, now()?, now, read).await?.value);
    }
    let key = Key::Across { reach: env.reach.clone(), limit, query: compiled.fts(), metadata: metadata.clone() };
    let read = || async {
        Ok(Read::text(answer(&search::across_sessions(env.sql, &compiled, limit, &env.reach, metadata)?)?, Vec::new()))
    };
    Ok(env.cache.kept(key, now()?, now, read).await?.value)
}

fn answer(results: &[Hit]) -> Result<String> {
    #[derive(Serialize)]
    struct Results<'a> {
        results: &'a [Hit],
    }
    serde_json::to_string(&Results { results }).map_err(|e| Error::internal(e.to_string()))
}

/// A page of the sessions, most recently updated first, with their counts kept until their
/// next write, and the cursor of the next page.
pub fn sessions(env: &Env<'_>, page: &sessions::Page) -> Result<(Vec<SessionInfo>, Option<Cursor>)> {
    sessions::list_with(env.sql, &|id, version| counts(env, id, version), page)
}

/// One session with its counts kept until its next write, or `not_found`.
pub fn session(env: &Env<'_>, id: &str) -> Result<SessionInfo> {
    sessions::get_with(env.sql, id, &|id, version| counts(env, id, version))?
        .ok_or_else(|| Error::not_found(format!("session {id} not found")))
}

/// The counts of session `id` at `version`: kept as the text `total path`.
fn counts(env: &Env<'_>, id: &str, version: Version) -> Result<Counts> {
    let key = Key::Counts { session: id.to_owned() };
    let kept = env.cache.get(&key, version).and_then(|t| {
        let (total, path) = t.split_once(' ')?;
        Some(Counts { total: total.parse().ok()?, path: path.parse().ok()? })
    });
    if let Some(c) = kept {
        return Ok(c);
    }
    let c = sessions::counts(env.sql, id)?;
    env.cache.put(key, version, env.cache.clears(), format!("{} {}", c.total, c.path));
    Ok(c)
}
