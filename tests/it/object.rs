//! The Durable Object's own policy (`session_agent_api::object::Object`, the object the Workers
//! layer runs, here on the native platform `support::Native`): the directory's mark and report,
//! the alarm, the rate limit, one route match per request and the kind of answer it says.

use crate::support::{code, msg, Api};
use serde_json::json;
use session_agent_api::access::{Claims, CLAIMS_HEADER};
use session_agent_api::http::Method;
use session_agent_api::object::{Reply, SocketMessage};
use session_agent_api::socket_tags::SocketTags;
use session_agent_api::Request;
use session_agent_core::directory::report::{self, REPORT_DELAY_MS, RETRY_MS};
use session_agent_core::ids::Role;

fn append(api: &Api, id: &str) -> u16 {
    api.post("/sessions/s/messages", json!({"message": msg(id, "user", "hello")})).status
}

// invariant 46 (docs/ARCHITECTURE.md)
#[test]
fn a_write_that_succeeds_marks_the_directory_with_the_alarm_set_and_the_alarm_reports_it() {
    let api = Api::new().with_directory();
    assert_eq!(report::due(&*api.db).unwrap(), None);
    assert_eq!(append(&api, "m1"), 201);
    let now = api.now.get();
    // Marked in the write's turn, with the alarm set for the report.
    assert_eq!(report::due(&*api.db).unwrap(), Some(now + REPORT_DELAY_MS));
    assert_eq!(api.native.alarm.get(), Some(now + REPORT_DELAY_MS));
    // A second write before the report: the same report, no new alarm.
    let sets = api.native.alarm_sets.borrow().len();
    assert_eq!(append(&api, "m2"), 201);
    assert_eq!(report::due(&*api.db).unwrap(), Some(now + REPORT_DELAY_MS));
    assert_eq!(api.native.alarm_sets.borrow().len(), sets, "an alarm as soon is set");
    // The alarm: the report goes to the directory, the mark is cleared.
    api.now.set(now + REPORT_DELAY_MS);
    api.alarm().expect("woken");
    let reports = api.native.reports.borrow().clone();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!((reports[0]["kind"].as_str(), reports[0]["name"].as_str()), (Some("agent"), Some("alice")));
    assert_eq!(reports[0]["sessions"], 1);
    assert_eq!(report::due(&*api.db).unwrap(), None);
}

#[test]
fn a_refused_write_marks_nothing_and_a_read_nothing() {
    let api = Api::new().with_directory();
    let r = api.post("/sessions/s/messages", json!({"message": 5}));
    assert_eq!(r.status, 400);
    // A batch that fails midway: refused, rolled back, never marked.
    let bad = json!({"messages": [msg("a", "user", "x"), {"id": "b", "role": "user", "parts": 5}]});
    assert!(api.post("/sessions/s/messages/batch", bad).status >= 400);
    assert_eq!(api.get("/sessions").status, 200);
    assert_eq!(report::due(&*api.db).unwrap(), None, "nothing to report");
    assert!(api.native.alarm_sets.borrow().is_empty(), "no alarm for it");
    // A write that fails midway is rolled back, yet its rows count as written (`Sql::changes`):
    // taken as seen, neither it nor the next request marks the object for them.
    append(&api, "m1");
    api.now.set(api.now.get() + REPORT_DELAY_MS);
    api.alarm().expect("woken");
    assert_eq!(report::due(&*api.db).unwrap(), None, "reported");
    use session_agent_core::sql::Sql;
    api.db
        .execute_batch(
            "CREATE TRIGGER fail_second BEFORE INSERT ON messages WHEN (SELECT COUNT(*) FROM messages) >= 1
             BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
        )
        .unwrap();
    let changes = api.db.changes();
    let r = api.post("/sessions/s/fork", json!({"atMessageId": "m1"}));
    assert_eq!(r.status, 500);
    assert!(api.db.changes() > changes, "the rolled-back rows count");
    assert_eq!(api.get("/sessions").status, 200);
    assert_eq!(report::due(&*api.db).unwrap(), None, "nothing to report");
}

#[test]
fn without_a_directory_nothing_is_marked() {
    let api = Api::new();
    assert_eq!(append(&api, "m1"), 201);
    assert_eq!(report::due(&*api.db).unwrap(), None);
    assert!(api.native.alarm_sets.borrow().is_empty());
}

// invariant 46 (docs/ARCHITECTURE.md)
#[test]
fn a_report_the_directory_does_not_take_is_retried_later() {
    let api = Api::new().with_directory();
    assert_eq!(append(&api, "m1"), 201);
    api.native.directory_down.set(true);
    api.now.set(api.now.get() + REPORT_DELAY_MS);
    api.alarm().expect("woken");
    let now = api.now.get();
    assert!(api.native.reports.borrow().is_empty());
    assert_eq!(report::due(&*api.db).unwrap(), Some(now + RETRY_MS), "retried later");
    assert_eq!(api.native.alarm.get(), Some(now + RETRY_MS), "by the alarm");
    assert!(api.events.warnings.borrow().iter().any(|w| w.contains("retried later")));
    api.native.directory_down.set(false);
    api.now.set(now + RETRY_MS);
    api.alarm().expect("woken");
    assert_eq!(api.native.reports.borrow().len(), 1);
    assert_eq!(report::due(&*api.db).unwrap(), None);
}

