//! Full-text search on real SQLite FTS5: word semantics, phrases, prefixes, stemming, ranking,
//! cross-session hits, and hostile input that must never become an FTS syntax error.

use crate::support::{code, ids, Api};
use serde_json::json;

fn seeded() -> Api {
    let api = Api::new();
    api.append("s1", "a", None, "We deploy to production on Friday");
    api.append("s1", "b", None, "Lunch is at noon");
    api.append("s1", "c", None, "Production builds: deploying needs approval; deploy deploy deploy");
    api.append("s2", "x", None, "The production deploy failed on Friday");
    api
}

fn hits(api: &Api, path: &str) -> Vec<String> {
    let r = api.get(path);
    assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
    ids(&r.body_json()["results"])
}

#[test]
fn all_words_must_match_in_any_order() {
    let api = seeded();
    let mut got = hits(&api, "/sessions/s1/search?q=production%20deploy");
    got.sort();
    assert_eq!(got, ["a", "c"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=deploy%20lunch"), Vec::<String>::new());
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
    // Operators are literal words: OR finds the message that contains the word "or".
    assert_eq!(hits(&api, "/sessions/s1/search?q=OR"), ["h"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=NEAR("), ["h"]);
    assert_eq!(hits(&api, "/sessions/s1/search?q=content%3Adeploy"), Vec::<String>::new());
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
#[test]
fn control_characters_in_queries_never_reach_fts5_as_syntax() {
    let api = seeded();
    let mut cfg =
        Api::with_config(json!({"context": [{"label": "kb", "kind": "search"}], "searchableHistory": "history"}));
    cfg.db = api.db;
    let api = cfg;
    for q in ["de%00ploy", "%22de%00ploy%22", "%00", "deploy%1B%5B0m", "deploy%C2%85friday", "deploy%00*"] {
        for path in [format!("/sessions/s1/search?q={q}"), format!("/search?q={q}")] {
            let r = api.get(&path);
            assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        }
    }
    assert_eq!(hits(&api, "/sessions/s1/search?q=production%00friday"), ["a"]);
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
