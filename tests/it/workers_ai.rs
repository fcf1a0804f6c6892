//! The Workers AI provider through a scripted `AI` binding: the input a function-calling model
//! gets (tools offered, calls and results as `tool_calls` and `role: "tool"` messages) and the
//! one a text-only model gets, `LLM_TOOLS`, whole answers with tool calls in both documented
//! shapes, and streamed answers (`response` pieces, usage in the last event, tool calls whole
//! in an event or in fragments, OpenAI-style chunks, errors, a cut stream, a binding that
//! answers whole).

use std::cell::RefCell;

use serde_json::{json, Value as Json};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::error::{ErrorKind, Result};
use session_agent_core::llm::*;

/// A function-calling model (in the documented list).
const TOOL_MODEL: &str = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";
/// A model not in the list: text only unless `LLM_TOOLS=on`.
const TEXT_MODEL: &str = "@cf/meta/llama-3.1-8b-instruct";

fn cfg(vars: &[(&str, &str)]) -> Result<LlmConfig> {
    let mut all = vec![("LLM_PROVIDER", "workers-ai")];
    all.extend_from_slice(vars);
    LlmConfig::from_vars(|k| all.iter().rev().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
}

fn model(name: &str) -> LlmConfig {
    cfg(&[("LLM_MODEL", name)]).unwrap()
}

/// The binding as a script: a streamed run hands `events` over in `piece`-byte pieces (or the
/// `whole` answer as its JSON, as a model that does not stream would); a run for a whole answer
/// gets `whole`. Every input is recorded.
struct Binding {
    events: String,
    piece: usize,
    whole: Json,
    inputs: RefCell<Vec<(String, Json)>>,
}

impl Binding {
    fn streaming(events: &[&str]) -> Binding {
        let events = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        Binding { events, piece: 5, whole: Json::Null, inputs: RefCell::default() }
    }

    fn whole(answer: Json) -> Binding {
        Binding { events: String::new(), piece: 5, whole: answer, inputs: RefCell::default() }
    }

    fn input(&self, at: usize) -> Json {
        self.inputs.borrow()[at].1.clone()
    }
}

impl Transport for Binding {
    fn send(&self, _req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        panic!("Workers AI goes through the binding")
    }
    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>> {
        self.inputs.borrow_mut().push((model.to_owned(), input));
        Box::pin(async move { Ok(self.whole.clone()) })
    }
    fn workers_ai_stream<'a>(
        &'a self,
        model: &'a str,
        input: Json,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<()>> {
        assert_eq!(input["stream"], json!(true), "a streamed run asks for a stream");
        if self.events.is_empty() {
            return Box::pin(async move { on_chunk(&self.workers_ai(model, input).await?.to_string()) });
        }
        self.inputs.borrow_mut().push((model.to_owned(), input));
        Box::pin(async move {
            let bytes = self.events.as_bytes();
            for piece in bytes.chunks(self.piece) {
                on_chunk(std::str::from_utf8(piece).expect("the scripts are ASCII"))?;
            }
            Ok(())
        })
    }
}

/// Runs `chat` on `c`, collecting the pieces it streamed.
fn run(t: &Binding, c: &LlmConfig, req: &ChatRequest) -> (Result<ChatReply>, Vec<String>) {
    let mut deltas = Vec::new();
    let out = futures::executor::block_on(chat(t, c, req, &mut |p: &Piece| {
        if let Piece::Text(s) = p {
            deltas.push(s.clone());
        }
        Ok(())
    }));
    (out, deltas)
}

fn conversation() -> ChatRequest {
    ChatRequest {
        system: Some("be brief".into()),
        messages: vec![
            ChatMessage::User { text: "what do I like?".into() },
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall { id: "call_1".into(), name: "recall".into(), input: json!({"q": "likes"}) }],
            },
            ChatMessage::Tool { call_id: "call_1".into(), name: "recall".into(), output: "tea".into() },
        ],
        tools: vec![ToolSpec {
            name: "recall".into(),
            description: "Recall memories".into(),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }],
        max_tokens: Some(100),
        ..ChatRequest::default()
    }
}

