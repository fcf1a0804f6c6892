//! Blocks kept by the operator's own service (`kind: "http"`, `core::context::http`), its calls
//! answered by the scripted service of `support::Model` (`SERVICE`): the text in the prompt, the
//! tools (`search_context`, `set_context`, `load_context`) reaching it with the secret's header,
//! every call bounded by `timeoutMs` and the answer by its cap; a service that fails, is late or
//! answers something unusable leaves the last text read in the prompt with a warning, never a
//! failed request or turn; only `SESSION_CONFIG` makes one (a block added at run time cannot);
//! hostile configs are refused whole.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{json, Value as Json};
use session_agent_core::config::SessionConfig;
use session_agent_core::context::http::MAX_ANSWER_BYTES;
use session_agent_core::error::Error;
use session_agent_core::error::Result as CoreResult;
use session_agent_core::llm::HttpResponse;

use crate::support::{code, completion, msg, Api, Rng, SERVICE};

/// The http block `crm` with `ops`, its secret `CRM_TOKEN` set to `s3cret`.
fn api_with(ops: Json, extra: Json) -> Api {
    let mut block = json!({"label": "crm", "kind": "http", "url": format!("{SERVICE}crm"), "secret": "CRM_TOKEN",
        "timeoutMs": 1500, "ops": ops, "description": "Customer record"});
    for (k, v) in extra.as_object().unwrap() {
        block[k] = v.clone();
    }
    let mut api = Api::with_config(json!({"cachedPrompt": false, "context": [block]}));
    api.secrets.insert("CRM_TOKEN".into(), "s3cret".into());
    api.reopen()
}

fn api() -> Api {
    api_with(json!(["search", "set", "load"]), json!({}))
}

/// A service whose `get` answers the text in `state`, whose `set` replaces it (answering the new
/// text), whose `search` finds `results` and whose `load` knows the key `pricing`.
fn stateful(api: &Api, state: Rc<RefCell<String>>) {
    serve(
        api,
        Box::new(move |body: &Json| {
            let answer = match body["op"].as_str().unwrap() {
                "get" => json!({"content": state.borrow().clone()}),
                "set" => {
                    let c = body["content"].as_str().unwrap();
                    let new =
                        if body["action"] == "append" { format!("{}\n{c}", state.borrow()) } else { c.to_owned() };
                    *state.borrow_mut() = new.clone();
                    json!({"content": new})
                }
                "search" => json!({"results": [
                {"key": "acme", "content": format!("ACME matches {}", body["query"].as_str().unwrap())},
                {"content": "a result without a key"}]}),
                "load" if body["key"] == "pricing" => json!({"content": "Pricing: 10 EUR a seat."}),
                "load" => json!({"content": null}),
                op => panic!("unexpected op {op}"),
            };
            Some(Ok(HttpResponse { status: 200, body: answer.to_string(), headers: Vec::new() }))
        }),
    );
}

/// The service answers every call with `status` and `body`.
fn answering(api: &Api, status: u16, body: impl Into<String>) {
    let body = body.into();
    serve(api, Box::new(move |_: &Json| Some(Ok(HttpResponse { status, body: body.clone(), headers: Vec::new() }))));
}

fn tool(api: &Api, name: &str, input: Json) -> String {
    let r = api.post(&format!("/sessions/s/tools/{name}"), json!({ "input": input }));
    assert_eq!(r.status, 200, "{name}: {}", String::from_utf8_lossy(&r.body));
    r.body_json()["output"].as_str().unwrap().to_owned()
}

