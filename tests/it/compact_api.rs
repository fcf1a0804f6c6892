//! Compaction through the DO API with an OpenAI-compatible model peer: the exact prompt sent,
//! the stored overlay, iterative overlays, failures that store nothing, auto-compaction after
//! appends, synthetic messages sent back by clients, and the incremental token estimate.

use crate::support::{code, completion, msg, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_core::compaction::plan::{build_summary_prompt, compute_summary_budget};
use session_agent_core::error::Error;
use session_agent_core::llm::HttpResponse;
use session_agent_core::sql::Sql;
use session_agent_core::store::estimate;

fn api(compaction: Json) -> Api {
    Api::with_config(json!({"compaction": compaction, "context": [{"label": "memory", "kind": "writable"}]}))
        .with_model()
}

fn fill(api: &Api, sid: &str, n: usize) {
    for i in 1..=n {
        let role = if i % 2 == 1 { "user" } else { "assistant" };
        let r = api.post(
            &format!("/sessions/{sid}/messages"),
            json!({"message": msg(&format!("m{i}"), role, &format!("message number {i} about the trip"))}),
        );
        assert!(r.status == 201, "{}", String::from_utf8_lossy(&r.body));
    }
}

fn ids(v: &Json) -> Vec<String> {
    v["messages"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

/// The reference prompt: docs/REFERENCE.md#summary-prompts.
#[test]
fn compact_sends_the_reference_prompt_and_stores_an_overlay() {
    let api = api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&api, "s", 6);
    api.put("/sessions/s/context/memory", json!({"content": "before"}));
    let frozen = api.get("/sessions/s/prompt").body_json()["prompt"].clone();
    api.put("/sessions/s/context/memory", json!({"content": "after"}));
    let r = api.post("/sessions/s/compact", json!({}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let c = r.body_json()["compaction"].clone();
    assert_eq!((c["fromMessageId"].as_str(), c["toMessageId"].as_str()), (Some("m2"), Some("m5")));
    assert_eq!(c["summary"], "## Topic\nA test chat.\n\n## Key Points\n- summarized");
    // The prompt is the reference's (docs/REFERENCE.md#summary-prompts), over the middle m2..m5.
    let history = api.get("/sessions/s/history?raw=1").body_json();
    let middle: Vec<Json> = history["messages"].as_array().unwrap()[1..5].to_vec();
    let want = build_summary_prompt(&middle, None, compute_summary_budget(&middle));
    assert_eq!(api.model.prompts(), [want]);
    assert!(api.model.prompts()[0].starts_with("Create a concise summary of this conversation"));
    // Read time: the summary stands for m2..m5; raw shows the originals.
    assert_eq!(
        ids(&api.get("/sessions/s/history").body_json()),
        ["m1", &format!("compaction_{}", c["id"].as_str().unwrap()), "m6"]
    );
    assert_eq!(ids(&history).len(), 6);
    // The call's usage is added; the frozen prompt is rendered again.
    let info = api.get("/sessions/s").body_json();
    assert_eq!((info["inputTokens"].as_i64(), info["outputTokens"].as_i64()), (Some(100), Some(20)));
    let now = api.get("/sessions/s/prompt").body_json()["prompt"].clone();
    assert_ne!(now, frozen);
    assert!(now.as_str().unwrap().ends_with("\nafter"));
}

#[test]
fn iterative_compaction_grows_one_overlay_per_branch() {
    let api = api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&api, "s", 6);
    let first = api.post("/sessions/s/compact", json!({})).body_json()["compaction"].clone();
    for i in 7..=9 {
        api.append("s", &format!("m{i}"), None, &format!("later message {i}"));
    }
    let second = api.post("/sessions/s/compact", json!({})).body_json()["compaction"].clone();
    assert_eq!(second["fromMessageId"], first["fromMessageId"], "starts where the branch's first overlay starts");
    assert_eq!(second["toMessageId"], "m8");
    let prompts = api.model.prompts();
    assert!(prompts[1].starts_with("You are updating a conversation summary."));
    assert!(prompts[1].contains("PREVIOUS SUMMARY:\n## Topic\nA test chat."));
    let h = ids(&api.get("/sessions/s/history").body_json());
    assert_eq!(h, ["m1".to_owned(), format!("compaction_{}", second["id"].as_str().unwrap()), "m9".to_owned()]);
    // A sibling branch is neither extended nor hidden.
    api.append("s", "b1", Some(Some("m3")), "a branch");
    let b = ids(&api.get("/sessions/s/history?leaf=b1").body_json());
    assert_eq!(b, ["m1", "m2", "m3", "b1"]);
}

// invariant 17 (docs/ARCHITECTURE.md)
#[test]
fn failures_store_nothing() {
    let api = api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&api, "s", 6);
    let count = |api: &Api| api.get("/sessions/s/compactions").body_json()["compactions"].as_array().unwrap().len();
    api.model.reply(Err(Error::internal("connection refused")));
    let r = api.post("/sessions/s/compact", json!({}));
    assert_eq!((r.status, code(&r).as_str()), (503, "llm_unavailable"));
    api.model.reply(Ok(HttpResponse {
        headers: Vec::new(),
        status: 500,
        body: json!({"error": {"message": "overloaded"}}).to_string(),
    }));
    let r = api.post("/sessions/s/compact", json!({}));
    assert_eq!(r.status, 503);
    assert_eq!(r.body_json()["error"]["message"], "the model answered HTTP 500");
    assert!(r.warnings.iter().any(|w| w.contains("overloaded")), "the log has the provider's words: {:?}", r.warnings);
    for bad in [
        "",
        "   ",
        "## Topic\n[What the conversation is about]\n\n## Key Points\n\n## Current State\n\n## Open Items\n",
    ] {
        api.model.reply(Ok(completion(bad)));
        let r = api.post("/sessions/s/compact", json!({}));
        assert_eq!((r.status, code(&r).as_str()), (503, "llm_unavailable"), "{bad:?}");
    }
    assert_eq!(count(&api), 0);
    assert_eq!(api.get("/sessions/s").body_json()["inputTokens"], 0);
    // Nothing to do: no call at all. Unknown leaf: 404. No model: 503 not_configured.
    let calls = api.model.requests.borrow().len();
    fill(&api, "short", 2);
    assert_eq!(api.post("/sessions/short/compact", json!({})).body_json(), json!({"compaction": null}));
    assert_eq!(api.model.requests.borrow().len(), calls);
    assert_eq!(api.post("/sessions/s/compact", json!({"leafId": "nope"})).status, 404);
    let plain =
        Api::with_config(json!({"compaction": {"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}}));
    fill(&plain, "s", 6);
    let r = plain.post("/sessions/s/compact", json!({}));
    assert_eq!((r.status, code(&r).as_str()), (503, "not_configured"));
}

#[test]
fn auto_compaction_after_appends_never_fails_the_append() {
    let api = api(json!({"after": 60, "protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    let mut compacted = None;
    for i in 1..=12 {
        let r = api.post(
            "/sessions/s/messages",
            json!({"message": msg(&format!("m{i}"), "user", "a few words about the plan for the trip")}),
        );
        assert_eq!(r.status, 201);
        let b = r.body_json();
        if b.get("compaction").is_some() {
            compacted = Some((i, b["compaction"].clone()));
            break;
        }
    }
    let (i, report) = compacted.expect("the estimate passed `after`");
    assert_eq!(report["status"], "compacted");
    assert!(report["tokenEstimate"].as_i64().unwrap() > 60);
    assert_eq!(report["tokenThreshold"], 60);
    assert_eq!(report["compaction"]["toMessageId"], format!("m{}", i - 1));
    // The model failing: the message is stored anyway; the report says why; the log too.
    api.model.reply(Err(Error::internal("model down")));
    let r = api.post("/sessions/s/messages", json!({"message": msg("late", "user", "x ".repeat(200).trim())}));
    assert_eq!(r.status, 201);
    let b = r.body_json();
    assert_eq!(b["compaction"]["status"], "failed");
    assert_eq!(b["compaction"]["error"]["code"], "llm_unavailable");
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(api.get("/sessions/s/messages/late").status, 200);
    // Duplicates never trigger it.
    let r = api.post("/sessions/s/messages", json!({"message": msg("late", "user", "again")}));
    assert!(r.body_json().get("compaction").is_none());
}

// invariant 19 (docs/ARCHITECTURE.md)
#[test]
fn synthetic_compaction_messages_from_clients_are_not_stored() {
    let api = api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&api, "s", 6);
    api.post("/sessions/s/compact", json!({}));
    let seen = api.get("/sessions/s/history").body_json()["messages"].clone();
    let synthetic = seen[1].clone();
    let r = api.post("/sessions/s/messages", json!({"message": synthetic}));
    assert_eq!(r.status, 200);
    assert_eq!((r.body_json()["inserted"].clone(), r.body_json()["synthetic"].clone()), (json!(false), json!(true)));
    // A client sending its whole visible history back plus a new message: only the new one is stored.
    let mut all: Vec<Json> = seen.as_array().unwrap().clone();
    all.push(msg("m7", "user", "new"));
    let r = api.post("/sessions/s/messages/batch", json!({"messages": all, "parentId": null}));
    assert_eq!(r.body_json()["inserted"], 1);
    assert_eq!(r.body_json()["ids"], json!(["m1", "m6", "m7"]));
    assert_eq!(api.get("/sessions/s").body_json()["messageCount"], 7);
    assert_eq!(ids(&api.get("/sessions/s/history?raw=1").body_json()), ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]);
}

// invariant 18 (docs/ARCHITECTURE.md)
#[test]
fn the_incremental_estimate_equals_a_full_recount() {
    let api = api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    let full = |api: &Api, leaf: &str| {
        estimate::invalidate(&*api.db, "s").unwrap();
        session_agent_core::store::history::branch_tokens(&*api.db, "s", leaf).unwrap()
    };
    let cached =
        |api: &Api, leaf: &str| session_agent_core::store::history::branch_tokens(&*api.db, "s", leaf).unwrap();
    fill(&api, "s", 5);
    let base = full(&api, "m5");
    api.append("s", "m6", None, "one more message with several words");
    let rows =
        |api: &Api| api.db.query_row("SELECT leaf_id FROM token_estimates", &[]).unwrap().map(|r| r.text(0).unwrap());
    assert_eq!(rows(&api).as_deref(), Some("m6"), "the append moved the cache along");
    let incremental = cached(&api, "m6");
    assert!(incremental > base);
    assert_eq!(incremental, full(&api, "m6"));
    // A branch, an update, a compaction: each gives the same sum as a fresh count.
    cached(&api, "m6");
    api.append("s", "b1", Some(Some("m2")), "branching off");
    assert_eq!(cached(&api, "b1"), full(&api, "b1"));
    api.put("/sessions/s/messages/m2", json!({"message": msg("m2", "assistant", &"much longer text ".repeat(20))}));
    // An update drops the cache; the idle status frame to listeners rebuilds it from the path.
    assert_eq!(rows(&api).as_deref(), Some("b1"));
    assert_eq!(cached(&api, "b1"), full(&api, "b1"));
    assert_eq!(cached(&api, "m6"), full(&api, "m6"));
    cached(&api, "m6");
    api.post("/sessions/s/compact", json!({}));
    // A compaction drops the cache; its idle status frame rebuilds it for the compacted leaf
    // (the latest one, b1).
    assert_eq!(rows(&api).as_deref(), Some("b1"));
    let after = cached(&api, "m6");
    assert_eq!(after, full(&api, "m6"));
    assert!(after < incremental + 100, "the overlay replaced the middle");
}

#[test]
fn compaction_settings_are_validated() {
    for bad in [json!({"afterr": 5}), json!({"after": -1}), json!({"protectHead": "3"}), json!(7)] {
        let cfg = json!({"compaction": bad});
        assert!(session_agent_core::config::SessionConfig::from_json(&cfg.to_string()).is_err(), "{cfg}");
    }
}

#[test]
fn listeners_hear_status_frames_around_auto_compaction() {
    let api = api(json!({"after": 40, "protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    let r = api.post("/sessions/s/messages", json!({"message": msg("m1", "user", "short")}));
    assert_eq!(r.status, 201);
    let frames = api.events.take("s");
    assert_eq!(frames.iter().map(|f| f["type"].as_str().unwrap()).collect::<Vec<_>>(), ["message", "status"]);
    assert_eq!(frames[1]["phase"], "idle");
    assert_eq!(frames[1]["tokenThreshold"], 40);
    let mut compacted = None;
    for i in 2..=12 {
        let r = api.post("/sessions/s/messages", json!({"message": msg(&format!("m{i}"), if i % 2 == 0 { "assistant" } else { "user" }, "a message of some length about plans")}));
        if r.body_json()["compaction"]["status"] == "compacted" {
            compacted = Some(api.events.take("s"));
            break;
        }
        api.events.take("s");
    }
    let frames = compacted.expect("auto-compaction ran");
    let phases: Vec<&str> =
        frames.iter().filter(|f| f["type"] == "status").map(|f| f["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["compacting", "idle"]);
    let idle = frames.iter().rfind(|f| f["type"] == "status").unwrap();
    let before = idle["compacted"]["tokensBefore"].as_i64().unwrap();
    assert!(before > 40);
    assert!(idle["tokenEstimate"].as_i64().unwrap() > 0, "the estimate after compaction: {idle}");
    // A failing summarizer: idle with the error.
    api.model.reply(Ok(session_agent_core::llm::HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    api.post(
        "/sessions/s/messages",
        json!({"message": msg("x1", "user", "a message of some length about plans, once more, long enough")}),
    );
    let frames = api.events.take("s");
    let last = frames.iter().rfind(|f| f["type"] == "status").unwrap();
    assert_eq!(
        (last["phase"].as_str(), last["error"]["code"].as_str()),
        (Some("idle"), Some("llm_unavailable")),
        "{frames:?}"
    );
}

/// The type (and phase, for status frames) of each frame published to `sid` since the last call.
fn kinds(api: &Api, sid: &str) -> Vec<String> {
    api.events
        .take(sid)
        .iter()
        .map(|f| match f["phase"].as_str() {
            Some(p) => format!("{}:{p}", f["type"].as_str().unwrap()),
            None => f["type"].as_str().unwrap().to_owned(),
        })
        .collect()
}

/// Every write reaches the session's sockets, not only appends: update, delete and clear send
/// their change and an `idle` status; a manual compaction sends `compacting` then `idle`; block
/// writes (routes and tools) send `context` frames.
// invariant 23 (docs/ARCHITECTURE.md)
#[test]
fn every_write_sends_its_frames() {
    let api = api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&api, "s", 6);
    api.events.take("s");
    assert_eq!(api.put("/sessions/s/messages/m6", json!({"message": msg("m6", "assistant", "edited")})).status, 200);
    assert_eq!(kinds(&api, "s"), ["message", "status:idle"]);
    assert_eq!(api.delete("/sessions/s/messages/m6").status, 204);
    let frames = api.events.take("s");
    assert_eq!((frames[0]["type"].as_str(), &frames[0]["ids"]), (Some("deleted"), &json!(["m6"])));
    assert_eq!((frames[1]["type"].as_str(), frames[1]["phase"].as_str()), (Some("status"), Some("idle")));
    let r = api.post("/sessions/s/compact", json!({}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let frames = api.events.take("s");
    let phases: Vec<&str> = frames.iter().map(|f| f["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["compacting", "idle"]);
    assert!(frames[1]["compacted"]["tokensBefore"].as_i64().unwrap() > 0, "{frames:?}");
    api.model.reply(Ok(session_agent_core::llm::HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    for i in 7..=9 {
        api.post(
            "/sessions/s/messages",
            json!({"message": msg(&format!("m{i}"), "user", &format!("message number {i}"))}),
        );
    }
    api.events.take("s");
    assert_eq!(api.post("/sessions/s/compact", json!({})).status, 503);
    let frames = api.events.take("s");
    assert_eq!(frames.iter().map(|f| f["phase"].as_str().unwrap()).collect::<Vec<_>>(), ["compacting", "idle"]);
    assert_eq!(frames[1]["error"]["code"], "llm_unavailable");
    for (method, path, body) in [
        ("PUT", "/sessions/s/context/memory", json!({"content": "a"})),
        ("POST", "/sessions/s/context/memory/append", json!({"content": "b"})),
        ("POST", "/sessions/s/tools/set_context", json!({"input": {"label": "memory", "content": "c"}})),
        ("POST", "/sessions/s/context", json!({"label": "todo", "kind": "writable"})),
        ("DELETE", "/sessions/s/context/todo", json!(null)),
    ] {
        let req = session_agent_api::Request::new(Method::parse(method), path);
        let r = api.send(if body.is_null() { req } else { req.json(&body) });
        assert!(r.status < 300, "{method} {path}: {}", String::from_utf8_lossy(&r.body));
        let frames = api.events.take("s");
        assert_eq!(frames.len(), 1, "{method} {path}: {frames:?}");
        assert_eq!((frames[0]["type"].as_str(), frames[0]["sessionId"].as_str()), (Some("context"), Some("s")));
        assert!(frames[0]["label"] == "memory" || frames[0]["label"] == "todo");
    }
    assert_eq!(api.delete("/sessions/s/messages").status, 204);
    let frames = api.events.take("s");
    assert_eq!(frames[0]["type"], "cleared");
    assert_eq!(
        (frames[1]["phase"].as_str(), frames[1]["tokenEstimate"].as_i64().map(|t| t >= 0)),
        (Some("idle"), Some(true))
    );
    assert_eq!(api.delete("/sessions/s").status, 204);
    assert_eq!(kinds(&api, "s"), ["cleared", "status:idle"]);
    // Reads send nothing; a refused write sends nothing.
    api.get("/sessions/s/history");
    assert_eq!(api.delete("/sessions/s/messages/nope").status, 404);
    assert_eq!(kinds(&api, "s"), Vec::<String>::new());
}

#[test]
fn the_summarizer_is_compaction_model_when_set() {
    let api = api(json!({"model": "cheap-summarizer", "protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&api, "s", 8);
    api.model.reply(Ok(completion("A summary of the trip.")));
    let r = api.post("/sessions/s/compact", json!({}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let sent = api.model.requests.borrow().last().cloned().expect("a summary request");
    assert_eq!(sent["model"], "cheap-summarizer");
    // Without it, the configured model.
    let plain = self::api(json!({"protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}));
    fill(&plain, "s", 8);
    plain.model.reply(Ok(completion("A summary of the trip.")));
    assert_eq!(plain.post("/sessions/s/compact", json!({})).status, 200);
    assert_eq!(plain.model.requests.borrow().last().unwrap()["model"], plain.llm.model.as_str());
    for bad in [json!({"model": ""}), json!({"model": 5}), json!({"model": "m".repeat(300)})] {
        let cfg = json!({"compaction": bad});
        assert!(session_agent_core::config::SessionConfig::from_json(&cfg.to_string()).is_err(), "{cfg}");
    }
}

/// A provider that counts more input tokens than we estimate (600 for each turn here, which we
/// estimate at ~230: its tools' definitions, the prompt, one message); the ledger keeps both.
#[test]
fn the_providers_counts_calibrate_the_estimate_auto_compaction_compares() {
    use session_agent_core::directory::usage::calibration;
    let api = Api::with_config(
        json!({"compaction": {"after": 400, "protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}}),
    )
    .with_model();
    // Turns whose requests we estimate at ~230 tokens, which the provider says are 600.
    let mut estimates = Vec::new();
    let counted =
        |n: i64| crate::support::completion_with_usage("ok", json!({"prompt_tokens": n, "completion_tokens": 2}));
    for i in 0..3 {
        api.model.reply(Ok(counted(600)));
        let r = api.post("/sessions/t/chat", json!({"message": msg(&format!("u{i}"), "user", "hi")}));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        estimates.push(api.count("SELECT input_estimate FROM usage_ledger ORDER BY seq DESC LIMIT 1"));
    }
    assert!(estimates.iter().all(|e| *e > 0 && *e < 400), "our estimates are below the provider's 600: {estimates:?}");
    let c = calibration(&*api.db, &api.llm.model).unwrap();
    assert_eq!((c.turns, c.input_tokens), (3, 1800));
    assert_eq!(c.estimated_input_tokens, estimates.iter().sum::<i64>());
    let ratio = c.ratio();
    assert!(ratio > 1.5, "{ratio}");
    // A provider that reports no usage leaves the calibration as it was (its turn's row has no
    // estimate: there is no count to compare it with).
    let silent = HttpResponse {
        headers: Vec::new(),
        status: 200,
        body: json!({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})
            .to_string(),
    };
    api.model.reply(Ok(silent));
    assert_eq!(api.post("/sessions/t/chat", json!({"message": msg("u9", "user", "hi")})).status, 201);
    assert_eq!(api.count("SELECT count(*) FROM usage_ledger WHERE input_estimate IS NULL"), 1);
    assert_eq!(calibration(&*api.db, &api.llm.model).unwrap(), c);
    // GET /usage says so.
    let u = api.get("/usage").body_json();
    assert_eq!(u["calibration"]["turns"], 3, "{u}");
    assert_eq!(u["calibration"]["inputTokens"], 1800);
    assert_eq!(u["calibration"]["model"], api.llm.model.as_str());
    crate::support::assert_near(u["calibration"]["ratio"].as_f64(), ratio);
    // Appends in another session: its estimate, calibrated, passes `after` (400) sooner than
    // the same appends' raw estimate in an agent whose provider never counted.
    let compacted_at = |api: &Api| {
        for i in 1..=60 {
            let text = "a few words about the plan for the trip";
            let r = api.post("/sessions/s/messages", json!({"message": msg(&format!("m{i}"), "user", text)}));
            assert_eq!(r.status, 201);
            if let Some(c) = r.body_json().get("compaction") {
                return (i, c["tokenEstimate"].as_i64().unwrap());
            }
        }
        panic!("never compacted");
    };
    let (calibrated, estimate) = compacted_at(&api);
    let plain = Api::with_config(
        json!({"compaction": {"after": 400, "protectHead": 1, "tailTokenBudget": 10, "minTailMessages": 1}}),
    )
    .with_model();
    let (raw, raw_estimate) = compacted_at(&plain);
    assert!(estimate > 400 && raw_estimate > 400);
    assert!((calibrated as f64) < raw as f64 / 1.4, "calibrated: after {calibrated} appends; raw: after {raw}");
}
