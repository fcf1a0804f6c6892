//! A chat step with tools as data: each provider's exact request, whole answers parsed, the
//! server-sent-event decoder on awkward input, and `chat` streamed over a scripted transport
//! that hands the body over in 7-byte pieces (events split anywhere) or, through the trait's
//! default `send_stream`, all at once.

use std::cell::RefCell;

use serde_json::{json, Value as Json};
use session_agent_core::blobs::BoxFuture;
use session_agent_core::config::CacheConfig;
use session_agent_core::error::{Error, ErrorKind, Result};
use session_agent_core::llm::*;

fn cfg(provider: Provider, base_url: &str, key: Option<&str>) -> LlmConfig {
    LlmConfig {
        provider,
        base_url: base_url.into(),
        model: "m".into(),
        api_key: key.map(str::to_owned),
        timeout_ms: DEFAULT_TIMEOUT_MS,
        tools: ToolUse::Auto,
    }
}

fn openai() -> LlmConfig {
    cfg(Provider::OpenAi, "http://x/v1", Some("sk"))
}

fn anthropic() -> LlmConfig {
    cfg(Provider::Anthropic, "https://api.anthropic.com/v1", Some("k"))
}

fn body_of(r: &HttpRequest) -> Json {
    serde_json::from_str(&r.body).unwrap()
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "search".into(),
            description: "Search the history".into(),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        },
        ToolSpec { name: "now".into(), description: "The time".into(), input_schema: json!({"type": "object"}) },
    ]
}

/// user, assistant calling two tools, both results, a user follow-up, a text answer.
fn conversation() -> ChatRequest {
    ChatRequest {
        system: Some("be brief".into()),
        messages: vec![
            ChatMessage::User { text: "find cats".into() },
            ChatMessage::Assistant {
                text: "Looking.".into(),
                tool_calls: vec![
                    ToolCall { id: "call_1".into(), name: "search".into(), input: json!({"q": "cats"}) },
                    ToolCall { id: "call_2".into(), name: "now".into(), input: json!({}) },
                ],
            },
            ChatMessage::Tool { call_id: "call_1".into(), name: "search".into(), output: "3 hits".into() },
            ChatMessage::Tool { call_id: "call_2".into(), name: "now".into(), output: "noon".into() },
            ChatMessage::User { text: "and dogs?".into() },
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall { id: "call_3".into(), name: "search".into(), input: json!({"q": "dogs"}) }],
            },
            ChatMessage::Tool { call_id: "call_3".into(), name: "search".into(), output: "none".into() },
        ],
        tools: tools(),
        max_tokens: None,
        cache: Some(PromptCache { key: "session-1".into(), marks: CacheConfig::default() }),
        ..ChatRequest::default()
    }
}

