//! The core's [`Databases`] over the Worker's D1 bindings: a statement prepared as the core gives
//! it (the operator's query, or a search built from the config's identifiers), its parameters
//! bound, its rows read raw (arrays in column order) and handed over through their JSON text.

use serde_json::Value as Json;
use wasm_bindgen::JsValue;
use worker::js_sys::{Uint8Array, JSON};
use worker::Env;

use session_agent_core::blobs::BoxFuture;
use session_agent_core::databases::{unbound, Databases};
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::sql::{Row, Value};

/// The D1 bindings of the Worker's environment.
pub(crate) struct WorkersDatabases(pub(crate) Env);

/// A query D1 refused or could not run: the caller learns that much, the log D1's words (on
/// one line).
fn refused(e: impl std::fmt::Display) -> Error {
    let words = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    Error::new(ErrorKind::NotConfigured, "the D1 query failed").with_log(words)
}

fn js(v: &Value) -> JsValue {
    match v {
        Value::Null => JsValue::NULL,
        Value::Int(i) => JsValue::from_f64(*i as f64),
        Value::Real(f) => JsValue::from_f64(*f),
        Value::Text(t) => JsValue::from_str(t),
        Value::Blob(b) => Uint8Array::from(&b[..]).into(),
    }
}

fn value(j: Json) -> Value {
    match j {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Int(i64::from(b)),
        Json::Number(n) => n.as_i64().map_or_else(|| Value::Real(n.as_f64().unwrap_or_default()), Value::Int),
        Json::String(s) => Value::Text(s),
        other => Value::Text(other.to_string()),
    }
}

/// One raw row (a JavaScript array) as a core row.
fn row(r: &JsValue) -> Result<Row> {
    let text: String = JSON::stringify(r).map_err(|_| refused("a row that is not JSON"))?.into();
    let values: Vec<Json> = serde_json::from_str(&text).map_err(refused)?;
    Ok(Row(values.into_iter().map(value).collect()))
}

impl Databases for WorkersDatabases {
    fn query<'a>(&'a self, binding: &'a str, sql: &'a str, params: &'a [Value]) -> BoxFuture<'a, Result<Vec<Row>>> {
        Box::pin(async move {
            let db = self.0.d1(binding).map_err(|_| unbound(binding))?;
            let args: Vec<JsValue> = params.iter().map(js).collect();
            let statement = db.prepare(sql).bind(&args).map_err(refused)?;
            let rows = statement.raw_js_value().await.map_err(refused)?;
            rows.iter().map(row).collect()
        })
    }
}
