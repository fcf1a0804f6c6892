//! Messages bigger than a row: their largest fields go to the object store (R2), the row keeps a
//! short placeholder, and reads put the originals back, so a 5 MB tool output is stored and read
//! whole while no row ever passes the Durable Object's 2 MB limit.
//!
//! Write side: [`prepare`] runs before the write's transaction. When the message's JSON is over
//! [`MAX_MESSAGE_BYTES`], it moves fields (of the parts, or of the message itself; never `id`,
//! `role`, `parts` or a part's `type`), largest first, until the rest fits, writes each to
//! `_spill/<agent>/<session>/<uuid>`, and lists them in the message; `Tree::insert` records them
//! in the `spills` table in the same transaction as the row. `release_unused` afterwards
//! hands objects that no row took (a duplicate id, a failed transaction) to the sweep.
//!
//! Crashes: each key is listed in `spill_pending` (and committed) before its object is put, and
//! leaves that list in the transaction that records it. So every object in the store is either
//! referenced by a row, pending for a write in progress, or garbage; `recover`, run when the
//! Durable Object starts (no write can be in progress then), turns what is still pending into
//! garbage.
//!
//! Read side: `rehydrate` puts the fields back into messages read from the tree. Sessions
//! without spills cost one indexed lookup.
//!
//! Deleting: triggers (migration 0004) drop a message's `spills` rows with it and list objects
//! that lost their last reference in `spill_garbage`; `sweep` deletes those from the store
//! after write requests (and retries on a later one if the store fails).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::blobs::BoxFuture;
use crate::blobs::{Blob, BlobInfo, Blobs};
use crate::error::{Error, Result, Warned};
use crate::ids::new_id;
use crate::sort;
use crate::sql::{atomically, Sql, Value};
use crate::store::message::{raw, NewMessage, RawMessage, SpillRef, MAX_MESSAGE_BYTES};

/// Where spilled fields live in the bucket. Skills prefixes may not cover it (config checks).
pub(crate) const SPILL_PREFIX: &str = "_spill/";

/// Fields smaller than this stay in the row even when the message is over the limit.
pub(crate) const MIN_SPILL_BYTES: usize = 4 * 1024;

/// Characters of a spilled value kept in its placeholder, so raw readers (the compaction
/// summarizer, `expand_compaction`) still see what it was about.
const PREVIEW_CHARS: usize = 200;

/// The placeholder left in the row for a spilled value.
fn placeholder(value: &Json, bytes: usize) -> Json {
    let text = match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    let more = if preview.len() < text.len() { "…" } else { "" };
    Json::String(format!("[{bytes} bytes stored in R2; starts: {preview}{more}]"))
}

/// A field that may move out: where it is and how big its JSON is.
struct Candidate {
    part: i64,
    field: String,
    bytes: usize,
}

fn candidates(msg: &Map<String, Json>) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut consider = |part: i64, obj: &Map<String, Json>, skip: &[&str]| {
        for (k, v) in obj {
            if skip.contains(&k.as_str()) {
                continue;
            }
            let bytes = v.to_string().len();
            if bytes >= MIN_SPILL_BYTES {
                out.push(Candidate { part, field: k.clone(), bytes });
            }
        }
    };
    consider(-1, msg, &["id", "role", "parts"]);
    if let Some(parts) = msg.get("parts").and_then(Json::as_array) {
        for (i, p) in parts.iter().enumerate() {
            if let Some(obj) = p.as_object() {
                consider(i as i64, obj, &["type"]);
            }
        }
    }
    // Largest first; ties in document order (a stable sort).
    sort::by_key(&mut out, |c| std::cmp::Reverse(c.bytes));
    out
}

fn slot<'v>(msg: &'v mut Json, part: i64, field: &str) -> Option<&'v mut Json> {
    let obj = if part < 0 { msg } else { msg.get_mut("parts")?.get_mut(part as usize)? };
    obj.get_mut(field)
}

