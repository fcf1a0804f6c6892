//! Texts the agent read from SQLite, kept between requests for as long as nothing is written.
//!
//! A whole history costs a path walk and the assembly of every message's JSON; read again with
//! no write in between, it is the same text. The cache holds such texts under a key, together
//! with [`Sql::changes`] at the time they were read. Any write (to any table, by any request)
//! moves that counter, and the next lookup then drops everything: there is no invalidation to
//! forget on a write path, at the price of also dropping texts the write did not touch.
//!
//! The Durable Object keeps one per instance (the native tests one per database). It holds at
//! most [`ReadCache::budget`] bytes; the least recently used text goes first.

use std::cell::RefCell;

use crate::core::sql::Sql;

/// Bytes a cache holds by default: the whole history of a 10,000-message session of about
/// 500 bytes per message, and a few smaller ones. A Durable Object shares its isolate's memory
/// (128 MB) with the other objects of the isolate.
pub const DEFAULT_BUDGET: usize = 8 * 1024 * 1024;

/// Texts read from the database, valid while it is not written.
pub struct ReadCache {
    budget: usize,
    state: RefCell<State>,
    hits: std::cell::Cell<u64>,
}

#[derive(Default)]
struct State {
    /// [`Sql::changes`] when the entries were read.
    changes: u64,
    /// Least recently used first.
    entries: Vec<(String, String)>,
    bytes: usize,
}

impl ReadCache {
    /// An empty cache that holds at most `budget` bytes of text.
    pub fn new(budget: usize) -> Self {
        ReadCache { budget, state: RefCell::new(State::default()), hits: std::cell::Cell::new(0) }
    }

    /// The most bytes it holds.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes of text held now.
    pub fn held(&self) -> usize {
        self.state.borrow().bytes
    }

    /// How many lookups found their text.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }

    /// The text kept under `key`, if it was read since the last write to `sql`.
    pub fn get(&self, sql: &dyn Sql, key: &str) -> Option<String> {
        let mut s = self.state.borrow_mut();
        s.forget_if_written(sql);
        let i = s.entries.iter().position(|(k, _)| k == key)?;
        let entry = s.entries.remove(i);
        let text = entry.1.clone();
        s.entries.push(entry);
        self.hits.set(self.hits.get() + 1);
        Some(text)
    }

    /// Keeps `text` under `key`: what was read from `sql` when its [`Sql::changes`] was
    /// `read_at`. Nothing is kept when the database was written since (the text may be stale
    /// already: a read that waited, on R2 say, let other requests in), nor a text larger than
    /// the budget.
    pub fn put(&self, sql: &dyn Sql, read_at: u64, key: &str, text: &str) {
        if text.len() > self.budget || sql.changes() != read_at {
            return;
        }
        let mut s = self.state.borrow_mut();
        s.forget_if_written(sql);
        if let Some(i) = s.entries.iter().position(|(k, _)| k == key) {
            let (_, old) = s.entries.remove(i);
            s.bytes -= old.len();
        }
        while s.bytes + text.len() > self.budget && !s.entries.is_empty() {
            let (_, old) = s.entries.remove(0);
            s.bytes -= old.len();
        }
        s.bytes += text.len();
        s.entries.push((key.to_owned(), text.to_owned()));
    }
}

impl State {
    fn forget_if_written(&mut self, sql: &dyn Sql) {
        let now = sql.changes();
        if now != self.changes {
            self.entries.clear();
            self.bytes = 0;
            self.changes = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReadCache;
    use crate::core::sql::Sql;
    use crate::core::sqlite::SqliteDb;

    fn db() -> SqliteDb {
        let db = SqliteDb::memory().unwrap();
        db.execute_batch("CREATE TABLE t (x)").unwrap();
        db
    }

    #[test]
    fn a_text_is_kept_until_any_write() {
        let (db, cache) = (db(), ReadCache::new(100));
        let at = db.changes();
        cache.put(&db, at, "a", "alpha");
        assert_eq!(cache.get(&db, "a").as_deref(), Some("alpha"));
        assert_eq!(cache.get(&db, "b"), None);
        db.query("SELECT * FROM t", &[]).unwrap();
        assert_eq!(cache.get(&db, "a").as_deref(), Some("alpha"), "a read changes nothing");
        db.execute("INSERT INTO t VALUES (1)", &[]).unwrap();
        assert_eq!(cache.get(&db, "a"), None);
        assert_eq!(cache.held(), 0);
        // A statement that writes no row changes nothing either.
        cache.put(&db, db.changes(), "a", "alpha");
        db.execute("DELETE FROM t WHERE x = 2", &[]).unwrap();
        assert_eq!(cache.get(&db, "a").as_deref(), Some("alpha"));
    }

    #[test]
    fn a_text_read_before_a_write_is_not_kept() {
        let (db, cache) = (db(), ReadCache::new(100));
        let at = db.changes();
        db.execute("INSERT INTO t VALUES (1)", &[]).unwrap();
        cache.put(&db, at, "a", "stale");
        assert_eq!(cache.get(&db, "a"), None);
    }

    #[test]
    fn the_budget_drops_the_least_recently_used() {
        let (db, cache) = (db(), ReadCache::new(10));
        let at = db.changes();
        cache.put(&db, at, "a", "aaaa");
        cache.put(&db, at, "b", "bbbb");
        assert!(cache.get(&db, "a").is_some(), "a is now the most recent");
        cache.put(&db, at, "c", "cccc");
        assert_eq!(cache.get(&db, "b"), None);
        assert!(cache.get(&db, "a").is_some() && cache.get(&db, "c").is_some());
        assert_eq!(cache.held(), 8);
        cache.put(&db, at, "a", "aaaaaa");
        assert_eq!(cache.held(), 10, "replaced, not added");
        cache.put(&db, at, "big", "x".repeat(11).as_str());
        assert_eq!(cache.get(&db, "big"), None, "larger than the budget: not kept");
        assert_eq!(cache.held(), 10);
    }
}
