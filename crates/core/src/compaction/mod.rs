//! Compaction without the LLM: the algorithm that picks what to summarize and writes the
//! summarizer's prompt ([`plan`]), the originals behind a summary, page by page ([`expand`]),
//! and read-time truncation of older messages ([`truncate`]). Running it with the model and
//! storing the overlay is `session::compact`.

pub mod expand;
pub mod plan;
pub mod truncate;
