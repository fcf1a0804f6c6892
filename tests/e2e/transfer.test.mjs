// End-to-end: export, import, erase and split in workerd with real local R2 (mirrors
// tests/it/transfer.rs, which runs the same scenarios natively). A rich agent (branches, an
// overlay, a spilled 2.5 MB tool output, block writes incl. an agent-scoped block, a runtime
// block, a skill written and loaded by the tools, a frozen prompt, memories with versions,
// search-block entries) exported as NDJSON through the streamed GET /export and imported into
// fresh agents exports byte for byte the same, also after a restart of workerd; a session's
// document round-trips under its id and another; bad, newer, cut-off and misplaced imports are
// refused whole, a circle of replacements (supersededBy) too; only the admin token exports, imports and erases; an erase leaves no row, no
// R2 object and no working old token (open sockets closed), and touches no other agent; a split
// over HTTP starts a session from the summary and tells the old session's sockets. An agent with
// schedules (a run, the usage ledger, a shared block it read, its chosen space) and its memory
// space move byte for byte and read the same field by field, the imported schedules armed (one
// due runs by the alarm); a space's bad, misplaced or unauthorized imports are refused whole,
// and two imports at once into one object leave one whole.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { startWorker, collect, eventually } from "./harness.mjs";
import { start as startModel, DEFAULT_SUMMARY } from "./llm-server.mjs";

const SECRET = "e2e-transfer-secret-0123456789abcdef012345";
const FORMAT = "session-agent/3";
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: "You are terse." },
    { label: "notes", kind: "writable", maxTokens: 500 },
    { label: "profile", kind: "writable", scope: "agent" },
    { label: "knowledge", kind: "search" },
    { label: "skills", kind: "skills" },
  ],
};

let w;
let model;
before(async () => {
  model = await startModel();
  w = await startWorker({
    vars: {
      SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: SECRET,
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
    },
  });
});
after(async () => { await w?.stop(); await model?.close(); });

// ── Helpers ──────────────────────────────────────────────────────────────────────────────────

const text = (id, role, t) => ({ id, role, parts: [{ type: "text", text: t }] });

/** The API of `agent` with the admin token (or `auth`): {status, headers, body}. */
const call = (agent, method, path, body, init = {}) => w.json(method, `/agents/${agent}${path}`, body, init);
/** Asserts the status of an answer and returns its body. */
function ok(r, status, what = "") {
  assert.equal(r.status, status, `${what} ${typeof r.body === "string" ? r.body.slice(0, 500) : JSON.stringify(r.body)?.slice(0, 500)}`);
  return r.body;
}
function assertError(r, status, code, what = "") {
  assert.equal(r.status, status, `${what}: ${JSON.stringify(r.body)?.slice(0, 500)}`);
  assert.equal(r.body?.error?.code, code, `${what}: ${JSON.stringify(r.body)?.slice(0, 500)}`);
}

/** GET /agents/{agent}/export as text: {status, headers, text}. */
async function exportAgent(agent, auth = true) {
  const r = await w.fetch(`/agents/${agent}/export`, { auth });
  return { status: r.status, headers: r.headers, text: await r.text() };
}
/** The export text, asserting 200 and the NDJSON content type. */
async function exported(agent) {
  const r = await exportAgent(agent);
  assert.equal(r.status, 200, r.text.slice(0, 500));
  assert.equal(r.headers.get("content-type"), "application/x-ndjson; charset=utf-8");
  return r.text;
}
/** POST /agents/{agent}/import with `body` (NDJSON text): {status, body}. */
async function importAgent(agent, body, auth = true) {
  const r = await w.fetch(`/agents/${agent}/import`, {
    method: "POST", auth, body, headers: { "content-type": "application/x-ndjson" },
  });
  const t = await r.text();
  let parsed = t;
  try { parsed = t ? JSON.parse(t) : null; } catch { /* not JSON */ }
  return { status: r.status, body: parsed };
}
const lines = (ndjson) => ndjson.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

/** The keys of every object under `prefix` in local R2. */
async function r2(prefix) {
  const bucket = await w.mf.getR2Bucket("SKILLS_BUCKET");
  const keys = [];
  let cursor;
  for (;;) {
    const page = await bucket.list({ prefix, cursor });
    keys.push(...page.objects.map((o) => o.key));
    if (!page.truncated) return keys.sort();
    cursor = page.cursor;
  }
}
/** Every object of `agent` in R2 (spilled fields and agent-scoped skills). */
const agentObjects = async (agent) => [...await r2(`_spill/${agent}/`), ...await r2(`skills/${agent}/`)];

async function mint(agent, body) {
  return ok(await w.json("POST", `/agents/${agent}/tokens`, body), 201, `POST /agents/${agent}/tokens`).token;
}
/** Resolves with {code, reason} once `ws` closes. */
const closed = (ws, timeoutMs = 5000) => new Promise((resolve, reject) => {
  if (ws.readyState === WebSocket.CLOSED) return reject(new Error("already closed"));
  const timer = setTimeout(() => reject(new Error("the socket did not close in time")), timeoutMs);
  ws.once("close", (code, reason) => { clearTimeout(timer); resolve({ code, reason: reason.toString() }); });
});
async function ping(ws) {
  const got = collect(ws, (f) => f?.type === "pong", 3000);
  ws.send(JSON.stringify({ type: "ping" }));
  await got;
}

