//! The directory of agents and spaces: a shard's table (reports upserted and removed, filters,
//! cursor paging), the merge of shard pages into the directory's pages, hostile parameters, an
//! object's own report state (marked by writes, due, cleared only by a report that saw every
//! write), and the per-turn usage ledger with `GET /usage`.

use serde_json::{json, Value as Json};
use session_agent_api::directory as api;
use session_agent_api::http::Method;
use session_agent_api::Request;
use session_agent_core::directory::report::{self, RETRY_MS};
use session_agent_core::directory::shard;
use session_agent_core::directory::{merge, shard_of, After, Entry, Listing, Report, DIRECTORY_SHARDS, MAX_LIMIT};
use session_agent_core::ids::Role;
use session_agent_core::sql::Sql;
use session_agent_core::sqlite::SqliteDb;

use super::support::{code, completion, db, msg, Api};

const NOW: &str = "2026-11-28T00:00:00.000Z";

fn entry(kind: Role, name: &str, active: &str) -> Entry {
    Entry {
        kind,
        name: name.into(),
        sessions: 1,
        messages: 2,
        memories: 3,
        sqlite_bytes: 4096,
        r2_bytes: 0,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        last_active_at: active.into(),
        reported_at: String::new(),
    }
}

fn report(db: &SqliteDb, body: Json) -> session_agent_api::Response {
    api::shard(db, &Request::new(Method::Post, "/report").json(&body), NOW)
}

fn list(db: &SqliteDb, query: &str) -> Json {
    let r = api::shard(db, &Request::new(Method::Get, &format!("/list?{query}")), NOW);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

fn names(v: &Json) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| format!("{}:{}", i["kind"].as_str().unwrap(), i["name"].as_str().unwrap()))
        .collect()
}

#[test]
fn a_shard_upserts_removes_and_lists_in_name_order() {
    let db = db();
    let a = Report::Holds(entry(Role::Agent, "bob", "2026-02-01T00:00:00.000Z")).to_json();
    let b = Report::Holds(entry(Role::Agent, "alice", "2026-03-01T00:00:00.000Z")).to_json();
    let c = Report::Holds(entry(Role::Space, "alice", "2026-04-01T00:00:00.000Z")).to_json();
    assert_eq!(report(&db, json!({"reports": [a, b, c]})).status, 204);
    assert_eq!(names(&list(&db, "")), ["agent:alice", "space:alice", "agent:bob"]);
    let first = &list(&db, "")["items"][0];
    assert_eq!(first["reportedAt"], NOW);
    assert_eq!((first["sessions"].as_i64(), first["sqliteBytes"].as_i64()), (Some(1), Some(4096)));
    // A new report replaces the row.
    let mut newer = entry(Role::Agent, "bob", "2026-05-01T00:00:00.000Z");
    newer.messages = 40;
    assert_eq!(report(&db, json!({"reports": [Report::Holds(newer).to_json()]})).status, 204);
    let all = list(&db, "");
    assert_eq!(all["items"][2]["messages"], 40);
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    // A removal deletes it.
    let gone = Report::Removed { kind: Role::Space, name: "alice".into() }.to_json();
    assert_eq!(report(&db, json!({"reports": [gone]})).status, 204);
    assert_eq!(names(&list(&db, "")), ["agent:alice", "agent:bob"]);
}

#[test]
fn a_shard_filters_by_kind_prefix_and_activity_and_pages_after_a_cursor() {
    let db = db();
    let reports: Vec<Json> = [
        (Role::Agent, "team-a", "2026-01-10T00:00:00.000Z"),
        (Role::Agent, "team-b", "2026-02-10T00:00:00.000Z"),
        (Role::Space, "team-b", "2026-03-10T00:00:00.000Z"),
        (Role::Agent, "other", "2026-04-10T00:00:00.000Z"),
        (Role::Agent, "team_", "2026-04-10T00:00:00.000Z"),
        (Role::Agent, "teamx", "2026-04-10T00:00:00.000Z"),
    ]
    .iter()
    .map(|(k, n, t)| Report::Holds(entry(*k, n, t)).to_json())
    .collect();
    assert_eq!(report(&db, json!({ "reports": reports })).status, 204);
    assert_eq!(names(&list(&db, "kind=space")), ["space:team-b"]);
    assert_eq!(names(&list(&db, "prefix=team-")), ["agent:team-a", "agent:team-b", "space:team-b"]);
    // A prefix is a prefix, not a LIKE pattern.
    assert_eq!(names(&list(&db, "prefix=team_")), ["agent:team_"]);
    assert_eq!(
        names(&list(&db, "activeAfter=2026-02-10T00:00:00.000Z&activeBefore=2026-04-01T00:00:00.000Z")),
        ["agent:team-b", "space:team-b"]
    );
    assert_eq!(names(&list(&db, "limit=2")), ["agent:other", "agent:team-a"]);
    assert_eq!(names(&list(&db, "cursor=agent:team-b")), ["space:team-b", "agent:team_", "agent:teamx"]);
    assert_eq!(names(&list(&db, "cursor=space:team-b&limit=1")), ["agent:team_"]);
}

