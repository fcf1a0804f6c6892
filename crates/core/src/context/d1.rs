//! Blocks read from the operator's D1 database (`kind: "d1"`, docs/REFERENCE.md#d1-blocks): the
//! block's text is the rows of the query its config gives, run on the Worker's D1 binding; with
//! `search`, `search_context` finds the rows of the named table whose named columns hold every
//! word of the model's query. The words are bound as parameters: a statement is built from the
//! config's identifiers alone, never from a request's or the model's text. Every query is
//! bounded by `timeoutMs`; the text by [`MAX_ROWS`] rows and [`MAX_TEXT_BYTES`]. A database that
//! fails or is late leaves the last text read with a warning (`fetched`); a search that fails is
//! the model's `Error: …`.

use futures::future::{select, Either};

use crate::blobs::BoxFuture;
use crate::config::BlockConfig;
use crate::context::entries::SEARCH_LIMIT;
use crate::context::fetched::{failed, Caller};
use crate::error::Result;
use crate::sql::{Row, Value};

/// Most rows of the query shown as the block's text.
pub const MAX_ROWS: usize = 100;
/// Most bytes of the block's text: rows past it are left out.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Most words of a search (the others are ignored).
pub const MAX_WORDS: usize = 8;
/// Most bytes of one word's `LIKE` pattern, its `%`s and escapes included: D1's limit on a
/// pattern (a longer word is cut to fit; SQLite's own default is 50,000).
pub const MAX_PATTERN_BYTES: usize = 50;

/// Runs `sql` with `params` on `b`'s database, bounded by its `timeoutMs`.
fn run<'a>(
    ctx: &'a Caller<'a>,
    b: &'a BlockConfig,
    sql: &'a str,
    params: &'a [Value],
) -> BoxFuture<'a, Result<Vec<Row>>> {
    Box::pin(async move {
        let binding = b.binding.as_deref().unwrap_or_default();
        let timeout = b.http_timeout_ms();
        match select(ctx.databases.query(binding, sql, params), ctx.transport.sleep(timeout)).await {
            Either::Left((Ok(rows), _)) => Ok(rows),
            Either::Left((Err(e), _)) => Err(failed(
                "the block's database could not be read",
                format!("{}{}", e.message, e.log.map(|l| format!(": {l}")).unwrap_or_default()),
            )),
            Either::Right(_) => Err(failed(
                format!("the block's database did not answer within {timeout} ms"),
                format!("no answer within {timeout} ms"),
            )),
        }
    })
}

/// One value as the block shows it: text as it is, numbers as written, `NULL` as nothing.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Int(i) => i.to_string(),
        Value::Real(f) => f.to_string(),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => format!("({} bytes)", b.len()),
    }
}

/// A row's values joined by ` | `.
fn line(values: &[Value]) -> String {
    values.iter().map(cell).collect::<Vec<_>>().join(" | ")
}

/// The block's text: the first [`MAX_ROWS`] rows of its query, one line each, as long as the
/// text stays within [`MAX_TEXT_BYTES`]; kept as the last text read. When the query fails, the
/// last text read, with a warning.
pub(crate) fn text<'a>(ctx: &'a Caller<'a>, b: &'a BlockConfig) -> BoxFuture<'a, Result<String>> {
    Box::pin(async move {
        let got = run(ctx, b, b.query.as_deref().unwrap_or_default(), &[]).await.map(|rows| {
            let mut text = String::new();
            for r in rows.iter().take(MAX_ROWS) {
                let l = line(&r.0);
                let sep = usize::from(!text.is_empty());
                if text.len() + sep + l.len() > MAX_TEXT_BYTES {
                    break;
                }
                if sep == 1 {
                    text.push('\n');
                }
                text.push_str(&l);
            }
            text
        });
        ctx.text_or_last(b, got)
    })
}