#[test]
fn openai_request_body() {
    let r = build_chat_request(&openai(), &conversation(), Delivery::Streamed).unwrap();
    assert_eq!(r.url, "http://x/v1/chat/completions");
    assert!(r.headers.contains(&("authorization".into(), "Bearer sk".into())));
    assert!(r.headers.contains(&("content-type".into(), "application/json".into())));
    assert_eq!(
        body_of(&r),
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "find cats"},
                {"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"cats\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "3 hits"},
                {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
                {"role": "user", "content": "and dogs?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_3", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"dogs\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_3", "content": "none"},
            ],
            "max_tokens": DEFAULT_MAX_TOKENS,
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [
                {"type": "function", "function": {"name": "search", "description": "Search the history",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
                {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object"}}},
            ],
            "prompt_cache_key": "session-1",
        })
    );

    // Not streamed, no tools, no key, no cache key: none of the optional fields.
    let plain = ChatRequest {
        messages: vec![
            ChatMessage::User { text: "hi".into() },
            ChatMessage::Assistant { text: "hello".into(), tool_calls: vec![] },
        ],
        max_tokens: Some(100),
        ..ChatRequest::default()
    };
    let r = build_chat_request(&cfg(Provider::OpenAi, "http://x/v1", None), &plain, Delivery::Whole).unwrap();
    assert!(!r.headers.iter().any(|(h, _)| h == "authorization"));
    assert_eq!(
        body_of(&r),
        json!({"model": "m", "max_tokens": 100, "stream": false, "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    );
}

#[test]
fn anthropic_request_body_merges_tool_results() {
    let r = build_chat_request(&anthropic(), &conversation(), Delivery::Streamed).unwrap();
    assert_eq!(r.url, "https://api.anthropic.com/v1/messages");
    assert!(r.headers.contains(&("x-api-key".into(), "k".into())));
    assert!(r.headers.contains(&("anthropic-version".into(), "2023-06-01".into())));
    assert!(!r.headers.iter().any(|(h, _)| h == "authorization"));
    assert_eq!(
        body_of(&r),
        json!({
            "model": "m",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "stream": true,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "tools": [
                {"name": "search", "description": "Search the history",
                    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
                {"name": "now", "description": "The time", "input_schema": {"type": "object"},
                    "cache_control": {"type": "ephemeral"}},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "find cats"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "call_1", "name": "search", "input": {"q": "cats"}},
                    {"type": "tool_use", "id": "call_2", "name": "now", "input": {}},
                ]},
                // Both results and the user's follow-up: one user message, results first.
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "3 hits"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "noon"},
                    {"type": "text", "text": "and dogs?"},
                ]},
                // No text: only the tool call.
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_3", "name": "search", "input": {"q": "dogs"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_3", "content": "none"}]},
            ],
        })
    );

    // No system, no tools: neither field; a single tool gets the cache mark (the request's
    // marks: `chat.cache`).
    let marks = Some(PromptCache { key: "s".into(), marks: CacheConfig::default() });
    let mut one =
        ChatRequest { messages: vec![ChatMessage::User { text: "hi".into() }], cache: marks, ..ChatRequest::default() };
    let b = body_of(&build_chat_request(&anthropic(), &one, Delivery::Whole).unwrap());
    assert_eq!(
        b,
        json!({"model": "m", "max_tokens": DEFAULT_MAX_TOKENS, "stream": false,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
    );
    one.tools = tools()[..1].to_vec();
    let b = body_of(&build_chat_request(&anthropic(), &one, Delivery::Whole).unwrap());
    assert_eq!(b["tools"][0]["cache_control"], json!({"type": "ephemeral"}));

    // Only HTTP providers have a request.
    for p in [Provider::WorkersAi, Provider::None] {
        assert_eq!(
            build_chat_request(&cfg(p, "", None), &one, Delivery::Streamed).unwrap_err().kind,
            ErrorKind::Internal
        );
    }
}

fn ev(event: Option<&str>, data: &str) -> SseEvent {
    SseEvent { event: event.map(str::to_owned), data: data.to_owned() }
}

/// Decodes `body` handed over in pieces of `n` bytes (at char boundaries).
fn decode_in_pieces(body: &str, n: usize) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for piece in pieces(body, n) {
        out.extend(d.push(piece));
    }
    out.extend(d.finish());
    out
}

fn pieces(s: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + n).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

#[test]
fn sse_decoder_handles_splits_line_endings_multiline_and_comments() {
    let body = "\u{feff}: a comment\r\n\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\n\
                data: first\ndata:second\ndata:  third\n\n\
                : keep-alive\n\nid: 7\nretry: 100\ndata\n\n\
                event: ping\n\n\
                event: lone\rdata: cr only\r\r\
                data: é ü 😀\n\n\
                data: no blank line at the end";
    let want = vec![
        ev(Some("message_start"), "{\"a\":1}"),
        ev(None, "first\nsecond\n third"),
        ev(None, ""),
        ev(Some("lone"), "cr only"),
        ev(None, "é ü 😀"),
        ev(None, "no blank line at the end"),
    ];
    for n in 1..=body.len() {
        assert_eq!(decode_in_pieces(body, n), want, "pieces of {n} bytes");
    }
    // A `\r\n` split between pieces is one line end, not two.
    let mut d = SseDecoder::new();
    assert_eq!(d.push("data: a\r"), vec![]);
    assert_eq!(d.push(""), vec![]);
    assert_eq!(d.push("\n"), vec![]);
    assert_eq!(d.push("\r"), vec![ev(None, "a")]);
    assert_eq!(d.push("\n"), vec![]);
    assert_eq!(d.finish(), vec![]);
}

