//! Context blocks, the frozen system prompt and the generated tools, through the DO API on real
//! SQLite and an in-memory object store: golden prompt, budgets, scopes, every tool string.

use crate::support::{code, msg, Api};
use serde_json::{json, Value as Json};
use session_agent_core::blobs::{Blob, Blobs, MemBlobs};
use session_agent_core::config::{
    BlockConfig, BlockKind, BlockScope, ChatConfig, CompactOptions, CompactionConfig, MemoryConfig, PromptPolicy,
    SessionConfig,
};
use session_agent_core::context::prompt::separator;
use session_agent_core::sql::Sql;

fn put(blobs: &MemBlobs, key: &str, text: &str, description: Option<&str>) {
    let blob = Blob { text: text.into(), description: description.map(Into::into) };
    futures::executor::block_on(blobs.put(key, blob)).unwrap();
}

/// The reference's golden configuration (docs/REFERENCE.md#prompt-rendering), as `SESSION_CONFIG`.
fn golden() -> Api {
    Api::with_config(json!({"context": [
        {"label": "soul", "kind": "readonly", "description": "Identity", "content": "You are helpful."},
        {"label": "empty", "kind": "readonly", "content": ""},
        {"label": "memory", "kind": "writable", "description": "Facts", "maxTokens": 1100},
        {"label": "skills", "kind": "skills"},
        {"label": "knowledge", "kind": "search", "description": "Searchable knowledge base"},
        {"label": "notes", "kind": "writable", "maxTokens": 500}
    ]}))
}

fn int(api: &Api, q: &str) -> i64 {
    api.db.query_row(q, &[]).unwrap().unwrap().int(0).unwrap()
}

fn tool(api: &Api, sid: &str, name: &str, input: Json) -> String {
    let r = api.post(&format!("/sessions/{sid}/tools/{name}"), json!({ "input": input }));
    assert_eq!(r.status, 200, "{name}: {}", String::from_utf8_lossy(&r.body));
    r.body_json()["output"].as_str().unwrap().to_owned()
}

