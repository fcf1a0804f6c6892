//! The operator's D1 databases, by the binding names the config gives ([`Databases`]): what a
//! `d1` block reads (`crate::context::d1`). In Workers the binding's prepared statements, natively
//! SQLite (the tests). The core never builds SQL from a request's or the model's text: the
//! operator's query runs as written, and a search binds the words as parameters.

use crate::blobs::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::sql::{Row, Value};

/// The Worker's D1 bindings.
pub trait Databases {
    /// The rows of `sql` with `params` bound in order (`?1`, `?2`, …) on the database bound as
    /// `binding`, each row's values in column order. `Err` when no database is bound under that
    /// name or the query fails.
    fn query<'a>(&'a self, binding: &'a str, sql: &'a str, params: &'a [Value]) -> BoxFuture<'a, Result<Vec<Row>>>;
}

/// No D1 database at all (a deployment, or a test, that binds none).
pub struct NoDatabases;

impl Databases for NoDatabases {
    fn query<'a>(&'a self, binding: &'a str, _sql: &'a str, _params: &'a [Value]) -> BoxFuture<'a, Result<Vec<Row>>> {
        Box::pin(async move { Err(unbound(binding)) })
    }
}

/// The error of a binding the Worker does not have.
pub fn unbound(binding: &str) -> Error {
    Error::new(ErrorKind::NotConfigured, format!("no D1 database is bound as {binding}"))
}
