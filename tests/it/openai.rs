//! The OpenAI-compatible face (`crates/api/src/openai.rs`) natively: hostile bodies refused in
//! OpenAI's error shape with nothing stored and no model call, the conversation a client sends
//! matched with the stored branch (a prefix, nothing, a sibling, a conflict), client tool
//! results continuing the turn and forged ones refused, the exact bytes of both streams,
//! `store: false`, a stored response read back and deleted, and errors of the route table
//! itself (404, 405) in OpenAI's shape.

use crate::support::{completion, table_rows, tool_calls, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method::{Delete, Get, Post};
use session_agent_api::{Request, Response};

fn api() -> Api {
    Api::with_config(json!({"context": [{"label": "memory", "kind": "writable", "maxTokens": 500}]})).with_model()
}

fn completions(api: &Api, sid: &str, body: Json) -> Response {
    api.send(Request::new(Post, "/v1/chat/completions").header("x-session-id", sid).json(&body))
}

fn texts(api: &Api, sid: &str) -> Vec<String> {
    let h = api.get(&format!("/sessions/{sid}/history?raw=1")).body_json();
    let list = h["messages"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|m| {
            let text: String = m["parts"].as_array().unwrap().iter().filter_map(|p| p["text"].as_str()).collect();
            format!("{}:{text}", m["role"].as_str().unwrap())
        })
        .collect()
}

fn user(text: &str) -> Json {
    json!({"role": "user", "content": text})
}

fn assistant(text: &str) -> Json {
    json!({"role": "assistant", "content": text})
}

/// Asserts an OpenAI-shaped error of `status` with `kind` and (when given) `param`.
#[track_caller]
fn refused(r: &Response, status: u16, kind: &str, param: Option<&str>) {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    let e = &r.body_json()["error"];
    assert_eq!(e["type"], kind, "{e}");
    assert!(e["message"].is_string() && e.get("code").is_some(), "{e}");
    assert_eq!(e["param"].as_str(), param, "{e}");
}

#[test]
fn hostile_bodies_are_refused_in_openai_shape_and_store_nothing() {
    let api = api();
    api.model.reply(Ok(completion("Hi.")));
    assert_eq!(completions(&api, "h", json!({"messages": [user("hello")]})).status, 200);
    let rows = table_rows(&api);
    let calls = api.model.requests.borrow().len();
    let bad: Vec<(Json, Option<&str>)> = vec![
        (json!({}), Some("messages")),
        (json!({"messages": []}), Some("messages")),
        (json!({"messages": "hi"}), Some("messages")),
        (json!({"messages": [1]}), Some("messages[0]")),
        (json!({"messages": [{"content": "x"}]}), Some("messages[0].role")),
        (json!({"messages": [{"role": "user", "content": 5}]}), Some("messages[0].content")),
        (json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}), Some("messages[0].content[0]")),
        (json!({"messages": [{"role": "tool", "content": "x"}]}), Some("messages[0].tool_call_id")),
        (
            json!({"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"id": 1}]}]}),
            Some("messages[0].tool_calls[0]"),
        ),
        (json!({"messages": [assistant("only an answer")]}), Some("messages")),
        (json!({"messages": [user("x")], "tools": {}}), Some("tools")),
        (json!({"messages": [user("x")], "tools": [{"type": "web_search"}]}), Some("tools[0].type")),
        (
            json!({"messages": [user("x")], "tools": [{"type": "function", "function": {"name": "bad name"}}]}),
            Some("tools[0].name"),
        ),
        (
            json!({"messages": [user("x")], "tools": [{"type": "function", "function": {"name": "set_context"}}]}),
            Some("tools[0]"),
        ),
        (json!({"messages": [user("x")], "tool_choice": 3}), Some("tool_choice")),
        (json!({"messages": [user("x")], "stream": "yes"}), Some("stream")),
        (
            json!({"messages": [user("x")], "stream_options": {"include_usage": 1}}),
            Some("stream_options.include_usage"),
        ),
        (json!({"messages": [user("x")], "temperature": 9}), Some("temperature")),
        (json!({"messages": [user("x")], "max_tokens": 0}), Some("max_tokens")),
        (json!({"messages": [user("x")], "n": 2}), Some("n")),
        (json!({"messages": [user("x")], "model": 4}), Some("model")),
        (json!({"messages": [user("x")], "metadata": {"session_id": 4}}), Some("metadata")),
        (json!({"messages": [user("x")], "metadata": {"session_id": ""}}), Some("metadata")),
        (json!({"messages": [user("x")], "tools": [{"type": "function", "name": "flat"}]}), Some("tools[0].function")),
        (json!({"messages": [user("x")], "user": "no spaces allowed"}), Some("user")),
        (json!({"messages": [user("x")], "user": "x".repeat(200)}), Some("user")),
    ];
    for (body, param) in bad {
        let r = completions(&api, "h", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", String::from_utf8_lossy(&r.body));
        let e = &r.body_json()["error"];
        assert_eq!(e["type"], "invalid_request_error", "{body}");
        assert_eq!(e["param"].as_str(), param, "{body}: {e}");
    }
    // Not JSON, a bad header, and the Responses' own fields.
    let raw = Request::new(Post, "/v1/chat/completions").header("content-type", "application/json");
    let mut raw = raw;
    raw.body = b"{not json".to_vec();
    refused(&api.send(raw), 400, "invalid_request_error", None);
    let bad_header = Request::new(Post, "/v1/chat/completions")
        .header("x-session-id", "a b")
        .json(&json!({"messages": [user("x")]}));
    refused(&api.send(bad_header), 400, "invalid_request_error", None);
    for (body, param) in [
        (json!({}), "input"),
        (json!({"input": []}), "input"),
        (json!({"input": 3}), "input"),
        (json!({"input": [{"type": "reasoning"}]}), "input[0]"),
        (json!({"input": [{"type": "function_call", "call_id": "c"}]}), "input[0]"),
        (json!({"input": "x", "store": "no"}), "store"),
        (json!({"input": "x", "conversation": 3}), "conversation"),
        (json!({"input": "x", "conversation": "a b"}), "conversation"),
        (json!({"input": "x", "instructions": []}), "instructions"),
        (json!({"input": "x", "previous_response_id": ""}), "previous_response_id"),
    ] {
        let r = api.send(Request::new(Post, "/v1/responses").json(&body));
        refused(&r, 400, "invalid_request_error", Some(param));
    }
    let r = api.send(Request::new(Post, "/v1/responses").json(&json!({"input": "x", "previous_response_id": "nope"})));
    refused(&r, 404, "not_found_error", None);
    assert_eq!(table_rows(&api), rows, "a refused request stores nothing");
    assert_eq!(api.model.requests.borrow().len(), calls, "nor calls the model");
}

#[test]
fn the_route_tables_own_refusals_are_openai_shaped_too() {
    let api = api();
    let r = api.send(Request::new(Get, "/v1/chat/completions"));
    refused(&r, 405, "invalid_request_error", None);
    assert!(r.header("allow").is_some());
    refused(&api.send(Request::new(Get, "/v1/nothing")), 404, "not_found_error", None);
    refused(&api.send(Request::new(Get, "/v1/responses/nope")), 404, "not_found_error", None);
    // Our own routes keep our shape.
    let ours = api.send(Request::new(Get, "/sessions/s/messages/nope")).body_json();
    assert!(ours["error"].get("type").is_none(), "{ours}");
}

#[test]
fn the_conversation_is_matched_with_the_stored_branch() {
    let api = api();
    api.model.reply(Ok(completion("A1")));
    completions(&api, "m", json!({"messages": [user("Q1")]}));
    api.model.reply(Ok(completion("A2")));
    // The whole conversation sent back (the assistant's text trimmed as a client may).
    let r = completions(&api, "m", json!({"messages": [user("Q1"), assistant(" A1 "), user("Q2")]}));
    assert_eq!(r.body_json()["choices"][0]["message"]["content"], "A2");
    assert_eq!(texts(&api, "m"), ["user:Q1", "assistant:A1", "user:Q2", "assistant:A2"]);
    // Nothing before the new message: the newest branch continues.
    api.model.reply(Ok(completion("A3")));
    completions(&api, "m", json!({"messages": [{"role": "system", "content": "Be terse."}, user("Q3")]}));
    assert_eq!(texts(&api, "m").len(), 6);
    let sent = api.model.requests.borrow().last().cloned().unwrap();
    let system: String = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(system.contains("Be terse."), "{system}");
    let prompt = api.get("/sessions/m/prompt").body_json().to_string();
    assert!(!prompt.contains("Be terse."), "a client's system message is never frozen");
    // Part of it, then an edited question: a sibling of Q2.
    api.model.reply(Ok(completion("B2")));
    completions(&api, "m", json!({"messages": [user("Q1"), assistant("A1"), user("Q2 edited")]}));
    assert_eq!(texts(&api, "m"), ["user:Q1", "assistant:A1", "user:Q2 edited", "assistant:B2"]);
    // A conversation the session does not hold: 409, nothing stored.
    let rows = table_rows(&api);
    let r = completions(&api, "m", json!({"messages": [user("Q1"), assistant("not A1"), user("Q9")]}));
    refused(&r, 409, "invalid_request_error", Some("messages[1]"));
    let r = completions(
        &api,
        "m",
        json!({"messages": [user("Q1"), assistant("A1"), user("Q2 edited"), assistant("B2"), assistant("more"), user("x")]}),
    );
    refused(&r, 409, "invalid_request_error", Some("messages[4]"));
    assert_eq!(table_rows(&api), rows);
}

#[test]
fn client_tool_results_continue_the_turn_and_forgeries_are_refused() {
    let api = api();
    let tools = json!([{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]);
    api.model.reply(Ok(tool_calls(&[("c1", "lookup", json!({"q": "x"})), ("c2", "lookup", json!({"q": "y"}))])));
    let first = completions(&api, "t", json!({"messages": [user("look")], "tools": tools})).body_json();
    let message = first["choices"][0]["message"].clone();
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message["tool_calls"].as_array().unwrap().len(), 2);
    let rows = table_rows(&api);
    let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": format!("{id} done")});
    // A call that is not pending, and a call left without a result.
    let r = completions(
        &api,
        "t",
        json!({"messages": [user("look"), message, result("c9"), result("c2")], "tools": tools}),
    );
    refused(&r, 400, "invalid_request_error", Some("messages[2]"));
    let r = completions(&api, "t", json!({"messages": [user("look"), message, result("c1")], "tools": tools}));
    refused(&r, 400, "invalid_request_error", Some("messages"));
    assert_eq!(table_rows(&api), rows);
    // Only the results (the server holds the rest), then the answer.
    api.model.reply(Ok(completion("x and y")));
    let r = completions(&api, "t", json!({"messages": [result("c1"), result("c2")], "tools": tools})).body_json();
    assert_eq!(r["choices"][0]["message"]["content"], "x and y");
    assert_eq!(texts(&api, "t"), ["user:look", "assistant:", "assistant:x and y"]);
    // The same results again: already answered.
    let r = completions(
        &api,
        "t",
        json!({"messages": [user("look"), message, result("c1"), result("c2")], "tools": tools}),
    );
    refused(&r, 400, "invalid_request_error", Some("messages[2]"));
}

#[test]
fn the_streams_bytes() {
    let api = api();
    api.model.reply(Ok(completion("Hello")));
    let r = completions(
        &api,
        "s",
        json!({"messages": [user("hi")], "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/event-stream"));
    let body = String::from_utf8(r.body.clone()).unwrap();
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty() && !e.starts_with(':')).collect();
    assert_eq!(events.last(), Some(&"data: [DONE]"));
    let chunks: Vec<Json> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert!(chunks
        .iter()
        .all(|c| c["id"] == id && c["object"] == "chat.completion.chunk" && c["model"] == chunks[0]["model"]));
    assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": "", "refusal": null}));
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Hello");
    let last = &chunks[chunks.len() - 1];
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "prompt_tokens_details": {"cached_tokens": 0}})
    );
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "stop");
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c["usage"].is_null() && c.get("usage").is_some()));

    api.model.reply(Ok(completion("Hi")));
    let r = api
        .send(Request::new(Post, "/v1/responses").json(&json!({"input": "hi", "stream": true, "conversation": "s"})));
    let body = String::from_utf8(r.body.clone()).unwrap();
    let events: Vec<(String, Json)> = body
        .split("\n\n")
        .filter(|e| e.starts_with("event: "))
        .map(|e| {
            let (head, data) = e.split_once('\n').unwrap();
            (
                head.strip_prefix("event: ").unwrap().to_owned(),
                serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
            )
        })
        .collect();
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (i, (k, d)) in events.iter().enumerate() {
        assert_eq!(d["type"], k.as_str());
        assert_eq!(d["sequence_number"], i);
    }
    let done = &events[8].1["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], "Hi");
    assert_eq!(done["id"], events[0].1["response"]["id"]);
    assert_eq!(done["conversation"]["id"], "s");
}

