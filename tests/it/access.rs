//! Scoped tokens through the DO API on real SQLite: what a token may ask for, how its text is
//! taken apart, what each route allows it (sessions, scope, admin routes), revocation by time,
//! and WebSocket frames checked like their requests. (The HMAC signature is WebCrypto's: the
//! end-to-end tests sign, tamper and forge against the running Worker.)

use crate::support::{code, Api};
use serde_json::{json, Map, Value as Json};
use session_agent_api::access::{self, Claims, Scope, CLAIMS_HEADER};
use session_agent_api::http::Method;
use session_agent_api::Request;
use session_agent_core::ids::Role;

const NOW: i64 = 1_795_345_200_000;

fn body(v: Json) -> Map<String, Json> {
    v.as_object().unwrap().clone()
}

fn claims(scope: &str, sessions: Option<&[&str]>) -> Claims {
    let mut b = json!({"scope": scope, "ttlSeconds": 3600});
    if let Some(s) = sessions {
        b["sessions"] = json!(s);
    }
    Claims::issue("alice", Role::Agent, &body(b), NOW).unwrap()
}

fn with(c: &Claims, req: Request) -> Request {
    req.header(CLAIMS_HEADER, &serde_json::to_string(c).unwrap())
}

#[test]
fn a_token_request_is_checked() {
    let bad = [
        json!({"ttlSeconds": 60}),
        json!({"scope": "admin", "ttlSeconds": 60}),
        json!({"scope": "read"}),
        json!({"scope": "read", "ttlSeconds": 0}),
        json!({"scope": "read", "ttlSeconds": 30 * 24 * 3600 + 1}),
        json!({"scope": "read", "ttlSeconds": 1.5}),
        json!({"scope": "read", "ttlSeconds": "60"}),
        json!({"scope": "read", "ttlSeconds": 60, "sessions": []}),
        json!({"scope": "read", "ttlSeconds": 60, "sessions": ["../x"]}),
        json!({"scope": "read", "ttlSeconds": 60, "sessions": "s1"}),
        json!({"scope": "read", "ttlSeconds": 60, "agent": "bob"}),
    ];
    for b in bad {
        let e = Claims::issue("alice", Role::Agent, &body(b.clone()), NOW).expect_err(&b.to_string());
        assert_eq!(e.code(), "invalid_request", "{b}");
    }
    let c = Claims::issue(
        "alice",
        Role::Agent,
        &body(json!({"scope": "write", "ttlSeconds": 60, "sessions": ["s1", "s1", "s2"]})),
        NOW,
    )
    .unwrap();
    assert_eq!(c.sessions, Some(vec!["s1".to_owned(), "s2".to_owned()]));
    assert_eq!((c.issued_ms(), c.expires_ms()), (NOW, NOW + 60_000));
    assert_eq!(c.scope, Scope::Write);
}

#[test]
fn a_token_is_a_jwt_whose_parts_are_read_back() {
    let c = claims("read", Some(&["s1"]));
    let answer = c.answer(&[7u8; 32]);
    let token = answer["token"].as_str().unwrap();
    assert_eq!(token.split('.').count(), 3);
    assert_eq!(answer["expiresAt"], "2026-11-22T12:00:00.000Z");
    let (signed, signature, read) = access::read(token).unwrap();
    assert_eq!(signed, c.signing_input());
    assert_eq!(signature, vec![7u8; 32]);
    assert_eq!(read, c);
    // Another header (e.g. alg "none"), a missing part, or garbage: unauthorized, not a 500.
    let none = format!("eyJhbGciOiJub25lIn0.{}", token.split_once('.').unwrap().1);
    for t in [none.as_str(), "a.b", "", "x.y.z", &token.replace('.', "")] {
        assert_eq!(access::read(t).unwrap_err().code(), "unauthorized", "{t}");
    }
}

