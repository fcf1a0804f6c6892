//! One session of one agent, and the one way its messages are written (in the spirit of the reference's `Session`
//! object, docs/REFERENCE.md#message-writes). Every write of messages (an append, a batch, an update, the commit of an
//! agent turn) goes through `Session::write`:
//!
//! ```text
//! oversize fields to R2 (pending first) ──▶ one transaction: the tree write + the session's
//! registration ──▶ objects no row took handed to the sweep ──▶ frames to the session's sockets
//! ──▶ status and auto-compaction (compact.rs)
//! ```
//!
//! - [`frames`]: what the session's sockets hear;
//! - [`compact`]: compaction with the LLM (manual, automatic, after a capped turn);
//! - [`split`]: ending a session and going on in a new one from its summary;
//! - [`blocks`]: context-block writes, the prompt and tool runs, with their registration and
//!   frames.
//!
//! Invariants kept here: writes that belong together run in one transaction, after all
//! validation (a rejected request changes nothing); only writes register a session; every
//! stored message reaches the session's sockets after its transaction commits.
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 8. **Writes that belong together run in one transaction** (`sql::atomically`:
//!    `transactionSync` in the DO, a savepoint natively). Validation happens before any write, so
//!    **a rejected request changes nothing**; a failing write rolls back.
//! 9. **Only writes register a session** (`name = id`); reads never do. `updated_at` ties are
//!    broken by `touch_seq`, the order of updates.
//! 17. **Compaction stores nothing unless the model produced a usable summary** (non-blank, not
//!     the empty skeleton); the overlay and the summarizer's usage are written in one
//!     transaction, after re-checking the path. Auto-compaction never fails an append.
//! 23. **Every write reaches the session's sockets**, whatever the entry point (HTTP, stub,
//!     WebSocket, turn), after its transaction commits; frames carry `sessionId`: `message` for
//!     every stored message, `deleted` / `cleared`, `context` for block changes, and a `status`
//!     (`idle`, or `compacting` then `idle` around any compaction) after every change of messages.

pub mod blocks;
pub mod compact;
pub mod frames;
pub mod report;
pub mod split;

use serde::Serialize;

use crate::cache::{Key, Read};
use crate::context::Context;
use crate::directory::usage::{self as ledger, Measured};
use crate::env::Env;
use crate::error::{Error, Result, Warned};
use crate::llm::Usage;
use crate::memory::{self, recall, Memories};
use crate::sql::atomically;
use crate::store::history::{history_json, history_walked, recent, Overlays};
use crate::store::message::{raw, NewMessage, RawMessage};
use crate::store::overlay;
use crate::store::sessions;
use crate::store::sessions::Version;
use crate::store::spill;
use crate::store::tree::{Parent, Tree, MAX_PATH_ROWS};
pub use report::AutoReport;

/// One session of the agent of `env`.
pub struct Session<'a> {
    pub env: &'a Env<'a>,
    pub id: &'a str,
}

/// Which messages of a write get their oversize fields moved to R2 first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spill {
    /// Only new ones: not synthetic, not already stored (appends: a duplicate stores nothing).
    New,
    /// All of them (updates and a turn's commit, whose messages are all written).
    All,
}

/// What an append did.
#[derive(Debug)]
pub struct Appended {
    /// The message as stored (the one already stored, for a duplicate id), whole.
    pub message: RawMessage,
    pub parent_id: Option<String>,
    pub outcome: Outcome,
    /// Auto-compaction's report, when it ran (or failed).
    pub compaction: Option<AutoReport>,
    pub warnings: Vec<String>,
}

/// What became of an appended message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Stored.
    Inserted,
    /// Its id was already stored: nothing was written (the stored message is answered).
    Duplicate,
    /// A synthetic `compaction_…` message: never stored.
    Synthetic,
}

/// What a batch append did.
#[derive(Debug)]
pub struct Batch {
    /// Every message of the batch but the synthetic ones, in order.
    pub ids: Vec<String>,
    /// Where the chain ended.
    pub last_id: Option<String>,
    /// How many were new.
    pub inserted: usize,
    pub compaction: Option<AutoReport>,
    pub warnings: Vec<String>,
}

