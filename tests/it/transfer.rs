//! Export, import, erase and split through the DO API on real SQLite and the in-memory object
//! store: byte-identical round trips (branches, overlays, spilled fields, blocks, runtime
//! blocks, loaded skills, frozen prompts, memories with their versions, entries, agent-scoped
//! skills), imports that are refused whole, the erase of every row and object, and the split.

use crate::support::{code, completion, import, table_rows, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_api::Request;
use session_agent_core::sql::Sql;

fn config() -> Json {
    json!({"context": [
        {"label": "soul", "kind": "readonly", "content": "You are terse."},
        {"label": "notes", "kind": "writable", "maxTokens": 500},
        {"label": "profile", "kind": "writable", "scope": "agent"},
        {"label": "knowledge", "kind": "search"},
        {"label": "skills", "kind": "skills"}
    ]})
}

fn ok(r: &session_agent_api::Response, status: u16) -> Json {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

fn tool(api: &Api, sid: &str, name: &str, input: Json) {
    ok(&api.post(&format!("/sessions/{sid}/tools/{name}"), json!({ "input": input })), 200);
}

/// An agent holding one of everything an export carries (but a shared block's version read:
/// `spaces.rs`).
fn rich(agent: &str) -> Api {
    let mut api = Api::with_config(config()).with_model();
    api = api.named(agent);
    // s1: a branch, a sibling, an overlay, an oversize message (spilled), block writes, a
    // runtime block, a loaded skill, a frozen prompt.
    api.append("s1", "u1", None, "I plan a trip to Lisbon");
    api.append("s1", "a1", Some(Some("u1")), "Lisbon in May is mild");
    api.append("s1", "u2", Some(Some("a1")), "What about Porto?");
    api.append("s1", "u2b", Some(Some("a1")), "And Faro?");
    let big = json!({"id": "big", "role": "user", "metadata": {"k": 1.5}, "parts": [{"type": "text", "text": "x".repeat(1_900_000)}]});
    ok(&api.post("/sessions/s1/messages", json!({"message": big, "parentId": "u2"})), 201);
    ok(
        &api.post(
            "/sessions/s1/compactions",
            json!({"summary": "Trip planning.", "fromMessageId": "u1", "toMessageId": "a1"}),
        ),
        201,
    );
    ok(&api.put("/sessions/s1/context/notes", json!({"content": "likes trains"})), 200);
    ok(&api.put("/sessions/s1/context/profile", json!({"content": "vegetarian"})), 200);
    ok(&api.post("/sessions/s1/context", json!({"label": "extra", "kind": "writable", "content": "runtime"})), 201);
    tool(
        &api,
        "s1",
        "set_context",
        json!({"label": "skills", "key": "packing", "content": "Pack light.", "metadata": {"description": "How to pack"}}),
    );
    let prefix = format!("skills/{agent}/");
    let key = api.blobs.keys().into_iter().find_map(|k| k.strip_prefix(&prefix).map(str::to_owned)).unwrap();
    tool(&api, "s1", "load_context", json!({"label": "skills", "key": key}));
    ok(&api.get("/sessions/s1/prompt"), 200);
    ok(&api.post("/sessions/s1/usage", json!({"inputTokens": 10, "outputTokens": 5, "cost": 0.25})), 200);
    ok(&api.patch("/sessions/s1", json!({"metadata": {"user": "u-7", "n": 30, "vip": true, "r": 0.5}})), 200);
    // s2: a plain session with a deleted interior message (an orphan).
    api.append("s2", "m1", None, "hello");
    api.append("s2", "m2", Some(Some("m1")), "middle");
    api.append("s2", "m3", Some(Some("m2")), "tail");
    assert_eq!(api.delete("/sessions/s2/messages/m2").status, 204);
    // Memories (one changed: two versions), entries.
    let m = ok(
        &api.post(
            "/memories",
            json!({"content": "The user is vegetarian", "tags": ["food"], "score": 0.9, "metadata": {"src": "form"}}),
        ),
        201,
    );
    let change = json!({"content": "The user is vegan", "metadata": {"src": "chat", "n": 2}});
    ok(&api.patch(&format!("/memories/{}", m["id"].as_str().unwrap()), change), 200);
    ok(
        &api.post("/memories", json!({"content": "Trip to Lisbon", "category": "conversation", "sessionId": "s1"})),
        201,
    );
    ok(
        &api.post(
            "/sessions/s1/context/knowledge/entries",
            json!({"entries": [{"key": "k1", "content": "Trams run late"}, {"content": "Bring an umbrella"}]}),
        ),
        201,
    );
    // Schedules (one in a session, paused; one on its own) and a run of the second, which
    // writes the usage ledger's row; the admin's choice of space.
    let sch = json!({"prompt": "Summarize the trip", "every": 3600, "sessionId": "s1", "name": "Trip"});
    let sch = ok(&api.post("/schedules", sch), 201);
    ok(&api.patch(&format!("/schedules/{}", sch["id"].as_str().unwrap()), json!({"paused": true})), 200);
    let sch = ok(&api.post("/schedules", json!({"prompt": "Plan the day", "cron": "0 7 * * 1-5"})), 201);
    api.model.reply(Ok(completion("Pack an umbrella.")));
    ok(&api.post(&format!("/schedules/{}/run", sch["id"].as_str().unwrap()), json!({})), 200);
    ok(&api.put("/space", json!({"space": "alice-team"})), 200);
    api.model.requests.borrow_mut().clear();
    api
}

fn export_agent(api: &Api) -> String {
    let r = api.get("/export");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/x-ndjson; charset=utf-8"));
    String::from_utf8(r.body).unwrap()
}

// invariant 33 (docs/ARCHITECTURE.md)
#[test]
fn an_agent_export_imports_into_a_fresh_agent_byte_for_byte() {
    let alice = rich("alice");
    let first = export_agent(&alice);
    let lines: Vec<Json> = first.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0], json!({"format": "session-agent/3", "kind": "agent"}));
    let end = lines.last().unwrap();
    assert_eq!(end["kind"], "end");
    assert_eq!(
        end["counts"],
        json!({"sessions": 2, "messages": 7, "memories": 2, "memoryVersions": 3, "entries": 2, "skills": 1,
               "schedules": 2, "scheduleRuns": 1, "usage": 1})
    );
    // The oversize message is whole in the export, not its placeholder.
    let big = lines.iter().find(|l| l["message"]["id"] == "big").unwrap();
    assert_eq!(big["message"]["parts"][0]["text"].as_str().unwrap().len(), 1_900_000);
    assert!(alice.blobs.keys().iter().any(|k| k.starts_with("_spill/")), "it was spilled in alice");

    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    let r = import(&bob, &first);
    assert_eq!(
        ok(&r, 201),
        json!({"sessions": 2, "messages": 7, "memories": 2, "memoryVersions": 3, "entries": 2, "skills": 1,
               "schedules": 2, "scheduleRuns": 1, "usage": 1})
    );
    assert_eq!(export_agent(&bob), first, "export → import → export is byte-identical");
    // And it works: history with the overlay, search, recall, the skill under bob's prefix.
    assert_eq!(bob.history_ids("/sessions/s1/history?leaf=big")[1], "u2");
    assert!(bob.blobs.keys().iter().any(|k| k.starts_with("skills/bob/pack-light")), "{:?}", bob.blobs.keys());
    assert!(bob.blobs.keys().iter().any(|k| k.starts_with("_spill/bob/")), "spilled again under bob");
    let hits = ok(&bob.get("/search?q=Porto"), 200);
    assert_eq!(hits["results"][0]["id"], "u2", "{hits}");
    let mem = ok(&bob.get("/memories/search?q=vegan"), 200);
    assert_eq!(mem["results"][0]["memory"]["content"], "The user is vegan", "{mem}");
    assert_eq!(ok(&bob.get("/sessions/s1/context/profile"), 200)["content"], "vegetarian");

    // A second import into bob is refused: it holds data now.
    let r = import(&bob, &first);
    assert_eq!((r.status, code(&r)), (409, "conflict".into()));
}