// invariant 26 (docs/ARCHITECTURE.md): Anthropic's cache reads and writes count as input.
#[test]
fn whole_answers_parse() {
    let ok = HttpResponse {
        headers: Vec::new(),
        status: 200,
        body: json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {
            "role": "assistant", "content": null, "reasoning_content": "think",
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"cats\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": ""}},
                {"id": "call_c", "type": "function", "function": {"name": "bad", "arguments": "{\"q\": "}},
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}})
        .to_string(),
    };
    let r = parse_chat_response(&openai(), &ok).unwrap();
    assert_eq!(
        r,
        ChatReply {
            text: String::new(),
            reasoning: "think".into(),
            tool_calls: vec![
                ToolCall { id: "call_a".into(), name: "search".into(), input: json!({"q": "cats"}) },
                ToolCall { id: "call_b".into(), name: "now".into(), input: json!({}) },
                ToolCall { id: "call_c".into(), name: "bad".into(), input: json!({}) },
            ],
            usage: Usage { input_tokens: 40, output_tokens: 9, cached_input_tokens: 0 },
            finish_reason: Some("tool_calls".into()),
        }
    );
    // `reasoning` (OpenRouter, Ollama) and an empty answer, which is not an error here.
    let empty = HttpResponse {
        headers: Vec::new(),
        status: 200,
        body: json!({"choices": [{"message": {"content": "", "reasoning": "hm"}, "finish_reason": "stop"}]})
            .to_string(),
    };
    let r = parse_chat_response(&openai(), &empty).unwrap();
    assert_eq!((r.text.as_str(), r.reasoning.as_str(), r.tool_calls.len()), ("", "hm", 0));

    let ok = HttpResponse {
        headers: Vec::new(),
        status: 200,
        body: json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [
            {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
            {"type": "text", "text": "Looking "},
            {"type": "text", "text": "now."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "cats"}},
        ], "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 30}})
        .to_string(),
    };
    let r = parse_chat_response(&anthropic(), &ok).unwrap();
    assert_eq!(
        r,
        ChatReply {
            text: "Looking now.".into(),
            reasoning: "Let me look.".into(),
            tool_calls: vec![ToolCall { id: "toolu_1".into(), name: "search".into(), input: json!({"q": "cats"}) }],
            usage: Usage { input_tokens: 3210, output_tokens: 30, cached_input_tokens: 3000 },
            finish_reason: Some("tool_use".into()),
        }
    );

    let e = parse_chat_response(
        &anthropic(),
        &HttpResponse { headers: Vec::new(), status: 529, body: anthropic_error("Overloaded") },
    )
    .unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::LlmUnavailable, "the model answered HTTP 529"));
    assert_eq!(e.log.as_deref(), Some("the model answered HTTP 529: Overloaded"));
    let e = parse_chat_response(
        &openai(),
        &HttpResponse { headers: Vec::new(), status: 502, body: "<html>bad gateway</html>".into() },
    )
    .unwrap_err();
    // An upstream body is never echoed to the caller: only to the log.
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::LlmUnavailable, "the model answered HTTP 502"));
    assert_eq!(e.log.as_deref(), Some("the model answered HTTP 502: <html>bad gateway</html>"));
    let e = parse_chat_response(&openai(), &HttpResponse { headers: Vec::new(), status: 200, body: "nope".into() })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::LlmUnavailable);
}

fn openai_error(message: &str) -> String {
    json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}).to_string()
}

fn anthropic_error(message: &str) -> String {
    json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}).to_string()
}

/// A transport answering from a script and recording what it was sent. With `piece` set, its
/// `send_stream` hands the body over in pieces of that many bytes; without, the trait's default
/// (`send`, then the whole body at once) is used.
struct Script {
    answers: RefCell<Vec<Result<HttpResponse>>>,
    sent: RefCell<Vec<HttpRequest>>,
    ai_inputs: RefCell<Vec<(String, Json)>>,
    ai_answer: Json,
    /// Pieces handed to `on_chunk`.
    handed: RefCell<usize>,
}

impl Script {
    fn new(answers: Vec<Result<HttpResponse>>) -> Self {
        Script {
            answers: RefCell::new(answers),
            sent: RefCell::new(Vec::new()),
            ai_inputs: RefCell::new(Vec::new()),
            ai_answer: Json::Null,
            handed: RefCell::new(0),
        }
    }
    fn answer(&self, req: HttpRequest) -> Result<HttpResponse> {
        self.sent.borrow_mut().push(req);
        self.answers.borrow_mut().remove(0)
    }
    fn ai(&self, model: &str, input: Json) -> Result<Json> {
        self.ai_inputs.borrow_mut().push((model.to_owned(), input));
        Ok(self.ai_answer.clone())
    }
}

