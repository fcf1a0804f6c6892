//! The AI SDK's `useChat` body on `POST /sessions/{sid}/chat` and the UI message stream it is
//! answered with: chunk order and shapes, the stored id in `start`, regenerate as a sibling, an
//! edit refused, client tools continued inside the same message, what the AI SDK changes in a
//! message not taken for an edit, failures after the start as `error` chunks, nothing stored.

use crate::support::{completion, msg, tool_calls, Api};
use serde_json::{json, Value as Json};
use session_agent_api::Response;
use session_agent_core::llm::HttpResponse;

fn api() -> Api {
    Api::with_config(json!({"context": [{"label": "memory", "kind": "writable", "maxTokens": 500}]})).with_model()
}

fn user(id: &str, text: &str) -> Json {
    msg(id, "user", text)
}

/// POSTs a `useChat` body (no `Accept` header, as `DefaultChatTransport` sends it).
fn chat(api: &Api, sid: &str, messages: &[Json], trigger: &str, extra: Json) -> Response {
    let mut body = json!({"id": sid, "messages": messages, "trigger": trigger});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    api.post(&format!("/sessions/{sid}/chat"), body)
}

/// The chunks of a UI message stream, and whether it ended with `[DONE]`.
fn chunks(r: &Response) -> (Vec<Json>, bool) {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.headers.iter().any(|(k, v)| k == "x-vercel-ai-ui-message-stream" && v == "v1"), "{:?}", r.headers);
    assert!(r.headers.iter().any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream")));
    let body = String::from_utf8(r.body.clone()).unwrap();
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    let done = events.last() == Some(&"data: [DONE]");
    let list = events
        .iter()
        .filter(|e| **e != "data: [DONE]")
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    (list, done)
}

fn types(chunks: &[Json]) -> Vec<&str> {
    chunks.iter().map(|c| c["type"].as_str().unwrap()).collect()
}

fn history(api: &Api, sid: &str) -> Vec<Json> {
    api.get(&format!("/sessions/{sid}/history")).body_json()["messages"].as_array().unwrap().clone()
}

/// A message as the AI SDK's client holds it after the stream: no `createdAt`, a `step-start`
/// before each step, text parts `state: "done"`, reasoning parts with the stream's part id,
/// provider-executed tools marked so.
fn as_client_holds(m: &Json) -> Json {
    let mut out = json!({"id": m["id"], "role": m["role"], "metadata": m["metadata"]});
    let mut parts = vec![json!({"type": "step-start"})];
    for p in m["parts"].as_array().unwrap() {
        let mut p = p.clone();
        if p["type"] == "text" || p["type"] == "reasoning" {
            p["state"] = json!("done");
        }
        if p["type"] == "reasoning" {
            p["id"] = json!("reasoning-1");
        }
        if p["type"] == "dynamic-tool" && p["state"] != "input-available" {
            p["providerExecuted"] = json!(true);
        }
        parts.push(p);
    }
    out["parts"] = Json::Array(parts);
    if m["metadata"].is_null() {
        out.as_object_mut().unwrap().remove("metadata");
    }
    out
}

