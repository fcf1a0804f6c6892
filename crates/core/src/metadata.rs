//! `metadata`: the flat JSON object a caller keeps on a memory or a session (up to 16 keys of
//! `[A-Za-z0-9_.-]{1,64}`, each a string of at most 512 characters, a number or a boolean), and
//! the `metadata.<key>=<value>` filters that select by it.
//!
//! Metadata is checked on every write and stored as its JSON text (`metadata` columns of
//! `migrations/0011_metadata.sql`), numbers normalized so that a whole number is written as one
//! (`30.0` is stored as `30`, as JavaScript has it). A filter compares its value with the stored
//! value **as text**: a string by its text, a number or a boolean by its JSON text, which is
//! what the API answers (`metadata.n=30` matches `30` and `"30"`, `metadata.flag=true` matches
//! `true` and `"true"`). SQLite reads the stored text (JSON1: `json_type`, `json_extract`, and
//! `->` for a number's or a boolean's text as it was written).

use serde_json::{Map, Number, Value as Json};

use crate::error::{Error, Result};
use crate::sql::Value;

/// Most keys of one object, and most `metadata.<key>` filters of one request.
pub const MAX_KEYS: usize = 16;
/// Longest key, in characters.
pub const MAX_KEY_CHARS: usize = 64;
/// Longest string value, in characters.
pub const MAX_STRING_CHARS: usize = 512;
/// Whole numbers up to this size are stored as integers (2^53, where doubles stop being exact).
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Metadata as stored: checked, numbers normalized.
pub type Metadata = Map<String, Json>;

/// Whether `key` is a metadata key: 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn is_key(key: &str) -> bool {
    (1..=MAX_KEY_CHARS).contains(&key.len())
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A key as an error message shows it: quoted, and cut after 64 characters (a hostile key may
/// be megabytes long).
fn shown(key: &str) -> String {
    match key.char_indices().nth(MAX_KEY_CHARS) {
        Some((i, _)) => format!("{:?}…", &key[..i]),
        None => format!("{key:?}"),
    }
}

fn bad_key(what: &str, key: &str) -> Error {
    Error::invalid(format!(
        "{what} key {} is not a metadata key: 1-{MAX_KEY_CHARS} characters of A-Z, a-z, 0-9, _, . and -",
        shown(key)
    ))
}

/// Checks `value`, the `metadata` of a request or a record (`what` names it in errors), and
/// gives it back as it is stored: `null` is `{}`; otherwise an object of at most 16 keys, each
/// a string (at most 512 characters), a finite number or a boolean. A nested value, `null` as a
/// value, a bad key, too many keys are `invalid_request` naming the key.
pub fn check(what: &str, value: &Json) -> Result<Metadata> {
    let obj = match value {
        Json::Null => return Ok(Metadata::new()),
        Json::Object(o) => o,
        _ => return Err(Error::invalid(format!("{what} must be an object (of at most {MAX_KEYS} keys)"))),
    };
    if obj.len() > MAX_KEYS {
        return Err(Error::invalid(format!("{what} holds at most {MAX_KEYS} keys (got {})", obj.len())));
    }
    let mut out = Metadata::with_capacity(obj.len());
    for (k, v) in obj {
        if !is_key(k) {
            return Err(bad_key(what, k));
        }
        let v = match v {
            Json::String(s) if s.chars().count() > MAX_STRING_CHARS => {
                return Err(Error::invalid(format!("{what}.{k} is longer than {MAX_STRING_CHARS} characters")));
            }
            Json::String(_) | Json::Bool(_) => v.clone(),
            Json::Number(n) => {
                Json::Number(normalize(n).ok_or_else(|| Error::invalid(format!("{what}.{k} must be a finite number")))?)
            }
            Json::Null => {
                return Err(Error::invalid(format!(
                    "{what}.{k} is null: a value is a string, a number or a boolean (leave the key out instead)"
                )))
            }
            Json::Array(_) | Json::Object(_) => {
                return Err(Error::invalid(format!("{what}.{k} is nested: a value is a string, a number or a boolean")))
            }
        };
        out.insert(k.clone(), v);
    }
    Ok(out)
}

/// A whole double within 2^53 as an integer; other numbers as they are (`None`: not finite).
fn normalize(n: &Number) -> Option<Number> {
    if n.is_i64() || n.is_u64() {
        return Some(n.clone());
    }
    let f = n.as_f64().filter(|f| f.is_finite())?;
    if f.fract() == 0.0 && f.abs() <= EXACT {
        return Some(Number::from(f as i64));
    }
    Number::from_f64(f)
}

/// The stored text of checked metadata.
pub(crate) fn text(m: &Metadata) -> String {
    Json::Object(m.clone()).to_string()
}

/// Metadata read back from its stored text (`{}` if the text is not an object, which no write
/// stores).
pub(crate) fn read(text: &str) -> Metadata {
    match serde_json::from_str(text) {
        Ok(Json::Object(o)) => o,
        _ => Metadata::new(),
    }
}

/// `metadata.<key>=<value>` filters: every one must match. A value matches the stored value of
/// its key as text (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pairs: Vec<(String, String)>,
}