fn block(api: &Api) -> Json {
    let r = api.get("/sessions/s/context/crm");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

/// The warnings logged since the last call, and forgets them.
fn warnings(api: &Api) -> Vec<String> {
    std::mem::take(&mut *api.events.warnings.borrow_mut())
}

/// How the scripted service answers a call's body (`None`: no answer ever, a hung service).
type Service = Box<dyn Fn(&Json) -> Option<CoreResult<HttpResponse>>>;

/// Makes `service` the operator's service of http blocks (at [`SERVICE`]), in place of any other.
fn serve(api: &Api, service: Service) {
    api.model.serve(SERVICE, move |req| service(&serde_json::from_str(&req.body).unwrap_or(Json::Null)));
}

/// The calls to the service since the last call, `{url, authorization, timeoutMs, body}` each,
/// and forgets them.
fn calls(api: &Api) -> Vec<Json> {
    let sent = std::mem::take(&mut *api.model.peer_requests.borrow_mut());
    sent.iter()
        .filter(|r| r.url.starts_with(SERVICE))
        .map(|r| {
            let authorization = r.headers.iter().find(|(k, _)| k == "authorization").map(|(_, v)| v.clone());
            let body: Json = serde_json::from_str(&r.body).unwrap_or(Json::Null);
            json!({"url": r.url, "authorization": authorization, "timeoutMs": r.timeout_ms, "body": body})
        })
        .collect()
}

#[test]
fn the_text_comes_from_the_service_with_the_secret_and_the_documented_request() {
    let api = api();
    stateful(&api, Rc::new(RefCell::new("Alice, gold customer since 2019".into())));
    let b = block(&api);
    assert_eq!(b["content"], "Alice, gold customer since 2019");
    assert_eq!(b["kind"], "http");
    assert_eq!(b["writable"], true);
    let c = calls(&api);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["url"], format!("{SERVICE}crm"));
    assert_eq!(c[0]["authorization"], "Bearer s3cret");
    assert_eq!(c[0]["timeoutMs"], 2500, "the transport's backstop: a second after the call's own bound");
    assert_eq!(c[0]["body"], json!({"op": "get", "label": "crm", "agent": "alice", "sessionId": "s"}));
    let prompt = api.get("/sessions/s/prompt").body_json()["prompt"].as_str().unwrap().to_owned();
    assert!(prompt.contains("CRM (Customer record) [searchable]\n"), "{prompt}");
    assert!(prompt.contains("Alice, gold customer since 2019"), "{prompt}");
    assert!(warnings(&api).is_empty());
}

