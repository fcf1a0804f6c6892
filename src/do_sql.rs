//! The core's [`Sql`] trait over a Durable Object's `SqlStorage`, with `transactionSync` for
//! atomic groups of writes. A result comes over as one packed buffer (`do_sql.js`).

use std::cell::Cell;

use wasm_bindgen::prelude::*;
use worker::Storage;

use session_agent_core::error::{Error, Result};
use session_agent_core::sql::{packed, Row, Sql, Value};

#[wasm_bindgen(module = "/src/do_sql.js")]
extern "C" {
    /// Runs `query` with `bindings` on `sql` (a `SqlStorage`) and returns its rows packed.
    #[wasm_bindgen(catch, js_name = packedRows)]
    fn packed_rows(
        sql: &JsValue,
        query: &str,
        bindings: &js_sys::Array,
    ) -> std::result::Result<js_sys::Uint8Array, JsValue>;
}

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

    /// Sets the alarm: the call itself queues the write, in the current turn (its promise only
    /// says when it is stored), so it commits with that turn's SQL writes.
    #[wasm_bindgen(method, catch, js_name = setAlarm)]
    fn set_alarm(this: &TxStorage, at_ms: f64) -> std::result::Result<js_sys::Promise, JsValue>;
}

/// A Durable Object's SQLite database.
pub(crate) struct DoSql {
    sql: JsValue,
    storage: TxStorage,
    depth: Cell<u32>,
    /// Rows written so far (the `rowsWritten` of every statement run).
    changes: Cell<u64>,
}

impl DoSql {
    /// Sets the object's alarm for `at_ms` now, in this turn (see `TxStorage::set_alarm`); the
    /// promise it returns, which says when the alarm is stored.
    pub(crate) fn set_alarm_now(&self, at_ms: i64) -> std::result::Result<js_sys::Promise, JsValue> {
        self.storage.set_alarm(at_ms as f64)
    }

    pub(crate) fn new(storage: &Storage) -> Self {
        DoSql {
            sql: AsRef::<JsValue>::as_ref(&storage.sql()).clone(),
            storage: AsRef::<JsValue>::as_ref(storage.as_raw()).clone().unchecked_into(),
            depth: Cell::new(0),
            changes: Cell::new(0),
        }
    }
}

fn to_js(v: &Value) -> JsValue {
    match v {
        Value::Null => JsValue::NULL,
        Value::Int(i) => JsValue::from(*i as f64),
        Value::Real(f) => JsValue::from(*f),
        Value::Text(s) => JsValue::from_str(s),
        Value::Blob(b) => js_sys::Uint8Array::from(b.as_slice()).into(),
    }
}

fn sql_err(e: impl std::fmt::Display) -> Error {
    Error::storage(format!("sql: {e}"))
}

/// A thrown SQLite error, as its message.
fn js_err(e: JsValue) -> Error {
    match e.dyn_ref::<js_sys::Error>() {
        Some(err) => sql_err(String::from(err.message())),
        None => sql_err(format!("{e:?}")),
    }
}

impl Sql for DoSql {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let bindings: js_sys::Array = params.iter().map(to_js).collect();
        let packed = packed_rows(&self.sql, sql, &bindings).map_err(js_err)?;
        let (rows, written) = packed::unpack(&packed.to_vec())?;
        self.changes.set(self.changes.get() + written);
        Ok(rows)
    }

    fn execute_batch(&self, sql: &str) -> Result<()> {
        // `exec` runs every statement of a text without bindings: a query whose rows are dropped.
        self.query(sql, &[]).map(|_| ())
    }

    fn changes(&self) -> u64 {
        self.changes.get()
    }

    /// `SqlStorage.databaseSize`, 0 if the runtime has none.
    fn size(&self) -> i64 {
        js_sys::Reflect::get(&self.sql, &"databaseSize".into()).ok().and_then(|v| v.as_f64()).unwrap_or(0.0) as i64
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