#[test]
fn a_function_calling_model_gets_the_tools_and_the_results_as_tool_messages() {
    let t = Binding::whole(json!({"response": "You like tea."}));
    let out = futures::executor::block_on(complete(&t, &model(TOOL_MODEL), &conversation())).unwrap();
    assert_eq!(out.text, "You like tea.");
    assert_eq!(t.inputs.borrow()[0].0, TOOL_MODEL);
    assert_eq!(
        t.input(0),
        json!({
            "max_tokens": 100,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "what do I like?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "0000call1", "type": "function", "function": {"name": "recall", "arguments": "{\"q\":\"likes\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "0000call1", "name": "recall", "content": "tea"},
            ],
            "tools": [{"name": "recall", "description": "Recall memories",
                       "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}],
        })
    );
}

#[test]
fn llm_tools_decides_which_models_get_tools() {
    let offered = |c: &LlmConfig| {
        let t = Binding::whole(json!({"response": "ok"}));
        futures::executor::block_on(complete(&t, c, &conversation())).unwrap();
        let input = t.input(0);
        (input.get("tools").is_some(), input["messages"][3]["role"].as_str().unwrap().to_owned())
    };
    assert_eq!(offered(&model(TOOL_MODEL)), (true, "tool".to_owned()));
    assert_eq!(offered(&model(TEXT_MODEL)), (false, "user".to_owned()));
    assert_eq!(offered(&cfg(&[("LLM_MODEL", TEXT_MODEL), ("LLM_TOOLS", "on")]).unwrap()), (true, "tool".to_owned()));
    assert_eq!(offered(&cfg(&[("LLM_MODEL", TOOL_MODEL), ("LLM_TOOLS", "off")]).unwrap()), (false, "user".to_owned()));
    assert_eq!(cfg(&[("LLM_MODEL", TOOL_MODEL), ("LLM_TOOLS", "auto")]).unwrap().tools, ToolUse::Auto);
    let e = cfg(&[("LLM_MODEL", TOOL_MODEL), ("LLM_TOOLS", "yes")]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(e.message.contains("LLM_TOOLS"), "{}", e.message);
}

// invariant 26 (docs/ARCHITECTURE.md)
#[test]
fn whole_answers_with_tool_calls_in_either_shape() {
    let reply = |answer: Json| {
        let t = Binding::whole(answer);
        futures::executor::block_on(complete(&t, &model(TOOL_MODEL), &conversation())).unwrap()
    };
    // The documented shape: `{name, arguments}`, the arguments an object or a JSON string.
    let flat = reply(json!({
        "response": null,
        "tool_calls": [
            {"name": "recall", "arguments": {"q": "likes"}},
            {"name": "recall", "arguments": "{\"q\":\"dislikes\"}"},
            {"name": "", "arguments": {}},
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
    }));
    assert_eq!(flat.text, "");
    assert_eq!(flat.usage, Usage { input_tokens: 50, output_tokens: 9, cached_input_tokens: 0 });
    let calls: Vec<(&str, &Json)> = flat.tool_calls.iter().map(|c| (c.name.as_str(), &c.input)).collect();
    assert_eq!(calls, vec![("recall", &json!({"q": "likes"})), ("recall", &json!({"q": "dislikes"}))]);
    // Ids made up for calls without one: nine letters and digits, distinct, the same each time.
    let ids: Vec<&str> = flat.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert!(ids.iter().all(|id| id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric())), "{ids:?}");
    assert_ne!(ids[0], ids[1]);
    assert_eq!(
        reply(json!({"tool_calls": [{"name": "recall", "arguments": {"q": "likes"}}]})).tool_calls[0].id,
        ids[0]
    );
    // The newer models: `{id, type: "function", function: {name, arguments}}`.
    let nested = reply(json!({
        "response": "Let me look.",
        "tool_calls": [{"id": "abc123xyz", "type": "function",
                        "function": {"name": "recall", "arguments": "{\"q\":\"tea\"}"}}]
    }));
    assert_eq!(nested.text, "Let me look.");
    assert_eq!(
        nested.tool_calls,
        vec![ToolCall { id: "abc123xyz".into(), name: "recall".into(), input: json!({"q": "tea"}) }]
    );
    // An answer in OpenAI's format (`choices`), as some models give.
    let compat = reply(json!({
        "choices": [{"message": {"content": "Tea.", "tool_calls": []}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}
    }));
    assert_eq!((compat.text.as_str(), compat.usage.output_tokens), ("Tea.", 1));
    // A JSON-mode answer (an object) reads as its JSON text.
    assert_eq!(reply(json!({"response": {"a": 1}})).text, "{\"a\":1}");
}

#[test]
fn a_streamed_answer_arrives_in_pieces_with_its_usage() {
    let t = Binding::streaming(&[
        r#"{"response":"You ","p":"abc"}"#,
        r#"{"response":"like "}"#,
        r#"{"response":"tea."}"#,
        r#"{"response":"","usage":{"prompt_tokens":40,"completion_tokens":3,"total_tokens":43}}"#,
        "[DONE]",
    ]);
    let (out, deltas) = run(&t, &model(TEXT_MODEL), &ChatRequest::user("hi"));
    let out = out.unwrap();
    assert_eq!(deltas, vec!["You ", "like ", "tea."]);
    assert_eq!(out.text, "You like tea.");
    assert_eq!(out.usage, Usage { input_tokens: 40, output_tokens: 3, cached_input_tokens: 0 });
    assert!(out.tool_calls.is_empty());
}

#[test]
fn streamed_tool_calls_in_either_format() {
    // Workers AI's own events: the calls whole, in an event of their own.
    let t = Binding::streaming(&[
        r#"{"response":"Checking."}"#,
        r#"{"response":"","tool_calls":[{"name":"recall","arguments":{"q":"likes"}}]}"#,
        r#"{"response":"","usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
        "[DONE]",
    ]);
    let (out, deltas) = run(&t, &model(TOOL_MODEL), &conversation());
    let out = out.unwrap();
    assert_eq!(deltas, vec!["Checking."]);
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!((out.tool_calls[0].name.as_str(), &out.tool_calls[0].input), ("recall", &json!({"q": "likes"})));
    assert!(t.input(0).get("tools").is_some());
    // Workers AI's own events with the call in fragments (`index`, the arguments' text spread
    // over events), closed by a `null` entry.
    let t = Binding::streaming(&[
        r#"{"response":"","tool_calls":[{"index":0,"id":"abc123def","function":{"name":"recall","arguments":""}}]}"#,
        r#"{"response":"","tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}"#,
        r#"{"response":"","tool_calls":[{"index":0,"function":{"arguments":"\"tea\"}"}}]}"#,
        r#"{"response":"","tool_calls":[{"id":null,"type":null,"function":{"name":null,"arguments":null}}]}"#,
        "[DONE]",
    ]);
    let (out, _) = run(&t, &model(TOOL_MODEL), &conversation());
    assert_eq!(
        out.unwrap().tool_calls,
        vec![ToolCall { id: "abc123def".into(), name: "recall".into(), input: json!({"q": "tea"}) }]
    );
    // OpenAI-style chunks (`choices[].delta`), the arguments in fragments.
    let t = Binding::streaming(&[
        r#"{"choices":[{"delta":{"content":"Hm."}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"xyz987abc","function":{"name":"recall","arguments":"{\"q\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"tea\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":4}}"#,
        "[DONE]",
    ]);
    let (out, deltas) = run(&t, &model(TOOL_MODEL), &conversation());
    let out = out.unwrap();
    assert_eq!(deltas, vec!["Hm."]);
    assert_eq!(
        out.tool_calls,
        vec![ToolCall { id: "xyz987abc".into(), name: "recall".into(), input: json!({"q": "tea"}) }]
    );
    assert_eq!(out.usage, Usage { input_tokens: 7, output_tokens: 4, cached_input_tokens: 0 });
}

#[test]
fn a_surrogate_pair_split_across_events_arrives_whole() {
    let t = Binding::streaming(&[r#"{"response":"a\ud83d"}"#, r#"{"response":"\ude00b"}"#, "[DONE]"]);
    let (out, deltas) = run(&t, &model(TEXT_MODEL), &ChatRequest::user("hi"));
    assert_eq!(out.unwrap().text, "a😀b");
    assert_eq!(deltas.concat(), "a😀b");
}

#[test]
fn stream_failures_are_llm_unavailable() {
    for events in [
        vec![r#"{"response":"half"}"#],
        vec![r#"{"response":"x"}"#, r#"{"error":"model overloaded"}"#, "[DONE]"],
        vec!["not json", "[DONE]"],
    ] {
        let t = Binding::streaming(&events);
        let (out, _) = run(&t, &model(TEXT_MODEL), &ChatRequest::user("hi"));
        assert_eq!(out.unwrap_err().kind, ErrorKind::LlmUnavailable, "{events:?}");
    }
    let t = Binding::whole(json!({"error": "no such model"}));
    let (out, _) = run(&t, &model(TEXT_MODEL), &ChatRequest::user("hi"));
    assert_eq!(out.unwrap_err().kind, ErrorKind::LlmUnavailable);
}

#[test]
fn a_model_that_answers_whole_when_asked_to_stream_is_read_as_a_whole_answer() {
    let t = Binding::whole(json!({
        "response": "Tea.",
        "tool_calls": [{"name": "recall", "arguments": {"q": "x"}}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1}
    }));
    let (out, deltas) = run(&t, &model(TOOL_MODEL), &conversation());
    let out = out.unwrap();
    assert_eq!(deltas, vec!["Tea."]);
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(out.usage, Usage { input_tokens: 2, output_tokens: 1, cached_input_tokens: 0 });
    assert_eq!(t.input(0)["stream"], json!(true));
}

/// The binding as a script that keeps the model waiting: no answer ever (`Never`), or a stream's
/// first piece then the rest after the timeout passed (`Late`). Its clock is always past due:
/// `sleep` ends at once.
enum Slow {
    Never,
    Late,
}

/// Pending once (waking itself), then ready: time passing while a call waits.
struct Later(bool);

impl std::future::Future for Later {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

impl Transport for Slow {
    fn send(&self, _req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        panic!("Workers AI goes through the binding")
    }
    fn workers_ai<'a>(&'a self, _model: &'a str, _input: Json) -> BoxFuture<'a, Result<Json>> {
        Box::pin(std::future::pending())
    }
    fn workers_ai_stream<'a>(
        &'a self,
        _model: &'a str,
        _input: Json,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<()>> {
        match self {
            Slow::Never => Box::pin(std::future::pending()),
            Slow::Late => Box::pin(async move {
                on_chunk(&format!("data: {}\n\n", json!({"response": "Hel"})))?;
                Later(false).await;
                Later(false).await;
                on_chunk(&format!("data: {}\n\ndata: [DONE]\n\n", json!({"response": "lo."})))
            }),
        }
    }
    fn sleep(&self, _ms: u64) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[test]
fn a_binding_that_does_not_answer_in_time_is_llm_unavailable_and_a_started_stream_runs_on() {
    let c = cfg(&[("LLM_MODEL", TOOL_MODEL), ("LLM_TIMEOUT_MS", "250")]).unwrap();
    let req = conversation();
    let ask = |t: &Slow, delivery: Delivery| {
        let mut text = String::new();
        let mut on = |p: &Piece| {
            if let Piece::Text(s) = p {
                text.push_str(s);
            }
            Ok(())
        };
        let out = match delivery {
            Delivery::Streamed => futures::executor::block_on(chat(t, &c, &req, &mut on)),
            Delivery::Whole => futures::executor::block_on(complete(t, &c, &req)),
        };
        (out.map(|r| r.text), text)
    };
    // No answer, whole or streamed: the timeout ends the call.
    for delivery in [Delivery::Whole, Delivery::Streamed] {
        let e = ask(&Slow::Never, delivery).0.unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::LlmUnavailable, "the model did not answer within 250 ms"));
    }
    // A stream that started is not cut by the timeout.
    let (reply, streamed) = ask(&Slow::Late, Delivery::Streamed);
    assert_eq!((reply.unwrap(), streamed.as_str()), ("Hello.".to_owned(), "Hello."));
}