/** An assistant message whose tool output is `n` characters (spilled to R2 when large). */
const BIG = {
  id: "big", role: "assistant", metadata: { k: 1.5 }, parts: [
    { type: "text", text: "the fetched report" },
    { type: "dynamic-tool", toolName: "fetch", toolCallId: "call-big", state: "output-available",
      input: { url: "https://example.com/huge" }, output: { body: "o".repeat(2_500_000), rows: [1, 2, 3] } },
  ],
};
const tool = async (agent, sid, name, input) => ok(await call(agent, "POST", `/sessions/${sid}/tools/${name}`, { input }), 200, name).output;

/** Fills `agent` with one of everything an export carries; returns the skill's key. */
async function buildRich(agent) {
  const post = async (path, body, status = 201) => ok(await call(agent, "POST", path, body), status, `POST ${path}`);
  // s1: a branch (u2 and u2b under a1), an oversize message, an overlay, block writes, a
  // runtime block, a skill written and loaded, a frozen prompt, usage.
  await post("/sessions/s1/messages", { message: text("u1", "user", "I plan a trip to Lisbon") });
  await post("/sessions/s1/messages", { message: text("a1", "assistant", "Lisbon in May is mild"), parentId: "u1" });
  await post("/sessions/s1/messages", { message: text("u2", "user", "What about Porto?"), parentId: "a1" });
  await post("/sessions/s1/messages", { message: text("u2b", "user", "And Faro?"), parentId: "a1" });
  await post("/sessions/s1/messages", { message: BIG, parentId: "u2" });
  assert.equal((await r2(`_spill/${agent}/s1/`)).length, 1, "the tool output was spilled");
  await post("/sessions/s1/compactions", { summary: "Trip planning.", fromMessageId: "u1", toMessageId: "a1" });
  ok(await call(agent, "PUT", "/sessions/s1/context/notes", { content: "likes trains" }), 200);
  ok(await call(agent, "PUT", "/sessions/s1/context/profile", { content: "vegetarian" }), 200);
  await post("/sessions/s1/context", { label: "extra", kind: "writable", content: "runtime" });
  const wrote = await tool(agent, "s1", "set_context", { label: "skills", content: "Pack light.", metadata: { description: "How to pack" } });
  assert.match(wrote, /^Indexed "[^"]+" in skills\.$/);
  const skills = await r2(`skills/${agent}/`);
  assert.equal(skills.length, 1, `one skill in R2: ${skills}`);
  const key = skills[0].slice(`skills/${agent}/`.length);
  assert.equal(await tool(agent, "s1", "load_context", { label: "skills", key }), "Pack light.");
  ok(await call(agent, "GET", "/sessions/s1/prompt"), 200);
  ok(await call(agent, "POST", "/sessions/s1/usage", { inputTokens: 10, outputTokens: 5, cost: 0.25 }), 200);
  // s2: a plain session with a deleted interior message.
  await post("/sessions/s2/messages", { message: text("m1", "user", "hello") });
  await post("/sessions/s2/messages", { message: text("m2", "assistant", "middle"), parentId: "m1" });
  await post("/sessions/s2/messages", { message: text("m3", "user", "tail"), parentId: "m2" });
  assert.equal((await call(agent, "DELETE", "/sessions/s2/messages/m2")).status, 204);
  // Memories (one changed: two versions), entries of the search block.
  ok(await call(agent, "PATCH", "/sessions/s1", { metadata: { user: "u-7", n: 30, vip: true } }), 200);
  const m = await post("/memories", { content: "The user is vegetarian", tags: ["food"], score: 0.9, metadata: { src: "form" } });
  ok(await call(agent, "PATCH", `/memories/${m.id}`, { content: "The user is vegan", metadata: { src: "chat", n: 2 } }), 200);
  await post("/memories", { content: "Trip to Lisbon", category: "conversation", sessionId: "s1" });
  await post("/sessions/s1/context/knowledge/entries", { entries: [{ key: "k1", content: "Trams run late" }, { content: "Bring an umbrella" }] });
  return key;
}

// The rich agent and its export, built once (the first test that needs them builds them).
const RICH = "alice";
let rich = null;
async function richExport() {
  if (!rich) {
    const skillKey = await buildRich(RICH);
    rich = { skillKey, ndjson: await exported(RICH) };
  }
  return rich;
}

// ── Round trips ──────────────────────────────────────────────────────────────────────────────

