//! Scoped tokens: what a token grants (its [`Claims`]), its text (a JWT, HS256), and what each
//! route of the table allows it. The signature itself is made and checked by the Workers layer
//! with WebCrypto (HMAC-SHA-256, the secret `TOKEN_SECRET`); everything here is plain data, so
//! the rules are tested natively.
//!
//! The front door verifies a token (signature, expiry, agent) and hands its claims to the
//! Durable Object in the [`CLAIMS_HEADER`] (a header it always removes from what clients send).
//! The API's admission (`crate::admit`) then refuses a revoked token and anything outside the
//! token's sessions or scope (`permit`, with what the route table says of the route), for HTTP
//! requests and WebSocket frames alike. No header means the admin token or a Worker binding:
//! everything is allowed.
//!
//! # What it keeps
//!
//! The invariant `docs/ARCHITECTURE.md` numbers for it, whole (a test cites it with a comment
//! `// invariant 30`):
//!
//! 30. **A request that carries claims is checked before any route runs.** The front
//!     door verifies a scoped token (signature, expiry, agent, route) and passes its claims in
//!     `x-session-agent-claims`, a header only it sets: it removes the one a client sends. The DO
//!     trusts that header from whoever calls it (the front door, or a Worker binding, itself a
//!     capability); no header means the admin token or a binding. `api::handle` checks the claims
//!     (`api::admit`: readable, not expired, not revoked, for this agent, and `permit` for this
//!     method and path: admin-only routes never, agent-wide routes only without `sessions`, a
//!     session's routes only for its sessions, writes only with scope `write`) before the route's
//!     handler runs, so a refused request changes nothing. WebSocket frames go through the same check: their claims
//!     live in the socket's tags (scope, issue and expiry times, limited or not; `socket_tags`, which
//!     fails closed), and only sockets not limited to sessions carry the tag that hears `memory`
//!     frames.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::http::{check_name, Request};
use session_agent_core::access::Reach;
use session_agent_core::error::{Error, Result};
use session_agent_core::ids::Role;
use session_agent_core::time::iso_millis;

/// The header the front door passes a verified token's claims in (JSON).
pub const CLAIMS_HEADER: &str = "x-session-agent-claims";

/// The longest life of a token: 30 days.
pub(crate) const MAX_TTL_SECONDS: i64 = 30 * 24 * 3600;

/// The JWT header of every token, base64url: `{"alg":"HS256","typ":"JWT"}`. A token with any
/// other header is refused before its signature is looked at (no algorithm confusion).
const JWT_HEADER: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `GET` routes, the WebSocket's `history` and `ping` (and MCP's `initialize`, `tools/list`).
    Read,
    /// Everything but the admin routes.
    Write,
}

/// The claims of a scoped token (the JWT payload). Times are NumericDates: seconds since the
/// epoch, with milliseconds as the fraction, so a revocation is exact to the millisecond.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The agent (or, with `kind: "space"`, the memory space) the token opens.
    #[serde(rename = "sub")]
    pub(crate) agent: String,
    /// What `sub` names: absent for an agent (every token issued before spaces), `"space"` for
    /// a memory space. A token opens only what it was issued for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<Role>,
    pub scope: Scope,
    /// The sessions it opens, when limited to some; absent: every session of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    /// Issued at.
    pub(crate) iat: f64,
    /// Expires at.
    pub(crate) exp: f64,
}

impl Claims {
    /// The claims `POST /agents/{agent}/tokens` asks for: `{sessions?, scope, ttlSeconds}`.
    pub fn issue(agent: &str, role: Role, body: &Map<String, Json>, now_ms: i64) -> Result<Claims> {
        if role == Role::Space && body.get("sessions").is_some_and(|s| !s.is_null()) {
            return Err(Error::invalid("a memory space has no sessions: its tokens name none"));
        }
        if let Some(k) = body.keys().find(|k| !matches!(k.as_str(), "sessions" | "scope" | "ttlSeconds")) {
            return Err(Error::invalid(format!(
                "unknown field {k:?}: a token request has sessions, scope, ttlSeconds"
            )));
        }
        let scope = match body.get("scope").and_then(Json::as_str) {
            Some("read") => Scope::Read,
            Some("write") => Scope::Write,
            _ => return Err(Error::invalid("scope must be \"read\" or \"write\"")),
        };
        let ttl =
            body.get("ttlSeconds").and_then(Json::as_i64).filter(|t| (1..=MAX_TTL_SECONDS).contains(t)).ok_or_else(
                || Error::invalid(format!("ttlSeconds must be an integer from 1 to {MAX_TTL_SECONDS} (30 days)")),
            )?;
        let sessions = match body.get("sessions") {
            None | Some(Json::Null) => None,
            Some(Json::Array(list)) if !list.is_empty() && list.len() <= MAX_SESSIONS => {
                let mut ids = Vec::with_capacity(list.len());
                for v in list {
                    let sid = v.as_str().ok_or_else(|| Error::invalid("sessions must be an array of session ids"))?;
                    check_name("session id", sid)?;
                    if !ids.iter().any(|s| s == sid) {
                        ids.push(sid.to_owned());
                    }
                }
                Some(ids)
            }
            Some(_) => {
                return Err(Error::invalid(format!(
                    "sessions must be an array of 1 to {MAX_SESSIONS} session ids (leave it out for every session)"
                )))
            }
        };
        Ok(Claims {
            agent: agent.to_owned(),
            // An agent's token names no kind, as every token issued before spaces.
            kind: Some(role).filter(|r| *r != Role::Agent),
            scope,
            sessions,
            iat: now_ms as f64 / 1000.0,
            exp: (now_ms + ttl * 1000) as f64 / 1000.0,
        })
    }

