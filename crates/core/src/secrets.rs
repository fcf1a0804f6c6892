//! The Worker's secrets, read by the names the operator's config gives ([`Secrets`]): an http
//! block's header, never a value a request carries. `SESSION_CONFIG` names a secret; it never
//! holds one.

/// The Worker's secrets (and plain vars) by name. A secret that is not set is `None`.
pub trait Secrets {
    fn secret(&self, name: &str) -> Option<String>;
}

/// No secrets at all (a deployment, or a test, that sets none).
pub struct NoSecrets;

impl Secrets for NoSecrets {
    fn secret(&self, _name: &str) -> Option<String> {
        None
    }
}

impl Secrets for std::collections::HashMap<String, String> {
    fn secret(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}
