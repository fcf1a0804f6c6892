//! Long-term memory through the DO API on real SQLite: storing (limits, duplicates, the cap),
//! pages and filters, versions, expiry, forgetting, what session deletes do, ranked recall on a
//! fixed corpus, the memory tools, inject into a turn (the frozen prompt unchanged) and
//! extraction with a scripted model (add, update, delete, nothing, bad answers, failures), and
//! embeddings (stored, failing, caught up later).

use crate::support::{code, completion, msg, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_core::error::Error;
use session_agent_core::llm::HttpResponse;
use session_agent_core::memory::extract::{parse_decisions, parse_facts, Decision};

const DAY: i64 = 86_400_000;

fn memory_api() -> Api {
    Api::with_config(json!({
        "context": [{"label": "soul", "kind": "readonly", "content": "You are terse."}],
        "memory": {"inject": {"limit": 3, "tokenBudget": 200}}
    }))
    .with_model()
}

fn store(api: &Api, body: Json) -> Json {
    let r = api.post("/memories", body);
    assert!(r.status == 201 || r.status == 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

fn list(api: &Api, query: &str) -> Vec<Json> {
    let r = api.get(&format!("/memories{query}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["memories"].as_array().unwrap().clone()
}

fn contents(list: &[Json]) -> Vec<String> {
    list.iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

fn search(api: &Api, q: &str) -> Vec<Json> {
    let r = api.get(&format!("/memories/search?q={}", q.replace(' ', "+")));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["results"].as_array().unwrap().clone()
}

// invariant 28 (docs/ARCHITECTURE.md)
#[test]
fn store_merges_duplicates_and_keeps_the_shape() {
    let api = Api::new();
    let r = api.post("/memories", json!({"content": "The user lives in Paris.", "tags": ["home"], "score": 0.6}));
    assert_eq!(r.status, 201);
    let m = r.body_json();
    assert!(m["id"].as_str().unwrap().starts_with("mem_"));
    assert_eq!(m["category"], "core");
    assert_eq!(m["source"], Json::Null);
    assert_eq!(m["recallCount"], 0);
    for key in ["createdAt", "updatedAt", "expiresAt", "recalledAt"] {
        assert!(m.get(key).is_some(), "{key}");
    }
    // Same text after trimming, collapsing space and ignoring case: merged.
    let r = api.post("/memories", json!({"content": "  the USER lives   in paris. ", "tags": ["city"], "score": 0.9}));
    assert_eq!(r.status, 200);
    let merged = r.body_json();
    assert_eq!(merged["id"], m["id"]);
    assert_eq!(merged["tags"], json!(["home", "city"]));
    assert_eq!(merged["score"], 0.9);
    assert_eq!(merged["content"], "The user lives in Paris.");
    // A merge normalizes the expiry it takes, like a create.
    let r = api
        .post("/memories", json!({"content": "THE user lives in Paris.", "expiresAt": " 2099-06-01T00:00:00+00:00"}));
    assert_eq!(r.body_json()["expiresAt"], "2099-06-01T00:00:00.000Z");
    assert_eq!(api.get(&format!("/memories/{}", m["id"].as_str().unwrap())).status, 200);
    // Another category is another memory.
    let r = api.post("/memories", json!({"content": "The user lives in Paris.", "category": "daily"}));
    assert_eq!(r.status, 201);
    assert!(r.body_json()["expiresAt"].as_str().unwrap() > "2026-11-29");
    assert_eq!(list(&api, "").len(), 2);
    let frames = api.events.take("*");
    let ops: Vec<&str> = frames.iter().map(|f| f["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["created", "updated", "updated", "created"]);
    assert_eq!(frames[0]["type"], "memory");
}

#[test]
fn bad_input_is_400_and_stores_nothing() {
    let api = Api::new();
    let long = "x".repeat(4001);
    let many: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    for body in [
        json!({}),
        json!({"content": "   "}),
        json!({"content": long}),
        json!({"content": "a", "tags": many}),
        json!({"content": "a", "tags": [""]}),
        json!({"content": "a", "tags": "x"}),
        json!({"content": "a", "score": 1.5}),
        json!({"content": "a", "score": "high"}),
        json!({"content": "a", "category": "forever"}),
        json!({"content": "a", "category": "conversation"}),
        json!({"content": "a", "messageId": "m1"}),
        json!({"content": "a", "expiresAt": "2020-01-01T00:00:00Z"}),
        json!({"content": "a", "expiresAt": "soon"}),
        json!({"content": "a", "sessionId": "bad id"}),
        json!({"content": "a", "colour": "red"}),
    ] {
        let r = api.post("/memories", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", String::from_utf8_lossy(&r.body));
    }
    assert!(list(&api, "").is_empty());
    assert_eq!(api.get("/memories/search").status, 400);
    assert_eq!(api.get("/memories?limit=101").status, 400);
    assert_eq!(api.get("/memories?cursor=nonsense").status, 400);
}

#[test]
fn the_cap_is_a_clear_422() {
    let api = Api::with_config(json!({"memory": {"maxMemories": 2}}));
    store(&api, json!({"content": "one"}));
    store(&api, json!({"content": "two"}));
    let r = api.post("/memories", json!({"content": "three"}));
    assert_eq!(r.status, 422);
    assert_eq!(code(&r), "over_budget");
    assert!(r.body_json()["error"]["message"].as_str().unwrap().contains("maxMemories"));
    // A duplicate still merges at the cap.
    assert_eq!(api.post("/memories", json!({"content": "ONE"})).status, 200);
    assert_eq!(list(&api, "").len(), 2);
}

#[test]
fn pages_filters_and_order() {
    let api = Api::new();
    for i in 0..7 {
        let tags = if i % 2 == 0 { json!(["even"]) } else { json!(["odd"]) };
        store(&api, json!({"content": format!("fact {i}"), "tags": tags}));
    }
    store(&api, json!({"content": "conv", "category": "conversation", "sessionId": "s1"}));
    let all = list(&api, "");
    assert_eq!(contents(&all)[..3], ["conv", "fact 6", "fact 5"]);
    let r = api.get("/memories?limit=3").body_json();
    assert_eq!(contents(r["memories"].as_array().unwrap()), ["conv", "fact 6", "fact 5"]);
    let cursor = r["nextCursor"].as_str().unwrap().to_owned();
    let r2 = api.get(&format!("/memories?limit=3&cursor={}", cursor.replace(':', "%3A"))).body_json();
    assert_eq!(contents(r2["memories"].as_array().unwrap()), ["fact 4", "fact 3", "fact 2"]);
    let r3 = api.get(&format!("/memories?limit=3&cursor={}", r2["nextCursor"].as_str().unwrap())).body_json();
    assert_eq!(contents(r3["memories"].as_array().unwrap()), ["fact 1", "fact 0"]);
    assert_eq!(r3["nextCursor"], Json::Null);
    assert_eq!(contents(&list(&api, "?tag=odd")), ["fact 5", "fact 3", "fact 1"]);
    assert_eq!(contents(&list(&api, "?category=conversation")), ["conv"]);
    assert_eq!(contents(&list(&api, "?sessionId=s1")), ["conv"]);
    assert_eq!(api.get("/memories?category=nope").status, 400);
}

// invariant 28 (docs/ARCHITECTURE.md)
#[test]
fn patch_keeps_versions_and_refuses_duplicates() {
    let api = Api::new();
    let m = store(&api, json!({"content": "The user likes tea.", "score": 0.7}));
    store(&api, json!({"content": "The user likes coffee."}));
    let id = m["id"].as_str().unwrap();
    let r = api.patch(&format!("/memories/{id}"), json!({"content": "The user likes green tea.", "tags": ["drink"]}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body_json()["content"], "The user likes green tea.");
    assert_eq!(r.body_json()["score"], 0.7);
    let dup = api.patch(&format!("/memories/{id}"), json!({"content": "the user likes COFFEE."}));
    assert_eq!(dup.status, 409);
    assert_eq!(api.patch(&format!("/memories/{id}"), json!({"score": 2})).status, 400);
    assert_eq!(api.patch("/memories/mem_nope", json!({"score": 0.1})).status, 404);
    let v = api.get(&format!("/memories/{id}/history")).body_json()["versions"].clone();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["content"], "The user likes tea.");
    assert_eq!(v[0]["by"], "api");
    assert_eq!(v[1]["content"], "The user likes green tea.");
    assert_eq!(v[1]["tags"], json!(["drink"]));
    // The index follows the text.
    assert!(search(&api, "green").iter().any(|h| h["memory"]["id"] == id));
    assert!(search(&api, "tea").len() == 1);
}

// invariant 27 (docs/ARCHITECTURE.md)
#[test]
fn daily_memories_expire_and_are_purged() {
    let api = Api::with_config(json!({"memory": {"dailyTtlDays": 2}}));
    let d = store(&api, json!({"content": "The user is tired today.", "category": "daily"}));
    let c = store(&api, json!({"content": "The user is a nurse."}));
    let soon = store(&api, json!({"content": "Meeting at noon.", "expiresAt": "2026-11-22T12:00:00Z"}));
    assert_eq!(soon["expiresAt"], "2026-11-22T12:00:00.000Z");
    assert_eq!(list(&api, "").len(), 3);
    api.now.set(api.now.get() + 2 * DAY + 1000);
    // Never returned once expired: not listed, not found, not recalled, no history.
    assert_eq!(contents(&list(&api, "")), ["The user is a nurse."]);
    let id = d["id"].as_str().unwrap();
    assert_eq!(api.get(&format!("/memories/{id}")).status, 404);
    assert_eq!(api.get(&format!("/memories/{id}/history")).status, 404);
    assert!(search(&api, "tired").is_empty());
    // The next write purges the rows, and the same text may be stored again.
    store(&api, json!({"content": "The user is tired today.", "category": "daily"}));
    let left: i64 = api.count("SELECT count(*) FROM memories");
    assert_eq!(left, 2);
    assert_eq!(api.get(&format!("/memories/{}", c["id"].as_str().unwrap())).status, 200);
}

#[test]
fn forget_one_and_forget_all() {
    let api = Api::new();
    let a = store(&api, json!({"content": "alpha fact", "tags": ["x"]}));
    store(&api, json!({"content": "beta fact", "tags": ["x"]}));
    store(&api, json!({"content": "gamma fact", "category": "daily"}));
    let id = a["id"].as_str().unwrap();
    assert_eq!(api.delete(&format!("/memories/{id}")).status, 204);
    assert_eq!(api.delete(&format!("/memories/{id}")).status, 404);
    assert!(search(&api, "alpha").is_empty());
    api.events.take("*");
    let r = api.delete("/memories?tag=x");
    assert_eq!(r.body_json(), json!({"deleted": 1}));
    assert_eq!(api.events.take("*")[0]["op"], "deleted");
    let r = api.send(session_agent_api::Request::new(Method::Delete, "/memories").json(&json!({"category": "daily"})));
    assert_eq!(r.body_json(), json!({"deleted": 1}));
    assert!(list(&api, "").is_empty());
    let bad = session_agent_api::Request::new(Method::Delete, "/memories?sessionId=bad%20id")
        .json(&json!({"sessionId": "ok"}));
    assert_eq!(api.send(bad).status, 400);
    assert_eq!(api.count("SELECT count(*) FROM memory_versions"), 0);
    assert_eq!(api.count("SELECT count(*) FROM memories_fts"), 0);
}

#[test]
fn sessions_take_only_their_conversation_memories() {
    let api = Api::new();
    api.append("s1", "u1", None, "hi");
    store(&api, json!({"content": "core fact", "sessionId": "s1", "messageId": "u1"}));
    store(&api, json!({"content": "daily note", "category": "daily", "sessionId": "s1"}));
    store(&api, json!({"content": "conv one", "category": "conversation", "sessionId": "s1"}));
    store(&api, json!({"content": "conv two", "category": "conversation", "sessionId": "s2"}));
    assert_eq!(api.delete("/sessions/s1/messages").status, 204);
    assert_eq!(list(&api, "").len(), 4, "clearing a session keeps every memory");
    assert_eq!(api.delete("/sessions/s1").status, 204);
    assert_eq!(contents(&list(&api, "")), ["conv two", "daily note", "core fact"]);
    let core = list(&api, "?category=core");
    assert_eq!(core[0]["source"], json!({"sessionId": "s1", "messageId": "u1"}));
}

#[test]
fn a_conversation_memory_registers_its_session_whichever_way_it_is_stored() {
    let api = Api::with_config(json!({"memory": {}}));
    // By the API, one or a batch, or a change of category: the session is registered (`name =
    // id`), so deleting it takes the memory with it, as for the memory_store tool.
    store(&api, json!({"content": "conv one", "category": "conversation", "sessionId": "s-new"}));
    assert_eq!(api.get("/sessions/s-new").body_json()["name"], "s-new");
    let r = api.post(
        "/memories/batch",
        json!({"memories": [{"content": "conv two", "category": "conversation", "sessionId": "s-batch"}]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.get("/sessions/s-batch").status, 200);
    let core = store(&api, json!({"content": "core from a session since deleted", "sessionId": "s-gone"}));
    assert_eq!(api.get("/sessions/s-gone").status, 404, "a core memory's source registers nothing");
    let r = api.patch(&format!("/memories/{}", core["id"].as_str().unwrap()), json!({"category": "conversation"}));
    assert_eq!(r.status, 200);
    assert_eq!(api.get("/sessions/s-gone").status, 200, "now a conversation memory of s-gone");
    let r = api.post(
        "/sessions/s-tool/tools/memory_store",
        json!({"input": {"content": "conv three", "category": "conversation"}}),
    );
    assert_eq!(r.status, 200);
    for sid in ["s-new", "s-batch", "s-gone", "s-tool"] {
        assert_eq!(api.delete(&format!("/sessions/{sid}")).status, 204);
    }
    assert!(list(&api, "").is_empty(), "every conversation memory went with its session");
}

#[test]
fn conversation_memories_merge_within_their_session_only() {
    let api = Api::new();
    let a = store(&api, json!({"content": "Booked the 9:40 train", "category": "conversation", "sessionId": "s1"}));
    let b = store(&api, json!({"content": "booked the  9:40 TRAIN", "category": "conversation", "sessionId": "s2"}));
    assert_ne!(a["id"], b["id"], "two conversations, two memories");
    let again = api.post(
        "/memories",
        json!({"content": "Booked the 9:40 train", "category": "conversation", "sessionId": "s1", "tags": ["t"]}),
    );
    assert_eq!((again.status, again.body_json()["id"].clone()), (200, a["id"].clone()), "the same session merges");
    // A change that would make one session's memory say what another's says is no conflict.
    let c = store(&api, json!({"content": "Window seat", "category": "conversation", "sessionId": "s2"}));
    let r =
        api.patch(&format!("/memories/{}", c["id"].as_str().unwrap()), json!({"content": "booked the 9:40 train."}));
    assert_eq!(r.status, 200);
    let r =
        api.patch(&format!("/memories/{}", c["id"].as_str().unwrap()), json!({"content": "booked the  9:40 TRAIN"}));
    assert_eq!(r.status, 409, "within s2 it is a duplicate of b");
    // Core memories stay one per text, whatever session they came from.
    let x = store(&api, json!({"content": "Likes tea", "sessionId": "s1"}));
    let y = api.post("/memories", json!({"content": "likes tea", "sessionId": "s2"}));
    assert_eq!((y.status, y.body_json()["id"].clone()), (200, x["id"].clone()));
}

#[test]
fn recall_ranks_text_confidence_and_recency_and_says_why() {
    let api = Api::new();
    store(&api, json!({"content": "The user drinks coffee every morning.", "score": 0.5}));
    store(&api, json!({"content": "The user likes coffee from Ethiopia.", "score": 0.95}));
    store(&api, json!({"content": "The user owns a cat named Miso.", "score": 0.9}));
    api.now.set(api.now.get() + 60 * DAY);
    store(&api, json!({"content": "The user stopped drinking coffee.", "score": 0.5}));
    let hits = search(&api, "does the user drink coffee?");
    let order: Vec<&str> = hits.iter().map(|h| h["memory"]["content"].as_str().unwrap()).collect();
    // Word forms match (drink/drinks/drinking); the fresh correction first, then confidence.
    assert_eq!(
        order,
        [
            "The user stopped drinking coffee.",
            "The user drinks coffee every morning.",
            "The user likes coffee from Ethiopia."
        ]
    );
    assert!(hits.iter().all(|h| h["score"].as_f64().unwrap() > 0.0));
    assert!(hits[0]["why"].as_str().unwrap().contains("text match"));
    assert!(hits[0]["why"].as_str().unwrap().contains("recalled 0 times before"));
    assert_eq!(hits[0]["signals"]["semantic"], Json::Null);
    assert_eq!(hits[0]["memory"]["recallCount"], 1);
    // Partial words and tags; limits; recall counters moved.
    assert_eq!(search(&api, "Ethiop")[0]["memory"]["content"], "The user likes coffee from Ethiopia.");
    store(&api, json!({"content": "Prefers window seats.", "tags": ["travel"]}));
    assert_eq!(search(&api, "travel")[0]["memory"]["content"], "Prefers window seats.");
    assert_eq!(api.get("/memories/search?q=coffee&limit=1").body_json()["results"].as_array().unwrap().len(), 1);
    assert!(search(&api, "?!").is_empty());
    let counts: Vec<(String, i64)> = list(&api, "")
        .iter()
        .map(|m| (m["content"].as_str().unwrap().to_owned(), m["recallCount"].as_i64().unwrap()))
        .collect();
    assert!(counts.contains(&("The user stopped drinking coffee.".into(), 2)), "{counts:?}");
    assert!(counts.contains(&("The user drinks coffee every morning.".into(), 1)), "{counts:?}");
    assert!(counts.contains(&("The user owns a cat named Miso.".into(), 0)), "{counts:?}");
    // Filters apply to recall.
    assert!(api.get("/memories/search?q=coffee&category=daily").body_json()["results"].as_array().unwrap().is_empty());
}

#[test]
fn memory_tools_are_offered_only_when_configured() {
    let plain = Api::new();
    let names = |api: &Api| api.tool_names("s");
    assert!(!names(&plain).iter().any(|n| n.starts_with("memory_")));
    assert_eq!(plain.post("/sessions/s/tools/memory_recall", json!({"input": {"query": "x"}})).status, 404);
    let api = memory_api();
    assert!(names(&api).ends_with(&["memory_store".into(), "memory_recall".into(), "memory_forget".into()]));
    let run = |name: &str, input: Json| -> String {
        let r = api.post(&format!("/sessions/s/tools/{name}"), json!({ "input": input }));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.body_json()["output"].as_str().unwrap().to_owned()
    };
    let out = run("memory_store", json!({"content": "The user is vegetarian.", "tags": ["food"]}));
    assert!(out.starts_with("Stored memory mem_") && out.ends_with("(core)."), "{out}");
    let again = run("memory_store", json!({"content": "the user is vegetarian."}));
    assert!(again.contains("already said this"), "{again}");
    assert_eq!(
        run("memory_store", json!({"content": ""})),
        "Error: content must be 1-4000 characters and not blank (got 0)"
    );
    assert_eq!(
        run("memory_store", json!({"content": "x", "category": "weekly"})).split(" (got").next().unwrap(),
        "Error: category must be one of core, daily, conversation"
    );
    let recalled = run("memory_recall", json!({"query": "vegetarian food"}));
    assert!(recalled.starts_with("- (mem_") && recalled.ends_with("The user is vegetarian. [food]"), "{recalled}");
    assert_eq!(run("memory_recall", json!({"query": "spaceships"})), "No memories found.");
    let m = &list(&api, "")[0];
    assert_eq!(m["source"]["sessionId"], "s");
    let v = api.get(&format!("/memories/{}/history", m["id"].as_str().unwrap())).body_json();
    assert_eq!(v["versions"][0]["by"], "tool");
    assert_eq!(run("memory_forget", json!({"query": "spaceships"})), "No memory matches \"spaceships\".");
    let forgot = run("memory_forget", json!({"query": "vegetarian"}));
    assert!(forgot.starts_with("Forgot memory mem_") && forgot.ends_with("The user is vegetarian."), "{forgot}");
    assert_eq!(run("memory_forget", json!({"id": "mem_x"})), "Error: memory mem_x not found");
    assert_eq!(api.post("/sessions/s/tools/memory_forget", json!({"input": {"id": 3}})).status, 400);
    // A tool write registers the session, as block writes do.
    assert_eq!(api.get("/sessions/s").status, 200);
}

#[test]
fn forget_by_query_acts_only_on_a_clear_best_match() {
    for api in [memory_api(), memory_api().with_embeddings()] {
        let run = |input: Json| -> String {
            let r = api.post("/sessions/s/tools/memory_forget", json!({ "input": input }));
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            r.body_json()["output"].as_str().unwrap().to_owned()
        };
        // Three facts a moment apart, sharing one rare word: the newest is not the best match.
        for text in [
            "The user's old phone number is 555 0199 zqx.",
            "The user's favourite pizza is margherita with basil zqx.",
            "The user wants to keep the bicycle in the hallway zqx.",
        ] {
            store(&api, json!({ "content": text }));
            api.now.set(api.now.get() + 1_000);
        }
        let out = run(json!({"query": "favourite pizza margherita zqx"}));
        assert!(out.starts_with("Forgot memory mem_"), "{out}");
        assert!(out.ends_with("The user's favourite pizza is margherita with basil zqx."), "{out}");
        assert_eq!(list(&api, "").len(), 2);
        // Two facts that match about as well: nothing is forgotten, both are named.
        let out = run(json!({"query": "zqx"}));
        assert!(out.starts_with("Several memories match \"zqx\""), "{out}");
        assert!(out.contains("old phone number") && out.contains("keep the bicycle"), "{out}");
        assert_eq!(list(&api, "").len(), 2, "nothing forgotten");
    }
}

#[test]
fn a_turn_asks_for_its_questions_vector_once_even_when_that_fails() {
    // The turn asks for the vector while it reads its branch; recall then uses that answer,
    // a failure included (not a second call to a model that just failed).
    let api = memory_api().with_embeddings();
    store(&api, json!({"content": "The user likes green tea."}));
    let asked = |text: &str| api.model.embed_inputs.borrow().iter().filter(|t| t.iter().any(|t| t == text)).count();
    for (id, question, fails) in [("u1", "Which tea do I like?", false), ("u2", "Which tea is best at night?", true)] {
        api.model.embed_fails.set(fails);
        api.model.reply(Ok(completion("Tea.")));
        api.model.reply(Ok(completion("{\"facts\": []}")));
        let r = api.post("/sessions/s/chat", json!({"message": msg(id, "user", question)}));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(asked(question), 2, "once for recall, once for the stored message's own vector (after the turn)");
        let reply = r.body_json()["messages"][0].clone();
        assert_eq!(
            reply["metadata"]["memories"].as_array().map(Vec::len),
            Some(1),
            "found by its words at least: {reply}"
        );
    }
    let warned = api.events.warnings.borrow().iter().filter(|w| w.contains("recall by meaning")).count();
    assert_eq!(warned, 1, "the failed call, reported once");
}

#[test]
fn a_turn_reports_its_phases_before_the_model_call() {
    let api = memory_api().with_embeddings();
    store(&api, json!({"content": "The user likes green tea."}));
    api.model.reply(Ok(completion("Tea.")));
    api.model.reply(Ok(completion("{\"facts\": []}")));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "Which tea?")})).status, 201);
    let spans = api.events.spans.borrow().clone();
    assert_eq!(spans.len(), 1, "one report per turn");
    let (what, phases) = &spans[0];
    assert_eq!(what, "turn");
    let names: Vec<&str> = phases.iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        [
            "tools",
            "branch and question vector",
            "recall and injection",
            "prompt",
            "history window",
            "question vector ready (from the start)",
            "before the model call"
        ]
    );
    assert!(phases.iter().all(|p| p.1 >= 0.0), "{phases:?}");
    let (sequential, total) = (phases[..5].iter().map(|p| p.1).sum::<f64>(), phases[6].1);
    assert!((sequential - total).abs() < 1e-6, "the phases add up to the total: {phases:?}");
}

#[test]
fn inject_sends_the_facts_after_an_unchanged_frozen_prompt() {
    let api = memory_api();
    let tea = store(&api, json!({"content": "The user likes green tea.", "score": 0.9}));
    store(&api, json!({"content": "The user owns a bike.", "score": 0.8}));
    store(&api, json!({"content": "Other chat's note about tea.", "category": "conversation", "sessionId": "other"}));
    api.model.reply(Ok(completion("Here is some tea.")));
    api.model.reply(Ok(completion("{\"facts\": []}")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "What tea should I drink?")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let reply = r.body_json()["messages"][0].clone();
    assert_eq!(reply["metadata"]["memories"], json!([tea["id"]]));
    let first = api.model.requests.borrow()[0].clone();
    let system = first["messages"][0].clone();
    assert_eq!(system["role"], "system");
    assert!(!system["content"].as_str().unwrap().contains("user-memory"));
    let block = first["messages"][1]["content"].as_str().unwrap().to_owned();
    assert_eq!(first["messages"][1]["role"], "system");
    assert!(
        block.starts_with("<user-memory>\n") && block.ends_with("\n- The user likes green tea.\n</user-memory>"),
        "{block}"
    );
    assert!(!block.contains("Other chat"), "a conversation memory of another session stays out");
    // Counters move with the commit.
    assert_eq!(api.get(&format!("/memories/{}", tea["id"].as_str().unwrap())).body_json()["recallCount"], 1);
    // Next turn: other facts, same frozen prompt byte for byte.
    api.model.reply(Ok(completion("Ride on.")));
    api.model.reply(Ok(completion("{\"facts\": []}")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u2", "user", "Where is my bike?")}));
    assert_eq!(r.status, 201);
    let second = api.model.requests.borrow()[2].clone();
    assert_eq!(second["messages"][0], system);
    assert!(second["messages"][1]["content"].as_str().unwrap().contains("The user owns a bike."));
    // memory: false skips inject (and extract): one model request, no metadata.memories.
    let before = api.model.requests.borrow().len();
    api.model.reply(Ok(completion("Plain.")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u3", "user", "tea bike"), "memory": false}));
    assert_eq!(r.status, 201);
    assert_eq!(r.body_json()["messages"][0]["metadata"].get("memories"), None);
    assert_eq!(api.model.requests.borrow().len(), before + 1);
    let third = api.model.requests.borrow()[before].clone();
    assert_eq!(third["messages"][1]["role"], "user");
    assert_eq!(api.post("/sessions/s/chat", json!({"message": msg("u4", "user", "x"), "memory": 1})).status, 400);
}

#[test]
fn inject_keeps_the_budget_dropping_the_lowest_score() {
    let api = Api::with_config(json!({"memory": {"inject": {"tokenBudget": 70}, "extract": false}})).with_model();
    store(&api, json!({"content": "The user plays chess on Sundays with an old friend from school.", "score": 0.4}));
    store(&api, json!({"content": "The user plays chess at a club and ranks well in the city league.", "score": 0.9}));
    api.model.reply(Ok(completion("ok")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "chess tonight?")}));
    let ids = r.body_json()["messages"][0]["metadata"]["memories"].clone();
    assert_eq!(ids.as_array().unwrap().len(), 1);
    let block = api.model.requests.borrow()[0]["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(block.contains("city league") && !block.contains("Sundays"), "{block}");
    assert_eq!(api.model.requests.borrow().len(), 1, "extract: false makes no extraction call");
}

fn facts(list: Json) -> HttpResponse {
    completion(&json!({ "facts": list }).to_string())
}

fn decide(list: Json) -> HttpResponse {
    completion(&format!("Sure! ```json\n{}\n```", json!({ "memory": list })))
}

#[test]
fn extraction_adds_updates_deletes_and_ignores() {
    let api = Api::with_config(json!({"memory": {"inject": false}})).with_model();
    // First turn: a new fact, nothing similar stored: added without a decision call.
    api.model.reply(Ok(completion("Nice, Paris!")));
    api.model.reply(Ok(facts(json!([
        {"fact": "The user lives in Paris.", "score": 0.9, "tags": ["home"]},
        {"fact": "The user might like cheese.", "score": 0.3}
    ]))));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "I live in Paris.")}));
    assert_eq!(r.status, 201);
    let all = list(&api, "");
    assert_eq!(contents(&all), ["The user lives in Paris."], "under minScore is dropped");
    let paris = all[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(all[0]["source"], json!({"sessionId": "s", "messageId": "u1"}));
    assert_eq!(all[0]["tags"], json!(["home"]));
    let extraction = api.model.requests.borrow()[1].clone();
    assert_eq!(extraction["response_format"], json!({"type": "json_object"}));
    assert!(extraction["messages"][1]["content"].as_str().unwrap().contains("User: I live in Paris."));
    // Second turn: a correction; the model updates the stored fact by its id.
    api.model.reply(Ok(completion("Berlin is great.")));
    api.model.reply(Ok(facts(json!([{"fact": "The user moved to Berlin.", "score": 0.95}]))));
    api.model.reply(Ok(decide(json!([{"id": paris, "text": "The user lives in Berlin.", "event": "UPDATE"}]))));
    api.post("/sessions/s/chat", json!({"message": msg("u2", "user", "I moved from Paris to Berlin.")}));
    let consolidation = api.model.requests.borrow()[4].clone();
    let asked = consolidation["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(asked.contains(&paris) && asked.contains("New fact: The user moved to Berlin."), "{asked}");
    // The update is a new memory that supersedes the old one, which is kept (not erased).
    let now = list(&api, "");
    assert_eq!(contents(&now), ["The user lives in Berlin."]);
    let berlin = now[0]["id"].as_str().unwrap().to_owned();
    let old = api.get(&format!("/memories/{paris}")).body_json();
    assert_eq!((old["supersededBy"].as_str(), old["invalidAt"].is_string()), (Some(berlin.as_str()), true), "{old}");
    let v = api.get(&format!("/memories/{paris}/history")).body_json()["versions"].clone();
    assert_eq!(v[0]["content"], "The user lives in Paris.");
    assert_eq!(api.get(&format!("/memories/{berlin}/history")).body_json()["versions"][0]["by"], "extract");
    // On demand: NONE and an invented id change nothing; the superseded fact is not offered.
    api.model.reply(Ok(facts(json!([{"fact": "The user lives in Berlin now.", "score": 0.9}]))));
    api.model.reply(Ok(decide(json!([{"id": berlin, "event": "NONE"}, {"id": paris, "event": "DELETE"}]))));
    let r = api.post("/sessions/s/memories/extract", json!({}));
    assert_eq!(r.body_json(), json!({"added": [], "updated": [], "deleted": []}));
    let asked = api.model.requests.borrow().last().unwrap()["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(asked.contains(&berlin) && !asked.contains(&paris), "only what holds now is shown: {asked}");
    // DELETE invalidates, superseded by what the same fact added.
    api.model.reply(Ok(facts(json!([{"fact": "The user no longer lives in Berlin.", "score": 0.9}]))));
    api.model.reply(Ok(decide(
        json!([{"id": berlin, "event": "DELETE"}, {"id": "new", "text": "The user left Berlin.", "event": "ADD"}]),
    )));
    let r = api.post("/sessions/s/memories/extract", json!({"leafId": "u2"}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let body = r.body_json();
    assert_eq!(body["deleted"], json!([berlin]));
    assert_eq!(body["added"][0]["content"], "The user left Berlin.");
    let left = body["added"][0]["id"].clone();
    assert_eq!(contents(&list(&api, "")), ["The user left Berlin."]);
    assert_eq!(api.get(&format!("/memories/{berlin}")).body_json()["supersededBy"], left);
    let all = list(&api, "?includeSuperseded=1");
    assert_eq!(contents(&all), ["The user left Berlin.", "The user lives in Berlin.", "The user lives in Paris."]);
    assert_eq!(api.post("/sessions/s/memories/extract", json!({"leafId": "nope"})).status, 404);
}

// invariant 29 (docs/ARCHITECTURE.md)
#[test]
fn bad_or_failed_extraction_writes_nothing_and_never_fails_the_turn() {
    let api = Api::with_config(json!({"memory": {"inject": false}})).with_model();
    store(&api, json!({"content": "The user lives in Rome."}));
    // An extraction answer that is not the JSON asked for.
    api.model.reply(Ok(completion("Ciao.")));
    api.model.reply(Ok(completion("I think the user likes Rome!")));
    let r = api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "I love Rome.")}));
    assert_eq!(r.status, 201);
    assert!(api.events.warnings.borrow().iter().any(|w| w.contains("not the JSON asked for")));
    // A consolidation answer that cannot be read: the fact before it is not written either.
    api.model.reply(Ok(completion("Ok.")));
    api.model.reply(Ok(facts(json!([{"fact": "The user lives in Milan.", "score": 0.9}]))));
    api.model.reply(Ok(completion("{\"memory\": [{\"id\": \"x\", \"event\": \"MERGE\"}]}")));
    assert_eq!(
        api.post("/sessions/s/chat", json!({"message": msg("u2", "user", "Actually Milan, where I live.")})).status,
        201
    );
    // The model failing.
    api.model.reply(Ok(completion("Fine.")));
    api.model.reply(Err(Error::internal("connection reset")));
    assert_eq!(api.post("/sessions/s/chat", json!({"message": msg("u3", "user", "I live in Turin.")})).status, 201);
    assert_eq!(contents(&list(&api, "")), ["The user lives in Rome."]);
    assert_eq!(api.get("/sessions/s/history").body_json()["messages"].as_array().unwrap().len(), 6);
    // On demand, the failure is the answer.
    api.model.reply(Err(Error::internal("connection reset")));
    assert_eq!(api.post("/sessions/s/memories/extract", json!({})).status, 503);
}

#[test]
fn continuations_skip_memory() {
    let api = memory_api();
    store(&api, json!({"content": "The user likes maps."}));
    api.model.reply(Ok(completion("ok")));
    api.model.reply(Ok(completion("{\"facts\": []}")));
    api.post("/sessions/s/chat", json!({"message": msg("u1", "user", "maps")}));
    let n = api.model.requests.borrow().len();
    let history = api.get("/sessions/s/history").body_json()["messages"].clone();
    api.model.reply(Ok(completion("again")));
    let r = api.post("/sessions/s/chat", json!({ "messages": history }));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.model.requests.borrow().len(), n + 1, "no extraction after a continuation");
    assert_eq!(r.body_json()["messages"][0]["metadata"].get("memories"), None);
}

#[test]
fn parsing_model_answers() {
    let f = parse_facts("```json\n{\"facts\":[{\"fact\":\" A \",\"score\":0.8,\"tags\":[\"t\",3]},{\"fact\":\"\",\"score\":1},{\"fact\":\"B\",\"score\":7}]}\n```").unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].fact.as_str(), f[0].score, f[0].tags.clone()), ("A", 0.8, vec!["t".to_owned()]));
    assert!(parse_facts("no json here").is_err());
    assert!(parse_facts("{\"memories\": []}").is_err());
    let known = vec!["m1".to_owned()];
    let d = parse_decisions(
        "{\"memory\":[{\"id\":\"m1\",\"text\":\"T\",\"event\":\"update\"},{\"id\":\"zz\",\"event\":\"UPDATE\"},{\"event\":\"ADD\"}]}",
        &known,
        "fact",
    )
    .unwrap();
    assert_eq!(
        d,
        vec![
            Decision::Update { id: "m1".into(), text: "T".into() },
            Decision::Nothing,
            Decision::Add { text: "fact".into() }
        ]
    );
    assert!(parse_decisions("{\"memory\":[{\"id\":\"m1\",\"event\":\"MERGE\"}]}", &known, "f").is_err());
}

// invariant 29 (docs/ARCHITECTURE.md)
#[test]
fn embeddings_are_stored_fused_and_caught_up_after_a_failure() {
    let api = Api::new().with_embeddings();
    let vectors = "SELECT count(*) FROM vectors WHERE kind = 1";
    let waiting = "SELECT count(*) FROM unembedded WHERE kind = 1";
    // The answer does not wait for the vector: it is made after it (natively, right after).
    let bike = store(&api, json!({"content": "The user rides a red bicycle."}));
    assert_eq!(bike["embeddedAt"], Json::Null, "answered before its vector existed");
    assert_eq!(api.count(vectors), 1);
    let now = api.get(&format!("/memories/{}", bike["id"].as_str().unwrap())).body_json();
    // Natively the work after the answer runs at the request's own time.
    assert!(now["embeddedAt"].as_str().is_some_and(|t| t >= bike["createdAt"].as_str().unwrap()), "{now}");
    // The embeddings endpoint fails: the memory is stored anyway and waits.
    api.model.embed_fails.set(true);
    let r = api.post("/memories", json!({"content": "The user swims in the lake."}));
    assert_eq!(r.status, 201);
    assert_eq!(api.count(waiting), 1);
    assert!(api.events.warnings.borrow().iter().any(|w| w.contains("embeddings")));
    // Recall still works (full text only) while embeddings fail.
    assert_eq!(search(&api, "swims")[0]["signals"]["semantic"], Json::Null);
    assert_eq!(search(&api, "swims")[0]["memory"]["embeddedAt"], Json::Null);
    api.model.embed_fails.set(false);
    store(&api, json!({"content": "The user reads at night."}));
    assert_eq!(api.count(waiting), 0);
    assert_eq!(api.count(vectors), 3);
    // A query with no word in common with the text but the same words in another order still
    // matches through the vector; the text match and meaning both show in why.
    // (The hashed test vectors find every "The user …" fact near every other, so the later facts
    // count as newer news on one subject and may rank first: current.rs; look the hit up.)
    let hits = search(&api, "bicycle red");
    let bike = hits.iter().find(|h| h["memory"]["content"] == "The user rides a red bicycle.").unwrap();
    assert!(bike["signals"]["semantic"].as_f64().unwrap() > 0.5);
    assert!(bike["why"].as_str().unwrap().contains("meaning"));
    // A batch is embedded after its answer, whatever its size.
    let many: Vec<Json> = (0..70).map(|i| json!({"content": format!("Batch fact number {i}.")})).collect();
    assert_eq!(api.post("/memories/batch", json!({ "memories": many })).status, 201);
    assert_eq!(api.count(waiting), 0);
    assert_eq!(api.count(vectors), 73);
    assert_eq!(api.count("SELECT n FROM memory_count"), 73);
    // A changed text is embedded again: its answer shows no vector yet, then it has one.
    let id = hits[0]["memory"]["id"].as_str().unwrap().to_owned();
    let r = api.patch(&format!("/memories/{id}"), json!({"content": "The user rides a blue bicycle."}));
    assert_eq!(r.body_json()["embeddedAt"], Json::Null);
    assert_eq!(api.count(waiting), 0);
    assert_eq!(api.count(vectors), 73);
    assert!(api.get(&format!("/memories/{id}")).body_json()["embeddedAt"].is_string());
    // A change that keeps the text keeps the vector.
    let before = api.count("SELECT count(*) FROM vector_log");
    let r = api.patch(&format!("/memories/{id}"), json!({"tags": ["bike"]}));
    assert!(r.body_json()["embeddedAt"].is_string());
    assert_eq!(api.count("SELECT count(*) FROM vector_log"), before, "no vector written");
}

#[test]
fn memory_config_is_checked() {
    for bad in [
        json!({"memory": {"inject": {"limit": 0}}}),
        json!({"memory": {"inject": {"categories": ["weekly"]}}}),
        json!({"memory": {"extract": {"minScore": 2}}}),
        json!({"memory": {"dailyTtlDays": 0}}),
        json!({"memory": {"remember": true}}),
        json!({"memory": "yes"}),
    ] {
        let text = bad.to_string();
        assert!(session_agent_core::config::SessionConfig::from_json(&text).is_err(), "{text}");
    }
    let ok = session_agent_core::config::SessionConfig::from_json("{\"memory\": true}").unwrap();
    assert_eq!(ok.memory.unwrap().inject.unwrap().limit, 5);
}

#[test]
fn batches_store_all_or_nothing() {
    let api = Api::new();
    let r = api.post(
        "/memories/batch",
        json!({"memories": [
        {"content": "one"}, {"content": "two", "tags": ["t"]}, {"content": "ONE", "score": 0.5}]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let got = r.body_json()["memories"].clone();
    assert_eq!(got.as_array().unwrap().len(), 3);
    assert_eq!(got[0]["id"], got[2]["id"], "a duplicate in the batch merges");
    assert_eq!(got[2]["score"], 0.5);
    let r = api.post("/memories/batch", json!({"memories": [{"content": "three"}, {"content": "x", "score": 9}]}));
    assert_eq!(r.status, 400);
    assert!(r.body_json()["error"]["message"].as_str().unwrap().starts_with("memories[1]: "));
    assert_eq!(list(&api, "").len(), 2);
    assert_eq!(api.post("/memories/batch", json!({"memories": []})).status, 400);
    assert_eq!(api.get("/memories/batch").status, 405);
}
