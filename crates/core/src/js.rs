//! JavaScript's string semantics where the reference's behaviour depends on them (docs/REFERENCE.md#conventions):
//! `String(v)`, `JSON.stringify`, number printing, and UTF-16 lengths and prefixes.

use crate::sort;
use serde_json::Value as Json;

/// A string's JavaScript `length`: UTF-16 code units.
pub(crate) fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// `String(v)`, except that objects and arrays give their JSON.
pub(crate) fn string(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Number(_) | Json::Bool(_) | Json::Null | Json::Array(_) | Json::Object(_) => stringify(v),
    }
}

/// `JSON.stringify(v)`: like serde_json, but numbers as JavaScript prints them and object keys in JavaScript's
/// order (array-index keys ascending, then the others in insertion order).
pub(crate) fn stringify(v: &Json) -> String {
    let mut out = String::new();
    write_js(v, &mut out);
    out
}

fn write_js(v: &Json, out: &mut String) {
    match v {
        Json::Number(n) => out.push_str(&number(n.as_f64().unwrap_or(0.0))),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_js(item, out);
            }
            out.push(']');
        }
        Json::Object(map) => {
            let mut index_keys: Vec<(u32, &String, &Json)> =
                map.iter().filter_map(|(k, v)| array_index(k).map(|i| (i, k, v))).collect();
            sort::by_key(&mut index_keys, |(i, _, _)| *i);
            let others = map.iter().filter(|(k, _)| array_index(k).is_none());
            out.push('{');
            for (n, (k, v)) in index_keys.into_iter().map(|(_, k, v)| (k, v)).chain(others).enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(&Json::String(k.clone()).to_string());
                out.push(':');
                write_js(v, out);
            }
            out.push('}');
        }
        Json::Null | Json::Bool(_) | Json::String(_) => out.push_str(&v.to_string()),
    }
}

/// A canonical array index (`0` … `4294967294`, no leading zeros), which JavaScript objects list first.
fn array_index(k: &str) -> Option<u32> {
    if k.is_empty() || (k.len() > 1 && k.starts_with('0')) || !k.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    k.parse::<u32>().ok().filter(|&i| i != u32::MAX)
}

/// JavaScript's `Number.prototype.toString()` (ECMA-262 Number::toString) for a finite double.
pub(crate) fn number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if x < 0.0 {
        return format!("-{}", number(-x));
    }
    // The shortest digits that read back as `x`, as JavaScript takes them (zmij, which
    // serde_json prints with too): "123.0", "0.001", "1e21", "1.5e-7".
    let mut buf = zmij::Buffer::new();
    let shortest = buf.format_finite(x);
    let (mantissa, exp) = match shortest.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (shortest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    let k = digits.len() as i32;
    // x = 0.d1…dk × 10^n: the point stands after `int` moved by the exponent, less the zeros.
    let n = int.len() as i32 + exp - lead as i32;
    if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let sign = if e < 0 { '-' } else { '+' };
        if k == 1 {
            format!("{digits}e{sign}{}", e.abs())
        } else {
            format!("{}.{}e{sign}{}", &digits[..1], &digits[1..], e.abs())
        }
    }
}

/// The longest prefix of at most `max` UTF-16 code units that does not split a character.
pub(crate) fn utf16_prefix(s: &str, max: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            return &s[..i];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn javascript_numbers() {
        for (x, s) in [
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (123456789.0, "123456789"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (1e20, "100000000000000000000"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (0.000123, "0.000123"),
            (5e-324, "5e-324"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100"),
            (123.456, "123.456"),
            (9007199254740992.0, "9007199254740992"),
            (1e16, "10000000000000000"),
            (f64::MAX, "1.7976931348623157e+308"),
            (184_682_136_014_194.0 + 0.625, "184682136014194.62"),
        ] {
            assert_eq!(number(x), s, "{x}");
        }
    }

    /// As few digits as Rust's own shortest formatting (`{:e}`), reading back as the same double,
    /// with the same exponent, for doubles of every magnitude. (Where two shortest candidates
    /// are equally close, ECMA-262 takes the even one, as zmij does: 184682136014194.625 prints
    /// `184682136014194.62`, where `{:e}` says `…63`.)
    #[test]
    fn number_agrees_with_rusts_shortest_digits() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let x = f64::from_bits(state >> 1);
            if !x.is_finite() || x == 0.0 {
                continue;
            }
            let sci = format!("{x:e}");
            let (mantissa, exp) = sci.split_once('e').unwrap();
            let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
            let n = exp.parse::<i32>().unwrap() + 1;
            let mine = number(x);
            let want_digits = digits.trim_end_matches('0');
            let got: String = mine.split('e').next().unwrap().chars().filter(char::is_ascii_digit).collect();
            assert_eq!(
                got.trim_start_matches('0').trim_end_matches('0').len(),
                want_digits.len(),
                "{x}: {mine} vs {sci}"
            );
            let back: f64 = mine.parse().unwrap();
            assert_eq!(back, x, "{mine} reads back as {x}");
            if let Some((_, e)) = mine.split_once('e') {
                assert_eq!(e.trim_start_matches('+').parse::<i32>().unwrap(), n - 1, "{x}: {mine}");
            }
        }
    }

    #[test]
    fn javascript_stringify() {
        let v: Json = serde_json::from_str(r#"{"b":1.0,"10":[true,null],"2":"x\n","a":{"01":0.5}}"#).unwrap();
        assert_eq!(stringify(&v), r#"{"2":"x\n","10":[true,null],"b":1,"a":{"01":0.5}}"#);
        assert_eq!(string(&json!("plain")), "plain");
        assert_eq!(string(&json!(2.50)), "2.5");
    }

    #[test]
    fn utf16_cut() {
        assert_eq!(utf16_prefix("abc", 2), "ab");
        assert_eq!(utf16_prefix("a😀", 2), "a");
        assert_eq!(utf16_prefix("a😀", 3), "a😀");
    }
}
