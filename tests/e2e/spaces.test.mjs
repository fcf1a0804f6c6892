// End-to-end: memory spaces in workerd (the MemorySpace Durable Object class beside
// SessionAgent) against a real OpenAI-compatible HTTP peer on localhost (./llm-server.mjs).
// Three agents, two spaces: `alice:planner` and `alice:support` share the space `alice`
// (SESSION_CONFIG.memory.space's rule), `bob:planner` has `bob`. A fact told to the first is
// extracted into the space and injected into the second's turn, never the third's; a
// correction through the second supersedes it; concurrent appends to a shared block from both
// agents all land and a stale replace is 409, also one naming a version read before a delete
// (a label's versions never repeat); a space refuses conversation memories (it has no
// sessions); tokens of an agent or a space open nothing else;
// a Worker without the MEMORY_SPACE binding still answers every turn, with a `space` frame.
// Mirrors tests/it/spaces.rs (the same scenarios natively).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, eventually, collect } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

/** @type {import("./llm-server.mjs").LlmServer} */
let model;
let w;
const CONFIG = {
  memory: { space: true, inject: { limit: 5 } },
  context: [
    { label: "profile", kind: "writable", scope: "space", maxTokens: 2000, content: "Profile:" },
    { label: "plan", kind: "writable", scope: "space" },
  ],
};
const VARS = {
  LLM_PROVIDER: "openai", LLM_MODEL: "test-model", TOKEN_SECRET: "spaces-test-secret-0123456789abcdef",
  DIRECTORY_REPORT_MS: "100",
  SESSION_CONFIG: JSON.stringify(CONFIG),
};

before(async () => {
  model = await startModel();
  w = await startWorker({ vars: { ...VARS, LLM_BASE_URL: model.baseUrl } });
});
after(async () => { await w?.stop(); await model?.close(); });

