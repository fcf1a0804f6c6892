//! Blocks read from the operator's D1 database (`kind: "d1"`, `core::context::d1`), natively on
//! SQLite (`support::NativeD1`): the rows of the configured query are the block's text (capped);
//! `search_context` finds the rows whose named columns hold every word, the words bound as
//! parameters (hostile text finds nothing and changes nothing); a database that fails or is late
//! leaves the last text with a warning; only `SESSION_CONFIG` makes one; hostile configs are
//! refused whole.

use serde_json::{json, Value as Json};
use session_agent_core::config::SessionConfig;
use session_agent_core::context::d1::{MAX_ROWS, MAX_TEXT_BYTES};

use crate::support::{code, Api};

const SCHEMA: &str = "CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, notes TEXT, price REAL);
    INSERT INTO products VALUES ('A1', 'Blue kettle', 'steel, 1.5 l', 39.5),
                                ('B2', 'Red kettle', 'enamel', 45),
                                ('C3', 'Tea cup', '100% porcelain_white', NULL);";

fn block(extra: Json) -> Json {
    let mut b = json!({"label": "catalog", "kind": "d1", "binding": "CATALOG", "description": "Products",
        "query": "SELECT name, price FROM products ORDER BY sku",
        "search": {"table": "products", "columns": ["name", "notes"], "key": "sku"}});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

fn api_with(extra: Json) -> Api {
    let api = Api::with_config(json!({"cachedPrompt": false, "context": [block(extra)]}));
    api.d1.bind("CATALOG", SCHEMA);
    api
}

fn api() -> Api {
    api_with(json!({}))
}

fn content(api: &Api) -> String {
    let r = api.get("/sessions/s/context/catalog");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let b = r.body_json();
    assert_eq!(b["kind"], "d1");
    assert_eq!(b["writable"], false);
    b["content"].as_str().unwrap().to_owned()
}

fn search(api: &Api, query: &str) -> String {
    let r = api.post("/sessions/s/tools/search_context", json!({"input": {"label": "catalog", "query": query}}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["output"].as_str().unwrap().to_owned()
}

fn warnings(api: &Api) -> Vec<String> {
    std::mem::take(&mut *api.events.warnings.borrow_mut())
}

#[test]
fn the_rows_of_the_query_are_the_text_in_the_prompt() {
    let api = api();
    assert_eq!(content(&api), "Blue kettle | 39.5\nRed kettle | 45\nTea cup | ");
    let q = api.d1.queries.borrow().last().unwrap().clone();
    assert_eq!(q, json!({"binding": "CATALOG", "sql": "SELECT name, price FROM products ORDER BY sku", "params": []}));
    let prompt = api.get("/sessions/s/prompt").body_json()["prompt"].as_str().unwrap().to_owned();
    assert!(prompt.contains("CATALOG (Products) [searchable]\n"), "{prompt}");
    assert!(prompt.contains("Blue kettle | 39.5"), "{prompt}");
    assert_eq!(api.tool_names("s"), ["search_context", "session_search"]);
    // Without a search: readonly, no search_context.
    let api = api_with(json!({"search": null}));
    let prompt = api.get("/sessions/s/prompt").body_json()["prompt"].as_str().unwrap().to_owned();
    assert!(prompt.contains("CATALOG (Products) [readonly]\n"), "{prompt}");
    assert_eq!(api.tool_names("s"), ["session_search"]);
    assert!(warnings(&api).is_empty());
}

#[test]
fn search_finds_rows_holding_every_word_with_the_words_bound() {
    let api = api();
    assert_eq!(search(&api, "kettle"), "[A1]\nBlue kettle | steel, 1.5 l\n\n[B2]\nRed kettle | enamel");
    assert_eq!(search(&api, "KETTLE enamel"), "[B2]\nRed kettle | enamel");
    assert_eq!(search(&api, "kettle porcelain"), "No results found.");
    assert_eq!(search(&api, "   "), "No results found.");
    let q =
        api.d1.queries.borrow().iter().rev().find(|q| q["params"].as_array().is_some_and(|p| p.len() == 2)).cloned();
    let q = q.unwrap();
    assert_eq!(q["params"], json!(["%kettle%", "%porcelain%"]));
    assert!(!q["sql"].as_str().unwrap().contains("kettle"), "the words are never in the statement: {q}");
    // LIKE's own characters are literal: `%` and `_` match themselves only.
    assert_eq!(search(&api, "100%"), "[C3]\nTea cup | 100% porcelain_white");
    assert_eq!(search(&api, "%"), "[C3]\nTea cup | 100% porcelain_white");
    assert_eq!(search(&api, "_"), "[C3]\nTea cup | 100% porcelain_white");
    // Hostile text finds nothing and changes nothing.
    for hostile in [
        "'; DROP TABLE products; --",
        "\" OR 1=1 --",
        "kettle') OR ('1'='1",
        "?1 ?2 ?3",
        "\u{0} \\ \\%",
        &"x".repeat(10_000),
        &"zq ".repeat(500),
    ] {
        assert_eq!(search(&api, hostile), "No results found.", "{hostile:.40}");
    }
    assert_eq!(content(&api).lines().count(), 3, "the table is whole");
    let last = api.d1.queries.borrow().iter().rev().nth(1).unwrap().clone();
    assert_eq!(last["params"].as_array().unwrap().len(), 8, "at most 8 words: {last}");
    // Without a key column: the columns alone.
    let api = api_with(json!({"search": {"table": "products", "columns": ["name"]}}));
    assert_eq!(search(&api, "cup"), "Tea cup");
}

#[test]
fn the_text_is_capped_in_rows_and_bytes() {
    let api = api_with(json!({"query": "SELECT sku, name FROM products ORDER BY sku", "search": null}));
    let many: Vec<String> = (0..150).map(|i| format!("('k{i:03}', 'item {i}', '', 1)")).collect();
    api.d1.bind("CATALOG", &format!("{SCHEMA} INSERT INTO products VALUES {};", many.join(", ")));
    assert_eq!(content(&api).lines().count(), MAX_ROWS);
    let api = api_with(json!({"query": "SELECT notes FROM products", "search": null}));
    let big: Vec<String> = (0..20).map(|i| format!("('k{i}', 'n', '{}', 1)", "z".repeat(20_000))).collect();
    api.d1.bind("CATALOG", &format!("{SCHEMA} INSERT INTO products VALUES {};", big.join(", ")));
    let text = content(&api);
    assert!(text.len() <= MAX_TEXT_BYTES && text.len() > MAX_TEXT_BYTES - 20_001, "{}", text.len());
}

#[test]
fn a_failing_or_late_database_leaves_the_last_text_with_a_warning() {
    let api = api();
    assert_eq!(content(&api), "Blue kettle | 39.5\nRed kettle | 45\nTea cup | ");
    api.d1.down.set(true);
    assert_eq!(content(&api), "Blue kettle | 39.5\nRed kettle | 45\nTea cup | ");
    let w = warnings(&api);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("d1 block \"catalog\" get: the block's database could not be read"), "{w:?}");
    assert!(w[0].ends_with("; the last text read is shown"), "{w:?}");
    assert_eq!(search(&api, "kettle"), "Error: the block's database could not be read");
    assert_eq!(warnings(&api).len(), 1);
    api.d1.down.set(false);
    api.d1.hangs.set(true);
    assert_eq!(content(&api), "Blue kettle | 39.5\nRed kettle | 45\nTea cup | ");
    assert!(warnings(&api)[0].contains("did not answer within 5000 ms"));
    assert_eq!(search(&api, "kettle"), "Error: the block's database did not answer within 5000 ms");
    // A binding the Worker does not have, a query the database refuses: nothing read yet.
    let api = Api::with_config(json!({"context": [block(json!({"binding": "NOPE"}))]}));
    assert_eq!(content(&api), "");
    let w = warnings(&api);
    assert!(w[0].contains("no D1 database is bound as NOPE") && w[0].ends_with("; no text was read yet"), "{w:?}");
    let api = api_with(json!({"query": "SELECT nothing FROM nowhere"}));
    assert_eq!(content(&api), "");
    assert_eq!(warnings(&api).len(), 1);
}

#[test]
fn a_block_added_at_run_time_cannot_read_a_database() {
    let api = api();
    for body in [
        json!({"label": "x", "kind": "d1", "binding": "CATALOG", "query": "SELECT * FROM products"}),
        json!({"label": "x", "kind": "readonly", "content": "c", "binding": "CATALOG"}),
        json!({"label": "x", "kind": "readonly", "content": "c", "query": "SELECT 1"}),
        json!({"label": "x", "kind": "search", "search": {"table": "products", "columns": ["name"]}}),
    ] {
        let r = api.post("/sessions/s/context", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(code(&r), "invalid_request");
    }
    assert!(api.d1.queries.borrow().is_empty());
}

#[test]
fn hostile_d1_configs_are_refused_whole() {
    let cfg = |extra: Json| json!({"context": [block(extra)]}).to_string();
    assert!(SessionConfig::from_json(&cfg(json!({}))).is_ok());
    assert!(SessionConfig::from_json(&cfg(
        json!({"query": "  with x as (select 1) select * from x", "timeoutMs": 100,
        "search": {"table": "_t1", "columns": ["a", "b", "c", "d", "e", "f", "g", "h"]}})
    ))
    .is_ok());
    for extra in [
        json!({"binding": null}),
        json!({"binding": ""}),
        json!({"binding": "9DB"}),
        json!({"binding": "DB-1"}),
        json!({"binding": "x".repeat(200)}),
        json!({"query": null}),
        json!({"query": ""}),
        json!({"query": "DELETE FROM products"}),
        json!({"query": "DROP TABLE products"}),
        json!({"query": "selectx 1"}),
        json!({"query": format!("SELECT '{}'", "a".repeat(5000))}),
        json!({"query": 1}),
        json!({"search": {"table": "products; DROP TABLE products", "columns": ["name"]}}),
        json!({"search": {"table": "products", "columns": ["name\" OR 1=1 --"]}}),
        json!({"search": {"table": "products", "columns": []}}),
        json!({"search": {"table": "products", "columns": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}}),
        json!({"search": {"table": "products", "columns": ["name", "name"]}}),
        json!({"search": {"table": "products", "columns": ["name"], "key": "1sku"}}),
        json!({"search": {"table": "", "columns": ["name"]}}),
        json!({"search": {"table": "products", "columns": ["name"], "extra": 1}}),
        json!({"search": {"table": "products"}}),
        json!({"search": "name"}),
        json!({"timeoutMs": 0}),
        json!({"url": "https://x.example/"}),
        json!({"ops": ["search"]}),
        json!({"content": "c"}),
        json!({"maxTokens": 5}),
    ] {
        let c = cfg(extra.clone());
        assert!(SessionConfig::from_json(&c).is_err(), "accepted: {c}");
    }
}
