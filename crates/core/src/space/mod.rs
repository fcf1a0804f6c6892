//! Memory spaces (docs/REFERENCE.md#memory-spaces): the memories and writable blocks shared by
//! the agents that serve one user. A space is a Durable Object of its own class (`MemorySpace`)
//! running this same core in [`Role::Space`](crate::ids::Role): its memories are ordinary
//! memories (validity, versions, consolidation, vectors, filters), its shared blocks are [`blocks`]; it has no
//! sessions and no turns. An agent reaches its space only through [`Spaces`], a request to the
//! space's Durable Object, so a space that cannot be reached costs the agent what it shares and
//! nothing else.
//!
//! - [`choice`]: which space an agent uses (an admin's choice, else `memory.space`'s rule);
//! - [`blocks`]: a space's shared writable blocks (versions, appends that keep both, a replace
//!   refused when another write came first);
//! - [`Operation`]: what an agent asks of its space, typed; [`Spaces`]: how it reaches the space
//!   (the Workers layer: the `MEMORY_SPACE` binding).
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 44. **A space is reached only through `Spaces`** (a request to its Durable Object),
//!     never through an agent's SQL, and only by the agents it is mapped to (`choice`) or with its own
//!     tokens (`kind: "space"`, `api::access`); its `/link/…` routes are admin routes the front door
//!     never forwards. **A space that cannot be reached fails no turn** (`memory::shared::with_space`,
//!     `Context::load_all`). **A shared block's version never repeats for its label**: a delete counts
//!     one and keeps the label's row as a tombstone, a label without a row starts from the space's
//!     floor, which dropping a tombstone raises to the highest version gone and erasing the space one
//!     past the highest it gave, so a
//!     replace naming a version read before is always refused. **A space holds no `conversation`
//!     memory** (it has no sessions): `Memories::admits` refuses one on every write.

pub mod blocks;
pub mod choice;

use serde_json::Value as Json;

use crate::blobs::BoxFuture;
use crate::config::category::Category;
use crate::error::{Error, ErrorKind, Result};

/// What an agent asks of its space. Typed: the core names no path of the space's routes; the api
/// crate maps each to its route (`session_agent_api::spaces::request`), and a test checks that
/// each reaches a route of the space's table.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// The space's memories ranked for `text`: at most `limit`, of `categories` (all when
    /// empty), holding one of `tags` (any when empty). Answered with its hits.
    Recall { text: String, limit: i64, categories: Vec<Category>, tags: Vec<String> },
    /// A shared block, answered with its text and version ([`blocks::send`]).
    ReadBlock { label: String },
    /// `content` appended to a shared block by `agent`, within the writing block's
    /// `max_tokens`; a label without text starts from `initial` (the block's configured text).
    AppendBlock { label: String, content: String, agent: String, max_tokens: Option<i64>, initial: Option<String> },
    /// A shared block's text replaced by `agent`, if its version is still `version` (else
    /// `409 version_conflict`).
    ReplaceBlock { label: String, content: String, version: i64, agent: String, max_tokens: Option<i64> },
    /// The exchange of `agent`'s `session` distilled by the space into its memories, each given
    /// the agent's scope `tags`, answered with what it stored.
    Extract { agent: String, session: String, exchange: Json, tags: Vec<String> },
}

/// What the space answered, as it came back.
#[derive(Clone, Debug, PartialEq)]
pub struct SpaceReply {
    pub status: u16,
    pub body: Json,
}

/// How an agent's requests reach a space's Durable Object (the Workers layer: a stub of the
/// `MEMORY_SPACE` namespace, with a timeout; natively: another object's API in process).
pub trait Spaces {
    /// Sends `op` to the space named `space`. `Err` when the space cannot be reached (no
    /// binding, a timeout, a failure of the runtime): [`ErrorKind::SpaceUnavailable`].
    fn send<'a>(&'a self, space: &'a str, op: &'a Operation) -> BoxFuture<'a, Result<SpaceReply>>;
}

/// No space can be reached (no `MEMORY_SPACE` binding).
pub struct NoSpaces;

impl Spaces for NoSpaces {
    fn send<'a>(&'a self, _space: &'a str, _op: &'a Operation) -> BoxFuture<'a, Result<SpaceReply>> {
        Box::pin(async { Err(unavailable("memory spaces are not configured: the Worker has no MEMORY_SPACE binding")) })
    }
}

/// The `error.code` of a shared block's replace that came after another write (`409`).
pub const VERSION_CONFLICT: &str = "version_conflict";

/// The error of a space that cannot be reached.
pub fn unavailable(why: impl Into<String>) -> Error {
    Error::new(ErrorKind::SpaceUnavailable, why)
}

/// Sends `op` to `space` and reads its answer: a 2xx body, or the space's error as the
/// agent's (its code and message; a status without a known code is the space unavailable).
pub async fn request(spaces: &dyn Spaces, space: &str, op: &Operation) -> Result<Json> {
    let answer = spaces.send(space, op).await?;
    if (200..300).contains(&answer.status) {
        return Ok(answer.body);
    }
    let code = answer.body.pointer("/error/code").and_then(Json::as_str).unwrap_or_default();
    let message = answer.body.pointer("/error/message").and_then(Json::as_str).unwrap_or("the space failed");
    let known = ErrorKind::from_code(code).filter(|k| k.status() == answer.status && *k != ErrorKind::Internal);
    match (known, code) {
        (Some(kind), _) => Err(Error::new(kind, message)),
        (None, VERSION_CONFLICT) => Err(Error::conflict(message).with_code(VERSION_CONFLICT)),
        (None, _) => Err(unavailable(format!("the memory space {space} failed ({})", answer.status))
            .with_log(format!("space {space}: {} {message}", answer.status))),
    }
}
