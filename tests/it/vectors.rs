//! Vectors of every store and the index kept in memory, on real SQLite with the hashed test
//! embeddings (deterministic: texts sharing words are near): messages and search entries get
//! vectors after the answer, searches fuse words and meaning, the index loads on start, follows
//! writes, a model change re-embeds, and past its ceiling the newest items are kept.

use crate::support::{hits, Api};
use serde_json::{json, Value as Json};
use session_agent_core::vectors::ItemKind;

fn recall(api: &Api, q: &str) -> Vec<String> {
    let r = api.get(&format!("/memories/search?q={}", q.replace(' ', "+")));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["memory"]["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Each hit's content and its similarity by meaning (`None`: not a candidate by meaning).
fn meaning(api: &Api, q: &str) -> Vec<(String, Option<f64>)> {
    let r = api.get(&format!("/memories/search?q={}", q.replace(' ', "+")));
    r.body_json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["memory"]["content"].as_str().unwrap().to_owned(), h["signals"]["semantic"].as_f64()))
        .collect()
}

fn memory(api: &Api, content: &str) -> Json {
    let r = api.post("/memories", json!({ "content": content }));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()
}

// invariant 39 (docs/ARCHITECTURE.md)
#[test]
fn messages_get_vectors_after_the_answer_and_search_fuses_words_and_meaning() {
    let api = Api::new().with_embeddings();
    api.append("s1", "a", None, "We deploy to production on Friday");
    api.append("s1", "b", None, "Lunch is at noon");
    api.append("s2", "x", None, "The production deploy failed on Friday evening");
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 3);
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    // Every word must match for full text: "release" is in no message, so only meaning finds
    // the two deploy messages (most words shared), and not the lunch one.
    let across = hits(&api, "/search?q=release%20deploy%20production%20friday");
    assert_eq!(across.len(), 2, "{across:?}");
    assert!(across.contains(&"a".to_owned()) && across.contains(&"x".to_owned()));
    assert_eq!(hits(&api, "/sessions/s1/search?q=release%20deploy%20production%20friday"), ["a"]);
    // A word match still comes first; an unrelated query finds nothing.
    assert_eq!(hits(&api, "/sessions/s1/search?q=lunch")[0], "b");
    assert_eq!(hits(&api, "/search?q=zebra%20quantum%20violin"), Vec::<String>::new());
    // The index followed the writes without loading again; the same search without
    // embeddings is full text only.
    assert_eq!(api.vectors().loaded(ItemKind::Message), Some(3));
    let plain = Api::new();
    plain.append("s1", "a", None, "We deploy to production on Friday");
    assert_eq!(hits(&plain, "/search?q=release%20deploy%20production%20friday"), ["a"], "by its words");
    assert_eq!(hits(&plain, "/search?q=release"), Vec::<String>::new(), "no word in common: nothing");
}

// invariant 39 (docs/ARCHITECTURE.md)
#[test]
fn a_failed_call_is_caught_up_by_the_next_write() {
    let api = Api::new().with_embeddings();
    api.model.embed_fails.set(true);
    api.append("s1", "a", None, "We deploy to production on Friday");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 1);
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 0);
    assert_eq!(hits(&api, "/search?q=release%20deploy%20production%20friday"), ["a"], "found by its words meanwhile");
    api.model.embed_fails.set(false);
    api.append("s1", "b", None, "Lunch is at noon");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 2, "caught up with the next write");
    assert_eq!(hits(&api, "/search?q=release%20deploy%20production%20friday")[0], "a");
}

