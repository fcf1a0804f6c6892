//! Texts the agent read from SQLite, kept between requests for as long as what they were read
//! from is unchanged.
//!
//! A whole history costs a path walk and the assembly of every message's JSON; read again with
//! nothing written to its session in between, it is the same text. The cache holds such texts
//! under a key, each stamped with the `Version` it was read at: for a session's texts, the seq
//! of its newest message and its row of `session_versions`, which triggers move on every other
//! write to its messages and overlays (migration 0009), so no write path has to invalidate
//! anything. A lookup names the version it expects now and finds nothing when the stamp differs.
//!
//! One kind of write is followed rather than forgotten: a message appended at the end of a kept
//! path (`ReadCache::grow`). The path's new text is the old one and the message, so the next
//! turn's branch read, the most frequent read there is, finds its text.
//!
//! The Durable Object keeps one per instance (the native tests one per database). It holds at
//! most `ReadCache::budget` bytes; the least recently used text goes first.

use std::cell::{Cell, RefCell};
use std::future::Future;

use crate::access::Reach;
use crate::error::{Result, Warned};
use crate::metadata;
use crate::store::history::Overlays;
use crate::store::sessions::Version;

/// Bytes a cache holds by default: the whole history of a 10,000-message session of about
/// 500 bytes per message, and a few smaller ones. A Durable Object shares its isolate's memory
/// (128 MB) with the other objects of the isolate.
pub const DEFAULT_BUDGET: usize = 8 * 1024 * 1024;

/// What a text kept is: the read that made it, with what it depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// The path of `session` to `leaf` (`None`: an empty session), with `overlays`.
    History { session: String, leaf: Option<String>, overlays: Overlays },
    /// The recent window of `session`'s active path, or of the path above `before`.
    Recent { session: String, before: Option<String>, max_bytes: i64, min_messages: i64 },
    /// A search of `session` for the compiled `query`.
    Search { session: String, limit: i64, query: String },
    /// A search across the sessions `reach` opens (of those whose metadata matches `metadata`)
    /// for the compiled `query`: what one token may not see is never answered to it from what
    /// another read, nor a filtered search from an unfiltered one.
    Across { reach: Reach, limit: i64, query: String, metadata: metadata::Filter },
    /// The counts of `session` (its messages, its active path).
    Counts { session: String },
}

impl Key {
    /// Whether this is a kept history of `session`.
    fn is_history_of(&self, id: &str) -> bool {
        matches!(self, Key::History { session, .. } if session == id)
    }
}

/// Texts read from the database, each valid at one version of what it was read from.
pub struct ReadCache {
    budget: usize,
    state: RefCell<State>,
    hits: Cell<u64>,
    clears: Cell<u64>,
}

#[derive(Default)]
struct State {
    /// Least recently used first.
    entries: Vec<Entry>,
    bytes: usize,
}

struct Entry {
    key: Key,
    version: Version,
    /// How many rows the text was made of, when it may grow ([`ReadCache::grow`]).
    rows: Option<usize>,
    text: String,
}

/// A text as a read made it, for [`ReadCache::kept`].
pub(crate) struct Read {
    pub(crate) text: String,
    /// How many rows it was made of, when it may grow: a JSON array of a path's messages.
    pub(crate) rows: Option<usize>,
    /// Objects that could not be read back: a read with warnings is not kept.
    pub(crate) warnings: Vec<String>,
}

impl Read {
    /// A text that does not grow.
    pub(crate) fn text(text: String, warnings: Vec<String>) -> Read {
        Read { text, rows: None, warnings }
    }
}

impl ReadCache {
    /// An empty cache that holds at most `budget` bytes of text.
    pub fn new(budget: usize) -> Self {
        ReadCache { budget, state: RefCell::new(State::default()), hits: Cell::new(0), clears: Cell::new(0) }
    }

    /// Bytes of text held now.
    pub fn held(&self) -> usize {
        self.state.borrow().bytes
    }

    /// How many lookups found their text.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }

    /// How many times it was cleared: a read that started before a clear must not keep its
    /// text after it ([`ReadCache::put`]).
    pub(crate) fn clears(&self) -> u64 {
        self.clears.get()
    }

    /// Drops every text, for a write that resets versions (the erase of the agent deletes
    /// them, so a version number may be met again).
    pub fn clear(&self) {
        *self.state.borrow_mut() = State::default();
        self.clears.set(self.clears.get() + 1);
    }

