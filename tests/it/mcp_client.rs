//! Remote MCP servers' tools in the agent turn (`SESSION_CONFIG.tools.mcp`), natively: a
//! scripted Streamable HTTP server (answers as JSON or as an event stream, sessions it may
//! forget) behind the test transport. A call runs and its result is stored like any tool call;
//! the allow-list filters; a late, failing, erroring or oversize call is a tool error the model
//! reads and the tree keeps, never a failed turn; lists are kept per instance; only the
//! configured URL is ever reached, with the named secret.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{json, Value as Json};
use session_agent_api::access::{Claims, CLAIMS_HEADER};
use session_agent_api::http::Method;
use session_agent_api::Request;
use session_agent_core::config::SessionConfig;
use session_agent_core::context::mcp::{LIST_TTL_MS, RETRY_MS};
use session_agent_core::error::Result as CoreResult;
use session_agent_core::ids::Role;
use session_agent_core::llm::{HttpRequest, HttpResponse};

use crate::support::{completion, tool_calls, Api};

const URL: &str = "http://crm.test/mcp";

/// What the scripted server saw and how it behaves.
#[derive(Default)]
struct Server {
    /// Each JSON-RPC method received, in order.
    methods: Vec<String>,
    /// Sessions it knows (it forgets them all when told).
    sessions: Vec<String>,
    /// Answers `initialize` with this status instead (a server that is down).
    down: Option<u16>,
}

fn sse(msg: &Json) -> String {
    format!("event: message\ndata: {msg}\n\n")
}

fn answer(status: u16, headers: Vec<(String, String)>, body: String) -> Option<CoreResult<HttpResponse>> {
    Some(Ok(HttpResponse { status, headers, body }))
}

/// Registers the scripted MCP server at [`URL`] on `api`'s transport.
fn serve(api: &Api) -> Rc<RefCell<Server>> {
    let state = Rc::new(RefCell::new(Server::default()));
    let s = state.clone();
    let handler = move |req: &HttpRequest| -> Option<CoreResult<HttpResponse>> {
        let msg: Json = serde_json::from_str(&req.body).unwrap();
        let method = msg["method"].as_str().unwrap_or_default().to_owned();
        let id = msg["id"].clone();
        let mut st = s.borrow_mut();
        st.methods.push(method.clone());
        let header = |n: &str| req.headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        if method == "initialize" {
            if let Some(status) = st.down {
                return answer(status, vec![], "down".into());
            }
            let sid = format!("sess-{}", st.sessions.len() + 1);
            st.sessions.push(sid.clone());
            let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "crm", "version": "1"}});
            // Streamed, with a notification before the answer.
            let body = sse(&json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
                + &sse(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
            return answer(200, vec![("mcp-session-id".into(), sid)], body);
        }
        if !header("mcp-session-id").is_some_and(|h| st.sessions.contains(&h)) {
            return answer(404, vec![], "unknown session".into());
        }
        if method == "notifications/initialized" {
            return answer(202, vec![], String::new());
        }
        let tool = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}});
        let result = match method.as_str() {
            "tools/list" => match msg["params"]["cursor"].as_str() {
                None => {
                    json!({"tools": [tool("lookup_customer", "Finds a customer"), tool("delete_everything", "Deletes it all")], "nextCursor": "p2"})
                }
                Some(_) => {
                    json!({"tools": [tool("slow", "Takes long"), json!({"name": "big", "description": "Answers a lot"}), tool("failing", "Fails"),
                    tool("broken", "Errs"), tool("down", "HTTP 500"), tool("bad.name", "not a usable name")]})
                }
            },
            "tools/call" => {
                let args = &msg["params"]["arguments"];
                match msg["params"]["name"].as_str().unwrap_or_default() {
                    "lookup_customer" => {
                        json!({"content": [{"type": "text", "text": format!("Customer {}: Ada", args["id"].as_str().unwrap_or("?"))}]})
                    }
                    "slow" => return None,
                    "big" => json!({"content": [{"type": "text", "text": "x".repeat(5_000)}]}),
                    "failing" => json!({"content": [{"type": "text", "text": "no such customer"}], "isError": true}),
                    "broken" => {
                        let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "database on fire"}});
                        return answer(200, vec![], e.to_string());
                    }
                    "down" => return answer(500, vec![], "oops".into()),
                    other => panic!("the server was asked to run {other}"),
                }
            }
            other => panic!("unexpected method {other}"),
        };
        answer(
            200,
            vec![("content-type".into(), "application/json".into())],
            json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        )
    };
    api.model.serve(URL, handler);
    state
}

