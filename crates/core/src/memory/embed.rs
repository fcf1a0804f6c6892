//! Vectors of memories for semantic recall: embedding the memories that wait for it, the
//! vectors stored in SQLite as little-endian `f32`s, and cosine similarity.

use crate::error::Result;
use crate::llm::embeddings::{embed, EmbeddingsConfig};
use crate::llm::Transport;
use crate::sql::{atomically, Sql, Value};

/// Memories embedded per call of [`embed_pending`].
pub(crate) const BATCH: i64 = 32;

/// Embeds up to [`BATCH`] memories waiting for it and stores their vectors. A memory changed
/// meanwhile keeps waiting (its new text is embedded next time).
pub(crate) async fn embed_pending(sql: &dyn Sql, t: &dyn Transport, cfg: &EmbeddingsConfig) -> Result<usize> {
    let rows =
        sql.query("SELECT seq, content FROM memories WHERE unembedded = 1 ORDER BY seq LIMIT ?", &[Value::Int(BATCH)])?;
    if rows.is_empty() {
        return Ok(0);
    }
    let seqs: Vec<i64> = rows.iter().map(|r| r.int(0)).collect::<Result<_>>()?;
    let texts: Vec<String> = rows.iter().map(|r| r.text(1)).collect::<Result<_>>()?;
    let vectors = embed(t, cfg, &texts).await?;
    atomically(sql, || {
        for ((seq, text), v) in seqs.iter().zip(&texts).zip(&vectors) {
            let still = sql.query_row(
                "SELECT 1 FROM memories WHERE seq = ? AND content = ?",
                &[Value::Int(*seq), text.as_str().into()],
            )?;
            if still.is_none() {
                continue;
            }
            sql.execute(
                "INSERT INTO memory_vectors (memory_seq, model, vector) VALUES (?, ?, ?)
                 ON CONFLICT (memory_seq) DO UPDATE SET model = excluded.model, vector = excluded.vector",
                &[Value::Int(*seq), cfg.model.as_str().into(), Value::Blob(encode(v))],
            )?;
            sql.execute("UPDATE memories SET unembedded = 0 WHERE seq = ?", &[Value::Int(*seq)])?;
        }
        Ok(())
    })?;
    Ok(seqs.len())
}

/// A vector as stored: little-endian `f32`s.
pub(crate) fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// A stored vector.
pub(crate) fn decode(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Cosine similarity; 0 for vectors of different lengths or of zero norm.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