/// Streams in 7-byte pieces.
struct Chunked(Script);

impl Transport for Chunked {
    fn send(&self, _req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        panic!("chat streams: send_stream only")
    }
    fn send_stream<'a>(
        &'a self,
        req: HttpRequest,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<u16>> {
        Box::pin(async move {
            let resp = self.0.answer(req)?;
            for piece in pieces(&resp.body, 7) {
                *self.0.handed.borrow_mut() += 1;
                on_chunk(piece)?;
            }
            Ok(resp.status)
        })
    }
    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>> {
        Box::pin(async move { self.0.ai(model, input) })
    }
}

/// Only `send`: the default `send_stream` hands the whole body over at once.
struct Whole(Script);

impl Transport for Whole {
    fn send(&self, req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        let a = self.0.answer(req);
        Box::pin(async move { a })
    }
    fn workers_ai<'a>(&'a self, model: &'a str, input: Json) -> BoxFuture<'a, Result<Json>> {
        Box::pin(async move { self.0.ai(model, input) })
    }
}

fn ok(body: String) -> Vec<Result<HttpResponse>> {
    vec![Ok(HttpResponse { headers: Vec::new(), status: 200, body })]
}

/// Runs `chat`, collecting the pieces it streamed: text as is, reasoning after a `💭`.
fn run(t: &dyn Transport, c: &LlmConfig, req: &ChatRequest) -> (Result<ChatReply>, Vec<String>) {
    let mut deltas = Vec::new();
    let out = futures::executor::block_on(chat(t, c, req, &mut |d: &Piece| {
        deltas.push(match d {
            Piece::Text(t) => t.clone(),
            Piece::Reasoning(r) => format!("💭{r}"),
        });
        Ok(())
    }));
    (out, deltas)
}

fn sse(events: &[(Option<&str>, Json)]) -> String {
    events
        .iter()
        .map(|(name, data)| match name {
            Some(n) => format!("event: {n}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        })
        .collect()
}

fn openai_chunk(delta: Json, finish: Option<&str>) -> (Option<&'static str>, Json) {
    (
        None,
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null}),
    )
}

fn openai_stream() -> String {
    let mut body = sse(&[
        openai_chunk(json!({"role": "assistant", "content": "", "refusal": null}), None),
        openai_chunk(json!({"reasoning_content": "The user wants "}), None),
        openai_chunk(json!({"reasoning_content": "cats."}), None),
        openai_chunk(json!({"content": "Let me "}), None),
        openai_chunk(json!({"content": "look. 🐈"}), None),
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "search", "arguments": ""}}]}),
            None,
        ),
        openai_chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"q\""}}]}), None),
        openai_chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "now", "arguments": ""}}]}),
            None,
        ),
        openai_chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": ": \"ca"}}]}), None),
        openai_chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ts\", \"limit\": 3}"}}]}), None),
        openai_chunk(json!({}), Some("tool_calls")),
        (
            None,
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 120, "completion_tokens": 31, "total_tokens": 151,
                "prompt_tokens_details": {"cached_tokens": 64}}}),
        ),
    ]);
    body.push_str(": keep-alive\n\ndata: [DONE]\n\n");
    body
}

fn openai_streamed_reply() -> ChatReply {
    ChatReply {
        text: "Let me look. 🐈".into(),
        reasoning: "The user wants cats.".into(),
        tool_calls: vec![
            ToolCall { id: "call_a".into(), name: "search".into(), input: json!({"q": "cats", "limit": 3}) },
            ToolCall { id: "call_b".into(), name: "now".into(), input: json!({}) },
        ],
        usage: Usage { input_tokens: 120, output_tokens: 31, cached_input_tokens: 64 },
        finish_reason: Some("tool_calls".into()),
    }
}

#[test]
fn openai_streams_text_and_fragmented_tool_calls() {
    let t = Chunked(Script::new(ok(openai_stream())));
    let (out, deltas) = run(&t, &openai(), &conversation());
    assert_eq!(out.unwrap(), openai_streamed_reply());
    assert_eq!(deltas, vec!["💭The user wants ", "💭cats.", "Let me ", "look. 🐈"]);
    assert!(*t.0.handed.borrow() > 50, "handed over in small pieces");
    let sent = t.0.sent.borrow();
    assert_eq!(sent.len(), 1);
    assert_eq!(body_of(&sent[0])["stream"], json!(true));
    assert!(sent[0].headers.contains(&("accept".into(), "text/event-stream".into())));

    // The same body all at once, through the default `send_stream`.
    let t = Whole(Script::new(ok(openai_stream())));
    let (out, deltas) = run(&t, &openai(), &conversation());
    assert_eq!(out.unwrap(), openai_streamed_reply());
    assert_eq!(deltas, vec!["💭The user wants ", "💭cats.", "Let me ", "look. 🐈"]);
}