#[test]
fn hostile_parameters_and_reports_are_400_and_change_nothing() {
    let db = db();
    let ok = Report::Holds(entry(Role::Agent, "a", NOW)).to_json();
    assert_eq!(report(&db, json!({"reports": [ok.clone()]})).status, 204);
    for bad in [
        json!({}),
        json!({"reports": "x"}),
        json!({"reports": [ok.clone(), {"kind": "robot", "name": "b"}]}),
        json!({"reports": [{"kind": "agent", "name": "../x", "removed": true}]}),
        json!({"reports": [{"kind": "agent", "name": "b", "sessions": -1}]}),
        json!({"reports": [{"kind": "agent", "name": "b", "sessions": 1, "messages": 1, "memories": 1,
            "sqliteBytes": 1, "r2Bytes": 0, "createdAt": "yesterday", "lastActiveAt": NOW}]}),
        json!({"reports": vec![ok.clone(); shard::MAX_REPORTS + 1]}),
    ] {
        let r = report(&db, bad.clone());
        assert_eq!((r.status, code(&r)), (400, "invalid_request".into()), "{bad}");
    }
    assert_eq!(names(&list(&db, "")), ["agent:a"], "nothing changed");
    for q in [
        "kind=robot",
        "limit=0",
        "limit=abc",
        "activeAfter=yesterday",
        "activeBefore=2026-13-01",
        "cursor=nope",
        "cursor=robot:a",
        "cursor=agent:",
        "prefix=%00",
        "prefix=a%20b",
        "cursor=%FF",
        "cursor=",
        "prefix=",
        "kind=",
        "activeAfter=",
    ] {
        let r = api::shard(&db, &Request::new(Method::Get, &format!("/list?{q}")), NOW);
        assert_eq!((r.status, code(&r)), (400, "invalid_request".into()), "{q}");
        assert!(api::listing(q).is_err(), "{q}");
    }
    for q in [&format!("limit={}", MAX_LIMIT + 1), "limit=-5", "limit=1e3"] {
        assert!(api::listing(q).is_err(), "{q}");
    }
    assert!(api::usage_listing("from=2026-02-01T00:00:00.000Z&to=2026-01-01T00:00:00.000Z", NOW).is_err());
    assert!(api::usage_listing("from=soon", NOW).is_err());
    assert!(api::usage_listing("to=", NOW).is_err());
    assert!(api::usage_listing("from=2026-11-01", NOW).is_ok(), "a date is its midnight");
    assert!(api::export_listing("cursor=x").is_err());
    let r = api::shard(&db, &Request::new(Method::Delete, "/list"), NOW);
    assert_eq!(r.status, 404);
}

#[test]
fn shard_pages_merge_into_the_directorys_pages_exactly_once() {
    // 40 entries over the real shards; paged through 7 at a time from the shards' own pages.
    let shards: Vec<SqliteDb> = (0..DIRECTORY_SHARDS).map(|_| db()).collect();
    let mut want = Vec::new();
    for i in 0..40 {
        let kind = if i % 5 == 0 { Role::Space } else { Role::Agent };
        let name = format!("n{:02}", i / 2);
        let e = entry(kind, &name, NOW);
        let s = &shards[shard_of(kind, &name) as usize];
        shard::take(s, &[Report::Holds(e)], NOW).unwrap();
        want.push((name, kind));
    }
    want.sort();
    want.dedup();
    assert!(
        shards
            .iter()
            .filter(|s| !shard::list(*s, &Listing { limit: 1, ..Listing::default() }).unwrap().is_empty())
            .count()
            > 4,
        "spread over shards"
    );
    let mut got = Vec::new();
    let mut listing = api::listing("limit=7").unwrap();
    loop {
        let query = listing.shard_query();
        let pages: Vec<_> = shards.iter().map(|s| Ok(list(s, &query))).collect();
        let page = api::page(&listing, pages).unwrap();
        assert!(page.items.len() <= 7);
        got.extend(page.items.iter().map(|e| (e.name.clone(), e.kind)));
        match page.next {
            Some(next) => listing.after = Some(next),
            None => break,
        }
    }
    assert_eq!(got, want);
    // The merge alone: a shard failure fails the page.
    let failed = api::page(&listing, vec![Err(session_agent_core::error::Error::internal("down"))]);
    assert!(failed.is_err());
}

