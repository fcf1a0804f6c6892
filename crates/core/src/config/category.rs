//! The three kinds of memory: `core`, `daily`, `conversation`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The three kinds of memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// A permanent fact (the default).
    #[default]
    Core,
    /// A note that expires (after `dailyTtlDays`, or at its `expiresAt`).
    Daily,
    /// Context of one session, deleted with it.
    Conversation,
}

impl Category {
    pub(crate) const ALL: [Category; 3] = [Category::Core, Category::Daily, Category::Conversation];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Core => "core",
            Category::Daily => "daily",
            Category::Conversation => "conversation",
        }
    }

    /// The category called `name`; anything else is `invalid_request`.
    pub fn parse(name: &str) -> Result<Category> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == name)
            .ok_or_else(|| Error::invalid(format!("category must be one of core, daily, conversation (got {name:?})")))
    }
}