test("an agent export imports into a fresh agent byte for byte, also across a restart of workerd", async () => {
  const { skillKey, ndjson: first } = await richExport();
  const recs = lines(first);
  assert.deepEqual(recs[0], { format: FORMAT, kind: "agent" });
  assert.deepEqual(recs.at(-1), { kind: "end", counts: { sessions: 2, messages: 7, memories: 2, memoryVersions: 3, entries: 2, skills: 1, schedules: 0, scheduleRuns: 0, usage: 0 } });
  assert.ok(first.endsWith("\n"), "every record ends its line");
  const big = recs.find((r) => r.kind === "message" && r.message.id === "big");
  assert.deepEqual(big.message, BIG, "the spilled field is whole in the export, not its placeholder");
  assert.equal(big.parentId, "u2");
  const skill = recs.find((r) => r.kind === "skill");
  assert.deepEqual(skill, { kind: "skill", prefix: "skills/", key: skillKey, description: "How to pack", content: "Pack light." });
  for (const kind of ["compaction", "contextBlock", "contextDef", "loadedSkill", "prompt", "memoryVersion", "entry"]) {
    assert.ok(recs.some((r) => r.kind === kind), `a ${kind} record`);
  }
  assert.ok(recs.some((r) => r.kind === "contextBlock" && r.sessionId === "" && r.label === "profile"), "the agent-scoped block");
  assert.deepEqual(recs.find((r) => r.kind === "session" && r.session.id === "s1").session.metadata, { user: "u-7", n: 30, vip: true });
  assert.deepEqual(recs.find((r) => r.kind === "memory" && r.content === "The user is vegan").metadata, { src: "chat", n: 2 });
  assert.deepEqual(recs.filter((r) => r.kind === "memoryVersion").map((r) => r.metadata).slice(0, 2), [{ src: "form" }, { src: "chat", n: 2 }]);
  assert.equal(await exported(RICH), first, "two exports of an unchanged agent are the same");

  // Into bob: the same counts, the same export.
  const counts = ok(await importAgent("bob", first), 201, "import into bob");
  assert.deepEqual(counts, { sessions: 2, messages: 7, memories: 2, memoryVersions: 3, entries: 2, skills: 1, schedules: 0, scheduleRuns: 0, usage: 0 });
  assert.equal(await exported("bob"), first, "export → import → export is byte-identical");
  // Into carol, then workerd restarts before carol's first export.
  ok(await importAgent("carol", first), 201, "import into carol");
  await w.restart();
  assert.equal(await exported("carol"), first, "byte-identical after a restart of workerd");
  assert.equal(await exported("bob"), first, "bob too");

  // The imported agent works: its skill under its own prefix, its oversize field spilled again
  // under its own prefix and whole in every read, its branches and overlay, search, memories.
  for (const agent of ["bob", "carol"]) {
    const bucket = await w.mf.getR2Bucket("SKILLS_BUCKET");
    const obj = await bucket.get(`skills/${agent}/${skillKey}`);
    assert.ok(obj, `skills/${agent}/${skillKey} exists`);
    assert.equal(await obj.text(), "Pack light.");
    assert.equal(obj.customMetadata?.description, "How to pack");
    assert.equal((await r2(`_spill/${agent}/s1/`)).length, 1, `spilled again under _spill/${agent}/`);
    const h = ok(await call(agent, "GET", "/sessions/s1/history?leaf=big"), 200).messages;
    assert.deepEqual(h.at(-1), BIG, "the spilled field is whole in GET history");
    assert.equal(h.at(-1).parts[1].output.body.length, 2_500_000);
    assert.deepEqual(ok(await call(agent, "GET", "/sessions/s1/messages/big"), 200), BIG);
    const raw = ok(await call(agent, "GET", "/sessions/s1/history?leaf=big&raw=1"), 200).messages.map((m) => m.id);
    assert.deepEqual(raw, ["u1", "a1", "u2", "big"]);
    const branches = ok(await call(agent, "GET", "/sessions/s1/messages/a1/branches"), 200);
    assert.equal(JSON.stringify(branches).includes("u2b"), true, `a1 keeps both branches: ${JSON.stringify(branches)}`);
    assert.equal(ok(await call(agent, "GET", "/sessions/s1/context/profile"), 200).content, "vegetarian");
    assert.equal(ok(await call(agent, "GET", "/sessions/s1/context/notes"), 200).content, "likes trains");
    assert.equal(ok(await call(agent, "GET", "/sessions/s1/context/extra"), 200).content, "runtime");
    assert.equal(ok(await call(agent, "GET", "/search?q=Porto"), 200).results[0].id, "u2");
  }
  assert.deepEqual(ok(await call("bob", "GET", "/sessions/s1/prompt"), 200), ok(await call(RICH, "GET", "/sessions/s1/prompt"), 200), "the frozen prompt came along");
  assert.equal(await exported(RICH), first, "alice is unchanged by all this");
});

test("a session export imports under its own id and under another (?as=), equal but for the ids", async () => {
  await richExport();
  const r = await w.fetch(`/agents/${RICH}/sessions/s1/export`);
  assert.equal(r.status, 200);
  const docText = await r.text();
  const doc = JSON.parse(docText);
  assert.equal(doc.format, FORMAT);
  assert.equal(doc.session.id, "s1");
  assert.equal(doc.messages.length, 5);
  assert.deepEqual(doc.messages.find((m) => m.message.id === "big").message, BIG);
  assert.equal(doc.compactions.length, 1);
  assert.equal(doc.prompts.length, 1);
  assert.equal(doc.loadedSkills.length, 1);

  const A = "dora";
  const info = ok(await call(A, "POST", "/sessions/import", docText), 201, "import s1");
  assert.equal(info.id, "s1");
  const again = await w.fetch(`/agents/${A}/sessions/s1/export`);
  assert.equal(await again.text(), docText, "byte-identical under its own id");
  assert.equal((await r2(`_spill/${A}/s1/`)).length, 1);
  assertError(await call(A, "POST", "/sessions/import", docText), 409, "conflict", "the session exists");
  assert.equal((await r2(`_spill/${A}/s1/`)).length, 1, "the refused import's spilled object is swept");

  const copy = ok(await call(A, "POST", "/sessions/import?as=copy", docText), 201, "import ?as=copy");
  assert.equal(copy.id, "copy");
  const c = ok(await call(A, "GET", "/sessions/copy/export"), 200);
  assert.equal(c.session.id, "copy");
  assert.notEqual(c.compactions[0].id, doc.compactions[0].id, "a copy's overlay gets its own id");
  c.session.id = doc.session.id;
  c.compactions[0].id = doc.compactions[0].id;
  assert.deepEqual(c, doc, "equal except for the ids");
  assert.equal((await r2(`_spill/${A}/copy/`)).length, 1, "the copy's oversize field is spilled under its own session");
  assert.deepEqual(ok(await call(A, "GET", "/sessions/copy/messages/big"), 200), BIG);
  assertError(await call(A, "POST", "/sessions/import?as=..%2Fx", docText), 400, "invalid_request", "a bad ?as");
  assertError(await call(RICH, "GET", "/sessions/nope/export"), 404, "not_found", "an unknown session");
  // A newer format is refused, saying so.
  const newer = await call(A, "POST", "/sessions/import?as=newer", { ...doc, format: "session-agent/4" });
  assertError(newer, 400, "invalid_request", "newer session format");
  assert.match(newer.body.error.message, /newer/);
  assert.equal((await call(A, "GET", "/sessions/newer")).status, 404);
});

