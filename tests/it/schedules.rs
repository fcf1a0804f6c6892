//! Schedules through the DO API on real SQLite: the routes and their errors (nothing changes
//! on a refusal), the limits, who may call them, and runs through the alarm's wake-up: a fresh
//! history (configured blocks, `core` memories, the session-free tools, nothing stored), a
//! session's turn, a missed tick run once, an alarm delivered again or cut short by a crash
//! never running a tick twice, and the maintenance (expired memories, retries) with the time
//! the alarm is set for.

use futures::FutureExt;
use serde_json::{json, Map, Value as Json};
use session_agent_api::http::Method;
use session_agent_core::ids::Role;

use crate::support::{code, completion, Api};
use session_agent_api::access::{Claims, CLAIMS_HEADER};
use session_agent_api::Request;
use session_agent_core::after::After;
use session_agent_core::schedule::alarm::{due, wake, RETRY_MS, RUNS_PER_WAKE, WAKE_BUDGET_MS};
use session_agent_core::schedule::run::FRESH_TOOLS;
use session_agent_core::store;
use session_agent_core::time::{iso_millis, parse_iso};

const MIN: i64 = 60_000;

fn at(api: &Api, ahead_ms: i64) -> String {
    iso_millis(api.now.get() + ahead_ms)
}

fn schedules(api: &Api) -> i64 {
    api.count("SELECT count(*) FROM schedules")
}

/// One wake-up of the alarm at the API's clock.
fn wake_up(api: &Api) -> session_agent_core::schedule::alarm::Woken {
    futures::executor::block_on(wake(&|| api.env()))
}

fn runs(api: &Api, id: &str) -> Vec<Json> {
    api.get(&format!("/schedules/{id}/runs")).body_json()["runs"].as_array().unwrap().clone()
}

