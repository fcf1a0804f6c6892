//! Memory spaces through the DO API on real SQLite: three agents (`alice:planner` and
//! `alice:support` of the space `alice`, `bob:planner` of `bob`), each its own database, and
//! the spaces as Durable Objects of their own reached through `api::handle` in process: what one
//! agent's turn teaches is recalled by the other agent of its space and not by a third; a
//! correction through the second supersedes the first's fact; a space that cannot be reached
//! fails no turn; shared blocks keep concurrent appends and refuse a stale replace, and a
//! label's versions never repeat, across a delete, the bound on tombstones and an erase; the
//! admin's choice of space; the space's own routes and tokens; a space refuses `conversation`
//! memories (it has no sessions).

use session_agent_api::http::Method;
use std::rc::Rc;

use crate::support::{code, completion, db, db_at, import, msg, table_rows, Api, InProcess};
use serde_json::{json, Value as Json};
use session_agent_api::access::{Claims, CLAIMS_HEADER};
use session_agent_api::Request;
use session_agent_core::ids::Role;
use session_agent_core::llm::HttpResponse;
use session_agent_core::space::blocks::{self, Write, MAX_BLOCKS, MAX_TOMBSTONES};
use session_agent_core::sql::Sql;
use session_agent_core::store::schema;

fn config() -> Json {
    json!({
        "memory": {"space": true, "inject": {"limit": 5}},
        "context": [
            {"label": "profile", "kind": "writable", "scope": "space", "maxTokens": 200, "content": "Profile:"},
            {"label": "plan", "kind": "writable", "scope": "space"},
            {"label": "notes", "kind": "writable"}
        ]
    })
}

fn agent(name: &str, spaces: &Rc<InProcess>) -> Api {
    let mut api = Api::with_config(config()).with_model();
    api = api.named(name);
    api = api.with_spaces(spaces.clone());
    api
}

fn facts(list: Json) -> HttpResponse {
    completion(&json!({ "facts": list }).to_string())
}

fn decide(list: Json) -> HttpResponse {
    completion(&json!({ "memory": list }).to_string())
}

