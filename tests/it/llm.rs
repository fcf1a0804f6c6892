//! The provider layer as data: configuration from variables, the request each provider gets,
//! answers and failures parsed (usage included), and `complete` (the unstreamed step a
//! summary uses) over a scripted transport.

use std::cell::RefCell;

use serde_json::{json, Value as Json};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::error::{ErrorKind, Result};
use session_agent_core::llm::*;

fn cfg(vars: &[(&str, &str)]) -> Result<LlmConfig> {
    LlmConfig::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
}

#[test]
fn configuration_from_variables() {
    assert_eq!(cfg(&[]).unwrap().provider, Provider::None);
    assert_eq!(cfg(&[("LLM_PROVIDER", "none")]).unwrap().provider, Provider::None);
    let c =
        cfg(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", "http://127.0.0.1:8089/v1/"), ("LLM_MODEL", "m")]).unwrap();
    assert_eq!((c.base_url.as_str(), c.model.as_str(), c.api_key.clone()), ("http://127.0.0.1:8089/v1", "m", None));
    let a = cfg(&[("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "claude"), ("LLM_API_KEY", "k")]).unwrap();
    assert_eq!(a.base_url, "https://api.anthropic.com/v1");
    for bad in [
        vec![("LLM_PROVIDER", "gpt")],
        vec![("LLM_PROVIDER", "openai")],
        vec![("LLM_PROVIDER", "openai"), ("LLM_MODEL", "m"), ("LLM_TIMEOUT_MS", "soon")],
    ] {
        assert_eq!(cfg(&bad).unwrap_err().kind, ErrorKind::InvalidRequest, "{bad:?}");
    }
}

#[test]
fn openai_request_and_answer() {
    let c =
        cfg(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", "http://x/v1"), ("LLM_MODEL", "m"), ("LLM_API_KEY", "sk")])
            .unwrap();
    let mut p = ChatRequest::user("hi");
    p.system = Some("be brief".into());
    p.cache = Some(session_agent_core::llm::PromptCache { key: "session-1".into(), marks: Default::default() });
    let r = build_chat_request(&c, &p, Delivery::Whole).unwrap();
    assert_eq!(r.url, "http://x/v1/chat/completions");
    assert!(r.headers.contains(&("authorization".into(), "Bearer sk".into())));
    let body: Json = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        body,
        json!({"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "max_tokens": DEFAULT_MAX_TOKENS, "stream": false, "prompt_cache_key": "session-1"})
    );
    let ok = HttpResponse {
        headers: Vec::new(),
        status: 200,
        body: json!({"choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
        .to_string(),
    };
    let done = parse_chat_response(&c, &ok).unwrap();
    assert_eq!(
        (done.text.as_str(), done.usage, done.finish_reason.as_deref()),
        ("hello", Usage { input_tokens: 12, output_tokens: 3, cached_input_tokens: 0 }, Some("stop"))
    );
    let err = parse_chat_response(
        &c,
        &HttpResponse {
            headers: Vec::new(),
            status: 429,
            body: json!({"error": {"message": "slow down"}}).to_string(),
        },
    )
    .unwrap_err();
    assert_eq!((err.kind, err.message.as_str()), (ErrorKind::LlmUnavailable, "the model answered HTTP 429"));
    assert_eq!(err.log.as_deref(), Some("the model answered HTTP 429: slow down"));
    let err =
        parse_chat_response(&c, &HttpResponse { headers: Vec::new(), status: 200, body: "<html>".into() }).unwrap_err();
    assert_eq!(err.kind, ErrorKind::LlmUnavailable);
}

#[test]
fn anthropic_request_and_answer() {
    let c = cfg(&[("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "claude"), ("LLM_API_KEY", "k")]).unwrap();
    let mut p = ChatRequest::user("hi");
    p.system = Some("sys".into());
    p.cache = Some(session_agent_core::llm::PromptCache { key: "session-1".into(), marks: Default::default() });
    let r = build_chat_request(&c, &p, Delivery::Whole).unwrap();
    assert_eq!(r.url, "https://api.anthropic.com/v1/messages");
    assert!(r.headers.contains(&("x-api-key".into(), "k".into())));
    assert!(r.headers.contains(&("anthropic-version".into(), "2023-06-01".into())));
    let body: Json = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["system"], json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]));
    assert_eq!(body["messages"], json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]));
    let ok = HttpResponse {
        headers: Vec::new(),
        status: 200,
        body: json!({"content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 7, "output_tokens": 2}})
        .to_string(),
    };
    let done = parse_chat_response(&c, &ok).unwrap();
    assert_eq!((done.text.as_str(), done.usage.input_tokens, done.usage.output_tokens), ("hello", 7, 2));
}

/// A transport that answers from a script and records what it was sent.
struct Scripted {
    answers: RefCell<Vec<Result<HttpResponse>>>,
    sent: RefCell<Vec<HttpRequest>>,
}

impl Transport for Scripted {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        self.sent.borrow_mut().push(req);
        let a = self.answers.borrow_mut().remove(0);
        Box::pin(async move { a })
    }
    fn workers_ai<'a>(&'a self, _model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>> {
        Box::pin(async move {
            Ok(json!({"response": format!("echo {}", input["messages"][0]["content"].as_str().unwrap())}))
        })
    }
}

#[test]
fn complete_maps_transport_failures_and_no_provider() {
    let c = cfg(&[("LLM_PROVIDER", "openai"), ("LLM_MODEL", "m")]).unwrap();
    let t = Scripted {
        answers: RefCell::new(vec![Err(session_agent_core::error::Error::internal("connection refused"))]),
        sent: RefCell::new(Vec::new()),
    };
    let e = futures::executor::block_on(complete(&t, &c, &ChatRequest::user("x"))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LlmUnavailable);
    assert_eq!(t.sent.borrow().len(), 1);
    let none = futures::executor::block_on(complete(&t, &LlmConfig::none(), &ChatRequest::user("x"))).unwrap_err();
    assert_eq!(none.kind, ErrorKind::NotConfigured);
    let ai = cfg(&[("LLM_PROVIDER", "workers-ai"), ("LLM_MODEL", "@cf/meta/llama")]).unwrap();
    let out = futures::executor::block_on(complete(&t, &ai, &ChatRequest::user("ping"))).unwrap();
    assert_eq!(out.text, "echo ping");
}

#[test]
fn the_memory_block_follows_the_cached_prompt_on_every_provider() {
    use session_agent_core::llm::{workers_ai, Api, Call, ChatRequest, Delivery, Format};
    let body_of = |c: &LlmConfig, req: &ChatRequest| build_chat_request(c, req, Delivery::Whole).map(|r| r.body);
    let req = ChatRequest {
        system: Some("frozen".into()),
        system_tail: Some("<user-memory>\n- x\n</user-memory>".into()),
        format: Format::JsonObject,
        cache: Some(session_agent_core::llm::PromptCache { key: "s".into(), marks: Default::default() }),
        ..ChatRequest::user("hi")
    };
    let o = cfg(&[("LLM_PROVIDER", "openai"), ("LLM_MODEL", "m")]).unwrap();
    let body: Json = serde_json::from_str(&body_of(&o, &req).unwrap()).unwrap();
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "frozen"}));
    assert_eq!(body["messages"][1], json!({"role": "system", "content": "<user-memory>\n- x\n</user-memory>"}));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    let a = cfg(&[("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "m")]).unwrap();
    let body: Json = serde_json::from_str(&body_of(&a, &req).unwrap()).unwrap();
    // The frozen prompt keeps its cache marker; the memories after it have none.
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "frozen", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "<user-memory>\n- x\n</user-memory>"}
        ])
    );
    let wai = cfg(&[("LLM_PROVIDER", "workers-ai"), ("LLM_MODEL", "m")]).unwrap();
    let Ok(Call::Binding { input: w, .. }) = workers_ai::WorkersAi.chat_call(&wai.endpoint(), &req, Delivery::Whole)
    else {
        panic!("Workers AI answers through the binding")
    };
    assert_eq!(w["messages"][0]["content"], "frozen");
    assert_eq!(w["messages"][1]["role"], "system");
    assert_eq!(w["messages"][2], json!({"role": "user", "content": "hi"}));
    // Without a tail nothing changes: one system text, no response_format.
    let plain = ChatRequest { system: Some("frozen".into()), ..ChatRequest::user("hi") };
    let body: Json = serde_json::from_str(&body_of(&o, &plain).unwrap()).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 2);
    assert!(body.get("response_format").is_none());
}

#[test]
fn embeddings_requests_and_answers() {
    use session_agent_core::llm::embeddings::*;
    use session_agent_core::llm::{openai::OpenAi, workers_ai::WorkersAi, Api, Call, Returned};
    let openai_request = |cfg: &EmbeddingsConfig, texts: &[String]| match OpenAi.embeddings_call(&cfg.endpoint(), texts)
    {
        Ok(Call::Http(req)) => req,
        other => panic!("an HTTP request: {other:?}"),
    };
    let parse_openai = |body: &str, n| vectors(&OpenAi, Returned::Body(body), n);
    let workers_ai_input =
        |texts: &[String]| match WorkersAi.embeddings_call(&EmbeddingsConfig::none().endpoint(), texts) {
            Ok(Call::Binding { input, .. }) => input,
            other => panic!("a binding call: {other:?}"),
        };
    let parse_workers_ai = |answer: &Json, n| vectors(&WorkersAi, Returned::Binding(answer), n);
    let vars = |v: &[(&str, &str)]| {
        let v: Vec<(String, String)> = v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        EmbeddingsConfig::from_vars(move |k| v.iter().find(|(n, _)| n == k).map(|(_, x)| x.clone()))
    };
    assert!(!vars(&[]).unwrap().is_on());
    assert!(vars(&[("EMBEDDINGS_PROVIDER", "cohere"), ("EMBEDDINGS_MODEL", "m")]).is_err());
    assert!(vars(&[("EMBEDDINGS_PROVIDER", "openai")]).unwrap_err().message.contains("EMBEDDINGS_MODEL"));
    let cfg = vars(&[
        ("EMBEDDINGS_PROVIDER", "openai"),
        ("EMBEDDINGS_MODEL", "text-embedding-3-small"),
        ("LLM_BASE_URL", "http://127.0.0.1:9/v1/"),
        ("LLM_API_KEY", "k"),
    ])
    .unwrap();
    let req = openai_request(&cfg, &["a".into(), "b".into()]);
    assert_eq!(req.url, "http://127.0.0.1:9/v1/embeddings");
    assert!(req.headers.contains(&("authorization".into(), "Bearer k".into())));
    assert_eq!(
        serde_json::from_str::<Json>(&req.body).unwrap(),
        json!({"model": "text-embedding-3-small", "input": ["a", "b"]})
    );
    // Answers may come in any order (index); a missing vector or a non-number fails.
    let v = parse_openai(r#"{"data":[{"index":1,"embedding":[0.5,1]},{"index":0,"embedding":[1,0]}]}"#, 2).unwrap();
    assert_eq!(v, vec![vec![1.0, 0.0], vec![0.5, 1.0]]);
    assert!(parse_openai(r#"{"data":[{"index":0,"embedding":[1]}]}"#, 2).is_err());
    assert!(parse_openai(r#"{"error":"x"}"#, 1).is_err());
    // Workers AI (`@cf/baai/bge-*`): {text: [...]} in, {shape, data: [[...]]} out.
    let w = vars(&[("EMBEDDINGS_PROVIDER", "workers-ai"), ("EMBEDDINGS_MODEL", "@cf/baai/bge-small-en-v1.5")]).unwrap();
    assert_eq!(w.base_url, "");
    assert_eq!(workers_ai_input(&["a".into()]), json!({"text": ["a"]}));
    let v = parse_workers_ai(&json!({"shape": [2, 2], "data": [[0.1, 0.2], [0.3, 0.4]]}), 2).unwrap();
    assert_eq!(v.len(), 2);
    assert!((v[1][1] - 0.4).abs() < 1e-6);
    assert!(parse_workers_ai(&json!({"shape": [1, 2], "data": [[0.1, 0.2]]}), 2).is_err());
    assert!(parse_workers_ai(&json!({"result": []}), 1).is_err());
}
