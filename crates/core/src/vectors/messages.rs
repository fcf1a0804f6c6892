//! Search of messages by their words and by their meaning: the full-text hits
//! ([`store::search`](crate::store::search)) and the nearest message vectors of the same reach
//! (the session searched; across sessions, the sessions a limited token opens: invariant 38),
//! fused by rank ([`fuse`](super::fuse)); a long message is as near as its nearest part
//! (`embed::parts`). A message found by meaning alone is at least the
//! [`Scale::floor`](super::Scale::floor) of the object's messages from the query; one the words
//! found too counts its meaning from their [`Scale::support`](super::Scale::support). Without embeddings, or with nothing to search for, it is
//! full-text search as it was; a query that cannot be embedded now is searched by its words,
//! with a warning. The hits found are then re-ordered by the re-ranker, if one is configured
//! (`crate::llm::rerank`: the same hits, its best first).

use super::embed::message_of;
use super::fuse::{fuse, CANDIDATES};
use super::index::{ItemKind, Within};
use super::{evidence, Meaning};
use crate::access::Reach;
use crate::error::{Result, Warned};
use crate::query;
use crate::sort;
use crate::sql::{json_ids, Value};
use crate::store::search::{self, Hit};

/// What a search of messages keeps to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scope<'a> {
    /// One session (its hits carry no session id).
    Session(&'a str),
    /// Every session the reach opens.
    Across(&'a Reach),
}

/// The best `limit` messages for `query` within `scope`, best first (re-ranked when a re-ranker
/// is configured).
pub(crate) async fn search(
    meaning: &Meaning<'_>,
    scope: Scope<'_>,
    query: &str,
    limit: i64,
) -> Result<Warned<Vec<Hit>>> {
    let Warned { value: hits, mut warnings } = found(meaning, scope, query, limit).await?;
    let reranked = meaning.reranked(query, hits, |h| &h.content).await;
    warnings.extend(reranked.warnings);
    Ok(Warned { value: reranked.value, warnings })
}

/// The best `limit` messages for `query` within `scope` by words and meaning, best first.
async fn found(meaning: &Meaning<'_>, scope: Scope<'_>, query: &str, limit: i64) -> Result<Warned<Vec<Hit>>> {
    let sql = meaning.sql;
    let Some(words) = query::compile(query) else { return Ok(Warned::clean(Vec::new())) };
    // With meaning, more of the words' candidates than the hits asked for: meaning may move one up.
    let wide = if meaning.is_on() { limit.max(CANDIDATES as i64) } else { limit };
    let mut lexical = match scope {
        Scope::Session(s) => search::in_session(sql, s, &words, wide)?,
        Scope::Across(reach) => search::across_sessions(sql, &words, wide, reach, &Default::default())?,
    };
    if !meaning.is_on() {
        return Ok(Warned::clean(lexical));
    }
    let vector = match meaning.query(query.trim()).await {
        Ok(v) => v,
        Err(e) => {
            let warning = format!("search by meaning: {} (answered by words only)", e.message);
            lexical.truncate(limit.max(0) as usize);
            return Ok(Warned { value: lexical, warnings: vec![warning] });
        }
    };
    let sessions: Vec<&str> = match scope {
        Scope::Session(s) => vec![s],
        Scope::Across(Reach::Sessions(list)) => list.iter().map(String::as_str).collect(),
        Scope::Across(Reach::All) => Vec::new(),
    };
    let within = match scope {
        Scope::Across(Reach::All) => Within::All,
        _ => Within::Scopes(&sessions),
    };
    let scale = meaning.scale(ItemKind::Message)?;
    let near = nearest(meaning, &vector, within, wide.max(0) as usize, scale.support())?;
    let key = |h: &Hit| (h.session_id.clone(), h.id.clone());
    let lexical_keys: Vec<_> = lexical.iter().map(key).collect();
    // Each near message as a hit, with its similarity (one without text has no hit).
    let read = hits_of(meaning, &near.iter().map(|n| n.0).collect::<Vec<_>>(), scope)?;
    let similar: Vec<_> =
        read.into_iter().filter_map(|(seq, h)| near.iter().find(|n| n.0 == seq).map(|n| ((key(&h), h), n.1))).collect();
    let (pairs, similarity): (Vec<_>, Vec<f64>) = similar.into_iter().unzip();
    let (keys, semantic): (Vec<_>, Vec<Hit>) = pairs.into_iter().unzip();
    let kept = evidence(keys.into_iter().zip(similarity).collect(), &lexical_keys, &scale);
    let semantic: Vec<Hit> = semantic.into_iter().filter(|h| kept.iter().any(|(k, _)| *k == key(h))).collect();
    let semantic_keys: Vec<_> = semantic.iter().map(key).collect();
    let order = fuse(&lexical_keys, &semantic_keys, limit.max(0) as usize);
    let mut all = lexical;
    all.extend(semantic);
    let hits =
        order.into_iter().filter_map(|k| all.iter().position(|h| key(h) == k).map(|i| all.swap_remove(i))).collect();
    Ok(Warned::clean(hits))
}

/// The (at most) `n` messages within `within` most similar to `vector` by their best part
/// (`embed::parts`), with that similarity (at least `min`), most similar first.
fn nearest(meaning: &Meaning<'_>, vector: &[f32], within: Within<'_>, n: usize, min: f64) -> Result<Vec<(i64, f64)>> {
    let mut near = meaning.nearest(ItemKind::Message, vector, within, n, min)?;
    let parts = meaning.nearest(ItemKind::Part, vector, within, n, min)?;
    for (part, similarity) in parts {
        let seq = message_of(part);
        match near.iter_mut().find(|(s, _)| *s == seq) {
            Some(found) => found.1 = found.1.max(similarity),
            None => near.push((seq, similarity)),
        }
    }
    sort::by(&mut near, |a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    near.truncate(n);
    Ok(near)
}

/// The hits of messages `seqs` with their seqs, in that order (within a session: without their
/// session id).
fn hits_of(meaning: &Meaning<'_>, seqs: &[i64], scope: Scope<'_>) -> Result<Vec<(i64, Hit)>> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let ids = json_ids(seqs.iter().copied());
    let rows = meaning.sql.query(
        "SELECT m.seq, m.session_id, m.id, m.role, (SELECT content FROM messages_fts WHERE rowid = m.seq), m.created_at
           FROM json_each(?) j CROSS JOIN messages m ON m.seq = j.value ORDER BY j.key",
        &[Value::Text(ids)],
    )?;
    let mut hits = Vec::with_capacity(rows.len());
    for r in &rows {
        let Some(content) = r.opt_text(4)? else { continue };
        hits.push((
            r.int(0)?,
            Hit {
                session_id: match scope {
                    Scope::Session(_) => None,
                    Scope::Across(_) => Some(r.text(1)?),
                },
                id: r.text(2)?,
                role: r.text(3)?,
                content,
                created_at: r.text(5)?,
                score: 0.0,
            },
        ));
    }
    Ok(hits)
}