fn prompt(api: &Api, sid: &str) -> String {
    let r = api.get(&format!("/sessions/{sid}/prompt"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.body_json()["prompt"].as_str().unwrap().to_owned()
}

#[test]
fn the_golden_prompt_byte_for_byte() {
    let api = golden();
    assert_eq!(
        tool(&api, "s", "set_context", json!({"label": "memory", "content": "user likes coffee"})),
        "Written to memory. Usage: 0% (5/1100 tokens)"
    );
    let key = format!("one-{}", session_agent_core::context::entry_key::stable_hash("one"));
    assert_eq!(
        tool(&api, "s", "set_context", json!({"label": "knowledge", "content": "one"})),
        format!("Indexed \"{key}\" in knowledge.")
    );
    tool(&api, "s", "set_context", json!({"label": "knowledge", "content": "two"}));
    let s = separator();
    let want = format!(
        "{s}\nSOUL (Identity) [readonly]\n{s}\nYou are helpful.\n\n\
         {s}\nMEMORY (Facts) [0% \u{2014} 5/1100 tokens] [writable]\n{s}\nuser likes coffee\n\n\
         {s}\nSKILLS [loadable]\n{s}\n\n\n\
         {s}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{s}\n2 entries indexed.\n\n\
         {s}\nNOTES [0% \u{2014} 0/500 tokens] [writable]\n{s}\n"
    );
    assert_eq!(prompt(&api, "s"), want);
    assert_eq!(api.get("/sessions/s/prompt").body_json()["frozen"], true);
}

#[test]
fn blocks_are_listed_in_order_with_their_kinds() {
    let api = golden();
    let r = api.get("/sessions/s/context");
    assert_eq!(r.status, 200);
    let blocks = r.body_json()["blocks"].clone();
    let kinds: Vec<(&str, &str, bool)> = blocks
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["label"].as_str().unwrap(), b["kind"].as_str().unwrap(), b["writable"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("soul", "readonly", false),
            ("empty", "readonly", false),
            ("memory", "writable", true),
            ("skills", "skills", true),
            ("knowledge", "search", true),
            ("notes", "writable", true),
        ]
    );
    assert_eq!(
        blocks[0],
        json!({"label": "soul", "description": "Identity", "content": "You are helpful.",
        "tokens": 4, "maxTokens": null, "kind": "readonly", "writable": false})
    );
    assert_eq!(api.get("/sessions/s/context/memory").body_json()["maxTokens"], 1100);
    assert_eq!(api.get("/sessions/s/context/nope").status, 404);
    assert_eq!(api.get("/sessions/s/context/bad%20label").status, 400);
    // Reads register nothing.
    assert_eq!(api.get("/sessions/s").status, 404);
}

#[test]
fn writes_respect_kinds_and_budgets_and_change_nothing_on_error() {
    let api = golden();
    let r = api.put("/sessions/s/context/memory", json!({"content": "likes tea"}));
    assert_eq!(r.status, 200);
    assert_eq!(r.body_json()["content"], "likes tea");
    assert_eq!(api.get("/sessions/s").status, 200, "a write registers the session");
    // Append: a newline between, unless the new text starts with one.
    api.post("/sessions/s/context/memory/append", json!({"content": "and coffee"}));
    api.post("/sessions/s/context/memory/append", json!({"content": "\nmornings"}));
    assert_eq!(api.get("/sessions/s/context/memory").body_json()["content"], "likes tea\nand coffee\nmornings");
    // Over budget: 422 with the numbers; the old text stays.
    let r = api.put("/sessions/s/context/notes", json!({"content": "x".repeat(2004)}));
    assert_eq!((r.status, code(&r).as_str()), (422, "over_budget"));
    assert_eq!(r.body_json()["error"]["message"], "Block \"notes\" exceeds maxTokens: 501 > 500");
    api.put("/sessions/s/context/notes", json!({"content": "x".repeat(1996)}));
    let r = api.post("/sessions/s/context/notes/append", json!({"content": "yyyy"}));
    assert_eq!(r.status, 422, "the budget applies to old + new text");
    assert_eq!(api.get("/sessions/s/context/notes").body_json()["tokens"], 499);
    // Readonly and keyed blocks: 409; unknown: 404; bad bodies: 400.
    let r = api.put("/sessions/s/context/soul", json!({"content": "evil"}));
    assert_eq!((r.status, code(&r).as_str()), (409, "conflict"));
    assert_eq!(r.body_json()["error"]["message"], "Block \"soul\" is readonly");
    assert_eq!(api.put("/sessions/s/context/knowledge", json!({"content": "x"})).status, 409);
    assert_eq!(api.post("/sessions/s/context/skills/append", json!({"content": "x"})).status, 409);
    assert_eq!(api.put("/sessions/s/context/nope", json!({"content": "x"})).status, 404);
    assert_eq!(api.put("/sessions/s/context/memory", json!({"content": 5})).status, 400);
    assert_eq!(api.put("/sessions/s/context/memory", json!({})).status, 400);
    assert_eq!(api.get("/sessions/s/context/soul").body_json()["content"], "You are helpful.");
}

// invariant 15 (docs/ARCHITECTURE.md): a session's writable texts go with it (not that entries and skills stay).
#[test]
fn writable_blocks_belong_to_their_session_and_start_from_the_configured_text() {
    let api = Api::with_config(json!({"context": [{"label": "memory", "kind": "writable", "content": "start"}]}));
    api.put("/sessions/a/context/memory", json!({"content": "alpha"}));
    assert_eq!(api.get("/sessions/a/context/memory").body_json()["content"], "alpha");
    assert_eq!(api.get("/sessions/b/context/memory").body_json()["content"], "start");
    // Deleting a session deletes its block texts and prompt.
    prompt(&api, "a");
    assert_eq!(api.delete("/sessions/a").status, 204);
    assert_eq!(api.get("/sessions/a/context/memory").body_json()["content"], "start");
    assert_eq!(int(&api, "SELECT (SELECT count(*) FROM context_blocks) + (SELECT count(*) FROM prompts)"), 0);
}

// invariant 12 (docs/ARCHITECTURE.md)
#[test]
fn the_prompt_is_frozen_until_refreshed_or_cleared() {
    let api = golden();
    api.put("/sessions/s/context/memory", json!({"content": "first"}));
    let p1 = prompt(&api, "s");
    assert!(p1.contains("\nfirst"));
    // Block writes never change the frozen prompt.
    api.put("/sessions/s/context/memory", json!({"content": "second"}));
    tool(&api, "s", "set_context", json!({"label": "knowledge", "content": "an entry"}));
    assert_eq!(prompt(&api, "s"), p1);
    // Refresh renders and stores it.
    let r = api.post("/sessions/s/prompt/refresh", json!({}));
    let p2 = r.body_json()["prompt"].as_str().unwrap().to_owned();
    assert!(p2.contains("\nsecond") && p2.contains("1 entries indexed."));
    assert_eq!(prompt(&api, "s"), p2);
    // Clearing the messages renders it again too.
    api.append("s", "m1", None, "hello");
    api.put("/sessions/s/context/memory", json!({"content": "third"}));
    assert_eq!(api.delete("/sessions/s/messages").status, 204);
    assert!(prompt(&api, "s").contains("\nthird"));
    // GET prompt never registers a session; the stored copy is in SQLite (nothing in memory).
    prompt(&api, "fresh");
    assert_eq!(api.get("/sessions/fresh").status, 404);
    let stored =
        api.db.query_row("SELECT prompt FROM prompts WHERE session_id = 's'", &[]).unwrap().unwrap().text(0).unwrap();
    assert_eq!(stored, prompt(&api, "s"));
}

#[test]
fn uncached_prompts_render_every_time() {
    let api = Api::with_config(json!({"cachedPrompt": false, "context": [{"label": "m", "kind": "writable"}]}));
    assert_eq!(api.get("/sessions/s/prompt").body_json()["frozen"], false);
    api.put("/sessions/s/context/m", json!({"content": "now"}));
    assert!(prompt(&api, "s").ends_with("\nnow"));
}

#[test]
fn tool_definitions_follow_the_blocks() {
    let api = golden();
    let r = api.get("/sessions/s/tools");
    let tools = r.body_json()["tools"].clone();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["set_context", "load_context", "unload_context", "search_context", "session_search"]);
    assert_eq!(tools[0]["description"],
        "Write to a context block. Available blocks:\n\
         - \"memory\" (writable, this conversation only): Facts\n\
         - \"skills\" (skill collection, keyed entries): no description\n\
         - \"knowledge\" (searchable, keyed entries): Searchable knowledge base\n\
         - \"notes\" (writable, this conversation only): no description\n\n\
         Writes are durable. Blocks marked \"this conversation only\" are kept for this conversation; the others persist across sessions.\n\n\
         For keyed blocks (skill collections / searchable), pass `metadata: { title, description }` \u{2014} title stabilises updates, description helps the model pick entries. Metadata is optional; short content rarely needs it, long loadable entries benefit most.");
    assert_eq!(
        tools[0]["inputSchema"],
        json!({
        "type": "object", "required": ["label", "content"],
        "properties": {
            "label": {"type": "string", "enum": ["memory", "skills", "knowledge", "notes"], "description": "Block label to write to"},
            "content": {"type": "string", "description": "The main content to write to the block."},
            "action": {"type": "string", "enum": ["replace", "append"], "description": "replace (default) or append"},
            "metadata": {"type": "object",
                "description": "Optional metadata for keyed entries (skill collections, searchable blocks: \"skills\", \"knowledge\"). Short content doesn't need metadata; longer loadable entries (skills) benefit from a title and description so the model can pick the right one without loading it.",
                "properties": {
                    "title": {"type": "string", "description": "Short title. Used as a stable identifier \u{2014} entries with the same title are updated in place, different titles create new entries."},
                    "description": {"type": "string", "description": "One-line summary shown alongside the title in the system prompt so the model can decide when to load the entry."}
                }}
        }})
    );
    assert_eq!(tools[1]["description"], "Load a document from a skill block by key. Available skill blocks: \"skills\". Check the system prompt for available keys.");
    assert_eq!(
        tools[1]["inputSchema"],
        json!({"type": "object", "properties": {
        "label": {"type": "string", "enum": ["skills"], "description": "Skill block label"},
        "key": {"type": "string", "description": "Skill key to load"}}, "required": ["label", "key"]})
    );
    assert_eq!(tools[2]["description"], "Unload a previously loaded skill to free context space. The skill remains available for re-loading. No skills currently loaded.");
    assert_eq!(tools[2]["inputSchema"]["properties"]["key"]["description"], "Skill key to unload");
    assert_eq!(tools[3]["description"], "Search for information in a searchable context block. ONLY these blocks are searchable: \"knowledge\". Other blocks cannot be searched.");
    assert_eq!(
        tools[4],
        json!({"name": "session_search",
        "description": "Search past conversations for relevant context. Searches across all sessions.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string", "description": "Search query"}}, "required": ["query"]}})
    );
    // Only writable blocks: no metadata, no hint, no skill or search tools.
    let plain = Api::with_config(
        json!({"context": [{"label": "memory", "kind": "writable"}, {"label": "soul", "kind": "readonly", "content": "x"}]}),
    );
    let tools = plain.get("/sessions/s/tools").body_json()["tools"].clone();
    assert_eq!(tools.as_array().unwrap().len(), 2);
    assert_eq!(tools[0]["description"], "Write to a context block. Available blocks:\n- \"memory\" (writable, this conversation only): no description\n\nWrites are durable for this conversation; other conversations do not see them.");
    assert!(tools[0]["inputSchema"]["properties"].get("metadata").is_none());
    // An agent-wide block: the reference's words are true.
    let shared = Api::with_config(json!({"context": [{"label": "memory", "kind": "writable", "scope": "agent"}]}));
    let tools = shared.get("/sessions/s/tools").body_json()["tools"].clone();
    assert_eq!(tools[0]["description"], "Write to a context block. Available blocks:\n- \"memory\" (writable): no description\n\nWrites are durable and persist across sessions.");
    // No blocks at all: session_search only.
    let none = Api::new().get("/sessions/s/tools").body_json()["tools"].clone();
    assert_eq!(none.as_array().unwrap().len(), 1);
}