    /// Whether some history of `session` is kept (at any version).
    pub(crate) fn holds_history(&self, session: &str) -> bool {
        self.state.borrow().entries.iter().any(|e| e.key.is_history_of(session))
    }

    /// The text kept under `key` if it was read at `version`. A text of another version is
    /// dropped: a version never comes back, so it can never be asked for again.
    pub(crate) fn get(&self, key: &Key, version: Version) -> Option<String> {
        let mut s = self.state.borrow_mut();
        let i = s.entries.iter().position(|e| e.key == *key)?;
        let entry = s.remove(i);
        if entry.version != version {
            return None;
        }
        let text = entry.text.clone();
        s.push(entry);
        self.hits.set(self.hits.get() + 1);
        Some(text)
    }

    /// The text kept under `key` at `version` (what it was read from is at `version` now), else
    /// the one `read` makes with its warnings, kept unless it came with warnings (an object
    /// that could not be read back may be readable next time) or `version_now` no longer
    /// answers `version` once it is read (a read that waited, on R2 say, let other requests in).
    pub(crate) async fn kept<V, R, Fut>(
        &self,
        key: Key,
        version: Version,
        version_now: V,
        read: R,
    ) -> Result<Warned<String>>
    where
        V: Fn() -> Result<Version>,
        R: FnOnce() -> Fut,
        Fut: Future<Output = Result<Read>>,
    {
        if let Some(text) = self.get(&key, version) {
            return Ok(Warned::clean(text));
        }
        let clears = self.clears();
        let Read { text, rows, warnings } = read().await?;
        if warnings.is_empty() && version_now()? == version {
            self.keep(key, version, clears, rows, text.clone());
        }
        Ok(Warned { value: text, warnings })
    }

    /// Keeps `text` under `key`, read at `version` when the cache had been cleared `clears`
    /// times, in place of any text kept there. Nothing is kept larger than the budget, nor when
    /// the cache was cleared since the read began.
    pub(crate) fn put(&self, key: Key, version: Version, clears: u64, text: String) {
        self.keep(key, version, clears, None, text);
    }

    fn keep(&self, key: Key, version: Version, clears: u64, rows: Option<usize>, text: String) {
        if text.len() > self.budget || clears != self.clears() {
            return;
        }
        let mut s = self.state.borrow_mut();
        if let Some(i) = s.entries.iter().position(|e| e.key == key) {
            s.remove(i);
        }
        while s.bytes + text.len() > self.budget && !s.entries.is_empty() {
            s.remove(0);
        }
        s.push(Entry { key, version, rows, text });
    }

    /// Follows an append: when the JSON array kept under `from` was read at `from_version` from
    /// `n` rows, and `n` and the rows of `tail` are at most `most_rows`, keeps under `to`, at
    /// `to_version`, that array with the elements of `tail` (JSON texts, one per row) added at
    /// its end, in place of the old one (which the write made stale). Returns whether it did.
    pub(crate) fn grow(
        &self,
        (from, from_version): (&Key, Version),
        (to, to_version): (Key, Version),
        tail: &[&str],
        most_rows: usize,
    ) -> bool {
        let (old, rows) = {
            let mut s = self.state.borrow_mut();
            let Some(i) = s.entries.iter().position(|e| {
                e.key == *from && e.version == from_version && e.rows.is_some_and(|n| n + tail.len() <= most_rows)
            }) else {
                return false;
            };
            let e = s.remove(i);
            (e.text, e.rows.unwrap_or(0) + tail.len())
        };
        let Some(body) = old.strip_suffix(']') else { return false };
        let empty = body == "[";
        let mut text = old;
        text.truncate(text.len() - 1);
        text.reserve(tail.iter().map(|t| t.len() + 1).sum::<usize>() + 1);
        for (i, t) in tail.iter().enumerate() {
            if i > 0 || !empty {
                text.push(',');
            }
            text.push_str(t);
        }
        text.push(']');
        self.keep(to, to_version, self.clears(), Some(rows), text);
        true
    }
}

impl State {
    fn remove(&mut self, i: usize) -> Entry {
        let e = self.entries.remove(i);
        self.bytes -= e.text.len();
        e
    }

    fn push(&mut self, e: Entry) {
        self.bytes += e.text.len();
        self.entries.push(e);
    }
}

#[cfg(test)]
mod tests {
    use super::{Key, Read, ReadCache};
    use crate::store::history::Overlays;
    use crate::store::sessions::Version;

