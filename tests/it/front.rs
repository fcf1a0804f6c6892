//! The front door's decisions (`session_agent_api::front`), natively: CORS preflights and
//! headers, the WebSocket handshake rule, health and the console, the agent's name, where a
//! token may come from, the admin token compared whole, what a known caller may do, the query
//! the Durable Object gets, and how a request is logged. (The HMAC signature and the bindings
//! are the Workers layer's: tests/e2e/access.test.mjs and holes.test.mjs drive them in workerd.)

use serde_json::json;
use session_agent_api::access::Claims;
use session_agent_api::front::{
    self, AgentCall, Caller, Cors, Door, Incoming, Next, Presented, Sent, Settings, Upgrade,
};
use session_agent_core::ids::Role;

const NOW: i64 = 1_795_345_200_000;

/// The decision for a request with `headers`, a body or not, under `settings`.
fn door_of(
    method: &str,
    path_query: &str,
    headers: &[(&str, &str)],
    body: Sent,
    settings: &Settings<'_>,
) -> Door<'static> {
    let (path, query) = path_query.split_once('?').unwrap_or((path_query, ""));
    let path: &'static str = Box::leak(path.to_owned().into_boxed_str());
    let query: &'static str = Box::leak(query.to_owned().into_boxed_str());
    let method: &'static str = Box::leak(method.to_owned().into_boxed_str());
    let header = |name: &str| headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    front::door(&Incoming { method, path, query, header: &header, body }, settings)
}

const PLAIN: Settings<'static> = Settings { cors_origins: "", chat_page: "" };

fn answer(d: Door<'_>) -> (u16, Option<String>) {
    match d {
        Door::Answer(r) => (r.status, r.header("allow").map(str::to_owned)),
        Door::Console => (0, Some("console".into())),
        Door::Agent(a) => (1, Some(format!("{} {} {:?} {:?}", a.agent, a.tail, a.upgrade, a.token))),
        Door::Directory(d) => (2, Some(format!("{:?} {:?}", d.what, d.token))),
    }
}

#[test]
fn the_directory_is_read_with_get_and_the_admin_token_only() {
    let bearer = [("authorization", "Bearer t")];
    for (path, what) in [("/directory", "Entries"), ("/directory/usage", "Usage"), ("/directory/export", "Export")] {
        let d = answer(door_of("GET", &format!("{path}?limit=5"), &bearer, Sent::Nothing, &PLAIN));
        assert_eq!(d, (2, Some(format!("{what} Some(\"t\")"))));
        assert_eq!(answer(door_of("POST", path, &bearer, Sent::Body, &PLAIN)), (405, Some("GET, HEAD".into())));
        assert_eq!(answer(door_of("GET", &format!("{path}?x=%FF"), &bearer, Sent::Nothing, &PLAIN)).0, 400);
        assert_eq!(front::log_route(path), (String::new(), path));
    }
    // Other paths under it are the console's (or 404 without it).
    assert_eq!(answer(door_of("GET", "/directory/other", &[], Sent::Nothing, &PLAIN)).0, 0);
    assert!(front::directory_caller(&Caller::Admin).is_ok());
    let claims =
        Claims::issue("a", Role::Agent, json!({"scope": "read", "ttlSeconds": 60}).as_object().unwrap(), NOW).unwrap();
    let e = front::directory_caller(&Caller::Scoped(claims)).unwrap_err();
    assert_eq!(e.kind.status(), 403);
}

