//! Random identifiers (UUID v4) for sessions, compactions and forked messages, the rule for
//! the names agents and sessions are given, and what a name of a Durable Object names
//! ([`Role`]: an agent or a memory space).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// What a Durable Object of this core is: the one answer to "agent or space" that token claims,
/// the directory, the route tables and the space code share. Spelled once ([`Role::as_str`]):
/// `agent`, `space` (a token's `kind`, a directory entry's `kind`, the directory's `kind=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// An agent (`SessionAgent`): sessions, turns, its own memories.
    #[default]
    Agent,
    /// A memory space (`MemorySpace`): memories and shared blocks, for the agents mapped to it.
    Space,
}

impl Role {
    /// Both, in order.
    pub const ALL: [Role; 2] = [Role::Agent, Role::Space];

    /// `agent` or `space`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Space => "space",
        }
    }

    /// `agent` or `space`; anything else is `invalid_request`.
    pub fn parse(text: &str) -> Result<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text).ok_or_else(|| Error::invalid("kind must be agent or space"))
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Role, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        Role::parse(&text).map_err(|e| serde::de::Error::custom(e.message))
    }
}

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

    #[test]
    fn a_role_reads_back_what_it_writes() {
        use super::Role;
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()).unwrap(), r);
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
            assert_eq!(serde_json::from_value::<Role>(serde_json::json!(r.as_str())).unwrap(), r);
        }
        assert!(Role::parse("user").is_err());
    }
}