#[test]
fn a_new_user_message_streams_ui_chunks_and_stores_both_messages() {
    let api = api();
    let body = json!({"choices": [{"message": {"role": "assistant", "content": "Hello back.",
        "reasoning_content": "Greet them."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}});
    api.model.reply(Ok(HttpResponse { headers: Vec::new(), status: 200, body: body.to_string() }));
    let r = chat(&api, "s", &[user("u1", "hello")], "submit-message", json!({}));
    let (c, done) = chunks(&r);
    assert!(done);
    assert_eq!(
        types(&c),
        [
            "start",
            "start-step",
            "reasoning-start",
            "reasoning-delta",
            "reasoning-end",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ]
    );
    let h = history(&api, "s");
    assert_eq!(h.len(), 2);
    assert_eq!(h[0], user("u1", "hello"));
    assert_eq!(c[0], json!({"type": "start", "messageId": h[1]["id"]}));
    assert_eq!(c[3]["delta"], "Greet them.");
    assert_eq!((c[2]["id"].clone(), c[4]["id"].clone()), (c[3]["id"].clone(), c[3]["id"].clone()));
    assert_eq!(c[6]["delta"], "Hello back.");
    assert_ne!(c[6]["id"], c[3]["id"]);
    assert_eq!(
        h[1]["parts"],
        json!([{"type": "reasoning", "text": "Greet them."}, {"type": "text", "text": "Hello back."}])
    );
    // finish: the stored metadata, nothing else.
    assert_eq!(c[9], json!({"type": "finish", "finishReason": "stop", "messageMetadata": h[1]["metadata"]}));
    assert_eq!(h[1]["metadata"]["usage"], json!({"inputTokens": 10, "outputTokens": 3}));

    // The next turn sends the branch as the client holds it: accepted, and the model reads the
    // stored messages.
    api.model.reply(Ok(completion("Fine.")));
    let held = vec![user("u1", "hello"), as_client_holds(&h[1]), user("u2", "how are you?")];
    let (c, _) = chunks(&chat(&api, "s", &held, "submit-message", json!({})));
    assert_eq!(c.last().unwrap()["type"], "finish");
    let h = history(&api, "s");
    assert_eq!(h.len(), 4);
    assert_eq!(h[2], user("u2", "how are you?"));
    let sent = api.model.requests.borrow()[1].clone();
    let roles: Vec<&str> = sent["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
}

#[test]
fn regenerate_answers_again_as_a_sibling_and_an_edit_is_409() {
    let api = api();
    api.model.reply(Ok(completion("First.")));
    chunks(&chat(&api, "s", &[user("u1", "question")], "submit-message", json!({})));
    let first = history(&api, "s")[1].clone();
    api.model.reply(Ok(completion("Second.")));
    let (c, _) =
        chunks(&chat(&api, "s", &[user("u1", "question")], "regenerate-message", json!({"messageId": first["id"]})));
    let h = history(&api, "s");
    assert_eq!(h.len(), 2);
    assert_eq!(h[1]["parts"][0]["text"], "Second.");
    assert_eq!(c[0]["messageId"], h[1]["id"]);
    assert_ne!(h[1]["id"], first["id"]);
    let branches = api.get("/sessions/s/messages/u1/branches").body_json();
    let ids: Vec<&str> = branches["messages"].as_array().unwrap().iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{branches}");
    assert!(ids.contains(&first["id"].as_str().unwrap()) && ids.contains(&h[1]["id"].as_str().unwrap()));
    let info = api.get("/sessions/s").body_json();
    // messageCount is the active path (the new branch), totalMessages every message.
    assert_eq!((info["messageCount"].as_i64(), info["totalMessages"].as_i64()), (Some(2), Some(3)), "{info}");

    // useChat's edit of an earlier message keeps its id: refused, nothing changes.
    let before = api.get("/sessions/s/history").body;
    let calls_before = api.model.requests.borrow().len();
    for (messages, trigger) in [
        (vec![user("u1", "question, edited")], "submit-message"),
        (vec![user("u1", "question, edited")], "regenerate-message"),
        (vec![user("u1", "question, edited"), as_client_holds(&h[1]), user("u2", "more")], "submit-message"),
    ] {
        let r = chat(&api, "s", &messages, trigger, json!({}));
        assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body_json()["error"]["code"], "not_a_prefix");
    }
    assert_eq!(api.get("/sessions/s/history").body, before);
    assert_eq!(api.model.requests.borrow().len(), calls_before, "the model was not called");
}

#[test]
fn a_client_tool_result_continues_inside_the_same_assistant_message() {
    let api = api();
    let tools = json!({"tools": [{"name": "get_location", "description": "Where the user is"}]});
    api.model.reply(Ok(tool_calls(&[("loc1", "get_location", json!({}))])));
    let (c, _) = chunks(&chat(&api, "s", &[user("u1", "where am I?")], "submit-message", tools.clone()));
    assert_eq!(types(&c), ["start", "start-step", "tool-input-available", "finish-step", "finish"]);
    assert_eq!(
        c[2],
        json!({"type": "tool-input-available", "toolCallId": "loc1", "toolName": "get_location", "input": {},
            "dynamic": true}),
        "a client tool is not providerExecuted: useChat's onToolCall gets it"
    );
    assert_eq!(c[4]["finishReason"], "tool-calls");
    let pending = history(&api, "s")[1].clone();
    assert_eq!(pending["id"], c[0]["messageId"]);

    // addToolResult, then the automatic resend: the same message with the output filled in.
    let mut answered = as_client_holds(&pending);
    answered["parts"][1]["state"] = json!("output-available");
    answered["parts"][1]["output"] = json!({"city": "Lisbon"});
    api.model.reply(Ok(completion("You are in Lisbon.")));
    let (c, done) = chunks(&chat(&api, "s", &[user("u1", "where am I?"), answered], "submit-message", tools));
    assert!(done);
    assert_eq!(c[0], json!({"type": "start", "messageId": pending["id"]}), "start carries the extended message's id");
    assert_eq!(types(&c), ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]);
    let h = history(&api, "s");
    assert_eq!(h.len(), 2, "no new message: the stored one was extended");
    assert_eq!(h[1]["id"], pending["id"]);
    assert_eq!(h[1]["createdAt"], pending["createdAt"]);
    assert_eq!(
        h[1]["parts"],
        json!([{"type": "dynamic-tool", "toolName": "get_location", "toolCallId": "loc1", "state": "output-available",
            "input": {}, "output": {"city": "Lisbon"}}, {"type": "text", "text": "You are in Lisbon."}])
    );
    assert_eq!(h[1]["metadata"]["usage"], json!({"inputTokens": 150, "outputTokens": 25}), "both turns counted");
    // The model read the call and its result.
    let sent = api.model.requests.borrow()[1].clone();
    let n = sent["messages"].as_array().unwrap().len();
    assert_eq!(sent["messages"][n - 1]["role"], "tool");
    assert_eq!(sent["messages"][n - 1]["content"], "{\"city\":\"Lisbon\"}");
}

#[test]
fn server_tools_stream_as_provider_executed_calls_with_their_outputs() {
    let api = api();
    api.model.reply(Ok(tool_calls(&[
        ("c1", "set_context", json!({"label": "memory", "content": "likes tea"})),
        ("c2", "no_such_tool", json!({})),
    ])));
    api.model.reply(Ok(completion("Noted.")));
    let (c, _) = chunks(&chat(&api, "s", &[user("u1", "remember: tea")], "submit-message", json!({})));
    assert_eq!(
        types(&c),
        [
            "start",
            "start-step",
            "tool-input-available",
            "tool-output-available",
            "tool-input-available",
            "tool-output-error",
            "finish-step",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(c[2]["providerExecuted"], true);
    assert_eq!(c[2]["dynamic"], true);
    assert!(c[3]["output"].as_str().unwrap().starts_with("Written to memory."));
    assert_eq!(c[5]["errorText"], "Error: there is no tool named \"no_such_tool\"");
    let stored = history(&api, "s")[1].clone();
    assert_eq!(stored["parts"][0]["output"], c[3]["output"]);
    assert_eq!(stored["parts"][1]["errorText"], c[5]["errorText"]);
    assert_eq!(c.last().unwrap()["finishReason"], "stop");
}

#[test]
fn failures_before_the_start_are_json_errors_and_after_it_error_chunks_with_nothing_stored() {
    let api = api();
    // Bad bodies: 400, the model untouched.
    for body in [
        json!({"messages": [], "trigger": "submit-message"}),
        json!({"messages": [user("u1", "x")], "trigger": "resubmit"}),
        json!({"messages": [user("u1", "x")], "trigger": "submit-message", "message": user("u1", "x")}),
        json!({"messages": [user("u1", "x")], "trigger": "submit-message", "messageId": 5}),
        json!({"messages": ["x"], "trigger": "submit-message"}),
        json!({"messages": [msg("a1", "assistant", "x")], "trigger": "submit-message"}),
        json!({"messages": [user("u1", "x")], "trigger": "regenerate-message"}),
    ] {
        let r = api.post("/sessions/s/chat", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", String::from_utf8_lossy(&r.body));
    }
    // A parent the session does not have.
    let r = chat(&api, "s", &[user("u0", "x"), user("u1", "y")], "submit-message", json!({}));
    assert_eq!((r.status, r.body_json()["error"]["code"].as_str()), (409, Some("not_a_prefix")));
    assert!(api.model.requests.borrow().is_empty());
    // The model failing after the start: an error chunk, [DONE], nothing stored.
    api.model.reply(Ok(HttpResponse {
        headers: Vec::new(),
        status: 500,
        body: "{\"error\":{\"message\":\"boom\"}}".into(),
    }));
    let (c, done) = chunks(&chat(&api, "s", &[user("u1", "hello")], "submit-message", json!({})));
    assert!(done);
    assert_eq!(types(&c), ["start", "start-step", "error"]);
    assert!(c[2]["errorText"].as_str().unwrap().starts_with("llm_unavailable: "), "{}", c[2]);
    assert_eq!(c[2].as_object().unwrap().len(), 2, "type and errorText only");
    assert!(history(&api, "s").is_empty());
}

#[test]
fn answering_a_stored_user_message_again_recalls_memories_for_it() {
    let api = Api::with_config(json!({"memory": {"extract": false}})).with_model();
    let r = api.post("/memories", json!({"content": "The user likes green tea."}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    api.model.reply(Ok(completion("Green tea.")));
    chunks(&chat(&api, "s", &[user("u1", "Which tea do I like?")], "submit-message", json!({})));
    api.model.reply(Ok(completion("Green tea, still.")));
    let (c, _) = chunks(&chat(&api, "s", &[user("u1", "Which tea do I like?")], "regenerate-message", json!({})));
    let block =
        |i: usize| api.model.requests.borrow()[i]["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    assert!(block(0).contains("green tea") && block(1).contains("green tea"), "{} / {}", block(0), block(1));
    assert_eq!(c.last().unwrap()["messageMetadata"]["memories"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_websocket_chat_frame_with_a_trigger_is_refused() {
    let api = api();
    let frame = json!({"type": "chat", "messages": [user("u1", "hi")], "trigger": "submit-message"}).to_string();
    let f =
        futures::executor::block_on(session_agent_api::ws::frame(&api.env(), "s", None, &frame, &Default::default()))
            .frames;
    assert_eq!((f[0]["type"].as_str(), f[0]["code"].as_str()), (Some("error"), Some("invalid_request")), "{f:?}");
    assert!(api.model.requests.borrow().is_empty());
    assert!(history(&api, "s").is_empty());
}
