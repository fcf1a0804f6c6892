//! The agent turn through the DO API with an OpenAI-compatible model peer: what is sent (frozen
//! prompt, history, tools, cache key), server tools in a loop, client tools and continuations
//! (forgeries refused), all-or-nothing on failure, SSE framing, and the WebSocket frames.

use crate::support::{completion, msg, tool_calls, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_api::{self as api, Request};
use session_agent_core::error::Error;
use session_agent_core::llm::HttpResponse;

fn api() -> Api {
    Api::with_config(json!({"context": [
        {"label": "soul", "kind": "readonly", "content": "You are terse."},
        {"label": "memory", "kind": "writable", "maxTokens": 500}]}))
    .with_model()
}

fn user(id: &str, text: &str) -> Json {
    msg(id, "user", text)
}

fn history(api: &Api, sid: &str) -> Vec<Json> {
    api.get(&format!("/sessions/{sid}/history")).body_json()["messages"].as_array().unwrap().clone()
}

#[test]
fn a_plain_turn_sends_prompt_history_and_tools_and_stores_one_reply() {
    let api = api();
    api.post("/sessions/s/messages", json!({"message": user("u0", "earlier question")}));
    api.post("/sessions/s/messages", json!({"message": msg("a0", "assistant", "earlier answer")}));
    api.model.reply(Ok(completion("Hello back.")));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "hello")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let reply = r.body_json()["messages"][0].clone();
    assert_eq!(reply["role"], "assistant");
    assert_eq!(reply["parts"], json!([{"type": "text", "text": "Hello back."}]));
    assert_eq!(reply["metadata"]["usage"], json!({"inputTokens": 100, "outputTokens": 20}));
    let h = history(&api, "s");
    assert_eq!(h.len(), 4);
    assert_eq!(h[2], user("u1", "hello"));
    assert_eq!(h[3], reply);
    // What the model got: the frozen prompt, the branch, the tools, the session as cache key.
    let sent = api.model.requests.borrow()[0].clone();
    let prompt = api.get("/sessions/s/prompt").body_json()["prompt"].clone();
    assert_eq!(sent["messages"][0], json!({"role": "system", "content": prompt}));
    assert_eq!(sent["messages"][1], json!({"role": "user", "content": "earlier question"}));
    assert_eq!(sent["messages"][2]["content"], "earlier answer");
    assert_eq!(sent["messages"][3], json!({"role": "user", "content": "hello"}));
    assert_eq!(sent["prompt_cache_key"], "s");
    let names: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["set_context", "session_search"]);
    let info = api.get("/sessions/s").body_json();
    assert_eq!((info["inputTokens"].as_i64(), info["messageCount"].as_i64()), (Some(100), Some(4)));
}

#[test]
fn server_tools_run_and_the_model_is_called_again() {
    let api = api();
    api.model.reply(Ok(tool_calls(&[("c1", "set_context", json!({"label": "memory", "content": "likes tea"}))])));
    api.model.reply(Ok(completion("Noted.")));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "remember: I like tea")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let parts = r.body_json()["messages"][0]["parts"].clone();
    assert_eq!(parts[0]["type"], "dynamic-tool");
    assert_eq!(parts[0]["state"], "output-available");
    assert_eq!(parts[0]["toolName"], "set_context");
    assert!(parts[0]["output"].as_str().unwrap().starts_with("Written to memory."));
    assert_eq!(parts[1], json!({"type": "text", "text": "Noted."}));
    assert_eq!(api.get("/sessions/s/context/memory").body_json()["content"], "likes tea");
    // The second call carried the call and its result.
    let second = api.model.requests.borrow()[1].clone();
    let n = second["messages"].as_array().unwrap().len();
    assert_eq!(second["messages"][n - 2]["tool_calls"][0]["id"], "c1");
    assert_eq!(second["messages"][n - 1]["role"], "tool");
    assert_eq!(second["messages"][n - 1]["tool_call_id"], "c1");
    assert_eq!(history(&api, "s").len(), 2, "one user message, one assistant message");
    let usage = api.get("/sessions/s").body_json();
    assert_eq!(usage["inputTokens"].as_i64(), Some(150), "both steps counted");
    // The session's sockets saw the call made and answered, before the reply was stored.
    let frames = api.events.take("s");
    let tools: Vec<&Json> = frames.iter().filter(|f| f["type"] == "tool").collect();
    assert_eq!(tools.len(), 2, "{frames:?}");
    assert_eq!((tools[0]["state"].as_str(), tools[0]["toolCallId"].as_str()), (Some("input-available"), Some("c1")));
    assert_eq!(tools[0]["input"], json!({"label": "memory", "content": "likes tea"}));
    assert_eq!(tools[1]["state"], "output-available");
    assert!(tools[1]["output"].as_str().unwrap().starts_with("Written to memory."));
    assert_eq!(tools[0]["messageId"], parts_owner(&r));
    let stored = frames.iter().position(|f| f["type"] == "message" && f["message"]["role"] == "assistant").unwrap();
    assert!(frames.iter().position(|f| f["type"] == "tool").unwrap() < stored);
}

