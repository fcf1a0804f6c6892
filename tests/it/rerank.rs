//! The re-ranker (`RERANK_*`, `core::llm::rerank`) through the core's transport, answered by the
//! scripted model (`support::Model`: by default it scores the candidates in the reverse of their
//! order): history search (both routes, `session_search`, `search_context` of the history),
//! `search_context` of entries and memory recall are re-ordered, with or without embeddings,
//! over HTTP and through the `AI` binding; only the first `RERANK_CANDIDATES` move, nothing is
//! dropped; a failing, late, unreadable, oversized or hostile answer leaves the order as it was
//! (or uses what can be used) with a warning, never a failed request; a turn's memories are
//! re-ranked, extraction's look at what it knows is not.

use serde_json::{json, Value as Json};
use session_agent_core::llm::rerank::{
    RerankConfig, RerankProvider, DEFAULT_CANDIDATES, DEFAULT_RERANK_TIMEOUT_MS, MAX_ANSWER_BYTES, WORKERS_AI_MODEL,
};

use crate::support::{hits, Api, Rerank};

/// Four messages of session `s1` that all match "deploy", by id.
const DEPLOYS: [(&str, &str); 4] = [
    ("a", "deploy deploy deploy on Friday"),
    ("b", "the deploy script deploy"),
    ("c", "deploy notes"),
    ("d", "a long message that mentions the deploy once among many other words"),
];

fn deploys(api: &Api) {
    for (id, text) in DEPLOYS {
        api.append("s1", id, None, text);
    }
}

fn text_of(id: &str) -> &'static str {
    DEPLOYS.iter().find(|(i, _)| *i == id).map(|(_, t)| *t).unwrap()
}

fn recall(api: &Api, q: &str, limit: usize) -> Vec<String> {
    let r = api.get(&format!("/memories/search?q={}&limit={limit}", q.replace(' ', "+")));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["memory"]["content"].as_str().unwrap().into())
        .collect()
}

fn tool(api: &Api, sid: &str, name: &str, input: Json) -> String {
    let r = api.post(&format!("/sessions/{sid}/tools/{name}"), json!({ "input": input }));
    assert_eq!(r.status, 200, "{name}: {}", String::from_utf8_lossy(&r.body));
    r.body_json()["output"].as_str().unwrap().to_owned()
}

/// The warnings logged since the last call, and forgets them.
fn warnings(api: &Api) -> Vec<String> {
    std::mem::take(&mut *api.events.warnings.borrow_mut())
}

fn reversed(v: &[String]) -> Vec<String> {
    v.iter().rev().cloned().collect()
}

/// The documents of the last re-ranking call over HTTP.
fn documents(api: &Api) -> Vec<String> {
    let calls = api.model.rerank_calls.borrow();
    let docs = calls.last().expect("a call")["body"]["documents"].as_array().expect("documents").clone();
    docs.iter().map(|d| d.as_str().unwrap().to_owned()).collect()
}

/// Queues the answer of the next re-ranking call.
fn next(api: &Api, r: Rerank) {
    api.model.rerank_replies.borrow_mut().push_back(r);
}

#[test]
fn history_search_is_reordered_by_the_reranker_without_embeddings() {
    let api = Api::new().with_rerank(RerankProvider::Http);
    deploys(&api);
    // The order before re-ranking: a failing re-ranker leaves it (and it is not kept).
    next(&api, Rerank::Answer(500, "{\"error\":\"down\"}".into()));
    let before = hits(&api, "/sessions/s1/search?q=deploy");
    assert_eq!(before.len(), 4);
    let w = warnings(&api);
    assert!(w.len() == 1 && w[0].contains("re-ranking: the re-ranker answered HTTP 500"), "{w:?}");
    // Re-ranked: the stand-in puts them in the reverse order.
    assert_eq!(hits(&api, "/sessions/s1/search?q=deploy"), reversed(&before));
    assert_eq!(warnings(&api), Vec::<String>::new());
    {
        let calls = api.model.rerank_calls.borrow();
        assert_eq!(calls.len(), 2, "the answer with a warning was not kept: asked again");
        let call = &calls[1];
        assert_eq!(call["url"], "http://rerank.test/v1/rerank");
        assert_eq!(call["authorization"], "Bearer rerank-key");
        assert_eq!(call["body"]["model"], "test-rerank");
        assert_eq!(call["body"]["query"], "deploy");
        assert_eq!(call["body"]["top_n"], 4);
    }
    let sent: Vec<&str> = before.iter().map(|id| text_of(id)).collect();
    assert_eq!(documents(&api), sent, "the hits' texts, in their order before");
    // The answer is kept until the next write: no new call.
    assert_eq!(hits(&api, "/sessions/s1/search?q=deploy"), reversed(&before));
    assert_eq!(api.model.rerank_calls.borrow().len(), 2);
    // Across sessions, the same.
    assert_eq!(hits(&api, "/search?q=deploy"), reversed(&before));
    assert_eq!(api.model.rerank_calls.borrow().len(), 3);
    // A search without hits, or of one hit, asks nothing.
    assert_eq!(hits(&api, "/search?q=zebra"), Vec::<String>::new());
    assert_eq!(hits(&api, "/search?q=notes"), ["c"]);
    assert_eq!(api.model.rerank_calls.borrow().len(), 3);
}

