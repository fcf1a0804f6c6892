//! Keys of entries written into keyed blocks (skills, searchable blocks) by `set_context`:
//! a slug of the title, or a slug of the content plus a hash of it (docs/REFERENCE.md#entry-keys).

use crate::tokens::is_js_whitespace;

/// `s.slice(0, 60)` in UTF-16 units, lower-cased, every run of characters outside `[a-z0-9]`
/// turned into one `-`, then one leading and one trailing `-` removed.
pub(crate) fn slugify(s: &str) -> String {
    let head: Vec<u16> = s.encode_utf16().take(60).collect();
    // A surrogate pair cut in half is not a letter or digit either way.
    let head: String = char::decode_utf16(head).map(|c| c.unwrap_or('\u{fffd}')).collect();
    let mut out = String::new();
    let mut in_run = false;
    for c in head.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    let out = out.strip_prefix('-').unwrap_or(&out);
    out.strip_suffix('-').unwrap_or(out).to_owned()
}

/// FNV-1a (32 bit) over the UTF-16 code units, in base 36.
pub fn stable_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for unit in s.encode_utf16() {
        h ^= unit as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    base36(h)
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The key of a keyed write: the title's slug when a title is given (no hash, so the same
/// title updates in place; `entry-<hash>` when the slug is empty), else the content's slug (or
/// `entry`) plus `-` and the hash of the whole content.
pub(crate) fn entry_key(title: Option<&str>, content: &str) -> String {
    match title.filter(|t| !t.trim_matches(is_js_whitespace).is_empty()) {
        Some(t) => {
            let slug = slugify(t);
            if slug.is_empty() {
                format!("entry-{}", stable_hash(t))
            } else {
                slug
            }
        }
        None => {
            let slug = slugify(content);
            let slug = if slug.is_empty() { "entry".to_owned() } else { slug };
            format!("{slug}-{}", stable_hash(content))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_keys() {
        assert_eq!(entry_key(None, "no key"), "no-key-1nprufp");
        assert_eq!(entry_key(None, "用户喜欢咖啡"), "entry-2mzjev");
        assert_eq!(entry_key(None, "Just content, no desc"), "just-content-no-desc-cgko96");
        assert_eq!(entry_key(Some("Pirate style"), "ignored"), "pirate-style");
        assert_eq!(entry_key(Some("用户"), "ignored"), "entry-1in002o");
        assert_eq!(entry_key(None, ""), "entry-ztntfp");
        assert_eq!(
            entry_key(None, "The deployment process for production requires approval from management"),
            "the-deployment-process-for-production-requires-approval-from-1a3vzxs"
        );
        assert_eq!(entry_key(Some("   "), "no key"), "no-key-1nprufp");
    }
}