test("an export of version 1 (before metadata) still imports, every metadata {}", async () => {
  const { ndjson } = await richExport();
  const v1 = lines(ndjson).map((r) => {
    const { metadata, ...rest } = r;
    if (rest.format) rest.format = "session-agent/1";
    if (rest.session) { const { metadata: m, ...session } = rest.session; rest.session = session; }
    return JSON.stringify(rest);
  }).join("\n") + "\n";
  assert.ok(!v1.includes('"vip"') && !v1.includes('"src"'), "no metadata left");
  ok(await importAgent("from-v1", v1), 201, "a version-1 import");
  assert.deepEqual(ok(await call("from-v1", "GET", "/sessions/s1"), 200).metadata, {});
  const again = await exported("from-v1");
  assert.deepEqual(lines(again)[0], { format: FORMAT, kind: "agent" }, "exported in the newest format");
  ok(await importAgent("from-v2", again), 201);
  assert.equal(await exported("from-v2"), again, "byte-identical from there on");
});

// ── Refusals ─────────────────────────────────────────────────────────────────────────────────

test("bad, newer, cut-off and misplaced imports are refused whole; only the admin token exports, imports and erases", async () => {
  const { ndjson: good } = await richExport();
  const A = "refused";
  const recs = good.split("\n").filter((l) => l);
  const empty = async (what) => {
    assert.deepEqual(ok(await call(A, "GET", "/sessions"), 200).sessions, [], `${what}: no session`);
    assert.deepEqual(ok(await call(A, "GET", "/memories"), 200).memories, [], `${what}: no memory`);
    assert.deepEqual(await agentObjects(A), [], `${what}: no R2 object`);
  };

  let r = await importAgent(A, good.replace(FORMAT, "session-agent/4"));
  assertError(r, 400, "invalid_request", "newer format");
  assert.match(r.body.error.message, /newer/);
  await empty("newer");
  r = await importAgent(A, recs.slice(0, -1).join("\n") + "\n");
  assertError(r, 400, "invalid_request", "cut off");
  assert.match(r.body.error.message, /cut off/);
  await empty("cut off");
  // Cut off in the middle of the big message's line.
  const bigAt = good.indexOf('"id":"big"');
  r = await importAgent(A, good.slice(0, bigAt + 1_000_000));
  assertError(r, 400, "invalid_request", "cut mid-record");
  await empty("cut mid-record");
  for (const [body, what] of [
    ["", "empty"], ["not json\n", "not JSON"], [`{"kind":"agent"}\n`, "no format"],
    [good.replace('"role":"user"', '"role":""'), "a bad message"],
    [good.replace('"kind":"end","counts":{"sessions":2', '"kind":"end","counts":{"sessions":3'), "counts that disagree"],
  ]) {
    assertError(await importAgent(A, body), 400, "invalid_request", what);
    await empty(what);
  }
  // A repeated memory fails in the transaction, after the oversize field and the skill went to
  // R2: they are released and swept by the same request.
  const memory = recs.find((l) => l.startsWith('{"kind":"memory"'));
  const dup = [...recs.slice(0, -1), memory, recs.at(-1)].join("\n");
  r = await importAgent(A, dup);
  assert.ok([400, 409].includes(r.status), `a repeated memory: ${r.status} ${JSON.stringify(r.body)}`);
  await empty("a repeated memory");

  // Into an agent that holds something: 409, and the rich agent is as it was.
  const objects = await agentObjects(RICH);
  assertError(await importAgent(RICH, good), 409, "conflict", "non-empty agent");
  assert.equal(await exported(RICH), good);
  assert.deepEqual(await agentObjects(RICH), objects, "no object of the refused import stays");
  // An agent holding only an agent-scoped block is not empty either.
  ok(await call("blocky", "PUT", "/sessions/x/context/profile", { content: "only this" }), 200);
  assertError(await importAgent("blocky", good), 409, "conflict", "agent with a block");

  // Scoped tokens, even write ones, even unlimited: 403 on the agent-wide transfer routes.
  const write = await mint(RICH, { scope: "write", ttlSeconds: 600 });
  const read = await mint(RICH, { scope: "read", ttlSeconds: 600 });
  const fresh = await mint(A, { scope: "write", ttlSeconds: 600 });
  for (const [token, agent] of [[write, RICH], [read, RICH], [fresh, A]]) {
    const e = await exportAgent(agent, token);
    assert.equal(e.status, 403, `GET /export with a scoped token: ${e.text.slice(0, 300)}`);
    assert.equal(JSON.parse(e.text).error.code, "forbidden");
    assertError(await importAgent(agent, good, token), 403, "forbidden", "POST /import with a scoped token");
    assertError(await w.json("DELETE", `/agents/${agent}`, undefined, { auth: token, headers: { confirm: "erase" } }), 403, "forbidden", "erase with a scoped token");
  }
  assert.equal((await call(RICH, "GET", "/sessions", undefined, { auth: write })).status, 200, "the write token works elsewhere");
  assert.equal(await exported(RICH), good, "nothing changed");
  await empty("after the scoped tokens");
  assert.equal((await exportAgent(RICH, false)).status, 401, "no token");
});

