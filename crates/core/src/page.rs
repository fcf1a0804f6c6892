//! Pages of newest-first lists (memories, sessions): a page ends at its last row, and the cursor
//! of the next page is that row's sort key (a timestamp and a sequence number that breaks its
//! ties), as text the API hands out and takes back (`<ISO time>~<seq>`).

use crate::error::{Error, Result};
use crate::sql::Value;
use crate::time::parse_iso;

/// Where a newest-first page ended: the sort key of its last row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub(crate) at: String,
    pub(crate) seq: i64,
}

impl Cursor {
    /// The cursor the API gave out as `text`; anything else is `invalid_request`.
    pub fn parse(text: &str) -> Result<Cursor> {
        let bad = || Error::invalid("cursor is not one this API gave out");
        let (at, seq) = text.rsplit_once('~').ok_or_else(bad)?;
        let seq = seq.parse().map_err(|_| bad())?;
        parse_iso(at).ok_or_else(bad)?;
        Ok(Cursor { at: at.to_owned(), seq })
    }

    /// Its text, as the API hands it out.
    pub fn text(&self) -> String {
        format!("{}~{}", self.at, self.seq)
    }

    /// The SQL condition "after this cursor" for rows sorted by `at` then `seq`, both descending
    /// (column expressions), and its values.
    pub(crate) fn after(&self, at: &str, seq: &str) -> (String, Vec<Value>) {
        (
            format!("({at} < ? OR ({at} = ? AND {seq} < ?))"),
            vec![self.at.as_str().into(), self.at.as_str().into(), Value::Int(self.seq)],
        )
    }
}