impl Filter {
    /// The filters `pairs` (key without `metadata.`, value), checked: at most 16, each key a
    /// metadata key and each value 1–512 characters.
    pub fn new(pairs: Vec<(String, String)>) -> Result<Filter> {
        if pairs.len() > MAX_KEYS {
            return Err(Error::invalid(format!("at most {MAX_KEYS} metadata.<key> filters (got {})", pairs.len())));
        }
        for (k, v) in &pairs {
            if !is_key(k) {
                return Err(bad_key("metadata.<key> filter", k));
            }
            let n = v.chars().count();
            if n == 0 || n > MAX_STRING_CHARS {
                return Err(Error::invalid(format!(
                    "metadata.{k} must be a value of 1-{MAX_STRING_CHARS} characters (got {n})"
                )));
            }
        }
        Ok(Filter { pairs })
    }

    /// Whether there is no filter.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The condition "every filter matches" on the metadata column `column` (e.g. `m.metadata`)
    /// and its one parameter, the pairs as a JSON array of `[key, value]` (a filter of 16 keys
    /// binds one parameter, not four per key); `None` without filters. A pair matches a stored
    /// string by its text, any other value by its JSON text.
    pub(crate) fn condition(&self, column: &str) -> Option<(String, Value)> {
        if self.pairs.is_empty() {
            return None;
        }
        let pairs = Json::Array(
            self.pairs
                .iter()
                .map(|(k, v)| Json::Array(vec![Json::String(k.clone()), Json::String(v.clone())]))
                .collect(),
        );
        // Keys hold no quote or backslash: `$."<key>"` is the one member, dots and all.
        let path = "('$.\"' || (kv.value ->> 0) || '\"')";
        let cond = format!(
            "NOT EXISTS (SELECT 1 FROM json_each(?) kv WHERE (CASE json_type({column}, {path}) \
             WHEN 'text' THEN json_extract({column}, {path}) ELSE {column} -> {path} END) IS NOT (kv.value ->> 1))"
        );
        Some((cond, pairs.to_string().into()))
    }
}

/// The text a filter value given as JSON (a body's `metadata` object) stands for: a string's
/// text, a number's or a boolean's JSON text; `None` for anything else.
pub fn filter_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => normalize(n).map(|n| n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_and_normalizes() {
        let m = check("metadata", &json!({"a": "x", "n": 30.0, "f": 1.5, "b": true, "big": 1e300})).unwrap();
        assert_eq!(text(&m), r#"{"a":"x","n":30,"f":1.5,"b":true,"big":1e+300}"#);
        assert_eq!(check("metadata", &Json::Null).unwrap(), Metadata::new());
        for bad in
            [json!([]), json!("x"), json!({"a": {"b": 1}}), json!({"a": [1]}), json!({"a": null}), json!({"": 1})]
        {
            assert!(check("metadata", &bad).is_err(), "{bad}");
        }
        let long = "é".repeat(MAX_STRING_CHARS);
        assert!(check("metadata", &json!({ "k": long })).is_ok());
        assert!(check("metadata", &json!({ "k": format!("{long}x") })).is_err());
        let many: Map<String, Json> = (0..17).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(check("metadata", &Json::Object(many)).unwrap_err().message.contains("at most 16 keys"));
        assert!(check("m", &json!({"clé": 1})).unwrap_err().message.contains("\"clé\""));
        let huge = "k".repeat(100_000);
        assert!(check("m", &json!({ huge: 1 })).unwrap_err().message.len() < 300);
    }

    #[test]
    fn filters_are_checked() {
        let f = |k: &str, v: &str| Filter::new(vec![(k.to_owned(), v.to_owned())]);
        assert!(f("a.b-c_9", "x").is_ok());
        assert!(f("", "x").is_err());
        assert!(f("a b", "x").is_err());
        assert!(f("a", "").is_err());
        assert!(f("a", &"x".repeat(513)).is_err());
        assert!(Filter::new((0..17).map(|i| (format!("k{i}"), "v".to_owned())).collect()).is_err());
        assert_eq!(filter_text(&json!(30.0)).as_deref(), Some("30"));
        assert_eq!(filter_text(&json!(false)).as_deref(), Some("false"));
        assert_eq!(filter_text(&json!(null)), None);
    }
}