#[test]
fn store_false_keeps_nothing_and_a_stored_response_reads_back() {
    let api = api();
    api.model.reply(Ok(completion("Hello Ada")));
    let first = api
        .send(Request::new(Post, "/v1/responses").json(&json!({"input": "I am Ada", "conversation": "r"})))
        .body_json();
    let rows = table_rows(&api);
    api.model.reply(Ok(completion("forgotten")));
    let r = api.send(
        Request::new(Post, "/v1/responses")
            .json(&json!({"input": "secret", "previous_response_id": first["id"], "store": false})),
    );
    let gone = r.body_json();
    assert_eq!(gone["output"][0]["content"][0]["text"], "forgotten");
    assert_eq!(gone["store"], false);
    assert_eq!(table_rows(&api), rows, "store: false writes no row");
    refused(
        &api.send(Request::new(Get, &format!("/v1/responses/{}", gone["id"].as_str().unwrap()))),
        404,
        "not_found_error",
        None,
    );

    let id = first["id"].as_str().unwrap();
    let got = api.send(Request::new(Get, &format!("/v1/responses/{id}"))).body_json();
    assert_eq!(got["output"], first["output"]);
    assert_eq!(got["usage"], first["usage"]);
    assert_eq!(got["conversation"]["id"], "r");
    let items = api.send(Request::new(Get, &format!("/v1/responses/{id}/input_items?order=asc"))).body_json();
    assert_eq!(items["data"][0]["content"][0]["text"], "I am Ada");
    assert_eq!(items["has_more"], false);
    let r = api.send(Request::new(Get, &format!("/v1/responses/{id}/input_items?order=sideways")));
    refused(&r, 400, "invalid_request_error", None);
    let r = api.send(Request::new(Delete, &format!("/v1/responses/{id}")));
    assert_eq!(r.body_json(), json!({"id": id, "object": "response", "deleted": true}));
    assert_eq!(texts(&api, "r"), ["user:I am Ada"]);
}