#[test]
fn expired_revoked_and_foreign_tokens_are_refused() {
    let c = claims("write", None);
    assert!(c.valid_for("alice", Role::Agent, NOW + 1, None).is_ok());
    assert_eq!(c.valid_for("alice", Role::Agent, NOW + 3_600_000, None).unwrap_err().code(), "unauthorized");
    assert_eq!(c.valid_for("alice", Role::Agent, NOW + 1, Some(NOW + 1)).unwrap_err().code(), "unauthorized");
    assert!(
        c.valid_for("alice", Role::Agent, NOW + 1, Some(NOW)).is_ok(),
        "issued at the revocation time: still valid"
    );
    assert_eq!(c.valid_for("bob", Role::Agent, NOW + 1, None).unwrap_err().code(), "forbidden");
}

// invariant 30 (docs/ARCHITECTURE.md)
#[test]
fn routes_allow_what_the_scope_and_sessions_say() {
    let read = claims("read", None);
    let write_s1 = claims("write", Some(&["s1"]));
    let write = claims("write", None);
    let cases: &[(&Claims, &str, &str, bool)] = &[
        (&read, "GET", "/sessions/s1/history", true),
        (&read, "GET", "/sessions", true),
        (&read, "GET", "/memories/search", true),
        (&read, "GET", "/sessions/s1/ws", true),
        (&read, "POST", "/sessions/s1/messages", false),
        (&read, "POST", "/sessions/s1/chat", false),
        (&read, "DELETE", "/sessions/s1", false),
        (&write_s1, "POST", "/sessions/s1/messages", true),
        (&write_s1, "GET", "/sessions/s1/history", true),
        (&write_s1, "GET", "/sessions/s2/history", false),
        (&write_s1, "GET", "/sessions", false),
        (&write_s1, "POST", "/sessions", false),
        (&write_s1, "GET", "/search", false),
        (&write_s1, "GET", "/memories", false),
        (&write_s1, "GET", "/memories/mem_1", false),
        (&write, "POST", "/memories", true),
        (&write, "POST", "/tokens/revoke", false),
        // An encoded id is the same session.
        (&write_s1, "GET", "/sessions/s%31/history", true),
    ];
    for (c, method, path, ok) in cases {
        let got = session_agent_api::permits(c, Method::parse(method), path);
        assert_eq!(got.is_ok(), *ok, "{method} {path} with {c:?}: {got:?}");
        if let Err(e) = got {
            assert_eq!(e.code(), "forbidden");
        }
    }
}

// invariant 30 (docs/ARCHITECTURE.md)
#[test]
fn the_api_checks_claims_and_revocation() {
    let api = Api::new();
    api.append("s1", "m1", None, "hello");
    let now = api.now.get();
    let c =
        Claims::issue("alice", Role::Agent, &body(json!({"scope": "read", "ttlSeconds": 60, "sessions": ["s1"]})), now)
            .unwrap();
    assert_eq!(api.send(with(&c, Request::new(Method::Get, "/sessions/s1/history"))).status, 200);
    let r = api.send(with(
        &c,
        Request::new(Method::Post, "/sessions/s1/messages")
            .json(&json!({"message": crate::support::msg("m2", "user", "x")})),
    ));
    assert_eq!((r.status, code(&r)), (403, "forbidden".into()));
    assert_eq!(api.count("SELECT count(*) FROM messages"), 1, "a refused write changes nothing");
    let r = api.send(with(&c, Request::new(Method::Get, "/sessions")));
    assert_eq!(r.status, 403);
    // A header that is not claims is refused, never taken as the admin.
    let r = api.send(Request::new(Method::Get, "/sessions").header(CLAIMS_HEADER, "{"));
    assert_eq!(r.status, 401);
    // Another agent's token.
    let bob = Claims::issue("bob", Role::Agent, &body(json!({"scope": "read", "ttlSeconds": 60})), now).unwrap();
    assert_eq!(api.send(with(&bob, Request::new(Method::Get, "/sessions"))).status, 403);

    // Nothing stored until a revocation.
    assert_eq!(api.count("SELECT count(*) FROM revocation"), 0);
    let r = api.post("/tokens/revoke", json!({"before": "2999-01-01T00:00:00.000Z"}));
    assert_eq!(r.status, 400, "a revocation in the future is refused");
    assert_eq!(api.count("SELECT count(*) FROM revocation"), 0);
    assert_eq!(api.post("/tokens/revoke", json!({"when": 1})).status, 400);
    let r = api.post("/tokens/revoke", json!({}));
    assert_eq!(r.status, 200);
    let before = r.body_json()["before"].as_str().unwrap().to_owned();
    let r = api.send(with(&c, Request::new(Method::Get, "/sessions/s1/history")));
    assert_eq!((r.status, code(&r)), (401, "unauthorized".into()));
    // The time only moves forward.
    let r = api.post("/tokens/revoke", json!({"before": "2020-01-01T00:00:00.000Z"}));
    assert_eq!(r.body_json()["before"], before);
    // A token issued after it works; a scoped token may not revoke.
    let fresh =
        Claims::issue("alice", Role::Agent, &body(json!({"scope": "write", "ttlSeconds": 60})), api.now.get() + 1)
            .unwrap();
    assert_eq!(api.send(with(&fresh, Request::new(Method::Get, "/sessions"))).status, 200);
    assert_eq!(api.send(with(&fresh, Request::new(Method::Post, "/tokens/revoke").json(&json!({})))).status, 403);
}