fn anthropic_stream() -> String {
    let e = |name: &'static str, data: Json| (Some(name), data);
    sse(&[
        e(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 25, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000, "output_tokens": 1}}}),
        ),
        e(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Need the "}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "weather."}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        ),
        e("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        e(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": ""}}),
        ),
        e("ping", json!({"type": "ping"})),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "Checking "}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "now…"}}),
        ),
        e("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
        e(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "{\"location\": \"San Fra"}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "ncisco\", \"unit\": \"c\"}"}}),
        ),
        e("content_block_stop", json!({"type": "content_block_stop", "index": 2})),
        e(
            "content_block_start",
            json!({"type": "content_block_start", "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_02", "name": "now", "input": {}}}),
        ),
        e(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        e("content_block_stop", json!({"type": "content_block_stop", "index": 3})),
        e(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 89}}),
        ),
        e("message_stop", json!({"type": "message_stop"})),
    ])
}

fn anthropic_streamed_reply() -> ChatReply {
    ChatReply {
        text: "Checking now…".into(),
        reasoning: "Need the weather.".into(),
        tool_calls: vec![
            ToolCall {
                id: "toolu_01".into(),
                name: "get_weather".into(),
                input: json!({"location": "San Francisco", "unit": "c"}),
            },
            ToolCall { id: "toolu_02".into(), name: "now".into(), input: json!({}) },
        ],
        usage: Usage { input_tokens: 2125, output_tokens: 89, cached_input_tokens: 2000 },
        finish_reason: Some("tool_use".into()),
    }
}

#[test]
fn anthropic_streams_text_thinking_and_tool_use() {
    let t = Chunked(Script::new(ok(anthropic_stream())));
    let (out, deltas) = run(&t, &anthropic(), &conversation());
    assert_eq!(out.unwrap(), anthropic_streamed_reply());
    assert_eq!(deltas, vec!["💭Need the ", "💭weather.", "Checking ", "now…"]);
    assert_eq!(body_of(&t.0.sent.borrow()[0])["stream"], json!(true));

    let t = Whole(Script::new(ok(anthropic_stream().replace('\n', "\r\n"))));
    let (out, deltas) = run(&t, &anthropic(), &conversation());
    assert_eq!(out.unwrap(), anthropic_streamed_reply());
    assert_eq!(deltas, vec!["💭Need the ", "💭weather.", "Checking ", "now…"]);
}

#[test]
fn stream_state_directly() {
    let mut s = StreamState::new(&anthropic::Anthropic);
    for e in decode_in_pieces(&anthropic_stream(), 1000) {
        s.push(&e).unwrap();
    }
    assert!(s.is_done());
    assert_eq!(s.reply().text, "Checking now…");
    assert_eq!(s.finish().unwrap(), anthropic_streamed_reply());

    // Cut off before the provider said it was done.
    let mut s = StreamState::new(&openai::OpenAi);
    assert_eq!(
        s.push(&ev(None, &openai_chunk(json!({"content": "par"}), None).1.to_string())).unwrap(),
        vec![Piece::Text("par".into())]
    );
    assert!(!s.is_done());
    assert_eq!(s.finish().unwrap_err().kind, ErrorKind::LlmUnavailable);
}

#[test]
fn a_provider_ignoring_stream_answers_plain_json() {
    let plain = json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Hello there."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3}});
    for t in
        [&Whole(Script::new(ok(plain.to_string()))) as &dyn Transport, &Chunked(Script::new(ok(plain.to_string())))]
    {
        let (out, deltas) = run(t, &openai(), &conversation());
        let r = out.unwrap();
        assert_eq!(
            (r.text.as_str(), r.usage, r.finish_reason.as_deref()),
            ("Hello there.", Usage { input_tokens: 5, output_tokens: 3, cached_input_tokens: 0 }, Some("stop"))
        );
        assert_eq!(deltas, vec!["Hello there."]);
    }
    let plain = json!({"type": "message", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 9, "output_tokens": 4}});
    let (out, deltas) = run(&Whole(Script::new(ok(plain.to_string()))), &anthropic(), &conversation());
    let r = out.unwrap();
    assert_eq!(r.tool_calls, vec![ToolCall { id: "toolu_1".into(), name: "now".into(), input: json!({}) }]);
    assert!(deltas.is_empty(), "no text, no delta");

    // Neither events nor JSON.
    let (out, _) = run(&Whole(Script::new(ok("hello?".into()))), &openai(), &conversation());
    assert_eq!(out.unwrap_err().kind, ErrorKind::LlmUnavailable);
}