    /// Milliseconds since the epoch of `iat`.
    pub fn issued_ms(&self) -> i64 {
        (self.iat * 1000.0).round() as i64
    }

    /// Milliseconds since the epoch of `exp`.
    pub fn expires_ms(&self) -> i64 {
        (self.exp * 1000.0).round() as i64
    }

    /// The part of the token the signature covers: `header.payload`.
    pub fn signing_input(&self) -> String {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        format!("{JWT_HEADER}.{}", B64.encode(payload))
    }

    /// The answer of `POST /tokens`: `{token, expiresAt, agent, scope, sessions}`.
    pub fn answer(&self, signature: &[u8]) -> Json {
        serde_json::json!({
            "token": format!("{}.{}", self.signing_input(), B64.encode(signature)),
            "expiresAt": iso_millis(self.expires_ms()),
            "agent": self.agent,
            "kind": self.role(),
            "scope": self.scope,
            "sessions": self.sessions,
        })
    }

    /// The sessions a request with this token may see: the ones it lists, or all of them.
    pub(crate) fn reach(self) -> Reach {
        self.sessions.map_or(Reach::All, Reach::Sessions)
    }

    /// Whether the token is limited to some sessions.
    pub(crate) fn limited(&self) -> bool {
        self.sessions.is_some()
    }

    /// Whether the token opens session `sid`.
    pub(crate) fn opens(&self, sid: &str) -> bool {
        self.sessions.as_ref().is_none_or(|list| list.iter().any(|s| s == sid))
    }

    /// Refuses a token that expired (`now_ms` past `exp`), was revoked (issued before
    /// `revoked_before`), or belongs to another agent than `agent` (403).
    pub fn valid_for(&self, agent: &str, role: Role, now_ms: i64, revoked_before: Option<i64>) -> Result<()> {
        if now_ms >= self.expires_ms() {
            return Err(Error::unauthorized("the token expired"));
        }
        if revoked_before.is_some_and(|b| self.issued_ms() < b) {
            return Err(Error::unauthorized("the token was revoked"));
        }
        if self.role() != role {
            return Err(Error::forbidden(match role {
                Role::Agent => "the token is for a memory space, not an agent",
                Role::Space => "the token is for an agent, not a memory space",
            }));
        }
        if self.agent != agent {
            return Err(Error::forbidden(match role {
                Role::Agent => "the token is for another agent",
                Role::Space => "the token is for another memory space",
            }));
        }
        Ok(())
    }

    /// What the token opens: an agent or a memory space.
    pub fn role(&self) -> Role {
        self.kind.unwrap_or(Role::Agent)
    }
}

/// The most sessions one token may name. The token carries them: 500 ids of the longest (128
/// characters) make a token of about 87 KB, within the 128 KB Cloudflare allows a request's
/// headers, with room for the others. (A reach is bound as one statement parameter, whatever
/// its length: the limit is the header's, not the database's.)
pub const MAX_SESSIONS: usize = 500;

/// A presented token taken apart: what its signature covers, the signature, the claims. Anything
/// that is not one of our tokens is `unauthorized` (the signature is checked by the caller).
pub fn read(token: &str) -> Result<(&str, Vec<u8>, Claims)> {
    let bad = || Error::unauthorized("missing or wrong bearer token");
    let (input, signature) = token.rsplit_once('.').ok_or_else(bad)?;
    let (header, payload) = input.split_once('.').ok_or_else(bad)?;
    if header != JWT_HEADER {
        return Err(bad());
    }
    let signature = B64.decode(signature).map_err(|_| bad())?;
    let claims: Claims =
        B64.decode(payload).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).ok_or_else(bad)?;
    Ok((input, signature, claims))
}

/// The claims the front door passed with `req`, if any (`None`: the admin token or a binding).
pub fn claims_of(req: &Request) -> Result<Option<Claims>> {
    req.header_value(CLAIMS_HEADER)
        .map(|h| serde_json::from_str(h).map_err(|_| Error::unauthorized("unreadable token claims")))
        .transpose()
}

/// Who may use a route: the route table's rows say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The admin token (or a Worker binding) only.
    Admin,
    /// Any token of the agent not limited to some sessions: an agent-wide route.
    Agent,
    /// A token that opens the session the path names.
    Session,
}

/// The scope a token needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Read,
    Write,
}

/// Whether `claims` allow a route that `who` may use, for session `sid` (the route's, if it has
/// one), needing scope `needs`: admin routes never, agent-wide routes only to a token not
/// limited to sessions, a session's routes only for its sessions, writes only with scope
/// `write`.
pub(crate) fn permit(claims: &Claims, who: Who, sid: Option<&str>, needs: Needs) -> Result<()> {
    match (who, sid) {
        (Who::Admin, _) => return Err(Error::forbidden("this route needs the admin token (API_TOKEN)")),
        (Who::Agent, _) if claims.limited() => {
            return Err(Error::forbidden(
                "a token limited to some sessions may not use agent-wide routes (the session list, search, memories, \
                 schedules) nor make a session (create, import, fork, split), which it could not open",
            ))
        }
        (Who::Session, Some(sid)) if !claims.opens(sid) => {
            return Err(Error::forbidden(format!("the token does not open session {sid:?}")));
        }
        _ => {}
    }
    if claims.scope == Scope::Read && needs == Needs::Write {
        return Err(Error::forbidden("the token may only read (scope \"read\")"));
    }
    Ok(())
}