test("an import whose replacements go round in a circle (A <-> B) is refused whole; the chain itself imports", async () => {
  const src = "circle-src";
  const paris = ok(await call(src, "POST", "/memories", { content: "The user lives in Paris." }), 201);
  ok(await call(src, "POST", "/memories", { content: "The user lives in Berlin.", supersedes: [paris.id] }), 201);
  const good = await exported(src);
  ok(await importAgent("circle-chain", good), 201, "A -> B, B holding");
  assert.deepEqual(ok(await call("circle-chain", "GET", "/memories"), 200).memories.map((m) => m.content), ["The user lives in Berlin."]);
  // B retired too, replaced by A: no memory would hold, none would ever be found.
  const recs = lines(good);
  const a = recs.find((r) => r.kind === "memory" && r.id === paris.id);
  const b = recs.find((r) => r.kind === "memory" && r.id !== paris.id);
  assert.equal(a.supersededBy, b.id);
  b.supersededBy = a.id;
  b.invalidAt = b.validFrom;
  const r = await importAgent("circle-dst", recs.map((x) => JSON.stringify(x)).join("\n") + "\n");
  assertError(r, 400, "invalid_request", "a circle of replacements");
  assert.match(r.body.error.message, /supersededBy chain comes back to it \(2 memories in a circle\)/);
  assert.deepEqual(ok(await call("circle-dst", "GET", "/memories?includeSuperseded=true"), 200).memories, [], "nothing imported");
});

// ── Erase ────────────────────────────────────────────────────────────────────────────────────

test("an erase needs Confirm: erase, leaves no row, no R2 object and no old token, and touches no other agent", async () => {
  const { ndjson: good } = await richExport();
  const A = "erin";
  ok(await importAgent(A, good), 201);
  // More to erase: a session-level block and a message of another session, spilled too.
  ok(await call(A, "POST", "/sessions/s3/messages", { message: { ...BIG, id: "big3" } }), 201);
  const before = await exported(A);
  const objects = await agentObjects(A);
  assert.equal(objects.filter((k) => k.startsWith("_spill/")).length, 2);
  assert.equal(objects.filter((k) => k.startsWith("skills/")).length, 1);
  const richBefore = { text: await exported(RICH), objects: await agentObjects(RICH) };

  const old = await mint(A, { scope: "write", ttlSeconds: 600 });
  const othersOld = await mint(RICH, { scope: "read", ttlSeconds: 600 });
  const oldLimited = await mint(A, { scope: "read", ttlSeconds: 600, sessions: ["s1"] });
  const scoped = await w.webSocket(`/agents/${A}/sessions/s1/ws`, { auth: old, query: true });
  const admin = await w.webSocket(`/agents/${A}/sessions/s1/ws`);
  try {
    await ping(scoped);
    await ping(admin);

    // Without the header (or with another value): 400, nothing changes.
    for (const headers of [{}, { confirm: "yes" }]) {
      assertError(await w.json("DELETE", `/agents/${A}`, undefined, { headers }), 400, "invalid_request", `erase with ${JSON.stringify(headers)}`);
    }
    assert.equal(await exported(A), before, "nothing erased without Confirm");
    assert.deepEqual(await agentObjects(A), objects);
    assert.equal((await call(A, "GET", "/sessions", undefined, { auth: old })).status, 200, "the old token still works");

    const closing = closed(scoped);
    const start = Date.now();
    const r = await w.json("DELETE", `/agents/${A}`, undefined, { headers: { confirm: "erase" } });
    assert.equal(r.status, 204, JSON.stringify(r.body));
    const c = await closing;
    assert.equal(c.code, 1008, `the old token's socket is closed: ${JSON.stringify(c)}`);
    assert.match(c.reason, /revoked/);
    await ping(admin); // the admin's socket stays

    assert.deepEqual(ok(await call(A, "GET", "/sessions"), 200).sessions, []);
    assert.deepEqual(ok(await call(A, "GET", "/memories"), 200).memories, []);
    assertError(await call(A, "GET", "/sessions/s1"), 404, "not_found", "s1 after the erase");
    assert.deepEqual(ok(await call(A, "GET", "/search?q=Porto"), 200).results, []);
    assert.equal(ok(await call(A, "GET", "/sessions/x/context/profile"), 200).content, "", "the agent-scoped block is empty");
    assert.deepEqual(await r2(`_spill/${A}/`), [], "no spilled object left");
    assert.deepEqual(await r2(`skills/${A}/`), [], "no skill left");
    const after = lines(await exported(A));
    assert.deepEqual(after, [{ format: FORMAT, kind: "agent" },
      { kind: "end", counts: { sessions: 0, messages: 0, memories: 0, memoryVersions: 0, entries: 0, skills: 0, schedules: 0, scheduleRuns: 0, usage: 0 } }]);

    // Tokens issued before the erase are refused (HTTP and upgrade); one issued after works.
    for (const t of [old, oldLimited]) assertError(await call(A, "GET", "/sessions/s1/history", undefined, { auth: t }), 401, "unauthorized", "an old token");
    await assert.rejects(w.webSocket(`/agents/${A}/sessions/s1/ws`, { auth: old, query: true }), /HTTP 401/);
    const fresh = await mint(A, { scope: "write", ttlSeconds: 600 });
    assert.ok(JSON.parse(Buffer.from(fresh.split(".")[1], "base64url")).iat * 1000 >= start - 5);
    assert.deepEqual(ok(await call(A, "GET", "/sessions", undefined, { auth: fresh }), 200).sessions, []);
    ok(await call(A, "POST", "/sessions/n/messages", { message: text("n1", "user", "after the erase") }, { auth: fresh }), 201);
    assert.equal((await call(A, "DELETE", "/sessions/n", undefined, { auth: fresh })).status, 204);
  } finally {
    scoped.close();
    admin.close();
  }

  // Other agents are untouched, their tokens too.
  assert.equal((await call(RICH, "GET", "/sessions", undefined, { auth: othersOld })).status, 200, "another agent's older token still works");
  assert.equal(await exported(RICH), richBefore.text, "alice untouched");
  assert.deepEqual(await agentObjects(RICH), richBefore.objects, "alice's R2 objects untouched");
  // Erasing an empty agent is fine; the erased agent takes an import again.
  assert.equal((await w.json("DELETE", `/agents/${A}`, undefined, { headers: { confirm: "erase" } })).status, 204);
  ok(await importAgent(A, good), 201, "an erased agent takes an import");
  assert.equal(await exported(A), good);
});