/// The id of the assistant message a chat answer holds.
fn parts_owner(r: &session_agent_api::Response) -> Json {
    r.body_json()["messages"][0]["id"].clone()
}

#[test]
fn a_client_tool_returns_to_the_caller_who_continues() {
    let api = api();
    let tools = json!([{"name": "get_location", "description": "Where the user is", "inputSchema": {"type": "object", "properties": {}}}]);
    api.model.reply(Ok(tool_calls(&[("loc1", "get_location", json!({}))])));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "where am I?"), "tools": tools}));
    assert_eq!(r.status, 201);
    let pending = r.body_json()["messages"][0].clone();
    assert_eq!(pending["parts"][0]["state"], "input-available");
    assert_eq!(pending["parts"][0]["toolCallId"], "loc1");
    // The client runs the tool and sends the branch back with the result.
    let mut branch = history(&api, "s");
    assert_eq!(branch.len(), 2);
    branch[1]["parts"][0]["state"] = json!("output-available");
    branch[1]["parts"][0]["output"] = json!({"city": "Lisbon"});
    api.model.reply(Ok(completion("You are in Lisbon.")));
    let r = api.post("/sessions/s/chat", json!({"messages": branch, "tools": tools}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body_json()["messages"][0]["parts"][0]["text"], "You are in Lisbon.");
    let h = history(&api, "s");
    assert_eq!(h.len(), 3);
    assert_eq!(h[1]["parts"][0]["output"], json!({"city": "Lisbon"}), "the result is stored in the call's message");
    let sent = api.model.requests.borrow()[1].clone();
    let last = sent["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["tool_call_id"].as_str()), (Some("tool"), Some("loc1")));
    assert_eq!(last["content"], "{\"city\":\"Lisbon\"}");
}

fn code(r: &api::Response) -> String {
    r.body_json()["error"]["code"].as_str().unwrap_or_default().to_owned()
}

// invariant 22 (docs/ARCHITECTURE.md)
#[test]
fn forged_continuations_are_409_and_change_nothing() {
    let api = api();
    let tools = json!([{"name": "get_location"}]);
    api.model.reply(Ok(tool_calls(&[
        ("loc1", "get_location", json!({})),
        ("m1", "set_context", json!({"label": "memory", "content": "x"})),
    ])));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": user("u1", "where?"), "tools": tools})).status, 201);
    let branch = history(&api, "s");
    let requests = api.model.requests.borrow().len();

    // A rewritten user message: not a prefix of what is stored.
    let mut rewritten = branch.clone();
    rewritten[0]["parts"][0]["text"] = json!("something else");
    let r = api.post("/sessions/s/chat", json!({"messages": rewritten, "tools": tools}));
    assert_eq!((r.status, code(&r).as_str()), (409, "not_a_prefix"));

    // A result for the server's own tool call (which already has one).
    let mut forged = branch.clone();
    let i = forged[1]["parts"].as_array().unwrap().iter().position(|p| p["toolName"] == "set_context").unwrap();
    forged[1]["parts"][i]["output"] = json!("Written by the client");
    let r = api.post("/sessions/s/chat", json!({"messages": forged, "tools": tools}));
    assert_eq!((r.status, code(&r).as_str()), (409, "forged_tool_result"));

    // An approval nobody asked for.
    let mut approval = branch.clone();
    let j = approval[1]["parts"].as_array().unwrap().iter().position(|p| p["toolName"] == "get_location").unwrap();
    approval[1]["parts"][j]["state"] = json!("approval-responded");
    approval[1]["parts"][j]["approval"] = json!({"id": "ap1", "approved": true});
    let r = api.post("/sessions/s/chat", json!({"messages": approval, "tools": tools}));
    assert_eq!((r.status, code(&r).as_str()), (409, "forged_approval"));

    // Another session's messages.
    let r = api.post("/sessions/other/chat", json!({"messages": branch, "tools": tools}));
    assert_eq!((r.status, code(&r).as_str()), (409, "not_a_prefix"));

    assert_eq!(history(&api, "s"), branch, "nothing changed");
    assert_eq!(api.model.requests.borrow().len(), requests, "the model was not called");
}

// invariant 21 (docs/ARCHITECTURE.md)
#[test]
fn a_failing_provider_or_tool_leaves_history_as_it_was() {
    let api = api();
    api.post("/sessions/s/messages", json!({"message": user("u0", "hi")}));
    let before = history(&api, "s");
    let info = api.get("/sessions/s").body_json();
    api.model.reply(Ok(HttpResponse {
        headers: Vec::new(),
        status: 500,
        body: json!({"error": {"message": "overloaded"}}).to_string(),
    }));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "hello")}));
    assert_eq!((r.status, code(&r).as_str()), (503, "llm_unavailable"));
    // The provider's words go to the log, never to the caller.
    assert_eq!(r.body_json()["error"]["message"], "the model answered HTTP 500");
    assert!(r.warnings.iter().any(|w| w.contains("overloaded")), "{:?}", r.warnings);
    assert_eq!(history(&api, "s"), before);
    assert_eq!(api.get("/sessions/s").body_json(), info, "usage and updatedAt unchanged");
    // A failure in the second step (after a server tool ran) also stores no message.
    api.model.reply(Ok(tool_calls(&[("c1", "session_search", json!({"query": "hi"}))])));
    api.model.reply(Err(Error::new(session_agent_core::error::ErrorKind::LlmUnavailable, "connection reset")));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "hello")}));
    assert_eq!(r.status, 503);
    assert_eq!(history(&api, "s"), before);
    // An unregistered session stays unregistered.
    api.model.reply(Ok(HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    assert_eq!(api.post("/sessions/new/chat", json!({"message": user("n1", "hello")})).status, 503);
    assert_eq!(api.get("/sessions/new").status, 404);
    // Retrying works.
    api.model.reply(Ok(completion("Hi!")));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": user("u1", "hello")})).status, 201);
    assert_eq!(history(&api, "s").len(), 3);
}

#[test]
fn bad_requests_are_400_and_the_model_is_not_called() {
    let api = api();
    for body in [
        json!({}),
        json!({"message": user("u", "x"), "messages": []}),
        json!({"message": msg("a", "assistant", "x")}),
        json!({"message": user("u", "x"), "tools": [{"name": "set_context"}]}),
        json!({"message": user("u", "x"), "tools": [{"name": "bad name"}]}),
        json!({"message": user("compaction_x", "x")}),
        json!({"messages": []}),
    ] {
        let r = api.post("/sessions/s/chat", body.clone());
        assert_eq!(r.status, 400, "{body}");
    }
    assert_eq!(api.post("/sessions/s/chat", json!({"message": user("u", "x"), "parentId": "nope"})).status, 404);
    assert!(api.model.requests.borrow().is_empty());
    assert_eq!(api.get("/sessions/s").status, 404);
}

#[test]
fn regenerating_makes_a_sibling_branch() {
    let api = api();
    api.model.reply(Ok(completion("First answer.")));
    api.post("/sessions/s/chat", json!({"message": user("u1", "question")}));
    api.model.reply(Ok(completion("Second answer.")));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1b", "question"), "parentId": null}));
    assert_eq!(r.status, 201);
    let h = history(&api, "s");
    assert_eq!(h.len(), 2);
    assert_eq!(h[0]["id"], "u1b");
    assert_eq!(h[1]["parts"][0]["text"], "Second answer.");
    // The model saw only the new branch.
    let sent = api.model.requests.borrow()[1].clone();
    assert_eq!(sent["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn server_sent_events_and_frames_for_listeners() {
    let api = api();
    api.model.reply(Ok(completion("Streamed reply.")));
    let req = Request::new(Method::Post, "/sessions/s/chat")
        .header("accept", "text/event-stream")
        .json(&json!({"message": user("u1", "hi")}));
    let r = api.send(req);
    assert_eq!(r.status, 200);
    assert!(r.headers.iter().any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream")));
    let body = String::from_utf8(r.body.clone()).unwrap();
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    let delta: Json = serde_json::from_str(events[0].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(delta["type"], "delta");
    assert_eq!(delta["text"], "Streamed reply.");
    let done: Json = serde_json::from_str(events[events.len() - 2].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(done["type"], "message");
    assert_eq!(done["message"]["id"], delta["messageId"]);
    assert_eq!(events[events.len() - 1], "data: [DONE]");
    // Every listener of the session got the user message, the delta and the reply.
    let frames = api.events.take("s");
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["delta", "message", "message", "status"]);
    assert_eq!(frames[1]["message"]["id"], "u1");
    assert_eq!((frames[3]["phase"].as_str(), frames[3]["tokenThreshold"].is_null()), (Some("idle"), true));
    assert!(frames[3]["tokenEstimate"].as_i64().unwrap() > 0);
    assert_eq!(frames[2]["message"]["id"], delta["messageId"]);
    assert!(frames.iter().all(|f| f["sessionId"] == "s"));
    // An error before anything streamed is a plain JSON error.
    let req = Request::new(Method::Post, "/sessions/s/chat").header("accept", "text/event-stream").json(&json!({}));
    assert_eq!(api.send(req).status, 400);
}

#[test]
fn websocket_frames() {
    let api = api();
    let frame = |text: &str| {
        futures::executor::block_on(api::ws::frame(&api.env(), "s", None, text, &Default::default())).frames
    };
    assert_eq!(frame(r#"{"type":"ping"}"#), [json!({"type": "pong"})]);
    for bad in ["nope", "[]", r#"{"type":"dance"}"#, r#"{"type":"append"}"#, r#"{"type":"history","leafId":3}"#] {
        let f = frame(bad);
        assert_eq!(f.len(), 1, "{bad}");
        assert_eq!(f[0]["type"], "error", "{bad}");
        assert_eq!(f[0]["sessionId"], "s");
    }
    // An append answers nothing to the sender; every listener gets the message.
    assert!(frame(&json!({"type": "append", "message": user("w1", "over the socket")}).to_string()).is_empty());
    let frames = api.events.take("s");
    assert_eq!(frames[0], json!({"type": "message", "sessionId": "s", "message": user("w1", "over the socket")}));
    assert_eq!((frames[1]["type"].as_str(), frames[1]["phase"].as_str()), (Some("status"), Some("idle")));
    assert_eq!(frames.len(), 2);
    // Appends over HTTP reach listeners too.
    api.post("/sessions/s/messages", json!({"message": user("h1", "over http")}));
    let frames = api.events.take("s");
    assert_eq!(frames[0]["message"]["id"], "h1");
    assert!(frames[1]["tokenEstimate"].as_i64().unwrap() > frames.len() as i64);
    let h = frame(r#"{"type":"history"}"#);
    assert_eq!(h[0]["type"], "history");
    assert_eq!(h[0]["messages"].as_array().unwrap().len(), 2);
    let h = frame(r#"{"type":"history","leafId":"w1"}"#);
    assert_eq!(h[0]["messages"].as_array().unwrap().len(), 1);
    // A chat frame runs a turn; an error reaches the sender as an error frame.
    api.model.reply(Ok(completion("Over the socket.")));
    let text = json!({"type": "chat", "message": user("w2", "hi")}).to_string();
    let answer = futures::executor::block_on(api::ws::frame(&api.env(), "s", None, &text, &Default::default()));
    assert!(answer.frames.is_empty());
    let kinds = |api: &crate::support::Api| -> Vec<String> {
        api.events.take("s").iter().map(|f| f["type"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(kinds(&api), ["delta", "message", "message"]);
    // The status frame comes from the work the answer leaves for after it (the compaction check).
    futures::executor::block_on(api::after(&api.env(), &answer.after));
    assert_eq!(kinds(&api), ["status"]);
    let e = frame(&json!({"type": "chat", "message": user("w2", "again")}).to_string());
    assert_eq!((e[0]["type"].as_str(), e[0]["code"].as_str()), (Some("error"), Some("conflict")));
}

#[test]
fn a_failed_turn_does_not_freeze_the_prompt_and_a_good_one_does() {
    let api = api();
    api.model.reply(Ok(HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    assert_eq!(api.post("/sessions/p/chat", json!({"message": user("u1", "hi")})).status, 503);
    let frozen = |api: &Api| {
        api.db.query_row("SELECT count(*) FROM prompts WHERE session_id = 'p'", &[]).unwrap().unwrap().int(0).unwrap()
    };
    use session_agent_core::sql::Sql;
    assert_eq!(frozen(&api), 0);
    api.model.reply(Ok(completion("ok")));
    assert_eq!(api.post("/sessions/p/chat", json!({"message": user("u1", "hi")})).status, 201);
    assert_eq!(frozen(&api), 1);
    // The frozen copy is what later turns send, even after a block write.
    api.put("/sessions/p/context/memory", json!({"content": "changed"}));
    api.model.reply(Ok(completion("ok")));
    api.post("/sessions/p/chat", json!({"message": user("u2", "again")}));
    let reqs = api.model.requests.borrow();
    assert_eq!(reqs[1]["messages"][0], reqs[2]["messages"][0]);
}

#[test]
fn a_server_tool_called_with_bad_input_answers_the_model_with_an_error() {
    let api = api();
    api.model.reply(Ok(tool_calls(&[("c1", "set_context", json!({"label": "memory"}))])));
    api.model.reply(Ok(completion("Sorry, retrying later.")));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "remember")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let part = r.body_json()["messages"][0]["parts"][0].clone();
    assert_eq!(part["output"], "Error: set_context: input.content must be a string");
    let second = api.model.requests.borrow()[1].clone();
    assert_eq!(
        second["messages"].as_array().unwrap().last().unwrap()["content"],
        "Error: set_context: input.content must be a string"
    );
}

#[test]
fn updates_reach_listeners() {
    let api = api();
    api.post("/sessions/s/messages", json!({"message": user("u1", "first")}));
    api.events.take("s");
    assert_eq!(api.put("/sessions/s/messages/u1", json!({"message": user("u1", "edited")})).status, 200);
    let frames = api.events.take("s");
    assert_eq!(frames[0], json!({"type": "message", "sessionId": "s", "message": user("u1", "edited")}));
    assert_eq!(
        (frames.len(), frames[1]["type"].as_str(), frames[1]["phase"].as_str()),
        (2, Some("status"), Some("idle"))
    );
}

#[test]
fn an_oversize_user_message_spills_only_when_the_turn_is_written() {
    let api = api();
    let big = user("big", &"word ".repeat(600_000));
    api.model.reply(Ok(HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": big})).status, 503);
    assert!(api.blobs.keys().is_empty(), "a failed turn leaves no objects in R2");
    api.model.reply(Ok(completion("That is long.")));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": big})).status, 201);
    assert_eq!(api.blobs.keys().len(), 1);
    assert_eq!(history(&api, "s")[0], big, "read back whole");
}

/// On a compacted branch whose tail passes the message cap, the model still gets the summary
/// and the head before it; the messages the cap dropped make the turn compact afterwards, so
/// the next turn sees them summarized.
/// The phases of the `status` frames session `s`'s sockets got since the last look.
fn status_phases(api: &Api) -> Vec<String> {
    api.events
        .take("s")
        .iter()
        .filter(|f| f["type"] == "status")
        .map(|f| f["phase"].as_str().unwrap().to_owned())
        .collect()
}

/// A session of 30 messages under a cap of 10 per turn, with compaction configured.
fn capped_session() -> Api {
    let api = Api::with_config(json!({"compaction": {"protectHead": 1, "tailTokenBudget": 20, "minTailMessages": 2},
        "chat": {"maxMessages": 10}}))
    .with_model();
    for i in 0..30 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        api.post("/sessions/s/messages", json!({"message": msg(&format!("m{i}"), role, &format!("message {i}"))}));
    }
    api
}

// invariant 24 (docs/ARCHITECTURE.md)
#[test]
fn the_cap_keeps_the_summary_and_what_it_drops_gets_compacted() {
    let api = capped_session();
    let r = api.post(
        "/sessions/s/compactions",
        json!({"summary": "SUMMARY: the trip to Lisbon", "fromMessageId": "m1", "toMessageId": "m4"}),
    );
    assert_eq!(r.status, 201);
    api.events.take("s");
    api.model.reply(Ok(completion("Sure.")));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": user("u1", "where was I going?")})).status, 201);
    let sent = api.model.requests.borrow()[0]["messages"].clone();
    let contents: Vec<&str> =
        sent.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or_default()).collect();
    assert_eq!(contents.len(), 11, "system + 10: {contents:?}");
    assert_eq!(contents[1], "message 0", "the protected head");
    assert!(contents[2].contains("SUMMARY: the trip to Lisbon"), "{contents:?}");
    assert_eq!(contents[10], "where was I going?");
    // The cap dropped messages 5..=21: the turn compacted afterwards (a summarizer call, a new
    // overlay, and the status frames of a compaction).
    assert_eq!(api.model.requests.borrow().len(), 2, "the summarizer was called");
    assert_eq!(api.get("/sessions/s/compactions").body_json()["compactions"].as_array().unwrap().len(), 2);
    assert_eq!(status_phases(&api), ["compacting", "idle"]);
}

// invariant 35 (docs/ARCHITECTURE.md)
#[test]
fn a_streamed_turn_ends_its_stream_before_the_compaction_it_calls_for_starts() {
    let api = capped_session();
    api.events.take("s");
    api.model.reply(Ok(completion("Sure.")));
    let req = Request::new(Method::Post, "/sessions/s/chat")
        .header("accept", "text/event-stream")
        .json(&json!({"message": user("u1", "where was I going?")}));
    let env = api.env();
    // What the model had been asked when the stream's last event went out.
    let mut calls_at_done = None;
    let mut send = |s: api::chat::Streamed| {
        if let api::chat::Streamed::Data(d) = &s {
            if d.contains("[DONE]") {
                calls_at_done = Some(api.model.requests.borrow().len());
            }
        }
        Ok(())
    };
    let gone = session_agent_core::live::stop::Stop::default();
    let after = futures::executor::block_on(api::chat::stream_turn(
        &env,
        "s",
        &req,
        api::chat::Dialect::Events,
        &gone,
        &mut send,
    ));
    assert_eq!(calls_at_done, Some(1), "only the turn's call before the stream ended");
    assert_eq!(api.model.requests.borrow().len(), 1, "no summarizer call yet");
    assert!(api.events.take("s").iter().all(|f| f["type"] != "status"), "no compaction frame yet");
    // Then, after the answer: the compaction (a summarizer call, its frames).
    // The sweep, as after every write, then the compaction.
    use session_agent_core::after::After;
    assert!(matches!(after[..], [After::Sweep, After::Compact { .. }]), "{after:?}");
    futures::executor::block_on(api::after(&env, &after));
    assert_eq!(api.model.requests.borrow().len(), 2, "the summarizer ran after the answer");
    assert_eq!(status_phases(&api), ["compacting", "idle"]);
}

#[test]
fn a_cancelled_socket_turn_keeps_what_was_shown() {
    let api = api();
    // The signal a later `cancel` frame of the same socket sets (here: set before the turn
    // starts); the turn then stores its user message alone, with no error frame: a stop keeps
    // what was shown, and nothing was.
    let flag = session_agent_core::live::stop::Stop::default();
    let cancel = futures::executor::block_on(api::ws::frame(&api.env(), "s", None, r#"{"type":"cancel"}"#, &flag));
    assert!(cancel.cancel && cancel.frames.is_empty());
    flag.stop();
    api.model.reply(Ok(completion("Never shown.")));
    let chat = json!({"type": "chat", "message": user("c1", "hi")}).to_string();
    let f = futures::executor::block_on(api::ws::frame(&api.env(), "s", None, &chat, &flag)).frames;
    assert!(f.is_empty(), "no error frame: {f:?}");
    assert_eq!(api.history_ids("/sessions/s/history"), ["c1"], "the user message, no reply");
    assert!(api.model.requests.borrow().is_empty(), "the model was never called");
    // The same frame again (not cancelled) answers the same user message.
    api.model.replies.borrow_mut().clear();
    api.model.reply(Ok(completion("Stored.")));
    let f = futures::executor::block_on(api::ws::frame(&api.env(), "s", None, &chat, &Default::default())).frames;
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(api.history_ids("/sessions/s/history").len(), 2);
    // The sender's echo of its own message, before the turn: pending; none for other frames
    // or for a token that may only read.
    let echo = api::ws::pending_echo("s", None, &chat).unwrap();
    assert_eq!((echo["type"].as_str(), echo["pending"].as_bool()), (Some("message"), Some(true)));
    assert_eq!(echo["message"]["id"], "c1");
    assert!(api::ws::pending_echo("s", None, r#"{"type":"ping"}"#).is_none());
    assert!(api::ws::pending_echo("s", None, r#"{"type":"chat","messages":[]}"#).is_none());
}

#[test]
fn a_turn_says_what_the_prompt_cache_keeps_and_reports_what_it_read() {
    let api = api();
    let cached = |n: i64| {
        let usage =
            json!({"prompt_tokens": 500, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": n}});
        crate::support::completion_with_usage("ok", usage)
    };
    // As configured: the session routes OpenAI's cache.
    api.model.reply(Ok(cached(0)));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": user("u1", "hello")})).status, 201);
    assert_eq!(api.model.requests.borrow().last().unwrap()["prompt_cache_key"], "s");
    // The second turn reads 448 of its 500 input tokens from the cache: the reply's usage and
    // the ledger say so.
    api.model.reply(Ok(cached(448)));
    let r = api.post("/sessions/s/chat", json!({"message": user("u2", "again")}));
    assert_eq!(r.status, 201);
    let usage = &r.body_json()["messages"][0]["metadata"]["usage"];
    assert_eq!(usage["cachedInputTokens"], 448, "{usage}");
    assert_eq!(usage["inputTokens"], 500);
    assert_eq!(api.get("/usage").body_json()["cachedInputTokens"], 448);
    // `cache: false` for one call: no key; then as configured again.
    api.model.reply(Ok(cached(0)));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": user("u3", "once"), "cache": false})).status, 201);
    assert!(api.model.requests.borrow().last().unwrap().get("prompt_cache_key").is_none());
    let usage = history(&api, "s").last().unwrap()["metadata"]["usage"].clone();
    assert!(usage.get("cachedInputTokens").is_none(), "none read: no field, {usage}");
    // A bad `cache` is 400 and stores nothing.
    let before = history(&api, "s").len();
    for bad in [
        json!(null),
        json!("yes"),
        json!({"messages": -1}),
        json!({"messages": 101}),
        json!({"ttl": "2h"}),
        json!({"other": 1}),
    ] {
        let r = api.post("/sessions/s/chat", json!({"message": user("u9", "x"), "cache": bad}));
        assert_eq!(r.status, 400, "{bad}: {}", String::from_utf8_lossy(&r.body));
        assert!(String::from_utf8_lossy(&r.body).contains("cache"), "{}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(history(&api, "s").len(), before);
    // The config's own: checked when the object starts.
    for bad in [json!({"chat": {"cache": {"messages": 1000}}}), json!({"chat": {"cache": "no"}})] {
        assert!(session_agent_core::config::SessionConfig::from_json(&bad.to_string()).is_err(), "{bad}");
    }
    let ok = json!({"chat": {"cache": {"messages": 2, "ttl": "1h"}}});
    assert!(session_agent_core::config::SessionConfig::from_json(&ok.to_string()).is_ok());
}
