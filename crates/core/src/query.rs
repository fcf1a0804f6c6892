//! Plain-language queries: user text compiled into the terms of a safe FTS5 query, for every
//! search (messages, search-block entries, memories).
//!
//! The rule (docs/REFERENCE.md#d-search-syntax):
//!
//! - A text may be a question in plain words: its words are **ranked**, any of them may match
//!   (`what car does my sister drive?` finds "my sister drives a red Volvo"). Words are what is
//!   left between white space and other characters that are neither letters nor digits
//!   (`sister's` is `sister` and `s`); FTS5's porter stemmer matches their forms.
//! - English stop words (`what`, `does`, `my`, …) are dropped, unless nothing else is left to
//!   search for.
//! - Text in double quotes is a **phrase** that must appear: its words together, in order. Every
//!   phrase of a query must appear (an unclosed quote runs to the end of the text); the phrases
//!   and the words beside them rank what has them.
//! - A word ending in `*` is a **prefix**, ranked like a word (`deploy*` matches "deployment").
//! - Nothing else is syntax: `OR`, `NOT`, `NEAR(`, parentheses, `:`, `^`, `-`, `+` are words or
//!   separators. Every term reaches FTS5 quoted (invariant 7), and control characters (NUL
//!   included) separate words: inside an FTS5 string a NUL would end the query text early.
//! - At most [`MAX_TERMS`] terms count: the phrases first, then the words, each in the order
//!   written; the rest of a longer text is ignored.

use crate::sort;

/// Most terms (ranked words and prefixes, and phrases) a query keeps.
pub const MAX_TERMS: usize = 12;

/// English stop words (NLTK's list without its contractions, whose pieces are in it, plus
/// `could` and `would`), one space apart: one string, not a slice of `&str` (a table of 180
/// pointers and lengths in the wasm). Compared with the lower-case word ([`is_stopword`]).
const STOPWORDS: &str = "a about above after again against ain all am an and any are aren as at be because been \
    before being below between both but by can could couldn d did didn do does doesn doing don \
    down during each few for from further had hadn has hasn have haven having he her here hers \
    herself him himself his how i if in into is isn it its itself just ll m ma me mightn more \
    most mustn my myself needn no nor not now o of off on once only or other our ours ourselves \
    out over own re s same shan she should shouldn so some such t than that the their theirs \
    them themselves then there these they this those through to too under until up ve very was \
    wasn we were weren what when where which while who whom why will with won would wouldn y \
    you your yours yourself yourselves";

/// Whether `word` (lower case) is an English stop word: a binary search of the list, sorted
/// once (a scan of the text was a third of a memory recall's CPU: every word of every candidate
/// is asked).
pub(crate) fn is_stopword(word: &str) -> bool {
    static SORTED: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let sorted = SORTED.get_or_init(|| {
        let mut list: Vec<&str> = STOPWORDS.split(' ').collect();
        sort::ascending(&mut list);
        list
    });
    sorted.binary_search(&word).is_ok()
}

/// What a term of a query matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TermKind {
    /// A word, in any of its porter forms.
    Word,
    /// Every word that begins with it.
    Prefix,
    /// Its words together, in order.
    Phrase,
}

/// One term: what the user wrote (control characters made spaces) and how it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Term {
    pub(crate) text: String,
    pub(crate) kind: TermKind,
}

impl Term {
    /// The term in FTS5 syntax: a quoted string (quotes doubled inside), `*` after a prefix.
    pub(crate) fn fts(&self) -> String {
        let quoted = format!("\"{}\"", self.text.replace('"', "\"\""));
        match self.kind {
            TermKind::Prefix => format!("{quoted} *"),
            TermKind::Word | TermKind::Phrase => quoted,
        }
    }

    /// The same text as a prefix: what a word found nowhere is looked up as in memory recall.
    pub(crate) fn as_prefix(&self) -> Term {
        Term { text: self.text.clone(), kind: TermKind::Prefix }
    }
}

/// A compiled query: the terms that rank (the words and prefixes, then the phrases), and the
/// phrases every match must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub(crate) ranked: Vec<Term>,
    pub(crate) required: Vec<Term>,
}

impl Query {
    /// The query as one FTS5 expression: the required phrases and any ranked term,
    /// `"red volvo" AND ("sister" OR "drive")`. What the query means (a search asks FTS5 for it
    /// in bounded pieces, `core::rank`), and the key its answers are kept under: texts that
    /// search the same share it.
    pub fn fts(&self) -> String {
        let any = self.ranked.iter().map(Term::fts).collect::<Vec<_>>().join(" OR ");
        let mut all: Vec<String> = self.required.iter().map(Term::fts).collect();
        if self.ranked.len() > self.required.len() {
            all.push(if all.is_empty() { any } else { format!("({any})") });
        }
        all.join(" AND ")
    }

    /// The query without the ranked words in `stop` (lower case), unless nothing would be left
    /// to rank: memory recall drops `user` too, the subject of every memory.
    pub(crate) fn without(mut self, stop: &[&str]) -> Query {
        let kept = content(&self.ranked, &|w| stop.contains(&w));
        if !kept.is_empty() {
            self.ranked = kept;
        }
        self
    }
}