// ── Split ────────────────────────────────────────────────────────────────────────────────────

test("a split over HTTP ends the session, starts one from the summary, and tells the old session's sockets", async () => {
  const A = "splitter";
  ok(await call(A, "POST", "/sessions/old/messages", { message: text("h1", "user", "hello there") }), 201);
  ok(await call(A, "POST", "/sessions/old/messages", { message: text("h2", "assistant", "hi"), parentId: "h1" }), 201);
  const ws = await w.webSocket(`/agents/${A}/sessions/old/ws`);
  try {
    await ping(ws);
    const idle = collect(ws, (f) => f?.type === "status" && f.sessionId === "old" && f.phase === "idle");
    const info = ok(await call(A, "POST", "/sessions/old/split", { name: "Next", summary: "Said hello." }), 201, "split");
    assert.equal(info.name, "Next");
    assert.equal(info.parentSessionId, "old");
    assert.notEqual(info.id, "old");
    const frames = await idle;
    assert.equal(typeof frames.at(-1).tokenEstimate, "number");
    const h = ok(await call(A, "GET", `/sessions/${info.id}/history`), 200).messages;
    assert.equal(h.length, 1);
    assert.equal(h[0].role, "assistant");
    assert.deepEqual(h[0].parts, [{ type: "text", text: "[Context from previous session]\n\nSaid hello." }]);
    assert.equal(ok(await call(A, "GET", "/sessions/old"), 200).endReason, "split");
    assert.deepEqual(ok(await call(A, "GET", "/sessions/old/history"), 200).messages.map((m) => m.id), ["h1", "h2"], "the old session keeps its messages");
  } finally {
    ws.close();
  }

  // Without a summary, a long session is compacted by the model now.
  model.reset();
  for (let i = 0; i < 12; i++) {
    ok(await call(A, "POST", "/sessions/long/messages", { message: text(`l${i}`, i % 2 ? "assistant" : "user", `message number ${i} ${"words ".repeat(4000)}`) }), 201);
  }
  const next = ok(await call(A, "POST", "/sessions/long/split", {}), 201, "split without summary");
  assert.equal(model.requests.length, 1, "one summary written");
  const first = ok(await call(A, "GET", `/sessions/${next.id}/history`), 200).messages[0].parts[0].text;
  assert.equal(first, `[Context from previous session]\n\n${DEFAULT_SUMMARY}`);
  assert.equal(ok(await call(A, "GET", "/sessions/long"), 200).endReason, "split");

  // Nothing to summarize: 409; bad bodies 400; an unknown session 404; nothing changed.
  ok(await call(A, "POST", "/sessions/short/messages", { message: text("x1", "user", "hi") }), 201);
  assertError(await call(A, "POST", "/sessions/short/split", {}), 409, "conflict", "nothing to summarize");
  assertError(await call(A, "POST", "/sessions/short/split", { summary: " " }), 400, "invalid_request", "blank summary");
  assertError(await call(A, "POST", "/sessions/short/split", { nam: "x" }), 400, "invalid_request", "unknown field");
  assertError(await call(A, "POST", "/sessions/none/split", { summary: "s" }), 404, "not_found", "unknown session");
  assert.equal(ok(await call(A, "GET", "/sessions/short"), 200).endReason ?? null, null);
  const ids = ok(await call(A, "GET", "/sessions"), 200).sessions.map((s) => s.id);
  assert.equal(ids.length, 5, `old, its split, long, its split, short: ${ids}`);
});

test("an imported skill is under one of the agent's skills prefixes, or the import is refused", async () => {
  const A = "eve";
  const body = [
    { format: FORMAT, kind: "agent" },
    { kind: "skill", prefix: "kb/", key: "k1", description: null, content: "not a configured prefix" },
    { kind: "skill", prefix: "_spill/", key: "s/x", description: null, content: "\"in the spill area\"" },
    { kind: "end", counts: { sessions: 0, messages: 0, memories: 0, memoryVersions: 0, entries: 0, skills: 2 } },
  ].map((r) => JSON.stringify(r)).join("\n") + "\n";
  const r = await importAgent(A, body);
  try {
    assertError(r, 400, "invalid_request", "a skill outside the agent's skills prefixes");
    assert.deepEqual([...await r2(`kb/${A}/`), ...await r2(`_spill/${A}/`)], [], "a refused import puts nothing");
  } finally {
    const e = await w.json("DELETE", `/agents/${A}`, undefined, { headers: { confirm: "erase" } });
    assert.equal(e.status, 204);
    assert.deepEqual([...await r2(`kb/${A}/`), ...await r2(`_spill/${A}/`)], [], "nothing of the agent stays in R2 after its erase");
  }
});

