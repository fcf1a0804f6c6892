// End-to-end: what is true now, in workerd. `supersedes` retires facts (kept, shown with `asOf`
// or `includeSuperseded`, announced to sockets as `updated` with `invalidAt`), hostile input
// changes nothing, two writes racing to retire the same fact cannot both win, `consolidate: true`
// asks a real HTTP model (./llm-server.mjs, scripted), and with a real sentence-embedding model
// (./minilm.mjs, all-MiniLM-L6-v2) a correction stored plainly, without any mark, ranks above the
// fact it corrects, in recall and in a turn's injected memories.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, collect, eventually } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";
import { start as startMiniLm, EMBEDDING_MODEL } from "./minilm.mjs";

let llm;
let minilm;
let w;

before(async () => {
  llm = await startModel();
  minilm = await startMiniLm();
  w = await startWorker({
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: llm.baseUrl, LLM_MODEL: "test-model",
      EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: minilm.baseUrl, EMBEDDINGS_MODEL: EMBEDDING_MODEL,
      SESSION_CONFIG: JSON.stringify({ memory: { inject: { limit: 5 }, extract: false } }),
    },
  });
});
after(async () => { await w?.stop(); await minilm?.close(); await llm?.close(); });

const call = async (agent, method, path, body) => {
  const r = await w.json(method, `/agents/${agent}${path}`, body);
  return { status: r.status, body: r.body };
};
const ok = async (agent, method, path, body, status = 200) => {
  const r = await call(agent, method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
};
const contents = (list) => list.map((m) => (m.memory ?? m).content);
/** Everything the agent holds, for "nothing changed" checks. */
const everything = async (agent) => (await call(agent, "GET", "/export")).body;
/** Polls `probe` until it returns a truthy value (harness.mjs `eventually`); fails after `timeoutMs`. */
const waitFor = (what, probe, timeoutMs = 20_000) => eventually(what, probe, timeoutMs);
/** Waits until the embeddings endpoint has had every text of `texts`. */
const embedded = (texts) => waitFor(`embeddings of ${texts.length} texts`, () =>
  texts.every((t) => minilm.requests.some((r) => !r.failed && [r.body.input].flat().includes(t))));

test("supersedes retires a fact: kept, readable as of the past, announced to sockets", async () => {
  const A = "retires";
  const ws = await w.webSocket(`/agents/${A}/sessions/s/ws`, { query: true });
  try {
    const paris = await ok(A, "POST", "/memories", { content: "The user lives in Paris.", validFrom: "2020-05-01T00:00:00Z" }, 201);
    const frames = collect(ws, (f) => f.type === "memory" && f.memory.id === paris.id && f.memory.invalidAt);
    const berlin = await ok(A, "POST", "/memories",
      { content: "The user moved to Berlin.", validFrom: "2026-03-01T00:00:00Z", supersedes: [paris.id] }, 201);
    const retired = (await frames).at(-1);
    assert.equal(retired.op, "updated");
    assert.equal(retired.memory.supersededBy, berlin.id);
    assert.equal(retired.memory.invalidAt, "2026-03-01T00:00:00.000Z");
    assert.deepEqual(contents((await ok(A, "GET", "/memories")).memories), ["The user moved to Berlin."]);
    assert.deepEqual(contents((await ok(A, "GET", "/memories?asOf=2024-01-01T00:00:00Z")).memories), ["The user lives in Paris."]);
    assert.equal((await ok(A, "GET", "/memories?includeSuperseded=1")).memories.length, 2);
    assert.ok(!contents((await ok(A, "GET", "/memories/search?q=where+does+the+user+live")).results).includes("The user lives in Paris."));
    assert.equal((await ok(A, "GET", `/memories/${paris.id}`)).supersededBy, berlin.id);
    // The MCP and tool view of memory is what holds now too.
    const recall = await ok(A, "POST", "/sessions/s/tools/memory_recall", { input: { query: "Paris Berlin" } });
    assert.ok(!JSON.stringify(recall).includes(paris.id), JSON.stringify(recall));
  } finally {
    ws.close();
  }
});

test("hostile validity input is refused with nothing changed", async () => {
  const A = "hostile-validity";
  const a = await ok(A, "POST", "/memories", { content: "The user drives a Zoe." }, 201);
  const b = await ok(A, "POST", "/memories", { content: "The user drives a Tesla.", supersedes: [a.id] }, 201);
  const before = await everything(A);
  const cases = [
    [{ content: "x", supersedes: ["mem_00000000-0000-4000-8000-000000000000"] }, 404],
    [{ content: "x", supersedes: [b.id, "mem_nope"] }, 404],
    [{ content: "x", supersedes: [a.id] }, 409],
    [{ content: "x", supersedes: b.id }, 400],
    [{ content: "x", supersedes: [{ id: b.id }] }, 400],
    [{ content: "x", supersedes: Array.from({ length: 101 }, () => b.id) }, 400],
    [{ content: "x", validFrom: "2026-02-30T00:00:00Z" }, 400],
    [{ content: "x", validFrom: "now" }, 400],
    [{ content: "x", consolidate: 1 }, 400],
    [{ content: "The user drives a Tesla.", supersedes: [b.id] }, 400],
    [{ content: "", supersedes: [b.id], consolidate: true }, 400],
  ];
  for (const [body, status] of cases) {
    const r = await call(A, "POST", "/memories", body);
    assert.equal(r.status, status, `${JSON.stringify(body).slice(0, 120)}: ${JSON.stringify(r.body)}`);
    assert.equal(typeof r.body.error?.message, "string");
  }
  for (const q of ["asOf=tomorrow", "asOf=2026-01-01T00:00:00Z&includeSuperseded=1", "includeSuperseded=yes"]) {
    assert.equal((await call(A, "GET", `/memories?${q}`)).status, 400, q);
    assert.equal((await call(A, "GET", `/memories/search?q=x&${q}`)).status, 400, q);
  }
  assert.deepEqual(await everything(A), before, "nothing changed");
});

test("two writes racing to retire one fact: one wins, the other is 409 and stores nothing", async () => {
  const A = "race";
  const old = await ok(A, "POST", "/memories", { content: "The user works at Acme." }, 201);
  const racers = await Promise.all(["Globex", "Initech", "Hooli", "Umbrella"].map((c) =>
    call(A, "POST", "/memories", { content: `The user works at ${c}.`, supersedes: [old.id] })));
  const statuses = racers.map((r) => r.status).sort();
  assert.deepEqual(statuses, [201, 409, 409, 409], JSON.stringify(racers.map((r) => r.body)));
  const winner = racers.find((r) => r.status === 201).body;
  assert.equal((await ok(A, "GET", `/memories/${old.id}`)).supersededBy, winner.id);
  assert.equal((await ok(A, "GET", "/memories?includeSuperseded=1")).memories.length, 2);
});

test("consolidate: true asks the model and stores as it decides", async () => {
  const A = "consolidates";
  const old = await ok(A, "POST", "/memories", { content: "The user's favourite tea is green tea." }, 201);
  await embedded([old.content]);
  llm.reset();
  llm.reply({ content: JSON.stringify({ memory: [{ id: old.id, text: "The user now prefers black tea.", event: "UPDATE" }] }) });
  const r = await ok(A, "POST", "/memories", { content: "The user now prefers black tea to green tea.", consolidate: true }, 201);
  assert.equal(llm.requests.length, 1, "one consolidation request");
  assert.deepEqual(llm.requests[0].body.response_format, { type: "json_object" });
  assert.ok(llm.requests[0].body.messages[1].content.includes(old.id));
  assert.equal((await ok(A, "GET", `/memories/${old.id}`)).supersededBy, r.id);
  // The model finds it already said: 200 with that memory, nothing new stored.
  llm.reply({ content: JSON.stringify({ memory: [{ id: r.id, event: "NONE" }] }) });
  const same = await ok(A, "POST", "/memories", { content: "Black tea is what the user likes now.", consolidate: true }, 200);
  assert.equal(same.id, r.id);
  assert.equal((await ok(A, "GET", "/memories?includeSuperseded=1")).memories.length, 2);
  // A model that answers nonsense: 503, nothing stored.
  llm.reply({ content: "I am not sure." });
  const before = await everything(A);
  assert.equal((await call(A, "POST", "/memories", { content: "The user drinks tea at night.", consolidate: true })).status, 503);
  assert.deepEqual(await everything(A), before);
});

test("consolidate: true checks supersedes first and honours it whatever the model answers, on an agent and in a space", async () => {
  for (const base of ["/agents/consolidates-named", "/spaces/consolidates-named"]) {
    const at = async (method, path, body) => (await w.json(method, `${base}${path}`, body));
    const tea = (await at("POST", "/memories", { content: "The user likes green tea." })).body;
    const acme = (await at("POST", "/memories", { content: "The user works at Acme." })).body;
    await embedded([tea.content, acme.content]);
    const held = async () => (await at("GET", "/memories?includeSuperseded=1&limit=100")).body.memories.length;
    llm.reset();
    // Checked before the model is asked: nothing stored, no model call.
    for (const [supersedes, status] of [[["mem_nope"], 404], [[acme.id, "mem_nope"], 404]]) {
      const r = await at("POST", "/memories", { content: "The user likes black tea.", consolidate: true, supersedes });
      assert.equal(r.status, status, `${base}: ${JSON.stringify(r.body)}`);
    }
    assert.equal(llm.requests.length, 0, "no model call");
    assert.equal(await held(), 2);
    // The model says it is already known: stored all the same, superseding what was named.
    llm.reply({ content: JSON.stringify({ memory: [{ id: tea.id, event: "NONE" }] }) });
    const r = await at("POST", "/memories", { content: "The user likes black tea.", consolidate: true, supersedes: [acme.id] });
    assert.equal(r.status, 201, `${base}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.content, "The user likes black tea.");
    assert.equal((await at("GET", `/memories/${acme.id}`)).body.supersededBy, r.body.id);
    assert.equal((await at("GET", `/memories/${tea.id}`)).body.invalidAt, null);
    // Acme no longer holds: 409 before any model call.
    const asked = llm.requests.length;
    const again = await at("POST", "/memories", { content: "The user likes oolong.", consolidate: true, supersedes: [acme.id] });
    assert.equal(again.status, 409, JSON.stringify(again.body));
    assert.equal(llm.requests.length, asked);
  }
});

test("with a real embedding model, an unmarked correction ranks above the fact it corrects, in recall and in a turn", async () => {
  const A = "unmarked";
  const facts = [
    "The user drives a Renault Zoe.",
    "The user's sister Ana lives in Porto.",
    "The user plays the cello in an amateur orchestra.",
    "The user is allergic to peanuts.",
  ];
  await ok(A, "POST", "/memories/batch", { memories: facts.map((content) => ({ content, score: 0.9 })) }, 201);
  await new Promise((r) => setTimeout(r, 5));
  const correction = "The user sold the Zoe and bought a Volkswagen ID.3.";
  await ok(A, "POST", "/memories", { content: correction, score: 0.6 }, 201);
  await embedded([...facts, correction]);
  const hits = await waitFor("both vectors in recall", async () => {
    const hits = (await ok(A, "GET", `/memories/search?q=${encodeURIComponent("Which car does the user drive?")}`)).results;
    return hits.filter((h) => h.signals.semantic !== null).length >= 2 && hits;
  });
  const order = contents(hits);
  assert.ok(order.includes("The user drives a Renault Zoe."), order.join(" | "));
  assert.ok(order.indexOf(correction) >= 0 && order.indexOf(correction) < order.indexOf("The user drives a Renault Zoe."), order.join(" | "));
  assert.match(hits[order.indexOf(correction)].why, /newer than/);
  // The unrelated facts keep their places among themselves.
  // A turn's injected memories put the correction first too.
  llm.reset();
  const r = await ok(A, "POST", "/sessions/t/chat", { message: { id: "u1", role: "user", parts: [{ type: "text", text: "Which car do I drive these days?" }] } }, 201);
  const block = llm.requests[0].body.messages.find((m) => m.role === "system" && m.content.includes("<user-memory>")).content;
  assert.ok(block.indexOf(correction) < block.indexOf("The user drives a Renault Zoe.") || !block.includes("Renault Zoe."), block);
  assert.ok(block.includes(correction), block);
  assert.ok(r.messages[0].metadata.memories.length > 0);
});
