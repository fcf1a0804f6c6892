// End-to-end: long-term memory in workerd against a real OpenAI-compatible HTTP peer on
// localhost (./llm-server.mjs: scripted chat completions, deterministic embeddings). A fact told
// in one session is extracted after the turn's answer, survives a restart of the runtime and is
// injected into another session's turn (second system message, the frozen prompt untouched); a
// correction replaces it (consolidation UPDATE: a new memory, the old one retired with its
// versions); forgetting removes it everywhere;
// failing extraction and embeddings never fail a turn nor lose memories, and waiting memories
// are embedded by a later write; memory changes reach every socket of the agent.
// Mirrors tests/it/memory.rs, which runs the same scenarios natively with a fake transport.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, collect, eventually } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

/** @type {import("./llm-server.mjs").LlmServer} */
let model;
let w;
const SOUL = "You are a terse assistant.";
const CONFIG = { context: [{ label: "soul", kind: "readonly", content: SOUL }], memory: true };
const EMBEDDINGS_MODEL = "test-embeddings";

before(async () => {
  model = await startModel();
  w = await startWorker({
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: model.baseUrl, EMBEDDINGS_MODEL,
      SESSION_CONFIG: JSON.stringify(CONFIG),
    },
  });
});
after(async () => { await w?.stop(); await model?.close(); });

const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
/** Calls the API of `agent`: {status, body}. */
const call = async (agent, method, path, body) => {
  const r = await w.json(method, `/agents/${agent}${path}`, body);
  return { status: r.status, body: r.body };
};
const memories = async (agent) => {
  const r = await call(agent, "GET", "/memories");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.memories;
};
const search = async (agent, q) => {
  const r = await call(agent, "GET", `/memories/search?q=${encodeURIComponent(q)}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.results;
};
const historyOf = async (agent, sid) => (await call(agent, "GET", `/sessions/${sid}/history`)).body.messages;
/** The answer of the extraction request: `{"facts": [...]}` as the model's text. */
const facts = (list) => ({ content: JSON.stringify({ facts: list }) });
/** The answer of a consolidation request, wrapped in prose and a fence as models do. */
const decide = (list) => ({ content: `Sure!\n\`\`\`json\n${JSON.stringify({ memory: list })}\n\`\`\`` });

/** Polls `probe` until it returns a truthy value (harness.mjs `eventually`); fails after `timeoutMs`. */
const waitFor = (what, probe, timeoutMs = 10_000) => eventually(what, probe, timeoutMs);
/** Waits until the model has received `n` chat completion requests (the extraction ones come after the answer). */
const modelCalls = (n) => waitFor(`${n} model requests (got ${model.requests.length})`, () => model.requests.length >= n);