#[test]
fn merge_sorts_by_name_then_kind_and_says_when_more_follow() {
    let e = |k, n: &str| entry(k, n, NOW);
    let p =
        merge(vec![vec![e(Role::Agent, "b"), e(Role::Space, "c")], vec![e(Role::Space, "a"), e(Role::Agent, "c")]], 3);
    let got: Vec<String> = p.items.iter().map(|e| After::of(e).text()).collect();
    assert_eq!(got, ["space:a", "agent:b", "agent:c"]);
    assert_eq!(p.next.map(|a| a.text()), Some("agent:c".to_owned()));
    let p = merge(vec![vec![e(Role::Agent, "b")]], 3);
    assert_eq!(p.next, None);
    assert_eq!(p.to_json()["nextCursor"], Json::Null);
    assert_eq!(After::parse("space:a:b").unwrap(), After { name: "a:b".into(), kind: Role::Space });
}

#[test]
fn shards_are_a_stable_hash_of_kind_and_name() {
    assert_eq!(shard_of(Role::Agent, "alice"), shard_of(Role::Agent, "alice"));
    // FNV-1a of "agent:alice", fixed: a change would strand every row.
    let fnv = "agent:alice".bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    assert_eq!(shard_of(Role::Agent, "alice"), fnv % DIRECTORY_SHARDS);
    let used: std::collections::BTreeSet<u32> =
        (0..200).map(|i| shard_of(Role::Agent, &format!("agent-{i}"))).collect();
    assert_eq!(used.len() as u32, DIRECTORY_SHARDS, "200 names reach every shard");
}

// invariant 46 (docs/ARCHITECTURE.md)
#[test]
fn an_objects_report_is_marked_by_writes_and_cleared_only_by_one_that_saw_them_all() {
    let api = Api::new();
    let sql = &*api.db;
    assert_eq!(report::due(sql).unwrap(), None);
    // Nothing held: the report is a removal.
    assert_eq!(
        report::stats(sql, Role::Agent, "alice", 100, 1_000).unwrap(),
        Report::Removed { kind: Role::Agent, name: "alice".into() }
    );
    api.append("s1", "m1", None, "hello");
    assert_eq!(report::mark(sql, 10_000, 2_000, Some("alice")).unwrap(), 12_000);
    // A burst: the first write's due time stays.
    assert_eq!(report::mark(sql, 11_000, 2_000, None).unwrap(), 12_000);
    assert_eq!(report::due(sql).unwrap(), Some(12_000));
    assert_eq!(report::pending(sql, 11_999).unwrap(), None);
    let generation = report::pending(sql, 12_000).unwrap().expect("due");
    let Report::Holds(e) = report::stats(sql, Role::Agent, "alice", 8192, 12_000).unwrap() else {
        panic!("holds data")
    };
    assert_eq!((e.sessions, e.messages, e.memories, e.sqlite_bytes), (1, 1, 0, 8192));
    assert_eq!(e.last_active_at, "1970-01-01T00:00:11.000Z");
    // A write while the report is on its way: the report is due again after it.
    report::mark(sql, 12_500, 2_000, None).unwrap();
    report::sent(sql, &Report::Holds(e.clone()), generation, 13_000, 2_000).unwrap();
    assert_eq!(report::due(sql).unwrap(), Some(15_000));
    let generation = report::pending(sql, 15_000).unwrap().expect("due again");
    report::sent(sql, &Report::Holds(e.clone()), generation, 15_000, 2_000).unwrap();
    assert_eq!(report::due(sql).unwrap(), None, "clean");
    // createdAt is the first report's from now on.
    // The name the writes kept wins over one the runtime did not tell (an alarm after a restart).
    let Report::Holds(again) = report::stats(sql, Role::Space, "0123abcd", 1, 20_000).unwrap() else { panic!() };
    assert_eq!((again.created_at, again.kind, again.name.as_str()), (e.created_at.clone(), Role::Space, "alice"));
    // A name told without a write (a socket's handshake) is kept, and changes nothing else.
    report::name(sql, "alice-renamed").unwrap();
    report::name(sql, "alice-renamed").unwrap();
    assert_eq!(report::due(sql).unwrap(), None);
    let Report::Holds(named) = report::stats(sql, Role::Agent, "0123abcd", 1, 20_000).unwrap() else { panic!() };
    assert_eq!(named.name, "alice-renamed");
    // A failure is retried later; forgetting clears it.
    report::mark(sql, 30_000, 2_000, None).unwrap();
    report::failed(sql, 32_000).unwrap();
    assert_eq!(report::due(sql).unwrap(), Some(32_000 + RETRY_MS));
    report::forget(sql).unwrap();
    assert_eq!(report::due(sql).unwrap(), None);
}

