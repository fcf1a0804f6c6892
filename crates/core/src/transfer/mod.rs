//! Taking an agent's data out and putting it back: the export format (`session-agent/2`), one
//! session's export and import, the whole agent's (NDJSON, streamed), and the erase.
//!
//! The format names what is stored, not how: every row that is the agent's data (sessions,
//! messages with their parents and spilled fields put back, compaction overlays, context
//! blocks and runtime block definitions, loaded skills, frozen prompts, memories and every
//! version of them, search-block entries, agent-scoped R2 skills), none of what is derived from
//! it (full-text indexes, token estimates, memory vectors, spill records). So an export imported
//! into a fresh agent exports byte for byte the same, whatever the agent is called.
//!
//! - [`tables`]: the rows of each kind, as data: JSON field ↔ column, and their checks;
//! - [`export`]: a session's document, the agent's NDJSON in chunks;
//! - [`import`]: read and check everything first, oversize fields and skills to R2 (pending),
//!   then one transaction;
//! - [`erase`]: every row in one transaction, then the R2 objects through the spill sweep.

pub mod erase;
pub mod export;
pub mod import;
pub mod tables;

/// How many records of each kind an agent export holds: its `end` record says it, and an import
/// answers what it wrote.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub(crate) sessions: usize,
    pub(crate) messages: usize,
    pub memories: usize,
    pub(crate) memory_versions: usize,
    pub(crate) entries: usize,
    pub(crate) skills: usize,
}

/// The format this build writes. An export names it in its first record. Version 2 added
/// `metadata` to session, memory and memoryVersion records.
pub(crate) const FORMAT: &str = "session-agent/2";

/// The earlier format this build still reads: version 1, the same records without `metadata`
/// (which then is `{}`).
const FORMAT_1: &str = "session-agent/1";

/// The format's name without its version.
const FORMAT_NAME: &str = "session-agent/";

/// Refuses a `format` this build does not read, saying why (newer version, or not an export).
pub(crate) fn check_format(format: Option<&str>) -> crate::error::Result<()> {
    use crate::error::Error;
    match format {
        Some(FORMAT | FORMAT_1) => Ok(()),
        Some(f) => match f.strip_prefix(FORMAT_NAME).and_then(|v| v.parse::<u32>().ok()) {
            Some(v) if v > 2 => Err(Error::invalid(format!(
                "this export has format {f:?}, newer than this service reads ({FORMAT}): update the service first"
            ))),
            _ => {
                Err(Error::invalid(format!("unknown export format {f:?} (this service reads {FORMAT_1} and {FORMAT})")))
            }
        },
        None => Err(Error::invalid(format!("not an export: the format field ({FORMAT:?}) is missing"))),
    }
}