/// Moves the largest fields of an oversize `msg` to the store (see the module doc); a message
/// that fits is left alone. `too_large` when even the spillable fields cannot make it fit (for
/// example thousands of small parts). On a store failure, objects already written are deleted.
pub async fn prepare(sql: &dyn Sql, blobs: &dyn Blobs, agent: &str, session: &str, msg: &mut NewMessage) -> Result<()> {
    if msg.json.len() <= MAX_MESSAGE_BYTES {
        return Ok(());
    }
    let mut value: Json = serde_json::from_str(&msg.json).map_err(|e| Error::internal(e.to_string()))?;
    let cands = match value.as_object() {
        Some(obj) => candidates(obj),
        None => Vec::new(),
    };
    let mut size = msg.json.len();
    let mut moves: Vec<(Candidate, Json)> = Vec::new();
    for c in cands {
        if size <= MAX_MESSAGE_BYTES {
            break;
        }
        let Some(v) = slot(&mut value, c.part, &c.field) else { continue };
        let stand_in = placeholder(v, c.bytes);
        let original = std::mem::replace(v, stand_in.clone());
        size = size - c.bytes + stand_in.to_string().len();
        moves.push((c, original));
    }
    let json = serde_json::to_string(&value).map_err(|e| Error::internal(e.to_string()))?;
    if json.len() > MAX_MESSAGE_BYTES {
        return Err(Error::too_large(format!(
            "message {} is {} bytes of JSON; with its large fields moved to R2 it is still {} (limit {MAX_MESSAGE_BYTES})",
            msg.id,
            msg.json.len(),
            json.len()
        )));
    }
    let mut written: Vec<SpillRef> = Vec::with_capacity(moves.len());
    for (c, original) in moves {
        let key = format!("{SPILL_PREFIX}{agent}/{session}/{}", new_id()?);
        let text = serde_json::to_string(&original).map_err(|e| Error::internal(e.to_string()))?;
        // Pending first: a crash after the put (before the row commits) leaves a known key.
        sql.execute("INSERT OR IGNORE INTO spill_pending (key) VALUES (?)", &[key.as_str().into()])?;
        if let Err(e) = blobs.put(&key, Blob { text, description: None }).await {
            let mut keys: Vec<String> = written.iter().map(|r| r.key.clone()).collect();
            keys.push(key);
            release_unused(sql, &keys)?;
            return Err(Error::new(
                e.kind,
                format!("storing a large field of message {} in R2: {}", msg.id, e.message),
            ));
        }
        written.push(SpillRef { part: c.part, field: c.field, key, bytes: c.bytes });
    }
    let full = std::mem::replace(&mut msg.json, json);
    msg.full = Some(full);
    msg.spills = written;
    Ok(())
}

/// Records the spills of the message stored as row `seq` (called by the tree in the write's
/// transaction).
pub(crate) fn record(sql: &dyn Sql, session: &str, seq: i64, spills: &[SpillRef]) -> Result<()> {
    for s in spills {
        sql.execute("DELETE FROM spill_pending WHERE key = ?", &[s.key.as_str().into()])?;
        sql.execute(
            "INSERT INTO spills (message_seq, session_id, part, field, key, bytes) VALUES (?, ?, ?, ?, ?, ?)",
            &[
                Value::Int(seq),
                session.into(),
                Value::Int(s.part),
                s.field.as_str().into(),
                s.key.as_str().into(),
                Value::Int(s.bytes as i64),
            ],
        )?;
    }
    Ok(())
}

/// Hands those of `keys` that no row refers to (objects [`prepare`] wrote for a write that then
/// stored nothing) to the next [`sweep`], and ends their pending state.
pub(crate) fn release_unused(sql: &dyn Sql, keys: &[String]) -> Result<()> {
    atomically(sql, || {
        for k in keys {
            sql.execute("DELETE FROM spill_pending WHERE key = ?", &[k.as_str().into()])?;
            sql.execute(
                "INSERT OR IGNORE INTO spill_garbage (key) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM spills WHERE key = ?)",
                &[k.as_str().into(), k.as_str().into()],
            )?;
        }
        Ok(())
    })
}

/// `objects` without those a sweep is about to delete (garbage) or a cut-short write left
/// (pending): lists of skills show only what is there to stay.
pub(crate) fn live(sql: &dyn Sql, objects: Vec<BlobInfo>) -> Result<Vec<BlobInfo>> {
    if objects.is_empty()
        || sql.query_row("SELECT 1 FROM spill_garbage UNION ALL SELECT 1 FROM spill_pending LIMIT 1", &[])?.is_none()
    {
        return Ok(objects);
    }
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        let k = o.key.as_str();
        let doomed = "SELECT 1 FROM spill_garbage WHERE key = ?1 UNION ALL SELECT 1 FROM spill_pending WHERE key = ?1";
        if sql.query_row(doomed, &[k.into()])?.is_none() {
            out.push(o);
        }
    }
    Ok(out)
}

/// Takes `key` back from the sweep before an object is written there again (a skill rewritten
/// under the key of one an erase left for the sweep), so the new object is not deleted.
pub(crate) fn reclaim(sql: &dyn Sql, key: &str) -> Result<()> {
    sql.execute("DELETE FROM spill_garbage WHERE key = ?", &[key.into()])
}

/// Run when the Durable Object starts, before any request: keys still pending belong to writes
/// that a crash (or an eviction mid-write) cut short, so their objects are garbage. Returns how
/// many there were.
pub(crate) fn recover(sql: &dyn Sql) -> Result<i64> {
    atomically(sql, || {
        let n = sql.query_row("SELECT count(*) FROM spill_pending", &[])?.map_or(Ok(0), |r| r.int(0))?;
        if n > 0 {
            sql.execute(
                "INSERT OR IGNORE INTO spill_garbage (key)
                 SELECT key FROM spill_pending p WHERE NOT EXISTS (SELECT 1 FROM spills s WHERE s.key = p.key)",
                &[],
            )?;
            sql.execute("DELETE FROM spill_pending", &[])?;
        }
        Ok(n)
    })
}