    fn v(newest: u64) -> Version {
        Version { newest, writes: 0 }
    }

    fn k(session: &str) -> Key {
        Key::Counts { session: session.into() }
    }

    #[test]
    fn a_text_is_found_at_its_version_only() {
        let cache = ReadCache::new(100);
        cache.put(k("a"), v(1), 0, "alpha".into());
        assert_eq!(cache.get(&k("a"), v(1)).as_deref(), Some("alpha"));
        assert_eq!(cache.get(&k("b"), v(1)), None);
        assert_eq!(cache.hits(), 1);
        assert_eq!(cache.get(&k("a"), v(2)), None, "written since");
        assert_eq!(cache.held(), 0, "a text of an older version is dropped");
        assert_eq!(cache.get(&k("a"), v(1)), None);
    }

    #[test]
    fn the_budget_drops_the_least_recently_used() {
        let cache = ReadCache::new(10);
        cache.put(k("a"), v(0), 0, "aaaa".into());
        cache.put(k("b"), v(0), 0, "bbbb".into());
        assert!(cache.get(&k("a"), v(0)).is_some(), "a is now the most recent");
        cache.put(k("c"), v(0), 0, "cccc".into());
        assert_eq!(cache.get(&k("b"), v(0)), None);
        assert!(cache.get(&k("a"), v(0)).is_some() && cache.get(&k("c"), v(0)).is_some());
        assert_eq!(cache.held(), 8);
        cache.put(k("a"), v(0), 0, "aaaaaa".into());
        assert_eq!(cache.held(), 10, "replaced, not added");
        cache.put(k("big"), v(0), 0, "x".repeat(11));
        assert_eq!(cache.get(&k("big"), v(0)), None, "larger than the budget: not kept");
        assert_eq!(cache.held(), 10);
    }

    #[test]
    fn an_array_grows_by_its_tail_up_to_most_rows() {
        let cache = ReadCache::new(100);
        let h = |leaf: &str| Key::History { session: "s".into(), leaf: Some(leaf.into()), overlays: Overlays::Raw };
        let path = |text: &str, rows| Read { text: text.into(), rows: Some(rows), warnings: Vec::new() };
        let read = |key, version, r: Read| {
            let now = move || Ok(version);
            futures::executor::block_on(cache.kept(key, version, now, || async { Ok(r) })).unwrap()
        };
        read(h("p"), v(3), path(r#"[{"id":"a"}]"#, 1));
        assert!(!cache.grow((&h("p"), v(2)), (h("q"), v(4)), &[r#"{"id":"b"}"#], 10), "not from a stale text");
        assert!(!cache.grow((&h("p"), v(3)), (h("q"), v(4)), &["1", "2"], 2), "past the most rows");
        assert!(cache.grow((&h("p"), v(3)), (h("q"), v(4)), &[r#"{"id":"b"}"#, r#"{"id":"c"}"#], 3));
        assert_eq!(cache.get(&h("q"), v(4)).as_deref(), Some(r#"[{"id":"a"},{"id":"b"},{"id":"c"}]"#));
        assert_eq!(cache.get(&h("p"), v(3)), None, "the old text is gone");
        assert!(!cache.grow((&h("q"), v(4)), (h("r"), v(5)), &["4"], 3), "three rows now");
        read(h("empty"), v(1), path("[]", 0));
        assert!(cache.grow((&h("empty"), v(1)), (h("one"), v(2)), &["1"], 10));
        assert_eq!(cache.get(&h("one"), v(2)).as_deref(), Some("[1]"));
        assert!(cache.holds_history("s") && !cache.holds_history("t"));
        cache.put(h("plain"), v(1), 0, "[]".into());
        assert!(!cache.grow((&h("plain"), v(1)), (h("more"), v(2)), &["1"], 10), "a text without rows does not grow");
    }

    #[test]
    fn a_clear_drops_every_text_and_a_read_begun_before_it() {
        let cache = ReadCache::new(100);
        cache.put(k("a"), v(1), 0, "alpha".into());
        let clears = cache.clears();
        cache.clear();
        assert_eq!((cache.get(&k("a"), v(1)), cache.held()), (None, 0));
        cache.put(k("b"), v(1), clears, "read before the clear".into());
        assert_eq!(cache.get(&k("b"), v(1)), None);
        cache.put(k("b"), v(1), cache.clears(), "read after it".into());
        assert!(cache.get(&k("b"), v(1)).is_some());
    }
}
