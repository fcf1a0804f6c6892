//! The `<user-memory>` block a turn gives the model: the facts recalled for the latest user text,
//! fenced, within the configured token budget (the lowest-scored fact goes first). It is sent
//! as its own system message after the frozen prompt, so the prompt stays byte-identical between
//! turns and the provider's prompt cache keeps working.

use super::recall::Hit;
use crate::tokens::estimate_str;

/// The first line inside the block.
pub(crate) const PREAMBLE: &str =
    "Facts remembered about the user from earlier conversations. Use them when they help; \
                            the user's own words in this conversation take precedence.";

/// The block for `hits` within `token_budget`, and the ids of the memories in it; `None` when
/// nothing fits or nothing was recalled.
pub(crate) fn render(hits: &[Hit], token_budget: i64) -> Option<(String, Vec<String>)> {
    let mut kept: Vec<&Hit> = hits.iter().collect();
    loop {
        if kept.is_empty() {
            return None;
        }
        let text = block(&kept);
        if estimate_str(&text) <= token_budget {
            return Some((text, kept.iter().map(|h| h.memory.id.clone()).collect()));
        }
        // Drop the memory with the lowest confidence (unknown counts lowest; ties: the later one).
        let worst = kept
            .iter()
            .enumerate()
            .min_by(|(i, a), (j, b)| {
                let (sa, sb) = (a.memory.score.unwrap_or(-1.0), b.memory.score.unwrap_or(-1.0));
                sa.total_cmp(&sb).then(j.cmp(i))
            })
            .map(|(i, _)| i)?;
        kept.remove(worst);
    }
}

fn block(hits: &[&Hit]) -> String {
    let lines: Vec<String> = hits.iter().map(|h| format!("- {}", h.memory.content)).collect();
    format!("<user-memory>\n{PREAMBLE}\n{}\n</user-memory>", lines.join("\n"))
}