#[test]
fn schedules_are_created_read_changed_and_deleted() {
    let api = Api::new();
    let r = api.post("/schedules", json!({"prompt": "Summarize the news.\nBriefly.", "every": 3600}));
    assert_eq!(r.status, 201, "{:?}", r.body_json());
    let s = r.body_json();
    let id = s["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("sch_"));
    assert_eq!(s["name"], "Summarize the news.", "the prompt's first line by default");
    assert_eq!((s["every"].clone(), s["at"].clone(), s["cron"].clone()), (json!(3600), Json::Null, Json::Null));
    assert_eq!(s["paused"], false);
    assert_eq!(s["lastRunAt"], Json::Null);
    let next = parse_iso(s["nextRunAt"].as_str().unwrap()).unwrap();
    assert_eq!(next, parse_iso(s["createdAt"].as_str().unwrap()).unwrap() + 3_600_000);

    let cron =
        api.post("/schedules", json!({"prompt": "p", "name": "weekly", "cron": " 0  9 * *  1 ", "sessionId": "s1"}));
    assert_eq!(cron.status, 201);
    assert_eq!(cron.body_json()["cron"], "0 9 * * 1", "spaces normalized");
    assert_eq!(cron.body_json()["sessionId"], "s1");
    let once = api.post("/schedules", json!({"prompt": "p", "at": at(&api, 2_000)})).body_json();
    assert_eq!(api.get(&format!("/schedules/{id}")).body_json(), s);
    assert_eq!(api.get("/schedules/sch_nope").status, 404);

    // Listed by nextRunAt: the one-shot (2 s ahead), the hourly one, the weekly one.
    let list = api.get("/schedules").body_json();
    let order: Vec<&str> = list["schedules"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(order, [once["id"].as_str().unwrap(), &id, cron.body_json()["id"].as_str().unwrap()]);
    let page = api.get("/schedules?limit=2").body_json();
    assert_eq!(page["schedules"].as_array().unwrap().len(), 2);
    let rest = api.get(&format!("/schedules?limit=2&cursor={}", page["nextCursor"].as_str().unwrap())).body_json();
    assert_eq!(rest["schedules"][0]["id"], order[2]);
    assert_eq!(rest["nextCursor"], Json::Null);
    assert_eq!(api.get("/schedules?cursor=garbage").status, 400);

    let r = api.patch(&format!("/schedules/{id}"), json!({"paused": true, "name": "hourly", "every": 120}));
    assert_eq!(r.status, 200);
    let p = r.body_json();
    assert_eq!(
        (p["paused"].clone(), p["name"].clone(), p["every"].clone()),
        (json!(true), json!("hourly"), json!(120))
    );
    assert_eq!(
        parse_iso(p["nextRunAt"].as_str().unwrap()).unwrap(),
        api.now.get() + 120_000,
        "a new timing starts now"
    );
    let r = api.patch(&format!("/schedules/{id}"), json!({"cron": "*/15 * * * *"}));
    assert_eq!((r.body_json()["cron"].clone(), r.body_json()["every"].clone()), (json!("*/15 * * * *"), Json::Null));
    assert_eq!(api.patch("/schedules/sch_nope", json!({"paused": true})).status, 404);

    assert_eq!(api.delete(&format!("/schedules/{id}")).status, 204);
    assert_eq!(api.get(&format!("/schedules/{id}")).status, 404);
    assert_eq!(api.delete(&format!("/schedules/{id}")).status, 404);
    assert_eq!(schedules(&api), 2);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let api = Api::with_config(json!({"schedules": {"maxPromptChars": 100}}));
    let ok = api.post("/schedules", json!({"prompt": "p", "every": 60})).body_json();
    let id = ok["id"].as_str().unwrap();
    let past = at(&api, -1_000);
    for body in [
        json!({"prompt": "p"}),
        json!({"prompt": "p", "cron": "61 * * * *"}),
        json!({"prompt": "p", "cron": "* * * *"}),
        json!({"prompt": "p", "cron": "0 0 30 2 *"}),
        json!({"prompt": "p", "cron": 5}),
        json!({"prompt": "p", "at": past}),
        json!({"prompt": "p", "at": "soon"}),
        json!({"prompt": "p", "every": 59}),
        json!({"prompt": "p", "every": 90.5}),
        json!({"prompt": "p", "every": "3600"}),
        json!({"prompt": "p", "at": at(&api, 60_000), "every": 3600}),
        json!({"prompt": "p", "every": 60, "cron": "* * * * *"}),
        json!({"prompt": "x".repeat(101), "every": 60}),
        json!({"prompt": "  ", "every": 60}),
        json!({"every": 60}),
        json!({"prompt": "p", "every": 60, "sessionId": "a/b"}),
        json!({"prompt": "p", "every": 60, "name": ""}),
        json!({"prompt": "p", "every": 60, "extra": 1}),
    ] {
        let r = api.post("/schedules", body.clone());
        assert_eq!((r.status, code(&r)), (400, "invalid_request".into()), "{body}");
    }
    assert_eq!(api.post("/schedules", json!({"prompt": "x".repeat(100), "every": 60})).status, 201, "at the limit");
    assert_eq!(schedules(&api), 2);
    let path = format!("/schedules/{id}");
    for body in [
        json!({"paused": "yes"}),
        json!({"every": 10}),
        json!({"at": past}),
        json!({"at": at(&api, 60_000), "cron": "* * * * *"}),
        json!({"prompt": "x".repeat(101)}),
        json!({"nextRunAt": "2030-01-01T00:00:00Z"}),
    ] {
        let r = api.patch(&path, body.clone());
        assert_eq!(r.status, 400, "{body}");
    }
    assert_eq!(api.get(&path).body_json(), ok, "unchanged");
    assert_eq!(api.get("/schedules?limit=0").status, 400);
    assert_eq!(api.get("/schedules?limit=101").status, 400);
}

#[test]
fn an_agent_holds_at_most_max_schedules() {
    let api = Api::with_config(json!({"schedules": {"maxSchedules": 2}}));
    for _ in 0..2 {
        assert_eq!(api.post("/schedules", json!({"prompt": "p", "every": 60})).status, 201);
    }
    let r = api.post("/schedules", json!({"prompt": "p", "every": 60}));
    assert_eq!((r.status, code(&r)), (422, "over_budget".into()));
    assert_eq!(schedules(&api), 2);
    assert!(session_agent_core::config::SessionConfig::from_json(r#"{"schedules": {"maxRuns": 0}}"#).is_err());
    assert!(session_agent_core::config::SessionConfig::from_json(r#"{"schedules": {"other": 1}}"#).is_err());
}

#[test]
fn schedules_are_for_agent_wide_tokens() {
    let api = Api::new();
    let now = api.now.get();
    let body = |v: Json| -> Map<String, Json> { v.as_object().unwrap().clone() };
    let token = |v: Json| Claims::issue("alice", Role::Agent, &body(v), now).unwrap();
    let with = |c: &Claims, req: Request| req.header(CLAIMS_HEADER, &serde_json::to_string(c).unwrap());
    let create = || Request::new(Method::Post, "/schedules").json(&json!({"prompt": "p", "every": 60}));

    let limited = token(json!({"scope": "write", "ttlSeconds": 60, "sessions": ["s1"]}));
    assert_eq!(api.send(with(&limited, create())).status, 403);
    assert_eq!(api.send(with(&limited, Request::new(Method::Get, "/schedules"))).status, 403);
    let read = token(json!({"scope": "read", "ttlSeconds": 60}));
    assert_eq!(api.send(with(&read, create())).status, 403);
    assert_eq!(schedules(&api), 0);
    let write = token(json!({"scope": "write", "ttlSeconds": 60}));
    let r = api.send(with(&write, create()));
    assert_eq!(r.status, 201);
    let id = r.body_json()["id"].as_str().unwrap().to_owned();
    assert_eq!(api.send(with(&read, Request::new(Method::Get, &format!("/schedules/{id}/runs")))).status, 200);
    assert_eq!(api.send(with(&read, Request::new(Method::Post, &format!("/schedules/{id}/run")))).status, 403);
    assert_eq!(api.send(with(&limited, Request::new(Method::Get, &format!("/schedules/{id}")))).status, 403);
    assert_eq!(api.send(with(&read, Request::new(Method::Delete, &format!("/schedules/{id}")))).status, 403);
    assert_eq!(schedules(&api), 1);
}

#[test]
fn a_one_shot_runs_on_a_fresh_history_through_the_alarm() {
    let api = Api::with_config(json!({
        "context": [
            {"label": "soul", "kind": "readonly", "content": "You are the night shift."},
            {"label": "notes", "kind": "writable", "content": "configured notes"}],
        "memory": true
    }))
    .with_model();
    // A session with its own state and history, which a fresh run must not see.
    assert_eq!(api.put("/sessions/s1/context/notes", json!({"content": "the session's own notes"})).status, 200);
    api.append("s1", "m1", None, "a chat message the schedule must not see");
    api.post("/memories", json!({"content": "The user is called Ada.", "category": "core"}));
    api.post("/memories", json!({"content": "The user had tea today, Ada says.", "category": "daily"}));
    let messages = api.count("SELECT count(*) FROM messages");

    let s = api.post("/schedules", json!({"prompt": "Greet Ada, the user.", "at": at(&api, 2_000)})).body_json();
    let id = s["id"].as_str().unwrap();
    let env = api.env();
    assert_eq!(due(&env).unwrap(), parse_iso(s["nextRunAt"].as_str().unwrap()), "the alarm is set for it");
    drop(env);
    assert_eq!(wake_up(&api).runs, 0, "not yet due");
    api.now.set(api.now.get() + 2_000);
    api.model.reply(Ok(completion("Good evening, Ada.")));
    api.events.frames.borrow_mut().clear();
    let w = wake_up(&api);
    assert_eq!(w.runs, 1);

    let sent = api.model.requests.borrow().last().cloned().unwrap();
    let text = sent.to_string();
    assert!(text.contains("You are the night shift.") && text.contains("configured notes"), "{text}");
    assert!(!text.contains("the session's own notes"), "no session's writable state");
    assert!(!text.contains("must not see"), "no chat history");
    assert!(text.contains("The user is called Ada."), "core memories injected");
    assert!(!text.contains("had tea"), "only core memories");
    let user_turns: Vec<&Json> = sent["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(user_turns.len(), 1);
    let tools: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(!tools.is_empty() && tools.iter().all(|t| FRESH_TOOLS.contains(t)), "{tools:?}");

    let r = runs(&api, id);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0]["status"].clone(), r[0]["reply"].clone()), (json!("ok"), json!("Good evening, Ada.")));
    assert_eq!(r[0]["usage"], json!({"inputTokens": 100, "outputTokens": 20}));
    assert_eq!(r[0]["error"], Json::Null);
    assert_eq!(api.count("SELECT count(*) FROM messages"), messages, "nothing written into a session");
    assert_eq!(api.count("SELECT count(*) FROM sessions"), 1);
    let frames = api.events.take("*");
    let frame = frames.iter().find(|f| f["type"] == "schedule").expect("a schedule frame");
    assert_eq!(frame, &json!({"type": "schedule", "op": "run", "scheduleId": id, "run": r[0]}));

    let after = api.get(&format!("/schedules/{id}")).body_json();
    assert_eq!(after["nextRunAt"], Json::Null, "a one-shot runs once");
    assert!(after["lastRunAt"].is_string());
    assert_eq!(wake_up(&api).runs, 0);
    let daily = api.get("/memories?category=daily").body_json()["memories"][0]["expiresAt"].clone();
    assert_eq!(due(&api.env()).unwrap(), parse_iso(daily.as_str().unwrap()), "only the daily memory's expiry is left");
    // It stays listed, last.
    api.post("/schedules", json!({"prompt": "p", "every": 60}));
    let list = api.get("/schedules").body_json();
    assert_eq!(list["schedules"][1]["id"], id);
}

#[test]
fn a_schedule_with_a_session_runs_as_a_turn_there() {
    let api = Api::new().with_model();
    api.append("s1", "m1", None, "earlier words in the chat");
    let s = api.post("/schedules", json!({"prompt": "What did I say?", "every": 60, "sessionId": "s1"})).body_json();
    api.now.set(api.now.get() + MIN);
    api.model.reply(Ok(completion("You said earlier words.")));
    assert_eq!(wake_up(&api).runs, 1);
    let sent = api.model.requests.borrow()[0].to_string();
    assert!(sent.contains("earlier words in the chat") && sent.contains("What did I say?"), "history included");
    let history = api.get("/sessions/s1/history").body_json()["messages"].as_array().unwrap().clone();
    assert_eq!(history.len(), 3);
    assert_eq!(history[2]["parts"][0]["text"], "You said earlier words.");
    let r = runs(&api, s["id"].as_str().unwrap());
    assert_eq!(r[0]["reply"], "You said earlier words.");
    // Its turn's row of the usage ledger, once.
    let usage = api.get("/usage").body_json();
    assert_eq!((usage["turns"].as_i64(), usage["bySession"][0]["sessionId"].as_str()), (Some(1), Some("s1")));
}

#[test]
fn a_run_on_a_fresh_history_counts_in_the_usage_ledger() {
    let api = Api::new().with_model();
    let s = api.post("/schedules", json!({"prompt": "Say hi.", "every": 60})).body_json();
    api.now.set(api.now.get() + MIN);
    api.model.reply(Ok(completion("Hi.")));
    assert_eq!(wake_up(&api).runs, 1);
    let usage = api.get("/usage").body_json();
    assert_eq!(
        (usage["turns"].as_i64(), usage["inputTokens"].as_i64(), usage["outputTokens"].as_i64()),
        (Some(1), Some(100), Some(20))
    );
    assert_eq!(usage["bySession"][0]["sessionId"], "#schedule");
    // A failed run counts nothing.
    api.now.set(api.now.get() + MIN);
    api.model.reply(Err(session_agent_core::error::Error::internal("down")));
    assert_eq!(wake_up(&api).runs, 1);
    assert_eq!(runs(&api, s["id"].as_str().unwrap())[0]["status"], "error");
    assert_eq!(api.get("/usage").body_json()["turns"], 1);
}

// invariant 42 (docs/ARCHITECTURE.md)
#[test]
fn a_missed_tick_runs_once_and_the_next_is_after_now() {
    let api = Api::new().with_model();
    let s = api.post("/schedules", json!({"prompt": "tick", "every": 60})).body_json();
    let id = s["id"].as_str().unwrap();
    let first = parse_iso(s["nextRunAt"].as_str().unwrap()).unwrap();
    // Away for ten minutes and a half: ten ticks missed.
    api.now.set(first + 9 * MIN + 30_000);
    let w = wake_up(&api);
    assert_eq!(w.runs, 1);
    assert_eq!(runs(&api, id).len(), 1);
    let next = parse_iso(api.get(&format!("/schedules/{id}")).body_json()["nextRunAt"].as_str().unwrap()).unwrap();
    assert_eq!(next, first + 10 * MIN, "the next tick of its own grid after now");
    assert_eq!(wake_up(&api).runs, 0);
    // A failing model makes a failed run, and the schedule goes on.
    api.now.set(next);
    api.model.reply(Ok(session_agent_core::llm::HttpResponse { headers: Vec::new(), status: 500, body: "{}".into() }));
    assert_eq!(wake_up(&api).runs, 1);
    let r = runs(&api, id);
    assert_eq!((r[0]["status"].clone(), r[0]["reply"].clone()), (json!("error"), Json::Null));
    assert!(r[0]["error"].as_str().unwrap().len() > 5);
    assert_eq!(r[1]["status"], "ok", "newest first");
}

#[test]
fn a_paused_schedule_waits_and_a_cron_one_follows_its_expression() {
    let api = Api::new().with_model();
    let s = api.post("/schedules", json!({"prompt": "p", "cron": "*/15 * * * *"})).body_json();
    let id = s["id"].as_str().unwrap();
    let next = parse_iso(s["nextRunAt"].as_str().unwrap()).unwrap();
    assert_eq!(next % (15 * MIN), 0);
    api.patch(&format!("/schedules/{id}"), json!({"paused": true}));
    assert_eq!(due(&api.env()).unwrap(), None, "a paused schedule needs no alarm");
    api.now.set(next + 1);
    assert_eq!(wake_up(&api).runs, 0);
    api.patch(&format!("/schedules/{id}"), json!({"paused": false}));
    assert_eq!(wake_up(&api).runs, 1, "the tick missed while paused runs once");
    let after = parse_iso(api.get(&format!("/schedules/{id}")).body_json()["nextRunAt"].as_str().unwrap()).unwrap();
    assert_eq!(after, next + 15 * MIN);
}

// invariant 42 (docs/ARCHITECTURE.md)
#[test]
fn an_alarm_delivered_again_or_cut_short_never_runs_a_tick_twice() {
    let api = Api::new().with_model();
    let s = api.post("/schedules", json!({"prompt": "once only", "every": 60})).body_json();
    let id = s["id"].as_str().unwrap();
    api.now.set(parse_iso(s["nextRunAt"].as_str().unwrap()).unwrap());
    // The model call hangs and the instance goes away in the middle of it.
    api.model.hangs.set(true);
    {
        let env = || api.env();
        let mut first = Box::pin(wake(&env));
        assert!(first.as_mut().now_or_never().is_none(), "the run waits on the model");
    }
    api.model.hangs.set(false);
    let calls = api.model.requests.borrow().len();
    assert_eq!(calls, 1);
    let r = runs(&api, id);
    assert_eq!((r.len(), r[0]["status"].clone(), r[0]["endedAt"].clone()), (1, json!("running"), Json::Null));
    // The same alarm delivered again: the tick was taken when the run started.
    assert_eq!(wake_up(&api).runs, 0);
    assert_eq!(api.model.requests.borrow().len(), calls, "no second model call");
    let r = api.post(&format!("/schedules/{id}/run"), json!({}));
    assert_eq!((r.status, code(&r)), (409, "conflict".into()), "a run of it is going");
    // The object starts again: the started run is found and marked failed, never run again.
    store::open(&*api.db, api.now.get()).unwrap();
    session_agent_core::schedule::run::recover(&*api.db, &iso_millis(api.now.get())).unwrap();
    let r = runs(&api, id);
    assert_eq!((r.len(), r[0]["status"].clone()), (1, json!("error")));
    assert!(r[0]["error"].as_str().unwrap().contains("interrupted"));
    assert_eq!(wake_up(&api).runs, 0);
    assert_eq!(api.model.requests.borrow().len(), calls);
    // The schedule still runs at its next tick.
    api.now.set(api.now.get() + MIN);
    assert_eq!(wake_up(&api).runs, 1);
    assert_eq!(runs(&api, id)[0]["status"], "ok");
}

#[test]
fn a_run_by_hand_keeps_the_timing_and_needs_a_model() {
    let none = Api::new();
    let s = none.post("/schedules", json!({"prompt": "p", "every": 60})).body_json();
    let r = none.post(&format!("/schedules/{}/run", s["id"].as_str().unwrap()), json!({}));
    assert_eq!((r.status, code(&r)), (503, "llm_unavailable".into()));
    assert_eq!(none.count("SELECT count(*) FROM schedule_runs"), 0);
    assert_eq!(none.post("/schedules/sch_nope/run", json!({})).status, 404);

    let api = Api::new().with_model();
    let s = api.post("/schedules", json!({"prompt": "p", "every": 60})).body_json();
    let id = s["id"].as_str().unwrap();
    api.model.reply(Ok(completion("by hand")));
    let r = api.post(&format!("/schedules/{id}/run"), json!({}));
    assert_eq!(r.status, 200);
    assert_eq!((r.body_json()["status"].clone(), r.body_json()["reply"].clone()), (json!("ok"), json!("by hand")));
    let after = api.get(&format!("/schedules/{id}")).body_json();
    assert_eq!(after["nextRunAt"], s["nextRunAt"], "the timing is unchanged");
    assert!(after["lastRunAt"].is_string());
    assert_eq!(api.post(&format!("/schedules/{id}/run"), json!("x")).status, 400);
}

#[test]
fn a_schedule_keeps_its_newest_runs_and_its_runs_go_with_it() {
    let api = Api::with_config(json!({"schedules": {"maxRuns": 3}})).with_model();
    let s = api.post("/schedules", json!({"prompt": "p", "every": 60})).body_json();
    let id = s["id"].as_str().unwrap();
    for i in 0..5 {
        api.model.reply(Ok(completion(&format!("reply {i}"))));
        assert_eq!(api.post(&format!("/schedules/{id}/run"), json!({})).status, 200);
    }
    let r = runs(&api, id);
    let replies: Vec<&str> = r.iter().map(|r| r["reply"].as_str().unwrap()).collect();
    assert_eq!(replies, ["reply 4", "reply 3", "reply 2"]);
    let page = api.get(&format!("/schedules/{id}/runs?limit=2")).body_json();
    assert_eq!(page["runs"].as_array().unwrap().len(), 2);
    let rest = api.get(&format!("/schedules/{id}/runs?limit=2&cursor={}", page["nextCursor"].as_str().unwrap()));
    assert_eq!(rest.body_json()["runs"][0]["reply"], "reply 2");
    assert_eq!(rest.body_json()["nextCursor"], Json::Null);
    assert_eq!(api.get("/schedules/sch_nope/runs").status, 404);
    api.delete(&format!("/schedules/{id}"));
    assert_eq!(api.count("SELECT count(*) FROM schedule_runs"), 0);
}

#[test]
fn the_alarm_purges_expired_memories_and_retries_left_over_work() {
    let api = Api::new().with_embeddings();
    let expires = at(&api, 10 * MIN);
    api.post("/memories", json!({"content": "A fact for ten minutes.", "expiresAt": expires}));
    api.post("/memories", json!({"content": "A lasting fact."}));
    assert_eq!(due(&api.env()).unwrap(), parse_iso(&expires), "the alarm is set for the expiry");
    api.now.set(parse_iso(&expires).unwrap());
    let w = wake_up(&api);
    assert_eq!(w.purged, 1, "purged when it expires, without a write");
    assert_eq!(api.count("SELECT count(*) FROM memories"), 1);
    assert_eq!(w.after, Vec::<After>::new(), "nothing left over");

    // An embedding that failed leaves rows waiting: retried by the alarm, not by the next write.
    api.model.embed_fails.set(true);
    api.post("/memories", json!({"content": "Waiting for its vector."}));
    assert!(api.count("SELECT count(*) FROM unembedded") > 0);
    let now = api.now.get();
    let env = api.env();
    assert!(due(&env).unwrap().is_some_and(|t| t > now && t <= now + RETRY_MS + 1));
    drop(env);
    api.model.embed_fails.set(false);
    api.now.set(api.now.get() + RETRY_MS);
    let w = wake_up(&api);
    assert_eq!(w.after, vec![After::Embed]);
    futures::executor::block_on(session_agent_api::after(&api.env(), &w.after));
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert_eq!(due(&api.env()).unwrap(), None);
}

#[test]
fn sleep_time_consolidation_retires_near_duplicates_on_the_alarm() {
    // Off by default: no pass, no alarm for it.
    let off = Api::with_config(json!({"memory": true})).with_model();
    off.post("/memories", json!({"content": "The user lives in Paris."}));
    assert_eq!(due(&off.env()).unwrap(), None);
    assert_eq!(wake_up(&off).consolidated.checked, 0);
    assert!(off.model.requests.borrow().is_empty());

    let api = Api::with_config(json!({"memory": {"maintenance": {"everyHours": 1, "batch": 1}}})).with_model();
    let a = api.post("/memories", json!({"content": "The user lives in Paris."})).body_json();
    let b = api.post("/memories", json!({"content": "The user lives in Paris, France."})).body_json();
    let c = api.post("/memories", json!({"content": "The user in Paris likes green tea."})).body_json();
    let (a, b, c) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap(), c["id"].as_str().unwrap());
    let now = api.now.get();
    assert_eq!(due(&api.env()).unwrap(), Some(now + 1), "a first pass at once");
    // The first wake-up checks one memory (batch 1), the oldest change first: `a`; the model
    // says `b` says the same.
    let decide = json!({"memory": [{"id": b, "text": "The user lives in Paris.", "event": "DELETE"}]});
    api.model.reply(Ok(completion(&decide.to_string())));
    let w = wake_up(&api);
    assert_eq!((w.consolidated.checked, w.consolidated.retired), (1, 1));
    let sent = api.model.requests.borrow()[0].to_string();
    assert!(sent.contains(b) && sent.contains("The user lives in Paris."), "{sent}");
    let retired = api.get(&format!("/memories/{b}")).body_json();
    assert_eq!(retired["supersededBy"], a);
    assert!(retired["invalidAt"].is_string());
    assert!(!api.get(&format!("/memories/{b}/history")).body_json()["versions"].as_array().unwrap().is_empty());
    let listed = api.get("/memories").body_json()["memories"].as_array().unwrap().len();
    assert_eq!(listed, 2, "the duplicate no longer holds");
    // The pass has memories left: due at once; `b` is skipped (retired), `c` checked.
    let now = api.now.get();
    assert!(due(&api.env()).unwrap().is_some_and(|t| t <= now + 1));
    api.model.reply(Ok(completion(r#"{"memory": []}"#)));
    let w = wake_up(&api);
    assert_eq!((w.consolidated.checked, w.consolidated.retired), (1, 0));
    assert!(api.model.requests.borrow()[1].to_string().contains("likes green tea"), "{c} checked");
    // Done: the next pass is due an hour after this one began.
    let w = wake_up(&api);
    assert_eq!(w.consolidated.checked, 0);
    let next = due(&api.env()).unwrap().unwrap();
    assert!(next > api.now.get() + 3_500_000 && next <= api.now.get() + 3_600_000, "{next}");
    assert_eq!(api.model.requests.borrow().len(), 2);
    assert!(
        session_agent_core::config::SessionConfig::from_json(r#"{"memory": {"maintenance": {"batch": 0}}}"#).is_err()
    );
}

// invariant 43 (docs/ARCHITECTURE.md)
#[test]
fn a_wake_up_is_bounded_and_the_rest_is_due_at_once() {
    let api = Api::new().with_model();
    let due_at = at(&api, MIN);
    for i in 0..(RUNS_PER_WAKE + 3) {
        assert_eq!(api.post("/schedules", json!({"prompt": format!("task {i}"), "at": due_at})).status, 201);
    }
    api.now.set(parse_iso(&due_at).unwrap());
    assert_eq!(wake_up(&api).runs as i64, RUNS_PER_WAKE, "at most RUNS_PER_WAKE runs");
    let now = api.now.get();
    assert!(due(&api.env()).unwrap().is_some_and(|t| t <= now), "the rest is due at once");
    assert_eq!(wake_up(&api).runs, 3);
    assert_eq!(api.count("SELECT count(*) FROM schedule_runs WHERE status = 'ok'"), RUNS_PER_WAKE + 3);
    // A wake-up stops starting runs once WAKE_BUDGET_MS has passed (here, each request of the
    // native clock is one ms: a budget-long stretch is simulated by a clock that jumps).
    for i in 0..3 {
        api.post("/schedules", json!({"prompt": format!("late {i}"), "at": at(&api, MIN)}));
    }
    api.now.set(api.now.get() + 2 * MIN);
    let start = api.now.get();
    let jumpy = || {
        let env = api.env();
        api.now.set(api.now.get() + WAKE_BUDGET_MS / 2);
        env
    };
    let w = futures::executor::block_on(wake(&jumpy));
    assert!(w.runs < 3, "{} runs after {} ms", w.runs, api.now.get() - start);
    assert_eq!(api.post("/schedules", json!({"prompt": "\u{1}", "every": 60})).body_json()["name"], "schedule");
}

/// An agent where `alice-chat` holds a word (a message and a conversation memory) that
/// `bob-chat` never heard, with the searchable-history block and memory.
fn alice_and_bob() -> Api {
    let api = Api::with_config(json!({"memory": {}, "searchableHistory": "history"})).with_model();
    api.append("alice-chat", "a1", None, "my locker code is zebra 7731");
    let r = api.post(
        "/memories",
        json!({"content": "Alice's locker code is zebra 7731", "category": "conversation", "sessionId": "alice-chat"}),
    );
    assert_eq!(r.status, 201);
    api.append("bob-chat", "b1", None, "hello, what is the locker code?");
    api
}

/// What the model was sent since `from`, as text.
fn seen_since(api: &Api, from: usize) -> String {
    api.model.requests.borrow()[from..].iter().map(Json::to_string).collect()
}

/// A run in `bob-chat` is a turn stored there, read by bob-chat's own tokens: it reads across
/// sessions as such a token would (bob-chat only), whoever runs it (the alarm, the admin by
/// hand), unless the schedule says `"reach": "agent"`. A run without a session reaches every
/// session by default (its reply is the agent-wide tokens'), and none with `"reach": "session"`.
// invariant 47 (docs/ARCHITECTURE.md)
#[test]
fn a_run_in_a_session_reaches_other_sessions_only_when_its_schedule_says_so() {
    let api = alice_and_bob();
    let s = api
        .post("/schedules", json!({"prompt": "Find the locker code.", "every": 60, "sessionId": "bob-chat"}))
        .body_json();
    assert_eq!(s["reach"], "session", "a run in a session reaches it alone by default");
    let id = s["id"].as_str().unwrap().to_owned();
    let tools = [
        ("session_search", json!({"query": "locker code zebra"})),
        ("search_context", json!({"label": "history", "query": "locker code zebra"})),
        ("memory_recall", json!({"query": "locker code zebra"})),
    ];
    // Through the alarm, then by hand with the admin token: the schedule's reach either way.
    for (i, (name, input)) in tools.iter().enumerate() {
        let from = api.model.requests.borrow().len();
        api.model.reply(Ok(crate::support::tool_calls(&[("c1", name, input.clone())])));
        api.model.reply(Ok(completion("I cannot find it.")));
        if i == 0 {
            api.now.set(api.now.get() + MIN);
            assert_eq!(wake_up(&api).runs, 1);
        } else {
            assert_eq!(api.post(&format!("/schedules/{id}/run"), json!({})).status, 200);
        }
        let seen = seen_since(&api, from);
        assert!(seen.contains("locker code?"), "{name}: the run saw its own session: {seen}");
        assert!(!seen.contains("7731"), "{name}: the run was shown alice-chat: {seen}");
    }
    let history = api.get("/sessions/bob-chat/history").body_json().to_string();
    assert!(!history.contains("7731"), "alice-chat's words were copied into bob-chat: {history}");

    // Said explicitly, it reaches every session, and what it finds is stored in bob-chat.
    let p = api.patch(&format!("/schedules/{id}"), json!({"reach": "agent"}));
    assert_eq!((p.status, p.body_json()["reach"].clone()), (200, json!("agent")));
    let from = api.model.requests.borrow().len();
    api.model.reply(Ok(crate::support::tool_calls(&[("c1", "session_search", tools[0].1.clone())])));
    api.model.reply(Ok(completion("It is zebra 7731.")));
    assert_eq!(api.post(&format!("/schedules/{id}/run"), json!({})).status, 200);
    assert!(seen_since(&api, from).contains("7731"));
    assert!(api.get("/sessions/bob-chat/history").body_json().to_string().contains("7731"));
    let made = api.post("/schedules", json!({"prompt": "p", "every": 60, "sessionId": "bob-chat", "reach": "agent"}));
    assert_eq!(made.body_json()["reach"], "agent");

    // A fresh run: every session by default, none with "session".
    let fresh = api.post("/schedules", json!({"prompt": "Find the locker code.", "every": 60})).body_json();
    assert_eq!(fresh["reach"], "agent");
    let fid = fresh["id"].as_str().unwrap().to_owned();
    for (reach, finds) in [("agent", true), ("session", false)] {
        assert_eq!(api.patch(&format!("/schedules/{fid}"), json!({"reach": reach})).status, 200);
        let from = api.model.requests.borrow().len();
        api.model.reply(Ok(crate::support::tool_calls(&[("c1", "session_search", tools[0].1.clone())])));
        api.model.reply(Ok(completion("done")));
        assert_eq!(api.post(&format!("/schedules/{fid}/run"), json!({})).status, 200);
        assert_eq!(seen_since(&api, from).contains("7731"), finds, "a fresh run with reach {reach}");
    }
}

#[test]
fn reach_is_checked_and_migrated() {
    let api = Api::new();
    let s = api.post("/schedules", json!({"prompt": "p", "every": 60, "sessionId": "s1"})).body_json();
    let path = format!("/schedules/{}", s["id"].as_str().unwrap());
    for bad in [json!("all"), json!(1), json!(["agent"]), json!("Agent")] {
        let r = api.post("/schedules", json!({"prompt": "p", "every": 60, "reach": bad}));
        assert_eq!((r.status, code(&r)), (400, "invalid_request".into()), "{bad}");
        assert_eq!(api.patch(&path, json!({"reach": bad})).status, 400, "{bad}");
    }
    assert_eq!(schedules(&api), 1);
    assert_eq!(api.get(&path).body_json(), s, "unchanged");
    assert_eq!(api.patch(&path, json!({"reach": null, "paused": true})).body_json()["reach"], "session");

    // Schedules stored before the reach: one in a session reaches it alone, a fresh one every session.
    use session_agent_core::sql::Sql;
    let db = crate::support::db_at(16);
    for (id, session) in [("sch_a", Json::from("s1")), ("sch_b", Json::Null)] {
        let session = session.as_str().map(str::to_owned);
        db.execute(
            "INSERT INTO schedules (id, name, prompt, kind, spec, session_id, created_at)
             VALUES (?, 'n', 'p', 'every', '60', ?, '2026-11-22T11:00:00.000Z')",
            &[id.into(), session.into()],
        )
        .unwrap();
    }
    store::open(&db, 0).unwrap();
    let api = Api::with_db(db);
    assert_eq!(api.get("/schedules/sch_a").body_json()["reach"], "session");
    assert_eq!(api.get("/schedules/sch_b").body_json()["reach"], "agent");
}
