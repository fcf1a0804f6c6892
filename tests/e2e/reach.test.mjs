// The holes an outside probe found, closed, end to end in workerd: a token limited to some
// sessions reaches only those through every tool (HTTP, the official MCP SDK client, and a turn
// whose model calls each tool); a conversation memory registers its session; an agent import the
// API could never have written is refused whole; a streamed answer whose UTF-16 surrogate pairs
// are split across deltas (as a JavaScript proxy slicing by code units sends them) is stored
// whole; a token of 500 sessions (the most, with the longest ids: an 87 KB bearer header) goes
// everywhere such a token may, its list bound to SQL as one parameter, and reaches no other
// session; a session-limited token may not fork or split (it could not open what it made).
// Every error these provoke is checked by the harness for storage words.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: "You are careful." },
    { label: "notes", kind: "writable", maxTokens: 500 },
    { label: "kb", kind: "search" },
  ],
  searchableHistory: "history",
  memory: {},
};
const SECRET = "4321";
let w;
let model;

before(async () => {
  model = await startModel();
  w = await startWorker({
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: "reach-test-token-secret-reach-test-secret",
    },
  });
});
after(async () => { await w?.stop(); await model?.close(); });
beforeEach(() => model.reset());

const text = (id, role, t) => ({ id, role, parts: [{ type: "text", text: t }] });

async function mint(agent, body) {
  const r = await w.json("POST", `/agents/${agent}/tokens`, { ttlSeconds: 600, ...body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.token;
}

/** Agent `agent` where alice-chat holds a secret (a message, a conversation memory) and bob-chat not. */
async function seed(agent) {
  const A = `/agents/${agent}`;
  assert.equal((await w.json("POST", `${A}/sessions/alice-chat/messages`, { message: text("a1", "user", `my card PIN is ${SECRET}`) })).status, 201);
  assert.equal((await w.json("POST", `${A}/sessions/bob-chat/messages`, { message: text("b1", "user", "what is my card PIN again?") })).status, 201);
  const m = await w.json("POST", `${A}/memories`, { content: `Alice's card PIN is ${SECRET}`, category: "conversation", sessionId: "alice-chat" });
  assert.equal(m.status, 201, JSON.stringify(m.body));
  await w.json("POST", `${A}/memories`, { content: "The user banks with Acme" });
  return { A, secret: m.body.id, bob: await mint(agent, { scope: "write", sessions: ["bob-chat"] }) };
}

const TOOLS = [
  ["session_search", { query: "card PIN" }],
  ["search_context", { label: "history", query: "card PIN" }],
  ["memory_recall", { query: "card PIN" }],
  ["memory_forget", { query: "Alice card PIN" }],
];

test("a session-limited token reaches only its sessions through every tool, over HTTP and MCP", async () => {
  const { A, secret, bob } = await seed("reach1");
  // The admin token sees every session: there is something to find.
  const admin = await w.json("POST", `${A}/sessions/bob-chat/tools/session_search`, { input: { query: "card PIN" } });
  assert.match(admin.body.output, new RegExp(SECRET));
  for (const [name, input] of TOOLS) {
    const r = await w.json("POST", `${A}/sessions/bob-chat/tools/${name}`, { input }, { auth: bob });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.doesNotMatch(r.body.output, new RegExp(SECRET), `${name}: ${r.body.output}`);
  }
  const forget = await w.json("POST", `${A}/sessions/bob-chat/tools/memory_forget`, { input: { id: secret } }, { auth: bob });
  assert.match(forget.body.output, /^Error: .*not found/);
  assert.equal((await w.json("GET", `${A}/memories/${secret}`)).status, 200, "alice-chat's memory is still there");

  // The official MCP SDK client with the same token: every tool call, same answers.
  const transport = new StreamableHTTPClientTransport(new URL(`${A}/sessions/bob-chat/mcp`, w.url),
    { requestInit: { headers: { authorization: `Bearer ${bob}` } } });
  const client = new Client({ name: "reach-e2e", version: "1.0.0" });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    for (const [name, input] of [...TOOLS, ["memory_forget", { id: secret }], ["memory_store", { content: `Alice's card PIN is ${SECRET}`, category: "conversation" }]]) {
      assert.ok(tools.some((t) => t.name === name), `${name} is offered`);
      const r = await client.callTool({ name, arguments: input });
      const out = r.content.map((c) => c.text).join("");
      if (name === "memory_store") assert.ok(!out.includes(secret), `MCP memory_store merged into alice-chat's memory: ${out}`);
      else if (input.id) assert.match(out, /^Error: .*not found/, `MCP ${name}: ${out}`);
      else assert.doesNotMatch(out, new RegExp(SECRET), `MCP ${name}: ${out}`);
    }
  } finally {
    await client.close();
  }
  assert.equal((await w.json("GET", `${A}/memories/${secret}`)).body.tags.length, 0, "a store of the same words did not merge into it");
});

test("a turn whose model calls each tool, with a session-limited token: the model and the reply see only its sessions", async () => {
  const { A, bob } = await seed("reach2");
  for (const [i, [name, input]] of TOOLS.entries()) {
    model.reset();
    model.reply({ toolCalls: [{ id: `c${i}`, name, arguments: input }] }, { content: "I cannot see that here." });
    const r = await w.fetch(`${A}/sessions/bob-chat/chat`, {
      method: "POST", auth: bob, headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ message: text(`q${i}`, "user", "find my card PIN") }),
    });
    const body = await r.text();
    assert.equal(r.status, 200, body);
    assert.doesNotMatch(body, new RegExp(SECRET), `${name}: the stream showed alice-chat`);
    // The step with the tool's result, and the extraction after the turn (its similar memories).
    assert.ok(model.requests.length >= 2, `${name}: the model saw the tool's result`);
    for (const req of model.requests) {
      assert.doesNotMatch(JSON.stringify(req.body), new RegExp(SECRET), `${name}: the model was shown alice-chat`);
    }
  }
  const stored = await w.json("GET", `${A}/sessions/bob-chat/history`, undefined, { auth: bob });
  assert.doesNotMatch(JSON.stringify(stored.body), new RegExp(SECRET));
});

