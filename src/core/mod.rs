//! The runtime-independent core: everything the agent remembers, over the small [`sql::Sql`]
//! trait. Nothing here knows about Workers; it is tested natively against real SQLite.

pub mod blobs;
pub mod chat_llm;
pub mod compact;
pub mod compaction;
pub mod config;
pub mod context;
pub mod conversation;
pub mod entry_key;
pub mod error;
pub mod estimate;
pub mod expand;
pub mod history;
pub mod ids;
pub mod js;
pub mod llm;
pub mod message;
pub mod prompt;
pub mod schema;
pub mod search;
pub mod search_entries;
pub mod sessions;
pub mod skills;
pub mod spill;
pub mod sql;
#[cfg(not(target_arch = "wasm32"))]
pub mod sqlite;
pub mod time;
pub mod tokens;
pub mod tools;
pub mod tree;
pub mod truncate;
pub mod turn;