#[test]
fn a_session_export_round_trips_under_its_id_or_another() {
    let alice = rich("alice");
    let doc = ok(&alice.get("/sessions/s1/export"), 200);
    assert_eq!(doc["format"], "session-agent/3");
    assert_eq!(doc["messages"].as_array().unwrap().len(), 5);
    assert_eq!(doc["compactions"].as_array().unwrap().len(), 1);
    assert_eq!(doc["loadedSkills"][0]["label"], "skills");
    assert_eq!(doc["prompts"].as_array().unwrap().len(), 1);
    assert_eq!(doc["session"]["metadata"], json!({"user": "u-7", "n": 30, "vip": true, "r": 0.5}));
    let text = String::from_utf8(alice.get("/sessions/s1/export").body).unwrap();

    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    let r = bob.send(Request::new(Method::Post, "/sessions/import").json(&doc));
    assert_eq!(ok(&r, 201)["id"], "s1");
    assert_eq!(String::from_utf8(bob.get("/sessions/s1/export").body).unwrap(), text);
    // Again: the session exists.
    let r = bob.send(Request::new(Method::Post, "/sessions/import").json(&doc));
    assert_eq!((r.status, code(&r)), (409, "conflict".into()));
    // Under another id: the same document but for the session's id and the overlay's (overlay
    // ids are the agent's, so the copy's are new).
    let r = bob.send(Request::new(Method::Post, "/sessions/import?as=copy").json(&doc));
    assert_eq!(ok(&r, 201)["id"], "copy");
    let mut copy = ok(&bob.get("/sessions/copy/export"), 200);
    assert_ne!(copy["compactions"][0]["id"], doc["compactions"][0]["id"]);
    copy["session"]["id"] = json!("s1");
    copy["compactions"][0]["id"] = doc["compactions"][0]["id"].clone();
    assert_eq!(copy, doc);
    assert_eq!(bob.history_ids("/sessions/copy/history")[1..], bob.history_ids("/sessions/s1/history")[1..]);
    let r = bob.send(Request::new(Method::Post, "/sessions/import?as=../x").json(&doc));
    assert_eq!(r.status, 400);
    assert_eq!(alice.get("/sessions/nope/export").status, 404);
}

