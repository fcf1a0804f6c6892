//! Turns that keep going (API v3): a stop keeps what was shown (`metadata.stopped`, cut back to
//! what the client holds, the same user message answered again beside it), failures stay all or
//! nothing, `chat.onDisconnect: "finish"` stores the user message first and runs on without its
//! client, the stop route, the resume request, and the agent-level `POST /chat` (the default
//! session).

use crate::support::{completion, msg, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_api::{self as api, Request};
use session_agent_core::error::Error;
use session_agent_core::live::stop::Stop;
use session_agent_core::llm::HttpResponse;

fn api_with(chat: Json) -> Api {
    Api::with_config(json!({"chat": chat})).with_model()
}

fn user(id: &str, text: &str) -> Json {
    msg(id, "user", text)
}

/// An OpenAI-compatible streamed answer in `pieces`.
fn streamed(pieces: &[&str]) -> HttpResponse {
    let mut body = String::new();
    for p in pieces {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3}});
    body.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
    HttpResponse { headers: Vec::new(), status: 200, body }
}

fn history(api: &Api, sid: &str) -> Vec<Json> {
    api.get(&format!("/sessions/{sid}/history")).body_json()["messages"].as_array().unwrap().clone()
}

fn texts(m: &Json) -> Vec<String> {
    m["parts"].as_array().unwrap().iter().filter_map(|p| p["text"].as_str().map(str::to_owned)).collect()
}

/// Runs a streamed turn whose client takes `keep` events and then goes away (its sends fail
/// and `gone` is set, as the Durable Object does when the body is dropped). Returns the texts
/// it was sent.
fn stream_until(api: &Api, req: &Request, keep: usize) -> Vec<String> {
    let env = api.env();
    let gone = Stop::default();
    let mut got = Vec::new();
    let mut send = |s: api::chat::Streamed| match s {
        api::chat::Streamed::Data(d) if got.len() < keep => {
            got.push(d);
            Ok(())
        }
        _ => {
            gone.stop();
            Err(Error::conflict("the client went away"))
        }
    };
    let dialect = api::chat::Dialect::of(req).expect("a streamed chat");
    let sid = req.json_object().ok().and_then(|b| b.get("id").and_then(Json::as_str).map(str::to_owned));
    let sid = req.path.strip_prefix("/sessions/").and_then(|p| p.split('/').next()).map(str::to_owned).or(sid);
    let sid = sid.unwrap_or_else(|| "dashboard".into());
    let after = futures::executor::block_on(api::chat::stream_turn(&env, &sid, req, dialect, &gone, &mut send));
    futures::executor::block_on(api::after(&env, &after));
    got
}

fn ui_body(sid: &str, messages: &[Json]) -> Json {
    json!({"id": sid, "messages": messages, "trigger": "submit-message"})
}

// invariant 21 (docs/ARCHITECTURE.md)
#[test]
fn a_stop_mid_stream_stores_what_was_shown_and_the_client_continues_from_its_copy() {
    let api = api_with(json!({}));
    api.model.reply(Ok(streamed(&["Hello", " there,", " friend", " of mine."])));
    let req = Request::new(Method::Post, "/sessions/s/chat").json(&ui_body("s", &[user("u1", "hi")]));
    // start, start-step, text-start + "Hello", then " there," — and the client is gone.
    let got = stream_until(&api, &req, 3);
    assert!(got.concat().contains("Hello"), "{got:?}");
    let h = history(&api, "s");
    assert_eq!(h.len(), 2, "the user message and the reply so far: {h:?}");
    let reply = &h[1];
    assert_eq!(reply["metadata"]["stopped"], true);
    let text = texts(reply).concat();
    assert!(text.starts_with("Hello") && !text.contains("mine"), "stored as far as it streamed: {text:?}");
    assert!(reply["metadata"]["usage"]["inputTokens"].as_i64().unwrap() > 0, "an estimate: {reply}");
    assert_eq!(api.count("SELECT COUNT(*) FROM memories"), 0);

    // The client saw only "Hello" (the rest was in flight): its copy is shorter, and accepted.
    let held = json!({"id": reply["id"], "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": "Hel", "state": "done"}]});
    api.model.reply(Ok(completion("Go on.")));
    let r = api.post("/sessions/s/chat", ui_body("s", &[user("u1", "hi"), held, user("u2", "and?")]));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let h = history(&api, "s");
    assert_eq!(h.len(), 4, "{h:?}");
    assert_eq!(texts(&h[1]), ["Hel"], "the stored copy was cut back to the client's");
    assert_eq!(h[1]["metadata"]["stopped"], true);
    assert_eq!(texts(&h[3]), ["Go on."]);

    // A copy that is not a prefix of the stopped reply is an edit: refused, nothing changed.
    let forged = json!({"id": h[1]["id"], "role": "assistant", "parts": [{"type": "text", "text": "Bye"}]});
    let r = api.post("/sessions/s/chat", ui_body("s", &[user("u1", "hi"), forged, user("u3", "x")]));
    assert_eq!((r.status, r.body_json()["error"]["code"].as_str()), (409, Some("not_a_prefix")));
    assert_eq!(history(&api, "s").len(), 4);
}

