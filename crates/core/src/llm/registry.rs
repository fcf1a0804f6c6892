//! Every provider the client knows, in one table: its name in `LLM_PROVIDER` and
//! `EMBEDDINGS_PROVIDER`, its [`Provider`] variant, and the type that speaks its API. Adding a
//! provider is its own file, its variant, and its line in that table; nothing else names it.

use super::anthropic::Anthropic;
use super::api::Api;
use super::openai::OpenAi;
use super::workers_ai::WorkersAi;
use crate::error::{Error, Result};

/// Which API the configured model speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    WorkersAi,
    None,
}

/// The providers by name, in the order error messages list them. `none` has no API: every call
/// is `not_configured`.
static PROVIDERS: [(&str, Provider, Option<&dyn Api>); 4] = [
    ("openai", Provider::OpenAi, Some(&OpenAi)),
    ("anthropic", Provider::Anthropic, Some(&Anthropic)),
    ("workers-ai", Provider::WorkersAi, Some(&WorkersAi)),
    ("none", Provider::None, None),
];

/// What a provider is configured for: chat (`LLM_PROVIDER`, every provider) or embeddings
/// (`EMBEDDINGS_PROVIDER`, only those with an embeddings API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    Chat,
    Embeddings,
}

impl Provider {
    /// The type that speaks this provider's API; `None` for [`Provider::None`].
    pub(crate) fn api(self) -> Option<&'static dyn Api> {
        PROVIDERS.iter().find(|(_, p, _)| *p == self).and_then(|(_, _, api)| *api)
    }

    /// The provider that the variable `var` names with `name`, for `purpose`. A name not in the
    /// table, or of a provider that does not serve `purpose`, is `invalid_request` listing the
    /// names that would do.
    pub(crate) fn named(var: &str, name: &str, purpose: Purpose) -> Result<Provider> {
        let serves = |api: &Option<&dyn Api>| match (purpose, api) {
            (Purpose::Chat, _) | (Purpose::Embeddings, None) => true,
            (Purpose::Embeddings, Some(api)) => api.has_embeddings(),
        };
        let fitting = || PROVIDERS.iter().filter(|(_, _, api)| serves(api));
        match fitting().find(|(n, _, _)| *n == name) {
            Some((_, p, _)) => Ok(*p),
            None => {
                let names: Vec<&str> = fitting().map(|(n, _, _)| *n).collect();
                Err(Error::invalid(format!("{var} {name:?} is not one of {}", names.join(", "))))
            }
        }
    }
}