const KEYS: [(&str, &str); 3] =
    [("upgrade", "websocket"), ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="), ("sec-websocket-version", "13")];

// invariant 25 (docs/ARCHITECTURE.md)
#[test]
fn only_a_genuine_handshake_of_a_sessions_socket_is_an_upgrade() {
    let ws = "/agents/alice/sessions/s1/ws";
    assert_eq!(
        answer(door_of("GET", ws, &KEYS, Sent::Nothing, &PLAIN)).1.unwrap(),
        "alice /sessions/s1/ws WebSocket None"
    );
    // With a body or without the keys: 405 on the socket's path (workerd shows such a request
    // as a GET whatever its method; one that still says POST is no socket request at all: 400).
    for (body, headers) in [(Sent::Body, &KEYS[..]), (Sent::Nothing, &KEYS[..1])] {
        assert_eq!(answer(door_of("GET", ws, headers, body, &PLAIN)), (405, Some("GET".into())), "{body:?}");
    }
    assert_eq!(answer(door_of("POST", ws, &KEYS, Sent::Nothing, &PLAIN)).0, 400);
    // The header anywhere else is 400; without it a request is no upgrade.
    assert_eq!(answer(door_of("GET", "/agents/alice/sessions", &KEYS, Sent::Nothing, &PLAIN)).0, 400);
    assert_eq!(answer(door_of("GET", ws, &[], Sent::Nothing, &PLAIN)).1.unwrap(), "alice /sessions/s1/ws None None");
}

// invariant 25 (docs/ARCHITECTURE.md)
#[test]
fn a_token_comes_from_the_header_and_from_the_url_only_on_a_handshake() {
    let bearer = [("authorization", "Bearer  abc ")];
    let got =
        |path: &str, headers: &[(&str, &str)]| answer(door_of("GET", path, headers, Sent::Nothing, &PLAIN)).1.unwrap();
    assert!(got("/agents/a/sessions", &bearer).ends_with("Some(\"abc\")"));
    assert!(got("/agents/a/sessions?token=xyz", &[]).ends_with("None None"), "a token in a URL counts for nothing");
    let mut hs = KEYS.to_vec();
    assert!(got("/agents/a/sessions/s/ws?token=xyz", &hs).ends_with("Some(\"xyz\")"));
    // A header that is present wins, even one that is not Bearer.
    hs.push(("authorization", "Basic Zm9v"));
    assert!(got("/agents/a/sessions/s/ws?token=xyz", &hs).ends_with("WebSocket None"));
}

#[test]
fn health_the_console_and_names() {
    let d = |m: &str, p: &str, s: &Settings<'_>| answer(door_of(m, p, &[], Sent::Nothing, s));
    assert_eq!(d("GET", "/healthz", &PLAIN).0, 200);
    assert_eq!(d("POST", "/healthz", &PLAIN), (405, Some("GET, HEAD".into())));
    assert_eq!(d("GET", "/", &PLAIN).1.unwrap(), "console");
    assert_eq!(d("HEAD", "/console.js", &PLAIN).1.unwrap(), "console");
    assert_eq!(d("DELETE", "/", &PLAIN).0, 405);
    let off = Settings { cors_origins: "", chat_page: " off " };
    assert_eq!(d("GET", "/", &off).0, 404, "CHAT_PAGE=off: no console");
    assert_eq!(d("GET", "/agents", &PLAIN).0, 404);
    for bad in ["/agents/a%2Fb/sessions", "/agents/%FF/sessions", "/agents/a b/x", "/agents/a/sessions?q=%FF"] {
        assert_eq!(d("GET", bad, &PLAIN).0, 400, "{bad}");
    }
    assert_eq!(d("DELETE", "/agents/alice", &PLAIN).1.unwrap(), "alice / None None", "the agent itself is its `/`");
    // Below an agent's `/v1/`, the front door's own refusals are in OpenAI's error shape too.
    for bad in ["/agents/a%2Fb/v1/models", "/agents/a b/v1/chat/completions", "/agents/a/v1/models?q=%FF"] {
        match door_of("GET", bad, &[], Sent::Nothing, &PLAIN) {
            Door::Answer(r) => {
                let e = r.body_json()["error"].clone();
                assert_eq!((r.status, e["type"].as_str()), (400, Some("invalid_request_error")), "{bad}: {e}");
                assert!(e.get("param").is_some(), "{bad}: {e}");
            }
            _ => panic!("{bad}: answered by the door"),
        }
    }
}

#[test]
fn cors_preflights_and_headers() {
    let listed = Settings { cors_origins: "https://app.example, https://admin.example", chat_page: "" };
    let pre = |origin: &str, s: &Settings<'_>| {
        let h = [("origin", origin), ("access-control-request-method", "POST")];
        match door_of("OPTIONS", "/agents/a/sessions", &h, Sent::Nothing, s) {
            Door::Answer(r) => Some((r.status, r.header("access-control-allow-headers").map(str::to_owned))),
            _ => None,
        }
    };
    let (status, allowed) = pre("https://APP.example", &listed).unwrap();
    assert_eq!(status, 204);
    let allowed = allowed.unwrap();
    assert!(allowed.contains("authorization"));
    // The openai package in a page sends these (a preflight that left one out fails the call).
    for h in ["x-session-id", "x-stainless-os", "x-stainless-retry-count", "x-stainless-timeout", "openai-project"] {
        assert!(allowed.split(", ").any(|a| a == h), "{h}: {allowed}");
    }
    assert_eq!(pre("https://evil.example", &listed).unwrap().0, 403);
    assert!(pre("https://app.example", &PLAIN).is_none(), "without CORS_ORIGINS no preflight is answered as one");
    let header = |name: &str| (name == "origin").then(|| "https://app.example".to_owned());
    let inc = Incoming { method: "GET", path: "/", query: "", header: &header, body: Sent::Nothing };
    let cors = Cors::of(&inc, &listed);
    let names: Vec<&str> = cors.headers(200).iter().map(|(k, _)| *k).collect();
    assert_eq!(names, ["access-control-allow-origin", "access-control-expose-headers", "vary"]);
    assert!(cors.headers(101).is_empty(), "a socket's 101 is left as it is");
    let star = Cors::of(&inc, &Settings { cors_origins: "*", chat_page: "" });
    assert_eq!(star.headers(200)[0].1, "*");
    assert!(!star.headers(200).iter().any(|(k, _)| *k == "vary"));
}