#[test]
fn with_embeddings_the_fused_hits_are_reordered() {
    let api = Api::new().with_embeddings().with_rerank(RerankProvider::Http);
    deploys(&api);
    next(&api, Rerank::Never);
    let before = hits(&api, "/search?q=deploy");
    assert_eq!(before.len(), 4);
    let w = warnings(&api);
    assert!(w.len() == 1 && w[0].contains(&format!("did not answer within {DEFAULT_RERANK_TIMEOUT_MS} ms")), "{w:?}");
    assert_eq!(hits(&api, "/search?q=deploy"), reversed(&before));
}

#[test]
fn only_the_first_candidates_move_and_nothing_is_dropped() {
    let mut api = Api::new().with_rerank(RerankProvider::Http);
    api.rerank.candidates = 3;
    let api = api.reopen();
    deploys(&api);
    next(&api, Rerank::Answer(503, String::new()));
    let before = hits(&api, "/search?q=deploy");
    warnings(&api);
    let after = hits(&api, "/search?q=deploy");
    assert_eq!(after[..3], reversed(&before[..3])[..]);
    assert_eq!(after[3], before[3], "the fourth stays below, where it was");
    assert_eq!(documents(&api).len(), 3);
    // An answer that scores only one: it comes first, the others keep their order below it.
    next(&api, Rerank::Answer(200, json!({"results": [{"index": 2, "relevance_score": 0.3}]}).to_string()));
    let after = hits(&api, "/sessions/s1/search?q=deploy");
    assert_eq!(after, [before[2].clone(), before[0].clone(), before[1].clone(), before[3].clone()]);
    assert_eq!(warnings(&api), Vec::<String>::new());
}

#[test]
fn a_failing_late_unreadable_or_oversized_answer_keeps_the_order_with_a_warning() {
    let api = Api::new().with_rerank(RerankProvider::Http);
    deploys(&api);
    next(&api, Rerank::Answer(500, "boom".into()));
    let before = hits(&api, "/sessions/s1/search?q=deploy");
    warnings(&api);
    let huge = format!("{{\"results\": [], \"pad\": \"{}\"}}", "x".repeat(MAX_ANSWER_BYTES));
    let over = format!("is over {MAX_ANSWER_BYTES} bytes");
    for (answer, warned) in [
        (Rerank::Answer(500, "boom".into()), "answered HTTP 500: boom"),
        (Rerank::Answer(429, String::new()), "answered HTTP 429"),
        (Rerank::Never, "did not answer within"),
        (Rerank::Answer(200, "<html>not json</html>".into()), "is not JSON: <html>"),
        (Rerank::Answer(200, "{\"data\": [1, 2]}".into()), "has no results list"),
        (Rerank::Answer(200, "{\"results\": []}".into()), "scores none of the 4 candidates"),
        (Rerank::Answer(200, json!({"results": [{"index": 9, "relevance_score": 1}]}).to_string()), "scores none"),
        (Rerank::Answer(200, huge), over.as_str()),
    ] {
        next(&api, answer);
        assert_eq!(hits(&api, "/sessions/s1/search?q=deploy"), before, "{warned}");
        let w = warnings(&api);
        assert!(w.len() == 1 && w[0].starts_with("re-ranking: ") && w[0].contains(warned), "{warned}: {w:?}");
    }
}

#[test]
fn a_hostile_answer_is_used_for_what_names_a_candidate() {
    let api = Api::new().with_rerank(RerankProvider::Http);
    deploys(&api);
    next(&api, Rerank::Answer(500, String::new()));
    let before = hits(&api, "/sessions/s1/search?q=deploy");
    warnings(&api);
    // Out of range, negative, fractional, a string, twice the same (the first counts), no score,
    // a score that is not a number: seven left out; 3 above 1, the rest below in their order.
    let answer = json!({"results": [
        {"index": 4, "relevance_score": 9}, {"index": -1, "relevance_score": 9}, {"index": 0.5, "relevance_score": 9},
        {"index": "0", "relevance_score": 9}, {"index": 1, "relevance_score": 0.5}, {"index": 3, "relevance_score": 0.7},
        {"index": 1, "relevance_score": 0.99}, {"index": 2}, {"index": 2, "relevance_score": "high"}
    ]});
    next(&api, Rerank::Answer(200, answer.to_string()));
    let after = hits(&api, "/sessions/s1/search?q=deploy");
    assert_eq!(after, [before[3].clone(), before[1].clone(), before[0].clone(), before[2].clone()]);
    let w = warnings(&api);
    assert!(w.len() == 1 && w[0].contains("7 entries of the answer name no candidate"), "{w:?}");
}

