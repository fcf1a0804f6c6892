//! Rendering context blocks into the system prompt, byte for byte as the reference
//! (docs/REFERENCE.md#prompt-rendering).

/// What the renderer needs to know of a block.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct BlockView {
    pub(crate) label: String,
    pub(crate) description: Option<String>,
    pub(crate) content: String,
    pub(crate) tokens: i64,
    pub(crate) max_tokens: Option<i64>,
    pub(crate) writable: bool,
    pub(crate) is_skill: bool,
    pub(crate) is_searchable: bool,
}

/// 46 × U+2550.
pub fn separator() -> String {
    "\u{2550}".repeat(46)
}

/// JavaScript's `Math.round` for finite non-negative and negative values alike.
pub(crate) fn js_round(x: f64) -> f64 {
    let r = x.floor();
    if x - r >= 0.5 {
        r + 1.0
    } else {
        r
    }
}

/// The usage percent shown for a budgeted block: `round(tokens / max * 100)`, in that order.
pub(crate) fn usage_percent(tokens: i64, max: i64) -> i64 {
    js_round((tokens as f64 / max as f64) * 100.0) as i64
}

/// The tag after a block's header: searchable > loadable > readonly > writable.
pub(crate) fn tag(b: &BlockView) -> &'static str {
    if b.is_searchable {
        "[searchable]"
    } else if b.is_skill {
        "[loadable]"
    } else if !b.writable {
        "[readonly]"
    } else {
        "[writable]"
    }
}

/// The system prompt: one part per block (empty readonly blocks are skipped), joined by a
/// blank line, no trailing newline.
pub(crate) fn render(blocks: &[BlockView]) -> String {
    let sep = separator();
    let parts: Vec<String> = blocks
        .iter()
        .filter(|b| !(b.content.is_empty() && !b.writable && !b.is_searchable && !b.is_skill))
        .map(|b| {
            // Labels are ASCII (`config::check_label`), so the ASCII mapping is the reference's
            // `toUpperCase()`, without Unicode's case table in the wasm.
            let mut header = b.label.to_ascii_uppercase();
            if let Some(d) = b.description.as_deref().filter(|d| !d.is_empty()) {
                header.push_str(&format!(" ({d})"));
            }
            if let Some(max) = b.max_tokens.filter(|m| *m != 0) {
                header.push_str(&format!(" [{}% \u{2014} {}/{} tokens]", usage_percent(b.tokens, max), b.tokens, max));
            }
            header.push(' ');
            header.push_str(tag(b));
            format!("{sep}\n{header}\n{sep}\n{}", b.content)
        })
        .collect();
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(label: &str, desc: Option<&str>, content: &str, max: Option<i64>, kind: &str) -> BlockView {
        BlockView {
            label: label.into(),
            description: desc.map(Into::into),
            content: content.into(),
            tokens: crate::tokens::estimate_str(content),
            max_tokens: max,
            writable: kind == "writable" || kind == "search",
            is_skill: kind == "skill",
            is_searchable: kind == "search",
        }
    }

    #[test]
    fn golden_prompt() {
        let blocks = [
            block("soul", Some("Identity"), "You are helpful.", None, "readonly"),
            block("empty", None, "", None, "readonly"),
            block("memory", Some("Facts"), "user likes coffee", Some(1100), "writable"),
            block("skills", None, "", None, "skill"),
            block("knowledge", Some("Searchable knowledge base"), "2 entries indexed.", None, "search"),
            block("notes", None, "", Some(500), "writable"),
        ];
        let s = separator();
        let want = format!(
            "{s}\nSOUL (Identity) [readonly]\n{s}\nYou are helpful.\n\n\
             {s}\nMEMORY (Facts) [0% \u{2014} 5/1100 tokens] [writable]\n{s}\nuser likes coffee\n\n\
             {s}\nSKILLS [loadable]\n{s}\n\n\n\
             {s}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{s}\n2 entries indexed.\n\n\
             {s}\nNOTES [0% \u{2014} 0/500 tokens] [writable]\n{s}\n"
        );
        assert_eq!(render(&blocks), want);
        assert_eq!(s.chars().count(), 46);
    }

    #[test]
    fn percent_in_float_order() {
        // 29/200*100 = 14.499999999999998 in f64: rounds to 14, not 15.
        assert_eq!(usage_percent(29, 200), 14);
        assert_eq!(usage_percent(1, 2), 50);
        assert_eq!(usage_percent(495, 1100), 45);
        assert_eq!(js_round(2.5), 3.0);
        assert_eq!(js_round(0.49999999999999994), 0.0);
    }

    #[test]
    fn labels_are_upper_cased_as_the_reference_does() {
        // Labels are `[A-Za-z0-9_-]` (`config::check_label` refuses "straße" and every other
        // non-ASCII label), where `toUpperCase()` is the ASCII mapping.
        let b = block("notes_v2-x", None, "x", None, "readonly");
        assert!(render(&[b]).contains("\nNOTES_V2-X [readonly]\n"));
        assert!(crate::config::check_label("straße").is_err());
    }
}
