//! The message store of one agent, in its SQLite database: the schema, validated messages,
//! the tree of each session, oversize fields kept in R2, compaction overlays, history and the
//! running token estimate, the originals behind an overlay, the sessions registry and search.

pub mod estimate;
pub mod history;
pub mod message;
pub mod overlay;
pub mod schema;
pub mod search;
pub mod sessions;
pub mod spill;
pub mod tree;