#[test]
fn a_stop_before_the_first_piece_stores_the_user_message_alone_and_an_empty_reply_is_none() {
    let api = api_with(json!({}));
    api.model.reply(Ok(streamed(&["Never", " shown."])));
    let req = Request::new(Method::Post, "/sessions/s/chat").json(&ui_body("s", &[user("u1", "hi")]));
    stream_until(&api, &req, 0);
    let h = history(&api, "s");
    assert_eq!(h.iter().map(|m| m["id"].as_str().unwrap()).collect::<Vec<_>>(), ["u1"], "{h:?}");
    // The AI SDK keeps an empty assistant message after such a stop: it stands for no reply.
    let empty = json!({"id": "gone", "role": "assistant", "parts": [{"type": "step-start"}]});
    api.model.reply(Ok(completion("Hi!")));
    let r = api.post("/sessions/s/chat", ui_body("s", &[user("u1", "hi"), empty, user("u2", "hello?")]));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let h = history(&api, "s");
    assert_eq!(h.iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["user", "user", "assistant"]);
    assert_eq!(h[1]["id"], "u2", "under the first user message");
}

#[test]
fn the_same_user_message_sent_again_after_a_stop_is_answered_beside_the_stopped_reply() {
    let api = api_with(json!({}));
    api.model.reply(Ok(streamed(&["Part", " of it", " and more"])));
    let req = Request::new(Method::Post, "/sessions/s/chat")
        .header("accept", "text/event-stream")
        .json(&json!({"message": user("u1", "tell me")}));
    stream_until(&api, &req, 1);
    let stopped = history(&api, "s")[1].clone();
    assert_eq!(stopped["metadata"]["stopped"], true);
    api.model.reply(Ok(completion("All of it.")));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "tell me")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let again = &r.body_json()["messages"][0];
    assert_ne!(again["id"], stopped["id"]);
    assert!(again["metadata"].get("stopped").is_none());
    let branches = api.get("/sessions/s/messages/u1/branches").body_json();
    assert_eq!(branches["messages"].as_array().map(Vec::len), Some(2), "siblings: {branches}");
    // Once answered whole, the same message again is a conflict, as before.
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "tell me")}));
    assert_eq!(r.status, 409);
}

// invariant 21 (docs/ARCHITECTURE.md)
#[test]
fn a_failure_stays_all_or_nothing() {
    let api = api_with(json!({}));
    api.model.reply(Ok(HttpResponse {
        headers: Vec::new(),
        status: 500,
        body: "{\"error\":{\"message\":\"down\"}}".into(),
    }));
    let r = api.post("/sessions/s/chat", json!({"message": user("u1", "hi")}));
    assert_eq!(r.status, 503);
    assert_eq!(api.get("/sessions/s").status, 404, "nothing stored");
}