/// The memories that hold now in `api` (an agent or a space).
fn held(api: &Api) -> Vec<String> {
    let r = api.get("/memories");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["memories"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

/// The `<user-memory>` block of the `n`th model request of `api`, if it had one.
fn injected(api: &Api, n: usize) -> String {
    let req = api.model.requests.borrow()[n].clone();
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.starts_with("<user-memory>"))
        .unwrap_or_default()
        .to_owned()
}

struct World {
    spaces: Rc<InProcess>,
    a: Api,
    b: Api,
    c: Api,
}

fn world() -> World {
    let spaces = Rc::new(InProcess::default());
    for s in ["alice", "bob"] {
        spaces.space(s, config());
    }
    World {
        a: agent("alice:planner", &spaces),
        b: agent("alice:support", &spaces),
        c: agent("bob:planner", &spaces),
        spaces,
    }
}

#[test]
fn a_fact_told_to_one_agent_is_recalled_by_the_other_of_its_space_only() {
    let w = world();
    let alice = w.spaces.space("alice", config());
    // Agent A's turn; its extraction runs in the space (the space's model distills it).
    w.a.model.reply(Ok(completion("Noted.")));
    alice
        .model
        .reply(Ok(facts(json!([{"fact": "The user is allergic to peanuts.", "score": 0.95, "tags": ["food"]}]))));
    let r = w.a.post("/sessions/s1/chat", json!({"message": msg("u1", "user", "I am allergic to peanuts.")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(held(&alice), ["The user is allergic to peanuts."]);
    let m = alice.get("/memories").body_json()["memories"][0].clone();
    assert_eq!(m["metadata"], json!({"agent": "alice:planner"}), "tagged with the agent it came from");
    assert_eq!(m["source"]["sessionId"], "s1");
    assert_eq!(m["category"], "core", "extraction into a space stores no conversation memory");
    assert_eq!(alice.count("SELECT count(*) FROM sessions"), 0, "a space has no sessions");
    assert!(held(&w.a).is_empty(), "extraction went into the space, not the agent");
    assert_eq!(w.a.model.requests.borrow().len(), 1, "the agent made no extraction call of its own");
    // Agent B of the same space is given it; agent C of another space is not.
    w.b.model.reply(Ok(completion("No peanuts then.")));
    alice.model.reply(Ok(facts(json!([]))));
    let r =
        w.b.post("/sessions/t1/chat", json!({"message": msg("v1", "user", "Any peanuts allergy I should know of?")}));
    assert_eq!(r.status, 201);
    let block = injected(&w.b, 0);
    assert!(block.contains("- The user is allergic to peanuts."), "{block}");
    assert_eq!(r.body_json()["messages"][0]["metadata"]["memories"], json!([m["id"]]));
    w.c.model.reply(Ok(completion("Hm?")));
    w.spaces.space("bob", config()).model.reply(Ok(facts(json!([]))));
    w.c.post("/sessions/x1/chat", json!({"message": msg("w1", "user", "Any peanuts allergy I should know of?")}));
    assert_eq!(injected(&w.c, 0), "", "another space's fact never reaches agent C");
    // The model's memory_recall reads the space too (B's own memories are empty).
    w.b.model.reply(Ok(crate::support::tool_calls(&[("t1", "memory_recall", json!({"query": "peanuts"}))])));
    w.b.model.reply(Ok(completion("Yes.")));
    alice.model.reply(Ok(facts(json!([]))));
    w.b.post("/sessions/t1/chat", json!({"message": msg("v2", "user", "check my allergies")}));
    let reqs = w.b.model.requests.borrow();
    let tool_msg =
        reqs.last().unwrap()["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned();
    assert!(tool_msg.unwrap()["content"].as_str().unwrap().contains("allergic to peanuts"));
}

#[test]
fn a_correction_through_the_second_agent_supersedes_the_first() {
    let w = world();
    let alice = w.spaces.space("alice", config());
    w.a.model.reply(Ok(completion("Paris!")));
    alice.model.reply(Ok(facts(json!([{"fact": "The user lives in Paris.", "score": 0.9}]))));
    w.a.post("/sessions/s1/chat", json!({"message": msg("u1", "user", "I live in Paris.")}));
    let paris = alice.get("/memories").body_json()["memories"][0]["id"].as_str().unwrap().to_owned();
    // Through B: the space shows its model A's fact (a core memory of another agent's session)
    // and applies the update.
    w.b.model.reply(Ok(completion("Berlin, nice.")));
    alice.model.reply(Ok(facts(json!([{"fact": "The user moved to Berlin.", "score": 0.95}]))));
    alice.model.reply(Ok(decide(json!([{"id": paris, "text": "The user lives in Berlin.", "event": "UPDATE"}]))));
    w.b.post("/sessions/t1/chat", json!({"message": msg("v1", "user", "I moved from Paris to Berlin.")}));
    assert_eq!(held(&alice), ["The user lives in Berlin."]);
    let old = alice.get(&format!("/memories/{paris}")).body_json();
    assert!(old["supersededBy"].is_string() && old["invalidAt"].is_string(), "{old}");
    let berlin = alice.get("/memories").body_json()["memories"][0].clone();
    assert_eq!(berlin["metadata"]["agent"], "alice:support");
    // A's next turn is given the correction, not the old fact.
    w.a.model.reply(Ok(completion("Berlin.")));
    alice.model.reply(Ok(facts(json!([]))));
    w.a.post("/sessions/s1/chat", json!({"message": msg("u2", "user", "Where do I live, Paris or Berlin?")}));
    let block = injected(&w.a, 1);
    assert!(block.contains("Berlin") && !block.contains("Paris."), "{block}");
}

// invariant 44 (docs/ARCHITECTURE.md)
#[test]
fn a_space_that_cannot_be_reached_fails_no_turn() {
    let w = world();
    w.a.post("/memories", json!({"content": "The user likes tea.", "score": 0.9}));
    w.spaces.down.set(true);
    w.a.model.reply(Ok(completion("Tea it is.")));
    let r = w.a.post("/sessions/s1/chat", json!({"message": msg("u1", "user", "What tea do I like?")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert!(injected(&w.a, 0).contains("The user likes tea."), "its own memories still inject");
    let frames = w.a.events.take("s1");
    let space = frames.iter().find(|f| f["type"] == "space").expect("a space frame");
    assert_eq!((space["space"].as_str(), space["status"].as_str()), (Some("alice"), Some("unreachable")));
    let warnings = w.a.events.warnings.borrow().join("\n");
    assert!(warnings.contains("memory space alice could not be reached"), "{warnings}");
    assert!(warnings.contains("memory extract"), "the extraction after it is logged too: {warnings}");
    // The prompt still renders: the shared block shows its configured text.
    let prompt = w.a.get("/sessions/s1/prompt");
    assert_eq!(prompt.status, 200);
    // A read of the shared block itself says why it cannot answer.
    let r = w.a.get("/sessions/s1/context/profile");
    assert_eq!((r.status, r.body_json()["error"]["code"].as_str()), (503, Some("space_unavailable")));
}

#[test]
fn shared_blocks_keep_both_appends_and_refuse_a_stale_replace() {
    let w = world();
    let alice = w.spaces.space("alice", config());
    // Both agents read the block: the configured text, version 0.
    let r = w.a.get("/sessions/s1/context/profile").body_json();
    assert_eq!((r["content"].as_str(), r["version"].as_i64()), (Some("Profile:"), Some(0)));
    w.b.get("/sessions/t1/context/profile");
    // Two appends (one each): both kept, in order, on top of the configured text.
    let a = w.a.post("/sessions/s1/context/profile/append", json!({"content": "- vegetarian"}));
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let b = w.b.post("/sessions/t1/context/profile/append", json!({"content": "- likes jazz"}));
    assert_eq!(b.body_json()["content"], "Profile:\n- vegetarian\n- likes jazz");
    assert_eq!(b.body_json()["version"], 2);
    let shared = alice.get("/blocks/profile").body_json();
    assert_eq!((shared["version"].as_i64(), shared["updatedBy"].as_str()), (Some(2), Some("alice:support")));
    // A replace naming the version read first: A read version 1 (its append), B wrote since.
    let r = w.a.put("/sessions/s1/context/profile", json!({"content": "Profile: vegan", "version": 1}));
    assert_eq!((r.status, r.body_json()["error"]["code"].as_str()), (409, Some("version_conflict")));
    assert_eq!(alice.get("/blocks/profile").body_json()["content"], "Profile:\n- vegetarian\n- likes jazz");
    // B's first turn freezes its prompt with the block at version 2.
    w.b.model.reply(Ok(completion("Hello.")));
    alice.model.reply(Ok(facts(json!([]))));
    w.b.post("/sessions/t1/chat", json!({"message": msg("v0", "user", "Hi.")}));
    assert!(w.b.model.requests.borrow()[0]["messages"][0]["content"].as_str().unwrap().contains("- likes jazz"));
    let r = w.a.put("/sessions/s1/context/profile", json!({"content": "Profile: vegan", "version": 2}));
    assert_eq!((r.status, r.body_json()["version"].as_i64()), (200, Some(3)));
    // The model's replace carries the version its session last read: B's is stale now.
    w.b.model.reply(Ok(crate::support::tool_calls(&[(
        "c1",
        "set_context",
        json!({"label": "profile", "content": "Profile: omnivore"}),
    )])));
    w.b.model.reply(Ok(completion("Updated.")));
    w.spaces.space("alice", config()).model.reply(Ok(facts(json!([]))));
    w.b.post("/sessions/t1/chat", json!({"message": msg("v1", "user", "I eat everything now.")}));
    let reqs = w.b.model.requests.borrow();
    let out = reqs[2]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap()["content"].clone();
    let out = out.as_str().unwrap();
    assert!(out.contains("changed since version 2") && out.contains("Profile: vegan"), "{out}");
    assert_eq!(alice.get("/blocks/profile").body_json()["content"], "Profile: vegan");
    drop(reqs);
    // Over the block's budget: 422, nothing written. A version on a per-session block: 400.
    let big = "word ".repeat(400);
    let r = w.a.post("/sessions/s1/context/profile/append", json!({"content": big}));
    assert_eq!(r.status, 422);
    assert_eq!(alice.get("/blocks/profile").body_json()["version"], 3);
    assert_eq!(w.a.put("/sessions/s1/context/notes", json!({"content": "x", "version": 1})).status, 400);
    assert_eq!(w.a.put("/sessions/s1/context/profile", json!({"content": "x", "version": -1})).status, 400);
}

// invariant 44 (docs/ARCHITECTURE.md)
#[test]
fn a_replace_naming_a_version_read_before_a_delete_is_refused() {
    let w = world();
    let alice = w.spaces.space("alice", config());
    let code = |r: &session_agent_api::Response| r.body_json()["error"]["code"].as_str().map(str::to_owned);
    // B writes the plan (version 1); A reads version 1.
    let r = w.b.put("/sessions/t1/context/plan", json!({"content": "B: fly on Monday", "version": 0}));
    assert_eq!((r.status, r.body_json()["version"].as_i64()), (200, Some(1)));
    assert_eq!(w.a.get("/sessions/s1/context/plan").body_json()["version"], 1);
    // The block is deleted: the delete counts a version; the label holds no text, lists no more.
    assert_eq!(alice.delete("/blocks/plan").status, 204);
    let gone = alice.get("/blocks/plan").body_json();
    assert_eq!(gone, json!({"label": "plan", "content": "", "version": 2, "updatedAt": null, "updatedBy": null}));
    assert!(alice.get("/blocks").body_json()["blocks"].as_array().unwrap().iter().all(|b| b["label"] != "plan"));
    assert_eq!(alice.delete("/blocks/plan").status, 404, "nothing left to delete");
    assert_eq!(alice.get("/blocks/plan").body_json()["version"], 2, "a refused delete counts nothing");
    // B writes it again: the version after the delete's, never 1 again.
    let r = w.b.post("/sessions/t1/context/plan/append", json!({"content": "B: fly on Tuesday"}));
    assert_eq!(
        (r.body_json()["content"].as_str(), r.body_json()["version"].as_i64()),
        (Some("B: fly on Tuesday"), Some(3))
    );
    // A's replace naming the version it read before the delete: 409, B's text stays.
    let r = w.a.put("/sessions/s1/context/plan", json!({"content": "A: stay home", "version": 1}));
    assert_eq!((r.status, code(&r).as_deref()), (409, Some("version_conflict")));
    // The same through the space's own route, and naming the delete's version.
    for stale in [0, 1, 2] {
        let r = alice.put("/blocks/plan", json!({"content": "A: stay home", "version": stale}));
        assert_eq!((r.status, code(&r).as_deref()), (409, Some("version_conflict")), "version {stale}");
    }
    assert_eq!(alice.get("/blocks/plan").body_json()["content"], "B: fly on Tuesday");
    // The current version goes through.
    let r = alice.put("/blocks/plan", json!({"content": "A: fly on Wednesday", "version": 3}));
    assert_eq!((r.status, r.body_json()["version"].as_i64()), (200, Some(4)));
    // A deleted block shows the agent its configured text again, at the delete's version, and
    // an append starts from that text.
    assert_eq!(alice.delete("/blocks/profile").status, 404, "never written");
    w.a.post("/sessions/s1/context/profile/append", json!({"content": "- vegan"}));
    assert_eq!(alice.delete("/blocks/profile").status, 204);
    let r = w.a.get("/sessions/s1/context/profile").body_json();
    assert_eq!((r["content"].as_str(), r["version"].as_i64()), (Some("Profile:"), Some(2)));
    let r = w.b.post("/sessions/t1/context/profile/append", json!({"content": "- jazz"})).body_json();
    assert_eq!((r["content"].as_str(), r["version"].as_i64()), (Some("Profile:\n- jazz"), Some(3)));
    // Erasing the space counts a version past the highest it gave: a label goes on from there.
    let r = alice.send(Request::new(Method::Delete, "/").header("confirm", "erase"));
    assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
    let kept = ["schema_version", "revocation", "embedding_model", "sqlite_sequence", "space_block_floor"];
    let tables = alice.db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT GLOB '*_fts_*'", &[]);
    for t in tables.unwrap().iter().map(|r| r.text(0).unwrap()).filter(|t| !kept.contains(&t.as_str())) {
        assert_eq!(
            alice.count(&format!("SELECT count(*) FROM \"{t}\"")),
            0,
            "table {t} still has rows after the erase"
        );
    }
    assert_eq!(alice.get("/blocks/plan").body_json()["version"], 5);
    assert_eq!(alice.get("/blocks/profile").body_json()["version"], 5, "every label starts from the floor");
    for read in [1, 4] {
        let r = alice.put("/blocks/plan", json!({"content": "again", "version": read}));
        assert_eq!(r.status, 409, "version {read}, read before the erase");
    }
    assert_eq!(alice.put("/blocks/plan", json!({"content": "again", "version": 5})).body_json()["version"], 6);
}

// invariant 44 (docs/ARCHITECTURE.md)
#[test]
fn tombstones_are_bounded_and_a_dropped_label_never_repeats_a_version() {
    let db = db();
    let w = |content| Write { content, by: None, max_tokens: None, initial: None };
    let (tombstones, floor) =
        ("SELECT count(*) FROM space_blocks WHERE deleted_at IS NOT NULL", "SELECT version FROM space_block_floor");
    let count = |q: &str| db.query_row(q, &[]).unwrap().map_or(0, |r| r.int(0).unwrap());
    // The first label is written twice and deleted (version 3); then as many as the bound.
    blocks::append(&db, "first", &w("a"), "2026-01-01T00:00:00.000Z").unwrap();
    blocks::append(&db, "first", &w("b"), "2026-01-01T00:00:00.000Z").unwrap();
    assert!(blocks::delete(&db, "first", "2026-01-01T00:00:00.000Z").unwrap());
    for i in 0..MAX_TOMBSTONES {
        blocks::append(&db, &format!("l{i}"), &w("x"), "2026-01-02T00:00:00.000Z").unwrap();
        assert!(blocks::delete(&db, &format!("l{i}"), "2026-01-02T00:00:00.000Z").unwrap());
    }
    // The oldest went; the floor rose to its version, so it and every new label read from there.
    assert_eq!(count(tombstones), MAX_TOMBSTONES);
    assert_eq!(count(floor), 3);
    assert_eq!(blocks::get(&db, "first").unwrap().version, 3);
    assert_eq!(blocks::get(&db, "new").unwrap().version, 3);
    assert_eq!(blocks::get(&db, "l0").unwrap().version, 2, "a kept tombstone keeps its own version");
    let r = blocks::replace(&db, "first", 2, &w("stale"), "2026-01-03T00:00:00.000Z");
    assert_eq!(r.unwrap_err().kind, session_agent_core::error::ErrorKind::Conflict);
    assert_eq!(blocks::replace(&db, "first", 3, &w("c"), "2026-01-03T00:00:00.000Z").unwrap().version, 4);
    // Tombstones take no room in the list or the limit; a tombstone written again does.
    assert_eq!(blocks::list(&db).unwrap().len(), 1);
    for i in 1..MAX_BLOCKS {
        blocks::append(&db, &format!("live{i}"), &w("y"), "2026-01-03T00:00:00.000Z").unwrap();
    }
    let e = blocks::append(&db, "l5", &w("again"), "2026-01-03T00:00:00.000Z").unwrap_err();
    assert_eq!(e.kind, session_agent_core::error::ErrorKind::OverBudget);
    assert_eq!(blocks::get(&db, "l5").unwrap().version, 2, "refused: nothing written");
}

#[test]
fn shared_blocks_written_before_the_tombstones_migration_keep_their_versions() {
    let db = db_at(16);
    db.execute(
        "INSERT INTO space_blocks (label, content, version, updated_at, updated_by) VALUES ('plan', 'p', 7, 't', 'a')",
        &[],
    )
    .unwrap();
    schema::migrate(&db, "t").unwrap();
    let b = blocks::get(&db, "plan").unwrap();
    assert_eq!((b.content.as_str(), b.version, b.has_text()), ("p", 7, true));
    assert!(blocks::delete(&db, "plan", "t2").unwrap());
    assert_eq!(blocks::get(&db, "plan").unwrap().version, 8);
}

// invariant 44 (docs/ARCHITECTURE.md)
#[test]
fn a_space_refuses_conversation_memories_on_every_write_path() {
    let w = world();
    let alice = w.spaces.space("alice", config());
    let talk = json!({"content": "We talked about trains.", "category": "conversation", "sessionId": "s1"});
    let refused = |r: session_agent_api::Response, what: &str| {
        assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"), "{what}");
        let message = r.body_json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("no sessions") && message.contains("conversation"), "{what}: {message}");
        message
    };
    refused(alice.post("/memories", talk.clone()), "POST /memories");
    let mut consolidated = talk.clone();
    consolidated["consolidate"] = json!(true);
    refused(alice.post("/memories", consolidated), "POST /memories with consolidate");
    assert!(alice.model.requests.borrow().is_empty(), "refused before the model is asked");
    let batch = json!({"memories": [{"content": "The user likes trains."}, talk]});
    let message = refused(alice.post("/memories/batch", batch), "POST /memories/batch");
    assert!(message.starts_with("memories[1]: "), "{message}");
    // A core memory of an agent's session (as extraction stores) may not become one either.
    let core = alice.post("/memories", json!({"content": "The user likes buses.", "sessionId": "s1"}));
    assert_eq!(core.status, 201);
    let id = core.body_json()["id"].as_str().unwrap().to_owned();
    refused(alice.patch(&format!("/memories/{id}"), json!({"category": "conversation"})), "PATCH");
    // Nothing stored but the core memory, unchanged, and no session.
    assert_eq!(held(&alice), ["The user likes buses."]);
    assert_eq!(alice.get(&format!("/memories/{id}")).body_json()["category"], "core");
    assert_eq!(alice.count("SELECT count(*) FROM memory_versions"), 1);
    assert_eq!(alice.count("SELECT count(*) FROM sessions"), 0);
    // An agent keeps its own conversation memories, as before.
    let r = w.a.post(
        "/memories",
        json!({"content": "We talked about trains.", "category": "conversation", "sessionId": "s1"}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn the_admin_chooses_an_agents_space() {
    let spaces = Rc::new(InProcess::default());
    spaces.space("team", config());
    let plain = {
        let mut api = Api::with_config(json!({"memory": true})).with_model();
        api = api.named("solo");
        api = api.with_spaces(spaces.clone());
        api
    };
    assert_eq!(plain.get("/space").body_json(), json!({"space": null, "source": "none", "mode": "alongside"}));
    let r = plain.put("/space", json!({"space": "team"}));
    assert_eq!(r.body_json(), json!({"space": "team", "source": "chosen", "mode": "alongside"}));
    for bad in [json!({"space": ""}), json!({"space": "a/b"}), json!({"space": 3}), json!({"other": 1}), json!([])] {
        let r = plain.put("/space", bad.clone());
        assert_eq!(r.status, 400, "{bad}");
    }
    assert_eq!(plain.get("/space").body_json()["space"], "team", "a refused choice changed nothing");
    plain.model.reply(Ok(completion("ok")));
    spaces.space("team", config()).model.reply(Ok(facts(json!([{"fact": "The user is Sam.", "score": 0.9}]))));
    plain.post("/sessions/s/chat", json!({"message": msg("u1", "user", "I am Sam.")}));
    assert_eq!(held(&spaces.space("team", config())), ["The user is Sam."]);
    // null: none, whatever the rule says; DELETE: the rule again.
    let a = agent("alice:planner", &spaces);
    assert_eq!(a.get("/space").body_json()["source"], "rule");
    assert_eq!(a.put("/space", json!({"space": null})).body_json()["space"], Json::Null);
    assert_eq!(a.delete("/space").body_json(), json!({"space": "alice", "source": "rule", "mode": "alongside"}));
    // Only the admin: a scoped token of the agent is refused.
    let claims = Claims::issue(
        "alice:planner",
        Role::Agent,
        json!({"scope": "write", "ttlSeconds": 60}).as_object().unwrap(),
        a.now.get(),
    )
    .unwrap();
    let req = Request::new(Method::Get, "/space").header(CLAIMS_HEADER, &serde_json::to_string(&claims).unwrap());
    assert_eq!(a.send(req).status, 403);
}

// invariant 44 (docs/ARCHITECTURE.md)
#[test]
fn a_space_answers_its_own_routes_and_tokens_only() {
    let spaces = Rc::new(InProcess::default());
    let alice = spaces.space("alice", config());
    let r = alice.post("/memories", json!({"content": "The user is left-handed.", "metadata": {"agent": "x"}}));
    assert_eq!(r.status, 201);
    assert_eq!(alice.get("/memories/search?q=handed").body_json()["results"].as_array().unwrap().len(), 1);
    assert_eq!(alice.get("/memories?metadata.agent=x").body_json()["memories"].as_array().unwrap().len(), 1);
    // No sessions, no turns, no agent routes in a space.
    for (method, path) in [("GET", "/sessions"), ("POST", "/sessions/s/chat"), ("GET", "/space"), ("GET", "/schedules")]
    {
        let r = alice.send(Request::new(Method::parse(method), path).json(&json!({})));
        assert_eq!(r.status, 404, "{method} {path}");
    }
    let with = |claims: &Claims, method: &str, path: &str, body: Json| {
        let req = Request::new(Method::parse(method), path)
            .header(CLAIMS_HEADER, &serde_json::to_string(claims).unwrap())
            .json(&body);
        alice.send(req)
    };
    let now = alice.now.get();
    let issue = |name: &str, role: Role, scope: &str| {
        Claims::issue(name, role, json!({"scope": scope, "ttlSeconds": 60}).as_object().unwrap(), now + 10_000).unwrap()
    };
    // A token of the space opens it (a read token reads only); the link routes are the admin's.
    let read = issue("alice", Role::Space, "read");
    assert_eq!(with(&read, "GET", "/memories", json!({})).status, 200);
    assert_eq!(with(&read, "POST", "/memories", json!({"content": "x"})).status, 403);
    let write = issue("alice", Role::Space, "write");
    assert_eq!(with(&write, "PUT", "/blocks/profile", json!({"content": "x", "version": 0})).status, 200);
    assert_eq!(with(&write, "POST", "/link/extract", json!({})).status, 403);
    // An agent's token never opens a space, not even one of the same name; another space's
    // token neither.
    assert_eq!(with(&issue("alice", Role::Agent, "write"), "GET", "/memories", json!({})).status, 403);
    assert_eq!(with(&issue("bob", Role::Space, "write"), "GET", "/memories", json!({})).status, 403);
    // And a space's token never opens an agent.
    let a = agent("alice", &spaces);
    let req = Request::new(Method::Get, "/memories").header(CLAIMS_HEADER, &serde_json::to_string(&write).unwrap());
    assert_eq!(a.send(req).status, 403);
    // Tokens of a space name no sessions.
    let e = Claims::issue(
        "alice",
        Role::Space,
        json!({"scope": "read", "ttlSeconds": 60, "sessions": ["s"]}).as_object().unwrap(),
        now,
    );
    assert!(e.is_err());
    // Hostile writes change nothing.
    for (path, body) in [
        ("/blocks/profile", json!({"content": "y"})),
        ("/blocks/profile", json!({"content": "y", "version": "1"})),
        ("/blocks/profile", json!({"content": 5, "version": 1})),
        ("/blocks/profile", json!({"content": "y", "version": 1, "agent": "spoof"})),
        ("/blocks/bad%20label", json!({"content": "y", "version": 1})),
    ] {
        assert_eq!(alice.put(path, body.clone()).status, 400, "{path} {body}");
    }
    let before = alice.get("/blocks/profile").body_json();
    assert_eq!(before["content"], "x");
    assert_eq!(alice.post("/blocks/profile/append", json!({"content": "y", "initial": "z"})).status, 400);
    assert_eq!(alice.get("/blocks/profile").body_json(), before);
    assert_eq!(
        alice.post("/link/extract", json!({"agent": "a", "sessionId": "s", "exchange": {"nope": 1}})).status,
        400
    );
    // Erasing the space erases its memories and blocks.
    let r = alice.send(Request::new(Method::Delete, "/").header("confirm", "erase"));
    assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
    assert!(held(&alice).is_empty());
    let gone = alice.get("/blocks/profile").body_json();
    assert_eq!((gone["content"].as_str(), gone["updatedAt"].as_str()), (Some(""), None));
    assert!(alice.get("/blocks").body_json()["blocks"].as_array().unwrap().is_empty());
}

/// Each operation an agent asks of its space becomes a request of a route of the space's table,
/// with a method that route has: the core names no path, so this is where a renamed route shows
/// (the `match` lists every operation: a new one does not compile until it is here).
#[test]
fn every_space_operation_is_a_route_of_the_space_table() {
    use session_agent_core::config::category::Category;
    use session_agent_core::space::Operation;
    let (label, content, agent) = ("team notes/1".to_owned(), "x".to_owned(), "alice:planner".to_owned());
    let ops = [
        Operation::Recall {
            text: "peanuts & more".into(),
            limit: 5,
            categories: vec![Category::Core],
            tags: vec!["team".into()],
        },
        Operation::ReadBlock { label: label.clone() },
        Operation::AppendBlock {
            label: label.clone(),
            content: content.clone(),
            agent: agent.clone(),
            max_tokens: Some(10),
            initial: None,
        },
        Operation::ReplaceBlock { label: label.clone(), content, version: 3, agent: agent.clone(), max_tokens: None },
        Operation::Extract { agent, session: "s1".into(), exchange: json!({}), tags: Vec::new() },
    ];
    for op in &ops {
        let expected = match op {
            Operation::Recall { .. } => "/memories/search",
            Operation::ReadBlock { .. } => "/blocks/{label}",
            Operation::AppendBlock { .. } => "/link/blocks/{label}/append",
            Operation::ReplaceBlock { .. } => "/link/blocks/{label}",
            Operation::Extract { .. } => "/link/extract",
        };
        let req = session_agent_api::spaces::request(op);
        let template = session_agent_api::template(Role::Space, &req.path);
        assert_eq!(template, Some(expected), "{op:?} → {} {}", req.method, req.path);
        let route = session_agent_api::routes::table(Role::Space).iter().find(|r| Some(r.path) == template).unwrap();
        assert!(route.ops.iter().any(|o| o.method == req.method), "{} {} has no such method", req.method, route.path);
    }
}

fn export(api: &Api) -> String {
    let r = api.get("/export");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    String::from_utf8(r.body).unwrap()
}

/// An agent with schedules and its memory space, moved (each exported and imported into a
/// fresh object of another deployment) and compared field by field: what a user reads of
/// either is the same, the exports byte for byte, and the moved session's model replaces the
/// shared block at the version it last read.
#[test]
fn an_agent_with_schedules_and_its_space_move_field_by_field() {
    let w = world();
    let space = w.spaces.space("alice", config());
    // The space: a floor (an erase after a write), blocks with text and a tombstone, memories
    // with two versions of one.
    assert_eq!(space.put("/blocks/plan", json!({"content": "old", "version": 0})).status, 200);
    assert_eq!(space.send(Request::new(Method::Delete, "/").header("confirm", "erase")).status, 204);
    let m = space.post("/memories", json!({"content": "The user is vegetarian", "tags": ["food"]})).body_json();
    space.patch(&format!("/memories/{}", m["id"].as_str().unwrap()), json!({"content": "The user is vegan"}));
    space.post("/memories", json!({"content": "The user lives in Lisbon"}));
    // (Every label starts from the floor the erase left: version 2.)
    assert_eq!(space.put("/blocks/scratch", json!({"content": "gone soon", "version": 2})).status, 200);
    assert_eq!(space.delete("/blocks/scratch").status, 204);
    // The agent: a session that read the shared block and appended to it, a chat turn (the
    // ledger), schedules and a run of one, the admin's choice of space.
    let a = &w.a;
    a.append("s1", "u1", None, "hello");
    a.post("/sessions/s1/context/profile/append", json!({"content": "- vegan"}));
    assert_eq!(a.get("/sessions/s1/context/plan").status, 200);
    a.model.reply(Ok(completion("Hi!")));
    space.model.reply(Ok(facts(json!([]))));
    assert_eq!(a.post("/sessions/s1/chat", json!({"message": msg("u2", "user", "hi")})).status, 201);
    let daily = json!({"prompt": "Plan the day", "cron": "0 7 * * *", "sessionId": "s1"});
    let daily = a.post("/schedules", daily).body_json()["id"].as_str().unwrap().to_owned();
    let once = json!({"prompt": "Remind me", "at": "2027-01-01T09:00:00.000Z", "reach": "agent"});
    assert_eq!(a.post("/schedules", once).status, 201);
    a.model.reply(Ok(completion("Sunny.")));
    space.model.reply(Ok(facts(json!([]))));
    assert_eq!(a.post(&format!("/schedules/{daily}/run"), json!({})).status, 200);
    assert_eq!(a.put("/space", json!({"space": "alice"})).status, 200);
    let (agent_export, space_export) = (export(a), export(&space));
    assert!(space_export.starts_with("{\"format\":\"session-agent/3\",\"kind\":\"space\"}\n"), "{space_export}");

    // Another deployment: the same names, fresh objects.
    let moved = Rc::new(InProcess::default());
    let space2 = moved.space("alice", config());
    let r = import(&space2, &space_export);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body_json(), json!({"memories": 2, "memoryVersions": 3, "sharedBlocks": 2}));
    let a2 = agent("alice:planner", &moved);
    let r = import(&a2, &agent_export);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let counts = r.body_json();
    assert_eq!((counts["schedules"].as_i64(), counts["scheduleRuns"].as_i64()), (Some(2), Some(1)));
    assert_eq!(counts["usage"].as_i64(), Some(2), "the chat turn and the run in its session");

    // Byte for byte, each export again.
    assert_eq!(export(&space2), space_export);
    assert_eq!(export(&a2), agent_export);
    // Field by field, as a user reads them.
    let same = |path: &str, from: &Api, to: &Api| {
        let (x, y) = (from.get(path), to.get(path));
        assert_eq!((x.status, y.status), (200, 200), "{path}");
        assert_eq!(x.body_json(), y.body_json(), "{path}");
    };
    for path in ["/schedules", &format!("/schedules/{daily}"), &format!("/schedules/{daily}/runs"), "/space"] {
        same(path, a, &a2);
    }
    for path in ["/usage?from=2026-01-01T00:00:00.000Z&to=2030-01-01T00:00:00.000Z", "/sessions/s1/history"] {
        same(path, a, &a2);
    }
    for path in ["/memories", &format!("/memories/{}/history", m["id"].as_str().unwrap()), "/blocks"] {
        same(path, &space, &space2);
    }
    for label in ["profile", "plan", "scratch", "never"] {
        same(&format!("/blocks/{label}"), &space, &space2);
    }
    // The versions each session read: the moved session's model replaces the shared block at
    // the version it read (a session that never read it would be refused).
    let read =
        |api: &Api| api.count("SELECT version FROM space_block_seen WHERE session_id = 's1' AND label = 'profile'");
    assert_eq!(read(&a2), read(a));
    let r =
        a2.post("/sessions/s1/tools/set_context", json!({"input": {"label": "profile", "content": "Profile: vegan"}}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(!r.body_json()["output"].as_str().unwrap().contains("changed"), "{}", r.body_json());
    assert_eq!(space2.get("/blocks/profile").body_json()["content"], "Profile: vegan");
    // The alarm is needed at the same time: the schedules are armed after the import.
    let due = |api: &Api| session_agent_core::schedule::alarm::due(&api.env()).unwrap();
    assert!(due(&a2).is_some());
    assert_eq!(due(&a2), due(a));
}

/// A space's import is refused whole when it is not a space's export, breaks a rule of the
/// space's blocks, or goes into a space that holds anything; nothing written.
#[test]
fn a_bad_space_import_is_refused_whole() {
    let spaces = Rc::new(InProcess::default());
    let space = spaces.space("alice", config());
    assert_eq!(space.put("/blocks/plan", json!({"content": "fly", "version": 0})).status, 200);
    assert_eq!(space.put("/blocks/gone", json!({"content": "x", "version": 0})).status, 200);
    assert_eq!(space.delete("/blocks/gone").status, 204);
    space.post("/memories", json!({"content": "The user is vegan"}));
    let good: Vec<String> = export(&space).lines().map(str::to_owned).collect();
    let agent_export = export(&agent("alice:planner", &spaces));
    let fresh = spaces.space("fresh", config());
    let before = table_rows(&fresh);
    let find = |kind: &str, has: &str| {
        good.iter().position(|l| l.contains(&format!("\"kind\":\"{kind}\"")) && l.contains(has)).unwrap()
    };
    let edit = |at: usize, f: &dyn Fn(&mut Json)| {
        let mut l = good.clone();
        let mut j: Json = serde_json::from_str(&l[at]).unwrap();
        f(&mut j);
        l[at] = j.to_string();
        l.join("\n")
    };
    let twice = |at: usize| {
        let mut l = good.clone();
        l.insert(at, l[at].clone());
        let end = l.len() - 1;
        l[end] = l[end].replace("\"sharedBlocks\":2", "\"sharedBlocks\":3");
        l.join("\n")
    };
    let session = json!({"kind": "session", "session": {"id": "s1", "name": "s1"}}).to_string();
    let with_session = {
        let mut l = good.clone();
        l.insert(1, session);
        l.join("\n")
    };
    let cases = [
        (agent_export, "has kind \"space\""),
        (with_session, "no place in the export of a space"),
        (edit(find("sharedBlock", "fly"), &|j| j["version"] = json!(0)), "counts from 1"),
        (edit(find("sharedBlock", "fly"), &|j| j["label"] = json!("bad label")), "label"),
        (edit(find("sharedBlock", "fly"), &|j| j["content"] = json!("x".repeat(300_000))), "at most"),
        (edit(find("sharedBlock", "gone"), &|j| j["content"] = json!("back")), "holds no text"),
        (edit(find("sharedBlock", "fly"), &|j| j["updatedBy"] = json!("a b")), "updatedBy"),
        (twice(find("sharedBlock", "fly")), "same label"),
        (edit(find("memory", "vegan"), &|j| j["category"] = json!("conversation")), "belongs to a session"),
        (good[..good.len() - 1].join("\n"), "cut off"),
    ];
    for (body, why) in cases {
        let r = import(&fresh, &body);
        assert_eq!(r.status, 400, "{why}: {}", String::from_utf8_lossy(&r.body));
        let message = r.body_json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(why), "{why}: {message}");
        assert_eq!(table_rows(&fresh), before, "{why}: nothing written");
    }
    // A space's export goes into no agent.
    let a = agent("carol", &spaces);
    let r = import(&a, &good.join("\n"));
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    // A space holding anything takes none: a memory, a block, a tombstone.
    for hold in ["/memories", "/blocks/plan", "tombstone"] {
        let s = spaces.space(&format!("held-{}", hold.len()), config());
        match hold {
            "/memories" => assert_eq!(s.post(hold, json!({"content": "x"})).status, 201),
            "/blocks/plan" => assert_eq!(s.put(hold, json!({"content": "x", "version": 0})).status, 200),
            _ => {
                assert_eq!(s.put("/blocks/t", json!({"content": "x", "version": 0})).status, 200);
                assert_eq!(s.delete("/blocks/t").status, 204);
            }
        }
        let before = table_rows(&s);
        let r = import(&s, &good.join("\n"));
        assert_eq!((r.status, code(&r)), (409, "conflict".to_owned()), "{hold}");
        assert_eq!(table_rows(&s), before, "{hold}: nothing written");
    }
    // An erased space takes one (its floor kept when higher).
    let r = space.send(Request::new(Method::Delete, "/").header("confirm", "erase"));
    assert_eq!(r.status, 204);
    assert_eq!(import(&space, &good.join("\n")).status, 201);
    let again = export(&space);
    let floor = json!({"kind": "sharedBlockFloor", "version": 3}).to_string();
    assert!(again.contains(&floor), "the erase's floor stays: {again}");
    assert_eq!(again.replace(&format!("{floor}\n"), ""), good.join("\n") + "\n");
    // Only the space's admin exports or imports it: a write token of the space may not.
    let now = space.now.get();
    let write = Claims::issue(
        "alice",
        Role::Space,
        json!({"scope": "write", "ttlSeconds": 60}).as_object().unwrap(),
        now + 10_000,
    )
    .unwrap();
    let claims = serde_json::to_string(&write).unwrap();
    assert_eq!(space.send(Request::new(Method::Get, "/export").header(CLAIMS_HEADER, &claims)).status, 403);
    let mut req = Request::new(Method::Post, "/import").header(CLAIMS_HEADER, &claims);
    req.body = good.join("\n").into_bytes();
    assert_eq!(space.send(req).status, 403);
}

/// A deleted session leaves no version read of a shared block behind: it would count as data
/// (an import would be refused) and a new session of the same id would start from it.
#[test]
fn a_deleted_session_forgets_the_shared_block_versions_it_read() {
    let w = world();
    w.a.append("s1", "u1", None, "hello");
    assert_eq!(w.a.get("/sessions/s1/context/plan").status, 200);
    assert!(w.a.count("SELECT count(*) FROM space_block_seen WHERE session_id = 's1'") > 0);
    assert_eq!(w.a.delete("/sessions/s1").status, 204);
    let left = w.a.db.query("SELECT session_id, label FROM space_block_seen", &[]).unwrap();
    assert!(left.is_empty(), "{:?}", left.iter().map(|r| r.text(0).unwrap()).collect::<Vec<_>>());
}
