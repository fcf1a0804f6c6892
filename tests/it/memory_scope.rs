//! Memory per agent and per call (issue 35; the seeds' `remembers().tags` and per-call
//! `memory`): an agent whose config names tags or categories injects, recalls and forgets only
//! those facts and tags what it stores with its tags; `POST …/chat` takes a memory spec
//! (`inject`, `extract`, `tags`, `categories`, `limit`) that overrides the config for one turn.

use crate::support::{code, completion, msg, Api};
use serde_json::{json, Value as Json};

fn store(api: &Api, body: Json) -> String {
    let r = api.post("/memories", body);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["id"].as_str().unwrap().to_owned()
}

/// The `<user-memory>` block of the last turn's first model request, if one was sent.
fn injected(api: &Api, request: usize) -> String {
    let req = api.model.requests.borrow()[request].clone();
    let second = &req["messages"][1];
    match second["role"].as_str() {
        Some("system") => second["content"].as_str().unwrap().to_owned(),
        _ => String::new(),
    }
}

fn facts(api: &Api) {
    store(api, json!({"content": "The user's laptop is a ThinkPad.", "tags": ["support"]}));
    store(api, json!({"content": "The user's invoice address is in Lyon.", "tags": ["billing"]}));
    store(api, json!({"content": "The user's favourite laptop sticker is a cat.", "category": "daily"}));
}

#[test]
fn an_agent_scoped_by_tags_injects_recalls_and_forgets_only_its_facts() {
    let api = Api::with_config(json!({"memory": {"tags": ["support"], "extract": false}})).with_model();
    facts(&api);
    api.model.reply(Ok(completion("Noted.")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "My laptop and my invoice?")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let block = injected(&api, 0);
    assert!(block.contains("ThinkPad"), "{block}");
    assert!(!block.contains("Lyon") && !block.contains("sticker"), "outside the scope: {block}");
    assert_eq!(r.body_json()["messages"][0]["metadata"]["memories"].as_array().unwrap().len(), 1);
    // The recall tool keeps to the scope too.
    let out = api.post("/sessions/s/tools/memory_recall", json!({"input": {"query": "laptop invoice sticker"}}));
    let out = out.body_json()["output"].as_str().unwrap().to_owned();
    assert!(out.contains("ThinkPad") && !out.contains("Lyon") && !out.contains("sticker"), "{out}");
    // What the agent stores gets its tags, so it recalls it.
    let out = api
        .post("/sessions/s/tools/memory_store", json!({"input": {"content": "The user runs Fedora.", "tags": ["os"]}}));
    assert_eq!(out.status, 200);
    let stored = api.get("/memories?tag=support&tag=os").body_json()["memories"].clone();
    assert_eq!(stored[0]["content"], "The user runs Fedora.", "{stored}");
    // Forget by query cannot reach outside the scope.
    let out = api.post("/sessions/s/tools/memory_forget", json!({"input": {"query": "invoice address Lyon"}}));
    assert!(out.body_json()["output"].as_str().unwrap().starts_with("No memory matches"), "{}", out.body_json());
    assert_eq!(api.get("/memories?tag=billing").body_json()["memories"].as_array().unwrap().len(), 1);
    // The HTTP API is the whole store, not the agent's view.
    assert_eq!(api.get("/memories").body_json()["memories"].as_array().unwrap().len(), 4);
}

#[test]
fn an_agent_scoped_by_categories_injects_and_recalls_only_those() {
    let api = Api::with_config(json!({"memory": {"categories": ["daily"], "extract": false}})).with_model();
    facts(&api);
    api.model.reply(Ok(completion("Cute.")));
    api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "What about my laptop?")}));
    let block = injected(&api, 0);
    assert!(block.contains("sticker") && !block.contains("ThinkPad"), "{block}");
    let recall = |input: Json| {
        let r = api.post("/sessions/s/tools/memory_recall", json!({ "input": input }));
        r.body_json()["output"].as_str().unwrap().to_owned()
    };
    let out = recall(json!({"query": "laptop"}));
    assert!(out.contains("sticker") && !out.contains("ThinkPad"), "{out}");
    let out = recall(json!({"query": "laptop", "category": "core"}));
    assert!(out.starts_with("Error:") && out.contains("outside"), "{out}");
}

