//! The core's [`Sql`] trait over a Durable Object's `SqlStorage`, with `transactionSync` for
//! atomic groups of writes. A result comes over as one packed buffer (`do_sql.js`).

use std::cell::Cell;

use wasm_bindgen::prelude::*;
use worker::Storage;

use session_agent_core::error::{Error, Result};
use session_agent_core::sql::{Row, Sql, Value};

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
}

/// A Durable Object's SQLite database.
pub struct DoSql {
    sql: JsValue,
    storage: TxStorage,
    depth: Cell<u32>,
    /// Rows written so far (the `rowsWritten` of every statement run).
    changes: Cell<u64>,
}

impl DoSql {
    pub fn new(storage: &Storage) -> Self {
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

/// Reads the rows `do_sql.js` packed (its layout is described there), and the rows the
/// statement wrote.
fn unpack(packed: &[u8]) -> Result<(Vec<Row>, u64)> {
    let bad = || Error::storage("sql: a packed result ends early");
    let split = packed.len().checked_sub(8).ok_or_else(bad)?;
    let (bytes, written) = packed.split_at(split);
    let written = f64::from_le_bytes(written.try_into().map_err(|_| bad())?) as u64;
    let mut rows = Vec::new();
    let mut at = 0;
    let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
        let part = bytes.get(*at..*at + n).ok_or_else(bad)?;
        *at += n;
        Ok(part)
    };
    let u32_at = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    while at < bytes.len() {
        let n = u32_at(take(&mut at, 4)?);
        let mut row = Vec::with_capacity(n);
        for _ in 0..n {
            let tag = take(&mut at, 1)?[0];
            row.push(match tag {
                0 => Value::Null,
                1 | 2 => {
                    let b = take(&mut at, 8)?;
                    let f = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    if tag == 1 {
                        Value::Int(f as i64)
                    } else {
                        Value::Real(f)
                    }
                }
                3 | 4 => {
                    let len = u32_at(take(&mut at, 4)?);
                    let body = take(&mut at, len)?.to_vec();
                    if tag == 4 {
                        Value::Blob(body)
                    } else {
                        Value::Text(String::from_utf8(body).map_err(|_| Error::storage("sql: text is not UTF-8"))?)
                    }
                }
                _ => return Err(Error::storage(format!("sql: unknown packed tag {tag}"))),
            });
        }
        rows.push(Row(row));
    }
    Ok((rows, written))
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
        let (rows, written) = unpack(&packed.to_vec())?;
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
