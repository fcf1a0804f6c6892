//! Random identifiers (UUID v4) for sessions, compactions and forked messages.

use crate::core::error::{Error, Result};

/// A fresh UUID v4 string. Randomness comes from `getrandom` (the OS natively,
/// `crypto.getRandomValues` in Workers).
pub fn new_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| Error::internal(format!("no entropy source: {e}")))?;
    Ok(uuid::Builder::from_random_bytes(bytes).into_uuid().to_string())
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