/// What a finished agent turn writes, in one transaction.
pub(crate) struct TurnWrite {
    /// The new user message (none for a continuation).
    pub(crate) user: Option<NewMessage>,
    /// Stored messages that got client tool results or approval responses.
    pub(crate) updates: Vec<NewMessage>,
    /// The reply; `None` for a turn stopped before anything was shown, and for the user
    /// message a turn stores first (`chat.onDisconnect: "finish"`).
    pub(crate) assistant: Option<NewMessage>,
    /// Whether the assistant message is new or extends the stored one with its id.
    pub(crate) placement: Placement,
    /// Where the user message (or the assistant, without one) attaches; `None` is a new root.
    pub(crate) parent: Option<String>,
    pub(crate) usage: Usage,
    /// The system prompt to freeze with the turn, if none was frozen yet.
    pub(crate) freeze: Option<String>,
    /// Ids of the memories the turn was given: their recall counters move with the commit.
    pub(crate) recalled: Vec<String>,
    /// The turn's row of the usage ledger, and how its counts were had (none for a write that
    /// called no model: the user message stored first).
    pub(crate) ledger: Option<Measured>,
    /// Our estimate of the input tokens the provider counted (`directory::usage::calibration`).
    pub(crate) input_estimate: i64,
}

/// Where a turn's assistant message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// A new message: the child of the turn's user message, or of `parent` without one.
    New,
    /// The stored message with the same id, rewritten with the reply's parts after its own (a
    /// continuation after client tools, as the AI SDK's `useChat` merges it).
    Extends,
}

/// Whether `msg` is a synthetic compaction message (id prefix `compaction_`), never stored.
pub fn is_synthetic(msg: &NewMessage) -> bool {
    overlay::is_synthetic_id(&msg.id)
}

/// The session's versions before and after a write's transaction.
#[derive(Clone, Copy)]
struct Span {
    before: Version,
    after: Version,
}

/// Where the cache keeps the history of `session` to `leaf` with `overlays`.
fn history_key(session: &str, leaf: Option<&str>, overlays: Overlays) -> Key {
    Key::History { session: session.to_owned(), leaf: leaf.map(str::to_owned), overlays }
}

impl<'a> Session<'a> {
    pub fn new(env: &'a Env<'a>, id: &'a str) -> Self {
        Session { env, id }
    }