// ── An agent with schedules and its memory space ─────────────────────────────────────────────

/** A Worker whose agents have a block kept in their memory space (the admin chooses the space). */
const SPACE_CONFIG = {
  context: [{ label: "notes", kind: "writable" }, { label: "team", kind: "writable", scope: "space", content: "Team:" }],
};
let sw;
/** The second Worker, started on first use (stopped with the first in `after`). */
async function spaceWorker() {
  sw ??= await startWorker({
    vars: {
      SESSION_CONFIG: JSON.stringify(SPACE_CONFIG), TOKEN_SECRET: SECRET,
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
    },
  });
  return sw;
}
after(async () => { await sw?.stop(); });

/** `GET <path>/export` of the second Worker (`/agents/x` or `/spaces/x`) as text, asserting 200. */
async function exportOf(base) {
  const r = await sw.fetch(`${base}/export`);
  const t = await r.text();
  assert.equal(r.status, 200, t.slice(0, 500));
  assert.equal(r.headers.get("content-type"), "application/x-ndjson; charset=utf-8");
  return t;
}
/** `POST <path>/import` of the second Worker: {status, body}. */
async function importInto(base, body, headers = {}) {
  const r = await sw.fetch(`${base}/import`, { method: "POST", body, headers: { "content-type": "application/x-ndjson", ...headers } });
  const t = await r.text();
  let parsed = t;
  try { parsed = t ? JSON.parse(t) : null; } catch { /* not JSON */ }
  return { status: r.status, body: parsed };
}
/** An ISO time `ms` from now, with milliseconds (as the service writes times). */
const inMs = (ms) => new Date(Date.now() + ms).toISOString();

/** An agent (`mover`) with two schedules, a run, a ledger, a shared block it wrote and its
 * chosen space (`team-src`: memories with versions, the block, a deleted one); both exports. */
let moverSetup = null;
async function mover() {
  if (moverSetup) return moverSetup;
  await spaceWorker();
  const json = (method, path, body) => sw.json(method, path, body);
  const space = "/spaces/team-src";
  const m = ok(await json("POST", `${space}/memories`, { content: "The user is vegetarian", tags: ["food"] }), 201, "space memory");
  ok(await json("PATCH", `${space}/memories/${m.id}`, { content: "The user is vegan" }), 200, "space memory patch");
  ok(await json("PUT", `${space}/blocks/scratch`, { content: "soon gone", version: 0 }), 200, "scratch");
  assert.equal((await json("DELETE", `${space}/blocks/scratch`)).status, 204);
  const agent = "/agents/mover";
  ok(await json("PUT", `${agent}/space`, { space: "team-src" }), 200, "choose the space");
  ok(await json("POST", `${agent}/sessions/s1/messages`, { message: text("u1", "user", "hello") }), 201, "append");
  ok(await json("POST", `${agent}/sessions/s1/context/team/append`, { content: "- likes jazz" }), 200, "shared append");
  const hourly = ok(await json("POST", `${agent}/schedules`, { prompt: "Check the plan", every: 3600, sessionId: "s1" }), 201, "hourly");
  const daily = ok(await json("POST", `${agent}/schedules`, { prompt: "Morning brief", cron: "0 7 * * *", name: "Brief" }), 201, "daily");
  model.reply({ content: "Sunny all day." });
  assert.equal(ok(await json("POST", `${agent}/schedules/${daily.id}/run`), 200, "run").status, "ok");
  moverSetup = { hourly: hourly.id, daily: daily.id, memory: m.id, agent: await exportOf(agent), space: await exportOf(space) };
  return moverSetup;
}