// invariant 11 (docs/ARCHITECTURE.md)
#[test]
fn the_admin_token_is_compared_whole_and_api_token_must_be_set() {
    assert_eq!(front::presented(Some("secret"), None).err().map(|e| e.code()), Some("not_configured"));
    assert_eq!(front::presented(Some("secret"), Some("")).err().map(|e| e.code()), Some("not_configured"));
    assert!(matches!(front::presented(Some("secret"), Some("secret")), Ok(Presented::Admin)));
    for wrong in [None, Some(""), Some("secre"), Some("secret2"), Some("Secret")] {
        assert_eq!(front::presented(wrong, Some("secret")).err().map(|e| e.code()), Some("unauthorized"), "{wrong:?}");
    }
    let claims =
        Claims::issue("alice", Role::Agent, json!({"scope": "read", "ttlSeconds": 60}).as_object().unwrap(), NOW)
            .unwrap();
    let token = claims.answer(b"sig")["token"].as_str().unwrap().to_owned();
    match front::presented(Some(&token), Some("secret")) {
        Ok(Presented::Scoped { claims: got, signature, .. }) => assert_eq!((got, signature), (claims, b"sig".to_vec())),
        _ => panic!("a scoped token is taken apart for its signature to be verified"),
    }
}

#[test]
fn what_a_known_caller_may_do() {
    let call = |tail: &'static str| AgentCall {
        agent: "alice".into(),
        role: Role::Agent,
        tail,
        upgrade: Upgrade::None,
        token: None,
    };
    let scoped = |body: serde_json::Value| {
        Caller::Scoped(Claims::issue("alice", Role::Agent, body.as_object().unwrap(), NOW).unwrap())
    };
    let status = |n: Next| match n {
        Next::Issue => 1,
        Next::Forward => 2,
        Next::Answer(r) => r.status,
    };
    assert_eq!(status(front::next(&call("/tokens"), &Caller::Admin, "POST", NOW, None)), 1);
    assert_eq!(status(front::next(&call("/tokens"), &Caller::Admin, "GET", NOW, None)), 405);
    let write = scoped(json!({"scope": "write", "ttlSeconds": 60}));
    assert_eq!(status(front::next(&call("/tokens"), &write, "POST", NOW, None)), 403);
    assert_eq!(status(front::next(&call("/sessions"), &write, "POST", NOW, None)), 2);
    assert_eq!(status(front::next(&call("/sessions"), &write, "POST", NOW + 61_000, None)), 401, "expired");
    let read = scoped(json!({"scope": "read", "ttlSeconds": 60}));
    assert_eq!(status(front::next(&call("/sessions"), &read, "POST", NOW, None)), 403, "a read token writes nothing");
    let limited = scoped(json!({"scope": "write", "ttlSeconds": 60, "sessions": ["s1"]}));
    assert_eq!(status(front::next(&call("/sessions/s1/messages"), &limited, "POST", NOW, None)), 2);
    assert_eq!(status(front::next(&call("/sessions/s2/messages"), &limited, "POST", NOW, None)), 403);
    assert_eq!(status(front::next(&call("/search"), &limited, "GET", NOW, None)), 403);
    let big = 32 * 1024 * 1024 + 1;
    assert_eq!(status(front::next(&call("/sessions/s1/messages"), &Caller::Admin, "POST", NOW, Some(big))), 413);
    let other = Caller::Scoped(
        Claims::issue("bob", Role::Agent, json!({"scope": "write", "ttlSeconds": 60}).as_object().unwrap(), NOW)
            .unwrap(),
    );
    assert_eq!(status(front::next(&call("/sessions"), &other, "GET", NOW, None)), 403, "another agent's token");
}

#[test]
fn the_query_the_durable_object_gets_and_the_log_line() {
    assert_eq!(front::forwarded_query("a=1&token=x&b=%FF&t%6Fken=y&tokens=2&&"), "a=1&b=%FF&tokens=2");
    assert_eq!(front::forwarded_query(""), "");
    assert_eq!(
        front::log_route("/agents/alice/sessions/s1/messages/m%2F1"),
        ("alice".into(), "/sessions/{sid}/messages/{mid}")
    );
    assert_eq!(front::log_route("/agents/alice/tokens"), ("alice".into(), "/tokens"));
    assert_eq!(front::log_route("/agents/bad%2Fname/sessions"), (String::new(), "/sessions"));
    assert_eq!(front::log_route("/healthz"), (String::new(), "/healthz"));
    assert_eq!(front::log_route("/console.js"), (String::new(), "(console)"));
    assert_eq!(front::log_route("/agents/alice/nope"), ("alice".into(), "(no route)"));
}