#[test]
fn set_context_outputs_and_errors() {
    let api = Api::with_config(json!({"context": [
        {"label": "soul", "kind": "readonly", "content": "x"},
        {"label": "memory", "kind": "writable", "maxTokens": 10},
        {"label": "knowledge", "kind": "search"}
    ]}));
    let s = |input: Json| tool(&api, "s", "set_context", input);
    assert_eq!(
        s(json!({"label": "memory", "content": "x".repeat(260)})),
        "Error: Block \"memory\" exceeds maxTokens: 65 > 10"
    );
    assert_eq!(s(json!({"label": "soul", "content": "y"})), "Error: Block \"soul\" is readonly");
    assert_eq!(s(json!({"label": "nope", "content": "y"})), "Error: block \"nope\" not found");
    assert_eq!(s(json!({"label": "memory", "content": "hi"})), "Written to memory. Usage: 20% (2/10 tokens)");
    assert_eq!(
        s(json!({"label": "memory", "content": "there", "action": "append"})),
        "Written to memory. Usage: 30% (3/10 tokens)"
    );
    assert_eq!(api.get("/sessions/s/context/memory").body_json()["content"], "hi\nthere");
    // Keyed entries: keys as docs/REFERENCE.md#entry-keys; equal titles update in place; action is ignored.
    assert_eq!(s(json!({"label": "knowledge", "content": "no key"})), "Indexed \"no-key-1nprufp\" in knowledge.");
    assert_eq!(s(json!({"label": "knowledge", "content": "用户喜欢咖啡"})), "Indexed \"entry-2mzjev\" in knowledge.");
    assert_eq!(
        s(json!({"label": "knowledge", "content": "Arr, matey", "metadata": {"title": "Pirate style"}})),
        "Indexed \"pirate-style\" in knowledge."
    );
    assert_eq!(
        s(
            json!({"label": "knowledge", "content": "Ahoy there", "metadata": {"title": "Pirate style"}, "action": "append"})
        ),
        "Indexed \"pirate-style\" in knowledge."
    );
    assert_eq!(api.get("/sessions/s/context/knowledge").body_json()["content"], "3 entries indexed.");
    // search_context: the replaced text no longer matches.
    let q = |query: &str| tool(&api, "s", "search_context", json!({"label": "knowledge", "query": query}));
    assert_eq!(q("ahoy"), "[pirate-style]\nAhoy there");
    assert_eq!(q("matey"), "No results found.");
    assert_eq!(q("\"no key"), "[no-key-1nprufp]\nno key", "an unclosed quote is a phrase to the end");
    assert_eq!(q("((key"), "[no-key-1nprufp]\nno key", "operators are literal text");
    assert_eq!(
        tool(&api, "s", "search_context", json!({"label": "memory", "query": "x"})),
        "Error: \"memory\" is not searchable. Searchable blocks: knowledge"
    );
    // Search entries are the agent's: another session sees them.
    assert_eq!(
        tool(&api, "other", "search_context", json!({"label": "knowledge", "query": "ahoy"})),
        "[pirate-style]\nAhoy there"
    );
}

