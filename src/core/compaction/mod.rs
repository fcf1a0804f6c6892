//! Compaction: the algorithm that picks what to summarize and writes the summarizer's prompt
//! ([`plan`]), and read-time truncation of older messages ([`truncate`]).

pub mod expand;
pub mod plan;
pub mod truncate;