#[test]
fn session_search_and_search_context_are_reordered() {
    let api = Api::with_config(json!({"searchableHistory": "history",
        "context": [{"label": "knowledge", "kind": "search"}]}))
    .with_rerank(RerankProvider::Http);
    deploys(&api);
    let as_tool =
        |ids: &[&str]| ids.iter().map(|id| format!("[user] {}", text_of(id))).collect::<Vec<_>>().join("\n---\n");
    next(&api, Rerank::Answer(500, String::new()));
    let before = tool(&api, "s2", "session_search", json!({"query": "deploy"}));
    assert_eq!(warnings(&api).len(), 1);
    let order: Vec<String> =
        before.split("\n---\n").map(|h| DEPLOYS.iter().find(|(_, t)| h.ends_with(t)).unwrap().0.to_owned()).collect();
    let back: Vec<&str> = order.iter().rev().map(String::as_str).collect();
    assert_eq!(tool(&api, "s2", "session_search", json!({"query": "deploy"})), as_tool(&back));
    assert_eq!(tool(&api, "s2", "search_context", json!({"label": "history", "query": "deploy"})), as_tool(&back));
    // Entries of a searchable block.
    for (key, text) in [("one", "ship the release"), ("two", "release notes"), ("three", "the release release train")] {
        let r =
            tool(&api, "s2", "set_context", json!({"label": "knowledge", "content": text, "metadata": {"title": key}}));
        assert!(r.starts_with("Indexed"), "{r}");
    }
    next(&api, Rerank::Answer(500, String::new()));
    let before = tool(&api, "s2", "search_context", json!({"label": "knowledge", "query": "release"}));
    assert_eq!(warnings(&api).len(), 1);
    let entries: Vec<&str> = before.split("\n\n").collect();
    assert_eq!(entries.len(), 3);
    let back: Vec<&str> = entries.iter().rev().copied().collect();
    assert_eq!(
        tool(&api, "s2", "search_context", json!({"label": "knowledge", "query": "release"})),
        back.join("\n\n")
    );
    assert_eq!(documents(&api).len(), 3);
}

#[test]
fn memory_recall_is_reordered_within_what_it_answers() {
    let api = Api::new().with_rerank(RerankProvider::Http);
    // Facts about different subjects (of one subject, the newer goes first after re-ranking too).
    for m in ["Alice drinks tea", "Bob drinks coffee at work", "Carol drinks water after running"] {
        assert_eq!(api.post("/memories", json!({ "content": m })).status, 201);
    }
    next(&api, Rerank::Answer(500, String::new()));
    let before = recall(&api, "drinks", 10);
    assert_eq!(before.len(), 3);
    assert_eq!(warnings(&api).len(), 1);
    assert_eq!(recall(&api, "drinks", 10), reversed(&before));
    // Two asked of three: the same two as without the re-ranker, in its order.
    next(&api, Rerank::Answer(500, String::new()));
    let two = recall(&api, "drinks", 2);
    warnings(&api);
    assert_eq!(recall(&api, "drinks", 2), reversed(&two));
    assert_eq!(documents(&api), two);
    // With embeddings too.
    let api = api.with_embeddings();
    api.post("/memories", json!({ "content": "Dan drinks juice" }));
    let all = recall(&api, "drinks", 10);
    assert_eq!(all.len(), 4);
    assert_eq!(documents(&api), reversed(&all));
}

#[test]
fn the_workers_ai_reranker_is_run_through_the_binding() {
    let api = Api::new().with_rerank(RerankProvider::WorkersAi);
    deploys(&api);
    next(&api, Rerank::Answer(0, "{\"errors\": [\"model failed\"]}".into()));
    let before = hits(&api, "/sessions/s1/search?q=deploy");
    let w = warnings(&api);
    assert!(w.len() == 1 && w[0].contains("no response list"), "{w:?}");
    assert_eq!(hits(&api, "/sessions/s1/search?q=deploy"), reversed(&before));
    let calls = api.model.rerank_calls.borrow();
    let call = calls.last().unwrap();
    assert_eq!(call["model"], WORKERS_AI_MODEL);
    assert_eq!(call["input"]["query"], "deploy");
    assert_eq!(call["input"]["top_k"], 4);
    let sent: Vec<Json> = before.iter().map(|id| json!({"text": text_of(id)})).collect();
    assert_eq!(call["input"]["contexts"], Json::Array(sent));
}