test("a conversation memory registers its session, whichever way it is stored, and goes with it", async () => {
  const A = "/agents/reach3";
  const r = await w.json("POST", `${A}/memories`, { content: "booked the 9:40", category: "conversation", sessionId: "new-chat" });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal((await w.json("GET", `${A}/sessions/new-chat`)).body.name, "new-chat");
  assert.equal((await w.json("DELETE", `${A}/sessions/new-chat`)).status, 204);
  assert.equal((await w.json("GET", `${A}/memories/${r.body.id}`)).status, 404, "it went with its session");
});

test("an agent import the API could never have written is refused whole, in any of its forms", async () => {
  const { A } = await seed("reach4");
  await w.json("POST", `${A}/sessions/alice-chat/messages`, { message: text("a2", "assistant", "noted"), parentId: "a1" });
  await w.json("PUT", `${A}/sessions/alice-chat/context/notes`, { content: "likes trains" });
  await w.json("POST", `${A}/sessions/alice-chat/context/kb/entries`, { entries: [{ key: "k1", content: "Trams run late" }] });
  const m = await w.json("POST", `${A}/memories`, { content: "The user is vegan" });
  await w.json("PATCH", `${A}/memories/${m.body.id}`, { tags: ["food"] });
  const good = (await (await w.fetch(`${A}/export`)).text()).trim().split("\n");
  const recount = (lines) => {
    const counts = { sessions: 0, messages: 0, memories: 0, memoryVersions: 0, entries: 0, skills: 0, schedules: 0, scheduleRuns: 0, usage: 0 };
    const key = { session: "sessions", message: "messages", memory: "memories", memoryVersion: "memoryVersions", entry: "entries", skill: "skills",
      schedule: "schedules", scheduleRun: "scheduleRuns", usage: "usage" };
    const out = lines.filter((l) => JSON.parse(l).kind !== "end");
    for (const l of out) if (key[JSON.parse(l).kind]) counts[key[JSON.parse(l).kind]] += 1;
    return [...out, JSON.stringify({ kind: "end", counts })].join("\n");
  };
  assert.equal(recount(good), good.join("\n"), "recounting leaves a good export as it is");
  const at = (kind, has) => good.findIndex((l) => JSON.parse(l).kind === kind && l.includes(has));
  const edit = (i, f) => good.map((l, j) => (j === i ? JSON.stringify(f(JSON.parse(l))) : l));
  const insert = (i, rec) => [...good.slice(0, i), JSON.stringify(rec), ...good.slice(i)];
  const twice = (i) => [...good.slice(0, i + 1), good[i], ...good.slice(i + 1)];
  const block = (sid, label) => ({ kind: "contextBlock", sessionId: sid, label, updatedAt: "2026-11-22T11:00:00.000Z", content: "x" });
  const conv = at("memory", "conversation");
  const cases = [
    ["a parent in another session", edit(at("message", '"b1"'), (r) => ({ ...r, parentId: "a1" }))],
    ["a conversation memory of no session", edit(conv, (r) => ({ ...r, sessionId: null }))],
    ["a conversation memory of an unknown session", edit(conv, (r) => ({ ...r, sessionId: "nobody" }))],
    ["a version of an unknown memory", edit(at("memoryVersion", "vegan"), (r) => ({ ...r, memoryId: "mem_unknown" }))],
    ["a text over a readonly block", insert(at("contextBlock", "likes trains") + 1, block("alice-chat", "soul"))],
    ["an agent-wide text over a readonly block", insert(at("memory", "vegan"), block("", "soul"))],
    ["an entry of an unknown block", edit(at("entry", "Trams"), (r) => ({ ...r, label: "nowhere" }))],
    ["a repeated entry", twice(at("entry", "Trams"))],
    ["a repeated version", twice(at("memoryVersion", "vegan"))],
    ["a repeated memory", twice(at("memory", "vegan"))],
    ["two memories saying the same", insert(at("memory", "vegan") + 1, { ...JSON.parse(good[at("memory", "vegan")]), id: "mem_x", content: "the user IS vegan" })],
  ];
  for (const [why, lines] of cases) {
    const r = await w.json("POST", "/agents/reach4-copy/import", recount(lines), { headers: { "content-type": "application/x-ndjson" } });
    assert.equal(r.status, 400, `${why}: ${JSON.stringify(r.body)}`);
    assert.equal((await w.json("GET", "/agents/reach4-copy/sessions")).body.sessions.length, 0, `${why}: nothing imported`);
    assert.equal((await w.json("GET", "/agents/reach4-copy/memories")).body.memories.length, 0, `${why}: nothing imported`);
  }
  console.log(`hostile imports in workerd: ${cases.length} tried, ${cases.length} refused whole`);
  const r = await w.json("POST", "/agents/reach4-copy/import", good.join("\n"), { headers: { "content-type": "application/x-ndjson" } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
});

test("a streamed answer cut at every UTF-16 offset (emoji, combining marks) is stored whole", { timeout: 300_000 }, async () => {
  const A = "/agents/reach5";
  const reply = "Olá 😀 e\u0301! 👩‍👩‍👧 🇵🇹 n\u0303 ok";
  for (let cut = 0; cut <= reply.length; cut++) {
    model.reset();
    // JavaScript slices by code units: a cut inside a pair sends "…\ud83d" then "\ude00…".
    model.reply({ pieces: [reply.slice(0, cut), reply.slice(cut)] });
    const r = await w.fetch(`${A}/sessions/s/chat`, {
      method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ message: text(`u${cut}`, "user", "say it") }),
    });
    const events = (await r.text()).split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""));
    assert.equal(r.status, 200);
    const done = events.filter((e) => e !== "[DONE]").map((e) => JSON.parse(e)).find((e) => e.type === "message");
    assert.ok(done, `cut at ${cut}: ${events.join(" | ")}`);
    const stored = await w.json("GET", `${A}/sessions/s/messages/${encodeURIComponent(done.message.id)}`);
    assert.equal(stored.body.parts.at(-1).text, reply, `cut at ${cut}`);
  }
});