#[test]
fn extraction_tags_what_it_stores_with_the_scope() {
    let api = Api::with_config(json!({"memory": {"inject": false, "tags": ["support"]}})).with_model();
    api.model.reply(Ok(completion("Got it.")));
    api.model.reply(Ok(completion(
        r#"{"facts": [{"fact": "The user's printer is a LaserJet.", "score": 0.9, "tags": ["hardware"]}]}"#,
    )));
    api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "My printer is a LaserJet.")}));
    let all = api.get("/memories").body_json()["memories"].clone();
    assert_eq!(all[0]["tags"], json!(["support", "hardware"]));
    // A call's tags instead of the agent's.
    api.model.reply(Ok(completion("Ok.")));
    api.model.reply(Ok(completion(r#"{"facts": [{"fact": "The user pays by card.", "score": 0.9}]}"#)));
    let r = api.post(
        "/sessions/s/chat",
        json!({"message": msg("u2", "user", "I pay by card."), "memory": {"tags": ["billing"]}}),
    );
    assert_eq!(r.status, 201);
    let card = api.get("/memories?tag=billing").body_json()["memories"].clone();
    assert_eq!(
        (card[0]["content"].as_str(), card[0]["tags"].clone()),
        (Some("The user pays by card."), json!(["billing"]))
    );
}

#[test]
fn a_calls_memory_spec_overrides_the_config_for_that_turn() {
    let api = Api::with_config(json!({"memory": {"inject": {"limit": 5}, "extract": false}})).with_model();
    facts(&api);
    let turn = |id: &str, memory: Json| {
        api.model.reply(Ok(completion("ok")));
        let before = api.model.requests.borrow().len();
        let r = api
            .post("/sessions/s/chat", json!({"message": msg(id, "user", "laptop invoice sticker"), "memory": memory}));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        (injected(&api, before), api.model.requests.borrow().len() - before)
    };
    let (all, _) = turn("u1", json!({}));
    assert!(all.contains("ThinkPad") && all.contains("Lyon") && all.contains("sticker"), "{all}");
    let (billing, _) = turn("u2", json!({"tags": ["billing"]}));
    assert!(billing.contains("Lyon") && !billing.contains("ThinkPad"), "{billing}");
    let (daily, _) = turn("u3", json!({"categories": ["daily"]}));
    assert!(daily.contains("sticker") && !daily.contains("Lyon"), "{daily}");
    let (one, _) = turn("u4", json!({"limit": 1}));
    assert_eq!(one.matches("\n- ").count(), 1, "{one}");
    let (none, calls) = turn("u5", json!({"inject": false}));
    assert_eq!((none.as_str(), calls), ("", 1));
    // extract: true on a call of an agent that does not extract: one more model call after it.
    api.model.reply(Ok(completion(r#"{"facts": []}"#)));
    let (_, calls) = turn("u6", json!({"inject": false, "extract": true}));
    assert_eq!(calls, 2, "the answer, then the extraction");
}

#[test]
fn inject_true_turns_memory_on_for_an_agent_without_it() {
    let api = Api::new().with_model();
    store(&api, json!({"content": "The user's dog is called Rex."}));
    api.model.reply(Ok(completion("Hi Rex.")));
    api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "my dog?")}));
    assert_eq!(injected(&api, 0), "", "memory is not configured");
    api.model.reply(Ok(completion("Hi Rex.")));
    api.post("/sessions/s/chat", json!({"message": msg("u2", "user", "my dog?"), "memory": {"inject": true}}));
    assert!(injected(&api, 1).contains("Rex"));
}

#[test]
fn bad_memory_specs_are_400_and_run_nothing() {
    let api = Api::with_config(json!({"memory": true})).with_model();
    let long = "x".repeat(65);
    let seventeen: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    for memory in [
        json!(1),
        json!("yes"),
        json!(null),
        json!([]),
        json!({"inject": "yes"}),
        json!({"extract": 1}),
        json!({"tags": "support"}),
        json!({"tags": [1]}),
        json!({"tags": [""]}),
        json!({"tags": [long]}),
        json!({"tags": seventeen}),
        json!({"categories": []}),
        json!({"categories": ["weekly"]}),
        json!({"categories": "core"}),
        json!({"limit": 0}),
        json!({"limit": 51}),
        json!({"limit": 1.5}),
        json!({"limit": "3"}),
        json!({"recall": true}),
    ] {
        let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "hi"), "memory": memory.clone()}));
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{memory}");
        assert!(r.body_json()["error"]["message"].as_str().unwrap().contains("memory"), "{memory}");
    }
    assert!(api.model.requests.borrow().is_empty(), "no model call");
    assert_eq!(api.get("/sessions/s").status, 404, "nothing stored");
}

#[test]
fn bad_scopes_in_the_config_are_refused() {
    use session_agent_core::config::SessionConfig;
    for memory in [
        json!({"tags": [""]}),
        json!({"tags": "support"}),
        json!({"categories": []}),
        json!({"categories": ["weekly"]}),
        json!({"tags": (0..17).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
    ] {
        let config = json!({ "memory": memory }).to_string();
        assert!(SessionConfig::from_json(&config).is_err(), "{config}");
    }
}

#[test]
fn a_scoped_agent_of_a_space_extracts_tagged_and_recalls_its_tags_from_the_space() {
    use crate::support::InProcess;
    use std::rc::Rc;
    let config = json!({"memory": {"space": true, "tags": ["support"]}});
    let spaces = Rc::new(InProcess::default());
    let alice = spaces.space("alice", config.clone());
    let api = Api::with_config(config).with_model().named("alice:support").with_spaces(spaces.clone());
    // Extraction goes to the space, with the agent's tags.
    api.model.reply(Ok(completion("Noted.")));
    alice.model.reply(Ok(completion(r#"{"facts": [{"fact": "The user's router is a Fritzbox.", "score": 0.9}]}"#)));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "My router is a Fritzbox.")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let m = alice.get("/memories").body_json()["memories"][0].clone();
    assert_eq!(
        (m["content"].as_str(), m["tags"].clone()),
        (Some("The user's router is a Fritzbox."), json!(["support"]))
    );
    // A fact of the space outside the agent's tags is not injected; its own tag's is.
    assert_eq!(
        alice.post("/memories", json!({"content": "The user's router bill is 30 euros.", "tags": ["billing"]})).status,
        201
    );
    api.model.reply(Ok(completion("ok")));
    alice.model.reply(Ok(completion(r#"{"facts": []}"#)));
    api.post("/sessions/s/chat", json!({"message": msg("u2", "user", "router?")}));
    let block = injected(&api, 1);
    assert!(block.contains("Fritzbox") && !block.contains("30 euros"), "{block}");
    // The link refuses tags that are not a scope's.
    let bad = json!({"agent": "alice:support", "sessionId": "s", "exchange": {"userId": "u", "user": "x", "assistant": "y"}, "tags": [""]});
    assert_eq!(alice.post("/link/extract", bad).status, 400);
}