#[test]
fn tool_calls_with_bad_input_or_unknown_names() {
    let api = golden();
    let r = api.post("/sessions/s/tools/set_context", json!({"input": {"label": "memory"}}));
    assert_eq!((r.status, code(&r).as_str()), (400, "invalid_request"));
    assert_eq!(api.post("/sessions/s/tools/set_context", json!({"input": "x"})).status, 400);
    assert_eq!(
        api.post("/sessions/s/tools/set_context", json!({"input": {"label": "memory", "content": "x", "metadata": 1}}))
            .status,
        400
    );
    assert_eq!(api.post("/sessions/s/tools/nope", json!({"input": {}})).status, 404);
    // A tool the session's blocks do not generate does not exist here.
    assert_eq!(
        Api::new().post("/sessions/s/tools/set_context", json!({"input": {"label": "a", "content": "b"}})).status,
        404
    );
    assert_eq!(api.get("/sessions/s/tools/set_context").status, 405);
    assert_eq!(api.get("/sessions/s").status, 404, "failed tool calls register nothing");
}

fn skills_api() -> Api {
    let api = Api::with_config(json!({"context": [
        {"label": "skills", "kind": "skills", "description": "Playbooks"},
        {"label": "library", "kind": "skills", "prefix": "lib/", "scope": "shared"}
    ]}));
    put(&api.blobs, "skills/alice/style-guide", "Write short sentences.", Some("Company style guide"));
    put(&api.blobs, "skills/alice/api-ref", "GET /x", None);
    put(&api.blobs, "skills/bob/secret", "bob's own", Some("not for alice"));
    put(&api.blobs, "lib/deploy-checklist", "1. test 2. ship", Some("Production deployment checklist"));
    api
}

#[test]
fn skills_are_listed_per_scope_and_only_the_agents_own_are_writable() {
    let api = skills_api();
    let blocks = api.get("/sessions/s/context").body_json()["blocks"].clone();
    assert_eq!(blocks[0]["content"], "- api-ref\n- style-guide: Company style guide");
    assert_eq!(blocks[0]["writable"], true);
    assert_eq!(blocks[1]["content"], "- deploy-checklist: Production deployment checklist");
    assert_eq!(blocks[1]["writable"], false);
    let p = prompt(&api, "s");
    assert!(p.contains("SKILLS (Playbooks) [loadable]"));
    assert!(p.contains("LIBRARY [loadable]"));
    assert!(!p.contains("secret"));
    // set_context writes the agent's own skills only; the shared library is not offered.
    let tools = api.get("/sessions/s/tools").body_json()["tools"].clone();
    assert_eq!(tools[0]["inputSchema"]["properties"]["label"]["enum"], json!(["skills"]));
    let out = tool(
        &api,
        "s",
        "set_context",
        json!({"label": "skills", "content": "Use pirate voice.",
        "metadata": {"title": "Pirate style", "description": "How pirates talk"}}),
    );
    assert_eq!(out, "Indexed \"pirate-style\" in skills.");
    let stored = futures::executor::block_on(api.blobs.get("skills/alice/pirate-style")).unwrap().unwrap();
    assert_eq!((stored.text.as_str(), stored.description.as_deref()), ("Use pirate voice.", Some("How pirates talk")));
    assert_eq!(
        tool(&api, "s", "set_context", json!({"label": "library", "content": "x"})),
        "Error: Block \"library\" does not support writes"
    );
    assert!(futures::executor::block_on(api.blobs.list("lib/")).unwrap().len() == 1);
    // Another agent of the same deployment sees neither alice's skills nor her write.
    let mut bob = skills_api();
    bob = bob.named("bob");
    assert_eq!(bob.get("/sessions/s/context/skills").body_json()["content"], "- secret: not for alice");
}

// invariant 14 (docs/ARCHITECTURE.md)
#[test]
fn loading_and_unloading_skills_persists_and_rewrites_history() {
    let api = skills_api();
    let load = |key: &str| tool(&api, "s", "load_context", json!({"label": "skills", "key": key}));
    assert_eq!(load("style-guide"), "Write short sentences.");
    assert_eq!(load("missing"), "Not found: missing");
    assert_eq!(
        tool(&api, "s", "load_context", json!({"label": "soul", "key": "k"})),
        "Error: \"soul\" is not a skill block. Skill blocks: skills, library"
    );
    assert_eq!(
        tool(&api, "s", "load_context", json!({"label": "library", "key": "deploy-checklist"})),
        "1. test 2. ship"
    );
    let unload_desc =
        |api: &Api| api.get("/sessions/s/tools").body_json()["tools"][2]["description"].as_str().unwrap().to_owned();
    assert!(unload_desc(&api).ends_with(" Currently loaded: skills:style-guide, library:deploy-checklist."));
    // The model's turn as stored: a load_context call with its output.
    let turn = json!({"id": "a1", "role": "assistant", "parts": [
        {"type": "dynamic-tool", "toolName": "load_context", "toolCallId": "c1", "state": "output-available",
         "input": {"label": "skills", "key": "style-guide"}, "output": "Write short sentences."},
        {"type": "text", "text": "Loaded."}]});
    api.post("/sessions/s/messages", json!({"message": turn}));
    api.append("s", "u2", None, "thanks");
    // Static tool parts (type tool-load_context, no toolName) count too.
    let turn2 = json!({"id": "a2", "role": "assistant", "parts": [
        {"type": "tool-load_context", "toolCallId": "c2", "state": "output-available",
         "input": {"label": "library", "key": "deploy-checklist"}, "output": "1. test 2. ship"}]});
    api.post("/sessions/s/messages", json!({"message": turn2}));
    let unload = |label: &str, key: &str| tool(&api, "s", "unload_context", json!({"label": label, "key": key}));
    api.events.take("s");
    assert_eq!(unload("skills", "style-guide"), "Unloaded \"style-guide\" from skills. Context reclaimed.");
    // The sockets hear the block change and the rewritten message, then an idle status.
    let frames = api.events.take("s");
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["context", "message", "status"]);
    assert_eq!(frames[1]["message"]["parts"][0]["output"], "[skill unloaded: style-guide]");
    assert_eq!(unload("skills", "style-guide"), "Skill \"style-guide\" is not currently loaded in \"skills\".");
    assert_eq!(unload("library", "deploy-checklist"), "Unloaded \"deploy-checklist\" from library. Context reclaimed.");
    assert_eq!(unload("nope", "x"), "Error: \"nope\" is not a skill block. Skill blocks: skills, library");
    let a1 = api.get("/sessions/s/messages/a1").body_json();
    assert_eq!(a1["parts"][0]["output"], "[skill unloaded: style-guide]");
    assert_eq!(a1["parts"][1]["text"], "Loaded.");
    assert_eq!(
        api.get("/sessions/s/messages/a2").body_json()["parts"][0]["output"],
        "[skill unloaded: deploy-checklist]"
    );
    assert!(unload_desc(&api).ends_with(" No skills currently loaded."));
    // The state is in SQLite: clearing the session forgets it.
    load("api-ref");
    assert_eq!(int(&api, "SELECT count(*) FROM loaded_skills"), 1);
    api.delete("/sessions/s/messages");
    assert!(unload_desc(&api).ends_with(" No skills currently loaded."));
}