// invariant 37 (docs/ARCHITECTURE.md)
#[test]
fn http_errors_log_the_providers_message() {
    for (c, body, want) in [
        (
            openai(),
            openai_error("The server had an error while processing your request."),
            "the model answered HTTP 500: The server had an error while processing your request.",
        ),
        (anthropic(), anthropic_error("Internal server error"), "the model answered HTTP 500: Internal server error"),
    ] {
        let answer = || vec![Ok(HttpResponse { headers: Vec::new(), status: 500, body: body.clone() })];
        for t in [&Chunked(Script::new(answer())) as &dyn Transport, &Whole(Script::new(answer()))] {
            let (out, deltas) = run(t, &c, &conversation());
            let e = out.unwrap_err();
            assert_eq!((e.kind, e.message.as_str()), (ErrorKind::LlmUnavailable, "the model answered HTTP 500"));
            assert_eq!(e.log.as_deref(), Some(want));
            assert!(deltas.is_empty());
        }
    }
    // A transport failure keeps its message.
    let t = Whole(Script::new(vec![Err(Error::internal("connection refused"))]));
    let e = run(&t, &openai(), &conversation()).0.unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::LlmUnavailable, "connection refused"));
}

#[test]
fn streamed_errors_are_llm_unavailable() {
    let mut body = sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
        ),
    ]);
    body.push_str("event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n");
    let t = Chunked(Script::new(ok(body.clone())));
    let (out, deltas) = run(&t, &anthropic(), &conversation());
    let e = out.unwrap_err();
    assert_eq!(e.kind, ErrorKind::LlmUnavailable);
    assert_eq!(e.message, "the model's stream failed");
    assert!(e.log.as_deref().is_some_and(|l| l.contains("Overloaded")), "{:?}", e.log);
    assert_eq!(deltas, vec!["Hel"]);
    // Without a trailing blank line, through the default transport.
    let (out, _) = run(&Whole(Script::new(ok(body.trim_end().to_owned()))), &anthropic(), &conversation());
    assert!(out.unwrap_err().log.is_some_and(|l| l.contains("Overloaded")));

    let mut body = sse(&[openai_chunk(json!({"content": "Hi"}), None)]);
    body.push_str(&format!("data: {}\n\n", openai_error("Rate limit reached")));
    let (out, deltas) = run(&Chunked(Script::new(ok(body))), &openai(), &conversation());
    let e = out.unwrap_err();
    assert_eq!(e.kind, ErrorKind::LlmUnavailable);
    assert_eq!(e.message, "the model's stream failed");
    assert!(e.log.as_deref().is_some_and(|l| l.contains("Rate limit reached")), "{:?}", e.log);
    assert_eq!(deltas, vec!["Hi"]);

    // Cut off mid-answer: no finish reason, no [DONE].
    let body = sse(&[openai_chunk(json!({"content": "Hi"}), None)]);
    let (out, _) = run(&Chunked(Script::new(ok(body))), &openai(), &conversation());
    assert_eq!(out.unwrap_err().kind, ErrorKind::LlmUnavailable);
}

#[test]
fn an_on_delta_error_stops_the_stream_and_comes_back_unchanged() {
    let gone = Error::new(ErrorKind::Conflict, "the client went away");
    for (c, body) in [(openai(), openai_stream()), (anthropic(), anthropic_stream())] {
        let t = Chunked(Script::new(ok(body.clone())));
        let total = pieces(&body, 7).len();
        let mut calls = 0;
        let out = futures::executor::block_on(chat(&t, &c, &conversation(), &mut |_d: &Piece| {
            calls += 1;
            Err(gone.clone())
        }));
        assert_eq!(out.unwrap_err(), gone);
        assert_eq!(calls, 1);
        assert!(*t.0.handed.borrow() < total, "reading stopped early");

        let t = Whole(Script::new(ok(body)));
        let out = futures::executor::block_on(chat(&t, &c, &conversation(), &mut |_d: &Piece| Err(gone.clone())));
        assert_eq!(out.unwrap_err(), gone);
    }
    // Also for a plain JSON answer's single delta.
    let plain = json!({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}).to_string();
    let t = Whole(Script::new(ok(plain)));
    let out = futures::executor::block_on(chat(&t, &openai(), &conversation(), &mut |_d: &Piece| Err(gone.clone())));
    assert_eq!(out.unwrap_err(), gone);
}

