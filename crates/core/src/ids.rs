//! Random identifiers (UUID v4) for sessions, compactions and forked messages, and the rule
//! for the names agents and sessions are given.

use crate::error::{Error, Result};

/// A fresh UUID v4 string. Randomness comes from `getrandom` (the OS natively,
/// `crypto.getRandomValues` in Workers).
pub fn new_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| Error::internal(format!("no entropy source: {e}")))?;
    Ok(uuid::Builder::from_random_bytes(bytes).into_uuid().to_string())
}

/// Checks an agent or session name: 1–128 characters of `[A-Za-z0-9._:-]`.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!("{what} must be 1-128 characters of [A-Za-z0-9._:-]")))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_v4_and_distinct() {
        let a = super::new_id().unwrap();
        let b = super::new_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
