//! The [`Sql`] trait over rusqlite (bundled SQLite with FTS5), for native tests and tools.

use std::cell::Cell;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use crate::error::{Error, Result};
use crate::sql::{Row, Sql, Value};

/// A SQLite database that the core can run on.
pub struct SqliteDb {
    conn: Connection,
    depth: Cell<u32>,
}

impl SqliteDb {
    /// A fresh in-memory database.
    pub fn memory() -> Result<Self> {
        Connection::open_in_memory().and_then(Self::wrap).map_err(err)
    }

    /// A database file (created if missing).
    pub fn open(path: &std::path::Path) -> Result<Self> {
        Connection::open(path).and_then(Self::wrap).map_err(err)
    }

    /// With the limits of a Durable Object's SQLite (workerd's `sqlite.c++`) where they are
    /// lower than SQLite's defaults, so a statement the platform refuses fails here too: at
    /// most 5 terms in a compound SELECT, 100 bound parameters.
    fn wrap(conn: Connection) -> rusqlite::Result<Self> {
        use rusqlite::limits::Limit;
        conn.set_limit(Limit::SQLITE_LIMIT_COMPOUND_SELECT, 5)?;
        conn.set_limit(Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 100)?;
        Ok(SqliteDb { conn, depth: Cell::new(0) })
    }
}

fn err(e: rusqlite::Error) -> Error {
    Error::storage(format!("sqlite: {e}"))
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Real(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

impl Sql for SqliteDb {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(err)?;
        let n = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).map_err(err)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(err)? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(match r.get_ref(i).map_err(err)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(i) => Value::Int(i),
                    ValueRef::Real(f) => Value::Real(f),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                });
            }
            out.push(Row(row));
        }
        Ok(out)
    }

    fn execute_batch(&self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).map_err(err)
    }

    fn changes(&self) -> u64 {
        self.conn.total_changes()
    }

    fn transaction(&self, body: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let name = format!("sp{}", self.depth.get());
        self.depth.set(self.depth.get() + 1);
        self.conn.execute_batch(&format!("SAVEPOINT {name}")).map_err(err)?;
        let result = body();
        self.depth.set(self.depth.get() - 1);
        match result {
            Ok(()) => self.conn.execute_batch(&format!("RELEASE {name}")).map_err(err),
            Err(e) => {
                self.conn.execute_batch(&format!("ROLLBACK TO {name}; RELEASE {name}")).map_err(err)?;
                Err(e)
            }
        }
    }
}
