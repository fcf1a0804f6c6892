//! The core's [`Sql`] trait over a Durable Object's `SqlStorage`, with `transactionSync` for
//! atomic groups of writes.

use std::cell::Cell;

use wasm_bindgen::prelude::*;
use worker::{SqlStorage, SqlStorageValue, Storage};

use crate::core::error::{Error, Result};
use crate::core::sql::{Row, Sql, Value};

#[wasm_bindgen]
extern "C" {
    /// The part of `DurableObjectStorage` that workers-rs does not bind.
    #[wasm_bindgen(extends = js_sys::Object)]
    type TxStorage;

    /// Runs the callback in a synchronous transaction; a throw rolls back and re-throws.
    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(
        this: &TxStorage,
        f: &mut dyn FnMut() -> std::result::Result<JsValue, JsValue>,
    ) -> std::result::Result<JsValue, JsValue>;
}

/// A Durable Object's SQLite database.
pub struct DoSql {
    sql: SqlStorage,
    storage: TxStorage,
    depth: Cell<u32>,
}

impl DoSql {
    pub fn new(storage: &Storage) -> Self {
        DoSql {
            sql: storage.sql(),
            storage: AsRef::<JsValue>::as_ref(storage.as_raw()).clone().unchecked_into(),
            depth: Cell::new(0),
        }
    }
}

fn to_js(v: &Value) -> SqlStorageValue {
    match v {
        Value::Null => SqlStorageValue::Null,
        Value::Int(i) => SqlStorageValue::Integer(*i),
        Value::Real(f) => SqlStorageValue::Float(*f),
        Value::Text(s) => SqlStorageValue::String(s.clone()),
        Value::Blob(b) => SqlStorageValue::Blob(b.clone()),
    }
}

fn from_js(v: SqlStorageValue) -> Value {
    match v {
        SqlStorageValue::Null => Value::Null,
        SqlStorageValue::Boolean(b) => Value::Int(b as i64),
        SqlStorageValue::Integer(i) => Value::Int(i),
        SqlStorageValue::Float(f) => Value::Real(f),
        SqlStorageValue::String(s) => Value::Text(s),
        SqlStorageValue::Blob(b) => Value::Blob(b),
    }
}

fn sql_err(e: impl std::fmt::Display) -> Error {
    Error::internal(format!("sql: {e}"))
}

impl Sql for DoSql {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let bindings: Vec<SqlStorageValue> = params.iter().map(to_js).collect();
        let cursor = self.sql.exec(sql, Some(bindings)).map_err(sql_err)?;
        cursor.raw().map(|r| r.map(|vals| Row(vals.into_iter().map(from_js).collect())).map_err(sql_err)).collect()
    }

    fn execute_batch(&self, sql: &str) -> Result<()> {
        let cursor = self.sql.exec(sql, None).map_err(sql_err)?;
        for r in cursor.raw() {
            r.map_err(sql_err)?;
        }
        Ok(())
    }

    fn transaction(&self, body: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        // transactionSync does not nest: an inner group joins the outer one, whose failure
        // rolls everything back.
        if self.depth.get() > 0 {
            return body();
        }
        let mut failure: Option<Error> = None;
        self.depth.set(1);
        let outcome = self.storage.transaction_sync(&mut || match body() {
            Ok(()) => Ok(JsValue::UNDEFINED),
            Err(e) => {
                let msg = JsValue::from_str(&e.message);
                failure = Some(e);
                Err(msg)
            }
        });
        self.depth.set(0);
        match (outcome, failure) {
            (_, Some(e)) => Err(e),
            (Ok(_), None) => Ok(()),
            (Err(js), None) => Err(sql_err(format!("{js:?}"))),
        }
    }
}
