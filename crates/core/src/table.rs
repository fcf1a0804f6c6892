//! A kind of row as data: its table, the column that ties it to a session (if any), and its
//! fields (JSON name, column, type). What a row is, said once: the memories' store selects and
//! reads its rows by it, and the export reads (`Table::to_json`), the import checks
//! (`Table::values`) and writes (`Table::insert`) every kind of row by it. Derived columns
//! (indexes, counters, caches) are not in it.

use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};
use crate::metadata;
use crate::sql::{Row, Sql, Value};
use crate::time::{iso_millis, parse_iso};

/// The largest integer a JSON number holds exactly (2^53 - 1): token counts and counters.
pub(crate) const MAX_INT: i64 = (1 << 53) - 1;

/// How a field is stored and written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Text,
    OptText,
    /// A timestamp (ISO-8601), stored as text.
    Time,
    OptTime,
    Int,
    OptInt,
    OptReal,
    Real,
    /// 0 or 1, written as `false` / `true`.
    Bool,
    /// JSON text in the column, the JSON value itself in an export.
    Json,
    OptJson,
    /// A `metadata` object ([`crate::metadata`]): JSON text in the column, the object in an
    /// export. An import checks it as the API does; left out (an export written before
    /// metadata existed) or `null`, it is `{}`.
    Meta,
}

/// One field: its JSON name, its column, its type.
pub(crate) struct Col(pub &'static str, pub &'static str, pub Ty);

use Ty::*;

/// One kind of row.
pub(crate) struct Table {
    /// The `kind` of its NDJSON records (and, plural, its key in a session document).
    pub(crate) kind: &'static str,
    pub(crate) table: &'static str,
    /// The column holding the session id, for rows that belong to a session.
    pub(crate) session: Option<&'static str>,
    pub(crate) cols: &'static [Col],
}

impl Table {
    /// Its columns, in field order, for a `SELECT`.
    pub(crate) fn columns(&self) -> String {
        self.cols.iter().map(|c| c.1).collect::<Vec<_>>().join(", ")
    }

    /// The rows of this kind (of session `sid` when the kind belongs to sessions; `where_`
    /// narrows further), in the order they were written, as JSON objects.
    pub(crate) fn rows(
        &self,
        sql: &dyn Sql,
        sid: Option<&str>,
        where_: &str,
        params: &[Value],
    ) -> Result<Vec<Map<String, Json>>> {
        let mut conds = Vec::new();
        let mut all: Vec<Value> = Vec::new();
        if let (Some(col), Some(sid)) = (self.session, sid) {
            conds.push(format!("{col} = ?"));
            all.push(sid.into());
        }
        if !where_.is_empty() {
            conds.push(where_.to_owned());
            all.extend_from_slice(params);
        }
        let cond = if conds.is_empty() { String::new() } else { format!(" WHERE {}", conds.join(" AND ")) };
        let q = format!("SELECT {} FROM {}{cond} ORDER BY rowid", self.columns(), self.table);
        sql.query(&q, &all)?.iter().map(|r| self.to_json(r)).collect()
    }

    /// A row (of this table's columns, in order) as a JSON object.
    pub(crate) fn to_json(&self, r: &Row) -> Result<Map<String, Json>> {
        let mut obj = Map::with_capacity(self.cols.len());
        for (i, Col(field, _, ty)) in self.cols.iter().enumerate() {
            let v = match (ty, &r.0[i]) {
                (_, Value::Null) => Json::Null,
                (Text | OptText | Time | OptTime, _) => Json::String(r.text(i)?),
                (Int | OptInt, _) => Json::from(r.int(i)?),
                (Bool, _) => Json::Bool(r.int(i)? != 0),
                (Real | OptReal, _) => serde_json::Number::from_f64(r.real(i)?).map_or(Json::Null, Json::Number),
                (Json | OptJson | Meta, _) => serde_json::from_str(&r.text(i)?).map_err(|e| {
                    Error::internal(format!("a stored {} is not readable", self.kind))
                        .with_log(format!("{}.{field}: stored JSON: {e}", self.table))
                })?,
            };
            obj.insert((*field).to_owned(), v);
        }
        Ok(obj)
    }