#[test]
fn socket_frames_are_checked_like_their_requests() {
    let api = Api::new();
    api.append("s1", "m1", None, "hello");
    let c =
        Claims::issue("alice", Role::Agent, &body(json!({"scope": "read", "ttlSeconds": 60})), api.now.get()).unwrap();
    let frame = |text: &str| {
        futures::executor::block_on(session_agent_api::ws::frame(&api.env(), "s1", Some(&c), text, &Default::default()))
            .frames
    };
    let h = frame(r#"{"type":"history"}"#);
    assert_eq!(h[0]["type"], "history");
    let e = frame(r#"{"type":"append","message":{"id":"m2","role":"user","parts":[]}}"#);
    assert_eq!((e[0]["type"].as_str(), e[0]["code"].as_str()), (Some("error"), Some("forbidden")));
    assert_eq!(api.count("SELECT count(*) FROM messages"), 1);
}

/// An agent with memory, the searchable-history block and a model, where `alice-chat` holds a
/// secret (a message and a conversation memory) and `bob-chat` a message of its own.
fn two_sessions() -> (Api, String) {
    let api = Api::with_config(
        json!({"memory": {}, "searchableHistory": "history", "context": [{"label": "kb", "kind": "search"}]}),
    )
    .with_model();
    api.append("alice-chat", "a1", None, "my card PIN is 4321");
    api.append("bob-chat", "b1", None, "what is my card PIN again?");
    let r = api.post(
        "/memories",
        json!({"content": "Alice's card PIN is 4321", "category": "conversation", "sessionId": "alice-chat"}),
    );
    assert_eq!(r.status, 201);
    let secret = r.body_json()["id"].as_str().unwrap().to_owned();
    api.post("/memories", json!({"content": "The user banks with Acme (card PIN kept elsewhere)"}));
    (api, secret)
}

/// A write token for `bob-chat` only.
fn bob_token(api: &Api) -> Claims {
    Claims::issue(
        "alice",
        Role::Agent,
        &body(json!({"scope": "write", "ttlSeconds": 600, "sessions": ["bob-chat"]})),
        api.now.get(),
    )
    .unwrap()
}

// invariant 38 (docs/ARCHITECTURE.md)
#[test]
fn a_session_limited_token_searches_only_its_sessions_through_tools_mcp_and_turns() {
    let (api, _) = two_sessions();
    let bob = bob_token(&api);
    let tool = |token: Option<&Claims>, name: &str, input: Json| {
        let req =
            Request::new(Method::Post, &format!("/sessions/bob-chat/tools/{name}")).json(&json!({"input": input}));
        let r = api.send(match token {
            Some(c) => with(c, req),
            None => req,
        });
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.body_json()["output"].as_str().unwrap().to_owned()
    };
    let searches =
        [("session_search", json!({"query": "PIN"})), ("search_context", json!({"label": "history", "query": "PIN"}))];
    for (name, input) in &searches {
        // The admin token sees every session: the secret is there to be found.
        assert!(tool(None, name, input.clone()).contains("4321"), "{name}: the admin finds it");
        let out = tool(Some(&bob), name, input.clone());
        assert!(!out.contains("4321"), "{name} showed another session to a limited token: {out}");
        assert!(out.contains("again?"), "{name} still finds the token's own session: {out}");
    }
    // MCP: the same tools.
    let r = api.send(with(
        &bob,
        Request::new(Method::Post, "/sessions/bob-chat/mcp")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "session_search", "arguments": {"query": "PIN 4321"}}})),
    ));
    let text = r.body_json()["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(!text.contains("PIN is 4321"), "MCP showed another session: {text}");
    // A turn whose model calls each search tool: neither the model nor the stored reply sees it.
    for (name, input) in searches {
        api.model.requests.borrow_mut().clear();
        api.model.reply(Ok(crate::support::tool_calls(&[("c1", name, input)])));
        api.model.reply(Ok(crate::support::completion("Sorry, I cannot see that.")));
        let r = api.send(with(
            &bob,
            Request::new(Method::Post, "/sessions/bob-chat/chat")
                .json(&json!({"message": crate::support::msg(&format!("q-{name}"), "user", "find my PIN")})),
        ));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let seen = api.model.requests.borrow().last().unwrap().to_string();
        assert!(!seen.contains("PIN is 4321"), "{name}: the model was shown another session: {seen}");
        assert!(!String::from_utf8_lossy(&r.body).contains("PIN is 4321"), "{name}: the answer holds it");
    }
}