#[test]
fn search_entries_are_found_by_meaning_through_search_context() {
    let api = Api::with_config(json!({"context": [{"label": "kb", "kind": "search"}]})).with_embeddings();
    let r = api.post(
        "/sessions/s/context/kb/entries",
        json!({"entries": [
            {"key": "deploy", "content": "Deploys to production happen on Friday after review"},
            {"key": "lunch", "content": "Lunch is served at noon in the canteen"}]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 3"), 2);
    let search = |query: &str| {
        let r = api.post("/sessions/s/tools/search_context", json!({"input": {"label": "kb", "query": query}}));
        r.body_json()["output"].as_str().unwrap().to_owned()
    };
    // Every word must match for full text; "release" is in no entry: found by meaning.
    assert!(search("release deploys production friday review").starts_with("[deploy]\n"));
    assert!(search("lunch").starts_with("[lunch]\n"));
    assert_eq!(search("zebra quantum violin"), "No results found.");
    // A replaced text loses its old vector, and gets one of its new text.
    let r = api.post(
        "/sessions/s/context/kb/entries",
        json!({"entries": [{"key": "deploy", "content": "Holidays are booked in the portal"}]}),
    );
    assert_eq!(r.status, 201);
    assert_eq!(search("release deploys production friday review"), "No results found.");
}

// invariant 40 (docs/ARCHITECTURE.md)
#[test]
fn memory_recall_by_meaning_alone_needs_the_minimum_similarity() {
    let api = Api::with_config(json!({"memory": {}})).with_embeddings();
    memory(&api, "The user rides a red bicycle to work.");
    memory(&api, "The user drinks green tea.");
    // No word in common: nothing, and memory_forget by such a query forgets nothing.
    assert_eq!(recall(&api, "zebra quantum violin"), Vec::<String>::new());
    let r = api.post("/sessions/s/tools/memory_forget", json!({"input": {"query": "zebra quantum violin"}}));
    assert_eq!(r.body_json()["output"], "No memory matches \"zebra quantum violin\".");
    assert_eq!(api.count("SELECT count(*) FROM memories"), 2);
    // Words and meaning agree: both signals.
    let hits = meaning(&api, "rides red bicycle work");
    assert_eq!(hits[0].0, "The user rides a red bicycle to work.");
    assert!(hits[0].1.is_some_and(|s| s > 0.5), "{hits:?}");
}

#[test]
fn the_index_loads_on_start_and_follows_deletes() {
    let mut api = Api::new().with_embeddings();
    for i in 0..5 {
        memory(&api, &format!("Fact {i} about the garden shed number {i}."));
    }
    memory(&api, "The user rides a red bicycle.");
    let bike =
        |api: &Api| meaning(api, "rides red bicycle").into_iter().find(|h| h.0 == "The user rides a red bicycle.");
    assert!(bike(&api).is_some_and(|h| h.1.is_some()));
    assert_eq!(api.vectors().loaded(ItemKind::Memory), Some(6));
    // A new instance (the object evicted and started again): loaded from the stored codes.
    api = api.reopen();
    assert_eq!(api.vectors().loaded(ItemKind::Memory), None);
    assert!(bike(&api).is_some_and(|h| h.1.is_some()));
    assert_eq!(api.vectors().loaded(ItemKind::Memory), Some(6));
    assert_eq!(api.vectors().held(), 6 * (8 + 8 + 4), "64-dimension codes: one word, a seq and a scope each");
    // A delete reaches the loaded index through the log.
    let all = api.get("/memories?limit=100").body_json();
    let row =
        all["memories"].as_array().unwrap().iter().find(|m| m["content"] == "The user rides a red bicycle.").unwrap();
    assert_eq!(api.delete(&format!("/memories/{}", row["id"].as_str().unwrap())).status, 204);
    assert_eq!(bike(&api), None);
    assert_eq!(api.vectors().loaded(ItemKind::Memory), Some(5));
}

#[test]
fn a_model_change_re_embeds_in_the_background() {
    let api = Api::new().with_embeddings();
    let bike = memory(&api, "The user rides a red bicycle.");
    api.append("s1", "a", None, "We deploy to production on Friday");
    let id = bike["id"].as_str().unwrap().to_owned();
    assert!(api.get(&format!("/memories/{id}")).body_json()["embeddedAt"].is_string());
    let calls = api.model.embed_calls.get();
    // Started again with another model: every row waits for a vector of it, none is used.
    let api = api.with_embeddings_model("other-model");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 2);
    // The object's first request is answered before the background run it starts.
    assert_eq!(
        meaning(&api, "rides red bicycle"),
        [("The user rides a red bicycle.".to_owned(), None)],
        "found by words; the old vectors serve nothing"
    );
    // That run (the first request's, in the background) embeds them all with the new model,
    // and a write's own run its row.
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    api.append("s1", "b", None, "Lunch is at noon");
    assert!(api.model.embed_calls.get() > calls);
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE model = 'other-model'"), 3);
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE model <> 'other-model'"), 0);
    assert!(api.get(&format!("/memories/{id}")).body_json()["embeddedAt"].is_string());
    assert!(meaning(&api, "rides red bicycle")[0].1.is_some());
    // Embeddings turned off: nothing waits any more, and nothing is queued.
    let mut api = api;
    api.embeddings = session_agent_core::llm::embeddings::EmbeddingsConfig::none();
    let api = api.reopen();
    api.append("s1", "c", None, "More text");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
}

#[test]
fn past_the_ceiling_the_newest_are_searched_by_meaning_and_the_rest_by_words() {
    let mut api = Api::new().with_embeddings();
    api.vectors_cap = Some(3);
    api = api.reopen();
    memory(&api, "The user rides a red bicycle.");
    for i in 0..4 {
        memory(&api, &format!("Fact {i} about the garden shed number {i}."));
    }
    recall(&api, "anything at all");
    assert_eq!(api.vectors().loaded(ItemKind::Memory), Some(3));
    // The oldest is out of the index: found by its words only; the newest by meaning too.
    let bike = meaning(&api, "rides red bicycle").into_iter().find(|h| h.0 == "The user rides a red bicycle.");
    assert_eq!(bike, Some(("The user rides a red bicycle.".to_owned(), None)));
    assert!(meaning(&api, "garden shed number 3").iter().any(|h| h.0.starts_with("Fact 3") && h.1.is_some()));
    // The cap holds as more come, and after a restart.
    memory(&api, "The user likes sailing boats.");
    recall(&api, "anything at all");
    assert_eq!(api.vectors().loaded(ItemKind::Memory), Some(3));
    api.vectors_cap = Some(3);
    api = api.reopen();
    recall(&api, "anything at all");
    assert_eq!(api.vectors().loaded(ItemKind::Memory), Some(3));
}

#[test]
fn repeated_texts_are_embedded_once() {
    let api = Api::new().with_embeddings();
    let before = api.model.embed_calls.get();
    api.append("s1", "a", None, "The same words");
    api.append("s2", "a", None, "The same words");
    api.append("s3", "a", None, "The same words");
    assert_eq!(api.model.embed_calls.get() - before, 1, "one call per new text; the copies reuse its vector");
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 3);
}

#[test]
fn a_batch_is_embedded_by_calls_at_once_and_a_failed_call_keeps_only_its_rows_waiting() {
    let api = Api::new().with_embeddings();
    // The object woken: its first request starts the embedding of what waits (nothing here).
    api.get("/sessions");
    *api.model.embed_refuses.borrow_mut() = Some("poison".into());
    let before = api.model.embed_calls.get();
    // 100 messages: one batch of calls, 32 texts each (32 + 32 + 32 + 4); the second call
    // holds the refused text.
    let messages: Vec<Json> = (0..100)
        .map(|i| {
            let text = if i == 40 {
                "poison ivy in the garden".to_owned()
            } else {
                format!("note number {i} about the garden")
            };
            json!({"id": format!("m{i}"), "role": "user", "parts": [{"type": "text", "text": text}]})
        })
        .collect();
    let r = api.post("/sessions/s1/messages/batch", json!({ "messages": messages }));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.model.embed_calls.get() - before, 4, "the four calls of one batch, made at once");
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 68, "the three calls answered are stored");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 32, "the failed call's texts wait");
    assert_eq!(api.count("SELECT count(*) FROM unembedded u JOIN messages m ON m.seq = u.item WHERE m.id = 'm40'"), 1);
    // The next write's run embeds them once the endpoint takes the text.
    *api.model.embed_refuses.borrow_mut() = None;
    api.append("s1", "late", None, "one more note");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 101);
}