const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const facts = (list) => ({ content: JSON.stringify({ facts: list }) });
const decide = (list) => ({ content: JSON.stringify({ memory: list }) });
const held = async (space) => {
  const r = await w.json("GET", `/spaces/${space}/memories`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.memories;
};
async function chat(agent, sid, id, text) {
  const r = await w.json("POST", `/agents/${agent}/sessions/${sid}/chat`, { message: user(id, text) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.messages[0];
}
/** The `<user-memory>` block the model was sent in request `n` ("" when none). */
const injected = (n) =>
  (model.requests[n].body.messages.map((m) => m.content).find((c) => typeof c === "string" && c.startsWith("<user-memory>")) ?? "");
const settled = (n) => eventually(`${n} model requests (got ${model.requests.length})`, () => model.requests.length >= n, 10_000);

test("a fact told to one agent is recalled by the other agent of its space and not by a third", async () => {
  model.reset();
  model.reply({ content: "Noted." });
  model.reply(facts([{ fact: "The user is allergic to peanuts.", score: 0.95, tags: ["food"] }]));
  await chat("alice:planner", "s1", "u1", "I am allergic to peanuts.");
  const stored = await eventually("the fact in the space", async () => (await held("alice")).length === 1 && (await held("alice")), 10_000);
  assert.equal(stored[0].content, "The user is allergic to peanuts.");
  assert.deepEqual(stored[0].metadata, { agent: "alice:planner" });
  assert.equal((await w.json("GET", "/agents/alice:planner/memories")).body.memories.length, 0, "not in the agent's own memories");

  model.reply({ content: "No peanuts then." });
  const before = model.requests.length;
  const reply = await chat("alice:support", "t1", "v1", "Any peanuts allergy I should know of?");
  assert.match(injected(before), /- The user is allergic to peanuts\./);
  assert.deepEqual(reply.metadata.memories, [stored[0].id]);
  await settled(before + 2); // its extraction (nothing new)

  model.reply({ content: "Hm?" });
  const c = model.requests.length;
  await chat("bob:planner", "x1", "w1", "Any peanuts allergy I should know of?");
  assert.equal(injected(c), "", "the other space's fact never reaches agent C");
  await settled(c + 2);
  assert.equal((await held("bob")).length, 0);
});

test("a correction through the second agent supersedes what the first stored", async () => {
  model.reset();
  model.reply({ content: "Paris!" });
  model.reply(facts([{ fact: "The user lives in Paris.", score: 0.9 }]));
  await chat("alice:planner", "s2", "u2", "I live in Paris.");
  const paris = await eventually("Paris stored", async () => (await held("alice")).find((m) => m.content.includes("Paris")), 10_000);
  model.reply({ content: "Berlin, nice." });
  model.reply(facts([{ fact: "The user moved to Berlin.", score: 0.95 }]));
  model.reply(decide([{ id: paris.id, text: "The user lives in Berlin.", event: "UPDATE" }]));
  await chat("alice:support", "t2", "v2", "I moved from Paris to Berlin.");
  await eventually("Berlin stored", async () => (await held("alice")).some((m) => m.content === "The user lives in Berlin."), 10_000);
  const now = (await held("alice")).map((m) => m.content);
  assert.ok(!now.some((c) => c.includes("Paris")), JSON.stringify(now));
  const old = (await w.json("GET", `/spaces/alice/memories/${paris.id}`)).body;
  assert.ok(old.supersededBy && old.invalidAt, JSON.stringify(old));
  // The first agent's next turn is given the correction.
  model.reply({ content: "Berlin." });
  const n = model.requests.length;
  await chat("alice:planner", "s2", "u3", "Where do I live, Paris or Berlin?");
  assert.match(injected(n), /Berlin/);
  assert.doesNotMatch(injected(n), /Paris\./);
  await settled(n + 2);
});

test("two agents appending to a shared block at once keep every append; a stale replace is 409", async () => {
  const writes = [];
  for (let i = 0; i < 10; i++) {
    const agent = i % 2 ? "alice:support" : "alice:planner";
    writes.push(w.json("POST", `/agents/${agent}/sessions/b${i % 2}/context/profile/append`, { content: `- fact ${i}` }));
  }
  const answers = await Promise.all(writes);
  for (const r of answers) assert.equal(r.status, 200, JSON.stringify(r.body));
  const shared = (await w.json("GET", "/spaces/alice/blocks/profile")).body;
  assert.equal(shared.version, 10);
  const lines = shared.content.split("\n");
  assert.equal(lines[0], "Profile:");
  assert.deepEqual(lines.slice(1).sort(), Array.from({ length: 10 }, (_, i) => `- fact ${i}`).sort());
  // Both agents see the same text.
  const seen = (await w.json("GET", "/agents/alice:support/sessions/b9/context/profile")).body;
  assert.equal(seen.content, shared.content);
  assert.equal(seen.version, 10);
  // A replace naming a version another write passed: 409, nothing written.
  const stale = await w.json("PUT", "/agents/alice:planner/sessions/b0/context/profile", { content: "Profile: reset", version: 5 });
  assert.equal(stale.status, 409, JSON.stringify(stale.body));
  assert.equal(stale.body.error.code, "version_conflict");
  assert.equal((await w.json("GET", "/spaces/alice/blocks/profile")).body.version, 10);
  const ok = await w.json("PUT", "/agents/alice:planner/sessions/b0/context/profile", { content: "Profile: reset", version: 10 });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  // Two replaces of the same version at once: exactly one lands.
  const race = await Promise.all(["x", "y"].map((t) =>
    w.json("PUT", "/spaces/alice/blocks/profile", { content: t, version: 11 })));
  assert.deepEqual(race.map((r) => r.status).sort(), [200, 409]);
});

test("a replace naming a version read before a delete is 409, through the agent and the space's own route", async () => {
  const ctx = (agent, sid) => `/agents/${agent}/sessions/${sid}/context/plan`;
  const conflict = (r, why) => {
    assert.equal(r.status, 409, `${why}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "version_conflict");
  };
  // B writes the plan (version 1); A reads version 1.
  let r = await w.json("PUT", ctx("alice:support", "p1"), { content: "B: fly on Monday", version: 0 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.version, 1);
  assert.equal((await w.json("GET", ctx("alice:planner", "p0"))).body.version, 1);
  // The block is deleted: the delete is a version of its own; the label lists no more.
  assert.equal((await w.fetch("/spaces/alice/blocks/plan", { method: "DELETE" })).status, 204);
  assert.deepEqual((await w.json("GET", "/spaces/alice/blocks/plan")).body,
    { label: "plan", content: "", version: 2, updatedAt: null, updatedBy: null });
  assert.ok(!(await w.json("GET", "/spaces/alice/blocks")).body.blocks.some((b) => b.label === "plan"));
  // B writes it again: version 3, not 1 again.
  r = await w.json("POST", `${ctx("alice:support", "p1")}/append`, { content: "B: fly on Tuesday" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual([r.body.content, r.body.version], ["B: fly on Tuesday", 3]);
  // A's replace naming the version it read: refused, B's text stays.
  conflict(await w.json("PUT", ctx("alice:planner", "p0"), { content: "A: stay home", version: 1 }), "through the agent");
  for (const version of [1, 2]) {
    conflict(await w.json("PUT", "/spaces/alice/blocks/plan", { content: "A: stay home", version }), `through the space, version ${version}`);
  }
  assert.equal((await w.json("GET", "/spaces/alice/blocks/plan")).body.content, "B: fly on Tuesday");
  // The same, through the space's own routes only.
  r = await w.json("PUT", "/spaces/alice/blocks/agenda", { content: "B: 9:00 standup", version: 0 });
  assert.equal(r.body.version, 1, JSON.stringify(r.body));
  assert.equal((await w.fetch("/spaces/alice/blocks/agenda", { method: "DELETE" })).status, 204);
  r = await w.json("PUT", "/spaces/alice/blocks/agenda", { content: "B: 10:00 standup", version: 2 });
  assert.equal(r.body.version, 3, JSON.stringify(r.body));
  conflict(await w.json("PUT", "/spaces/alice/blocks/agenda", { content: "A: no standup", version: 1 }), "through the space");
  assert.equal((await w.json("GET", "/spaces/alice/blocks/agenda")).body.content, "B: 10:00 standup");
});

test("a space refuses conversation memories on every write path, storing nothing", async () => {
  const talk = { content: "We talked about ferries.", category: "conversation", sessionId: "s1" };
  const refused = (r, what) => {
    assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "invalid_request", what);
    assert.match(r.body.error.message, /no sessions.*conversation/, what);
  };
  const before = (await held("alice")).length;
  refused(await w.json("POST", "/spaces/alice/memories", talk), "POST");
  refused(await w.json("POST", "/spaces/alice/memories/batch", { memories: [{ content: "The user likes ferries." }, talk] }), "batch");
  const core = await w.json("POST", "/spaces/alice/memories", { content: "The user likes ferries.", sessionId: "s1" });
  assert.equal(core.status, 201, JSON.stringify(core.body));
  refused(await w.json("PATCH", `/spaces/alice/memories/${core.body.id}`, { category: "conversation" }), "PATCH");
  assert.equal((await w.json("GET", `/spaces/alice/memories/${core.body.id}`)).body.category, "core");
  const now = await held("alice");
  assert.equal(now.length, before + 1, JSON.stringify(now));
  assert.ok(!now.some((m) => m.category === "conversation"));
  // The agents' extraction into it stored core memories only.
  assert.equal((await w.json("GET", "/spaces/alice/memories?category=conversation")).body.memories.length, 0);
});

test("tokens of one agent or space never open another; link routes are not served", async () => {
  const mint = async (path, body) => {
    const r = await w.json("POST", `${path}/tokens`, body);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  };
  const space = await mint("/spaces/alice", { scope: "write", ttlSeconds: 600 });
  assert.equal(space.kind, "space");
  const read = (await mint("/spaces/alice", { scope: "read", ttlSeconds: 600 })).token;
  const agent = (await mint("/agents/alice", { scope: "write", ttlSeconds: 600 })).token;
  assert.equal((await mint("/agents/alice", { scope: "write", ttlSeconds: 600 })).kind, "agent");
  const as = (token) => ({ headers: { authorization: `Bearer ${token}` } });
  assert.equal((await w.json("GET", "/spaces/alice/memories", undefined, as(space.token))).status, 200);
  assert.equal((await w.json("GET", "/spaces/alice/blocks", undefined, as(read))).status, 200);
  assert.equal((await w.json("POST", "/spaces/alice/memories", { content: "x" }, as(read))).status, 403);
  assert.equal((await w.json("GET", "/spaces/bob/memories", undefined, as(space.token))).status, 403);
  assert.equal((await w.json("GET", "/agents/alice/memories", undefined, as(space.token))).status, 403);
  assert.equal((await w.json("GET", "/agents/alice:planner/memories", undefined, as(space.token))).status, 403);
  assert.equal((await w.json("GET", "/spaces/alice/memories", undefined, as(agent))).status, 403);
  assert.equal((await w.json("POST", "/spaces/alice/tokens", { scope: "read", ttlSeconds: 60 }, as(space.token))).status, 403);
  assert.equal((await w.json("POST", "/spaces/alice/tokens", { scope: "read", ttlSeconds: 60, sessions: ["s"] })).status, 400);
  for (const path of ["/spaces/alice/link/extract", "/spaces/alice/link/blocks/profile"]) {
    assert.equal((await w.json("POST", path, {})).status, 404, path);
  }
  assert.equal((await w.json("GET", "/agents/alice:planner/space")).body.space, "alice");
  assert.equal((await w.json("GET", "/agents/alice:planner/space", undefined, as(agent))).status, 403);
  // Hostile names and bodies: 400, nothing changed.
  for (const [method, path, body] of [
    ["GET", "/spaces/a%2Fb/memories"], ["GET", `/spaces/${"x".repeat(129)}/memories`],
    ["PUT", "/agents/alice:planner/space", { space: "../x" }], ["PUT", "/agents/alice:planner/space", { space: 1 }],
    ["PUT", "/spaces/alice/blocks/profile", { content: "z", version: -1 }],
    ["PUT", "/spaces/alice/blocks/profile", { content: "z", version: 1, agent: "spoof" }],
  ]) {
    assert.equal((await w.json(method, path, body)).status, 400, `${method} ${path}`);
  }
  assert.equal((await w.json("GET", "/agents/alice:planner/space")).body.space, "alice");
  // Revoking the space's tokens leaves the agent's working.
  assert.equal((await w.json("POST", "/spaces/alice/tokens/revoke", {})).status, 200);
  assert.equal((await w.json("GET", "/spaces/alice/memories", undefined, as(space.token))).status, 401);
  assert.equal((await w.json("GET", "/agents/alice/sessions", undefined, as(agent))).status, 200);
});

test("the directory lists spaces as spaces and agents as agents", async () => {
  const entries = async (q) => (await w.json("GET", `/directory?${q}`)).body.items;
  const space = await eventually("the space alice listed", async () =>
    (await entries("kind=space&prefix=alice")).find((e) => e.name === "alice"), 10_000);
  assert.equal(space.kind, "space");
  assert.ok(space.memories >= 1, JSON.stringify(space));
  assert.equal(space.sessions, 0);
  const agents = (await entries("kind=agent&prefix=alice")).map((e) => e.name);
  assert.ok(agents.includes("alice:planner") && !agents.includes("alice"), JSON.stringify(agents));
});

test("erasing a space erases its memories; erasing an agent leaves what it wrote into the space", async () => {
  model.reset();
  model.reply({ content: "ok" });
  model.reply(facts([{ fact: "The user collects stamps.", score: 0.9 }]));
  await chat("carol:a", "s", "u1", "I collect stamps.");
  await eventually("stamps stored", async () => (await held("carol")).length === 1, 10_000);
  await eventually("carol and carol:a in the directory", async () =>
    (await w.json("GET", "/directory?prefix=carol")).body.items.length === 2, 10_000);
  const erase = await w.fetch("/agents/carol:a", { method: "DELETE", headers: { confirm: "erase" } });
  assert.equal(erase.status, 204);
  assert.equal((await held("carol")).length, 1, "the user's fact stays in the space");
  const gone = await w.fetch("/spaces/carol", { method: "DELETE", headers: { confirm: "erase" } });
  assert.equal(gone.status, 204);
  assert.equal((await held("carol")).length, 0);
  // Neither holds anything now: both leave the directory.
  await eventually("carol and carol:a out of the directory", async () =>
    (await w.json("GET", "/directory?prefix=carol")).body.items.length === 0, 10_000);
});

test("without the MEMORY_SPACE binding every turn still answers, with a space frame", async () => {
  const lone = await startWorker({
    vars: { ...VARS, LLM_BASE_URL: model.baseUrl },
    options: { durableObjects: { SESSION_AGENT: { className: "SessionAgent", useSQLite: true } } },
  });
  try {
    model.reset();
    const ws = await lone.webSocket("/agents/dana:a/sessions/s/ws");
    const frames = collect(ws, (f) => f.type === "space", 10_000);
    model.reply({ content: "Still here." });
    const r = await lone.json("POST", "/agents/dana:a/sessions/s/chat", { message: user("u1", "Hello") });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const got = await frames;
    const space = got.find((f) => f.type === "space");
    assert.deepEqual([space.space, space.status], ["dana", "unreachable"]);
    ws.close();
    assert.equal((await lone.json("GET", "/spaces/dana/memories")).status, 503);
    const block = await lone.json("GET", "/agents/dana:a/sessions/s/context/profile");
    assert.equal(block.body.error?.code, "space_unavailable", JSON.stringify(block.body));
  } finally {
    await lone.stop();
  }
});