/// Compiles user text into a [`Query`], or `None` when it has nothing to search for (blank, or
/// only characters that are neither letters nor digits).
pub fn compile(text: &str) -> Option<Query> {
    let cleaned: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut words: Vec<Term> = Vec::new();
    let mut phrases: Vec<Term> = Vec::new();
    let mut rest = cleaned.as_str();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('"') {
            let (phrase, tail) = after.split_once('"').unwrap_or((after, ""));
            push(&mut phrases, phrase, TermKind::Phrase);
            rest = tail;
            continue;
        }
        let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
        let chunk = &rest[..end];
        match chunk.strip_suffix('*') {
            Some(stem) => push(&mut words, stem.trim_end_matches('*'), TermKind::Prefix),
            None => {
                for word in chunk.split(|c: char| !c.is_alphanumeric()) {
                    push(&mut words, word, TermKind::Word);
                }
            }
        }
        rest = rest[end..].trim_start_matches(char::is_whitespace);
    }
    let content = content(&words, &is_stopword);
    // Stop words count only when nothing else would: not beside a phrase or another word.
    if !content.is_empty() || !phrases.is_empty() {
        words = content;
    }
    phrases.truncate(MAX_TERMS);
    words.truncate(MAX_TERMS - phrases.len());
    if words.is_empty() && phrases.is_empty() {
        return None;
    }
    // The phrases rank too: a row with a phrase and none of the words is still found.
    words.extend(phrases.iter().cloned());
    Some(Query { ranked: words, required: phrases })
}

/// The `terms` but the words `stop` says are stop words (given in lower case).
fn content(terms: &[Term], stop: &dyn Fn(&str) -> bool) -> Vec<Term> {
    terms.iter().filter(|t| t.kind != TermKind::Word || !stop(&t.text.to_lowercase())).cloned().collect()
}

/// Adds the term `text` of `kind` to `terms`, unless it has no letter or digit (the tokenizer
/// would find nothing in it) or `terms` has it already (letter case aside).
fn push(terms: &mut Vec<Term>, text: &str, kind: TermKind) {
    if !text.chars().any(char::is_alphanumeric) {
        return;
    }
    let lower = text.to_lowercase();
    if terms.iter().any(|t| t.kind == kind && t.text.to_lowercase() == lower) {
        return;
    }
    terms.push(Term { text: text.to_owned(), kind });
}

#[cfg(test)]
mod tests {
    use super::{compile, is_stopword, STOPWORDS};

    #[test]
    fn every_listed_word_and_no_other_is_a_stopword() {
        for w in STOPWORDS.split(' ') {
            assert!(is_stopword(w), "{w}");
            assert!(!is_stopword(&format!("{w}x")), "{w}x");
        }
        for w in ["", "car", "sister", "zz", "A", "The"] {
            assert!(!is_stopword(w), "{w}");
        }
    }

    fn fts(q: &str) -> Option<String> {
        compile(q).map(|q| q.fts())
    }

    #[test]
    fn questions_keep_their_content_words() {
        assert_eq!(
            fts("what car does my sister drive these days?").unwrap(),
            r#""car" OR "sister" OR "drive" OR "days""#
        );
        assert_eq!(fts("Where does the user live now?").unwrap(), r#""user" OR "live""#);
        assert_eq!(fts("my sister's car").unwrap(), r#""sister" OR "car""#);
        assert_eq!(fts("what is it").unwrap(), r#""what" OR "is" OR "it""#);
        assert_eq!(
            fts("what's the wife’s plan? I'm sure you don't know").unwrap(),
            r#""wife" OR "plan" OR "sure" OR "know""#
        );
        assert_eq!(fts("Pizza pizza PIZZA").unwrap(), r#""Pizza""#);
    }

    #[test]
    fn phrases_are_required_and_prefixes_rank() {
        assert_eq!(fts(r#""deploy to" prod*"#).unwrap(), r#""deploy to" AND ("prod" * OR "deploy to")"#);
        assert_eq!(fts(r#""red volvo" the sister"#).unwrap(), r#""red volvo" AND ("sister" OR "red volvo")"#);
        assert_eq!(fts(r#""red volvo" "my sister""#).unwrap(), r#""red volvo" AND "my sister""#);
        assert_eq!(fts(r#"say "hi"#).unwrap(), r#""hi" AND ("say" OR "hi")"#);
        assert_eq!(fts(r#"the "a""#).unwrap(), r#""a""#);
    }

    #[test]
    fn operators_are_words() {
        assert_eq!(fts("a OR b NEAR(c").unwrap(), r#""b" OR "NEAR" OR "c""#);
        assert_eq!(fts("content:deploy -x +w ^z").unwrap(), r#""content" OR "deploy" OR "x" OR "w" OR "z""#);
        assert_eq!(fts(r#"a"b"#).unwrap(), r#""b""#);
    }

    #[test]
    fn control_characters_separate_words() {
        assert_eq!(fts("de\u{0}ploy").unwrap(), r#""de" OR "ploy""#);
        assert_eq!(fts("\"a\u{0}b\"").unwrap(), r#""a b""#);
        assert_eq!(fts("x\u{7}\u{1b}[0m\u{85}y*").unwrap(), r#""x" OR "0m" OR "y" *"#);
        assert_eq!(fts("\u{0}\u{0}"), None);
    }

    #[test]
    fn nothing_to_search() {
        for q in ["", "   ", "*", "\"\"", "( ) ^ :", "\"", "** \"  \"", "?!"] {
            assert_eq!(fts(q), None, "{q:?}");
        }
    }

    #[test]
    fn long_texts_keep_their_first_terms() {
        let q = compile(&"word ".repeat(5000)).unwrap();
        assert_eq!(q.ranked.len(), 1);
        let many: String = (0..2000).map(|i| format!("w{i} \"p{i}\" ")).collect();
        let q = compile(&many).unwrap();
        assert_eq!((q.ranked.len(), q.required.len()), (super::MAX_TERMS, super::MAX_TERMS), "phrases first");
        let few: String = (0..2000).map(|i| format!("w{i} ")).collect::<String>() + "\"p\"";
        let q = compile(&few).unwrap();
        assert_eq!((q.ranked.len(), q.required.len()), (super::MAX_TERMS, 1));
    }
}