#[test]
fn a_turn_is_embedded_alone_so_an_edit_of_the_turn_before_leaves_its_vector() {
    // docs/REFERENCE.md#turn-context: the previous turn, the role and the date before a turn
    // each measured worse; a vector is of its message's own text.
    let api = Api::new().with_embeddings();
    api.append("s1", "a", None, "We deploy to production on Friday");
    api.append("s1", "b", None, "Lunch is at noon");
    let hash_of = |id: &str| {
        api.count(&format!(
            "SELECT v.hash FROM vectors v JOIN messages m ON m.seq = v.item WHERE v.kind = 2 AND m.id = '{id}'"
        ))
    };
    let own = Api::new().with_embeddings();
    own.append("s9", "x", None, "Lunch is at noon");
    assert_eq!(hash_of("b"), own.count("SELECT hash FROM vectors WHERE kind = 2"), "the hash of its own text alone");
    let (before, edited) = (hash_of("b"), hash_of("a"));
    let r = api.put(
        "/sessions/s1/messages/a",
        json!({"message": crate::support::msg("a", "user", "The deploy moved to Monday")}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert_eq!(hash_of("b"), before, "the next turn keeps its vector");
    assert_ne!(hash_of("a"), edited, "the edited turn has the vector of its new text");
}

/// A query of words that no message has, each on the same dimension of the test embedding as
/// one of `words` (`support::embedding`): what a model's synonyms are, so only meaning finds.
fn synonyms(words: &[&str]) -> String {
    let dim = |w: &str| crate::support::embedding(w).iter().position(|x| *x > 0.0);
    let found: Vec<String> = words
        .iter()
        .map(|w| (0..).map(|n| format!("syn{n}")).find(|s| dim(s) == dim(w)).expect("one of 64 dimensions"))
        .collect();
    found.join("%20")
}

/// A long answer whose middle says what is asked: a paragraph about the garden, `middle` said
/// over a part's length, and the garden again.
fn long_answer(middle: &str) -> String {
    let filler = "The roses in the garden bloom each spring and need water twice a week. ";
    format!("{}{} {}", filler.repeat(30), format!("{middle} ").repeat(20), filler.repeat(30))
}

#[test]
fn a_long_message_is_found_by_what_its_middle_says() {
    use session_agent_core::vectors::{PARTS, PART_BYTES};
    let api = Api::new().with_embeddings();
    let text = long_answer("We migrate the postgres database cluster to kubernetes next quarter.");
    assert!(text.len() > 4 * PART_BYTES);
    api.append("s1", "long", None, &text);
    api.append("s1", "short", None, "Lunch is at noon");
    let parts = api.count("SELECT count(*) FROM vectors WHERE kind = 4");
    assert!((4..PARTS).contains(&parts), "its parts after the first: {parts}");
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 2"), 2);
    // The words find nothing: meaning alone, by the middle part (the first is about roses).
    let q = synonyms(&["postgres", "database", "cluster", "kubernetes"]);
    assert_eq!(hits(&api, &format!("/sessions/s1/search?q={q}")), ["long"]);
    assert_eq!(hits(&api, &format!("/search?q={q}")), ["long"]);
    // An edit takes the parts along and embeds the new text's; a delete takes them along.
    let r = api.put("/sessions/s1/messages/long", json!({"message": crate::support::msg("long", "user", "Short now")}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 4"), 0, "one part now");
    assert!(hits(&api, &format!("/search?q={q}")).is_empty());
    api.append("s1", "again", None, &text);
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 4"), parts, "a copy's parts reuse the vectors");
    let r = api.delete("/sessions/s1/messages/again");
    assert!(r.status == 200 || r.status == 204, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind = 4"), 0);
}

#[test]
fn a_message_is_stored_with_all_its_parts_or_waits_whole() {
    let api = Api::new().with_embeddings();
    // The refused word is in a later part only: the call holding it fails, so none of the
    // message's vectors are stored and it waits whole.
    *api.model.embed_refuses.borrow_mut() = Some("kubernetes".into());
    api.append(
        "s1",
        "long",
        None,
        &long_answer("We migrate the postgres database cluster to kubernetes next quarter."),
    );
    assert_eq!(api.count("SELECT count(*) FROM vectors WHERE kind IN (2, 4)"), 0);
    assert_eq!(api.count("SELECT count(*) FROM unembedded WHERE kind = 2"), 1);
    *api.model.embed_refuses.borrow_mut() = None;
    api.append("s1", "next", None, "Lunch is at noon");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert!(api.count("SELECT count(*) FROM vectors WHERE kind = 4") >= 4);
    let q = synonyms(&["postgres", "database", "cluster", "kubernetes"]);
    assert_eq!(hits(&api, &format!("/search?q={q}")), ["long"]);
}

#[test]
fn messages_embedded_by_their_beginning_before_are_embedded_again_in_parts() {
    use crate::support::{db_at, msg};
    use session_agent_core::sql::{Sql, Value};
    use session_agent_core::store::schema;
    // An agent left at migration 18 with embeddings on: a long message with one vector of its
    // beginning, a short one with its vector.
    let db = db_at(18);
    db.execute("INSERT INTO embedding_model (id, model) VALUES (1, 'test-embed')", &[]).unwrap();
    let long = long_answer("We migrate the postgres database cluster to kubernetes next quarter.");
    for (seq, id, text) in [(1, "long", long.as_str()), (2, "short", "Lunch is at noon")] {
        let content = msg(id, "user", text).to_string();
        db.execute(
            "INSERT INTO messages (seq, session_id, id, role, bytes, created_at, content) VALUES (?, 's1', ?, 'user', ?, 't', ?)",
            &[Value::Int(seq), id.into(), Value::Int(content.len() as i64), content.as_str().into()],
        )
        .unwrap();
        db.execute(
            "INSERT INTO messages_fts (rowid, content, session) VALUES (?, ?, 'x')",
            &[Value::Int(seq), text.into()],
        )
        .unwrap();
        db.execute(
            "INSERT INTO vectors (kind, item, scope, model, hash, at, code, vector) VALUES (2, ?, 's1', 'test-embed', 0, 't', NULL, x'0000803f')",
            &[Value::Int(seq)],
        )
        .unwrap();
    }
    db.execute("DELETE FROM unembedded", &[]).unwrap();
    schema::migrate(&db, "t").unwrap();
    let queued = db.query("SELECT kind, item FROM unembedded", &[]).unwrap();
    assert_eq!(queued.len(), 1, "the long message only");
    assert_eq!((queued[0].int(0).unwrap(), queued[0].int(1).unwrap()), (2, 1));
    // The object that opens it (embeddings on) embeds it in parts; it is found by its middle.
    let model = crate::support::Api::new().with_embeddings().embeddings;
    let api = Api::with_db_embedded(db, model);
    api.append("s1", "next", None, "one more note");
    assert_eq!(api.count("SELECT count(*) FROM unembedded"), 0);
    assert!(api.count("SELECT count(*) FROM vectors WHERE kind = 4 AND item / 16 = 1") >= 4);
    let q = synonyms(&["postgres", "database", "cluster", "kubernetes"]);
    assert_eq!(hits(&api, &format!("/search?q={q}")), ["long"]);
}