#[test]
fn searchable_history_and_session_search() {
    let api = Api::with_config(json!({"searchableHistory": "history"}));
    let block = |api: &Api| api.get("/sessions/s/context/history").body_json();
    assert_eq!(block(&api)["content"], "");
    api.append("one", "m1", None, "we deploy on friday");
    assert_eq!(block(&api)["content"], "1 session available for search.");
    api.post("/sessions/two/messages", json!({"message": msg("m2", "assistant", "deploy needs approval")}));
    assert_eq!(
        block(&api),
        json!({"label": "history", "description": "Cross-session conversation history",
        "content": "2 sessions available for search.", "tokens": 8, "maxTokens": null, "kind": "search", "writable": false})
    );
    assert!(prompt(&api, "s").contains("HISTORY (Cross-session conversation history) [searchable]"));
    let found = tool(&api, "s", "search_context", json!({"label": "history", "query": "deploy"}));
    assert_eq!(found.split("\n---\n").count(), 2);
    assert!(found.contains("[user] we deploy on friday") && found.contains("[assistant] deploy needs approval"));
    assert_eq!(tool(&api, "s", "session_search", json!({"query": "approval"})), "[assistant] deploy needs approval");
    assert_eq!(tool(&api, "s", "session_search", json!({"query": "nothing"})), "No results found.");
    // The history block is readonly: with no writable block there is no set_context at all.
    assert_eq!(
        api.post("/sessions/s/tools/set_context", json!({"input": {"label": "history", "content": "x"}})).status,
        404
    );
}

