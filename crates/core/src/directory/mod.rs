//! The directory of agents and spaces: every object that holds data reports its figures
//! ([`Entry`]) to one of [`DIRECTORY_SHARDS`] directory objects, the one [`shard_of`] its kind
//! and name; a listing asks every shard for a page ([`Listing`]) and [`merge`]s them by name.
//! [`shard`] is a shard's table, [`report`] an object's side (marked dirty by its writes,
//! reported by its alarm), [`usage`] the per-turn usage ledger.
//!
//! # Its modules
//!
//! | module | what it is for |
//! |---|---|
//! | `mod.rs` | `Kind` (`agent`, `space`), `shard_of` (FNV-1a of `kind:name` modulo `DIRECTORY_SHARDS`, 16, fixed) and `shard_name`, `Entry` (an object's figures), `Report` (`Holds` or `Removed`, as JSON both ways, checked), `After` (the cursor `<kind>:<name>`), `Listing` (a page asked for: kind, prefix, activity range, cursor, limit; `shard_query`), `Page`, `merge` (the shards' pages into one, sorted by name then kind; one row more than the page means a next page) |
//! | `shard.rs` | a shard's table `directory_entries`: `take` (reports in one transaction), `list` (after the cursor, filtered, in (name, kind) order) |
//! | `report.rs` | an object's own report state (`directory_report`, one row): `mark` (the first write of a burst makes the report due `REPORT_DELAY_MS` later; keeps the object's name), `name` (the name kept from a WebSocket handshake, for the frames of an object woken without it), `due` (read by `schedule::alarm::due`), `pending`, `stats` (counts, `sqliteBytes`, `r2Bytes` from `spills`, `createdAt`, `lastActiveAt`), `sent` (clears the mark only if no write came since: its generation), `failed`, `forget` |
//! | `usage.rs` | the usage ledger (`usage_ledger`): `record` (one row per turn, in `Session::commit_turn`'s transaction, or in the run's record for a schedule's fresh run; `Measured::Estimated` for a stopped turn), `over` (sums over `[from, to)` and the sessions with the most tokens) |
//!
//! # What it keeps
//!
//! The invariants `docs/ARCHITECTURE.md` numbers for this folder, whole (a test cites each
//! with a comment `// invariant N`).
//!
//! 46. **A write is reported, never on its answer path, and a crash does not lose the report.**
//!     The mark (`report::mark`) is written in the same turn as the write, and the alarm for its
//!     due time is set in that turn too (`DoSql::set_alarm_now`: the call queues the write at once),
//!     so both commit with the write; the report itself is the alarm's. A report clears the mark
//!     only if no write came after the state it sent (`generation`); a failed one is retried.
//!     An object that holds nothing reports its removal.

pub mod report;
pub mod shard;
pub mod usage;

use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};
use crate::ids::{check_name, Role};
use crate::sort;
use crate::time::{instant, parse_iso};

/// How many directory objects the directory is spread over. Fixed: an object's shard is a hash
/// of its kind and name modulo this number, so changing it would strand every row.
pub const DIRECTORY_SHARDS: u32 = 16;

/// A listing's page size when none is asked for, and the largest one.
pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 1000;

/// FNV-1a (32 bits) of `text`: stable across builds and platforms.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The shard (`0..DIRECTORY_SHARDS`) that keeps the entry of `kind` called `name`.
pub fn shard_of(kind: Role, name: &str) -> u32 {
    fnv1a(&format!("{}:{name}", kind.as_str())) % DIRECTORY_SHARDS
}

/// The name of shard `n`'s Durable Object (`idFromName`).
pub fn shard_name(n: u32) -> String {
    format!("directory-{n}")
}

/// One object's row: what it reported last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub kind: Role,
    pub name: String,
    pub sessions: i64,
    pub messages: i64,
    pub memories: i64,
    pub sqlite_bytes: i64,
    pub r2_bytes: i64,
    pub created_at: String,
    pub last_active_at: String,
    /// When the shard took the report (set by the shard).
    pub reported_at: String,
}

/// What an object tells its shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// It holds data: these are its figures.
    Holds(Entry),
    /// It holds nothing (new, or erased): its row goes.
    Removed { kind: Role, name: String },
}

impl Report {
    /// The kind and name it is about.
    pub fn key(&self) -> (Role, &str) {
        match self {
            Report::Holds(e) => (e.kind, &e.name),
            Report::Removed { kind, name } => (*kind, name),
        }
    }

    /// As JSON (`{kind, name, removed: true}`, or the entry without `reportedAt`).
    pub fn to_json(&self) -> Json {
        match self {
            Report::Holds(e) => {
                let mut v = serde_json::to_value(e).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("reportedAt");
                }
                v
            }
            Report::Removed { kind, name } => {
                serde_json::json!({"kind": kind.as_str(), "name": name, "removed": true})
            }
        }
    }

    /// A report as [`Report::to_json`] writes it, checked (names, counts, times).
    pub fn from_json(v: &Json) -> Result<Report> {
        let o = v.as_object().ok_or_else(|| Error::invalid("a report must be a JSON object"))?;
        let text = |k: &str| o.get(k).and_then(Json::as_str).ok_or_else(|| Error::invalid(format!("{k} is required")));
        let kind = Role::parse(text("kind")?)?;
        let name = text("name")?.to_owned();
        check_name("name", &name)?;
        if o.get("removed").and_then(Json::as_bool) == Some(true) {
            return Ok(Report::Removed { kind, name });
        }
        let count = |k: &str| match o.get(k).and_then(Json::as_i64) {
            Some(n) if n >= 0 => Ok(n),
            _ => Err(Error::invalid(format!("{k} must be a whole number, 0 or more"))),
        };
        let time = |k: &str| {
            let t = text(k)?;
            parse_iso(t).ok_or_else(|| Error::invalid(format!("{k} must be an ISO-8601 time")))?;
            Ok::<_, Error>(t.to_owned())
        };
        Ok(Report::Holds(Entry {
            kind,
            name,
            sessions: count("sessions")?,
            messages: count("messages")?,
            memories: count("memories")?,
            sqlite_bytes: count("sqliteBytes")?,
            r2_bytes: count("r2Bytes")?,
            created_at: time("createdAt")?,
            last_active_at: time("lastActiveAt")?,
            reported_at: String::new(),
        }))
    }
}

