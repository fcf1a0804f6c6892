// End-to-end in workerd (issue 35): several messages deleted in one request (all or nothing,
// hostile bodies refused with nothing changed, two overlapping deletes at once: one wins whole,
// the other changes nothing), a memory stored under a given id or replaced (PUT), a session's
// storage figures (a field spilled to the local R2 counted, then gone with its message), and
// memory per agent and per call: an agent scoped to a tag injects only those facts, a call's
// memory spec overrides that for one turn, and bad specs are 400 with no model call. Mirrors
// tests/it/rows.rs and tests/it/memory_scope.rs.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

let model;
let w;
const CONFIG = { memory: { tags: ["support"], extract: false } };

before(async () => {
  model = await startModel();
  w = await startWorker({
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      SESSION_CONFIG: JSON.stringify(CONFIG),
    },
  });
});
after(async () => { await w?.stop(); await model?.close(); });

const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const call = (agent, method, path, body) => w.json(method, `/agents/${agent}${path}`, body);
/** Appends a → b → c → d and x under b in session `sid`. */
async function chain(agent, sid) {
  for (const [id, parentId] of [["a", null], ["b", "a"], ["c", "b"], ["d", "c"], ["x", "b"]]) {
    const r = await call(agent, "POST", `/sessions/${sid}/messages`, { message: user(id, id), parentId });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
}
const path = async (agent, sid, leaf) =>
  (await call(agent, "GET", `/sessions/${sid}/history?leaf=${leaf}`)).body.messages.map((m) => m.id);
/** The ids stored in the session, on every branch (each leaf's path, joined). */
async function stored(agent, sid) {
  const ids = new Set();
  for (const leaf of ["a", "b", "c", "d", "x"]) {
    const r = await call(agent, "GET", `/sessions/${sid}/messages/${leaf}`);
    if (r.status === 200) ids.add(leaf);
    else assert.equal(r.status, 404);
  }
  return [...ids].sort();
}

test("several messages go in one request; their children become roots", async () => {
  await chain("rows", "s1");
  const r = await call("rows", "POST", "/sessions/s1/messages/delete", { ids: ["c", "b", "c"] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, { deleted: ["c", "b"] });
  assert.deepEqual(await stored("rows", "s1"), ["a", "d", "x"]);
  assert.deepEqual(await path("rows", "s1", "d"), ["d"]);
  assert.deepEqual(await path("rows", "s1", "x"), ["x"]);
  assert.deepEqual((await call("rows", "GET", "/sessions/s1/search?q=b")).body.results, []);
});

test("an unknown id or a hostile body deletes nothing", async () => {
  await chain("rows", "s2");
  const before = JSON.stringify(await call("rows", "GET", "/sessions/s2/history?leaf=d"));
  const r = await call("rows", "POST", "/sessions/s2/messages/delete", { ids: ["a", "b", "nope"] });
  assert.equal(r.status, 404, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "not_found");
  const many = Array.from({ length: 1001 }, (_, i) => `m${i}`);
  for (const body of [{}, { ids: [] }, { ids: "a" }, { ids: [1] }, { ids: ["a", null] }, { ids: [""] },
    { ids: ["a\u0000"] }, { ids: many }, { ids: ["a"], cascade: true }, ["a"], "{", "null"]) {
    const r = await call("rows", "POST", "/sessions/s2/messages/delete", body);
    assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "invalid_request");
  }
  assert.deepEqual(await stored("rows", "s2"), ["a", "b", "c", "d", "x"]);
  assert.equal(JSON.stringify(await call("rows", "GET", "/sessions/s2/history?leaf=d")), before);
  // GET, PUT and DELETE of …/messages/delete act on the message called "delete".
  assert.equal((await call("rows", "POST", "/sessions/s2/messages", { message: user("delete", "hi") })).status, 201);
  assert.equal((await call("rows", "GET", "/sessions/s2/messages/delete")).body.id, "delete");
  assert.equal((await call("rows", "DELETE", "/sessions/s2/messages/delete")).status, 204);
  assert.equal((await call("rows", "PATCH", "/sessions/s2/messages/delete", {})).status, 405);
});

test("two overlapping batch deletes at once: one deletes its ids, the other nothing", async () => {
  for (let round = 0; round < 8; round++) {
    const sid = `race${round}`;
    await chain("rows", sid);
    const [p, q] = await Promise.all([
      call("rows", "POST", `/sessions/${sid}/messages/delete`, { ids: ["a", "b", "c"] }),
      call("rows", "POST", `/sessions/${sid}/messages/delete`, { ids: ["c", "d", "x"] }),
    ]);
    const statuses = [p.status, q.status].sort();
    assert.deepEqual(statuses, [200, 404], `round ${round}: ${JSON.stringify([p.body, q.body])}`);
    const left = await stored("rows", sid);
    if (p.status === 200) assert.deepEqual(left, ["d", "x"], `round ${round}: the first won whole`);
    else assert.deepEqual(left, ["a", "b"], `round ${round}: the second won whole`);
  }
  // Disjoint ones both succeed.
  await chain("rows", "disjoint");
  const both = await Promise.all([
    call("rows", "POST", "/sessions/disjoint/messages/delete", { ids: ["a", "x"] }),
    call("rows", "POST", "/sessions/disjoint/messages/delete", { ids: ["c"] }),
  ]);
  assert.deepEqual(both.map((r) => r.status), [200, 200]);
  assert.deepEqual(await stored("rows", "disjoint"), ["b", "d"]);
});

test("PUT stores a memory under its id, then replaces it; bad ones change nothing", async () => {
  let r = await call("rows", "PUT", "/memories/pref.editor", { content: "The user edits in Vim.", tags: ["tools"] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.id, "pref.editor");
  r = await call("rows", "PUT", "/memories/pref.editor", { content: "The user edits in Helix." });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual([r.body.content, r.body.tags], ["The user edits in Helix.", []]);
  const versions = (await call("rows", "GET", "/memories/pref.editor/history")).body.versions;
  assert.equal(versions.length, 2);
  const before = JSON.stringify((await call("rows", "GET", "/memories")).body);
  for (const [p, body, status] of [
    ["/memories/a%20b", { content: "x" }, 400],
    [`/memories/${"x".repeat(129)}`, { content: "x" }, 400],
    ["/memories/m2", {}, 400],
    ["/memories/m2", { content: "x", supersedes: ["pref.editor"] }, 400],
    ["/memories/m2", { content: "x", colour: "red" }, 400],
    ["/memories/m2", "[1]", 400],
    ["/memories/m2", { content: "the user  edits in HELIX." }, 409],
    ["/memories/search", { content: "x" }, 405],
  ]) {
    const r = await call("rows", "PUT", p, body);
    assert.equal(r.status, status, `${p} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
  }
  assert.equal(JSON.stringify((await call("rows", "GET", "/memories")).body), before);
  assert.equal((await call("rows", "GET", "/memories/m2")).status, 404);
});

test("a session's storage figures count its rows and what it spilled to R2", async () => {
  assert.equal((await call("rows", "GET", "/sessions/st/storage")).status, 404);
  await chain("rows", "st");
  const big = { id: "big", role: "assistant", parts: [{ type: "dynamic-tool", toolName: "fetch", toolCallId: "c1",
    state: "output-available", input: {}, output: { body: "o".repeat(3_000_000) } }] };
  assert.equal((await call("rows", "POST", "/sessions/st/messages", { message: big })).status, 201);
  let f = (await call("rows", "GET", "/sessions/st/storage")).body;
  assert.equal(f.sessionId, "st");
  assert.equal(f.kinds.messages.rows, 6);
  assert.ok(f.r2Bytes > 3_000_000 && f.r2Objects === 1, JSON.stringify(f));
  assert.ok(f.kinds.messages.bytes < 10_000, "the row keeps a placeholder");
  assert.ok(f.sqliteBytes >= f.kinds.messages.bytes + f.kinds.prompt.bytes && f.rows >= 7, JSON.stringify(f));
  assert.equal((await call("rows", "POST", "/sessions/st/messages/delete", { ids: ["big"] })).status, 200);
  f = (await call("rows", "GET", "/sessions/st/storage")).body;
  assert.deepEqual([f.kinds.messages.rows, f.r2Bytes, f.r2Objects], [5, 0, 0]);
});

/** The `<user-memory>` block the model got in request `n`, or "". */
const injected = (n) => {
  const m = model.requests[n].body.messages[1];
  return m?.role === "system" ? m.content : "";
};

test("an agent scoped to a tag injects only its facts; a call's spec overrides that for one turn", async () => {
  model.reset();
  for (const [content, tags] of [["The user's laptop is a ThinkPad.", ["support"]], ["The user's invoice address is in Lyon.", ["billing"]]]) {
    assert.equal((await call("scoped", "POST", "/memories", { content, tags })).status, 201);
  }
  model.reply({ content: "ok" });
  let r = await call("scoped", "POST", "/sessions/s/chat", { message: user("u1", "laptop invoice?") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.ok(injected(0).includes("ThinkPad") && !injected(0).includes("Lyon"), injected(0));
  model.reply({ content: "ok" });
  r = await call("scoped", "POST", "/sessions/s/chat", { message: user("u2", "laptop invoice?"), memory: { tags: ["billing"], limit: 1 } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.ok(injected(1).includes("Lyon") && !injected(1).includes("ThinkPad"), injected(1));
  model.reply({ content: "ok" });
  r = await call("scoped", "POST", "/sessions/s/chat", { message: user("u3", "laptop?"), memory: { inject: false } });
  assert.equal(r.status, 201);
  assert.equal(injected(2), "");
  // The recall tool keeps to the agent's scope.
  r = await call("scoped", "POST", "/sessions/s/tools/memory_recall", { input: { query: "laptop invoice" } });
  assert.ok(r.body.output.includes("ThinkPad") && !r.body.output.includes("Lyon"), r.body.output);
});

test("bad memory specs are 400 and run nothing", async () => {
  model.reset();
  for (const memory of [1, "yes", null, [], { inject: "yes" }, { tags: "x" }, { tags: [""] }, { tags: ["x".repeat(65)] },
    { tags: Array.from({ length: 17 }, (_, i) => `t${i}`) }, { categories: [] }, { categories: ["weekly"] },
    { limit: 0 }, { limit: 51 }, { limit: 2.5 }, { recall: true }]) {
    const r = await call("scoped", "POST", "/sessions/fresh/chat", { message: user("u1", "hi"), memory });
    assert.equal(r.status, 400, `${JSON.stringify(memory)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "invalid_request");
  }
  assert.equal(model.requests.length, 0, "no model call");
  assert.equal((await call("scoped", "GET", "/sessions/fresh")).status, 404, "nothing stored");
});