#[test]
fn the_rerank_variables() {
    let vars = |list: &[(&str, &str)]| {
        let list: Vec<(String, String)> = list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        RerankConfig::from_vars(move |k| list.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    };
    assert_eq!(vars(&[]).unwrap(), RerankConfig::none());
    assert_eq!(vars(&[("RERANK_PROVIDER", "none"), ("RERANK_MODEL", "x")]).unwrap(), RerankConfig::none());
    let ai = vars(&[("RERANK_PROVIDER", "workers-ai"), ("LLM_API_KEY", "llm-key")]).unwrap();
    assert_eq!((ai.provider, ai.model.as_str(), ai.api_key), (RerankProvider::WorkersAi, WORKERS_AI_MODEL, None));
    assert_eq!((ai.candidates, ai.timeout_ms), (DEFAULT_CANDIDATES, DEFAULT_RERANK_TIMEOUT_MS));
    let http = vars(&[
        ("RERANK_PROVIDER", " http "),
        ("RERANK_BASE_URL", "https://api.example.com/v1/"),
        ("RERANK_MODEL", "rerank-v3.5"),
        ("RERANK_API_KEY", "k"),
        ("RERANK_CANDIDATES", "12"),
        ("RERANK_TIMEOUT_MS", "800"),
    ])
    .unwrap();
    assert_eq!(
        http,
        RerankConfig {
            provider: RerankProvider::Http,
            base_url: "https://api.example.com/v1".into(),
            model: "rerank-v3.5".into(),
            api_key: Some("k".into()),
            candidates: 12,
            timeout_ms: 800,
        }
    );
    for (list, error) in [
        (vec![("RERANK_PROVIDER", "cohere")], "RERANK_PROVIDER \"cohere\" is not one of workers-ai, http, none"),
        (vec![("RERANK_PROVIDER", "http"), ("RERANK_MODEL", "m")], "RERANK_BASE_URL is not set"),
        (vec![("RERANK_PROVIDER", "http"), ("RERANK_BASE_URL", "http://x")], "RERANK_MODEL is not set"),
        (
            vec![("RERANK_PROVIDER", "http"), ("RERANK_BASE_URL", "file:///etc"), ("RERANK_MODEL", "m")],
            "RERANK_BASE_URL must start with http:// or https://",
        ),
        (
            vec![("RERANK_PROVIDER", "workers-ai"), ("RERANK_CANDIDATES", "0")],
            "RERANK_CANDIDATES must be an integer from 1 to 100",
        ),
        (
            vec![("RERANK_PROVIDER", "workers-ai"), ("RERANK_CANDIDATES", "101")],
            "RERANK_CANDIDATES must be an integer from 1 to 100",
        ),
        (
            vec![("RERANK_PROVIDER", "workers-ai"), ("RERANK_TIMEOUT_MS", "soon")],
            "RERANK_TIMEOUT_MS must be an integer from 1 to 600000",
        ),
    ] {
        assert_eq!(vars(&list).unwrap_err().message, error);
    }
}

#[test]
fn extraction_looks_at_what_it_knows_without_the_reranker_and_a_turn_is_given_reranked_memories() {
    let api = Api::with_config(json!({"memory": {}})).with_model().with_rerank(RerankProvider::Http);
    for m in ["The user lives in Paris.", "The user lives near the Paris river."] {
        assert_eq!(api.post("/memories", json!({ "content": m })).status, 201);
    }
    // A turn: its memories come re-ranked (one call); the extraction after it compares the new
    // fact with the two stored (the decision call shows them) and asks no re-ranker.
    api.model.reply(Ok(crate::support::completion("Noted.")));
    let facts = json!({"facts": [{"fact": "The user lives in Paris now.", "score": 0.9}]}).to_string();
    api.model.reply(Ok(crate::support::completion(&facts)));
    api.model.reply(Ok(crate::support::completion(&json!({"memory": []}).to_string())));
    let r =
        api.post("/sessions/s/chat", json!({"message": crate::support::msg("u1", "user", "Where do I live? Paris?")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let requests = api.model.requests.borrow().clone();
    assert_eq!(requests.len(), 3, "the turn, the extraction and the decision");
    let asked = requests[2]["messages"][1]["content"].as_str().unwrap();
    assert!(asked.contains("The user lives in Paris.") && asked.contains("Paris river"), "{asked}");
    let calls = api.model.rerank_calls.borrow();
    assert_eq!(calls.len(), 1, "only the turn's recall: {calls:?}");
    assert_eq!(calls[0]["body"]["query"], "Where do I live? Paris?");
}