#[derive(Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
}

/// Whether any message of `session` has a spilled field.
pub(crate) fn any(sql: &dyn Sql, session: &str) -> Result<bool> {
    Ok(sql.query_row("SELECT 1 FROM spills WHERE session_id = ? LIMIT 1", &[session.into()])?.is_some())
}

/// Puts spilled fields back into `messages` (read from `session`'s tree). A missing object
/// leaves its placeholder and is reported in the returned warnings; nothing else fails the read.
/// Boxed, so its code is made once for its callers (each held a copy: 3.9 KB of wasm).
pub(crate) fn rehydrate<'a>(
    sql: &'a dyn Sql,
    blobs: &'a dyn Blobs,
    session: &'a str,
    messages: Vec<RawMessage>,
) -> BoxFuture<'a, Result<Warned<Vec<RawMessage>>>> {
    Box::pin(rehydrated(sql, blobs, session, messages))
}

async fn rehydrated(
    sql: &dyn Sql,
    blobs: &dyn Blobs,
    session: &str,
    messages: Vec<RawMessage>,
) -> Result<Warned<Vec<RawMessage>>> {
    if messages.is_empty() || !any(sql, session)? {
        return Ok(Warned::clean(messages));
    }
    let mut by_id: HashMap<String, Vec<(i64, String, String)>> = HashMap::new();
    for r in sql.query(
        "SELECT m.id, s.part, s.field, s.key FROM spills s JOIN messages m ON m.seq = s.message_seq
          WHERE s.session_id = ? ORDER BY s.message_seq, s.part, s.field",
        &[session.into()],
    )? {
        by_id.entry(r.text(0)?).or_default().push((r.int(1)?, r.text(2)?, r.text(3)?));
    }
    let mut warnings = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let id = serde_json::from_str::<IdOnly>(m.get()).map(|i| i.id.into_owned()).unwrap_or_default();
        let Some(refs) = by_id.get(&id) else {
            out.push(m);
            continue;
        };
        let mut value: Json = serde_json::from_str(m.get()).map_err(|e| Error::internal(e.to_string()))?;
        for (part, field, key) in refs {
            let restored = match blobs.get(key).await {
                Ok(Some(b)) => serde_json::from_str::<Json>(&b.text).ok(),
                Ok(None) => None,
                Err(e) => {
                    warnings.push(format!("message {id}: reading {key} from R2 failed: {}", e.message));
                    continue;
                }
            };
            match (restored, slot(&mut value, *part, field)) {
                (Some(v), Some(s)) => *s = v,
                _ => warnings.push(format!("message {id}: the object {key} holding its field {field} is missing")),
            }
        }
        out.push(raw(serde_json::to_string(&value).map_err(|e| Error::internal(e.to_string()))?)?);
    }
    Ok(Warned { value: out, warnings })
}

/// Copies the spill records of row `from_seq` to row `to_seq` of `session` (a fork shares the
/// objects). Returns whether there were any.
pub(crate) fn copy(sql: &dyn Sql, from_seq: i64, to_seq: i64, session: &str) -> Result<bool> {
    let n = sql
        .query_row("SELECT count(*) FROM spills WHERE message_seq = ?", &[Value::Int(from_seq)])?
        .map_or(Ok(0), |r| r.int(0))?;
    if n > 0 {
        sql.execute(
            "INSERT INTO spills (message_seq, session_id, part, field, key, bytes)
             SELECT ?, ?, part, field, key, bytes FROM spills WHERE message_seq = ?",
            &[Value::Int(to_seq), session.into(), Value::Int(from_seq)],
        )?;
    }
    Ok(n > 0)
}

/// Deletes up to `limit` unreferenced objects from the store. Returns how many went and the
/// errors of those that did not (they stay listed and are retried by a later sweep).
pub(crate) async fn sweep(sql: &dyn Sql, blobs: &dyn Blobs, limit: i64) -> Result<(usize, Vec<String>)> {
    let keys: Vec<String> = sql
        .query("SELECT key FROM spill_garbage LIMIT ?", &[Value::Int(limit)])?
        .iter()
        .map(|r| r.text(0))
        .collect::<Result<_>>()?;
    let mut done = 0;
    let mut errors = Vec::new();
    for k in keys {
        match blobs.delete(&k).await {
            Ok(()) => {
                sql.execute("DELETE FROM spill_garbage WHERE key = ?", &[k.as_str().into()])?;
                done += 1;
            }
            Err(e) => errors.push(format!("deleting {k} from R2: {}", e.message)),
        }
    }
    Ok((done, errors))
}