/// Where a page of the directory ended: the name, then the kind, of its last entry. As text
/// `<kind>:<name>` (a kind has no `:`, a name may).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct After {
    pub name: String,
    pub kind: Role,
}

impl After {
    /// The cursor the API gave out; anything else is `invalid_request`.
    pub fn parse(text: &str) -> Result<After> {
        let bad = || Error::invalid("cursor is not one this API gave out");
        let (kind, name) = text.split_once(':').ok_or_else(bad)?;
        let kind = Role::parse(kind).map_err(|_| bad())?;
        check_name("cursor", name).map_err(|_| bad())?;
        Ok(After { name: name.to_owned(), kind })
    }

    pub fn text(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.name)
    }

    /// The cursor after `e`.
    pub fn of(e: &Entry) -> After {
        After { name: e.name.clone(), kind: e.kind }
    }
}

/// A page of the directory asked for: the filters, where it starts, how many.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub kind: Option<Role>,
    /// Names that start with this.
    pub prefix: Option<String>,
    /// `lastActiveAt` at or after this (ISO).
    pub active_after: Option<String>,
    /// `lastActiveAt` before this (ISO).
    pub active_before: Option<String>,
    pub after: Option<After>,
    pub limit: i64,
}

impl Listing {
    /// The listing of the query parameters `get` gives (`kind`, `prefix`, `activeAfter`,
    /// `activeBefore`, `limit`, `cursor`), checked: anything wrong (an empty value too) is
    /// `invalid_request`.
    pub fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<Listing> {
        let kind = get("kind").map(|k| Role::parse(&k)).transpose()?;
        let prefix = get("prefix");
        if let Some(p) = &prefix {
            check_name("prefix", p)?;
        }
        let time = |k: &str| get(k).map(|t| instant(k, &t)).transpose();
        let (active_after, active_before) = (time("activeAfter")?, time("activeBefore")?);
        let limit = match get("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => match v.trim().parse::<i64>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
                _ => return Err(Error::invalid(format!("limit must be an integer from 1 to {MAX_LIMIT}"))),
            },
        };
        let after = get("cursor").map(|c| After::parse(&c)).transpose()?;
        Ok(Listing { kind, prefix, active_after, active_before, after, limit })
    }

    /// The query string a shard is asked with: the same filters, one more row than the page
    /// (so the merge knows whether more follow).
    pub fn shard_query(&self) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(k) = self.kind {
            q.append_pair("kind", k.as_str());
        }
        if let Some(p) = &self.prefix {
            q.append_pair("prefix", p);
        }
        if let Some(t) = &self.active_after {
            q.append_pair("activeAfter", t);
        }
        if let Some(t) = &self.active_before {
            q.append_pair("activeBefore", t);
        }
        if let Some(a) = &self.after {
            q.append_pair("cursor", &a.text());
        }
        q.append_pair("limit", &(self.limit + 1).min(MAX_LIMIT + 1).to_string());
        q.finish()
    }
}

/// A page of the directory: entries in (name, kind) order, and the cursor of the next page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub items: Vec<Entry>,
    pub next: Option<After>,
}

impl Page {
    /// `{items, nextCursor}`.
    pub fn to_json(&self) -> Json {
        let mut o = Map::new();
        o.insert("items".into(), serde_json::to_value(&self.items).unwrap_or_default());
        o.insert("nextCursor".into(), self.next.as_ref().map_or(Json::Null, |a| Json::String(a.text())));
        Json::Object(o)
    }
}

/// The page of `limit` entries that the shards' pages make together: each shard's page holds
/// its first rows after the cursor in (name, kind) order (up to `limit + 1`), so the first
/// `limit` of all of them, merged, are the directory's; one more means a next page.
pub fn merge(pages: Vec<Vec<Entry>>, limit: i64) -> Page {
    let mut all: Vec<Entry> = pages.into_iter().flatten().collect();
    sort::by(&mut all, |a, b| (a.name.as_str(), a.kind).cmp(&(b.name.as_str(), b.kind)));
    all.dedup_by(|a, b| a.name == b.name && a.kind == b.kind);
    let limit = limit.max(0) as usize;
    let more = all.len() > limit;
    all.truncate(limit);
    let next = if more { all.last().map(After::of) } else { None };
    Page { items: all, next }
}

/// A shard page read back from its JSON (`{items: [...]}`); a malformed one is an error.
pub fn entries_of(v: &Json) -> Result<Vec<Entry>> {
    let items = v.get("items").and_then(Json::as_array).ok_or_else(|| Error::internal("a shard answered no items"))?;
    items
        .iter()
        .map(|i| {
            let reported = i.get("reportedAt").and_then(Json::as_str).unwrap_or_default().to_owned();
            match Report::from_json(i)? {
                Report::Holds(mut e) => {
                    e.reported_at = reported;
                    Ok(e)
                }
                Report::Removed { .. } => Err(Error::internal("a shard listed a removed entry")),
            }
        })
        .collect()
}
