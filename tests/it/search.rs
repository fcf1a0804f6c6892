//! Full-text search on real SQLite FTS5: plain-language queries (any word ranks, stop words,
//! apostrophes), phrases, prefixes, stemming, ranking (FTS5's bm25, and the bounded plan over a
//! table bigger than its candidate cap), cross-session hits, and hostile input that must never
//! become an FTS syntax error.

use crate::support::{code, hits, Api};
use serde_json::json;

fn seeded() -> Api {
    let api = Api::new();
    api.append("s1", "a", None, "We deploy to production on Friday");
    api.append("s1", "b", None, "Lunch is at noon");
    api.append("s1", "c", None, "Production builds: deploying needs approval; deploy deploy deploy");
    api.append("s2", "x", None, "The production deploy failed on Friday");
    api
}

#[test]
fn any_word_matches_and_more_of_them_rank_higher() {
    let api = seeded();
    let mut got = hits(&api, "/sessions/s1/search?q=production%20deploy");
    got.sort();
    assert_eq!(got, ["a", "c"]);
    let mut got = hits(&api, "/sessions/s1/search?q=deploy%20lunch");
    got.sort();
    assert_eq!(got, ["a", "b", "c"], "any word of the query finds a message");
    // "friday" is in "a" only: it ranks above "c", which has "deploy" more often.
    assert_eq!(hits(&api, "/sessions/s1/search?q=deploy%20friday")[0], "a");
    assert_eq!(hits(&api, "/sessions/s1/search?q=zzz%20lunch"), ["b"]);
}