/** A chat turn (JSON answer): asserts 201 and returns the stored reply. */
async function chat(agent, sid, id, text) {
  const r = await call(agent, "POST", `/sessions/${sid}/chat`, { message: user(id, text) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.messages[0];
}


// Scenarios a–c share one agent: the fact told in (a) is corrected in (b) and forgotten in (c).
const A = "remembers";
let factId;
let frozenB;

test("a fact told in one session is extracted after the answer, survives a restart, and is injected into another session", async () => {
  model.reset();
  const tools = (await call(A, "GET", "/sessions/sa/tools")).body.tools.map((t) => t.name);
  for (const name of ["memory_store", "memory_recall", "memory_forget"]) assert.ok(tools.includes(name), `${name} in ${tools}`);

  // Session A: the turn, then (after the answer, slowly) the extraction.
  model.reply(
    { content: "Lisbon is lovely." },
    { ...facts([
      { fact: "The user lives in Lisbon.", score: 0.9, tags: ["home"] },
      { fact: "The user may like fado.", score: 0.4, tags: ["music"] },
    ]), delayMs: 700 },
  );
  const replyA = await chat(A, "sa", "a1", "I live in Lisbon, near the river.");
  assert.equal(replyA.parts[0].text, "Lisbon is lovely.");
  assert.deepEqual(replyA.metadata.memories, [], "nothing to inject yet");
  assert.deepEqual(await memories(A), [], "the answer did not wait for the extraction");
  const turnA = model.requests[0].body;
  assert.deepEqual(turnA.messages.map((m) => m.role), ["system", "user"], "no memory block when nothing is recalled");

  const [stored] = await waitFor("the extracted memory", async () => (await memories(A)).length > 0 && memories(A));
  assert.equal(model.requests.length, 2, "one extraction call: nothing similar stored, so no consolidation");
  const extraction = model.requests[1].body;
  assert.deepEqual(extraction.response_format, { type: "json_object" });
  assert.equal(extraction.messages[0].role, "system");
  assert.match(extraction.messages[0].content, /\{"facts":\[\{"fact"/);
  assert.match(extraction.messages[1].content, /User: I live in Lisbon, near the river\./);
  assert.match(extraction.messages[1].content, /Assistant: Lisbon is lovely\./);
  assert.equal(stored.content, "The user lives in Lisbon.");
  assert.equal(stored.category, "core");
  assert.deepEqual(stored.tags, ["home"]);
  assert.equal(stored.score, 0.9);
  assert.deepEqual(stored.source, { sessionId: "sa", messageId: "a1" });
  assert.equal((await memories(A)).length, 1, "the fact under minScore (0.4) was dropped");
  factId = stored.id;
  // Embedded on write; recall fuses the vector (wait: the vector lands just after the row).
  await waitFor("the memory's embedding", () =>
    model.embeddingRequests.some((r) => !r.failed && r.body.input.includes("The user lives in Lisbon.")));
  assert.equal(model.embeddingRequests.at(-1).body.model, EMBEDDINGS_MODEL);
  const hit = await waitFor("a semantic hit", async () => (await search(A, "Lisbon")).find((h) => h.signals.semantic !== null));
  assert.equal(hit.memory.id, factId);
  assert.match(hit.why, /meaning/);

  // A new runtime on the same state; session B has never heard of Lisbon.
  const recalls = (await call(A, "GET", `/memories/${factId}`)).body.recallCount; // searches count too
  await w.restart();
  model.reset();
  model.reply({ content: "Try the seafood in Alfama." }, facts([]));
  const replyB = await chat(A, "sb", "b1", "Any dinner tips for Lisbon tonight?");
  assert.deepEqual(replyB.metadata.memories, [factId]);
  const sent = model.requests[0].body.messages;
  assert.deepEqual(sent.map((m) => m.role), ["system", "system", "user"]);
  const prompt = (await call(A, "GET", "/sessions/sb/prompt")).body;
  assert.equal(prompt.frozen, true);
  assert.equal(sent[0].content, prompt.prompt, "the first system message is B's frozen prompt");
  assert.ok(sent[0].content.includes(SOUL));
  assert.ok(!sent[0].content.includes("user-memory"), "the prompt itself holds no memories");
  assert.ok(sent[1].content.startsWith("<user-memory>\n"), sent[1].content);
  assert.ok(sent[1].content.endsWith("\n- The user lives in Lisbon.\n</user-memory>"), sent[1].content);
  frozenB = sent[0].content;
  await modelCalls(2); // the (empty) extraction of B's turn
  assert.equal((await memories(A)).length, 1);
  assert.equal((await call(A, "GET", `/memories/${factId}`)).body.recallCount, recalls + 1, "the inject counted as a recall");
});

test("a correction replaces the stored fact through consolidation, which retires the old one with its versions", async () => {
  assert.ok(factId, "needs the previous test");
  model.reset();
  model.reply(
    { content: "Porto is great." },
    facts([{ fact: "The user moved to Porto.", score: 0.95, tags: ["home"] }]),
    decide([{ id: factId, text: "The user lives in Porto.", event: "UPDATE" }]),
  );
  const reply = await chat(A, "sb", "b2", "I moved from Lisbon to Porto last month.");
  assert.deepEqual(reply.metadata.memories, [factId], "the old fact is still injected into this turn");
  const sent = model.requests[0].body.messages;
  assert.equal(sent[0].content, frozenB, "the first system message is byte-identical across turns");
  assert.match(sent[1].content, /- The user lives in Lisbon\./);

  const [updated] = await waitFor("the updated memory", async () => {
    const all = await memories(A);
    return all[0]?.content === "The user lives in Porto." && all;
  });
  assert.equal(model.requests.length, 3, "turn, extraction, consolidation");
  const consolidation = model.requests[2].body;
  assert.deepEqual(consolidation.response_format, { type: "json_object" });
  assert.match(consolidation.messages[0].content, /\{"memory":\[\{"id"/);
  assert.ok(consolidation.messages[1].content.includes(factId), consolidation.messages[1].content);
  assert.match(consolidation.messages[1].content, /New fact: The user moved to Porto\./);
  assert.notEqual(updated.id, factId, "the correction is a memory of its own");
  assert.equal(updated.score, 0.95);
  assert.equal((await memories(A)).length, 1, "only what holds now is listed");
  const old = (await call(A, "GET", `/memories/${factId}`)).body;
  assert.equal(old.supersededBy, updated.id);
  assert.ok(old.invalidAt, JSON.stringify(old));
  assert.equal((await call(A, "GET", "/memories?includeSuperseded=1")).body.memories.length, 2);
  const { versions } = (await call(A, "GET", `/memories/${factId}/history`)).body;
  assert.deepEqual(versions.map((v) => [v.content, v.by]), [["The user lives in Lisbon.", "extract"]]);
  // The new text is embedded: a search by meaning finds it, and not the retired fact.
  await waitFor("the new text's embedding request", () =>
    model.embeddingRequests.some((e) => !e.failed && e.body.input.includes("The user lives in Porto.")));
  const hits = await waitFor("the new text's embedding", async () => {
    const hits = await search(A, "Porto");
    return hits.some((h) => h.memory.id === updated.id && h.signals.semantic !== null) && hits;
  });
  assert.match(hits[0].why, /meaning/);
  assert.ok(!hits.some((h) => h.memory.id === factId), "a retired fact is not recalled");
  factId = updated.id;
});

test("forgetting removes the fact from search, from the next turn's memory block and from memory_recall", async () => {
  assert.ok(factId, "needs the previous tests");
  model.reset();
  const before = await call(A, "POST", "/sessions/sb/tools/memory_recall", { input: { query: "Porto" } });
  assert.equal(before.status, 200, JSON.stringify(before.body));
  assert.ok(before.body.output.includes(factId), before.body.output);

  assert.equal((await call(A, "DELETE", `/memories/${factId}`)).status, 204);
  assert.equal((await call(A, "GET", `/memories/${factId}`)).status, 404);
  assert.equal((await call(A, "DELETE", `/memories/${factId}`)).status, 404);
  assert.deepEqual(await search(A, "Porto"), []);
  assert.deepEqual(await memories(A), []);

  model.reply({ content: "I do not know where you live." }, facts([]));
  const reply = await chat(A, "sb", "b3", "Remind me, do I live in Porto?");
  assert.deepEqual(reply.metadata.memories, []);
  const sent = model.requests[0].body.messages;
  assert.equal(sent[0].content, frozenB);
  assert.equal(sent[1].role, "user", "no memory block");
  assert.ok(!JSON.stringify(sent).includes("<user-memory>"));
  await modelCalls(2);

  const r = await call(A, "POST", "/sessions/sb/tools/memory_recall", { input: { query: "Porto" } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.output, "No memories found.");
  assert.deepEqual(await memories(A), []);
});

test("failing extraction and embeddings never fail a turn nor lose memories; a later write embeds what waits", async () => {
  const F = "flaky";
  model.reset();
  let r = await call(F, "POST", "/memories", { content: "The user rides a red bicycle.", tags: ["cycling"] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const bike = r.body;
  // Embedded after the answer (not before it: the 201 may come first).
  await waitFor("the new memory's embedding", () => model.embeddingRequests.some((e) => !e.failed && e.body.input.includes(bike.content)));

  model.failEmbeddings(true);
  // 1. The extraction answer is not the JSON asked for.
  model.reply({ content: "Enjoy the ride." }, { content: "I think the user likes bikes!" });
  const reply1 = await chat(F, "sf", "f1", "I ride my bicycle to work.");
  assert.deepEqual(reply1.metadata.memories, [bike.id], "recall works on text alone while embeddings fail");
  assert.match(model.requests[0].body.messages[1].content, /- The user rides a red bicycle\./);
  await modelCalls(2);
  // 2. The extraction request fails (HTTP 500).
  model.reply({ content: "Fine." }, { status: 500 });
  const reply2 = await chat(F, "sf", "f2", "I also ride it on weekends.");
  assert.equal(reply2.parts[0].text, "Fine.");
  await modelCalls(4);
  // Give the failed extractions a moment to (not) write anything.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.deepEqual((await historyOf(F, "sf")).map((m) => m.id), ["f1", reply1.id, "f2", reply2.id], "both turns stored");
  const all = await memories(F);
  assert.deepEqual(all.map((m) => m.id), [bike.id]);
  for (const key of ["content", "tags", "score", "updatedAt", "category"]) assert.deepEqual(all[0][key], bike[key], key);
  assert.equal((await call(F, "GET", `/memories/${bike.id}/history`)).body.versions.length, 1);

  // 3. Extraction works but embeddings fail: the fact is stored anyway, waiting for its vector.
  model.reply({ content: "Brr." }, facts([{ fact: "The user swims in the lake.", score: 0.9, tags: ["sport"] }]));
  await chat(F, "sf", "f3", "I swim in the lake every morning.");
  const swim = await waitFor("the extracted fact", async () => (await memories(F)).find((m) => m.content === "The user swims in the lake."));
  await waitFor("the extraction's failed embedding", () =>
    model.embeddingRequests.some((e) => e.failed && e.body.input.includes(swim.content)));
  assert.equal((await historyOf(F, "sf")).length, 6);
  // An HTTP write while embeddings fail: 201, and the waiting memory was tried again with it.
  const failedBefore = model.embeddingRequests.filter((e) => e.failed).length;
  r = await call(F, "POST", "/memories", { content: "The user reads at night." });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  // (after its answer: the vectors are made once the answer is out)
  const tried = await waitFor("the write's try to embed", () => {
    const failed = model.embeddingRequests.filter((e) => e.failed);
    return failed.length > failedBefore && failed;
  });
  // Memories first, then the turns' messages, which wait for their vectors too.
  assert.deepEqual(tried.at(-1).body.input.slice(0, 2), ["The user swims in the lake.", "The user reads at night."]);
  assert.ok(tried.at(-1).body.input.includes("I swim in the lake every morning."), "the messages wait too");
  let hits = await search(F, "lake");
  assert.equal(hits[0].memory.id, swim.id);
  assert.equal(hits[0].signals.semantic, null, "no vector while embeddings fail");
  assert.doesNotMatch(hits[0].why, /meaning/);

  // Embeddings are back: the query is embedded, but the waiting memories are not yet...
  model.failEmbeddings(false);
  hits = await search(F, "swims in the lake");
  assert.equal(hits.find((h) => h.memory.id === swim.id)?.signals.semantic, null, "still waiting for a write");
  // ...until the next write embeds them with its own memory.
  r = await call(F, "POST", "/memories", { content: "The user bakes bread on Sundays." });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const last = await waitFor("the write's embedding of every waiting memory", () =>
    model.embeddingRequests.filter((e) => !e.failed && Array.isArray(e.body.input) && e.body.input.length > 1).at(-1));
  assert.deepEqual(last.body.input.slice(0, 3), ["The user swims in the lake.", "The user reads at night.", "The user bakes bread on Sundays."]);
  // The vectors are stored once the embedding's answer is back (the request was seen going out).
  const swimHit = await waitFor("the waiting memory's vector", async () =>
    (await search(F, "swims in the lake")).find((h) => h.memory.id === swim.id && h.signals.semantic !== null));
  assert.ok(swimHit.signals.semantic > 0.2, JSON.stringify(swimHit.signals));
  assert.match(swimHit.why, /meaning/);
  const reads = await waitFor("the other waiting memory's vector", async () =>
    (await search(F, "reads at night")).find((h) => h.memory.content === "The user reads at night." && h.signals.semantic !== null));
  assert.ok(reads.signals.semantic > 0.2, JSON.stringify(reads));
  assert.equal((await memories(F)).length, 4, "nothing was lost");
});

test("every socket of the agent hears of memory changes made over HTTP", async () => {
  const S = "listener";
  model.reset();
  const a = await w.webSocket(`/agents/${S}/sessions/one/ws`, { query: true });
  const b = await w.webSocket(`/agents/${S}/sessions/two/ws`);
  try {
    const isMemory = (f) => f.type === "memory";
    let gotA = collect(a, isMemory);
    let gotB = collect(b, isMemory);
    const r = await call(S, "POST", "/memories", { content: "The user has a cat named Miso.", tags: ["pets"] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    for (const frames of [await gotA, await gotB]) {
      assert.deepEqual(frames.at(-1), { type: "memory", op: "created", memory: r.body });
    }
    // A duplicate merges (200): "updated"; a delete: "deleted".
    gotA = collect(a, isMemory);
    const dup = await call(S, "POST", "/memories", { content: "the user has a cat named miso.", tags: ["cat"] });
    assert.equal(dup.status, 200, JSON.stringify(dup.body));
    const [updated] = (await gotA).filter(isMemory);
    assert.equal(updated.op, "updated");
    assert.equal(updated.memory.id, r.body.id);
    assert.deepEqual(updated.memory.tags, ["pets", "cat"]);
    gotB = collect(b, (f) => isMemory(f) && f.op === "deleted");
    assert.equal((await call(S, "DELETE", `/memories/${r.body.id}`)).status, 204);
    assert.equal((await gotB).at(-1).memory.id, r.body.id);
  } finally {
    a.close();
    b.close();
  }
});

test("a streamed (SSE) turn extracts too, and its event stream ends with the turn, not after the extraction", async () => {
  const S = "streamer";
  model.reset();
  model.reply(
    { content: "Tokyo, nice.", pieces: ["Tokyo, ", "nice."] },
    // The extraction answer is slow: the client must not wait for it.
    { ...facts([{ fact: "The user is flying to Tokyo in May.", score: 0.9, tags: ["travel"] }]), delayMs: 1500 },
  );
  const started = Date.now();
  const resp = await w.fetch(`/agents/${S}/sessions/st/chat`, {
    method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ message: user("t1", "I fly to Tokyo in May.") }),
  });
  assert.equal(resp.status, 200);
  const text = await resp.text(); // until the server ends the response
  const elapsed = Date.now() - started;
  const storedAtEnd = await memories(S);
  const events = text.split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""));
  assert.equal(events.at(-1), "[DONE]");
  const done = events.slice(0, -1).map((e) => JSON.parse(e)).find((e) => e.type === "message");
  assert.equal(done.message.parts[0].text, "Tokyo, nice.");
  assert.deepEqual(done.message.metadata.memories, []);
  const [trip] = await waitFor("the fact of the streamed turn", async () => (await memories(S)).length > 0 && memories(S));
  assert.equal(trip.content, "The user is flying to Tokyo in May.");
  assert.deepEqual(trip.source, { sessionId: "st", messageId: "t1" });
  assert.equal(model.requests.length, 2);
  assert.equal(model.requests[0].body.stream, true);
  // Last, so that the checks above run either way: the response must be over before the
  // extraction's answer (1500 ms) arrives, as the answer never waits for the extraction.
  assert.deepEqual(storedAtEnd, [],
    `the event stream stayed open ${elapsed} ms after the request, until the extraction after the turn had written its memory`);
});

test("a WebSocket turn extracts too: the turn's frames first, then the memory frame", async () => {
  const S = "socket-turns";
  model.reset();
  model.reply({ content: "Take a cat sitter." }, facts([{ fact: "The user has two cats.", score: 0.8, tags: ["pets"] }]));
  const ws = await w.webSocket(`/agents/${S}/sessions/sw/ws`, { query: true });
  try {
    const got = collect(ws, (f) => f.type === "memory");
    ws.send(JSON.stringify({ type: "chat", message: user("w1", "Who feeds my two cats while I am away?") }));
    const frames = await got;
    assert.ok(!frames.some((f) => f.type === "error"), JSON.stringify(frames));
    const reply = frames.findIndex((f) => f.type === "message" && f.message.role === "assistant");
    assert.ok(reply >= 0 && reply < frames.length - 1, JSON.stringify(frames));
    assert.equal(frames[reply].message.parts[0].text, "Take a cat sitter.");
    const memory = frames.at(-1);
    assert.equal(memory.op, "created");
    assert.equal(memory.memory.content, "The user has two cats.");
    assert.deepEqual(memory.memory.source, { sessionId: "sw", messageId: "w1" });
  } finally {
    ws.close();
  }
  assert.ok((await memories(S)).some((m) => m.content === "The user has two cats."));
});
