//! Full-text search over messages (FTS5, porter unicode61, bm25 ranking), in one session or
//! across all of them. User text is compiled into a safe FTS5 query, never passed through.

use serde::Serialize;

use crate::access::Reach;
use crate::error::Result;
use crate::metadata;
use crate::sql::{Sql, Value};

/// Default number of results.
pub const DEFAULT_LIMIT: i64 = 20;
/// Largest `limit` accepted.
pub const MAX_LIMIT: i64 = 100;

/// One hit. `content` is the indexed text of the message (its text parts joined by a space).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    pub(crate) id: String,
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) created_at: String,
}

/// Compiles user text into an FTS5 query, or `None` when it has nothing to search for.
///
/// - Words separated by white space must all match (in any order, anywhere in the message).
/// - Text in double quotes is a phrase: its words must appear together, in order. An unclosed
///   quote runs to the end of the text.
/// - A word ending in `*` matches every word it begins (`deploy*` finds "deployment").
/// - Everything else is literal: `OR`, `NOT`, `NEAR(`, parentheses, `:` and `^` are ordinary
///   text. Words with no letter or digit are dropped, since the tokenizer ignores them.
/// - Control characters (NUL included) separate words, as the tokenizer treats them: inside an
///   FTS5 string a NUL would end the query text early (`unterminated string`).
pub(crate) fn compile(query: &str) -> Option<String> {
    let cleaned: String = query.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut terms = Vec::new();
    let mut rest = cleaned.as_str();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('"') {
            let (phrase, tail) = after.split_once('"').unwrap_or((after, ""));
            push_term(&mut terms, phrase, Match::Exact);
            rest = tail;
            continue;
        }
        let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
        let word = &rest[..end];
        match word.strip_suffix('*') {
            Some(stem) => push_term(&mut terms, stem.trim_end_matches('*'), Match::Prefix),
            None => push_term(&mut terms, word, Match::Exact),
        }
        rest = rest[end..].trim_start_matches(|c: char| c.is_whitespace());
    }
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// How a query term matches indexed words.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Match {
    /// The word, or the phrase, as written.
    Exact,
    /// Every word that begins with it.
    Prefix,
}

fn push_term(terms: &mut Vec<String>, text: &str, how: Match) {
    if !text.chars().any(char::is_alphanumeric) {
        return;
    }
    let quoted = format!("\"{}\"", text.replace('"', "\"\""));
    terms.push(if how == Match::Prefix { format!("{quoted} *") } else { quoted });
}

/// Searches one session, best match first. The index holds a token for each message's session
/// ([`index`]), asked for beside the words: FTS5 ranks only this session's matches, so the cost
/// follows the session's size, not the agent's.
pub(crate) fn in_session(sql: &dyn Sql, session: &str, query: &str, limit: i64) -> Result<Vec<Hit>> {
    let Some(fts) = compile(query) else { return Ok(Vec::new()) };
    hits(
        sql,
        "SELECT NULL, m.id, m.role, f.content, m.created_at
           FROM messages_fts f JOIN messages m ON m.seq = f.rowid
          WHERE messages_fts MATCH 'session : ' || ? || ' AND content : (' || ? || ')' AND m.session_id = ?
          ORDER BY bm25(messages_fts, 1.0, 0.0), f.rowid LIMIT ?",
        &[format!("\"{}\"", session_token(session)).into(), fts.into(), session.into(), Value::Int(limit)],
    )
}