// invariant 31, invariant 32 (docs/ARCHITECTURE.md)
#[test]
fn a_bad_import_is_refused_whole() {
    let alice = rich("alice");
    let good = export_agent(&alice);
    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    let before = table_rows(&bob);
    let lines: Vec<&str> = good.lines().collect();
    let cut = lines[..lines.len() - 1].join("\n");
    let newer = good.replacen("session-agent/3", "session-agent/4", 1);
    let bad_message = good.replacen("\"role\":\"user\"", "\"role\":\"\"", 1);
    let orphan_first = {
        let mut l = lines.clone();
        let (a, b) = (
            l.iter().position(|x| x.contains("\"id\":\"u1\"")).unwrap(),
            l.iter().position(|x| x.contains("\"id\":\"a1\"")).unwrap(),
        );
        l.swap(a, b);
        l.join("\n")
    };
    let loose_time = {
        let at = good.find("\"createdAt\":\"").unwrap() + 13;
        format!("{}2026-11-22T11:00:00Z{}", &good[..at], &good[at + 24..])
    };
    let bad_by = good.replacen("\"by\":\"api\"", "\"by\":\"root\"", 1);
    let summary_id = good.replacen("\"id\":\"u2b\"", "\"id\":\"compaction_x\"", 1);
    let cases = [
        (loose_time.as_str(), "timestamp like"),
        (bad_by.as_str(), "by must be"),
        (summary_id.as_str(), "never stored"),
        (cut.as_str(), "cut off"),
        (newer.as_str(), "newer"),
        (bad_message.as_str(), "role"),
        (orphan_first.as_str(), "not an earlier message"),
        ("", "empty"),
        ("{\"kind\":\"agent\"}", "format"),
        ("not json", "JSON"),
    ];
    for (body, why) in cases {
        let r = import(&bob, body);
        assert_eq!(r.status, 400, "{why}: {}", String::from_utf8_lossy(&r.body));
        let message = r.body_json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(why), "{why}: {message}");
        assert_eq!(table_rows(&bob), before, "{why}: nothing written");
    }
    // Nothing of a refused import stays in R2 after the sweep (its spilled objects were put
    // before the transaction that failed).
    let mut dup = lines.clone();
    let memory = *lines.iter().find(|l| l.starts_with("{\"kind\":\"memory\"")).unwrap();
    dup.insert(dup.len() - 1, memory);
    let r = import(&bob, &dup.join("\n"));
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(bob.blobs.keys().is_empty(), "{:?}", bob.blobs.keys());
    // A session document of a newer format.
    let mut doc = ok(&alice.get("/sessions/s2/export"), 200);
    doc["format"] = json!("session-agent/7");
    let r = bob.send(Request::new(Method::Post, "/sessions/import").json(&doc));
    assert!(
        r.body_json()["error"]["message"].as_str().unwrap().contains("newer"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
}

/// `lines` of an agent export with the end record's counts made to match the records again, so
/// an edited export is refused for what it holds, not for being cut off.
fn recounted(lines: &[String]) -> String {
    let mut counts = json!({"sessions": 0, "messages": 0, "memories": 0, "memoryVersions": 0, "entries": 0, "skills": 0,
                            "schedules": 0, "scheduleRuns": 0, "usage": 0});
    let mut out = Vec::new();
    for l in lines {
        let j: Json = serde_json::from_str(l).unwrap();
        let key = match j["kind"].as_str().unwrap_or_default() {
            "session" => "sessions",
            "message" => "messages",
            "memory" => "memories",
            "memoryVersion" => "memoryVersions",
            "entry" => "entries",
            "skill" => "skills",
            "schedule" => "schedules",
            "scheduleRun" => "scheduleRuns",
            "usage" => "usage",
            "end" => continue,
            _ => "",
        };
        if !key.is_empty() {
            counts[key] = json!(counts[key].as_i64().unwrap() + 1);
        }
        out.push(l.clone());
    }
    out.push(json!({"kind": "end", "counts": counts}).to_string());
    out.join("\n")
}

// invariant 31 (docs/ARCHITECTURE.md)
#[test]
fn an_import_the_api_could_never_have_written_is_refused_whole() {
    let alice = rich("alice");
    let good: Vec<String> = export_agent(&alice).lines().map(str::to_owned).collect();
    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    let before = table_rows(&bob);
    let find = |kind: &str, has: &str| {
        good.iter().position(|l| l.contains(&format!("\"kind\":\"{kind}\"")) && l.contains(has)).unwrap()
    };
    let edit = |at: usize, f: &dyn Fn(&mut Json)| {
        let mut l = good.clone();
        let mut j: Json = serde_json::from_str(&l[at]).unwrap();
        f(&mut j);
        l[at] = j.to_string();
        l
    };
    let insert = |at: usize, line: Json| {
        let mut l = good.clone();
        l.insert(at, line.to_string());
        l
    };
    let twice = |at: usize| insert(at, serde_json::from_str(&good[at]).unwrap());
    let memory = find("memory", "vegan");
    let conversation = find("memory", "conversation");
    let version = find("memoryVersion", "vegan");
    let entry = find("entry", "Trams");
    let skill = find("skill", "Pack light");
    let s1_block = find("contextBlock", "likes trains");
    let agent_block = find("contextBlock", "vegetarian");
    let block = |sid: &str, label: &str| json!({"kind": "contextBlock", "sessionId": sid, "label": label, "updatedAt": "2026-11-22T11:00:00.000Z", "content": "hacked"});
    let cases: Vec<(Vec<String>, &str)> = vec![
        // s2's m3 lost its parent; naming s1's u1 instead is a parent in another session.
        (edit(find("message", "\"id\":\"m3\""), &|j| j["parentId"] = json!("u1")), "not an earlier message"),
        (edit(conversation, &|j| j["sessionId"] = Json::Null), "belongs to a session"),
        (edit(conversation, &|j| j["sessionId"] = json!("s9")), "belongs to a session"),
        (edit(memory, &|j| j["messageId"] = json!("u1")), "messageId needs a sessionId"),
        (edit(version, &|j| j["memoryId"] = json!("mem_unknown")), "does not hold"),
        (insert(s1_block + 1, block("s1", "soul")), "readonly"),
        (insert(s1_block + 1, block("s1", "knowledge")), "search"),
        (insert(s1_block + 1, block("s1", "profile")), "shared by the agent"),
        (insert(s1_block + 1, block("s1", "ghost")), "does not have"),
        (insert(agent_block + 1, block("", "soul")), "not a writable block shared"),
        (insert(agent_block + 1, block("", "notes")), "not a writable block shared"),
        (twice(s1_block), "same label"),
        (twice(agent_block), "same label"),
        (edit(entry, &|j| j["label"] = json!("nowhere")), "not a search block"),
        (twice(entry), "same label and key"),
        (twice(skill), "same prefix and key"),
        (twice(version), "appears twice"),
        (twice(memory), "same id"),
        (
            insert(memory + 1, {
                let mut j: Json = serde_json::from_str(&good[memory]).unwrap();
                j["id"] = json!("mem_other");
                j["content"] = json!("THE user is  vegan");
                j
            }),
            "say the same",
        ),
        (twice(find("loadedSkill", "skills")), "same label and key"),
        (edit(find("loadedSkill", "skills"), &|j| j["label"] = json!("notes")), "not a skills block"),
        (twice(find("compaction", "Trip planning")), "same id"),
        // What version 3 added: schedules, their runs, the ledger, the choice of space.
        (edit(find("schedule", "Plan the day"), &|j| j["spec"] = json!("0 7 * *")), "is not one this service writes"),
        (edit(find("schedule", "Plan the day"), &|j| j["timing"] = json!("hourly")), "is not one this service writes"),
        (edit(find("schedule", "Trip"), &|j| j["spec"] = json!("59")), "is not one this service writes"),
        (edit(find("schedule", "Trip"), &|j| j["reach"] = json!("world")), "reach must be"),
        (edit(find("schedule", "Trip"), &|j| j["id"] = json!("job_1")), "starts with sch_"),
        (edit(find("schedule", "Trip"), &|j| j["prompt"] = json!(" ")), "prompt must not be empty"),
        (edit(find("schedule", "Trip"), &|j| j["sessionId"] = json!("../x")), "sessionId"),
        (edit(find("schedule", "Trip"), &|j| j["nextRunAt"] = json!("tomorrow")), "timestamp like"),
        (twice(find("schedule", "Trip")), "same id"),
        (edit(find("scheduleRun", "Pack an umbrella"), &|j| j["scheduleId"] = json!("sch_gone")), "does not hold"),
        (edit(find("scheduleRun", "Pack an umbrella"), &|j| j["status"] = json!("done")), "status must be"),
        (twice(find("scheduleRun", "Pack an umbrella")), "same id"),
        (edit(find("usage", "test-model"), &|j| j["inputTokens"] = json!(-5)), "non-negative integer"),
        (edit(find("usage", "test-model"), &|j| j["model"] = json!("")), "model"),
        (edit(find("spaceChoice", "alice-team"), &|j| j["space"] = json!("a b")), "space"),
        (twice(find("spaceChoice", "alice-team")), "more than one spaceChoice"),
        (edit(find("spaceChoice", "alice-team"), &|j| j["kind"] = json!("sharedBlockFloor")), "no place"),
        (edit(find("spaceChoice", "alice-team"), &|j| j["extra"] = json!(1)), "unknown field"),
    ];
    // The recounting itself leaves a good export good.
    assert_eq!(recounted(&good), good.join("\n"));
    let tried = cases.len();
    for (lines, why) in cases {
        let r = import(&bob, &recounted(&lines));
        let message = r.body_json()["error"]["message"].as_str().unwrap_or_default().to_owned();
        assert_eq!(r.status, 400, "{why}: {}", String::from_utf8_lossy(&r.body));
        assert!(message.contains(why), "{why}: {message}");
        assert_eq!(table_rows(&bob), before, "{why}: nothing written");
    }
    println!("hostile imports: {tried} tried, {tried} refused whole");
    // A session document is held to the same rules.
    let mut doc = ok(&alice.get("/sessions/s1/export"), 200);
    doc["contextBlocks"]
        .as_array_mut()
        .unwrap()
        .push(json!({"label": "soul", "updatedAt": "2026-11-22T11:00:00.000Z", "content": "hacked"}));
    let r = bob.send(Request::new(Method::Post, "/sessions/import").json(&doc));
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(table_rows(&bob), before);
}

#[test]
fn entries_no_block_reads_any_more_stay_out_of_the_export() {
    let alice = rich("alice");
    ok(&alice.post("/sessions/s3/context", json!({"label": "scratch", "kind": "search"})), 201);
    ok(&alice.post("/sessions/s3/context/scratch/entries", json!({"entries": [{"content": "left behind"}]})), 201);
    assert!(export_agent(&alice).contains("left behind"), "read while its block exists");
    assert_eq!(alice.delete("/sessions/s3").status, 204);
    assert_eq!(alice.count("SELECT count(*) FROM search_entries WHERE label = 'scratch'"), 1, "the entry stays stored");
    let export = export_agent(&alice);
    assert!(!export.contains("left behind"), "no block reads it: not exported");
    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    ok(&import(&bob, &export), 201);
    assert_eq!(export_agent(&bob), export);
}

/// Every table of the schema is classified for a move (exported, derived, local), as the erase
/// list is checked: a table added without a decision fails here. What is called exported is
/// what the export writes.
#[test]
fn every_table_is_classified_for_transfer() {
    use session_agent_core::transfer::{exported, Transfer, TABLES};
    let api = Api::new();
    let mut schema: Vec<String> =
        table_rows(&api).into_iter().map(|(t, _)| t).filter(|t| !t.starts_with("sqlite_")).collect();
    schema.sort();
    let mut classified: Vec<String> = TABLES.iter().map(|(t, _)| (*t).to_owned()).collect();
    classified.sort();
    assert_eq!(schema, classified, "a table of the schema without a class (or a class of no table)");
    let mut said: Vec<&str> = TABLES.iter().filter(|(_, how)| *how == Transfer::Exported).map(|(t, _)| *t).collect();
    said.sort();
    assert_eq!(said, exported(), "the tables called exported are those the export writes");
}

/// The import's "holds nothing yet" counts every exported kind: an agent holding only a
/// schedule (or only a ledger row, or a choice of space) takes no import.
#[test]
fn an_agent_holding_only_a_schedule_takes_no_import() {
    let export = export_agent(&rich("alice"));
    let holders: [&dyn Fn(&Api); 2] = [
        &|api| {
            ok(&api.post("/schedules", json!({"prompt": "p", "every": 60})), 201);
        },
        &|api| {
            ok(&api.put("/space", json!({"space": "elsewhere"})), 200);
        },
    ];
    for hold in holders {
        let mut bob = Api::with_config(config());
        bob.agent = "bob".into();
        hold(&bob);
        let before = table_rows(&bob);
        let r = import(&bob, &export);
        assert_eq!((r.status, code(&r)), (409, "conflict".into()), "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(table_rows(&bob), before, "nothing written");
    }
}

/// The limits of `POST /schedules` hold for an import: no more schedules than
/// `schedules.maxSchedules`, no more runs of one than `schedules.maxRuns` (`422`, nothing
/// written).
#[test]
fn an_import_keeps_to_the_schedule_limits() {
    let export = export_agent(&rich("alice"));
    for (limits, why) in [(json!({"maxSchedules": 1}), "maxSchedules"), (json!({"maxRuns": 1}), "")] {
        let mut cfg = config();
        cfg["schedules"] = limits;
        let mut bob = Api::with_config(cfg);
        bob.agent = "bob".into();
        let r = import(&bob, &export);
        if why.is_empty() {
            // One run of one schedule is within a limit of one.
            assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            continue;
        }
        assert_eq!((r.status, code(&r)), (422, "over_budget".into()), "{}", String::from_utf8_lossy(&r.body));
        assert!(r.body_json()["error"]["message"].as_str().unwrap().contains(why));
        assert_eq!(bob.count("SELECT count(*) FROM sessions"), 0);
    }
    // Two runs of one schedule past a limit of one.
    let mut lines: Vec<String> = export.lines().map(str::to_owned).collect();
    let run = lines.iter().position(|l| l.contains("\"kind\":\"scheduleRun\"")).unwrap();
    let mut again: Json = serde_json::from_str(&lines[run]).unwrap();
    again["id"] = json!("run_again");
    lines.insert(run + 1, again.to_string());
    let mut cfg = config();
    cfg["schedules"] = json!({"maxRuns": 1});
    let mut bob = Api::with_config(cfg);
    bob.agent = "bob".into();
    let r = import(&bob, &recounted(&lines));
    assert_eq!((r.status, code(&r)), (422, "over_budget".into()), "{}", String::from_utf8_lossy(&r.body));
    assert!(r.body_json()["error"]["message"].as_str().unwrap().contains("maxRuns"));
}

// invariant 34 (docs/ARCHITECTURE.md)
#[test]
fn an_erase_leaves_no_row_and_no_object_and_revokes_tokens() {
    let alice = rich("alice");
    assert!(!alice.blobs.keys().is_empty());
    assert_eq!(alice.post("/schedules", json!({"prompt": "p", "every": 60})).status, 201);
    let r = alice.delete("/");
    assert_eq!((r.status, code(&r)), (400, "invalid_request".into()), "without Confirm: erase");
    assert_eq!(alice.count("SELECT count(*) FROM messages"), 7);
    let r = alice.send(Request::new(Method::Delete, "/").header("confirm", "erase"));
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    // The model in use is a setting, not the agent's data; SQLite's AUTOINCREMENT counter of
    // vector_log is never reset, so no log seq is given twice.
    let kept = ["schema_version", "revocation", "embedding_model", "sqlite_sequence"];
    for (t, n) in table_rows(&alice) {
        if !kept.contains(&t.as_str()) {
            assert_eq!(n, 0, "table {t} still has rows after the erase");
        }
    }
    assert_eq!(alice.count("SELECT count(*) FROM revocation"), 1);
    assert!(alice.blobs.keys().is_empty(), "R2 objects left: {:?}", alice.blobs.keys());
    // Empty again: an agent import goes in.
    let again = export_agent(&rich("carol"));
    assert_eq!(import(&alice, &again).status, 201);
}

#[test]
fn a_split_ends_the_session_and_starts_one_from_its_summary() {
    let api = rich("alice").with_model();
    let r = api.post("/sessions/s2/split", json!({"name": "Next", "summary": "Said hello."}));
    let new = ok(&r, 201);
    assert_eq!((new["name"].as_str(), new["parentSessionId"].as_str()), (Some("Next"), Some("s2")));
    let sid = new["id"].as_str().unwrap();
    let h = ok(&api.get(&format!("/sessions/{sid}/history")), 200);
    assert_eq!(h["messages"][0]["role"], "assistant");
    assert_eq!(h["messages"][0]["parts"][0]["text"], "[Context from previous session]\n\nSaid hello.");
    assert_eq!(ok(&api.get("/sessions/s2"), 200)["endReason"], "split");
    // Without a summary, on a branch too short to compact: the session's newest overlay.
    let r = api.post("/sessions/s1/split", json!({}));
    let sid = ok(&r, 201)["id"].as_str().unwrap().to_owned();
    let h = ok(&api.get(&format!("/sessions/{sid}/history")), 200);
    assert_eq!(h["messages"][0]["parts"][0]["text"], "[Context from previous session]\n\nTrip planning.");
    assert!(api.model.requests.borrow().is_empty(), "nothing to compact: no model call");
    // A long branch is compacted now, and its summary starts the new session.
    for i in 0..12 {
        api.append("long", &format!("l{i}"), None, &format!("message number {i} {}", "words ".repeat(4000)));
    }
    let r = api.post("/sessions/long/split", json!({}));
    let sid = ok(&r, 201)["id"].as_str().unwrap().to_owned();
    assert_eq!(api.model.requests.borrow().len(), 1, "one summary written");
    let first = ok(&api.get(&format!("/sessions/{sid}/history")), 200)["messages"][0]["parts"][0]["text"].clone();
    let stored = ok(&api.get("/sessions/long/compactions"), 200)["compactions"][0]["summary"].clone();
    assert_eq!(first, json!(format!("[Context from previous session]\n\n{}", stored.as_str().unwrap())));
    // Nothing to summarize: 409; bad bodies 400; unknown session 404; nothing changed.
    api.append("short", "x1", None, "hi");
    let r = api.post("/sessions/short/split", json!({}));
    assert_eq!((r.status, code(&r)), (409, "conflict".into()));
    assert_eq!(api.post("/sessions/s2/split", json!({"summary": " "})).status, 400);
    assert_eq!(api.post("/sessions/s2/split", json!({"nam": "x"})).status, 400);
    assert_eq!(api.post("/sessions/none/split", json!({"summary": "s"})).status, 404);
    assert!(ok(&api.get("/sessions/short"), 200)["endReason"].is_null());
}

#[test]
fn objects_left_for_the_sweep_are_not_listed_and_a_rewrite_takes_its_key_back() {
    // An erase cut short after its transaction: the agent's skill is still in R2, its key waits
    // for the sweep.
    let api = rich("alice");
    let key = api.blobs.keys().into_iter().find(|k| k.starts_with("skills/alice/")).unwrap();
    api.db.execute("INSERT INTO spill_garbage (key) VALUES (?)", &[key.as_str().into()]).unwrap();
    let export = export_agent(&api);
    assert!(!export.contains("\"kind\":\"skill\""), "a doomed skill is not exported");
    let block = ok(&api.get("/sessions/s1/context/skills"), 200);
    assert!(!block["content"].as_str().unwrap().contains("pack-light"), "nor listed: {block}");
    // The model writes the same skill again (same content: same key) before any sweep ran.
    tool(
        &api,
        "s1",
        "set_context",
        json!({"label": "skills", "content": "Pack light.", "metadata": {"description": "How to pack"}}),
    );
    api.append("s1", "after", None, "a write, so a sweep");
    assert!(api.blobs.keys().contains(&key), "the sweep kept the skill written again");
    assert!(export_agent(&api).contains("\"kind\":\"skill\""));
}

#[test]
fn metadata_travels_and_a_version_1_export_without_it_still_imports() {
    let alice = rich("alice");
    let export = export_agent(&alice);
    let lines: Vec<Json> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |kind: &str, has: &str| {
        lines
            .iter()
            .find(|l| l["kind"] == kind && l.to_string().contains(has))
            .unwrap_or_else(|| panic!("{kind} {has}"))
    };
    assert_eq!(of("session", "\"s1\"")["session"]["metadata"], json!({"user": "u-7", "n": 30, "vip": true, "r": 0.5}));
    assert_eq!(of("session", "\"s2\"")["session"]["metadata"], json!({}));
    assert_eq!(of("memory", "vegan")["metadata"], json!({"src": "chat", "n": 2}));
    let versions: Vec<&Json> = lines.iter().filter(|l| l["kind"] == "memoryVersion").collect();
    assert_eq!(versions[0]["metadata"], json!({"src": "form"}), "a version keeps the metadata it had");
    assert_eq!(versions[1]["metadata"], json!({"src": "chat", "n": 2}));
    // Imported, the metadata filters find the same.
    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    ok(&import(&bob, &export), 201);
    assert_eq!(ok(&bob.get("/sessions?metadata.vip=true"), 200)["sessions"][0]["id"], "s1");
    assert_eq!(ok(&bob.get("/memories?metadata.src=chat"), 200)["memories"][0]["content"], "The user is vegan");

    // Version 1: the same records without metadata (the format before it existed).
    let v1: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut l = l.clone();
            let o = l.as_object_mut().unwrap();
            if o.contains_key("format") {
                o.insert("format".into(), json!("session-agent/1"));
            }
            o.remove("metadata");
            if let Some(Json::Object(s)) = o.get_mut("session") {
                s.remove("metadata");
            }
            l.to_string()
        })
        .collect();
    assert!(!v1.iter().any(|l| l.contains("\"src\"") || l.contains("\"vip\"")), "no metadata left");
    let mut carol = Api::with_config(config());
    carol = carol.named("carol");
    ok(&import(&carol, &v1.join("\n")), 201);
    let s1 = ok(&carol.get("/sessions/s1"), 200);
    assert_eq!(s1["metadata"], json!({}));
    let again = export_agent(&carol);
    assert!(again.starts_with("{\"format\":\"session-agent/3\""), "exported in the newest format");
    let mut dave = Api::with_config(config());
    dave = dave.named("dave");
    ok(&import(&dave, &again), 201);
    assert_eq!(export_agent(&dave), again, "byte-identical from there on");
    // A session document of version 1 too.
    let mut doc = ok(&alice.get("/sessions/s2/export"), 200);
    doc["format"] = json!("session-agent/1");
    doc["session"].as_object_mut().unwrap().remove("metadata");
    let r = dave.send(Request::new(Method::Post, "/sessions/import?as=old").json(&doc));
    assert_eq!(ok(&r, 201)["metadata"], json!({}));
}