/// `word` as a `LIKE` pattern that matches it anywhere, its `\`, `%` and `_` escaped (`ESCAPE
/// '\'`), the word cut where the pattern would pass [`MAX_PATTERN_BYTES`].
fn pattern(word: &str) -> String {
    let mut p = String::from("%");
    for c in word.chars() {
        let escaped = matches!(c, '\\' | '%' | '_');
        if p.len() + usize::from(escaped) + c.len_utf8() + 1 > MAX_PATTERN_BYTES {
            break;
        }
        if escaped {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// The search statement of `b` for `words` words: the key (if any) and the columns of the rows
/// whose columns hold each word (`?1`…`?n`), at most [`SEARCH_LIMIT`]; built from the config's
/// identifiers (plain, checked when the config was read) and placeholders only.
fn statement(b: &BlockConfig, words: usize) -> Option<String> {
    let s = b.d1_search()?;
    let q = |n: &str| format!("\"{n}\"");
    let shown: Vec<String> = s.key.iter().chain(&s.columns).map(|c| q(c)).collect();
    let each: Vec<String> = (1..=words)
        .map(|i| {
            let any: Vec<String> = s.columns.iter().map(|c| format!("{} LIKE ?{i} ESCAPE '\\'", q(c))).collect();
            format!("({})", any.join(" OR "))
        })
        .collect();
    Some(format!("SELECT {} FROM {} WHERE {} LIMIT {SEARCH_LIMIT}", shown.join(", "), q(&s.table), each.join(" AND ")))
}

/// `search_context` on `b`: the rows whose columns hold every word of `query` (the first
/// [`MAX_WORDS`]), each `[key]\n<columns>` (the columns alone without a key column), joined by
/// a blank line; `None` when none does or the query has no word.
pub(crate) fn search<'a>(
    ctx: &'a Caller<'a>,
    b: &'a BlockConfig,
    query: &'a str,
) -> BoxFuture<'a, Result<Option<String>>> {
    Box::pin(async move {
        let words: Vec<Value> = query.split_whitespace().take(MAX_WORDS).map(|w| Value::Text(pattern(w))).collect();
        let Some(sql) = statement(b, words.len()).filter(|_| !words.is_empty()) else { return Ok(None) };
        let keyed = b.d1_search().is_some_and(|s| s.key.is_some());
        let rows = match run(ctx, b, &sql, &words).await {
            Ok(rows) => rows,
            Err(e) => {
                ctx.warn(b, "search", &e, "");
                return Err(e);
            }
        };
        let found: Vec<String> = rows
            .iter()
            .map(|r| match r.0.split_first() {
                Some((key, rest)) if keyed => format!("[{}]\n{}", cell(key), line(rest)),
                _ => line(&r.0),
            })
            .collect();
        Ok((!found.is_empty()).then(|| found.join("\n\n")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BlockKind;

    #[test]
    fn the_search_statement_holds_identifiers_and_placeholders_only() {
        let mut b = BlockConfig::new("catalog", BlockKind::D1);
        b.search = Some(serde_json::json!({"table": "products", "columns": ["name", "notes"], "key": "sku"}));
        assert_eq!(
            statement(&b, 2).unwrap(),
            "SELECT \"sku\", \"name\", \"notes\" FROM \"products\" WHERE (\"name\" LIKE ?1 ESCAPE '\\' OR \"notes\" \
             LIKE ?1 ESCAPE '\\') AND (\"name\" LIKE ?2 ESCAPE '\\' OR \"notes\" LIKE ?2 ESCAPE '\\') LIMIT 10"
        );
        assert_eq!(pattern("50%_off\\"), "%50\\%\\_off\\\\%");
        assert_eq!(pattern(&"é".repeat(500)), format!("%{}%", "é".repeat(24)));
        assert_eq!(pattern(&"%".repeat(500)).len(), MAX_PATTERN_BYTES);
        assert_eq!(pattern(&"x".repeat(500)).len(), MAX_PATTERN_BYTES);
    }
}
