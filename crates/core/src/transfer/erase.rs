//! `DELETE /` with `Confirm: erase`: the agent forgets everything. Every row of every kind goes
//! in one transaction, which also hands every R2 object of the agent (spilled fields, pending
//! ones, agent-scoped skills) to the spill sweep and sets the token revocation time to the
//! moment of the erase. The sweep then deletes the objects; one a crash or an R2 failure left
//! is deleted by a later sweep.

use super::export::skill_prefixes;
use crate::access::revoke;
use crate::env::Env;
use crate::error::Result;
use crate::ids::Role;
use crate::space::blocks;
use crate::sql::atomically;
use crate::store::spill;

/// Every table that holds the agent's data or what is derived from it. (`schema_version`, the
/// revocation time, `spill_garbage`, the objects still to delete, `embedding_model`, the
/// model in use, and a space's `space_block_floor`, so no shared block's version repeats,
/// stay.) A test checks that
/// after an erase no other table holds a row, so a new table cannot be forgotten here.
pub(crate) const ERASED: &[&str] = &[
    "messages",
    "messages_fts",
    "spills",
    "spill_pending",
    "token_estimates",
    "compactions",
    "context_blocks",
    "fetched_block_texts",
    "context_defs",
    "prompts",
    "loaded_skills",
    "search_entries",
    "search_entries_fts",
    "memories",
    "memories_fts",
    "memory_versions",
    "memory_count",
    // After the rows they follow: deleting a row queues nothing and logs its vector's delete.
    "vectors",
    "unembedded",
    "vector_log",
    "sessions",
    "session_versions",
    "schedule_runs",
    "schedules",
    "maintenance",
    "space_choice",
    "space_blocks",
    "space_block_seen",
    "usage_ledger",
];

/// Objects deleted per sweep round.
const SWEEP_BATCH: i64 = 500;

/// Erases the agent. Returns the warnings of objects the sweep could not delete now.
pub async fn erase(env: &Env<'_>) -> Result<Vec<String>> {
    let mut skills = Vec::new();
    // A memory space has no skills: `<prefix><name>/` is the agent of that name's.
    let prefixes = if env.role == Role::Agent { skill_prefixes(env)? } else { Vec::new() };
    for prefix in prefixes {
        skills.extend(env.blobs.list(&format!("{prefix}{}/", env.agent)).await?.into_iter().map(|b| b.key));
    }
    let sql = env.sql;
    atomically(sql, || {
        let garbage = "INSERT OR IGNORE INTO spill_garbage (key) VALUES (?)";
        for k in &skills {
            sql.execute(garbage, &[k.as_str().into()])?;
        }
        sql.execute("INSERT OR IGNORE INTO spill_garbage (key) SELECT key FROM spill_pending", &[])?;
        sql.execute("INSERT OR IGNORE INTO spill_garbage (key) SELECT key FROM spills", &[])?;
        blocks::keep_floor(sql)?;
        for t in ERASED {
            sql.execute(&format!("DELETE FROM {t}"), &[])?;
        }
        revoke(sql, env.now.ms())?;
        Ok(())
    })?;
    // Versions start again from nothing: no text read before may be found at one of them; and
    // the indexes kept in memory load again from what is left (nothing).
    env.cache.clear();
    env.vectors.clear();
    env.events.revoked(env.now.ms());
    let mut warnings = Vec::new();
    loop {
        let (done, errors) = spill::sweep(sql, env.blobs, SWEEP_BATCH).await?;
        let failed = !errors.is_empty();
        warnings.extend(errors);
        if done == 0 || failed {
            break;
        }
    }
    Ok(warnings)
}
