//! The small SQL interface the core runs on: a Durable Object's `SqlStorage` in Workers,
//! rusqlite natively. Everything above this trait is plain Rust and runtime independent.
//! [`packed`] is how the Durable Object's rows cross into the wasm.

pub mod packed;

use crate::error::Error;

/// One SQL value, as SQLite types it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Real(f)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A result row: values in the order of the SELECT list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn get(&self, i: usize) -> Result<&Value, Error> {
        self.0.get(i).ok_or_else(|| Error::internal(format!("row has no column {i}")))
    }

    /// Column `i` as text; NULL is an error.
    pub fn text(&self, i: usize) -> Result<String, Error> {
        match self.get(i)? {
            Value::Text(s) => Ok(s.clone()),
            other => Err(Error::internal(format!("column {i}: expected text, got {other:?}"))),
        }
    }

    /// Column `i` as optional text.
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, Error> {
        match self.get(i)? {
            Value::Null => Ok(None),
            _ => self.text(i).map(Some),
        }
    }

    /// Column `i` as an integer. A Workers runtime hands numbers over as JavaScript doubles, so a
    /// whole-valued REAL is accepted too.
    pub fn int(&self, i: usize) -> Result<i64, Error> {
        match self.get(i)? {
            Value::Int(v) => Ok(*v),
            Value::Real(f) if f.fract() == 0.0 => Ok(*f as i64),
            other => Err(Error::internal(format!("column {i}: expected integer, got {other:?}"))),
        }
    }

    /// Column `i` as a float (integers widen).
    pub(crate) fn real(&self, i: usize) -> Result<f64, Error> {
        match self.get(i)? {
            Value::Int(v) => Ok(*v as f64),
            Value::Real(f) => Ok(*f),
            other => Err(Error::internal(format!("column {i}: expected number, got {other:?}"))),
        }
    }
}

/// What the core needs from a SQLite database.
///
/// Implementations run one statement per call with `?` placeholders. `transaction` runs `body`
/// so that either all of its writes land or none do (DO: `transactionSync`; rusqlite: a savepoint).
pub trait Sql {
    /// Runs one statement and returns all of its rows.
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, Error>;

    /// Runs several `;`-separated statements without parameters (used by migrations).
    fn execute_batch(&self, sql: &str) -> Result<(), Error>;

    /// Runs `body` atomically: an `Err` from it rolls every write back.
    fn transaction(&self, body: &mut dyn FnMut() -> Result<(), Error>) -> Result<(), Error>;

    /// How many rows this database has written since it was opened (inserted, updated or
    /// deleted, by any statement, rolled back or not). Reads never change it, so the same value
    /// twice means nothing was written in between: what [`crate::cache::ReadCache`]
    /// relies on.
    fn changes(&self) -> u64;

    /// The database's size in bytes, as the platform counts it for the directory's figures (0
    /// where it does not say).
    fn size(&self) -> i64 {
        0
    }

    /// Runs one statement, ignoring rows.
    fn execute(&self, sql: &str, params: &[Value]) -> Result<(), Error> {
        self.query(sql, params).map(|_| ())
    }

    /// The first row, if any.
    fn query_row(&self, sql: &str, params: &[Value]) -> Result<Option<Row>, Error> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
}

/// Integer ids as one JSON array text (`[3,1,2]`): a list of any length as a single statement
/// parameter, read back with `json_each(?)` in that order (`ORDER BY j.key`). The platform's
/// SQLite takes at most 100 parameters per statement, so an `IN (?, …)` list would not do.
pub(crate) fn json_ids(ids: impl IntoIterator<Item = i64>) -> String {
    let mut out = String::from("[");
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&id.to_string());
    }
    out.push(']');
    out
}

/// Texts as one JSON array text (`["a","b"]`): a list of any length as a single statement
/// parameter, read back with `json_each(?)` (as [`json_ids`]). Every list a request gives (the
/// sessions of a token, the tags and categories of a memory filter) is bound this way, never
/// as `IN (?, …)`.
pub(crate) fn json_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    serde_json::Value::Array(texts.into_iter().map(|t| serde_json::Value::String(t.to_owned())).collect()).to_string()
}

/// Runs `f` inside `sql.transaction`, carrying its value out.
pub fn atomically<T>(sql: &dyn Sql, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    let mut f = Some(f);
    let mut out = None;
    sql.transaction(&mut || {
        let f = f.take().ok_or_else(|| Error::internal("transaction body ran twice"))?;
        out = Some(f()?);
        Ok(())
    })?;
    out.ok_or_else(|| Error::internal("transaction body did not run"))
}