#[test]
fn an_erased_agent_reports_itself_removed() {
    let api = Api::new();
    api.append("s1", "m1", None, "hello");
    assert!(matches!(report::stats(&*api.db, Role::Agent, "alice", 1, 1).unwrap(), Report::Holds(_)));
    let r = api.send(Request::new(Method::Delete, "/").header("confirm", "erase"));
    assert_eq!(r.status, 204);
    assert!(matches!(report::stats(&*api.db, Role::Agent, "alice", 1, 1).unwrap(), Report::Removed { .. }));
}

#[test]
fn every_turn_writes_a_ledger_row_and_usage_sums_a_range() {
    let api = Api::new().with_model();
    let t0 = session_agent_core::time::iso_millis(api.now.get());
    api.model.reply(Ok(completion("One.")));
    assert_eq!(api.post("/sessions/s1/chat", json!({"message": msg("u1", "user", "hi")})).status, 201);
    api.model.reply(Ok(completion("Two.")));
    assert_eq!(api.post("/sessions/s2/chat", json!({"message": msg("u2", "user", "hi")})).status, 201);
    api.model.reply(Ok(completion("Three.")));
    assert_eq!(api.post("/sessions/s2/chat", json!({"message": msg("u3", "user", "again")})).status, 201);
    // A failed turn stores nothing and counts nothing.
    api.model.reply(Err(session_agent_core::error::Error::internal("down")));
    assert_ne!(api.post("/sessions/s2/chat", json!({"message": msg("u4", "user", "?")})).status, 201);
    assert_eq!(api.count("SELECT count(*) FROM usage_ledger"), 3);
    let u = api.get("/usage").body_json();
    assert_eq!(
        (u["turns"].as_i64(), u["inputTokens"].as_i64(), u["outputTokens"].as_i64()),
        (Some(3), Some(300), Some(60))
    );
    assert_eq!(u["from"], "1970-01-01T00:00:00.000Z");
    assert_eq!(u["bySession"][0]["sessionId"], "s2");
    assert_eq!(u["bySession"][0]["turns"], 2);
    assert_eq!(u["estimatedTurns"], 0);
    let at: Vec<String> = api
        .db
        .query("SELECT at FROM usage_ledger ORDER BY seq", &[])
        .unwrap()
        .iter()
        .map(|r| r.text(0).unwrap())
        .collect();
    assert!(at[0] >= t0);
    // [from, to): the first turn only, then the last two.
    let u = api.get(&format!("/usage?from={}&to={}", at[0], at[1])).body_json();
    assert_eq!(u["turns"], 1);
    let u = api.get(&format!("/usage?from={}", at[1])).body_json();
    assert_eq!((u["turns"].as_i64(), u["model"].as_str()), (Some(2), None));
    let row = api.db.query("SELECT model, estimated FROM usage_ledger LIMIT 1", &[]).unwrap();
    assert_eq!((row[0].text(0).unwrap(), row[0].int(1).unwrap()), ("test-model".to_owned(), 0));
    for q in ["from=yesterday", "to=", "to=2026-99-01", "from=2026-02-01T00:00:00.000Z&to=2026-01-01T00:00:00.000Z"] {
        let r = api.get(&format!("/usage?{q}"));
        assert_eq!((r.status, code(&r)), (400, "invalid_request".into()), "{q}");
    }
    // The ledger is the agent's data: an erase empties it.
    assert_eq!(api.send(Request::new(Method::Delete, "/").header("confirm", "erase")).status, 204);
    assert_eq!(api.get("/usage").body_json()["turns"], 0);
}

#[test]
fn export_lines_are_wrapped_with_their_agent_and_a_resume_cursor() {
    let line = br#"{"kind":"end","counts":{}}"#;
    let out = api::export_record("a\"b", line);
    let v: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(v, json!({"agent": "a\"b", "record": {"kind": "end", "counts": {}}}));
    assert_eq!(*out.last().unwrap(), b'\n');
    let c: Json = serde_json::from_slice(&api::export_cursor("bob")).unwrap();
    assert_eq!(c, json!({"cursor": "agent:bob"}));
    let l = api::export_listing("cursor=agent:bob&prefix=b").unwrap();
    assert_eq!((l.kind, l.after.map(|a| a.name)), (Some(Role::Agent), Some("bob".into())));
}
