//! The native tests: one binary over the core and the API layer, on real SQLite (rusqlite,
//! bundled, FTS5), the in-memory object store and a scripted model. Each module is the
//! specification of one part; `support` is what they share; `layout` checks the code base itself
//! (the module graph, the docs' names and paths).

mod access;
mod api;
mod chat;
mod chat_llm;
mod compact;
mod compact_api;
mod compaction;
mod context;
mod conversation;
mod d1_blocks;
mod directory;
mod expand;
mod front;
mod http_blocks;
mod layout;
mod llm;
mod mcp;
mod mcp_client;
mod memory;
mod memory_scope;
mod metadata;
mod object;
mod openai;
mod rerank;
mod routes;
mod rows;
mod schedules;
mod schema;
mod search;
mod sessions;
mod spaces;
mod spill;
mod stop;
mod support;
mod transfer;
mod tree;
mod truncate;
mod ui_chat;
mod validity;
mod vectors;
mod versions;
mod walks;
mod workers_ai;
