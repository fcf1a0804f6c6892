//! Schema version 8 on real SQLite: migrating a version-7 database (paths walked by primary
//! key, the search index with its session column) and the recent window selected inside the
//! walk. (Reads kept between writes: `versions.rs`.)

use crate::support::{db_at, ids, Api};
use serde_json::json;
use session_agent_core::sql::{Sql, Value};
use session_agent_core::sqlite::SqliteDb;
use session_agent_core::store::{schema, search};

/// Inserts a message row and its index row the way version 7 wrote them.
fn v7_message(db: &SqliteDb, session: &str, id: &str, parent: Option<&str>, text: &str) {
    let content = json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}).to_string();
    let seq = db
        .query_row(
            "INSERT INTO messages (session_id, id, parent_id, role, bytes, created_at, content)
             VALUES (?, ?, ?, 'user', ?, '2026-01-01T00:00:00.000Z', ?) RETURNING seq",
            &[session.into(), id.into(), parent.into(), Value::Int(content.len() as i64), content.as_str().into()],
        )
        .unwrap()
        .unwrap()
        .int(0)
        .unwrap();
    db.execute("INSERT INTO messages_fts (rowid, content) VALUES (?, ?)", &[Value::Int(seq), text.into()]).unwrap();
}

#[test]
fn version_7_data_migrates_to_walks_by_primary_key_and_a_session_column() {
    let db = db_at(7);
    for (sid, now) in [("s", "2026-01-01T00:00:00.000Z"), ("a.b:c-2", "2026-01-01T00:00:01.000Z")] {
        db.execute(
            "INSERT INTO sessions (id, name, created_at, updated_at, touch_seq) VALUES (?, ?, ?, ?, 1)",
            &[sid.into(), sid.into(), now.into(), now.into()],
        )
        .unwrap();
    }
    v7_message(&db, "s", "a", None, "deploy the database");
    v7_message(&db, "s", "b", Some("a"), "lunch at noon");
    v7_message(&db, "s", "c", Some("b"), "deploy again");
    v7_message(&db, "s", "c2", Some("b"), "a sibling branch about the database");
    // A child whose parent was deleted before the orphan rule: its parent is not in the session.
    v7_message(&db, "s", "orphan", Some("gone"), "deploy from an orphan");
    v7_message(&db, "a.b:c-2", "a", None, "deploy the database elsewhere");
    v7_message(&db, "a.b:c-2", "b", Some("a"), "more");

    assert_eq!(schema::migrate(&db, "t").unwrap(), crate::versions::after(7));
    let parents: Vec<(String, String, Option<i64>, Option<i64>)> = db
        .query(
            "SELECT m.session_id, m.id, m.parent_seq, p.seq FROM messages m
             LEFT JOIN messages p ON p.session_id = m.session_id AND p.id = m.parent_id ORDER BY m.seq",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| {
            let int = |i: usize| match r.0[i] {
                Value::Int(v) => Some(v),
                _ => None,
            };
            (r.text(0).unwrap(), r.text(1).unwrap(), int(2), int(3))
        })
        .collect();
    for (sid, id, parent_seq, by_id) in &parents {
        assert_eq!(parent_seq, by_id, "{sid}/{id}: parent_seq is the parent found by id");
    }
    assert_eq!(parents.iter().filter(|p| p.2.is_none()).count(), 3, "two roots and the orphan");

    // The migrated data reads and searches as before, and takes writes.
    let api = Api::with_db(db);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=c"), ["a", "b", "c"]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=c2"), ["a", "b", "c2"]);
    assert_eq!(api.history_ids("/sessions/s/history?leaf=orphan"), ["orphan"]);
    let search = |path: &str| {
        let mut got = ids(&api.get(path).body_json()["results"]);
        got.sort();
        got
    };
    assert_eq!(search("/sessions/s/search?q=deploy"), ["a", "c", "orphan"]);
    assert_eq!(search("/sessions/a.b:c-2/search?q=deploy"), ["a"]);
    assert_eq!(search("/search?q=database").len(), 3);
    api.append("s", "d", Some(Some("c")), "deploy once more");
    assert_eq!(api.history_ids("/sessions/s/history"), ["a", "b", "c", "d"]);
    assert_eq!(search("/sessions/s/search?q=deploy"), ["a", "c", "d", "orphan"]);
    // An id appended later under the orphan's missing parent does not adopt it.
    api.append("s", "gone", Some(None), "late");
    assert_eq!(api.history_ids("/sessions/s/history?leaf=orphan"), ["orphan"]);
}