    /// The session's message tree.
    pub fn tree(&self) -> Tree<'a> {
        Tree::new(self.env.sql, self.id)
    }

    /// The session's context blocks.
    pub(crate) fn context(&self) -> Context<'a> {
        let e = self.env;
        Context {
            sql: e.sql,
            blobs: e.blobs,
            config: e.config,
            agent: e.agent,
            session: self.id,
            reach: &e.reach,
            meaning: e.meaning(),
            spaces: e.spaces,
            secrets: e.secrets,
            databases: e.databases,
        }
    }

    /// Registers the session (`name = id`) if needed and moves its `updatedAt` to now; writes do
    /// this, reads never.
    pub(crate) fn register(&self) -> Result<()> {
        sessions::ensure(self.env.sql, self.id, self.env.now.iso())?;
        sessions::touch(self.env.sql, self.id, self.env.now.iso())
    }

    /// Stored messages with their spilled fields put back (a missing object is a warning).
    pub async fn whole(&self, messages: Vec<RawMessage>) -> Result<Warned<Vec<RawMessage>>> {
        spill::rehydrate(self.env.sql, self.env.blobs, self.id, messages).await
    }

    /// The path to `leaf` (default: the latest leaf) with `overlays`, whole, as the text of a
    /// JSON array, and the warnings of objects that could not be read back. SQLite assembles it
    /// when nothing is laid over the stored texts ([`history_json`]); otherwise the messages
    /// are read, made whole and written out. The same text either way. Kept until the session's
    /// next write (in the [`ReadCache`](crate::cache::ReadCache)), and grown by appends at
    /// its end (`Session::follow`).
    pub async fn history_text(&self, leaf: Option<&str>, overlays: Overlays) -> Result<Warned<String>> {
        let (version, leaf) = match leaf {
            Some(id) => (self.version()?, Some(id.to_owned())),
            None => self.version_and_latest_leaf()?,
        };
        let key = history_key(self.id, leaf.as_deref(), overlays);
        self.kept(key, version, || async {
            let sql = self.env.sql;
            if let Some((text, rows)) = history_json(sql, self.id, leaf.as_deref(), overlays)? {
                return Ok(Read { text, rows: Some(rows), warnings: Vec::new() });
            }
            let (messages, rows) = history_walked(sql, self.id, leaf.as_deref(), overlays)?;
            let Warned { value: messages, warnings } = self.whole(messages).await?;
            let text = serde_json::to_string(&messages).map_err(|e| Error::internal(e.to_string()))?;
            Ok(Read { text, rows: Some(rows), warnings })
        })
        .await
    }

    /// The recent window of the active path, or of the path above `before` (`recent`), made
    /// whole, as the text of the JSON answer `{messages, truncated, totalContentBytes,
    /// nextBefore}`, and the warnings of objects that could not be read back. Kept until the
    /// session's next write (in the [`ReadCache`](crate::cache::ReadCache)).
    pub async fn recent_text(&self, before: Option<&str>, max_bytes: i64, min_messages: i64) -> Result<Warned<String>> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct RecentPage<'a> {
            messages: &'a [RawMessage],
            truncated: bool,
            total_content_bytes: i64,
            next_before: Option<String>,
        }
        let key =
            Key::Recent { session: self.id.to_owned(), before: before.map(str::to_owned), max_bytes, min_messages };
        self.kept(key, self.version()?, || async {
            let r = recent(self.env.sql, self.id, before, max_bytes, min_messages)?;
            let Warned { value: messages, warnings } = self.whole(r.messages).await?;
            let answer = RecentPage {
                messages: &messages,
                truncated: r.truncated,
                total_content_bytes: r.total_content_bytes,
                next_before: r.next_before,
            };
            Ok(Read::text(serde_json::to_string(&answer).map_err(|e| Error::internal(e.to_string()))?, warnings))
        })
        .await
    }

    /// The session's version ([`sessions::version_columns`]).
    pub(crate) fn version(&self) -> Result<Version> {
        Ok(self.version_and_latest_leaf()?.0)
    }

    /// The session's version and its latest leaf, in one statement.
    fn version_and_latest_leaf(&self) -> Result<(Version, Option<String>)> {
        let query = format!(
            "SELECT {}, (SELECT id FROM messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1)",
            sessions::version_columns("?1")
        );
        let r = self.env.sql.query_row(&query, &[self.id.into()])?;
        let r = r.ok_or_else(|| Error::internal("the version query answered no row"))?;
        Ok((Version { newest: r.int(0)? as u64, writes: r.int(1)? as u64 }, r.opt_text(2)?))
    }

    /// The text `read` makes, kept under `key` until the session's next write
    /// ([`ReadCache::kept`](crate::cache::ReadCache::kept)); `version` is the session's
    /// version now.
    pub(crate) async fn kept<F, Fut>(&self, key: Key, version: Version, read: F) -> Result<Warned<String>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Read>>,
    {
        self.env.cache.kept(key, version, || self.version(), read).await
    }

    /// Follows a write that appended `chain` at the end of the path to `parent`, each message the
    /// child of the one before: a kept history of that path, read at the version the write
    /// started from, is kept grown by the chain at the version it ended with. Messages with
    /// spilled fields are not followed (their whole text is not at hand), nor the view with
    /// overlays laid when an overlay names one of them.
    fn follow(&self, span: Option<Span>, parent: Option<&str>, chain: &[&NewMessage]) {
        let (Some(span), Some(parent), Some(last)) = (span, parent, chain.last()) else { return };
        if chain.iter().any(|m| !m.spills.is_empty()) {
            return;
        }
        let tail: Vec<&str> = chain.iter().map(|m| m.json.as_str()).collect();
        // An overlay left over from a deleted message may name a new one: it lies over the
        // grown path, which a fresh read shows and the grown text would not.
        let ids: Vec<&str> = chain.iter().map(|m| m.id.as_str()).collect();
        let laid = overlay::names_any(self.env.sql, self.id, &ids).unwrap_or(true);
        for overlays in [Overlays::Applied, Overlays::Raw] {
            if overlays == Overlays::Applied && laid {
                continue;
            }
            let (from, to) =
                (history_key(self.id, Some(parent), overlays), history_key(self.id, Some(&last.id), overlays));
            // A walk stops at MAX_PATH_ROWS: a longer path is read again.
            let most = MAX_PATH_ROWS as usize;
            self.env.cache.grow((&from, span.before), (to, span.after), &tail, most);
        }
    }

    /// One stored message, whole; `not_found` when it is not in the session.
    pub async fn message(&self, id: &str) -> Result<RawMessage> {
        let m = self.tree().get(id)?.ok_or_else(|| Error::not_found(format!("message {id} not found")))?;
        self.whole(vec![m]).await?.value.pop().ok_or_else(|| Error::internal("rehydrate lost a message"))
    }

    /// The one write sequence: oversize fields of `msgs` to R2 (see [`Spill`]), then `write` in
    /// one transaction, then the objects no row took handed to the sweep (their warnings are
    /// returned with the result).
    async fn write<T>(
        &self,
        msgs: &mut [NewMessage],
        spill: Spill,
        write: impl FnOnce(&[NewMessage]) -> Result<T>,
    ) -> Result<(T, Vec<String>, Option<Span>)> {
        let e = self.env;
        for i in 0..msgs.len() {
            if spill == Spill::New && (is_synthetic(&msgs[i]) || self.tree().contains(&msgs[i].id)?) {
                continue;
            }
            if let Err(err) = spill::prepare(e.sql, e.blobs, e.agent, self.id, &mut msgs[i]).await {
                self.release(msgs);
                let err = if msgs.len() > 1 && spill == Spill::New {
                    Error::new(err.kind, format!("messages[{i}]: {}", err.message))
                } else {
                    err
                };
                return Err(err);
            }
        }
        // The versions around the transaction, for [`Session::follow`], when a path of the
        // session is kept at all. Nothing else runs between these statements.
        let before = if e.cache.holds_history(self.id) { Some(self.version()?) } else { None };
        let done = atomically(e.sql, || write(msgs));
        let warnings = self.release(msgs);
        let done = done?;
        let span = match before {
            Some(before) => Some(Span { before, after: self.version()? }),
            None => None,
        };
        Ok((done, warnings, span))
    }

    /// Hands the spilled objects of `msgs` that no row took (a duplicate, a failed write) to the
    /// sweep that follows every write request; a warning if that could not be recorded.
    fn release(&self, msgs: &[NewMessage]) -> Vec<String> {
        let keys: Vec<String> = msgs.iter().flat_map(|m| m.spills.iter().map(|s| s.key.clone())).collect();
        if keys.is_empty() {
            return Vec::new();
        }
        match spill::release_unused(self.env.sql, &keys) {
            Ok(()) => Vec::new(),
            Err(e) => vec![format!("could not release unused R2 objects {keys:?}: {}", e.message)],
        }
    }

    /// Appends `msg` where `parent` says. The same id again stores nothing (`inserted: false`,
    /// the stored message); a synthetic `compaction_…` message is never stored. A new message
    /// reaches the sockets, then auto-compaction runs if its branch passed the threshold.
    pub async fn append(&self, msg: NewMessage, parent: Parent) -> Result<Appended> {
        if is_synthetic(&msg) {
            let message = raw(msg.json)?;
            let outcome = Outcome::Synthetic;
            return Ok(Appended { message, parent_id: None, outcome, compaction: None, warnings: Vec::new() });
        }
        let tree = self.tree();
        let mut msgs = [msg];
        let (done, mut warnings, span) = self
            .write(&mut msgs, Spill::New, |m| {
                let done = tree.append(&m[0], &parent, self.env.now.iso())?;
                if done.inserted {
                    self.register()?;
                }
                Ok(done)
            })
            .await?;
        let [msg] = msgs;
        if !done.inserted {
            let message = self.message(&msg.id).await?;
            let (parent_id, outcome) = (done.parent_id, Outcome::Duplicate);
            return Ok(Appended { message, parent_id, outcome, compaction: None, warnings });
        }
        self.follow(span, done.parent_id.as_deref(), &[&msg]);
        self.publish_message(msg.client_json());
        let compaction = self.after_append(&msg.id).await;
        warnings.extend(compaction.as_ref().and_then(|a| a.warning(self.id)));
        let message = raw(msg.full.unwrap_or(msg.json))?;
        Ok(Appended { message, parent_id: done.parent_id, outcome: Outcome::Inserted, compaction, warnings })
    }

    /// Appends `msgs` in order, each the child of the one before (the first where `first`
    /// says). Ids already stored are skipped and the chain continues from them; synthetic
    /// messages are left out. All or nothing.
    pub async fn append_batch(&self, mut msgs: Vec<NewMessage>, first: Parent) -> Result<Batch> {
        let tree = self.tree();
        tree.check_parent(&first)?;
        let ((ids, last_id, stored, root), mut warnings, span) = self
            .write(&mut msgs, Spill::New, |msgs| {
                tree.check_parent(&first)?; // also for an empty batch
                let root = tree.parent_id(&first)?;
                let mut parent = first.clone();
                let (mut ids, mut stored) = (Vec::with_capacity(msgs.len()), Vec::new());
                for (i, m) in msgs.iter().enumerate().filter(|(_, m)| !is_synthetic(m)) {
                    if tree.append(m, &parent, self.env.now.iso())?.inserted {
                        stored.push(i);
                    }
                    ids.push(m.id.clone());
                    parent = Parent::Id(m.id.clone());
                }
                if !stored.is_empty() {
                    self.register()?;
                }
                Ok((ids, tree.parent_id(&parent)?, stored, root))
            })
            .await?;
        // A chain of new messages only: one already stored may sit on another path.
        if stored.len() == ids.len() {
            let chain: Vec<&NewMessage> = stored.iter().map(|&i| &msgs[i]).collect();
            self.follow(span, root.as_deref(), &chain);
        }
        for &i in &stored {
            self.publish_message(msgs[i].client_json());
        }
        let compaction = match (&last_id, stored.is_empty()) {
            (Some(leaf), false) => self.after_append(leaf).await,
            _ => None,
        };
        warnings.extend(compaction.as_ref().and_then(|a| a.warning(self.id)));
        Ok(Batch { ids, last_id, inserted: stored.len(), compaction, warnings })
    }

    /// Replaces the stored content of message `msg.id` (its place in the tree stays).
    pub async fn update(&self, msg: NewMessage) -> Result<Warned<RawMessage>> {
        let tree = self.tree();
        let missing = || Error::not_found(format!("message {} not found in session {}", msg.id, self.id));
        if !tree.contains(&msg.id)? {
            return Err(missing());
        }
        let mut msgs = [msg.clone()];
        let (_, warnings, _) = self
            .write(&mut msgs, Spill::All, |m| {
                if !tree.update(&m[0])? {
                    return Err(missing());
                }
                sessions::touch(self.env.sql, self.id, self.env.now.iso())
            })
            .await?;
        let [msg] = msgs;
        self.publish_message(msg.client_json());
        self.publish_idle().await;
        Ok(Warned { value: raw(msg.full.unwrap_or(msg.json))?, warnings })
    }

    /// Deletes message `id`; its children stay, as roots of their own branches.
    pub async fn delete_message(&self, id: &str) -> Result<()> {
        let tree = self.tree();
        atomically(self.env.sql, || {
            if !tree.delete(id)? {
                return Err(Error::not_found(format!("message {id} not found in session {}", self.id)));
            }
            sessions::touch(self.env.sql, self.id, self.env.now.iso())
        })?;
        self.publish_deleted(&[id]);
        self.publish_idle().await;
        Ok(())
    }

    /// Deletes the messages `ids` (each once, however often named) in one transaction: all or
    /// nothing, so an id the session does not hold is `not_found` and nothing is deleted. Each
    /// one's children stay, as roots of their own branches (as [`Session::delete_message`]).
    /// Answers the ids deleted, in the order first named.
    pub async fn delete_messages(&self, ids: &[String]) -> Result<Vec<String>> {
        let mut unique: Vec<&str> = Vec::with_capacity(ids.len());
        for id in ids {
            if !unique.contains(&id.as_str()) {
                unique.push(id);
            }
        }
        let tree = self.tree();
        atomically(self.env.sql, || {
            for id in &unique {
                if !tree.delete(id)? {
                    return Err(Error::not_found(format!(
                        "message {id} not found in session {} (nothing was deleted)",
                        self.id
                    )));
                }
            }
            sessions::touch(self.env.sql, self.id, self.env.now.iso())
        })?;
        self.publish_deleted(&unique);
        self.publish_idle().await;
        Ok(unique.into_iter().map(str::to_owned).collect())
    }

    /// Clears every message and overlay of the session; loaded skills are forgotten and the frozen prompt is rendered
    /// again (as the reference, docs/REFERENCE.md#prompt-freeze; docs/REFERENCE.md#d-clear-prompt). The old prompt goes
    /// in the same transaction, so if the new one cannot be rendered now (R2 unreachable) the next read renders it;
    /// that is a warning.
    pub async fn clear(&self) -> Result<Vec<String>> {
        let context = self.context();
        atomically(self.env.sql, || {
            self.tree().clear()?;
            context.forget_session_state()?;
            sessions::touch(self.env.sql, self.id, self.env.now.iso())
        })?;
        self.publish_cleared();
        // Clearing never registers a session: an unregistered one gets no stored prompt either
        // (nothing could delete it).
        let mut warnings = Vec::new();
        if sessions::get(self.env.sql, self.id)?.is_some() {
            if let Err(e) = context.refresh_prompt(self.env.now.iso()).await {
                warnings.push(format!("clear {}: prompt not re-rendered now ({e}); the next read renders it", self.id));
            }
        }
        self.publish_idle().await;
        Ok(warnings)
    }

    /// Deletes the session and everything stored for it (its context rows, its `conversation`
    /// memories; `core` and `daily` memories outlive it).
    pub async fn delete(&self) -> Result<()> {
        let gone = atomically(self.env.sql, || {
            sessions::delete(self.env.sql, self.id)?;
            crate::context::delete_session(self.env.sql, self.id)?;
            memory::store::delete_session(self.env.sql, self.id)
        })?;
        let memories = Memories::new(self.env);
        for m in &gone {
            memories.publish(memory::Op::Deleted, m);
        }
        self.publish_cleared();
        self.publish_idle().await;
        // The idle status renders the (now empty) session's prompt, which records the versions
        // of the shared blocks it read and its http blocks' texts: forgotten again, as the
        // session is gone.
        crate::context::forget_reads(self.env.sql, self.id)
    }

    /// Writes a finished agent turn in one transaction (see [`TurnWrite`]) and tells the
    /// sockets, in the order written: the user message, the answered messages, the reply.
    pub(crate) async fn commit_turn(&self, turn: TurnWrite) -> Result<Vec<String>> {
        let TurnWrite { user, updates, assistant, placement, parent, usage, freeze, recalled, ledger, input_estimate } =
            turn;
        let has_user = user.is_some();
        let n_updates = updates.len();
        let has_reply = assistant.is_some();
        let mut msgs: Vec<NewMessage> = user.into_iter().chain(updates).chain(assistant).collect();
        let tree = self.tree();
        let context = self.context();
        let e = self.env;
        let (appended, warnings, span) = self
            .write(&mut msgs, Spill::All, |msgs| {
                // Each new message is the child of the one before (the first of `parent`).
                let under = |id: &Option<String>| id.clone().map_or(Parent::Root, Parent::Id);
                let mut attach = parent.clone();
                // Whether the turn only appended new messages at the end of the path.
                let mut appended = n_updates == 0 && placement == Placement::New;
                if has_user {
                    appended &= tree.append(&msgs[0], &under(&attach), e.now.iso())?.inserted;
                    attach = Some(msgs[0].id.clone());
                }
                let start = usize::from(has_user);
                for m in &msgs[start..start + n_updates] {
                    tree.update(m)?;
                }
                match (has_reply.then(|| &msgs[msgs.len() - 1]), placement) {
                    (None, _) => {}
                    (Some(reply), Placement::New) => {
                        appended &= tree.append(reply, &under(&attach), e.now.iso())?.inserted;
                    }
                    (Some(reply), Placement::Extends) => {
                        if !tree.update(reply)? {
                            return Err(Error::conflict(format!("message {} was deleted during the turn", reply.id)));
                        }
                    }
                }
                sessions::ensure(e.sql, self.id, e.now.iso())?;
                sessions::add_usage(e.sql, self.id, usage.input_tokens, usage.output_tokens, 0.0, e.now.iso())?;
                if let Some(p) = &freeze {
                    context.freeze(p, e.now.iso())?;
                }
                recall::count_ids(e.sql, &recalled, e.now.iso())?;
                if let Some(measured) = ledger {
                    let tokens = (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens);
                    let estimate = (measured == Measured::Provider && input_estimate > 0).then_some(input_estimate);
                    ledger::record(e.sql, e.now.iso(), self.id, &e.llm.model, tokens, measured, estimate)?;
                }
                Ok(appended)
            })
            .await?;
        if appended {
            self.follow(span, parent.as_deref(), &msgs.iter().collect::<Vec<_>>());
        }
        for m in &msgs {
            self.publish_message(m.client_json());
        }
        Ok(warnings)
    }
}