test("a token of 500 sessions with the longest ids works everywhere such a token may go, and reaches no other session", async () => {
  const { A, secret } = await seed("reach6");
  // 499 ids of 128 characters beside bob-chat: the largest token that may be asked for.
  const far = Array.from({ length: 499 }, (_, i) => `far-${String(i).padStart(4, "0")}-`.padEnd(128, "x"));
  const mine = far[450];
  assert.equal((await w.json("POST", `${A}/sessions/${mine}/messages`, { message: text("f1", "user", "the spare card PIN is 8765") })).status, 201);
  const m = await w.json("POST", `${A}/memories`, { content: "The spare card PIN is 8765", category: "conversation", sessionId: mine });
  assert.equal(m.status, 201, JSON.stringify(m.body));
  const many = await mint("reach6", { scope: "write", sessions: ["bob-chat", ...far] });
  console.log(`a token of 500 sessions of 128 characters: ${many.length} bytes`);
  assert.ok(many.length > 80_000 && many.length < 128 * 1024, `${many.length}`);
  const tool = async (sid, name, input) => {
    const r = await w.json("POST", `${A}/sessions/${sid}/tools/${name}`, { input }, { auth: many });
    assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.body)}`);
    return r.body.output;
  };
  for (const [name, input] of [["session_search", { query: "card PIN" }], ["search_context", { label: "history", query: "card PIN" }]]) {
    const out = await tool("bob-chat", name, input);
    assert.match(out, /8765/, `${name}: its own sessions: ${out}`);
    assert.match(out, /again\?/, `${name}: ${out}`);
    assert.doesNotMatch(out, new RegExp(SECRET), `${name}: ${out}`);
  }
  const recalled = await tool("bob-chat", "memory_recall", { query: "card PIN" });
  assert.match(recalled, /8765/);
  assert.doesNotMatch(recalled, new RegExp(SECRET), recalled);
  assert.match(await tool("bob-chat", "memory_forget", { id: secret }), /^Error: .*not found/);
  assert.doesNotMatch(await tool(mine, "memory_forget", { query: "Alice card PIN" }), new RegExp(SECRET));

  // The official MCP SDK client, with the token as its bearer header.
  const transport = new StreamableHTTPClientTransport(new URL(`${A}/sessions/${mine}/mcp`, w.url),
    { requestInit: { headers: { authorization: `Bearer ${many}` } } });
  const client = new Client({ name: "reach-e2e-500", version: "1.0.0" });
  await client.connect(transport);
  try {
    const r = await client.callTool({ name: "session_search", arguments: { query: "card PIN" } });
    const out = r.content.map((c) => c.text).join("");
    assert.match(out, /again\?/);
    assert.doesNotMatch(out, new RegExp(SECRET), out);
  } finally {
    await client.close();
  }

  // A turn whose model calls session_search: shown the token's sessions, never alice-chat.
  model.reply({ toolCalls: [{ id: "c1", name: "session_search", arguments: { query: "card PIN" } }] }, { content: "The spare one is 8765." });
  const turn = await w.fetch(`${A}/sessions/bob-chat/chat`, {
    method: "POST", auth: many, headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ message: text("q1", "user", "find my card PIN") }),
  });
  const streamed = await turn.text();
  assert.equal(turn.status, 200, streamed);
  const seen = JSON.stringify(model.requests.map((q) => q.body));
  assert.match(seen, /8765/);
  assert.doesNotMatch(seen, new RegExp(`PIN is ${SECRET}`), "the model was shown alice-chat");

  // The routes of its sessions, and nothing else.
  const found = await w.json("GET", `${A}/sessions/${mine}/search?q=PIN`, undefined, { auth: many });
  assert.equal(found.status, 200, JSON.stringify(found.body));
  assert.equal(found.body.results[0].content, "the spare card PIN is 8765");
  assert.equal((await w.json("GET", `${A}/sessions/${far[498]}/history`, undefined, { auth: many })).status, 200);
  assert.equal((await w.json("GET", `${A}/sessions/bob-chat/prompt`, undefined, { auth: many })).status, 200);
  for (const path of ["/sessions/alice-chat/history", "/sessions", "/search?q=PIN", "/memories/search?q=PIN"]) {
    const r = await w.json("GET", `${A}${path}`, undefined, { auth: many });
    assert.equal(r.status, 403, `${path}: ${JSON.stringify(r.body)}`);
  }
  // One more session than the limit is refused when asked for.
  const over = await w.json("POST", "/agents/reach6/tokens", { scope: "read", ttlSeconds: 60, sessions: ["bob-chat", "x", ...far] });
  assert.equal(over.status, 400, JSON.stringify(over.body));
});

test("a session-limited token may not fork or split (nothing is made); an agent-wide token may", async () => {
  const { A, bob } = await seed("reach7");
  await w.json("POST", `${A}/sessions/bob-chat/messages`, { message: text("b2", "assistant", "It is in your banking app."), parentId: "b1" });
  const sessions = async () => (await w.json("GET", `${A}/sessions`)).body.sessions.map((s) => s.id).sort();
  const before = await sessions();
  const messages = (await w.json("GET", `${A}/sessions/bob-chat/history`)).body.messages;
  for (const [path, body] of [["fork", { atMessageId: "b1", name: "copy" }], ["split", { summary: "Asked for the PIN." }], ["split", {}]]) {
    const r = await w.json("POST", `${A}/sessions/bob-chat/${path}`, body, { auth: bob });
    assert.equal(r.status, 403, `${path}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "forbidden");
    assert.match(r.body.error.message, new RegExp(`nor make a session.*${path}`));
  }
  assert.equal(model.requests.length, 0, "no summary was asked of the model");
  assert.deepEqual(await sessions(), before, "no session made");
  const after = await w.json("GET", `${A}/sessions/bob-chat`);
  assert.equal(after.body.endReason, null, "bob-chat was not ended by a split");
  assert.deepEqual((await w.json("GET", `${A}/sessions/bob-chat/history`)).body.messages, messages);
  // An agent-wide write token forks and splits.
  const wide = await mint("reach7", { scope: "write" });
  const fork = await w.json("POST", `${A}/sessions/bob-chat/fork`, { atMessageId: "b1" }, { auth: wide });
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  const split = await w.json("POST", `${A}/sessions/bob-chat/split`, { summary: "Asked for the PIN." }, { auth: wide });
  assert.equal(split.status, 201, JSON.stringify(split.body));
  assert.equal((await sessions()).length, before.length + 2);
});
