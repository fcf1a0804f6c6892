//! What is true now: `supersedes` and `validFrom` on `POST /memories`, `asOf` and
//! `includeSuperseded` on reads, `consolidate: true` (a scripted model), the newer of two facts
//! about one subject first, and what a superseded memory keeps (versions, export, import; an
//! import refuses a circle of replacements).

use crate::support::{code, completion, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_api::Request;

const DAY: i64 = 86_400_000;

fn store(api: &Api, body: Json) -> Json {
    let r = api.post("/memories", body);
    assert!(r.status == 201 || r.status == 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

fn contents(api: &Api, path: &str) -> Vec<String> {
    let r = api.get(path);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let body = r.body_json();
    let list = body.get("memories").or_else(|| body.get("results")).unwrap().as_array().unwrap().clone();
    list.iter().map(|m| m.get("memory").unwrap_or(m)["content"].as_str().unwrap().to_owned()).collect()
}

fn import(api: &Api, body: &str) -> session_agent_api::Response {
    let mut req = Request::new(Method::Post, "/import");
    req.body = body.as_bytes().to_vec();
    api.send(req)
}

fn id(m: &Json) -> String {
    m["id"].as_str().unwrap().to_owned()
}

// invariant 41 (docs/ARCHITECTURE.md)
#[test]
fn supersedes_retires_the_old_fact_and_reads_see_what_holds_now() {
    let api = Api::new();
    let paris = store(&api, json!({"content": "The user lives in Paris.", "validFrom": "2020-01-01T00:00:00Z"}));
    assert_eq!(paris["validFrom"], "2020-01-01T00:00:00.000Z");
    assert_eq!((paris["invalidAt"].clone(), paris["supersededBy"].clone()), (Json::Null, Json::Null));
    let berlin = store(
        &api,
        json!({"content": "The user moved to Berlin.", "validFrom": "2026-03-01T00:00:00Z", "supersedes": [id(&paris)]}),
    );
    let old = api.get(&format!("/memories/{}", id(&paris))).body_json();
    assert_eq!(old["invalidAt"], "2026-03-01T00:00:00.000Z", "it stops holding when the new fact begins");
    assert_eq!(old["supersededBy"], berlin["id"]);
    assert_eq!(old["content"], "The user lives in Paris.", "kept, not erased");
    // Lists and searches: what holds now, the past on request.
    assert_eq!(contents(&api, "/memories"), ["The user moved to Berlin."]);
    assert_eq!(contents(&api, "/memories/search?q=lives+Paris"), Vec::<String>::new());
    assert_eq!(contents(&api, "/memories?includeSuperseded=1").len(), 2);
    assert_eq!(contents(&api, "/memories?asOf=2025-06-01T00:00:00Z"), ["The user lives in Paris."]);
    assert_eq!(
        contents(&api, "/memories/search?q=lives+Paris&asOf=2025-06-01T00:00:00Z"),
        ["The user lives in Paris."]
    );
    assert_eq!(contents(&api, "/memories?asOf=2019-06-01T00:00:00Z"), Vec::<String>::new());
    // The same text again is a new memory: the old one no longer holds, so nothing merges into it.
    let again = api.post("/memories", json!({"content": "The user lives in Paris."}));
    assert_eq!(again.status, 201);
    assert_ne!(again.body_json()["id"], paris["id"]);
    // Its versions stay; deleting the memory that replaced it clears `supersededBy`.
    assert_eq!(
        api.get(&format!("/memories/{}/history", id(&paris))).body_json()["versions"][0]["content"],
        old["content"]
    );
    assert_eq!(api.delete(&format!("/memories/{}", id(&berlin))).status, 204);
    let old = api.get(&format!("/memories/{}", id(&paris))).body_json();
    assert_eq!((old["supersededBy"].clone(), old["invalidAt"].is_string()), (Json::Null, true));
    // Frames: the retired memory is an `updated` with invalidAt.
    let frames = api.events.take("*");
    let retired = frames.iter().find(|f| f["memory"]["id"] == paris["id"] && f["op"] == "updated").unwrap();
    assert!(retired["memory"]["invalidAt"].is_string(), "{retired}");
    // Forgetting everything forgets superseded memories too.
    assert_eq!(api.delete("/memories").body_json()["deleted"], 2);
    assert_eq!(api.count("SELECT count(*) FROM memories"), 0);
}

#[test]
fn bad_validity_input_is_400_404_or_409_and_stores_nothing() {
    let api = Api::new();
    let a = store(&api, json!({"content": "The user drives a Zoe."}));
    let b = store(&api, json!({"content": "The user drives a Tesla.", "supersedes": [id(&a)]}));
    let before = api.count("SELECT count(*) FROM memories") + api.count("SELECT count(*) FROM memory_versions");
    for (body, status, code_) in [
        (json!({"content": "x", "supersedes": ["mem_nope"]}), 404, "not_found"),
        (json!({"content": "x", "supersedes": [id(&b), "mem_nope"]}), 404, "not_found"),
        (json!({"content": "x", "supersedes": [id(&a)]}), 409, "conflict"),
        (json!({"content": "x", "supersedes": id(&b)}), 400, "invalid_request"),
        (json!({"content": "x", "supersedes": [1]}), 400, "invalid_request"),
        (json!({"content": "x", "supersedes": [""]}), 400, "invalid_request"),
        (json!({"content": "x", "validFrom": "yesterday"}), 400, "invalid_request"),
        (json!({"content": "x", "validFrom": 5}), 400, "invalid_request"),
        (json!({"content": "x", "consolidate": "yes"}), 400, "invalid_request"),
        (json!({"content": "x", "consolidate": true}), 503, "not_configured"),
        (json!({"content": "The user drives a Tesla.", "supersedes": [id(&b)]}), 400, "invalid_request"),
    ] {
        let r = api.post("/memories", body.clone());
        assert_eq!((r.status, code(&r)), (status, code_.to_owned()), "{body}: {}", String::from_utf8_lossy(&r.body));
    }
    let after = api.count("SELECT count(*) FROM memories") + api.count("SELECT count(*) FROM memory_versions");
    assert_eq!(after, before, "nothing stored");
    assert_eq!(api.get(&format!("/memories/{}", id(&b))).body_json()["invalidAt"], Json::Null);
    for q in ["asOf=soon", "asOf=2026-01-01T00:00:00Z&includeSuperseded=1", "includeSuperseded=2"] {
        assert_eq!(api.get(&format!("/memories?{q}")).status, 400, "{q}");
        assert_eq!(api.get(&format!("/memories/search?q=x&{q}")).status, 400, "{q}");
    }
}

#[test]
fn the_newer_of_two_facts_about_one_subject_ranks_first() {
    for api in [Api::new(), Api::new().with_embeddings()] {
        // The older fact matches the question better by its words; the newer one is about the
        // same subject and was said later: it comes first, and both say why.
        store(&api, json!({"content": "The user's sister drives a red Volvo car.", "score": 0.9}));
        api.now.set(api.now.get() + 30 * DAY);
        store(&api, json!({"content": "The user's sister sold the Volvo and drives a bike now.", "score": 0.5}));
        let r = api.get("/memories/search?q=what+car+does+my+sister+drive+volvo");
        let hits = r.body_json()["results"].as_array().unwrap().clone();
        let order: Vec<&str> = hits.iter().map(|h| h["memory"]["content"].as_str().unwrap()).collect();
        assert_eq!(
            order,
            ["The user's sister sold the Volvo and drives a bike now.", "The user's sister drives a red Volvo car."]
        );
        assert!(hits[0]["why"].as_str().unwrap().contains("newer than"), "{}", hits[0]["why"]);
        assert!(hits[0]["score"].as_f64() >= hits[1]["score"].as_f64());
        // Facts stored in the same instant are not news to one another; unrelated ones never move.
        let api = Api::new();
        store(&api, json!({"content": "The user likes green tea.", "score": 0.9}));
        api.now.set(api.now.get() + DAY);
        store(&api, json!({"content": "The user's tea kettle is red.", "score": 0.1}));
        assert_eq!(contents(&api, "/memories/search?q=green+tea")[0], "The user likes green tea.");
    }
}

#[test]
fn keywords_that_name_a_fact_find_it_before_a_newer_fact_near_it() {
    let api = Api::new().with_embeddings();
    for other in
        ["The user lives in Lisbon.", "The user has two cats.", "The user works nights.", "The user reads sci-fi."]
    {
        store(&api, json!({ "content": other }));
    }
    store(&api, json!({"content": "The user runs eight kilometres three times a week."}));
    store(&api, json!({"content": "The user had knee surgery in the spring at the city clinic."}));
    api.now.set(api.now.get() + 30 * DAY);
    // Near the surgery by its vector (the test vectors count shared words), about running.
    store(&api, json!({"content": "The user stopped running in the spring after a knee injury at the city park."}));
    let r = api.get("/memories/search?q=knee+surgery");
    let hits = r.body_json()["results"].as_array().unwrap().clone();
    assert_eq!(
        hits[0]["memory"]["content"], "The user had knee surgery in the spring at the city clinic.",
        "{hits:#?}"
    );
    // Asked as a question, the newer fact may come first: the rule keeps named facts only.
    let r = api.get("/memories/search?q=what+about+the+knee+surgery");
    let hits = r.body_json()["results"].as_array().unwrap().clone();
    assert_eq!(
        hits[0]["memory"]["content"], "The user stopped running in the spring after a knee injury at the city park.",
        "{hits:#?}"
    );
}

#[test]
fn a_query_that_quotes_a_fact_finds_it_first() {
    for api in [Api::new(), Api::new().with_embeddings()] {
        // A newer fact that shares words (by its vector, it looks like the same subject) is
        // not a correction of a fact the query states: the stated fact comes first.
        for other in
            ["The user lives in Lisbon.", "The user has two cats.", "The user works nights.", "The user reads sci-fi."]
        {
            store(&api, json!({ "content": other }));
        }
        store(&api, json!({"content": "The user's favourite colour is teal."}));
        api.now.set(api.now.get() + 60_000);
        store(&api, json!({"content": "Teal ducks are the user's favourite birds at the lake."}));
        let r = api.get("/memories/search?q=favourite+colour+is+teal");
        let hits = r.body_json()["results"].as_array().unwrap().clone();
        assert_eq!(hits[0]["memory"]["content"], "The user's favourite colour is teal.", "{hits:#?}");
        assert!(hits[0]["score"].as_f64() >= hits[1]["score"].as_f64());
        // It names the fact (every word of it, no question): the newer one never took its place.
        assert!(!hits[0]["why"].as_str().unwrap().contains("older than"), "{}", hits[0]["why"]);
    }
    for api in [Api::new(), Api::new().with_embeddings()] {
        store(&api, json!({"content": "The user's sister drives a red Volvo car.", "score": 0.9}));
        api.now.set(api.now.get() + 30 * DAY);
        store(&api, json!({"content": "The user's sister sold the Volvo and drives a bike now.", "score": 0.5}));
        // A question about a fact is no quote: its correction still comes first...
        let order = contents(&api, "/memories/search?q=what+car+does+my+sister+drive+volvo");
        assert_eq!(order[0], "The user's sister sold the Volvo and drives a bike now.");
        // ...and quoting the outdated fact finds it first: what it says is what was asked for.
        let order = contents(&api, "/memories/search?q=sister+drives+a+red+Volvo");
        assert_eq!(order[0], "The user's sister drives a red Volvo car.");
    }
}

#[test]
fn consolidate_honours_what_supersedes_names() {
    let api = Api::new().with_model();
    let decide = |list: Json| completion(&json!({ "memory": list }).to_string());
    let tea = store(&api, json!({"content": "The user likes green tea."}));
    let acme = store(&api, json!({"content": "The user works at Acme."}));
    let count = || api.count("SELECT count(*) FROM memories") + api.count("SELECT count(*) FROM memory_versions");
    let before = count();
    // Checked before the model is asked: unknown 404, retired 409, nothing stored, no model call.
    for (ids, status) in [(json!(["mem_nope"]), 404), (json!([id(&acme), "mem_nope"]), 404)] {
        let r = api
            .post("/memories", json!({"content": "The user likes black tea.", "consolidate": true, "supersedes": ids}));
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!((count(), api.model.requests.borrow().len()), (before, 0));
    // The model says the fact is already known (NONE): still stored, superseding what was named.
    api.model.reply(Ok(decide(json!([{"id": id(&tea), "event": "NONE"}]))));
    let r = api.post(
        "/memories",
        json!({"content": "The user likes black tea.", "consolidate": true, "supersedes": [id(&acme)]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let black = r.body_json();
    assert_eq!(black["content"], "The user likes black tea.");
    assert_eq!(api.get(&format!("/memories/{}", id(&acme))).body_json()["supersededBy"], black["id"]);
    assert_eq!(api.get(&format!("/memories/{}", id(&tea))).body_json()["invalidAt"], Json::Null);
    // Acme no longer holds: naming it again is 409, before any model call.
    let asked = api.model.requests.borrow().len();
    let r = api.post(
        "/memories",
        json!({"content": "The user likes oolong.", "consolidate": true, "supersedes": [id(&acme)]}),
    );
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.model.requests.borrow().len(), asked);
}

#[test]
fn consolidate_asks_the_model_and_retires_what_it_replaces() {
    let api = Api::new().with_model();
    // Nothing similar: stored without a model call.
    let paris = store(&api, json!({"content": "The user lives in Paris.", "consolidate": true}));
    assert_eq!(api.model.requests.borrow().len(), 0);
    // The model updates the old fact: the new one supersedes it.
    let decide = |list: Json| completion(&json!({ "memory": list }).to_string());
    api.model.reply(Ok(decide(json!([{"id": id(&paris), "text": "The user lives in Berlin.", "event": "UPDATE"}]))));
    let r = api
        .post("/memories", json!({"content": "The user lives in Berlin now.", "consolidate": true, "tags": ["home"]}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let berlin = r.body_json();
    assert_eq!(berlin["content"], "The user lives in Berlin now.");
    let asked = api.model.requests.borrow()[0]["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(asked.contains(&id(&paris)) && asked.contains("New fact: The user lives in Berlin now."), "{asked}");
    assert_eq!(api.get(&format!("/memories/{}", id(&paris))).body_json()["supersededBy"], berlin["id"]);
    assert_eq!(contents(&api, "/memories"), ["The user lives in Berlin now."]);
    // NONE: already said; the answer is that memory, unchanged, and nothing is stored.
    api.model.reply(Ok(decide(json!([{"id": id(&berlin), "event": "NONE"}]))));
    let r = api.post("/memories", json!({"content": "The user is living in Berlin.", "consolidate": true}));
    assert_eq!((r.status, r.body_json()["id"].clone()), (200, berlin["id"].clone()));
    assert_eq!(api.count("SELECT count(*) FROM memories"), 2);
    // A model that fails or answers nonsense: 503, nothing stored.
    api.model.reply(Ok(completion("no idea")));
    let r = api.post("/memories", json!({"content": "The user lives in Rome.", "consolidate": true}));
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.count("SELECT count(*) FROM memories"), 2);
}

#[test]
fn validity_travels_through_export_and_import_and_bad_records_are_refused() {
    let api = Api::new();
    let a = store(&api, json!({"content": "The user lives in Paris."}));
    store(&api, json!({"content": "The user lives in Berlin.", "supersedes": [id(&a)]}));
    store(&api, json!({"content": "The user lives in Paris.", "validFrom": "2030-01-01T00:00:00Z"}));
    let export = api.get("/export");
    assert_eq!(export.status, 200);
    let text = String::from_utf8(export.body.clone()).unwrap();
    let mut other = Api::new();
    other = other.named("other");
    let r = import(&other, &text);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(String::from_utf8(other.get("/export").body).unwrap(), text, "byte for byte");
    assert_eq!(contents(&other, "/memories").len(), 2);
    // Records the API could never produce.
    let lines: Vec<Json> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mutate = |f: &dyn Fn(&mut Json)| {
        let mut ls = lines.clone();
        let m = ls.iter_mut().find(|l| l["kind"] == "memory" && l["supersededBy"].is_string()).unwrap();
        f(m);
        ls.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n") + "\n"
    };
    for bad in [
        mutate(&|m| m["supersededBy"] = json!("mem_00000000-0000-4000-8000-000000000000")),
        mutate(&|m| m["supersededBy"] = m["id"].clone()),
        mutate(&|m| m["invalidAt"] = json!("2000-01-01T00:00:00.000Z")),
        mutate(&|m| m["invalidAt"] = Json::Null),
    ] {
        let mut fresh = Api::new();
        fresh = fresh.named("fresh");
        let r = import(&fresh, &bad);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(fresh.count("SELECT count(*) FROM memories"), 0);
    }
}

#[test]
fn an_import_refuses_a_circle_of_replacements_and_takes_a_chain() {
    let api = Api::new();
    let a = store(&api, json!({"content": "The user lives in Paris."}));
    let b = store(&api, json!({"content": "The user lives in Berlin.", "supersedes": [id(&a)]}));
    store(&api, json!({"content": "The user lives in Oslo.", "supersedes": [id(&b)]}));
    let text = String::from_utf8(api.get("/export").body).unwrap();
    // A → B → C, C holding: taken, and exported again byte for byte.
    let fresh = |name: &str| {
        let mut other = Api::new();
        other = other.named(name);
        other
    };
    let chain = fresh("chain");
    let r = import(&chain, &text);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(contents(&chain, "/memories"), ["The user lives in Oslo."]);
    assert_eq!(String::from_utf8(chain.get("/export").body).unwrap(), text);
    // The same memories with their chain closed into a circle: no memory would hold.
    let lines: Vec<Json> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let memory = |ls: &mut Vec<Json>, content: &str| -> usize {
        ls.iter().position(|l| l["kind"] == "memory" && l["content"] == content).unwrap()
    };
    let circle = |close: &dyn Fn(&mut Vec<Json>)| {
        let mut ls = lines.clone();
        close(&mut ls);
        ls.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n") + "\n"
    };
    let two = circle(&|ls| {
        // A ↔ B: B, retired by C, names A instead.
        let (a, b) = (memory(ls, "The user lives in Paris."), memory(ls, "The user lives in Berlin."));
        ls[b]["supersededBy"] = ls[a]["id"].clone();
    });
    let three = circle(&|ls| {
        // A → B → C → A: C retired too, replaced by A.
        let (a, c) = (memory(ls, "The user lives in Paris."), memory(ls, "The user lives in Oslo."));
        ls[c]["supersededBy"] = ls[a]["id"].clone();
        ls[c]["invalidAt"] = ls[c]["validFrom"].clone();
    });
    for (what, bad, n) in [("A <-> B", two, 2), ("A -> B -> C -> A", three, 3)] {
        let to = fresh("circle");
        let r = import(&to, &bad);
        assert_eq!(
            (r.status, code(&r)),
            (400, "invalid_request".to_owned()),
            "{what}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let message = r.body_json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(&format!("comes back to it ({n} memories in a circle)")), "{what}: {message}");
        assert_eq!(to.count("SELECT count(*) FROM memories"), 0, "{what}: nothing imported");
        assert_eq!(to.count("SELECT count(*) FROM memory_versions"), 0, "{what}: nothing imported");
    }
}

#[test]
fn a_batch_supersedes_too_all_or_nothing() {
    let api = Api::new();
    let a = store(&api, json!({"content": "The user works at Acme."}));
    let b = store(&api, json!({"content": "The user lives in Oslo."}));
    let before = api.count("SELECT count(*) FROM memories");
    let bad = json!({"memories": [
        {"content": "The user works at Globex.", "supersedes": [id(&a)]},
        {"content": "The user lives in Bergen.", "supersedes": ["mem_nope"]}
    ]});
    let r = api.post("/memories/batch", bad);
    assert_eq!((r.status, code(&r)), (404, "not_found".to_owned()), "{}", String::from_utf8_lossy(&r.body));
    assert!(r.body_json()["error"]["message"].as_str().unwrap().starts_with("memories[1]: "));
    assert_eq!(api.count("SELECT count(*) FROM memories"), before, "nothing stored");
    assert_eq!(api.get(&format!("/memories/{}", id(&a))).body_json()["invalidAt"], Json::Null, "nothing retired");
    let good = json!({"memories": [
        {"content": "The user works at Globex.", "supersedes": [id(&a)]},
        {"content": "The user lives in Bergen.", "supersedes": [id(&b)]}
    ]});
    let r = api.post("/memories/batch", good);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let stored = r.body_json()["memories"].clone();
    assert_eq!(api.get(&format!("/memories/{}", id(&a))).body_json()["supersededBy"], stored[0]["id"]);
    assert_eq!(api.get(&format!("/memories/{}", id(&b))).body_json()["supersededBy"], stored[1]["id"]);
    assert_eq!(contents(&api, "/memories"), ["The user lives in Bergen.", "The user works at Globex."]);
}