#[test]
fn questions_in_plain_words() {
    let api = seeded();
    api.append("s1", "w", None, "My wife's birthday is on the 3rd of May");
    api.append("s1", "t", None, "What is it that you want? It is what it is.");
    // Stop words ("when", "is", "my", "the") are dropped: they would find "t" too.
    assert_eq!(hits(&api, "/sessions/s1/search?q=When%20is%20my%20wife%27s%20birthday%3F"), ["w"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=what%20time%20is%20lunch%3F"), ["b"]);
    // A possessive or a contraction splits as the tokenizer splits it: "wife's" is "wife".
    assert_eq!(hits(&api, "/sessions/s1/search?q=wife"), ["w"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=wife%E2%80%99s"), ["w"], "a typographic apostrophe too");
    assert_eq!(hits(&api, "/search?q=what%27s%20the%20wife%27s%20plan%3F"), ["w"], "what's is a stop word");
    assert_eq!(hits(&api, "/search?q=don%27t%20I%27m%20lunch"), ["b"]);
    // Only stop words: they are searched for rather than nothing.
    assert_eq!(hits(&api, "/sessions/s1/search?q=what%20is%20it")[0], "t");
    // A phrase must appear; the words beside it rank what has it.
    assert_eq!(hits(&api, "/sessions/s1/search?q=%22lunch%22%20deploy"), ["b"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=%22deploy%22%20friday"), ["a", "c"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=friday%20%22deploy%20to%22"), ["a"]);
}

/// Over more rows than the candidate cap the bounded plan still finds what FTS5's bm25 of the
/// whole OR query ranks first: a row with all the words, older than every word's newest
/// matches, and the rows of a rare word.
#[test]
fn ranking_over_a_big_table_finds_what_bm25_finds() {
    let api = Api::new();
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    let mut messages = Vec::new();
    for i in 0..1500usize {
        let text = match i {
            40 => "alpha bravo charlie together".to_owned(),
            700 => "a zebra crossing".to_owned(),
            // Two words three apart: no filler row has two of alpha, bravo and charlie.
            _ => format!("{} {} filler{}", words[i % 8], words[(i + 3) % 8], "x".repeat(i % 4)),
        };
        messages.push(json!({"id": format!("m{i}"), "role": "user", "parts": [{"type": "text", "text": text}]}));
    }
    for chunk in messages.chunks(500) {
        assert_eq!(api.post("/sessions/s/messages/batch", json!({ "messages": chunk })).status, 201);
    }
    let top = hits(&api, "/search?q=alpha%20bravo%20charlie&limit=5");
    assert_eq!(top[0], "m40", "{top:?}");
    assert_eq!(hits(&api, "/sessions/s/search?q=alpha%20bravo%20charlie&limit=5")[0], "m40");
    assert_eq!(hits(&api, "/search?q=zebra%20alpha&limit=3")[0], "m700");
    // The rows of the rare word come first, as FTS5's bm25 ranks them.
    let exact: Vec<i64> = {
        use session_agent_core::sql::{Sql, Value};
        let q = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?
                  ORDER BY bm25(messages_fts, 1.0, 0.0), rowid DESC LIMIT 10";
        let rows = api.db.query(q, &[Value::from(r#"content : ("zebra" OR "golf")"#)]).unwrap();
        rows.iter().map(|r| r.int(0).unwrap()).collect()
    };
    let got = hits(&api, "/search?q=zebra%20golf&limit=10");
    assert_eq!(got.len(), 10);
    assert_eq!(got[0], "m700");
    let seqs: Vec<i64> = got
        .iter()
        .map(|id| api.count(&format!("SELECT seq FROM messages WHERE id = '{id}' AND session_id = 's'")))
        .collect();
    assert_eq!(seqs[0], exact[0]);
}

#[test]
fn quotes_ask_for_a_phrase() {
    let api = seeded();
    assert_eq!(hits(&api, "/sessions/s1/search?q=%22deploy%20to%20production%22"), ["a"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=%22deploy%20production%22"), Vec::<String>::new());
}

#[test]
fn porter_stemming_and_prefixes() {
    let api = seeded();
    let mut got = hits(&api, "/sessions/s1/search?q=deployed");
    got.sort();
    assert_eq!(got, ["a", "c"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=lun*"), ["b"]);
}

#[test]
fn bm25_ranks_the_denser_match_first() {
    let api = seeded();
    assert_eq!(hits(&api, "/sessions/s1/search?q=deploy")[0], "c");
}

#[test]
fn cross_session_search_names_the_session() {
    let api = seeded();
    let r = api.get("/search?q=friday").body_json();
    let mut found: Vec<(String, String)> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["sessionId"].as_str().unwrap().into(), h["id"].as_str().unwrap().into()))
        .collect();
    found.sort();
    assert_eq!(found, [("s1".to_string(), "a".to_string()), ("s2".into(), "x".into())]);
    let h = &r["results"][0];
    assert!(h["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(h["content"].as_str().unwrap().contains("Friday"));
    // Per-session results have no sessionId.
    let r = api.get("/sessions/s2/search?q=friday").body_json();
    assert_eq!(r["results"][0].get("sessionId"), None);
    assert_eq!(r["results"][0]["role"], "user");
}

#[test]
fn limits_are_checked() {
    let api = seeded();
    assert_eq!(hits(&api, "/search?q=deploy&limit=1").len(), 1);
    for bad in ["0", "101", "x", "-1"] {
        let r = api.get(&format!("/search?q=deploy&limit={bad}"));
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{bad}");
    }
    assert_eq!(api.get("/search").status, 400);
    assert_eq!(api.get("/sessions/s1/search").status, 400);
}

// invariant 7 (docs/ARCHITECTURE.md)
#[test]
fn hostile_queries_never_fail() {
    let api = seeded();
    api.append("s1", "h", None, r#"He said "NEAR(" and OR AND NOT * ^ : -x {col} (( ))"#);
    let nasty = [
        "\"",
        "\"\"",
        "\"\"\"",
        "*",
        "**",
        "a*b",
        "NEAR(",
        "NEAR(a b",
        "OR",
        "AND",
        "NOT",
        "a OR",
        "(",
        ")",
        "((a",
        "a)",
        "^",
        "col:foo",
        "content:deploy",
        "-deploy",
        "+deploy",
        "{content}: x",
        "deploy\"",
        "\"deploy",
        "'",
        "';DROP TABLE messages;--",
        "\u{0}",
        "\\",
        "%",
        "_",
        "NEAR",
        "*deploy",
        "deploy **",
        "\u{1F600}",
        "日本語",
        "ǅ",
        "a\u{301}",
        "\t\n",
        "NEAR(\"x\" \"y\", 2)",
    ];
    for q in nasty {
        let enc: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
        for path in [format!("/sessions/s1/search?q={enc}"), format!("/search?q={enc}")] {
            let r = api.get(&path);
            assert_eq!(r.status, 200, "{q:?}: {}", String::from_utf8_lossy(&r.body));
            assert!(r.body_json()["results"].is_array());
        }
    }
    // Operators are literal words: OR finds the message that contains the word "or" (a stop
    // word, searched for when nothing else is left), and `content:` is no column filter.
    assert_eq!(hits(&api, "/sessions/s1/search?q=OR"), ["h"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=NEAR("), ["h"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=content%3Azzz"), Vec::<String>::new());
    assert_eq!(hits(&api, "/sessions/s1/search?q=content%3Adeploy")[0], "c");
    assert_eq!(api.get("/search?q=%20%20").body_json(), json!({"results": []}));
}

#[test]
fn only_text_parts_are_indexed() {
    let api = Api::new();
    let m = json!({"id":"t","role":"assistant","parts":[
        {"type":"reasoning","text":"hidden thoughts"},
        {"type":"dynamic-tool","toolName":"lookup","toolCallId":"c1","state":"output-available","input":{"q":"secret"},"output":"classified"},
        {"type":"text","text":"visible words"}]});
    assert_eq!(api.post("/sessions/s/messages", json!({"message": m})).status, 201);
    assert_eq!(hits(&api, "/sessions/s/search?q=visible"), ["t"]);
    for q in ["hidden", "secret", "classified", "lookup"] {
        assert_eq!(hits(&api, &format!("/sessions/s/search?q={q}")), Vec::<String>::new(), "{q}");
    }
}

/// A NUL or any other control character in a query is a word separator, never FTS5 syntax:
/// both search routes, `session_search` and `search_context` answer normally.
// invariant 7 (docs/ARCHITECTURE.md)
#[test]
fn control_characters_in_queries_never_reach_fts5_as_syntax() {
    let api = seeded();
    let mut cfg =
        Api::with_config(json!({"context": [{"label": "kb", "kind": "search"}], "searchableHistory": "history"}));
    cfg.db = api.db;
    let api = cfg.reopen();
    for q in ["de%00ploy", "%22de%00ploy%22", "%00", "deploy%1B%5B0m", "deploy%C2%85friday", "deploy%00*"] {
        for path in [format!("/sessions/s1/search?q={q}"), format!("/search?q={q}")] {
            let r = api.get(&path);
            assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        }
    }
    assert_eq!(hits(&api, "/sessions/s1/search?q=production%00friday")[0], "a");
    api.post("/sessions/s1/tools/set_context", json!({"input": {"label": "kb", "content": "deploy checklist"}}));
    for (tool, input) in [
        ("session_search", json!({"query": "de\u{0}ploy"})),
        ("search_context", json!({"label": "kb", "query": "\u{0}deploy\u{0}"})),
    ] {
        let r = api.post(&format!("/sessions/s1/tools/{tool}"), json!({ "input": input }));
        assert_eq!(r.status, 200, "{tool}: {}", String::from_utf8_lossy(&r.body));
        let out = r.body_json()["output"].as_str().unwrap().to_owned();
        assert!(!out.contains("sql") && !out.starts_with("Error"), "{tool}: {out}");
    }
}
