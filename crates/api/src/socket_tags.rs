//! What a WebSocket is accepted with, as the tags the hibernation API keeps for it across
//! evictions: its session, its own id (so a `cancel` frame finds its running turn), whether it
//! may hear the agent's `memory` frames, and who opened it (the admin token or a binding, or a
//! scoped token's scope, issue and expiry times). Every frame is checked with what these tags
//! say, so reading them fails closed: tags that are not exactly what [`encode`] writes open
//! nothing ([`decode`] is an error, and the socket is closed).
//!
//! Tags other than the session's start with `#`, which no session id has, so a session can never
//! be mistaken for one.

use super::access::{Claims, Scope};
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::check_name;

/// The tag of sockets whose token opens the whole agent (the admin token, or a scoped token not
/// limited to sessions): they hear `memory` frames.
pub const AGENT_TAG: &str = "#agent";
/// The prefix of the tag that names one socket (`#id:<uuid>`).
const ID_TAG: &str = "#id:";
/// The tag of a socket opened with the admin token (`API_TOKEN`) or through a Worker binding.
const ADMIN_TAG: &str = "#admin";
/// The prefix of the tag that carries a scoped token's claims: `#token:<scope>:<iat ms>:<exp ms>`.
const TOKEN_TAG: &str = "#token:";

/// What a socket's tags say.
#[derive(Clone, Debug, PartialEq)]
pub struct SocketTags {
    /// The session it was opened for.
    pub session: String,
    /// Its own id.
    pub id: String,
    /// The claims of the scoped token it was opened with, for this session (a limited token's
    /// other sessions do not matter on this socket); `None`: the admin token or a binding.
    pub claims: Option<Claims>,
}

/// The tags of a socket for session `sid` with id `id`, opened with the scoped token `claims`
/// (none: the admin token or a binding).
pub fn encode(sid: &str, id: &str, claims: Option<&Claims>) -> Vec<String> {
    let mut tags = vec![sid.to_owned(), format!("{ID_TAG}{id}")];
    if claims.is_none_or(|c| !c.limited()) {
        tags.push(AGENT_TAG.to_owned());
    }
    tags.push(match claims {
        None => ADMIN_TAG.to_owned(),
        Some(c) => {
            let scope = match c.scope {
                Scope::Read => "read",
                Scope::Write => "write",
            };
            format!("{TOKEN_TAG}{scope}:{}:{}", c.issued_ms(), c.expires_ms())
        }
    });
    tags
}

/// Reads the tags [`encode`] wrote for a socket of `agent`. Anything else (a missing, repeated,
/// unknown or malformed tag) is an error: the socket opens nothing.
pub fn decode(tags: &[String], agent: &str) -> Result<SocketTags> {
    let bad = |why: &str| Error::unauthorized(format!("the socket's state is unreadable ({why}): reconnect"));
    let (session, rest) = tags.split_first().ok_or_else(|| bad("no tags"))?;
    check_name("session id", session).map_err(|_| bad("session"))?;
    let (mut id, mut agent_wide, mut holder) = (None, false, None);
    for t in rest {
        if let Some(v) = t.strip_prefix(ID_TAG) {
            let ok = !v.is_empty() && v.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
            if !ok || id.replace(v.to_owned()).is_some() {
                return Err(bad("id"));
            }
        } else if t == AGENT_TAG && !agent_wide {
            agent_wide = true;
        } else if (t == ADMIN_TAG || t.starts_with(TOKEN_TAG)) && holder.is_none() {
            holder = Some(t.as_str());
        } else {
            return Err(bad("an unknown or repeated tag"));
        }
    }
    let id = id.ok_or_else(|| bad("id"))?;
    let claims = match holder.ok_or_else(|| bad("who opened it"))? {
        ADMIN_TAG if agent_wide => None,
        ADMIN_TAG => return Err(bad("who opened it")),
        token => {
            let mut parts = token[TOKEN_TAG.len()..].split(':');
            let scope = match parts.next() {
                Some("read") => Scope::Read,
                Some("write") => Scope::Write,
                _ => return Err(bad("scope")),
            };
            let mut time = || parts.next().and_then(|p| p.parse::<i64>().ok()).ok_or_else(|| bad("times"));
            let (iat, exp) = (time()?, time()?);
            if parts.next().is_some() {
                return Err(bad("times"));
            }
            Some(Claims {
                kind: None,
                agent: agent.to_owned(),
                scope,
                sessions: (!agent_wide).then(|| vec![session.clone()]),
                iat: iat as f64 / 1000.0,
                exp: exp as f64 / 1000.0,
            })
        }
    };
    Ok(SocketTags { session: session.clone(), id, claims })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(scope: Scope, sessions: Option<Vec<String>>) -> Claims {
        Claims { agent: "alice".into(), kind: None, scope, sessions, iat: 1_700_000_000.123, exp: 1_700_003_600.5 }
    }

    #[test]
    fn what_is_encoded_decodes_the_same() {
        let id = "0b7c4a3e-1f2d-4c5b-8a9e-0f1e2d3c4b5a";
        for c in [
            None,
            Some(claims(Scope::Read, None)),
            Some(claims(Scope::Write, None)),
            Some(claims(Scope::Write, Some(vec!["chat-1".into()]))),
        ] {
            let tags = encode("chat-1", id, c.as_ref());
            let got = decode(&tags, "alice").unwrap();
            assert_eq!((got.session.as_str(), got.id.as_str()), ("chat-1", id));
            assert_eq!(got.claims, c, "{tags:?}");
        }
    }

    #[test]
    fn anything_else_opens_nothing() {
        let s = |v: &[&str]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let id = "#id:0b7c4a3e-1f2d";
        for tags in [
            s(&[]),
            s(&["chat-1"]),
            s(&["chat-1", id, "#agent"]),                     // nobody opened it
            s(&["chat-1", "#id:", "#agent", "#admin"]),       // an empty id
            s(&["chat-1", "#agent", "#admin"]),               // no id
            s(&["chat-1", id, "#admin"]),                     // admin, yet not agent-wide
            s(&["chat-1", id, "#agent", "#token:admin:1:2"]), // an unknown scope
            s(&["chat-1", id, "#agent", "#token:Write:1:2"]),
            s(&["chat-1", id, "#agent", "#token:write:1"]), // a time missing
            s(&["chat-1", id, "#agent", "#token:write:1:2:3"]),
            s(&["chat-1", id, "#agent", "#token:write:x:2"]),
            s(&["chat-1", id, "#agent", "#token"]), // malformed
            s(&["chat-1", id, "#agent", "#admin", "#token:write:1:2"]), // two holders
            s(&["chat-1", id, id, "#agent", "#admin"]), // two ids
            s(&["chat-1", id, "#agent", "#admin", "#other"]), // an unknown tag
            s(&["bad session!", id, "#agent", "#admin"]),
        ] {
            assert!(decode(&tags, "alice").is_err(), "{tags:?} opened something");
        }
    }
}