#[test]
fn the_alarm_is_set_for_what_is_due_next_and_not_again_while_one_as_soon_is_set() {
    let api = Api::new();
    let r = api.post("/schedules", json!({"prompt": "p", "every": 3600}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let first = api.native.alarm.get().expect("the alarm is set for the schedule");
    let sets = api.native.alarm_sets.borrow().len();
    // Another write that needs nothing sooner: the alarm stays as it is.
    assert_eq!(append(&api, "m1"), 201);
    assert_eq!(api.native.alarm.get(), Some(first));
    assert_eq!(api.native.alarm_sets.borrow().len(), sets);
    // A schedule due sooner moves it.
    let at = session_agent_core::time::iso_millis(api.now.get() + 60_000);
    assert_eq!(api.post("/schedules", json!({"prompt": "p", "at": at})).status, 201);
    assert_eq!(api.native.alarm.get(), Some(api.now.get() - 1 + 60_000));
}

#[test]
fn a_new_instance_reads_the_alarm_before_it_sets_one() {
    let api = Api::new();
    assert_eq!(api.post("/schedules", json!({"prompt": "p", "every": 3600})).status, 201);
    let set = api.native.alarm_sets.borrow().len();
    // Restarted: the alarm set before survives, and is not set again.
    let api = api.reopen();
    assert_eq!(api.get("/schedules").status, 200);
    assert_eq!(api.native.alarm_sets.borrow().len(), set);
}

#[test]
fn the_rate_limit_counts_requests_and_socket_frames_alike() {
    let api = Api::new().with_rate("2/60");
    assert_eq!(api.get("/sessions").status, 200);
    let tags = SocketTags { session: "s".into(), id: "sock".into(), claims: None };
    let echo = |_: &serde_json::Value| {};
    let frames =
        crate::support::run(api.object.socket_message(&tags, SocketMessage::Text(r#"{"type":"ping"}"#), &echo));
    assert_eq!(frames[0]["type"], "pong");
    let r = api.get("/sessions");
    assert_eq!((r.status, code(&r)), (429, "rate_limited".into()));
    assert_eq!(r.header("retry-after"), Some("60"));
    let frames =
        crate::support::run(api.object.socket_message(&tags, SocketMessage::Text(r#"{"type":"ping"}"#), &echo));
    assert_eq!((frames[0]["type"].as_str(), frames[0]["code"].as_str()), (Some("error"), Some("rate_limited")));
    // A new window.
    api.now.set(api.now.get() + 60_000);
    assert_eq!(api.get("/sessions").status, 200);
}

#[test]
fn an_object_that_cannot_open_answers_why() {
    let mut api = Api::new();
    api.rate = Some("many");
    let api = api.reopen();
    let r = api.get("/sessions");
    assert_eq!((r.status, code(&r)), (503, "not_configured".into()));
    assert!(api.alarm().is_none(), "the alarm does nothing");
}

// invariant 30 (docs/ARCHITECTURE.md)
#[test]
fn the_route_table_says_how_a_request_is_answered() {
    let api = Api::new().with_model();
    // An upgrade: the session and the claims to accept the socket with, after the request's
    // one admission.
    let upgrade = |req: Request| api.reply(req.header("upgrade", "websocket"));
    let reply = upgrade(Request::new(Method::Get, "/sessions/s%2E1/ws"));
    let Reply::Upgrade { session, claims } = reply else {
        let Reply::Whole(r) = reply else { panic!("an upgrade") };
        panic!("an upgrade: {} {}", r.status, String::from_utf8_lossy(&r.body))
    };
    assert_eq!((session.as_str(), claims.is_none()), ("s.1", true));
    let body = json!({"scope": "read", "ttlSeconds": 3600, "sessions": ["s"]});
    let token = Claims::issue("alice", Role::Agent, body.as_object().unwrap(), api.now.get()).unwrap();
    let with = |req: Request| req.header(CLAIMS_HEADER, &serde_json::to_string(&token).unwrap());
    assert!(matches!(
        upgrade(with(Request::new(Method::Get, "/sessions/s/ws"))),
        Reply::Upgrade { claims: Some(_), .. }
    ));
    let Reply::Whole(r) = upgrade(with(Request::new(Method::Get, "/sessions/other/ws"))) else { panic!("refused") };
    assert_eq!(r.status, 403);
    let Reply::Whole(r) = api.reply(Request::new(Method::Get, "/sessions/s/ws")) else { panic!("no upgrade") };
    assert_eq!(r.status, 400, "not an upgrade");
    // A stream: the export, and a turn that asks for events; whole: a turn that does not.
    assert!(matches!(api.reply(Request::new(Method::Get, "/export")), Reply::Stream { .. }));
    let turn = |req: Request| api.reply(req.json(&json!({"message": msg("u1", "user", "hi")})));
    let sse = Request::new(Method::Post, "/sessions/s/chat").header("accept", "text/event-stream");
    assert!(matches!(turn(sse), Reply::Stream { .. }));
    assert!(matches!(turn(Request::new(Method::Post, "/sessions/t/chat")), Reply::Whole(r) if r.status == 201));
    // A memory space streams nothing and has no sockets: its export is answered whole.
    let mut space = Api::new();
    space.role = Role::Space;
    let space = space.reopen();
    let Reply::Whole(r) = space.reply(Request::new(Method::Get, "/export")) else { panic!("whole") };
    assert_eq!(r.status, 200);
    let Reply::Whole(r) = space.reply(Request::new(Method::Get, "/sessions/s/ws")) else { panic!("no upgrade") };
    assert_eq!(r.status, 404);
}