#[test]
fn no_provider_is_not_configured() {
    let t = Whole(Script::new(vec![]));
    let e = run(&t, &LlmConfig::none(), &conversation()).0.unwrap_err();
    let same = futures::executor::block_on(complete(&t, &LlmConfig::none(), &ChatRequest::user("x"))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotConfigured);
    assert_eq!(e, same);
    assert!(t.0.sent.borrow().is_empty());
}

#[test]
fn workers_ai_gets_text_only() {
    let mut s = Script::new(vec![]);
    s.ai_answer =
        json!({"response": "Found 3.", "usage": {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}});
    let t = Whole(s);
    let c = LlmConfig { model: "@cf/meta/llama-3.1-8b-instruct".into(), ..cfg(Provider::WorkersAi, "", None) };
    let mut req = conversation();
    req.max_tokens = Some(256);
    let (out, deltas) = run(&t, &c, &req);
    assert_eq!(
        out.unwrap(),
        ChatReply {
            text: "Found 3.".into(),
            usage: Usage { input_tokens: 30, output_tokens: 4, cached_input_tokens: 0 },
            ..ChatReply::default()
        }
    );
    assert_eq!(deltas, vec!["Found 3."]);
    let inputs = t.0.ai_inputs.borrow();
    assert_eq!(inputs[0].0, "@cf/meta/llama-3.1-8b-instruct");
    assert_eq!(
        inputs[0].1,
        json!({"max_tokens": 256, "stream": true, "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "find cats"},
            {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": "Tool search returned: 3 hits"},
            {"role": "user", "content": "Tool now returned: noon"},
            {"role": "user", "content": "and dogs?"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "Tool search returned: none"},
        ]})
    );
    assert!(t.0.sent.borrow().is_empty());
}