#[test]
fn imported_metadata_is_checked_as_the_api_checks_it() {
    let alice = rich("alice");
    let good: Vec<String> = export_agent(&alice).lines().map(str::to_owned).collect();
    let mut bob = Api::with_config(config());
    bob = bob.named("bob");
    let before = table_rows(&bob);
    let at = |kind: &str, has: &str| {
        good.iter().position(|l| l.contains(&format!("\"kind\":\"{kind}\"")) && l.contains(has)).unwrap()
    };
    let edit = |i: usize, f: &dyn Fn(&mut Json)| {
        let mut l = good.clone();
        let mut j: Json = serde_json::from_str(&l[i]).unwrap();
        f(&mut j);
        l[i] = j.to_string();
        l.join("\n")
    };
    let seventeen: serde_json::Map<String, Json> = (0..17).map(|i| (format!("k{i}"), json!(i))).collect();
    let (session, memory, version) = (at("session", "\"s1\""), at("memory", "vegan"), at("memoryVersion", "vegan"));
    let cases = [
        (edit(session, &|j| j["session"]["metadata"] = json!({"a": {"b": 1}})), "nested"),
        (edit(session, &|j| j["session"]["metadata"] = json!([1])), "must be an object"),
        (edit(memory, &|j| j["metadata"] = Json::Object(seventeen.clone())), "at most 16 keys"),
        (edit(memory, &|j| j["metadata"] = json!({"bad key": 1})), "not a metadata key"),
        (edit(version, &|j| j["metadata"] = json!({"a": null})), "null"),
        (edit(version, &|j| j["metadata"] = json!({"s": "x".repeat(513)})), "longer than 512"),
    ];
    for (body, why) in cases {
        let r = import(&bob, &body);
        let message = r.body_json()["error"]["message"].as_str().unwrap_or_default().to_owned();
        assert_eq!(r.status, 400, "{why}: {}", String::from_utf8_lossy(&r.body));
        assert!(message.contains(why), "{why}: {message}");
        assert_eq!(table_rows(&bob), before, "{why}: nothing written");
    }
}
