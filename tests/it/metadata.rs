//! Metadata on sessions and memories, and the filters of lists, searches and `DELETE
//! /memories`, through the DO API on real SQLite: set on create, replaced by `PATCH`, copied by a
//! fork, merged by a duplicate, kept by versions; every filter (categories, all and any tags,
//! times, `metadata.<key>` compared as text, `sessionId`) on lists, recall by text and by
//! meaning, deletes, the sessions list and the search across sessions (its kept answers
//! included); and every refusal, hostile input included, a `400` that changes nothing.

use crate::support::{assert_near, db_at, embedding, Api};
use serde_json::{json, Value as Json};
use session_agent_api::http::Method;
use session_agent_api::Request;
use session_agent_core::sql::Sql;
use session_agent_core::store::schema;

fn ok(r: &session_agent_api::Response, status: u16) -> Json {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

fn refused(r: &session_agent_api::Response, why: &str) {
    let message = r.body_json()["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert_eq!(r.status, 400, "{why}: {}", String::from_utf8_lossy(&r.body));
    assert!(message.contains(why), "{why}: {message}");
}

/// Every row of the tables a metadata write or a filtered delete touches, as text.
fn state(api: &Api) -> String {
    let mut out = String::new();
    for t in ["sessions", "memories", "memory_versions", "memories_fts", "vectors", "messages"] {
        for r in api.db.query(&format!("SELECT * FROM {t} ORDER BY rowid"), &[]).unwrap() {
            out.push_str(&format!("{t}: {:?}\n", r.0));
        }
    }
    out
}

fn contents(r: &session_agent_api::Response) -> Vec<String> {
    let body = ok(r, 200);
    let list = body.get("memories").or_else(|| body.get("results")).unwrap().as_array().unwrap().clone();
    list.iter().map(|m| m.get("memory").unwrap_or(m)["content"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
}

fn ids(r: &session_agent_api::Response, key: &str) -> Vec<String> {
    let body = ok(r, 200);
    body[key].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn sessions_carry_metadata_set_on_create_and_replaced_by_patch() {
    let api = Api::new();
    let s = ok(&api.post("/sessions", json!({"name": "a", "metadata": {"user": "u-1", "n": 30.0, "f": 0.5}})), 201);
    let id = s["id"].as_str().unwrap().to_owned();
    assert_eq!(s["metadata"], json!({"user": "u-1", "n": 30, "f": 0.5}), "a whole number is stored as one");
    assert_eq!(ok(&api.get(&format!("/sessions/{id}")), 200)["metadata"], s["metadata"]);
    // Absent or null: {}; a session registered by a write has {} too.
    assert_eq!(ok(&api.post("/sessions", json!({"name": "b", "metadata": null})), 201)["metadata"], json!({}));
    api.append("chat-1", "m1", None, "hello");
    assert_eq!(ok(&api.get("/sessions/chat-1"), 200)["metadata"], json!({}));
    // PATCH: name, metadata or both; the other stays; updatedAt moves.
    let p = ok(&api.patch(&format!("/sessions/{id}"), json!({"metadata": {"user": "u-2"}})), 200);
    assert_eq!((p["name"].as_str(), &p["metadata"]), (Some("a"), &json!({"user": "u-2"})));
    assert!(p["updatedAt"].as_str() > s["updatedAt"].as_str());
    let p = ok(&api.patch(&format!("/sessions/{id}"), json!({"name": "renamed"})), 200);
    assert_eq!(p["metadata"], json!({"user": "u-2"}), "a rename keeps the metadata");
    let p = ok(&api.patch(&format!("/sessions/{id}"), json!({"name": "both", "metadata": {}})), 200);
    assert_eq!((p["name"].as_str(), &p["metadata"]), (Some("both"), &json!({})));
    let before = state(&api);
    for body in [json!({}), json!({"name": null, "metadata": null}), json!({"other": 1})] {
        refused(&api.patch(&format!("/sessions/{id}"), body), "new name, its new metadata, or both");
    }
    assert_eq!(api.patch("/sessions/nope", json!({"metadata": {}})).status, 404);
    assert_eq!(state(&api), before);
    // A fork and a split copy it, as they copy model and source.
    ok(&api.patch("/sessions/chat-1", json!({"metadata": {"team": "x"}})), 200);
    let fork = ok(&api.post("/sessions/chat-1/fork", json!({"atMessageId": "m1"})), 201);
    assert_eq!(fork["metadata"], json!({"team": "x"}));
    let split = ok(&api.post("/sessions/chat-1/split", json!({"summary": "Said hello."})), 201);
    assert_eq!(split["metadata"], json!({"team": "x"}));
}

#[test]
fn bad_metadata_is_refused_naming_the_key_and_changes_nothing() {
    let api = Api::new();
    let sid = ok(&api.post("/sessions", json!({"name": "s", "metadata": {"keep": 1}})), 201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mid = ok(&api.post("/memories", json!({"content": "A fact.", "metadata": {"keep": 1}})), 201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let seventeen: serde_json::Map<String, Json> = (0..17).map(|i| (format!("k{i}"), json!(i))).collect();
    let huge = "x".repeat(1_000_000);
    let cases = [
        (Json::Object(seventeen), "at most 16 keys"),
        (json!({"a": {"b": 1}}), "metadata.a is nested"),
        (json!({"a": [1, 2]}), "metadata.a is nested"),
        (json!({"a": null}), "metadata.a is null"),
        (json!({"a b": 1}), "\"a b\""),
        (json!({"": 1}), "\"\" is not a metadata key"),
        (json!({"clé": 1}), "\"clé\""),
        (json!({"k".repeat(65): 1}), "is not a metadata key"),
        (json!({"s": "é".repeat(513)}), "metadata.s is longer than 512"),
        (json!({"s": huge}), "metadata.s is longer than 512"),
        (json!("x"), "must be an object"),
        (json!([]), "must be an object"),
        (json!(3), "must be an object"),
    ];
    let before = state(&api);
    for (meta, why) in &cases {
        refused(&api.post("/sessions", json!({"name": "n", "metadata": meta})), why);
        refused(&api.patch(&format!("/sessions/{sid}"), json!({"metadata": meta})), why);
        refused(&api.post("/memories", json!({"content": "New.", "metadata": meta})), why);
        refused(&api.patch(&format!("/memories/{mid}"), json!({"metadata": meta})), why);
        let batch = json!({"memories": [{"content": "One."}, {"content": "Two.", "metadata": meta}]});
        let r = api.post("/memories/batch", batch);
        refused(&r, why);
        assert!(r.body_json()["error"]["message"].as_str().unwrap().starts_with("memories[1]: "));
    }
    assert_eq!(state(&api), before, "nothing changed");
    // A long key is cut in the message, never echoed whole.
    let r = api.post("/sessions", json!({"name": "n", "metadata": {"k".repeat(100_000): 1}}));
    assert!(r.body.len() < 400, "{}", r.body.len());
    // 16 keys of 64 characters with 512-character strings: the most there is, accepted.
    let most: serde_json::Map<String, Json> = (0..16).map(|i| (format!("{i:0>64}"), json!("é".repeat(512)))).collect();
    let m = ok(&api.post("/memories", json!({"content": "Big.", "metadata": most.clone()})), 201);
    assert_eq!(m["metadata"], Json::Object(most));
}

#[test]
fn memories_carry_metadata_through_merges_patches_and_versions() {
    let api = Api::new();
    let m =
        ok(&api.post("/memories", json!({"content": "The user likes tea.", "metadata": {"src": "form", "n": 1}})), 201);
    let id = m["id"].as_str().unwrap().to_owned();
    assert_eq!(m["metadata"], json!({"src": "form", "n": 1}));
    // A duplicate merges the request's keys over the stored ones.
    let merged =
        ok(&api.post("/memories", json!({"content": "the user likes TEA.", "metadata": {"n": 2, "x": true}})), 200);
    assert_eq!(merged["metadata"], json!({"src": "form", "n": 2, "x": true}));
    // A duplicate without metadata (the tools, extraction) keeps what is stored.
    ok(&api.post("/memories", json!({"content": "The user likes tea."})), 200);
    // Merged past 16 keys: 400, nothing changed.
    let many: serde_json::Map<String, Json> = (0..14).map(|i| (format!("k{i}"), json!(i))).collect();
    let before = state(&api);
    refused(
        &api.post("/memories", json!({"content": "The user likes tea.", "metadata": many})),
        "its metadata would hold 17 keys",
    );
    assert_eq!(state(&api), before);
    // PATCH replaces it whole; null leaves it; {} clears it.
    let p = ok(&api.patch(&format!("/memories/{id}"), json!({"metadata": {"only": "this"}})), 200);
    assert_eq!(p["metadata"], json!({"only": "this"}));
    let p = ok(&api.patch(&format!("/memories/{id}"), json!({"metadata": null, "score": 0.5})), 200);
    assert_eq!(p["metadata"], json!({"only": "this"}));
    let p = ok(&api.patch(&format!("/memories/{id}"), json!({"metadata": {}})), 200);
    assert_eq!(p["metadata"], json!({}));
    let versions = ok(&api.get(&format!("/memories/{id}/history")), 200)["versions"].clone();
    let metas: Vec<&Json> = versions.as_array().unwrap().iter().map(|v| &v["metadata"]).collect();
    assert_eq!(
        metas,
        [
            &json!({"src": "form", "n": 1}),
            &json!({"src": "form", "n": 2, "x": true}),
            &json!({"src": "form", "n": 2, "x": true}),
            &json!({"only": "this"}),
            &json!({"only": "this"}),
            &json!({}),
        ]
    );
    // The memory frame carries it.
    api.events.take("*");
    ok(&api.patch(&format!("/memories/{id}"), json!({"metadata": {"f": 1}})), 200);
    assert_eq!(api.events.take("*")[0]["memory"]["metadata"], json!({"f": 1}));
}

#[test]
fn metadata_filters_compare_the_stored_value_as_text() {
    let api = Api::new();
    let stored = [
        ("number 30", json!({"n": 30})),
        ("string 30", json!({"n": "30"})),
        ("string 30.0", json!({"n": "30.0"})),
        ("number 30.5", json!({"n": 30.5})),
        ("number 1e3", json!({"n": 1e3})),
        ("true", json!({"flag": true})),
        ("string true", json!({"flag": "true"})),
        ("false", json!({"flag": false})),
        ("dotted", json!({"a.b": "x", "a": "y"})),
        ("quoted", json!({"q": "\"x\""})),
        ("amp", json!({"q": "a&b=c é"})),
        ("none", json!({})),
    ];
    for (content, meta) in &stored {
        ok(&api.post("/memories", json!({"content": content, "metadata": meta})), 201);
    }
    let q = |filter: &str| {
        let mut got = contents(&api.get(&format!("/memories?{filter}")));
        got.sort();
        got
    };
    assert_eq!(q("metadata.n=30"), ["number 30", "string 30"]);
    assert_eq!(q("metadata.n=30.0"), ["string 30.0"], "the number is stored as 30");
    assert_eq!(q("metadata.n=30.5"), ["number 30.5"]);
    assert_eq!(q("metadata.n=1000"), ["number 1e3"]);
    assert_eq!(q("metadata.n=1e3"), Vec::<String>::new());
    assert_eq!(q("metadata.flag=true"), ["string true", "true"]);
    assert_eq!(q("metadata.flag=false"), ["false"]);
    assert_eq!(q("metadata.flag=1"), Vec::<String>::new(), "true is not 1");
    assert_eq!(q("metadata.a.b=x"), ["dotted"], "a key with dots is one key");
    assert_eq!(q("metadata.a=y"), ["dotted"]);
    assert_eq!(q("metadata.a=x"), Vec::<String>::new());
    assert_eq!(q("metadata.q=%22x%22"), ["quoted"]);
    assert_eq!(q("metadata.q=x"), Vec::<String>::new());
    assert_eq!(q("metadata.q=a%26b%3Dc+%C3%A9"), ["amp"]);
    assert_eq!(q("metadata.missing=x"), Vec::<String>::new());
    // Every filter must match; one key asked twice with two values matches nothing.
    assert_eq!(q("metadata.a=y&metadata.a.b=x"), ["dotted"]);
    assert_eq!(q("metadata.a=y&metadata.a.b=z"), Vec::<String>::new());
    assert_eq!(q("metadata.n=30&metadata.n=31"), Vec::<String>::new());
    // Search and the JSON body of DELETE /memories read them the same way.
    assert_eq!(contents(&api.get("/memories/search?q=number&metadata.n=30")), ["number 30"]);
    let before = api.count("SELECT count(*) FROM memories");
    let r = api.send(Request::new(Method::Delete, "/memories").json(&json!({"metadata": {"flag": true}})));
    assert_eq!(ok(&r, 200), json!({"deleted": 2}));
    assert_eq!(api.count("SELECT count(*) FROM memories"), before - 2);
    let r = api.send(Request::new(Method::Delete, "/memories").json(&json!({"metadata": {"n": 30.0}})));
    assert_eq!(ok(&r, 200), json!({"deleted": 2}), "a number in the body is its JSON text: 30");
}

#[test]
fn every_memory_filter_selects_and_they_combine() {
    let api = Api::new();
    let at = |iso: &str| session_agent_core::time::parse_iso(iso).unwrap() - 1;
    api.now.set(at("2026-01-10T00:00:00.000Z"));
    let a = ok(&api.post("/memories", json!({"content": "Alpha note", "tags": ["x", "y"], "metadata": {"p": 1}})), 201);
    api.now.set(at("2026-02-10T00:00:00.000Z"));
    ok(
        &api.post(
            "/memories",
            json!({"content": "Beta note", "category": "daily", "tags": ["y"], "expiresAt": "2099-01-01T00:00:00Z"}),
        ),
        201,
    );
    api.now.set(at("2026-03-10T00:00:00.000Z"));
    ok(
        &api.post(
            "/memories",
            json!({"content": "Gamma note", "category": "conversation", "sessionId": "s1", "tags": ["z"], "metadata": {"p": 2}}),
        ),
        201,
    );
    api.now.set(at("2026-04-10T00:00:00.000Z"));
    ok(&api.patch(&format!("/memories/{}", a["id"].as_str().unwrap()), json!({"score": 0.9})), 200);
    let q = |filter: &str| contents(&api.get(&format!("/memories?{filter}")));
    let s = |filter: &str| contents(&api.get(&format!("/memories/search?q=note&{filter}")));
    let cases: [(&str, &[&str]); 20] = [
        ("", &["Gamma note", "Beta note", "Alpha note"]),
        ("category=core", &["Alpha note"]),
        ("category=core,daily", &["Beta note", "Alpha note"]),
        ("category=core&category=conversation", &["Gamma note", "Alpha note"]),
        ("category=+daily+,+core", &["Beta note", "Alpha note"]),
        ("tag=y", &["Beta note", "Alpha note"]),
        ("tag=x&tag=y", &["Alpha note"]),
        ("tag=x&tag=z", &[]),
        ("anyTag=x&anyTag=z", &["Gamma note", "Alpha note"]),
        ("tag=y&anyTag=x&anyTag=z", &["Alpha note"]),
        ("tag=%20y", &[]),
        ("createdAfter=2026-02-01", &["Gamma note", "Beta note"]),
        ("createdBefore=2026-02-10T00:00:00.000Z", &["Alpha note"]),
        ("createdAfter=2026-02-09T23:59:59.999Z&createdBefore=2026-02-10T00:00:00.001Z", &["Beta note"]),
        ("createdAfter=2026-02-10T00:00:00.000Z", &["Gamma note"]),
        ("updatedAfter=2026-04-01T00:00:00%2B00:00", &["Alpha note"]),
        ("updatedBefore=2026-04-01", &["Gamma note", "Beta note"]),
        ("metadata.p=1&category=core,daily", &["Alpha note"]),
        ("sessionId=s1", &["Gamma note"]),
        ("sessionId=s1&metadata.p=1", &[]),
    ];
    for (filter, want) in cases {
        assert_eq!(q(filter), want, "GET /memories?{filter}");
        let mut got = s(filter);
        let mut want = want.to_vec();
        got.sort();
        want.sort();
        assert_eq!(got, want, "GET /memories/search?q=note&{filter}");
    }
    // Pages keep to the filters.
    let r = ok(&api.get("/memories?anyTag=y&anyTag=z&limit=2"), 200);
    assert_eq!(r["memories"].as_array().unwrap().len(), 2);
    let next = r["nextCursor"].as_str().unwrap();
    assert_eq!(contents(&api.get(&format!("/memories?anyTag=y&anyTag=z&limit=2&cursor={next}"))), ["Alpha note"]);
    // DELETE /memories: the query's filters, or the body's (which win).
    let r = api.send(Request::new(Method::Delete, "/memories?tag=z").json(&json!({"tag": ["x", "y"]})));
    assert_eq!(ok(&r, 200), json!({"deleted": 1}));
    assert_eq!(q(""), ["Gamma note", "Beta note"]);
    let r = api.send(Request::new(Method::Delete, "/memories?createdBefore=2026-03-01&category=daily"));
    assert_eq!(ok(&r, 200), json!({"deleted": 1}));
    assert_eq!(q(""), ["Gamma note"]);
}

#[test]
fn recall_by_meaning_keeps_to_the_filters() {
    let api = Api::new().with_embeddings();
    // Two words the test embedding puts in one dimension: the same meaning, no word in common.
    let word = |i: usize| format!("word{i}");
    let first = embedding(&word(0));
    let twin = (1..).map(word).find(|w| embedding(w) == first).unwrap();
    ok(&api.post("/memories", json!({"content": word(0), "metadata": {"u": "a"}})), 201);
    ok(&api.post("/memories", json!({"content": "The user rides a red bicycle.", "metadata": {"u": "b"}})), 201);
    let search = |q: &str| ok(&api.get(&format!("/memories/search?q={q}")), 200)["results"].clone();
    let hits = search(&twin);
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    assert_eq!(hits[0]["signals"]["text"].as_f64(), Some(0.0), "no word matched");
    assert_near(hits[0]["signals"]["semantic"].as_f64(), 1.0);
    assert_eq!(search(&format!("{twin}&metadata.u=b")), json!([]), "a vector candidate outside the filter");
    assert_eq!(search(&format!("{twin}&createdAfter=2030-01-01")), json!([]));
    assert_eq!(search(&format!("{twin}&metadata.u=a")).as_array().unwrap().len(), 1);
    // By text and meaning alike.
    let hits = search("red+bicycle&metadata.u=b");
    assert_eq!(hits[0]["memory"]["metadata"], json!({"u": "b"}));
    assert_eq!(search("red+bicycle&metadata.u=a").as_array().unwrap().len(), 0);
}

#[test]
fn bad_filters_are_400_and_change_nothing() {
    let api = Api::new();
    ok(&api.post("/memories", json!({"content": "A fact.", "tags": ["t"], "metadata": {"k": 1}})), 201);
    api.append("s1", "m1", None, "deploy friday");
    let before = state(&api);
    let seventeen = (0..17).map(|i| format!("metadata.k{i}=v")).collect::<Vec<_>>().join("&");
    let tags17 = (0..17).map(|i| format!("tag=t{i}")).collect::<Vec<_>>().join("&");
    let long_value = format!("metadata.k={}", "v".repeat(513));
    let memory_cases = [
        ("metadata.=x", "metadata.<key> filter key \"\""),
        ("metadata.a%20b=x", "\"a b\""),
        ("metadata.cl%C3%A9=x", "\"clé\""),
        ("metadata.k=", "metadata.k must be a value of 1-512"),
        ("metadata.k", "metadata.k must be a value"),
        (long_value.as_str(), "metadata.k must be a value of 1-512"),
        (seventeen.as_str(), "at most 16 metadata.<key> filters"),
        ("category=nope", "category must be"),
        ("category=core,", "category must be"),
        ("category=", "category must be"),
        ("tag=", "tag must be a tag"),
        ("tag=%01", "tag must be a tag"),
        ("anyTag=", "anyTag must be a tag"),
        (tags17.as_str(), "tag is given at most 16 times"),
        ("createdAfter=2026-13-40", "createdAfter must be an ISO-8601"),
        ("createdAfter=2026-02-30T00:00:00Z", "createdAfter must be"),
        ("createdBefore=1969-12-31", "createdBefore must be"),
        ("updatedAfter=yesterday", "updatedAfter must be"),
        ("updatedBefore=2026-11-22T11:00:00+02:00", "updatedBefore must be"),
        ("createdAfter=2026-01-01&createdAfter=2026-01-02", "createdAfter is given more than once"),
        ("sessionId=a&sessionId=b", "sessionId is given more than once"),
        ("sessionId=bad%20id", "sessionId"),
    ];
    for (query, why) in memory_cases {
        refused(&api.get(&format!("/memories?{query}")), why);
        refused(&api.get(&format!("/memories/search?q=fact&{query}")), why);
        refused(&api.delete(&format!("/memories?{query}")), why);
    }
    for (query, why) in &memory_cases[..7] {
        refused(&api.get(&format!("/sessions?{query}")), why);
        refused(&api.get(&format!("/search?q=deploy&{query}")), why);
    }
    // Bodies of DELETE /memories of the wrong shape.
    for (body, why) in [
        (json!({"metadata": {"a": {"b": 1}}}), "metadata.a must be a string, a number or a boolean"),
        (json!({"metadata": {"a": null}}), "metadata.a must be"),
        (json!({"metadata": "k=1"}), "metadata must be an object"),
        (json!({"metadata": {"a b": 1}}), "\"a b\""),
        (json!({"metadata": {"a": ""}}), "metadata.a must be a value of 1-512"),
        (json!({"tag": 3}), "tag must be a string or an array of strings"),
        (json!({"anyTag": [1]}), "anyTag must be a string or an array of strings"),
        (json!({"category": ["nope"]}), "category must be"),
        (json!({"createdAfter": ["2026-01-01"]}), "createdAfter must be a string"),
        (json!({"createdAfter": "2026-13-01"}), "createdAfter must be an ISO-8601"),
        (json!({"colour": "red"}), "unknown field"),
    ] {
        refused(&api.send(Request::new(Method::Delete, "/memories").json(&body)), why);
    }
    // The query is checked even where the body overrides it.
    refused(
        &api.send(Request::new(Method::Delete, "/memories?metadata.=x").json(&json!({"metadata": {"k": 1}}))),
        "\"\"",
    );
    assert_eq!(state(&api), before, "nothing changed");
    // Parameters an operation does not take are ignored: metadata[k] is not metadata.k.
    assert_eq!(contents(&api.get("/memories?metadata[k]=2")), ["A fact."]);
    assert_eq!(ok(&api.get("/sessions?tag=x&metadata=1"), 200)["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn sessions_list_and_cross_session_search_by_session_metadata() {
    let api = Api::new();
    for (sid, plan) in [("s1", "pro"), ("s2", "free"), ("s3", "pro"), ("s4", "pro")] {
        api.append(sid, "m1", None, &format!("deploy the {plan} plan"));
        ok(&api.patch(&format!("/sessions/{sid}"), json!({"metadata": {"plan": plan, "seats": 3}})), 200);
    }
    api.append("s5", "m1", None, "deploy without metadata");
    assert_eq!(ids(&api.get("/sessions?metadata.plan=pro"), "sessions"), ["s4", "s3", "s1"]);
    assert_eq!(ids(&api.get("/sessions?metadata.plan=pro&metadata.seats=3"), "sessions"), ["s4", "s3", "s1"]);
    assert_eq!(ids(&api.get("/sessions?metadata.seats=%223%22"), "sessions"), Vec::<String>::new());
    assert_eq!(ids(&api.get("/sessions?metadata.plan=gold"), "sessions"), Vec::<String>::new());
    // Pages within the selection.
    let page = ok(&api.get("/sessions?metadata.plan=pro&limit=2"), 200);
    assert_eq!(ids(&api.get("/sessions?metadata.plan=pro&limit=2"), "sessions"), ["s4", "s3"]);
    let next = page["nextCursor"].as_str().unwrap();
    let rest = api.get(&format!("/sessions?metadata.plan=pro&limit=2&cursor={next}"));
    assert_eq!(ok(&rest, 200)["nextCursor"], Json::Null);
    assert_eq!(ids(&rest, "sessions"), ["s1"]);
    // The search across sessions: the hits of the sessions whose metadata matches.
    let sessions_of = |r: &session_agent_api::Response| {
        let mut got: Vec<String> = ok(r, 200)["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["sessionId"].as_str().unwrap().to_owned())
            .collect();
        got.sort();
        got
    };
    assert_eq!(sessions_of(&api.get("/search?q=deploy")), ["s1", "s2", "s3", "s4", "s5"]);
    assert_eq!(sessions_of(&api.get("/search?q=deploy&metadata.plan=pro")), ["s1", "s3", "s4"]);
    // Asked again (kept answers): the filtered and the unfiltered search stay apart.
    assert_eq!(sessions_of(&api.get("/search?q=deploy")), ["s1", "s2", "s3", "s4", "s5"]);
    assert_eq!(sessions_of(&api.get("/search?q=deploy&metadata.plan=pro")), ["s1", "s3", "s4"]);
    assert_eq!(sessions_of(&api.get("/search?q=deploy&metadata.plan=free")), ["s2"]);
    // A session's new metadata is seen at once, by the list and by a search kept before.
    ok(&api.patch("/sessions/s2", json!({"metadata": {"plan": "pro"}})), 200);
    assert_eq!(sessions_of(&api.get("/search?q=deploy&metadata.plan=pro")), ["s1", "s2", "s3", "s4"]);
    assert_eq!(sessions_of(&api.get("/search?q=deploy&metadata.plan=free")), Vec::<String>::new());
    assert_eq!(ids(&api.get("/sessions?metadata.plan=pro"), "sessions"), ["s2", "s4", "s3", "s1"]);
}

#[test]
fn version_10_data_migrates_to_empty_metadata() {
    let db = db_at(10);
    db.execute(
        "INSERT INTO sessions (id, name, created_at, updated_at, touch_seq) VALUES ('old', 'old', 't', 't', 1)",
        &[],
    )
    .unwrap();
    db.execute(
        "INSERT INTO memories (id, content, norm, category, tags, created_at, updated_at) VALUES
           ('mem_old', 'Old fact.', 'old fact.', 'core', '[]', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        &[],
    )
    .unwrap();
    db.execute(
        "INSERT INTO memory_versions (memory_id, content, tags, category, at, by)
         VALUES ('mem_old', 'Old fact.', '[]', 'core', '2026-01-01T00:00:00.000Z', 'api')",
        &[],
    )
    .unwrap();
    assert_eq!(schema::migrate(&db, "t").unwrap(), crate::versions::after(10));
    let api = Api::with_db(db);
    assert_eq!(ok(&api.get("/sessions/old"), 200)["metadata"], json!({}));
    assert_eq!(ok(&api.get("/memories/mem_old"), 200)["metadata"], json!({}));
    // And to validity (0012): it held from when it was stored.
    let old = ok(&api.get("/memories/mem_old"), 200);
    assert_eq!((old["validFrom"].clone(), old["invalidAt"].clone()), (old["createdAt"].clone(), Json::Null));
    assert_eq!(ok(&api.get("/memories/mem_old/history"), 200)["versions"][0]["metadata"], json!({}));
    assert_eq!(contents(&api.get("/memories?metadata.k=1")), Vec::<String>::new());
}

/// Every filter at its most (16 `metadata.<key>`, 16 `tag`, 16 `anyTag`, the three categories,
/// the four times, `asOf`, `sessionId`), with a query of the most words and a page's cursor: a
/// Durable Object binds at most 100 parameters per statement, and a list bound as `IN (?, …)`
/// or four per metadata key passed it. Each list is one parameter: every route answers, and
/// still selects exactly.
#[test]
fn the_widest_filters_fit_in_one_statement() {
    let api = Api::new();
    let tags: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
    let meta: serde_json::Map<String, Json> = (0..16).map(|i| (format!("k{i}"), json!(format!("v{i}")))).collect();
    let words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron";
    for n in 0..3 {
        let r = api.post(
            "/memories",
            json!({"content": format!("{words} note {n}"), "category": "conversation", "sessionId": "s1",
                   "tags": tags, "metadata": meta}),
        );
        ok(&r, 201);
    }
    ok(&api.post("/memories", json!({"content": format!("{words} other"), "tags": tags})), 201);
    api.append("s1", "m1", None, words);
    ok(&api.patch("/sessions/s1", json!({"metadata": meta})), 200);
    let mut filters: Vec<String> = meta.iter().map(|(k, v)| format!("metadata.{k}={}", v.as_str().unwrap())).collect();
    filters.extend(tags.iter().map(|t| format!("tag={t}")));
    filters.extend(tags.iter().map(|t| format!("anyTag={t}")));
    filters.push("category=core,daily,conversation".into());
    filters.extend(
        [
            "createdAfter=2000-01-01T00:00:00Z",
            "createdBefore=2999-01-01T00:00:00Z",
            "updatedAfter=2000-01-01T00:00:00Z",
            "updatedBefore=2999-01-01T00:00:00Z",
            "sessionId=s1",
        ]
        .map(str::to_owned),
    );
    let all = filters.join("&");
    let page = ok(&api.get(&format!("/memories?{all}&asOf=2999-01-01T00:00:00Z&limit=2")), 200);
    assert_eq!(page["memories"].as_array().unwrap().len(), 2);
    let next = page["nextCursor"].as_str().expect("a second page").to_owned();
    let rest = contents(&api.get(&format!("/memories?{all}&asOf=2999-01-01T00:00:00Z&limit=2&cursor={next}")));
    assert_eq!(rest.len(), 1, "the three memories of s1, not the agent's");
    let q = words.replace(' ', "+");
    let found = contents(&api.get(&format!("/memories/search?q={q}&{all}&asOf=2999-01-01T00:00:00Z&limit=50")));
    assert_eq!(found.len(), 3, "{found:?}");
    // One key with another value: nothing.
    let other = all.replace("metadata.k15=v15", "metadata.k15=v16");
    assert_eq!(contents(&api.get(&format!("/memories/search?q={q}&{other}"))).len(), 0);
    let meta_filters = filters[..16].join("&");
    assert_eq!(ids(&api.get(&format!("/sessions?{meta_filters}&limit=1")), "sessions"), ["s1"]);
    let hits = ok(&api.get(&format!("/search?q={q}&{meta_filters}")), 200);
    assert_eq!(hits["results"].as_array().unwrap().len(), 1);
    let r = api.send(Request::new(Method::Delete, &format!("/memories?{all}")));
    assert_eq!(ok(&r, 200), json!({"deleted": 3}));
}