// invariant 38 (docs/ARCHITECTURE.md)
#[test]
fn a_session_limited_token_never_recalls_or_forgets_another_sessions_conversation_memory() {
    let (api, secret) = two_sessions();
    let bob = bob_token(&api);
    let tool = |token: Option<&Claims>, name: &str, input: Json| {
        let req =
            Request::new(Method::Post, &format!("/sessions/bob-chat/tools/{name}")).json(&json!({"input": input}));
        let r = api.send(match token {
            Some(c) => with(c, req),
            None => req,
        });
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.body_json()["output"].as_str().unwrap().to_owned()
    };
    assert!(tool(None, "memory_recall", json!({"query": "card PIN"})).contains("4321"), "the admin recalls it");
    let out = tool(Some(&bob), "memory_recall", json!({"query": "card PIN"}));
    assert!(!out.contains("4321"), "recalled another session's conversation memory: {out}");
    assert!(out.contains("Acme"), "core memories are the agent's, recalled everywhere: {out}");
    let out = tool(Some(&bob), "memory_recall", json!({"query": "Alice PIN 4321", "category": "conversation"}));
    assert!(!out.contains("4321"), "{out}");
    // Forgetting it by id or by query: it is not there for this token.
    let out = tool(Some(&bob), "memory_forget", json!({"id": secret}));
    assert!(out.starts_with("Error:") && out.contains("not found"), "{out}");
    let out = tool(Some(&bob), "memory_forget", json!({"query": "Alice's card PIN 4321"}));
    assert!(!out.contains("4321"), "{out}");
    assert_eq!(api.get(&format!("/memories/{secret}")).status, 200, "the memory is still there");
    // Storing the same words as a conversation memory of bob-chat makes bob-chat's own memory:
    // nothing of alice-chat's is changed or shown.
    let out = tool(
        Some(&bob),
        "memory_store",
        json!({"content": "alice's card PIN is 4321", "category": "conversation", "tags": ["x"]}),
    );
    assert!(out.starts_with("Stored memory") && !out.contains(&secret), "{out}");
    assert_eq!(api.get(&format!("/memories/{secret}")).body_json()["tags"], json!([]), "alice-chat's is untouched");
    assert_eq!(api.count("SELECT count(*) FROM memories WHERE category = 'conversation'"), 2);
}

