//! Who made a version of a memory (the `by` of its versions).

/// Who made a version of a memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The HTTP API (or a stub).
    Api,
    /// The model, through a memory tool.
    Tool,
    /// Extraction after a turn.
    Extract,
}

impl By {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            By::Api => "api",
            By::Tool => "tool",
            By::Extract => "extract",
        }
    }
}