#[test]
fn on_disconnect_finish_stores_the_user_message_first_and_runs_without_its_client() {
    let api = api_with(json!({"onDisconnect": "finish"}));
    api.model.reply(Ok(streamed(&["One", " two", " three."])));
    let req = Request::new(Method::Post, "/sessions/s/chat").json(&ui_body("s", &[user("u1", "count")]));
    stream_until(&api, &req, 1);
    let h = history(&api, "s");
    assert_eq!(h.len(), 2);
    assert_eq!(texts(&h[1]).concat(), "One two three.", "stored whole");
    assert!(h[1]["metadata"].get("stopped").is_none());
    // A failed turn in this mode leaves its user message without a reply.
    api.model.reply(Ok(HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    let r = api.post("/sessions/s/chat", json!({"message": user("u2", "again"), "parentId": h[1]["id"]}));
    assert_eq!(r.status, 503);
    let h = history(&api, "s");
    assert_eq!(h.last().unwrap()["id"], "u2", "{h:?}");
    // An unknown setting is refused with the config.
    assert!(session_agent_core::config::SessionConfig::from_json(r#"{"chat":{"onDisconnect":"pause"}}"#).is_err());
}

#[test]
fn the_stop_route_and_the_resume_request_when_nothing_runs() {
    let api = api_with(json!({}));
    let r = api.send(Request::new(Method::Post, "/sessions/s/chat/stop"));
    assert_eq!((r.status, r.body_json()), (200, json!({"stopped": false})));
    for path in ["/sessions/s/chat/anything/stream", "/chat/s/stream"] {
        let r = api.get(path);
        assert_eq!(r.status, 204, "{path}: {}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(api.get("/chat/bad%20id/stream").status, 400);
    assert_eq!(api.get("/sessions/s").status, 404, "nothing was created");
}

#[test]
fn the_resume_request_replays_a_running_turn_from_its_start_and_follows_it_to_the_end() {
    use crate::support::{spawn, stall};
    use futures::stream::LocalBoxStream;
    use futures::StreamExt;
    use session_agent_api::object::Reply;
    use std::cell::RefCell;
    use std::rc::Rc;
    let api = Rc::new(api_with(json!({})));
    // The model answers after a pause: a resume request arrives while the turn runs.
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    *api.model.gate.borrow_mut() = Some(rx);
    api.model.reply(Ok(streamed(&["Slow", " answer."])));
    let (a, b) = (api.clone(), api.clone());
    let turn_body = Rc::new(RefCell::new(None));
    let resumed = Rc::new(RefCell::new(None));
    let (t, r) = (turn_body.clone(), resumed.clone());
    // The turn and the resume request as the Durable Object answers them, each a stream.
    let body_of = |reply: Reply| -> LocalBoxStream<'static, Vec<u8>> {
        match reply {
            Reply::Stream { body, .. } => body,
            _ => panic!("a stream"),
        }
    };
    spawn(async move {
        a.tick();
        let req = Request::new(Method::Post, "/sessions/s/chat").json(&ui_body("s", &[user("u1", "hi")]));
        let chunks: Vec<Vec<u8>> = body_of(a.object.fetch(req).await).collect().await;
        *t.borrow_mut() = Some(chunks.concat());
    });
    stall();
    // Answered whole (`api::handle`, which cannot stream) a running turn is a 409; the Durable
    // Object streams it, as here.
    let whole =
        futures::executor::block_on(api::handle(&api.env(), &Request::new(Method::Get, "/sessions/s/chat/x/stream")));
    assert_eq!(whole.status, 409);
    spawn(async move {
        b.tick();
        let reply = b.object.fetch(Request::new(Method::Get, "/sessions/s/chat/x/stream")).await;
        let Reply::Stream { headers, body } = reply else { panic!("a stream") };
        let buffered = headers.iter().find(|(k, _)| k == api::chat::REPLAY_BYTES_HEADER).map(|(_, v)| v.clone());
        assert!(buffered.is_some_and(|b| b.parse::<usize>().unwrap() > 0));
        let chunks: Vec<Vec<u8>> = body.collect().await;
        *r.borrow_mut() = Some(String::from_utf8(chunks.concat()).unwrap());
    });
    stall();
    assert!(resumed.borrow().is_none(), "following the running turn");
    tx.send(()).unwrap();
    stall();
    let turn = String::from_utf8(turn_body.borrow().clone().unwrap()).unwrap();
    let resumed = resumed.borrow().clone().unwrap();
    let start = |s: &str| s.lines().next().unwrap().to_owned();
    assert_eq!(start(&resumed), start(&turn), "the same start (the stored id)");
    let text = |s: &str| -> String {
        s.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Json>(d).ok())
            .filter(|c| c["type"] == "text-delta")
            .map(|c| c["delta"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(text(&resumed), "Slow answer.", "{resumed}");
    assert_eq!(text(&resumed), text(&turn));
    assert!(resumed.ends_with("data: [DONE]\n\n") && resumed.contains("\"type\":\"finish\""), "{resumed}");
    assert_eq!(api.get("/chat/s/stream").status, 204, "over");
    assert!(matches!(api.reply(Request::new(Method::Get, "/chat/s/stream")), Reply::Whole(r) if r.status == 204));
}

#[test]
fn post_chat_at_the_agent_level_talks_to_the_default_or_the_named_session() {
    let api = api_with(json!({}));
    api.model.reply(Ok(completion("Hi.")));
    let r = api.post("/chat", json!({"message": user("u1", "hello")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let info = api.get("/sessions/dashboard").body_json();
    assert_eq!((info["id"].as_str(), info["name"].as_str()), (Some("dashboard"), Some("dashboard")));
    api.model.reply(Ok(completion("Yes.")));
    assert_eq!(api.post("/chat", json!({"session_id": "hook", "message": user("u1", "x")})).status, 201);
    api.model.reply(Ok(completion("Yes.")));
    assert_eq!(api.post("/chat", json!({"sessionId": "named", "message": user("u1", "x")})).status, 201);
    api.model.reply(Ok(completion("Yes.")));
    let r = api.post("/chat", json!({"id": "chat-1", "messages": [user("u1", "x")], "trigger": "submit-message"}));
    assert_eq!(r.status, 200);
    for sid in ["hook", "named", "chat-1"] {
        assert_eq!(history(&api, sid).len(), 2, "{sid}");
    }
    // Bad names are 400 with nothing stored.
    for body in
        [json!({"sessionId": 5, "message": user("u9", "x")}), json!({"sessionId": "a b", "message": user("u9", "x")})]
    {
        let r = api.post("/chat", body);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(api.count("SELECT COUNT(*) FROM sessions"), 4);
}