/// `bob-chat` and 499 other sessions (`far-0001`…), never `alice-chat`: the most a token names.
fn five_hundred_sessions() -> Vec<String> {
    let mut list = vec!["bob-chat".to_owned()];
    list.extend((1..500).map(|i| format!("far-{i:04}")));
    list
}

/// A session-limited token of 500 sessions does everything such a token may, in each of them:
/// its list becomes one statement parameter wherever it is asked for (a Durable Object binds at
/// most 100, which a list of the sessions as `IN (?, …)` passed at about 95).
#[test]
fn a_token_of_500_sessions_reaches_each_of_them_and_no_other() {
    for meaning in ["words", "words and meaning"] {
        let (api, secret) = two_sessions();
        let api = if meaning == "words" { api } else { api.with_embeddings() };
        // A far session of the token's holds words and a conversation memory of its own.
        api.append("far-0450", "f1", None, "the spare card PIN is 8765");
        let r = api.post(
            "/memories",
            json!({"content": "The spare card PIN is 8765", "category": "conversation", "sessionId": "far-0450"}),
        );
        assert_eq!(r.status, 201);
        // Everything written so far gets its vector (with embeddings on).
        api.get("/sessions/bob-chat");
        let list = five_hundred_sessions();
        let many = Claims::issue(
            "alice",
            Role::Agent,
            &body(json!({"scope": "write", "ttlSeconds": 600, "sessions": list})),
            api.now.get(),
        )
        .unwrap_or_else(|e| panic!("a token of 500 sessions: {}", e.message));
        assert_eq!(many.sessions.as_ref().map(Vec::len), Some(500));
        let send = |req: Request| {
            let r = api.send(with(&many, req));
            assert!(r.status < 300, "{meaning}: {} {}", r.status, String::from_utf8_lossy(&r.body));
            r
        };
        let tool = |sid: &str, name: &str, input: Json| {
            let req =
                Request::new(Method::Post, &format!("/sessions/{sid}/tools/{name}")).json(&json!({"input": input}));
            send(req).body_json()["output"].as_str().unwrap().to_owned()
        };
        for (name, input) in [
            ("session_search", json!({"query": "card PIN"})),
            ("search_context", json!({"label": "history", "query": "card PIN"})),
        ] {
            let out = tool("bob-chat", name, input);
            assert!(out.contains("8765") && out.contains("again?"), "{meaning}, {name}: its sessions: {out}");
            assert!(!out.contains("4321"), "{meaning}, {name}: another session: {out}");
        }
        let out = tool("bob-chat", "memory_recall", json!({"query": "card PIN"}));
        assert!(out.contains("8765") && out.contains("Acme") && !out.contains("4321"), "{meaning}: {out}");
        let out = tool("far-0450", "memory_recall", json!({"query": "card PIN", "category": "conversation"}));
        assert!(out.contains("8765") && !out.contains("4321"), "{meaning}: {out}");
        // Whatever it forgets or names (the query's own words aside), never alice's memory.
        let out = tool("bob-chat", "memory_forget", json!({"query": "Alice's card PIN 4321"}));
        assert!(!out.contains(&secret) && !out.lines().skip(1).any(|l| l.contains("4321")), "{meaning}: {out}");
        let out = tool("bob-chat", "memory_forget", json!({"id": secret}));
        assert!(out.starts_with("Error:") && out.contains("not found"), "{meaning}: {out}");
        // MCP: the same tools.
        let r = send(Request::new(Method::Post, "/sessions/far-0450/mcp").json(&json!({"jsonrpc": "2.0", "id": 1,
            "method": "tools/call", "params": {"name": "session_search", "arguments": {"query": "card PIN"}}})));
        let text = r.body_json()["result"]["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.contains("again?") && !text.contains("is 4321"), "{meaning}: MCP: {text}");
        // A turn whose model calls session_search: it is shown the token's sessions, not another.
        api.model.requests.borrow_mut().clear();
        api.model.reply(Ok(crate::support::tool_calls(&[("c1", "session_search", json!({"query": "card PIN"}))])));
        api.model.reply(Ok(crate::support::completion("The spare one is 8765.")));
        let r = send(
            Request::new(Method::Post, "/sessions/bob-chat/chat")
                .json(&json!({"message": crate::support::msg("q1", "user", "find my card PIN")})),
        );
        assert_eq!(r.status, 201);
        let seen = api.model.requests.borrow().iter().map(Json::to_string).collect::<String>();
        assert!(seen.contains("8765") && !seen.contains("is 4321"), "{meaning}: the model saw: {seen}");
        // The routes of its sessions.
        let found = send(Request::new(Method::Get, "/sessions/far-0450/search?q=PIN")).body_json();
        assert_eq!(found["results"][0]["content"], "the spare card PIN is 8765", "{meaning}");
        let history = send(Request::new(Method::Get, "/sessions/bob-chat/history")).body_json();
        assert_eq!(history["messages"].as_array().unwrap().len(), 3, "{meaning}");
        send(Request::new(Method::Get, "/sessions/far-0450/prompt"));
        send(Request::new(Method::Get, "/sessions/far-0450/context"));
        send(Request::new(Method::Get, "/sessions/far-0499/history"));
        // The same words stored as a conversation memory make bob-chat's own memory.
        let out = tool(
            "bob-chat",
            "memory_store",
            json!({"content": "alice's card PIN is 4321", "category": "conversation"}),
        );
        assert!(out.starts_with("Stored memory") && !out.contains(&secret), "{meaning}: {out}");
        // And nothing else: another session, the agent-wide routes.
        for path in ["/sessions/alice-chat/history", "/sessions", "/search?q=PIN", "/memories/search?q=PIN"] {
            let r = api.send(with(&many, Request::new(Method::Get, path)));
            assert_eq!((r.status, code(&r)), (403, "forbidden".into()), "{meaning}: {path}");
        }
    }
}

/// A fork or a split makes a session of a new id, which a token limited to some sessions could
/// not open: such a token is refused (and nothing is made), an agent-wide one is not.
#[test]
fn a_session_limited_token_may_not_fork_or_split() {
    let api = Api::new();
    api.append("s1", "m1", None, "hello");
    api.append("s1", "m2", Some(Some("m1")), "and more");
    let limited = claims("write", Some(&["s1"]));
    let wide = claims("write", None);
    let fork = || Request::new(Method::Post, "/sessions/s1/fork").json(&json!({"atMessageId": "m1", "name": "copy"}));
    let split = || Request::new(Method::Post, "/sessions/s1/split").json(&json!({"summary": "Said hello."}));
    let state = || (api.count("SELECT count(*) FROM sessions"), api.count("SELECT count(*) FROM messages"));
    for (what, req) in [("fork", fork()), ("split", split())] {
        let before = state();
        let r = api.send(with(&limited, req));
        assert_eq!((r.status, code(&r)), (403, "forbidden".into()), "{what}");
        let message = r.body_json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("nor make a session") && message.contains(what), "{what}: {message}");
        assert_eq!(state(), before, "{what}: no session made, no message copied");
        assert!(session_agent_api::permits(&limited, Method::Post, &format!("/sessions/s1/{what}")).is_err());
    }
    for (what, req) in [("fork", fork()), ("split", split())] {
        let r = api.send(with(&wide, req));
        assert_eq!(r.status, 201, "{what}: {}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(api.count("SELECT count(*) FROM sessions"), 3);
}