/// `units` (UTF-16) as `JSON.stringify` writes a string: lone surrogate halves as `\udxxx`
/// escapes (JavaScript strings may hold them), everything else as the character itself.
fn js_string(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for r in char::decode_utf16(units.iter().copied()) {
        match r {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok(c) => out.push(c),
            Err(e) => out.push_str(&format!("\\u{:04x}", e.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

#[test]
fn a_text_cut_at_every_utf16_offset_streams_whole() {
    // Emoji (surrogate pairs, a ZWJ sequence, a flag) and combining marks.
    let text = "Ok 😀 e\u{301}! 👩‍👩‍👧 🇵🇹 n\u{303}";
    let units: Vec<u16> = text.encode_utf16().collect();
    for cut in 0..=units.len() {
        for (c, event) in [(openai(), "openai"), (anthropic(), "anthropic")] {
            let delta = |part: &[u16]| -> String {
                let s = js_string(part);
                if event == "openai" {
                    format!(
                        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{s}}},\"finish_reason\":null}}]}}\n\n"
                    )
                } else {
                    format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":{s}}}}}\n\n")
                }
            };
            let body = if event == "openai" {
                format!(
                    "{}{}{}data: [DONE]\n\n",
                    delta(&units[..cut]),
                    delta(&units[cut..]),
                    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                )
            } else {
                format!(
                    "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":1,\"output_tokens\":1}}}}}}\n\n\
                     event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n\
                     {}{}event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
                     event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":2}}}}\n\n\
                     event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
                    delta(&units[..cut]),
                    delta(&units[cut..])
                )
            };
            let (out, deltas) = run(&Chunked(Script::new(ok(body))), &c, &conversation());
            let reply = out.unwrap_or_else(|e| panic!("{event}, cut at {cut}: {e}"));
            assert_eq!(reply.text, text, "{event}, cut at {cut}");
            assert_eq!(deltas.concat(), text, "{event}, cut at {cut}: what was streamed out");
        }
    }
}

#[test]
fn the_cache_marks_close_the_prompt_the_tools_and_the_nth_turn_from_the_end() {
    use session_agent_core::config::CacheTtl;
    let with = |marks: Option<CacheConfig>| ChatRequest {
        cache: marks.map(|marks| PromptCache { key: "session-1".into(), marks }),
        ..conversation()
    };
    let body = |p: &LlmConfig, marks: Option<CacheConfig>| {
        body_of(&build_chat_request(p, &with(marks), Delivery::Whole).unwrap())
    };
    let marked = |b: &Json| -> Vec<String> {
        let mut at = Vec::new();
        for (i, s) in b["system"].as_array().into_iter().flatten().enumerate() {
            if !s["cache_control"].is_null() {
                at.push(format!("system {i} {}", s["cache_control"]));
            }
        }
        for (i, t) in b["tools"].as_array().into_iter().flatten().enumerate() {
            if !t["cache_control"].is_null() {
                at.push(format!("tool {i} {}", t["cache_control"]));
            }
        }
        for (i, m) in b["messages"].as_array().into_iter().flatten().enumerate() {
            for (j, c) in m["content"].as_array().into_iter().flatten().enumerate() {
                if !c["cache_control"].is_null() {
                    at.push(format!("message {i} block {j} {}", c["cache_control"]));
                }
            }
        }
        at
    };
    let a = anthropic();
    let e = r#"{"type":"ephemeral"}"#;
    // The defaults: the prompt and the last tool, as before.
    assert_eq!(marked(&body(&a, Some(CacheConfig::default()))), [format!("system 0 {e}"), format!("tool 1 {e}")]);
    // The newest turn (5 turns, so index 4) closes the cached conversation, at its last block.
    let newest = CacheConfig { messages: 1, ..CacheConfig::default() };
    assert_eq!(
        marked(&body(&a, Some(newest))),
        [format!("system 0 {e}"), format!("tool 1 {e}"), format!("message 4 block 0 {e}")]
    );
    // The third from the end: the user turn with two results and a text; its last block.
    let hour = r#"{"type":"ephemeral","ttl":"1h"}"#;
    let third = CacheConfig { messages: 3, instructions: false, tools: false, ttl: CacheTtl::OneHour };
    assert_eq!(marked(&body(&a, Some(third))), [format!("message 2 block 2 {hour}")]);
    // Further back than the conversation: no message mark.
    let far = CacheConfig { messages: 9, ..CacheConfig::default() };
    assert_eq!(marked(&body(&a, Some(far))).len(), 2);
    // `cache: false`: nothing marked, and OpenAI gets no prompt_cache_key.
    assert!(marked(&body(&a, None)).is_empty());
    assert!(body(&openai(), None).get("prompt_cache_key").is_none());
    assert_eq!(body(&openai(), Some(CacheConfig::default()))["prompt_cache_key"], "session-1");
}

/// A stream that never ends its line (`data: xxxx…`, 64 KiB a piece, up to 1 GiB): how many
/// pieces were handed over.
struct Endless(std::cell::Cell<usize>);

impl Transport for Endless {
    fn send(&self, _req: HttpRequest) -> BoxFuture<'_, Result<HttpResponse>> {
        panic!("chat streams: send_stream only")
    }
    fn send_stream<'a>(
        &'a self,
        _req: HttpRequest,
        on_chunk: &'a mut dyn FnMut(&str) -> Result<()>,
    ) -> BoxFuture<'a, Result<u16>> {
        Box::pin(async move {
            let piece = "x".repeat(64 * 1024);
            on_chunk("data: ")?;
            for _ in 0..16 * 1024 {
                self.0.set(self.0.get() + 1);
                on_chunk(&piece)?;
            }
            Ok(200)
        })
    }
    fn workers_ai<'a>(&'a self, _model: &'a str, _input: Json) -> BoxFuture<'a, Result<Json>> {
        panic!("HTTP only")
    }
}

#[test]
fn a_stream_whose_event_never_ends_is_cut_at_8_mb() {
    let t = Endless(std::cell::Cell::new(0));
    let e = run(&t, &openai(), &conversation()).0.unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::LlmUnavailable, "the model's stream holds an event of over 8 MB")
    );
    // "data: " and 128 pieces of 64 KiB pass 8 MiB: reading stops there.
    assert_eq!(t.0.get(), 128, "read no further than the piece that passed 8 MiB");
}