#[test]
fn the_tags_and_tools_follow_the_ops() {
    let tag = |ops: Json| {
        let api = api_with(ops, json!({}));
        answering(&api, 200, r#"{"content": "x"}"#);
        let prompt = api.get("/sessions/s/prompt").body_json()["prompt"].as_str().unwrap().to_owned();
        let tools = api.tool_names("s");
        (prompt.lines().nth(1).unwrap().to_owned(), tools)
    };
    let (t, tools) = tag(json!([]));
    assert_eq!(t, "CRM (Customer record) [readonly]");
    assert_eq!(tools, ["session_search"]);
    let (t, tools) = tag(json!(["set"]));
    assert_eq!(t, "CRM (Customer record) [writable]");
    assert_eq!(tools, ["set_context", "session_search"]);
    let (t, tools) = tag(json!(["load"]));
    assert_eq!(t, "CRM (Customer record) [loadable]");
    assert_eq!(tools, ["load_context", "unload_context", "session_search"]);
    let (t, tools) = tag(json!(["search"]));
    assert_eq!(t, "CRM (Customer record) [searchable]");
    assert_eq!(tools, ["search_context", "session_search"]);
    let api = api();
    let listed = api.get("/sessions/s/tools").body_json();
    let set = listed["tools"].as_array().unwrap().iter().find(|t| t["name"] == "set_context").unwrap().clone();
    assert!(
        set["description"]
            .as_str()
            .unwrap()
            .contains("- \"crm\" (writable, kept by the operator's service): Customer record"),
        "{set}"
    );
}

#[test]
fn search_set_and_load_reach_the_service_with_the_secret() {
    let api = api();
    let state = Rc::new(RefCell::new("start".to_owned()));
    stateful(&api, state.clone());
    let out = tool(&api, "search_context", json!({"label": "crm", "query": "acme deal"}));
    assert_eq!(out, "[acme]\nACME matches acme deal\n\na result without a key");
    let c = calls(&api);
    assert_eq!(c[0]["authorization"], "Bearer s3cret");
    assert_eq!(
        c[0]["body"],
        json!({"op": "search", "label": "crm", "agent": "alice", "sessionId": "s", "query": "acme deal"})
    );

    let out = tool(
        &api,
        "set_context",
        json!({"label": "crm", "content": "prefers email", "action": "append",
        "metadata": {"title": "contact"}}),
    );
    assert_eq!(out, "Written to crm.");
    assert_eq!(*state.borrow(), "start\nprefers email");
    let c = calls(&api);
    assert_eq!(
        c[0]["body"],
        json!({"op": "set", "label": "crm", "agent": "alice", "sessionId": "s", "content": "prefers email",
            "action": "append", "metadata": {"title": "contact"}})
    );
    assert_eq!(c[0]["authorization"], "Bearer s3cret");
    tool(&api, "set_context", json!({"label": "crm", "content": "only this"}));
    assert_eq!(calls(&api)[0]["body"]["action"], "replace");

    let out = tool(&api, "load_context", json!({"label": "crm", "key": "pricing"}));
    assert_eq!(out, "Pricing: 10 EUR a seat.");
    assert_eq!(calls(&api)[0]["body"]["key"], "pricing");
    assert_eq!(tool(&api, "load_context", json!({"label": "crm", "key": "nope"})), "Not found: nope");
    assert_eq!(
        tool(&api, "unload_context", json!({"label": "crm", "key": "pricing"})),
        "Unloaded \"pricing\" from crm. Context reclaimed."
    );
    assert!(warnings(&api).is_empty());
}

#[test]
fn no_results_and_a_readonly_service() {
    let api = api();
    answering(&api, 200, r#"{"results": []}"#);
    assert_eq!(tool(&api, "search_context", json!({"label": "crm", "query": "x"})), "No results found.");
    // Only the first ten results are used.
    let many: Vec<Json> = (0..50).map(|i| json!({"key": format!("k{i}"), "content": "c"})).collect();
    answering(&api, 200, json!({ "results": many }).to_string());
    let out = tool(&api, "search_context", json!({"label": "crm", "query": "x"}));
    assert_eq!(out.matches("[k").count(), 10, "{out}");

    let api = api_with(json!(["search"]), json!({}));
    answering(&api, 200, r#"{"content": "x"}"#);
    let r = api.post("/sessions/s/tools/set_context", json!({"input": {"label": "crm", "content": "y"}}));
    assert_eq!(r.status, 404, "no block is writable: no set_context");
    assert!(calls(&api).is_empty());
}

#[test]
fn a_failing_service_leaves_the_last_text_with_a_warning_and_the_turn_goes_on() {
    let api = api().with_model();
    let state = Rc::new(RefCell::new("Alice, gold customer".to_owned()));
    stateful(&api, state);
    assert_eq!(block(&api)["content"], "Alice, gold customer");
    // Down, failing, late, unreadable, too long, the wrong shape: each keeps the last text.
    let huge = format!("{{\"content\": \"{}\"}}", "x".repeat(MAX_ANSWER_BYTES));
    let cases: Vec<(&str, Service)> = vec![
        ("could not be reached", Box::new(|_: &Json| Some(Err(Error::internal("connection refused"))))),
        (
            "answered HTTP 500",
            Box::new(|_: &Json| Some(Ok(HttpResponse { status: 500, body: "oops".into(), headers: Vec::new() }))),
        ),
        ("did not answer within 1500 ms", Box::new(|_: &Json| None)),
        (
            "not a JSON object",
            Box::new(|_: &Json| Some(Ok(HttpResponse { status: 200, body: "<html>".into(), headers: Vec::new() }))),
        ),
        (
            "not a JSON object",
            Box::new(|_: &Json| Some(Ok(HttpResponse { status: 200, body: "[1,2]".into(), headers: Vec::new() }))),
        ),
        (
            "answered too much",
            Box::new(move |_: &Json| Some(Ok(HttpResponse { status: 200, body: huge.clone(), headers: Vec::new() }))),
        ),
        (
            "not a text",
            Box::new(|_: &Json| {
                Some(Ok(HttpResponse { status: 200, body: r#"{"content": 42}"#.into(), headers: Vec::new() }))
            }),
        ),
        (
            "not a text",
            Box::new(|_: &Json| Some(Ok(HttpResponse { status: 200, body: "{}".into(), headers: Vec::new() }))),
        ),
        (
            "busy",
            Box::new(|_: &Json| {
                Some(Ok(HttpResponse { status: 503, body: r#"{"error": "busy"}"#.into(), headers: Vec::new() }))
            }),
        ),
    ];
    for (said, service) in cases {
        serve(&api, service);
        warnings(&api);
        assert_eq!(block(&api)["content"], "Alice, gold customer", "{said}");
        let w = warnings(&api);
        assert_eq!(w.len(), 1, "{said}: {w:?}");
        assert!(w[0].starts_with("http block \"crm\" get: "), "{w:?}");
        assert!(w[0].contains(said) && w[0].ends_with("; the last text read is shown"), "{said}: {w:?}");
    }
    // A turn renders its prompt while the service is down: the last text, and a reply.
    serve(&api, Box::new(|_: &Json| Some(Err(Error::internal("down")))));
    api.model.reply(Ok(completion("Hi Alice.")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "hello")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let system = api.model.requests.borrow().last().unwrap()["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("Alice, gold customer"), "{system}");
    // The prompt's render, and the status frame's after the reply (cachedPrompt: false).
    let w = warnings(&api);
    assert!(!w.is_empty() && w.iter().all(|w| w.contains("could not be reached")), "{w:?}");
}

#[test]
fn a_service_that_never_answered_shows_an_empty_block() {
    let api = api();
    answering(&api, 500, "");
    assert_eq!(block(&api)["content"], "");
    let w = warnings(&api);
    assert!(w[0].ends_with("; no text was read yet"), "{w:?}");
}

#[test]
fn a_failing_tool_call_is_the_models_error_without_the_url() {
    let api = api();
    let cases = [
        (500, "oops".to_owned(), "Error: the block's service answered HTTP 500"),
        (200, "not json".to_owned(), "Error: the block's service answered something that is not a JSON object"),
        (
            200,
            r#"{"results": "nope"}"#.to_owned(),
            "Error: the block's service answered something that is not a list of results",
        ),
        (
            200,
            r#"{"results": [{"key": 1, "content": "c"}]}"#.to_owned(),
            "Error: the block's service answered something that is not a list of results",
        ),
        (
            200,
            r#"{"results": [{"content": ["c"]}]}"#.to_owned(),
            "Error: the block's service answered something that is not a list of results",
        ),
        (404, json!({"error": format!("no such deal {}", "y".repeat(600))}).to_string(), "Error: no such deal yyy"),
    ];
    for (status, body, want) in cases {
        answering(&api, status, body);
        let out = tool(&api, "search_context", json!({"label": "crm", "query": "x"}));
        assert!(out.starts_with(want), "{out}");
        assert!(out.chars().count() < 520, "the service's error text is cut: {out}");
        assert!(!out.contains("blocks.test"), "{out}");
        assert_eq!(warnings(&api).len(), 1);
    }
    answering(&api, 200, r#"{"content": 7}"#);
    assert!(tool(&api, "load_context", json!({"label": "crm", "key": "k"})).starts_with("Error: "));
    assert!(tool(&api, "set_context", json!({"label": "crm", "content": "c"})).starts_with("Error: "));
    serve(&api, Box::new(|_: &Json| None));
    assert_eq!(
        tool(&api, "set_context", json!({"label": "crm", "content": "c"})),
        "Error: the block's service did not answer within 1500 ms"
    );
}

#[test]
fn a_secret_that_is_not_set_sends_nothing() {
    let mut api = api();
    api.secrets.clear();
    let api = api.reopen();
    answering(&api, 200, r#"{"content": "x"}"#);
    assert_eq!(block(&api)["content"], "");
    assert!(calls(&api).is_empty(), "no call without its header");
    let w = warnings(&api);
    assert!(w[0].contains("the secret CRM_TOKEN is not set"), "{w:?}");
    // Without a secret named, the call goes without the header.
    let mut api =
        Api::with_config(json!({"context": [{"label": "pub", "kind": "http", "url": format!("{SERVICE}pub")}]}));
    api = api.reopen();
    answering(&api, 200, r#"{"content": "public text"}"#);
    assert_eq!(api.get("/sessions/s/context/pub").body_json()["content"], "public text");
    let c = calls(&api);
    assert_eq!(c[0]["authorization"], Json::Null);
    assert_eq!(c[0]["timeoutMs"], 6000, "the default timeout, and the transport's backstop a second later");
}

#[test]
fn a_block_added_at_run_time_cannot_call_out() {
    let api = api();
    let before = api.count("SELECT count(*) FROM context_defs");
    for body in [
        json!({"label": "x", "kind": "http", "url": "https://evil.example/"}),
        json!({"label": "x", "kind": "http"}),
        json!({"label": "x", "kind": "readonly", "url": "https://evil.example/", "content": "c"}),
        json!({"label": "x", "kind": "readonly", "secret": "API_TOKEN", "content": "c"}),
        json!({"label": "x", "kind": "writable", "ops": ["set"]}),
        json!({"label": "x", "kind": "writable", "timeoutMs": 5}),
    ] {
        let r = api.post("/sessions/s/context", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(code(&r), "invalid_request");
    }
    assert_eq!(api.count("SELECT count(*) FROM context_defs"), before);
    assert!(calls(&api).is_empty());
}

#[test]
fn the_block_is_written_only_through_the_tool() {
    let api = api();
    answering(&api, 200, r#"{"content": "x"}"#);
    let r = api.put("/sessions/s/context/crm", json!({"content": "y"}));
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let r = api.post("/sessions/s/context/crm/append", json!({"content": "y"}));
    assert_eq!(r.status, 409);
    let r = api.get("/sessions/s/context/crm/entries");
    assert_eq!(r.status, 400, "an http block has no entries");
}

#[test]
fn the_last_text_goes_with_the_block_and_the_session() {
    let api = api();
    answering(&api, 200, r#"{"content": "kept"}"#);
    block(&api);
    api.get("/sessions/t/context/crm");
    assert_eq!(api.count("SELECT count(*) FROM fetched_block_texts"), 2);
    // Unchanged text: no write.
    let changes = api.count("SELECT total_changes()");
    block(&api);
    assert_eq!(api.count("SELECT total_changes()"), changes);
    assert_eq!(api.delete("/sessions/s/context/crm").status, 204);
    assert_eq!(api.count("SELECT count(*) FROM fetched_block_texts WHERE session_id = 's'"), 0);
    api.append("t", "m1", None, "hello");
    assert_eq!(api.delete("/sessions/t").status, 204);
    assert_eq!(api.count("SELECT count(*) FROM fetched_block_texts"), 0);
}

#[test]
fn hostile_configs_are_refused_whole() {
    let http = |extra: Json| {
        let mut b = json!({"label": "crm", "kind": "http", "url": "https://crm.example/ctx"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        json!({"context": [b]}).to_string()
    };
    assert!(SessionConfig::from_json(&http(json!({}))).is_ok());
    assert!(SessionConfig::from_json(&http(json!({"url": "http://127.0.0.1:8080/x", "secret": "A_B1",
        "timeoutMs": 30000, "ops": ["load", "set", "search"]})))
    .is_ok());
    let refused = [
        json!({"url": null}),
        json!({"url": ""}),
        json!({"url": "https://"}),
        json!({"url": "ftp://crm.example/"}),
        json!({"url": "javascript:alert(1)"}),
        json!({"url": "https://crm.example/a b"}),
        json!({"url": "https://crm.example/\u{0}"}),
        json!({"url": "https://crm.example/\n"}),
        json!({"url": format!("https://{}", "a".repeat(3000))}),
        json!({"url": 42}),
        json!({"secret": ""}),
        json!({"secret": "1ABC"}),
        json!({"secret": "A-B"}),
        json!({"secret": "A B"}),
        json!({"secret": "x".repeat(200)}),
        json!({"secret": ["A"]}),
        json!({"timeoutMs": 0}),
        json!({"timeoutMs": 30001}),
        json!({"timeoutMs": -1}),
        json!({"timeoutMs": 1.5}),
        json!({"timeoutMs": "100"}),
        json!({"ops": ["get"]}),
        json!({"ops": ["set", "set"]}),
        json!({"ops": "set"}),
        json!({"ops": [null]}),
        json!({"content": "c"}),
        json!({"maxTokens": 10}),
        json!({"r2Key": "k"}),
        json!({"prefix": "p/"}),
        json!({"scope": "agent"}),
        json!({"headers": {"x": "y"}}),
    ];
    for extra in refused {
        let cfg = http(extra.clone());
        assert!(SessionConfig::from_json(&cfg).is_err(), "accepted: {cfg}");
    }
    let missing = json!({"context": [{"label": "crm", "kind": "http"}]}).to_string();
    assert!(SessionConfig::from_json(&missing).is_err());
}

#[test]
fn an_import_cannot_bring_an_http_block_in() {
    let api = api();
    let r = api.post("/sessions/s/context", json!({"label": "x", "kind": "readonly", "content": "c"}));
    assert_eq!(r.status, 201);
    let export = String::from_utf8(api.get("/export").body).unwrap();
    let def = r#""def":{"label":"x","kind":"readonly","content":"c"}"#;
    assert!(export.contains(def), "{export}");
    let hostile = export.replace(def, r#""def":{"label":"x","kind":"http","url":"https://evil.example/"}"#);
    let fresh = Api::new();
    let before = crate::support::table_rows(&fresh);
    let r = crate::support::import(&fresh, &hostile);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(String::from_utf8_lossy(&r.body).contains("http block"), "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(crate::support::table_rows(&fresh), before);
}

/// A random JSON value of at most `depth` levels, its strings of any characters (control ones,
/// quotes, lone-surrogate escapes cannot be made from Rust strings, so their neighbours).
fn random_json(rng: &mut Rng, depth: usize) -> Json {
    let text = |rng: &mut Rng| -> String {
        let pool = [
            "a", "é", "\u{0}", "\n", "\"", "\\", "{", "}", "[", "]", "\u{202e}", "💥", " ", "content", "results",
            "error",
        ];
        (0..rng.below(12)).map(|_| pool[rng.below(pool.len())]).collect()
    };
    match rng.below(if depth == 0 { 5 } else { 8 }) {
        0 => Json::Null,
        1 => json!(rng.below(2) == 1),
        2 => json!(rng.below(1000) as i64 - 500),
        3 => json!(rng.below(1000) as f64 / 7.0),
        4 => json!(text(rng)),
        5 => Json::Array((0..rng.below(4)).map(|_| random_json(rng, depth - 1)).collect()),
        _ => {
            let keys = ["content", "results", "error", "key", "x"];
            let mut m = serde_json::Map::new();
            for _ in 0..rng.below(4) {
                m.insert(keys[rng.below(keys.len())].to_owned(), random_json(rng, depth - 1));
            }
            Json::Object(m)
        }
    }
}

#[test]
fn random_answers_never_fail_a_request_and_keep_the_last_text() {
    let api = api();
    answering(&api, 200, r#"{"content": "the good text"}"#);
    assert_eq!(block(&api)["content"], "the good text");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for i in 0..400 {
        // The known text first (a `set` answered with a text below replaces it).
        answering(&api, 200, r#"{"content": "the good text"}"#);
        block(&api);
        let answer = random_json(&mut rng, 3);
        let mut body = answer.to_string();
        match rng.below(6) {
            0 => body = body.chars().take(rng.below(body.chars().count() + 1)).collect(), // cut short
            1 => body = format!("{body}{body}"),                                          // two values
            _ => {}
        }
        let status = [200, 200, 200, 201, 204, 301, 400, 404, 500, 503][rng.below(10)];
        answering(&api, status, body.clone());
        let b = block(&api);
        let shown = b["content"].as_str().unwrap();
        let given = serde_json::from_str::<Json>(&body).ok().filter(|_| (200..300).contains(&status));
        let fresh = given
            .as_ref()
            .and_then(|a| a.get("content"))
            .and_then(Json::as_str)
            .filter(|_| given.as_ref().is_some_and(|a| a.get("error").and_then(Json::as_str).is_none()));
        match fresh {
            Some(text) => assert_eq!(shown, text, "{i}: {body}"),
            None => assert_eq!(shown, "the good text", "{i}: {status} {body}"),
        }
        for (name, input) in [
            ("search_context", json!({"label": "crm", "query": "q"})),
            ("load_context", json!({"label": "crm", "key": "k"})),
            ("set_context", json!({"label": "crm", "content": "c"})),
        ] {
            answering(&api, status, body.clone());
            let out = tool(&api, name, input);
            assert!(!out.contains("blocks.test"), "{i} {name}: {out}");
        }
    }
    answering(&api, 500, "");
    assert!(!block(&api)["content"].as_str().unwrap().is_empty(), "a last text is kept");
}
