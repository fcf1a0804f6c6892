//! The agent's side of its memory space (`crate::space`): recall and injection read the space
//! beside (or, `memory.space.mode: "instead"`, instead of) the agent's own memories, and
//! extraction writes into the space, tagged with the agent's name (`metadata.agent`). Each is a
//! request to the space's Durable Object; one that cannot be reached fails no turn: the turn
//! goes on with the agent's own memories, its sockets get a `space` frame and the log a line.

use serde_json::Value as Json;

use super::recall::Hit;
use super::store::normalize;
use crate::config::category::Category;
use crate::config::SpaceMode;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::ids::Role;
use crate::space::{choice, request, Operation};
use crate::wire::Frame;

/// The space an agent's memory uses, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Linked {
    pub(crate) space: String,
    pub(crate) mode: SpaceMode,
}

/// The agent's space, when it has one and memory is configured (a space itself has none).
pub(crate) fn linked(env: &Env<'_>) -> Result<Option<Linked>> {
    if env.role != Role::Agent || env.config.memory.is_none() {
        return Ok(None);
    }
    let c = choice::of(env.sql, env.config, env.agent)?;
    Ok(c.space.map(|space| Linked { space, mode: c.mode }))
}

/// Which memories a recall keeps to: of `categories` (all when empty), holding one of `tags`
/// (any when empty).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Scope<'a> {
    pub(crate) categories: &'a [Category],
    pub(crate) tags: &'a [String],
}

/// The hits of `text` in `space`: at most `limit`, within `scope`, never a `conversation`
/// memory (those belong to another agent's session).
pub(crate) async fn recall(env: &Env<'_>, space: &str, text: &str, limit: i64, scope: Scope<'_>) -> Result<Vec<Hit>> {
    let categories = scope.categories;
    let wanted: &[Category] = if categories.is_empty() { &Category::ALL } else { categories };
    let categories: Vec<Category> = wanted.iter().copied().filter(|c| *c != Category::Conversation).collect();
    if categories.is_empty() {
        return Ok(Vec::new());
    }
    let op = Operation::Recall { text: text.to_owned(), limit, categories, tags: scope.tags.to_vec() };
    let body = request(env.spaces, space, &op).await?;
    let results = body.get("results").and_then(Json::as_array).cloned().unwrap_or_default();
    results
        .iter()
        .map(Hit::from_json)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| crate::space::unavailable(format!("space {space}: an answer that could not be read")))
}

/// `own` and `shared` as one list, at most `limit`: the two merged by rank, each keeping its
/// own order (a correction that a list put before the fact it corrects stays before it, as
/// `current` ordered it); a shared memory that says what one of the agent's own says (the
/// same normalized text) is left out.
pub(crate) fn merge(own: Vec<Hit>, shared: Vec<Hit>, limit: usize) -> Vec<Hit> {
    let said: Vec<String> = own.iter().map(|h| normalize(&h.memory.content)).collect();
    let mut theirs = shared.into_iter().filter(|h| !said.contains(&normalize(&h.memory.content))).peekable();
    let mut mine = own.into_iter().peekable();
    let mut out = Vec::new();
    while out.len() < limit {
        let take_mine = match (mine.peek(), theirs.peek()) {
            (Some(a), Some(b)) => a.score >= b.score,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        out.extend(if take_mine { mine.next() } else { theirs.next() });
    }
    out
}

/// What a turn of `session` recalls for `text`: `own` (the agent's own hits, unless the mode is
/// `instead`) and its space's within `scope`, merged, at most `limit`. A space that cannot be reached leaves
/// the agent's own hits ([`unreachable`]).
pub(crate) async fn with_space<F>(
    env: &Env<'_>,
    session: &str,
    text: &str,
    limit: i64,
    scope: Scope<'_>,
    own: F,
) -> Result<Vec<Hit>>
where
    F: std::future::Future<Output = Result<Vec<Hit>>>,
{
    let Some(l) = linked(env)? else { return own.await };
    let mine = if l.mode == SpaceMode::Instead { Vec::new() } else { own.await? };
    match recall(env, &l.space, text, limit, scope).await {
        Ok(theirs) => Ok(merge(mine, theirs, limit.max(0) as usize)),
        Err(e) => {
            unreachable(env, session, &l.space, &e);
            Ok(mine)
        }
    }
}

/// Tells the session's sockets and the log that `space` could not be reached.
pub(crate) fn unreachable(env: &Env<'_>, session: &str, space: &str, e: &Error) {
    env.events.warn(&format!(
        "memory space {space} could not be reached: {}{}",
        e.message,
        e.log.as_deref().map(|l| format!(" ({l})")).unwrap_or_default()
    ));
    if env.events.has_listeners(session) {
        let frame = Frame::Space { session_id: session, space, status: "unreachable", message: &e.message };
        env.events.publish(session, &frame.to_json());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hit(content: &str, score: f64) -> Hit {
        let m = json!({
            "id": format!("mem_{content}"), "content": content, "category": "core", "tags": [], "metadata": {},
            "score": null, "source": null, "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
            "expiresAt": null, "recalledAt": null, "recallCount": 0, "validFrom": "2026-01-01T00:00:00.000Z",
            "invalidAt": null, "supersededBy": null, "embeddedAt": null,
        });
        Hit::from_json(&json!({"memory": m, "score": score, "why": "", "signals": {}})).expect("a hit")
    }

    #[test]
    fn merge_keeps_each_lists_order_and_drops_what_the_agent_already_says() {
        // The agent's own list put a correction (lower score) before what it corrects.
        let own = vec![hit("moved to Berlin", 0.4), hit("lives in Paris", 0.8)];
        let shared = vec![hit("Lives in  PARIS", 0.99), hit("likes tea", 0.6), hit("owns a bike", 0.1)];
        let got: Vec<String> = merge(own, shared, 3).into_iter().map(|h| h.memory.content).collect();
        assert_eq!(got, ["likes tea", "moved to Berlin", "lives in Paris"]);
        assert!(Hit::from_json(&json!({"memory": {"id": "x"}, "score": 1.0})).is_none(), "not a hit");
    }
}