fn config(server: Json) -> Json {
    json!({"context": [{"label": "memory", "kind": "writable"}], "tools": {"mcp": [server]}})
}

fn crm() -> Json {
    json!({"name": "crm", "url": URL, "secret": "CRM_MCP_TOKEN",
        "allow": ["lookup_customer", "slow", "big", "failing", "broken", "down", "bad.name"],
        "timeoutMs": 500, "maxOutputBytes": 1000})
}

/// An agent with `server` configured, the secret set, a model, and the scripted server.
fn api_with(server: Json) -> (Api, Rc<RefCell<Server>>) {
    let mut api = Api::with_config(config(server));
    api.secrets.insert("CRM_MCP_TOKEN".into(), "s3cret".into());
    let api = api.with_model();
    let state = serve(&api);
    (api, state)
}

fn user(id: &str, text: &str) -> Json {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

fn turn(api: &Api, sid: &str, text: &str) -> Json {
    let r = api.post(&format!("/sessions/{sid}/chat"), json!({"message": user(&format!("u-{text}"), text)}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["messages"][0].clone()
}

/// The names of the tools the model was offered in its `n`th request.
fn offered(api: &Api, n: usize) -> Vec<String> {
    let req = api.model.requests.borrow()[n].clone();
    req["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect()
}

/// The tool messages the model was sent in its `n`th request.
fn tool_messages(api: &Api, n: usize) -> Vec<Json> {
    let req = api.model.requests.borrow()[n].clone();
    req["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").cloned().collect()
}

#[test]
fn a_remote_tool_runs_its_result_reaches_the_model_and_is_stored() {
    let (api, server) = api_with(crm());
    api.model.reply(Ok(tool_calls(&[("c1", "crm__lookup_customer", json!({"id": "42"}))])));
    api.model.reply(Ok(completion("Ada it is.")));
    let reply = turn(&api, "s", "who is 42?");
    let part = &reply["parts"][0];
    assert_eq!(
        (part["toolName"].as_str(), part["state"].as_str()),
        (Some("crm__lookup_customer"), Some("output-available"))
    );
    assert_eq!(part["output"], "Customer 42: Ada");
    assert_eq!(part["input"], json!({"id": "42"}));
    assert_eq!(reply["parts"][1]["text"], "Ada it is.");
    // The model was offered the allowed tools, prefixed, beside the session's own; the server's
    // second page was followed; a name no provider takes was left out, with a warning.
    let names = offered(&api, 0);
    for n in ["set_context", "session_search", "crm__lookup_customer", "crm__slow", "crm__big", "crm__down"] {
        assert!(names.contains(&n.to_owned()), "{n} not offered: {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("delete_everything") || n.contains("bad.name")), "{names:?}");
    assert!(api.events.warnings.borrow().iter().any(|w| w.contains("bad.name")));
    // A tool's schema as the server gives it; one without any takes an object.
    let req = api.model.requests.borrow()[0].clone();
    let params = |n: &str| {
        req["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == n).unwrap()["function"]["parameters"]
            .clone()
    };
    assert_eq!(params("crm__lookup_customer")["properties"]["id"]["type"], "string");
    assert_eq!(params("crm__big"), json!({"type": "object"}));
    // The result went back to the model.
    let results = tool_messages(&api, 1);
    assert_eq!(
        (results[0]["tool_call_id"].as_str(), results[0]["content"].as_str()),
        (Some("c1"), Some("Customer 42: Ada"))
    );
    // Stored in the tree like any tool call.
    let history = api.get("/sessions/s/history").body_json()["messages"].clone();
    assert_eq!(history[1]["parts"][0]["output"], "Customer 42: Ada");
    // The exchange: initialize, initialized, two pages, the call; every request with the
    // secret, and after initialize with the session and the protocol version.
    assert_eq!(
        server.borrow().methods,
        ["initialize", "notifications/initialized", "tools/list", "tools/list", "tools/call"]
    );
    let sent = api.model.peer_requests.borrow();
    for (i, r) in sent.iter().enumerate() {
        assert_eq!(r.url, URL);
        let h = |n: &str| r.headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(h("authorization"), Some("Bearer s3cret"));
        assert_eq!(h("accept"), Some("application/json, text/event-stream"));
        if i > 0 {
            assert_eq!((h("mcp-session-id"), h("mcp-protocol-version")), (Some("sess-1"), Some("2025-06-18")));
        }
    }
}

#[test]
fn the_allow_list_filters_and_a_tool_outside_it_is_never_called() {
    let (api, server) = api_with(crm());
    api.model.reply(Ok(tool_calls(&[("c1", "crm__delete_everything", json!({}))])));
    api.model.reply(Ok(completion("I cannot.")));
    let reply = turn(&api, "s", "delete it all");
    assert_eq!(reply["parts"][0]["state"], "output-error");
    assert_eq!(reply["parts"][0]["errorText"], "Error: there is no tool named \"crm__delete_everything\"");
    assert!(!server.borrow().methods.contains(&"tools/call".to_owned()), "the server was asked to run it");
}

#[test]
fn late_failing_erring_and_oversize_calls_are_tool_errors_kept_in_the_tree() {
    let (api, _server) = api_with(crm());
    let calls = ["slow", "big", "failing", "broken", "down"];
    let list: Vec<(String, String, Json)> =
        calls.iter().map(|c| (format!("id-{c}"), format!("crm__{c}"), json!({"id": "1"}))).collect();
    let list: Vec<(&str, &str, Json)> = list.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone())).collect();
    api.model.reply(Ok(tool_calls(&list)));
    api.model.reply(Ok(completion("Nothing worked.")));
    let reply = turn(&api, "s", "try everything");
    let expected = [
        "Error: MCP server crm: no answer within 500 ms",
        "Error: the tool's output is 5000 bytes, more than the 1000 allowed",
        "Error: no such customer",
        "Error: MCP server crm: the server answered error -32603: database on fire",
        "Error: MCP server crm: the server answered HTTP 500",
    ];
    let stored = api.get("/sessions/s/history").body_json()["messages"][1]["parts"].clone();
    let sent = tool_messages(&api, 1);
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(reply["parts"][i]["state"], "output-error", "{}", calls[i]);
        assert_eq!(reply["parts"][i]["errorText"], *want);
        assert_eq!(stored[i]["errorText"], *want, "stored");
        assert_eq!(sent[i]["content"], *want, "the model read it");
    }
    assert_eq!(reply["parts"][5]["text"], "Nothing worked.");
}

#[test]
fn an_answer_too_large_to_read_is_an_oversize_error() {
    let (api, _server) = api_with(json!({"name": "crm", "url": URL, "secret": "CRM_MCP_TOKEN", "maxOutputBytes": 1}));
    // Four times the cap and the envelope's allowance are read, no more: 5,000 bytes of text fit
    // that, a 70 KB answer does not.
    let inner = api.model.peers.borrow()[0].1.clone();
    let huge = move |req: &HttpRequest| {
        let msg: Json = serde_json::from_str(&req.body).unwrap();
        if msg["method"] == "tools/call" {
            let text = "y".repeat(70_000);
            let body =
                json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": text}]}});
            return answer(200, vec![], body.to_string());
        }
        inner(req)
    };
    api.model.serve(URL, huge);
    api.model.reply(Ok(tool_calls(&[("c1", "crm__lookup_customer", json!({"id": "1"}))])));
    api.model.reply(Ok(completion("Too much.")));
    let reply = turn(&api, "s", "look");
    assert_eq!(reply["parts"][0]["errorText"], "Error: the tool's output is more than the 1 bytes allowed");
}

#[test]
fn the_list_is_kept_per_instance_and_a_forgotten_session_is_opened_again() {
    let (api, server) = api_with(crm());
    let lookup = || {
        api.model.reply(Ok(tool_calls(&[("c1", "crm__lookup_customer", json!({"id": "7"}))])));
        api.model.reply(Ok(completion("Done.")));
    };
    lookup();
    turn(&api, "s", "one");
    lookup();
    turn(&api, "s", "two");
    let count = |m: &str| server.borrow().methods.iter().filter(|x| *x == m).count();
    assert_eq!((count("initialize"), count("tools/list"), count("tools/call")), (1, 2, 2), "listed once (two pages)");
    // The server forgets its sessions: the call opens a new one and succeeds.
    server.borrow_mut().sessions.clear();
    lookup();
    let reply = turn(&api, "s", "three");
    assert_eq!(reply["parts"][0]["output"], "Customer 7: Ada");
    assert_eq!(count("initialize"), 2);
    // Past the list's time to live, it is listed again.
    api.now.set(api.now.get() + LIST_TTL_MS);
    api.model.reply(Ok(completion("Hi.")));
    turn(&api, "s", "four");
    assert_eq!(count("tools/list"), 4);
}

#[test]
fn a_server_that_cannot_list_is_left_out_and_asked_again_later() {
    let (api, server) = api_with(crm());
    server.borrow_mut().down = Some(503);
    api.model.reply(Ok(completion("Hello.")));
    turn(&api, "s", "hi");
    assert!(!offered(&api, 0).iter().any(|n| n.starts_with("crm__")));
    assert!(api.events.warnings.borrow().iter().any(|w| w.contains("MCP server crm") && w.contains("HTTP 503")));
    // Not asked again at once.
    api.model.reply(Ok(completion("Hello again.")));
    turn(&api, "s", "hi again");
    assert_eq!(server.borrow().methods.len(), 1);
    // Later, it is; it is back.
    server.borrow_mut().down = None;
    api.now.set(api.now.get() + RETRY_MS);
    api.model.reply(Ok(completion("Back.")));
    turn(&api, "s", "and now");
    assert!(offered(&api, 2).contains(&"crm__lookup_customer".to_owned()));
}

#[test]
fn a_server_without_its_secret_is_left_out_and_never_called() {
    let api = Api::with_config(config(crm())).with_model();
    let server = serve(&api);
    api.model.reply(Ok(completion("Hello.")));
    turn(&api, "s", "hi");
    assert!(server.borrow().methods.is_empty());
    assert!(api.events.warnings.borrow().iter().any(|w| w.contains("the secret CRM_MCP_TOKEN is not set")));
}

#[test]
fn a_request_naming_a_url_reaches_nothing_but_the_configured_server() {
    let (api, _server) = api_with(crm());
    let evil = Rc::new(RefCell::new(0));
    let e = evil.clone();
    api.model.peers.borrow_mut().push((
        "http://evil.test".into(),
        Rc::new(move |_: &HttpRequest| {
            *e.borrow_mut() += 1;
            None
        }),
    ));
    // A session-limited token's turn whose body names another server in every way it could.
    let claims = Claims::issue(
        "alice",
        Role::Agent,
        json!({"scope": "write", "ttlSeconds": 3600, "sessions": ["s"]}).as_object().unwrap(),
        1_795_345_200_000,
    )
    .unwrap();
    api.model.reply(Ok(tool_calls(&[(
        "c1",
        "crm__lookup_customer",
        json!({"id": "1", "url": "http://evil.test/mcp"}),
    )])));
    api.model.reply(Ok(completion("Done.")));
    let body = json!({"message": user("u1", "go"), "mcp": [{"name": "evil", "url": "http://evil.test/mcp"}],
        "tools": [{"name": "fetch_it", "url": "http://evil.test/mcp", "inputSchema": {"type": "object"}}],
        "config": {"tools": {"mcp": [{"name": "evil", "url": "http://evil.test/mcp"}]}}});
    let req = Request::new(Method::Post, "/sessions/s/chat").json(&body);
    let r = api.send(req.header(CLAIMS_HEADER, &serde_json::to_string(&claims).unwrap()));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(*evil.borrow(), 0, "a URL from the request was reached");
    assert!(api.model.peer_requests.borrow().iter().all(|r| r.url == URL));
    assert!(!offered(&api, 0).iter().any(|n| n.starts_with("evil__")));
    // A caller's tool may not take a remote tool's name.
    let body = json!({"message": user("u2", "go"), "tools": [{"name": "crm__lookup_customer"}]});
    let r = api.post("/sessions/s/chat", body);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn a_bad_server_configuration_is_refused() {
    let base = || crm().as_object().unwrap().clone();
    let with = |k: &str, v: Json| {
        let mut s = base();
        s.insert(k.into(), v);
        Json::Object(s)
    };
    let bad = [
        (with("name", json!("a__b")), "name must be"),
        (with("name", json!("_a")), "name must be"),
        (with("name", json!("x".repeat(25))), "name must be"),
        (with("url", json!("ftp://x/mcp")), "url must be"),
        (with("url", json!("https://user:pw@x/mcp")), "url must be"),
        (with("url", json!("https:///mcp")), "url must be"),
        (with("secret", json!("API_TOKEN")), "never leaves the Worker"),
        (with("secret", json!("TOKEN_SECRET")), "never leaves the Worker"),
        (with("header", json!("mcp-session-id")), "header must be"),
        (with("allow", json!([])), "allow must be"),
        (with("timeoutMs", json!(50)), "timeoutMs"),
        (with("maxOutputBytes", json!(0)), "maxOutputBytes"),
        (with("extra", json!(1)), "unknown field `extra`"),
        (with("allow", json!("lookup_customer")), "allow must be an array of strings"),
        (with("timeoutMs", json!("10")), "timeoutMs must be a positive integer"),
        (with("url", json!(null)), "url is required"),
        (with("secret", json!(7)), "secret must be a string"),
        (json!("crm"), "tools.mcp[0]: must be an object"),
    ];
    for (server, want) in bad {
        let text = json!({"tools": {"mcp": [server]}}).to_string();
        let e = SessionConfig::from_json(&text).expect_err(&text);
        assert!(e.message.contains(want), "{text}: {}", e.message);
    }
    for (tools, want) in [
        (json!([]), "tools must be an object"),
        (json!({"mcp": {}}), "tools.mcp must be an array"),
        (json!({"http": []}), "unknown field `http`"),
    ] {
        let e = SessionConfig::from_json(&json!({"tools": tools}).to_string()).unwrap_err();
        assert!(e.message.contains(want), "{tools}: {}", e.message);
    }
    assert_eq!(SessionConfig::from_json(r#"{"tools": null}"#).unwrap().tools.mcp.len(), 0);
    let two = json!({"tools": {"mcp": [crm(), crm()]}}).to_string();
    assert!(SessionConfig::from_json(&two).unwrap_err().message.contains("two servers are named \"crm\""));
    let no_secret = json!({"tools": {"mcp": [{"name": "a", "url": URL, "header": "x-api-key"}]}}).to_string();
    assert!(SessionConfig::from_json(&no_secret).unwrap_err().message.contains("header needs secret"));
    let fine = json!({"tools": {"mcp": [{"name": "docs-1", "url": "https://example.com/mcp"}]}}).to_string();
    let cfg = SessionConfig::from_json(&fine).unwrap();
    assert_eq!((cfg.tools.mcp[0].timeout_ms, cfg.tools.mcp[0].max_output_bytes), (10_000, 32_768));
}

#[test]
fn a_header_named_in_the_config_carries_the_secret_as_it_is() {
    let (api, _server) = api_with(json!({"name": "crm", "url": URL, "secret": "CRM_MCP_TOKEN", "header": "X-Api-Key"}));
    api.model.reply(Ok(completion("Hi.")));
    turn(&api, "s", "hi");
    let sent = api.model.peer_requests.borrow();
    let h = |n: &str| sent[0].headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!((h("x-api-key"), h("authorization")), (Some("s3cret".into()), None));
}