/// Searches every session of the agent within `reach` whose metadata matches `metadata`, best
/// match first; hits carry their session id. A reach of some sessions asks for their tokens
/// beside the words (as [`in_session`] does for one), and the join keeps to them too. A
/// metadata filter joins the sessions registry.
pub(crate) fn across_sessions(
    sql: &dyn Sql,
    query: &str,
    limit: i64,
    reach: &Reach,
    metadata: &metadata::Filter,
) -> Result<Vec<Hit>> {
    let Some(fts) = compile(query) else { return Ok(Vec::new()) };
    let (conds, meta_params) = metadata.conditions("s.metadata");
    let (join, meta) = match conds.is_empty() {
        true => ("", String::new()),
        false => (" JOIN sessions s ON s.id = m.session_id", format!(" AND {}", conds.join(" AND "))),
    };
    let select = format!(
        "SELECT m.session_id, m.id, m.role, f.content, m.created_at
           FROM messages_fts f JOIN messages m ON m.seq = f.rowid{join}"
    );
    match reach {
        Reach::All => {
            let mut params: Vec<Value> = vec![fts.into()];
            params.extend(meta_params);
            params.push(Value::Int(limit));
            hits(
                sql,
                &format!(
                    "{select} WHERE messages_fts MATCH 'content : (' || ? || ')'{meta}
                      ORDER BY bm25(messages_fts, 1.0, 0.0), f.rowid LIMIT ?"
                ),
                &params,
            )
        }
        Reach::Sessions(list) if list.is_empty() => Ok(Vec::new()),
        Reach::Sessions(list) => {
            let tokens: Vec<String> = list.iter().map(|s| format!("\"{}\"", session_token(s))).collect();
            let marks = vec!["?"; list.len()].join(", ");
            let mut params: Vec<Value> = vec![tokens.join(" OR ").into(), fts.into()];
            params.extend(list.iter().map(|s| Value::from(s.as_str())));
            params.extend(meta_params);
            params.push(Value::Int(limit));
            hits(
                sql,
                &format!(
                    "{select} WHERE messages_fts MATCH 'session : (' || ? || ') AND content : (' || ? || ')'
                        AND m.session_id IN ({marks}){meta}
                      ORDER BY bm25(messages_fts, 1.0, 0.0), f.rowid LIMIT ?"
                ),
                &params,
            )
        }
    }
}

/// Indexes the text of the message `seq` of `session` (nothing for an empty text): its words in
/// the `content` column, and in the `session` column one token naming the session,
/// [`session_token`] (letters and digits only, so the tokenizer keeps it whole).
pub(crate) fn index(sql: &dyn Sql, session: &str, seq: i64, text: &str) -> Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    sql.execute(
        "INSERT INTO messages_fts (rowid, content, session) VALUES (?, ?, ?)",
        &[Value::Int(seq), text.into(), session_token(session).into()],
    )
}

/// The token of `session` in the index: `x` and the upper-case hex of its UTF-8 bytes, as
/// SQLite's `'x' || hex(session_id)` (migration 0008 indexed the messages stored before it so).
pub fn session_token(session: &str) -> String {
    use std::fmt::Write;
    let mut token = String::with_capacity(1 + 2 * session.len());
    token.push('x');
    for b in session.bytes() {
        let _ = write!(token, "{b:02X}");
    }
    token
}

fn hits(sql: &dyn Sql, q: &str, params: &[Value]) -> Result<Vec<Hit>> {
    sql.query(q, params)?
        .iter()
        .map(|r| {
            Ok(Hit {
                session_id: r.opt_text(0)?,
                id: r.text(1)?,
                role: r.text(2)?,
                content: r.text(3)?,
                created_at: r.text(4)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::compile;

    #[test]
    fn words_phrases_and_prefixes() {
        assert_eq!(compile("deploy production").unwrap(), r#""deploy" "production""#);
        assert_eq!(compile(r#""deploy to" prod*"#).unwrap(), r#""deploy to" "prod" *"#);
        assert_eq!(compile(r#"say "hi"#).unwrap(), r#""say" "hi""#);
        assert_eq!(compile("a OR b NEAR(c").unwrap(), r#""a" "OR" "b" "NEAR(c""#);
    }

    #[test]
    fn control_characters_separate_words() {
        assert_eq!(compile("de\u{0}ploy").unwrap(), r#""de" "ploy""#);
        assert_eq!(compile("\"a\u{0}b\"").unwrap(), r#""a b""#);
        assert_eq!(compile("x\u{7}\u{1b}[0m\u{85}y*").unwrap(), r#""x" "[0m" "y" *"#);
        assert_eq!(compile("\u{0}\u{0}"), None);
    }

    #[test]
    fn nothing_to_search() {
        for q in ["", "   ", "*", "\"\"", "( ) ^ :", "\"", "** \"  \""] {
            assert_eq!(compile(q), None, "{q:?}");
        }
    }
}