#[test]
fn the_session_token_is_sqlites_hex() {
    let db = crate::support::db();
    for sid in ["s", "a.b:c-2", "ü", "日本"] {
        let sql_hex = db.query_row("SELECT 'x' || hex(?)", &[sid.into()]).unwrap().unwrap().text(0).unwrap();
        assert_eq!(search::session_token(sid), sql_hex, "{sid}");
    }
}

#[test]
fn in_session_search_ranks_only_the_session_and_never_matches_the_session_column() {
    let api = Api::new();
    for s in 0..5 {
        for i in 0..20 {
            let text = if i % 4 == 0 { "deploy the database" } else { "nothing here" };
            api.append(&format!("s{s}"), &format!("m{i}"), None, text);
        }
    }
    let r = api.get("/sessions/s3/search?q=deploy&limit=100").body_json();
    assert_eq!(r["results"].as_array().unwrap().len(), 5);
    // The words of a session's token are not words of its messages.
    let token = search::session_token("s3");
    for q in [token.as_str(), &token.to_lowercase()] {
        assert_eq!(api.get(&format!("/sessions/s3/search?q={q}")).body_json()["results"], json!([]));
        assert_eq!(api.get(&format!("/search?q={q}")).body_json()["results"], json!([]));
    }
    // Across sessions: every session's matches.
    let r = api.get("/search?q=deploy&limit=100").body_json();
    assert_eq!(r["results"].as_array().unwrap().len(), 25);
    // The longest session id makes a 257-character token, kept whole.
    let long = format!("{}.:-", "L".repeat(125));
    api.append(&long, "l0", None, "deploy far away");
    let r = api.get(&format!("/sessions/{long}/search?q=deploy")).body_json();
    assert_eq!(ids(&r["results"]), ["l0"]);
    // A fork indexes its copies under its own session.
    let fork = api.post("/sessions/s3/fork", json!({"atMessageId": "m19"}));
    assert_eq!(fork.status, 201, "{}", String::from_utf8_lossy(&fork.body));
    let f = fork.body_json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        api.get(&format!("/sessions/{f}/search?q=deploy&limit=100")).body_json()["results"].as_array().unwrap().len(),
        5
    );
}

/// The window as the reference states it: from the leaf up while fewer than `min` messages are
/// in, or the next one still fits the budget.
fn reference_window(sizes: &[i64], max_bytes: i64, min_messages: i64) -> usize {
    let min_recent = min_messages.max(1) as usize;
    let len = sizes.len();
    let mut start = len - 1;
    let mut used = sizes[start];
    while start > 0 && (len - start < min_recent || used + sizes[start - 1] <= max_bytes) {
        start -= 1;
        used += sizes[start];
    }
    start
}

#[test]
fn the_recent_window_selected_by_the_walk_is_the_reference_window() {
    let api = Api::new();
    let mut seed = 7u64;
    let mut rnd = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut sizes = Vec::new();
    for i in 0..60 {
        let text = "x".repeat(rnd(400) as usize);
        api.append("s", &format!("m{i}"), None, &text);
        sizes.push(api.get(&format!("/sessions/s/messages/m{i}")).body.len() as i64);
    }
    // A branch off the path does not count.
    api.append("s", "side", Some(Some("m10")), "side");
    api.append("s", "m60", Some(Some("m59")), "back on the path");
    sizes.push(api.get("/sessions/s/messages/m60").body.len() as i64);
    let total: i64 = sizes.iter().sum();
    for _ in 0..200 {
        let max = rnd(total as u64 + 500) as i64;
        let min = rnd(70) as i64;
        let r = api.get(&format!("/sessions/s/history/recent?maxBytes={max}&minMessages={}", min.max(1))).body_json();
        let start = reference_window(&sizes, max, min);
        let want: Vec<String> = (start..sizes.len()).map(|i| format!("m{i}")).collect();
        assert_eq!(ids(&r["messages"]), want, "maxBytes {max}, minMessages {min}");
        assert_eq!(r["truncated"], json!(start > 0));
        assert_eq!(r["totalContentBytes"], json!(total));
    }
}