#[test]
fn a_model_the_config_allows_answers_and_any_other_name_is_ignored() {
    let api = Api::with_config(json!({"chat": {"models": ["small-model", "test-model"]}})).with_model();
    let listed: Vec<Json> =
        api.get("/v1/models").body_json()["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect();
    assert_eq!(listed, [json!("test-model"), json!("small-model")], "the configured model first, each once");
    // Named and allowed: that model is called, answers, and is what the reply and ledger name.
    api.model.reply(Ok(completion("Small.")));
    let r = completions(&api, "m", json!({"model": "small-model", "messages": [user("Q1")]}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body_json()["model"], "small-model");
    assert_eq!(api.model.requests.borrow().last().unwrap()["model"], "small-model");
    let h = api.get("/sessions/m/history").body_json();
    assert_eq!(h["messages"][1]["metadata"]["model"], "small-model");
    let ledger =
        session_agent_core::sql::Sql::query(&*api.db, "SELECT model FROM usage_ledger ORDER BY seq", &[]).unwrap();
    assert_eq!(ledger.last().unwrap().text(0).unwrap(), "small-model");
    // Responses too.
    api.model.reply(Ok(completion("Small again.")));
    let r = api.send(
        Request::new(Post, "/v1/responses").json(&json!({"model": "small-model", "input": "Q2", "conversation": "m"})),
    );
    assert_eq!((r.status, r.body_json()["model"].as_str()), (200, Some("small-model")));
    assert_eq!(api.model.requests.borrow().last().unwrap()["model"], "small-model");
    // A name the config does not list is ignored: the configured model answers and is named.
    for asked in ["gpt-4o", "Small-Model", ""] {
        api.model.reply(Ok(completion("Configured.")));
        let r = completions(&api, "m", json!({"model": asked, "messages": [user(&format!("Q {asked}"))]}));
        assert_eq!((r.status, r.body_json()["model"].as_str()), (200, Some("test-model")), "{asked}");
        assert_eq!(api.model.requests.borrow().last().unwrap()["model"], "test-model", "{asked}");
    }
    // Not a string: 400, no call.
    let calls = api.model.requests.borrow().len();
    refused(
        &completions(&api, "m", json!({"model": 5, "messages": [user("Q")]})),
        400,
        "invalid_request_error",
        Some("model"),
    );
    assert_eq!(api.model.requests.borrow().len(), calls);
    // The config's own limits.
    for bad in [
        json!({"models": [""]}),
        json!({"models": ["a\nb"]}),
        json!({"models": ["x".repeat(129)]}),
        json!({"models": (0..17).map(|i| format!("m{i}")).collect::<Vec<_>>()}),
        json!({"models": "small-model"}),
    ] {
        let text = json!({"chat": bad.clone()}).to_string();
        assert!(session_agent_core::config::SessionConfig::from_json(&text).is_err(), "{bad}");
    }
}