#[test]
fn blocks_added_and_removed_at_run_time() {
    let api = golden();
    let before = prompt(&api, "s");
    let r = api.post("/sessions/s/context", json!({"label": "todo", "kind": "writable", "description": "Open tasks", "maxTokens": 50, "content": "ship it"}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body_json()["content"], "ship it");
    assert_eq!(api.get("/sessions/s").status, 200);
    let labels = |api: &Api, sid: &str| -> Vec<String> {
        api.get(&format!("/sessions/{sid}/context")).body_json()["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["label"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(labels(&api, "s").last().unwrap(), "todo");
    assert!(!labels(&api, "other").contains(&"todo".to_owned()), "added to one session only");
    // Duplicate, invalid, over budget: refused, nothing stored.
    let r = api.post("/sessions/s/context", json!({"label": "memory", "kind": "writable"}));
    assert_eq!(
        (r.status, r.body_json()["error"]["message"].as_str().unwrap()),
        (409, "Block \"memory\" already exists")
    );
    assert_eq!(api.post("/sessions/s/context", json!({"label": "x", "kind": "magic"})).status, 400);
    assert_eq!(api.post("/sessions/s/context", json!({"label": "x", "kind": "readonly", "maxTokens": 5})).status, 400);
    assert_eq!(
        api.post(
            "/sessions/s/context",
            json!({"label": "x", "kind": "writable", "maxTokens": 1, "content": "too long"})
        )
        .status,
        422
    );
    assert_eq!(api.post("/sessions/s/context", json!({"label": "x y", "kind": "writable"})).status, 400);
    // An optional field given as `null` counts as absent (docs/openapi.yaml says so; Schemathesis
    // sends it): a readonly block of no text, and not a refusal.
    let r = api.post(
        "/sessions/s/context",
        json!({"label": "nulls", "kind": "readonly", "content": null, "description": null, "r2Key": null,
               "prefix": null, "scope": null, "maxTokens": null}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!((r.body_json()["content"].as_str(), r.body_json()["description"].is_null()), (Some(""), true));
    assert_eq!(api.delete("/sessions/s/context/nulls").status, 204);
    assert_eq!(
        api.post("/sessions/s/context", json!({"label": "lib", "kind": "skills", "scope": "shared"})).status,
        400,
        "a shared library over the agents' own skills prefix would leak them"
    );
    assert!(!labels(&api, "s").contains(&"x".to_owned()));
    // The frozen prompt is not touched by adding; a refresh shows the block.
    assert_eq!(prompt(&api, "s"), before);
    assert!(api.post("/sessions/s/prompt/refresh", json!({})).body_json()["prompt"]
        .as_str()
        .unwrap()
        .contains("TODO (Open tasks) [6% \u{2014} 3/50 tokens] [writable]"));
    // Remove: an added block goes; a configured one is hidden in this session only.
    assert_eq!(api.delete("/sessions/s/context/todo").status, 204);
    assert_eq!(api.delete("/sessions/s/context/memory").status, 204);
    assert_eq!(api.delete("/sessions/s/context/memory").status, 404);
    assert!(!labels(&api, "s").contains(&"memory".to_owned()));
    assert!(labels(&api, "other").contains(&"memory".to_owned()));
    assert_eq!(api.put("/sessions/s/context/memory", json!({"content": "x"})).status, 404);
    // A removed label can be added again, now as the session's own block.
    assert_eq!(
        api.post("/sessions/s/context", json!({"label": "memory", "kind": "readonly", "content": "fixed"})).status,
        201
    );
    assert_eq!(api.get("/sessions/s/context/memory").body_json()["kind"], "readonly");
}

#[test]
fn readonly_text_from_r2() {
    let api = Api::with_config(json!({"context": [{"label": "soul", "kind": "readonly", "r2Key": "soul.md"}]}));
    assert_eq!(prompt(&api, "a"), "", "missing object: an empty readonly block is skipped");
    put(&api.blobs, "soul.md", "You are a pirate.", None);
    assert!(prompt(&api, "b").ends_with(&format!("SOUL [readonly]\n{}\nYou are a pirate.", separator())));
    assert_eq!(prompt(&api, "a"), "", "a frozen prompt stays frozen, even an empty one");
}

#[test]
fn configs_are_validated() {
    let bad = [
        json!({"context": [{"label": "a", "kind": "writable", "maxToken": 5}]}),
        json!({"context": [{"label": "a", "kind": "readonly", "maxTokens": 5}]}),
        json!({"context": [{"label": "a", "kind": "writable"}, {"label": "a", "kind": "readonly"}]}),
        json!({"context": [{"label": "h", "kind": "writable"}], "searchableHistory": "h"}),
        json!({"context": [{"label": "a", "kind": "writable", "maxTokens": 0}]}),
        json!({"context": [{"label": "a", "kind": "readonly", "content": "x", "r2Key": "y"}]}),
        json!({"context": [{"label": "a", "kind": "skills"}, {"label": "b", "kind": "skills", "prefix": "", "scope": "shared"}]}),
        json!({"context": "nope"}),
    ];
    for cfg in bad {
        assert!(SessionConfig::from_json(&cfg.to_string()).is_err(), "{cfg}");
    }
    assert_eq!(SessionConfig::from_json("").unwrap(), SessionConfig::default());
    // The builder makes the same config as the JSON.
    let built = SessionConfig::builder()
        .readonly("soul", None, "You are helpful.")
        .writable("memory", Some("Learned facts"), Some(1100))
        .search("knowledge", Some("Searchable knowledge base"))
        .skills("skills", "skills/", BlockScope::Agent)
        .searchable_history("history")
        .build()
        .unwrap();
    let parsed = SessionConfig::from_json(
        &json!({"context": [
        {"label": "soul", "kind": "readonly", "content": "You are helpful."},
        {"label": "memory", "kind": "writable", "description": "Learned facts", "maxTokens": 1100},
        {"label": "knowledge", "kind": "search", "description": "Searchable knowledge base"},
        {"label": "skills", "kind": "skills", "prefix": "skills/", "scope": "agent"}],
        "cachedPrompt": true, "searchableHistory": "history"})
        .to_string(),
    )
    .unwrap();
    assert_eq!(built, parsed);
    assert!(SessionConfig::builder().writable("a", None, None).writable("a", None, None).build().is_err());
    // Every policy the JSON has, the builder has too.
    let options = CompactOptions { protect_head: 2, tail_token_budget: 500, min_tail_messages: 3 };
    let memory = MemoryConfig { max_memories: 50, ..MemoryConfig::default() };
    let built = SessionConfig::builder()
        .readonly_r2("policy", Some("House rules"), "docs/policy.md")
        .block(BlockConfig::new("notes", BlockKind::Writable))
        .prompt(PromptPolicy::Fresh)
        .compaction(CompactionConfig::new(Some(4000), options))
        .chat(ChatConfig { max_steps: 3, ..ChatConfig::default() })
        .memory(memory)
        .build()
        .unwrap();
    let parsed = SessionConfig::from_json(
        &json!({"context": [
        {"label": "policy", "kind": "readonly", "description": "House rules", "r2Key": "docs/policy.md"},
        {"label": "notes", "kind": "writable"}],
        "cachedPrompt": false,
        "compaction": {"after": 4000, "protectHead": 2, "tailTokenBudget": 500, "minTailMessages": 3},
        "chat": {"maxSteps": 3},
        "memory": {"maxMemories": 50}})
        .to_string(),
    )
    .unwrap();
    assert_eq!(built, parsed);
    assert_eq!(built.compaction.map(|c| c.options()), Some(options));
}

#[test]
fn only_runs_that_store_something_register_the_session() {
    let api = skills_api();
    assert_eq!(tool(&api, "fresh", "load_context", json!({"label": "skills", "key": "nope"})), "Not found: nope");
    assert_eq!(
        tool(&api, "fresh", "unload_context", json!({"label": "skills", "key": "nope"})),
        "Skill \"nope\" is not currently loaded in \"skills\"."
    );
    assert_eq!(tool(&api, "fresh", "session_search", json!({"query": "x"})), "No results found.");
    assert_eq!(api.get("/sessions/fresh").status, 404, "nothing was stored");
    // A skill whose text starts like an error still counts as loaded, and registers.
    put(&api.blobs, "skills/alice/odd", "Error: this is the skill's own first line", None);
    assert_eq!(
        tool(&api, "fresh", "load_context", json!({"label": "skills", "key": "odd"})),
        "Error: this is the skill's own first line"
    );
    assert_eq!(api.get("/sessions/fresh").status, 200);
}

#[test]
fn clearing_an_unregistered_session_stores_nothing() {
    let api = golden();
    assert_eq!(api.delete("/sessions/ghost/messages").status, 204);
    assert_eq!(api.get("/sessions/ghost").status, 404);
    let n = api
        .db
        .query_row("SELECT count(*) FROM prompts WHERE session_id = 'ghost'", &[])
        .unwrap()
        .unwrap()
        .int(0)
        .unwrap();
    assert_eq!(n, 0);
}

/// Blocks added at run time reach only the agent's own space in the bucket, whatever prefix,
/// scope or r2Key they name; every refusal stores nothing and leaves the other agent's skills
/// (and its prompt) as they were.
// invariant 13 (docs/ARCHITECTURE.md)
#[test]
fn runtime_blocks_are_confined_to_the_agents_own_space() {
    let api = skills_api(); // agent alice; skills/ (agent) and lib/ (shared) configured
    put(&api.blobs, "_spill/bob/s/1", "\"bob's spilled tool output\"", None);
    let add = |block: Json| api.post("/sessions/s/context", block);
    let refused = [
        // A shared "library" over another agent's own skills: would list and load them.
        json!({"label": "x", "kind": "skills", "prefix": "skills/bob/", "scope": "shared"}),
        json!({"label": "x", "kind": "skills", "prefix": "skills/", "scope": "shared"}),
        json!({"label": "x", "kind": "skills", "prefix": "_spill/", "scope": "shared"}),
        json!({"label": "x", "kind": "skills", "prefix": "", "scope": "shared"}),
        json!({"label": "x", "kind": "skills", "prefix": "other/", "scope": "shared"}),
        // Agent scope under a prefix inside another agent's space: alice's writes would land
        // at skills/bob/alice/…, which bob's own block lists.
        json!({"label": "x", "kind": "skills", "prefix": "skills/bob/", "scope": "agent"}),
        json!({"label": "x", "kind": "skills", "prefix": "skills/bob/"}),
        json!({"label": "x", "kind": "skills", "prefix": "", "scope": "agent"}),
        json!({"label": "x", "kind": "skills", "prefix": "elsewhere/", "scope": "agent"}),
        json!({"label": "x", "kind": "skills", "prefix": "lib/", "scope": "agent"}),
        // A readonly block reading any object it names.
        json!({"label": "x", "kind": "readonly", "r2Key": "skills/bob/secret"}),
        json!({"label": "x", "kind": "readonly", "r2Key": "skills/alicex/y"}),
        json!({"label": "x", "kind": "readonly", "r2Key": "_spill/bob/s/1"}),
        json!({"label": "x", "kind": "readonly", "r2Key": "soul.md"}),
    ];
    for block in refused {
        let r = add(block.clone());
        assert_eq!(
            (r.status, code(&r).as_str()),
            (400, "invalid_request"),
            "{block}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert_eq!(api.get("/sessions/s").status, 404, "no refused add registered the session");
    assert_eq!(int(&api, "SELECT count(*) FROM context_defs"), 0);
    // What stays allowed: the configured spaces, a part of the shared library, own objects.
    for ok in [
        json!({"label": "mine", "kind": "skills", "prefix": "skills/"}),
        json!({"label": "lib2", "kind": "skills", "prefix": "lib/", "scope": "shared"}),
        json!({"label": "libsub", "kind": "skills", "prefix": "lib/deploy", "scope": "shared"}),
        json!({"label": "own", "kind": "readonly", "r2Key": "skills/alice/style-guide"}),
        json!({"label": "shelf", "kind": "readonly", "r2Key": "lib/deploy-checklist"}),
    ] {
        let r = add(ok.clone());
        assert_eq!(r.status, 201, "{ok}: {}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(api.get("/sessions/s/context/own").body_json()["content"], "Write short sentences.");
    assert_eq!(
        api.get("/sessions/s/context/mine").body_json()["content"],
        "- api-ref\n- style-guide: Company style guide"
    );
    // A write through the runtime agent block lands in alice's space only.
    tool(&api, "s", "set_context", json!({"label": "mine", "content": "hello", "metadata": {"title": "note"}}));
    assert!(futures::executor::block_on(api.blobs.get("skills/alice/note")).unwrap().is_some());
    let keys: Vec<String> =
        futures::executor::block_on(api.blobs.list("skills/bob/")).unwrap().into_iter().map(|b| b.key).collect();
    assert_eq!(keys, ["skills/bob/secret"], "bob's space is untouched");
}

/// Without configured skills, a runtime agent block may use the default prefix only, and no
/// shared library can be opened at run time.
#[test]
fn without_configured_skills_only_the_default_agent_prefix_is_open() {
    let api = Api::new();
    put(&api.blobs, "skills/bob/secret", "bob's own", None);
    assert_eq!(api.post("/sessions/s/context", json!({"label": "k", "kind": "skills"})).status, 201);
    assert_eq!(api.get("/sessions/s/context/k").body_json()["content"], "");
    for bad in [
        json!({"label": "x", "kind": "skills", "scope": "shared"}),
        json!({"label": "x", "kind": "skills", "prefix": "lib/", "scope": "shared"}),
        json!({"label": "x", "kind": "skills", "prefix": "skills/bob/"}),
    ] {
        assert_eq!(api.post("/sessions/s/context", bad.clone()).status, 400, "{bad}");
    }
}

/// A runtime block stored before it was confined (or before the config changed) is left out
/// of the session's blocks, its prompt and its tools.
// invariant 13 (docs/ARCHITECTURE.md)
#[test]
fn stored_runtime_blocks_outside_the_agents_space_are_ignored() {
    let api = skills_api();
    api.db
        .execute(
            "INSERT INTO context_defs (session_id, label, removed, def) VALUES ('s', 'leak', 0, ?)",
            &[r#"{"label":"leak","kind":"skills","prefix":"skills/bob/","scope":"shared"}"#.into()],
        )
        .unwrap();
    assert_eq!(api.get("/sessions/s/context/leak").status, 404);
    assert!(!prompt(&api, "s").contains("secret"));
    assert_eq!(
        tool(&api, "s", "load_context", json!({"label": "leak", "key": "secret"})),
        "Error: \"leak\" is not a skill block. Skill blocks: skills, library"
    );
}

/// Configured prefixes: never empty, agent-scoped ones equal or disjoint, nothing over `_spill/`.
#[test]
fn configured_key_spaces_stay_apart() {
    let bad = [
        json!({"context": [{"label": "a", "kind": "skills", "prefix": ""}]}),
        json!({"context": [{"label": "a", "kind": "skills", "prefix": "skills/"}, {"label": "b", "kind": "skills", "prefix": "skills/x/"}]}),
        json!({"context": [{"label": "a", "kind": "skills", "prefix": "_spill/x/", "scope": "shared"}]}),
        json!({"context": [{"label": "a", "kind": "skills", "prefix": "_", "scope": "agent"}]}),
        json!({"context": [{"label": "a", "kind": "readonly", "r2Key": "_spill/bob/s/1"}]}),
    ];
    for cfg in bad {
        assert!(SessionConfig::from_json(&cfg.to_string()).is_err(), "{cfg}");
    }
    let ok = json!({"context": [{"label": "a", "kind": "skills", "prefix": "skills/"}, {"label": "b", "kind": "skills", "prefix": "skills/"},
        {"label": "c", "kind": "skills", "prefix": "team/"}, {"label": "d", "kind": "skills", "prefix": "lib/", "scope": "shared"}]});
    assert!(SessionConfig::from_json(&ok.to_string()).is_ok());
}

#[test]
fn agent_scoped_writable_blocks_are_one_text_for_all_sessions() {
    let api = Api::with_config(json!({"context": [
        {"label": "team", "kind": "writable", "scope": "agent", "content": "start", "maxTokens": 50},
        {"label": "scratch", "kind": "writable"}]}));
    api.put("/sessions/a/context/team", json!({"content": "shared fact"}));
    api.put("/sessions/a/context/scratch", json!({"content": "a's note"}));
    assert_eq!(api.get("/sessions/b/context/team").body_json()["content"], "shared fact");
    assert_eq!(api.get("/sessions/b/context/scratch").body_json()["content"], "");
    // The model's write from session b is seen in a; budgets apply to the shared text.
    let r = api.post(
        "/sessions/b/tools/set_context",
        json!({"input": {"label": "team", "content": "more", "action": "append"}}),
    );
    assert!(r.body_json()["output"].as_str().unwrap().starts_with("Written to team."));
    assert_eq!(api.get("/sessions/a/context/team").body_json()["content"], "shared fact\nmore");
    assert_eq!(api.put("/sessions/a/context/team", json!({"content": "x ".repeat(200)})).status, 422);
    // Deleting or clearing a session, or removing the block from one, leaves the shared text.
    assert_eq!(api.delete("/sessions/a").status, 204);
    assert_eq!(api.delete("/sessions/b/context/team").status, 204);
    assert_eq!(api.get("/sessions/c/context/team").body_json()["content"], "shared fact\nmore");
    // A shared scope is only for skills.
    let bad = session_agent_core::config::SessionConfig::from_json(
        &json!({"context": [{"label": "t", "kind": "writable", "scope": "shared"}]}).to_string(),
    );
    assert!(bad.is_err());
    assert!(session_agent_core::config::SessionConfig::from_json(
        &json!({"context": [{"label": "t", "kind": "readonly", "content": "x", "scope": "agent"}]}).to_string()
    )
    .is_err());
}

#[test]
fn search_entries_can_be_listed_read_deleted_and_ingested() {
    let api = Api::with_config(json!({"context": [
        {"label": "kb", "kind": "search"}, {"label": "notes", "kind": "writable"}], "searchableHistory": "history"}));
    let r = api.post(
        "/sessions/s/context/kb/entries",
        json!({"entries": [
            {"key": "deploy", "content": "We deploy on Fridays."},
            {"title": "Rollback plan", "content": "Roll back with the previous tag."},
            {"content": "Pager duty rotates weekly."}]}),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let keys: Vec<String> =
        r.body_json()["keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_owned()).collect();
    assert_eq!(keys[0], "deploy");
    assert!(keys[1].starts_with("rollback-plan"), "{keys:?}");
    assert_eq!(api.get("/sessions/s/context/kb").body_json()["content"], "3 entries indexed.");
    // Pages in insertion order; entries are the agent's, so another session sees them.
    let page = api.get("/sessions/other/context/kb/entries?limit=2").body_json();
    assert_eq!(page["entries"].as_array().unwrap().len(), 2);
    assert_eq!(page["entries"][0]["key"], "deploy");
    let rest =
        api.get(&format!("/sessions/s/context/kb/entries?cursor={}", page["nextCursor"].as_str().unwrap())).body_json();
    assert_eq!(rest["entries"][0]["content"], "Pager duty rotates weekly.");
    assert_eq!(rest["nextCursor"], Json::Null);
    assert_eq!(api.get("/sessions/s/context/kb/entries/deploy").body_json()["content"], "We deploy on Fridays.");
    // Deleting takes it out of search.
    assert_eq!(api.delete("/sessions/s/context/kb/entries/deploy").status, 204);
    assert_eq!(api.delete("/sessions/s/context/kb/entries/deploy").status, 404);
    let out = api.post("/sessions/s/tools/search_context", json!({"input": {"label": "kb", "query": "Fridays"}}));
    assert_eq!(out.body_json()["output"], "No results found.");
    // Bad input changes nothing; only search blocks have entries.
    let before = api.get("/sessions/s/context/kb").body_json()["content"].clone();
    for body in [
        json!({}),
        json!({"entries": []}),
        json!({"entries": [{"content": "ok"}, {"title": "no content"}]}),
        json!({"entries": [{"key": "", "content": "x"}]}),
    ] {
        assert_eq!(api.post("/sessions/s/context/kb/entries", body.clone()).status, 400, "{body}");
    }
    let big = "x".repeat(1_000_001);
    assert_eq!(api.post("/sessions/s/context/kb/entries", json!({"entries": [{"content": big}]})).status, 413);
    assert_eq!(api.get("/sessions/s/context/kb").body_json()["content"], before);
    assert_eq!(api.get("/sessions/s/context/notes/entries").status, 400);
    assert_eq!(api.get("/sessions/s/context/history/entries").status, 400);
    assert_eq!(api.get("/sessions/s/context/nope/entries").status, 404);
    assert_eq!(api.get("/sessions/s/context/kb/entries?cursor=x").status, 400);
}