test("an agent with schedules and its space move field by field, byte for byte, and the imported schedules are armed", { timeout: 60_000 }, async () => {
  const { hourly, daily, memory, agent, space } = await mover();
  const recs = lines(agent);
  assert.deepEqual(recs[0], { format: FORMAT, kind: "agent" });
  const kinds = recs.map((r) => r.kind);
  for (const [kind, n] of [["schedule", 2], ["scheduleRun", 1], ["spaceChoice", 1], ["sharedBlockRead", 1]]) {
    assert.equal(kinds.filter((k) => k === kind).length, n, `${kind} records`);
  }
  assert.ok(kinds.includes("usage"), "the ledger's rows");
  assert.deepEqual(recs.at(-1).counts, { sessions: 1, messages: 1, memories: 0, memoryVersions: 0, entries: 0, skills: 0, schedules: 2, scheduleRuns: 1, usage: kinds.filter((k) => k === "usage").length });
  const srecs = lines(space);
  assert.deepEqual(srecs[0], { format: FORMAT, kind: "space" });
  assert.deepEqual(srecs.at(-1), { kind: "end", counts: { memories: 1, memoryVersions: 2, sharedBlocks: 2 } });
  assert.ok(srecs.some((r) => r.kind === "sharedBlock" && r.label === "scratch" && r.deletedAt && r.content === ""), "the tombstone travels");

  // Into fresh objects of the same Worker: the same counts, the same exports.
  const sc = ok(await importInto("/spaces/team-dst", space), 201, "space import");
  assert.deepEqual(sc, { memories: 1, memoryVersions: 2, sharedBlocks: 2 });
  const ac = ok(await importInto("/agents/moved", agent), 201, "agent import");
  assert.deepEqual(ac, recs.at(-1).counts);
  assert.equal(await exportOf("/spaces/team-dst"), space, "a space: export → import → export is byte-identical");
  assert.equal(await exportOf("/agents/moved"), agent, "an agent with schedules: byte-identical");
  // Field by field, as a user reads them.
  const same = async (from, to, path) => {
    const [x, y] = [await sw.json("GET", `${from}${path}`), await sw.json("GET", `${to}${path}`)];
    assert.equal(x.status, 200, `${from}${path}: ${JSON.stringify(x.body)}`);
    assert.deepEqual(y.body, x.body, path);
  };
  for (const path of ["/schedules", `/schedules/${hourly}`, `/schedules/${daily}/runs`, "/space",
    "/usage?from=2020-01-01T00:00:00.000Z&to=2100-01-01T00:00:00.000Z", "/sessions/s1/history", "/sessions/s1/context/team"]) {
    await same("/agents/mover", "/agents/moved", path);
  }
  for (const path of ["/memories", `/memories/${memory}/history`, "/blocks", "/blocks/scratch", "/blocks/team"]) {
    await same("/spaces/team-src", "/spaces/team-dst", path);
  }
  // The moved session replaces the shared block at the version it read (the model's tool).
  const r = ok(await sw.json("POST", "/agents/moved/sessions/s1/tools/set_context", { input: { label: "team", content: "Team: jazz" } }), 200, "set_context");
  assert.doesNotMatch(r.output, /changed|conflict/i, r.output);
  assert.equal(ok(await sw.json("GET", "/spaces/team-src/blocks/team"), 200).content, "Team: jazz");

  // Armed: the same export with the hourly schedule due in a moment runs in the new agent by
  // its alarm, with no request.
  const soon = inMs(1_500);
  const due = recs.map((rec) => JSON.stringify(rec.kind === "schedule" && rec.id === hourly ? { ...rec, nextRunAt: soon } : rec)).join("\n") + "\n";
  model.reply({ content: "Plan checked by the alarm." });
  ok(await importInto("/agents/armed", due), 201, "import of a due schedule");
  // Its run is listed from its start (`running`) until it ends: wait for the end.
  const runs = await eventually("the imported schedule's run, ended", async () => {
    const list = ok(await sw.json("GET", `/agents/armed/schedules/${hourly}/runs`), 200).runs;
    return list.length && list[0].status !== "running" ? list : null;
  }, 20_000);
  assert.equal(runs[0].status, "ok", JSON.stringify(runs[0]));
  assert.equal(runs[0].reply, "Plan checked by the alarm.");
  assert.deepEqual(ok(await sw.json("GET", `/agents/mover/schedules/${hourly}/runs`), 200).runs, [], "the source did not run it");
});

test("a space's import is refused whole when bad, when the space holds anything, or for a token; two at once: one wins", { timeout: 60_000 }, async () => {
  const { agent, space } = await mover();
  const good = space.split("\n").filter((l) => l);
  const empty = await exportOf("/spaces/team-bad");
  const edit = (kind, has, f) => good.map((l) => (l.includes(`"kind":"${kind}"`) && l.includes(has) ? JSON.stringify(f(JSON.parse(l))) : l)).join("\n");
  const cases = [
    [agent, "has kind \"space\""],
    [edit("sharedBlock", "scratch", (r) => ({ ...r, content: "back" })), "holds no text"],
    [edit("sharedBlock", "team", (r) => ({ ...r, version: 0 })), "counts from 1"],
    [edit("sharedBlock", "team", (r) => ({ ...r, label: "a b" })), "label"],
    [good.slice(0, -1).join("\n"), "cut off"],
    [good.join("\n").replace(FORMAT, "session-agent/4"), "newer"],
    [[good[0], JSON.stringify({ kind: "schedule", id: "sch_x" }), ...good.slice(1)].join("\n"), "no place in the export of a space"],
    ["not json", "JSON"],
  ];
  for (const [body, why] of cases) {
    const r = await importInto("/spaces/team-bad", body);
    assertError(r, 400, "invalid_request", why);
    assert.ok(r.body.error.message.includes(why), `${why}: ${r.body.error.message}`);
    assert.equal(await exportOf("/spaces/team-bad"), empty, `${why}: nothing written`);
  }
  // A space's export goes into no agent; an agent holding data, or a space, takes none.
  assertError(await importInto("/agents/space-into-agent", space), 400, "invalid_request", "a space's export into an agent");
  const held = await exportOf("/spaces/team-src");
  assertError(await importInto("/spaces/team-src", space), 409, "conflict", "a space that holds data");
  assert.equal(await exportOf("/spaces/team-src"), held, "unchanged");
  // Admin only: a token of the space, even with scope write, is 403.
  const token = ok(await sw.json("POST", "/spaces/team-token/tokens", { scope: "write", ttlSeconds: 60 }), 201, "space token").token;
  const bearer = { authorization: `Bearer ${token}` };
  assert.equal((await sw.fetch("/spaces/team-token/memories", { auth: false, headers: bearer })).status, 200, "the token opens its space");
  assert.equal((await sw.fetch("/spaces/team-token/export", { auth: false, headers: bearer })).status, 403);
  assert.equal((await importInto("/spaces/team-token", space, bearer)).status, 403);
  assert.equal(await exportOf("/spaces/team-token"), empty, "nothing written for a token");
  // Two imports at once into one empty object: one is written, the other refused; no mix.
  for (const [base, body] of [["/spaces/team-race", space], ["/agents/race", agent]]) {
    const statuses = (await Promise.all([importInto(base, body), importInto(base, body)])).map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, 409], `${base}: one import wins`);
    assert.equal(await exportOf(base), body, `${base}: the winner whole, nothing of the other`);
  }
});
