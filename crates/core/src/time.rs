//! Timestamps: ISO-8601 UTC with milliseconds (`2026-11-22T11:00:00.000Z`) everywhere.

use std::time::{Duration, UNIX_EPOCH};

use crate::error::{Error, Result};

/// Formats milliseconds since the Unix epoch: the one formatter of every stored time. Negative
/// inputs clamp to the epoch.
pub fn iso_millis(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// The moment of a request (`Env::now`): milliseconds since the epoch, the one number every
/// comparison and sum reads, with its text ([`iso_millis`]) made once for what is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Now {
    ms: i64,
    iso: String,
}

impl Now {
    /// The moment `ms` milliseconds after the epoch (clamped to it).
    pub fn at(ms: i64) -> Now {
        Now { ms: ms.max(0), iso: iso_millis(ms) }
    }

    /// Milliseconds since the epoch.
    pub fn ms(&self) -> i64 {
        self.ms
    }

    /// As stored: ISO-8601 UTC with milliseconds (`2026-11-22T11:00:00.000Z`).
    pub fn iso(&self) -> &str {
        &self.iso
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 timestamp (`2026-11-22T11:00:00Z`, with or
/// without fractions, UTC); `None` when it is not one or lies before the epoch.
pub fn parse_iso(text: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339(text.trim()).ok()?;
    i64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// A time a filter or query parameter `name` gives (`name` for errors): an ISO-8601 UTC
/// timestamp as `expiresAt` takes it, or a date `YYYY-MM-DD` (its midnight, UTC). Normalized to
/// milliseconds, so it compares with the stored times as text.
pub fn instant(name: &str, text: &str) -> Result<String> {
    let t = text.trim();
    let ms = match t.len() {
        10 => parse_iso(&format!("{t}T00:00:00Z")),
        _ => parse_iso(t),
    };
    ms.map(iso_millis).ok_or_else(|| {
        Error::invalid(format!(
            "{name} must be an ISO-8601 UTC timestamp like 2026-11-22T11:00:00.000Z or a date like 2026-11-22 (got {:?})",
            t.chars().take(40).collect::<String>()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // invariant 10 (docs/ARCHITECTURE.md): the format (not that a request takes the time once).
    #[test]
    fn formats_with_milliseconds_and_z() {
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(1_795_345_200_007), "2026-11-22T11:00:00.007Z");
    }

    #[test]
    fn a_moment_is_its_number_and_the_text_of_it() {
        let now = Now::at(1_795_345_200_007);
        assert_eq!((now.ms(), now.iso()), (1_795_345_200_007, "2026-11-22T11:00:00.007Z"));
        assert_eq!(parse_iso(now.iso()), Some(now.ms()));
        assert_eq!(Now::at(-5), Now::at(0));
    }

    #[test]
    fn parses_what_it_formats() {
        assert_eq!(parse_iso("2026-11-22T11:00:00.007Z"), Some(1_795_345_200_007));
        assert_eq!(parse_iso("2026-11-22T11:00:00Z"), Some(1_795_345_200_000));
        assert_eq!(parse_iso("yesterday"), None);
    }
}