    /// The column values of an imported object: every field present with its type (nullable
    /// ones may be `null` or left out), no other field but `extra`. `at` names the record in
    /// errors.
    pub(crate) fn values(&self, obj: &Map<String, Json>, extra: &[&str], at: &str) -> Result<Vec<Value>> {
        if let Some(k) =
            obj.keys().find(|k| !self.cols.iter().any(|c| c.0 == k.as_str()) && !extra.contains(&k.as_str()))
        {
            return Err(Error::invalid(format!("{at}: unknown field {k:?} in a {} record", self.kind)));
        }
        let bad = |field: &str, what: &str| Error::invalid(format!("{at}: {field} must be {what}"));
        self.cols
            .iter()
            .map(|Col(field, _, ty)| {
                let v = obj.get(*field).unwrap_or(&Json::Null);
                Ok(match (ty, v) {
                    (OptText | OptTime | OptInt | OptReal | OptJson, Json::Null) => Value::Null,
                    (Text | OptText, Json::String(s)) => Value::Text(s.clone()),
                    // Exactly as stored: UTC with milliseconds, so the round trip keeps every byte.
                    (Time | OptTime, Json::String(s)) if parse_iso(s).map(iso_millis).as_deref() == Some(s) => {
                        Value::Text(s.clone())
                    }
                    (Time | OptTime, _) => return Err(bad(field, "a timestamp like 2026-11-22T11:00:00.000Z")),
                    (Int | OptInt, Json::Number(n)) if n.as_i64().is_some_and(|n| (0..=MAX_INT).contains(&n)) => {
                        Value::Int(n.as_i64().unwrap_or(0))
                    }
                    (Int | OptInt, _) => return Err(bad(field, "a non-negative integer")),
                    (Real | OptReal, Json::Number(n)) if n.as_f64().is_some_and(|f| f.is_finite() && f >= 0.0) => {
                        Value::Real(n.as_f64().unwrap_or(0.0))
                    }
                    (Real | OptReal, _) => return Err(bad(field, "a non-negative number")),
                    (Bool, Json::Bool(b)) => Value::Int(i64::from(*b)),
                    (Bool, _) => return Err(bad(field, "true or false")),
                    (Json | OptJson, v) if !v.is_null() => Value::Text(v.to_string()),
                    (Meta, v) => Value::Text(metadata::text(&metadata::check(&format!("{at}: {field}"), v)?)),
                    (_, _) => return Err(bad(field, "a string")),
                })
            })
            .collect()
    }

    /// Writes one row: `values` (from [`Table::values`]) under session `sid` (for kinds that
    /// belong to sessions), plus derived `extra` columns. Returns its rowid.
    pub(crate) fn insert(
        &self,
        sql: &dyn Sql,
        sid: Option<&str>,
        values: Vec<Value>,
        extra: &[(&str, Value)],
    ) -> Result<i64> {
        let mut cols: Vec<&str> = Vec::new();
        let mut all: Vec<Value> = Vec::new();
        if let (Some(col), Some(sid)) = (self.session, sid) {
            cols.push(col);
            all.push(sid.into());
        }
        cols.extend(self.cols.iter().map(|c| c.1));
        all.extend(values);
        for (c, v) in extra {
            cols.push(c);
            all.push(v.clone());
        }
        let marks = vec!["?"; cols.len()].join(", ");
        let q = format!("INSERT INTO {} ({}) VALUES ({marks}) RETURNING rowid", self.table, cols.join(", "));
        // The checks before the write leave no row that clashes; if one still does, the answer
        // names the record, never the storage's words.
        let row =
            sql.query_row(&q, &all).map_err(|e| match e.log.as_deref().is_some_and(|l| l.contains("UNIQUE")) {
                true => Error::invalid(format!("a {} record repeats one already imported", self.kind)),
                false => e,
            })?;
        row.ok_or_else(|| Error::internal("INSERT returned no row"))?.int(0)
    }
}

/// The text of field `field` of a row's values (for checks that read one).
pub(crate) fn text_of<'v>(table: &Table, values: &'v [Value], field: &str) -> Option<&'v str> {
    let i = table.cols.iter().position(|c| c.0 == field)?;
    match &values[i] {
        Value::Text(s) => Some(s),
        _ => None,
    }
}
