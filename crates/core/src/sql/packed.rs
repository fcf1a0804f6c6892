//! The rows of one statement packed into one byte buffer, as `src/do_sql.js` writes them in the
//! Durable Object (so a result crosses into the wasm as one copy): little-endian, per row a `u32`
//! count of values, then per value a tag byte and its body (`0` NULL, `1` an integer as `f64`,
//! `2` a float as `f64`, `3` text as a `u32` length and UTF-8, `4` a blob as a `u32` length and
//! bytes), and last the statement's `rowsWritten` as an `f64`. [`unpack`] reads it; `pack` (in its tests)
//! writes it (for the tests, which check the two against each other and against damage).

use crate::error::{Error, Result};
use crate::sql::{Row, Value};

/// Reads the rows `do_sql.js` packed (its layout is described there), and the rows the
/// statement wrote.
pub fn unpack(packed: &[u8]) -> Result<(Vec<Row>, u64)> {
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

/// The buffer `do_sql.js` would write for `rows` and `written` (what [`unpack`] reads).
#[cfg(test)]
fn pack(rows: &[Row], written: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for row in rows {
        out.extend((row.0.len() as u32).to_le_bytes());
        for v in &row.0 {
            match v {
                Value::Null => out.push(0),
                Value::Int(i) => {
                    out.push(1);
                    out.extend((*i as f64).to_le_bytes());
                }
                Value::Real(f) => {
                    out.push(2);
                    out.extend(f.to_le_bytes());
                }
                Value::Text(t) => {
                    out.push(3);
                    out.extend((t.len() as u32).to_le_bytes());
                    out.extend(t.as_bytes());
                }
                Value::Blob(b) => {
                    out.push(4);
                    out.extend((b.len() as u32).to_le_bytes());
                    out.extend(b);
                }
            }
        }
    }
    out.extend((written as f64).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::{pack, unpack};
    use crate::sql::{Row, Value};

    #[test]
    fn what_is_packed_unpacks_the_same() {
        let rows = vec![
            Row(vec![Value::Int(42), Value::Real(1.5), Value::Text("héllo 😀".into()), Value::Null]),
            Row(vec![]),
            Row(vec![Value::Blob(vec![0, 1, 255]), Value::Int(-(1 << 52)), Value::Text(String::new())]),
        ];
        let (got, written) = unpack(&pack(&rows, 7)).unwrap();
        assert_eq!((got, written), (rows, 7));
        assert_eq!(unpack(&pack(&[], 0)).unwrap(), (vec![], 0));
    }

    #[test]
    fn a_damaged_buffer_is_a_storage_error_never_a_panic() {
        let good = pack(&[Row(vec![Value::Text("abc".into()), Value::Int(1)])], 1);
        // Every cut short of the whole, and an unknown tag, and text that is not UTF-8.
        for n in 0..good.len() {
            if n + 8 > good.len() || n == 0 {
                continue;
            }
            let mut cut = good[..n].to_vec();
            cut.extend(1f64.to_le_bytes());
            assert!(unpack(&cut).is_err() || n == good.len() - 8, "cut at {n}");
        }
        assert!(unpack(&[1, 2, 3]).is_err());
        let mut tag = good.clone();
        tag[4] = 9;
        assert_eq!(unpack(&tag).unwrap_err().message, "the agent's storage failed");
        let mut utf8 = good.clone();
        utf8[9] = 0xFF;
        assert!(unpack(&utf8).is_err());
    }
}
