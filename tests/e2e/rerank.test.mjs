// End-to-end: re-ranking (RERANK_*) in workerd against a stand-in re-ranker over real HTTP
// (./rerank-server.mjs: it puts the documents in the reverse of their order) and through the
// stand-in `AI` binding (./ai-binding.mjs, `@cf/baai/bge-reranker-base`'s shape). History search
// (both routes and the `session_search` tool) and memory recall come back re-ordered; a re-ranker
// that fails, is late, answers garbage or too much leaves the order as it was, with a warning in
// the log, and never fails the request; a hostile answer is used for what names a candidate.
// Mirrors tests/it/rerank.rs. The stand-in scores nothing by meaning: only the plumbing is tested.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { captureOutput, startWorker } from "./harness.mjs";
import { aiBinding } from "./ai-binding.mjs";
import { start as startReranker } from "./rerank-server.mjs";

/** @type {import("./rerank-server.mjs").RerankServer} */
let reranker;
let w;
/** The Worker's log lines (stdout and stderr). */
const log = [];
const TIMEOUT_MS = 400;
const CONFIG = { context: [{ label: "soul", kind: "readonly", content: "You are brief." }], searchableHistory: "history" };

before(async () => {
  reranker = await startReranker();
  w = await startWorker({
    vars: {
      RERANK_PROVIDER: "http", RERANK_BASE_URL: reranker.baseUrl, RERANK_MODEL: "test-rerank",
      RERANK_API_KEY: "rerank-secret", RERANK_TIMEOUT_MS: String(TIMEOUT_MS), SESSION_CONFIG: JSON.stringify(CONFIG),
    },
    options: captureOutput(log),
  });
});
after(async () => { await w?.stop(); await reranker?.close(); });

const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const call = async (agent, method, path, body) => w.json(method, `/agents/${agent}${path}`, body);
const ids = async (agent, path) => {
  const r = await call(agent, "GET", path);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.results.map((h) => h.id);
};
const DEPLOYS = [
  ["a", "deploy deploy deploy on Friday"],
  ["b", "the deploy script deploy"],
  ["c", "deploy notes"],
  ["d", "a long message that mentions the deploy once among many other words"],
];
const textOf = (id) => DEPLOYS.find(([i]) => i === id)[1];
const seed = async (agent) => {
  for (const [id, text] of DEPLOYS) {
    assert.equal((await call(agent, "POST", "/sessions/s1/messages", { message: user(id, text) })).status, 201);
  }
};
/** The re-ranking warnings logged after line `from`. */
const warnings = async (from) => {
  await new Promise((r) => setTimeout(r, 100)); // the log arrives through a pipe
  return log.slice(from).filter((l) => l.includes("re-ranking: "));
};

test("history search, both routes, is re-ordered by the re-ranker; a failed call is the order before with a warning", async () => {
  await seed("hs");
  let mark = log.length;
  reranker.answer({ status: 500, body: { message: "down" } });
  const before = await ids("hs", "/sessions/s1/search?q=deploy");
  assert.equal(before.length, 4);
  const warned = await warnings(mark);
  assert.equal(warned.length, 1, log.slice(mark).join("\n"));
  assert.match(warned[0], /the re-ranker answered HTTP 500/);
  const n = reranker.requests.length;
  assert.deepEqual(await ids("hs", "/sessions/s1/search?q=deploy"), before.toReversed());
  assert.equal(reranker.requests.length, n + 1, "the failed answer was not kept");
  const sent = reranker.requests.at(-1);
  assert.equal(sent.headers.authorization, "Bearer rerank-secret");
  assert.deepEqual(sent.body, { model: "test-rerank", query: "deploy", documents: before.map(textOf), top_n: 4 });
  assert.deepEqual(await ids("hs", "/search?q=deploy"), before.toReversed());
});

test("session_search and memory recall are re-ordered", async () => {
  await seed("tool");
  reranker.answer({ status: 503, body: "" });
  const before = await ids("tool", "/sessions/s1/search?q=deploy");
  const r = await call("tool", "POST", "/sessions/s2/tools/session_search", { input: { query: "deploy" } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.output, before.toReversed().map((id) => `[user] ${textOf(id)}`).join("\n---\n"));

  for (const content of ["Alice drinks tea", "Bob drinks coffee at work", "Carol drinks water after running"]) {
    assert.equal((await call("tool", "POST", "/memories", { content })).status, 201);
  }
  const recall = async () => (await call("tool", "GET", "/memories/search?q=drinks")).body.results.map((h) => h.memory.content);
  reranker.answer({ status: 500, body: "" });
  const plain = await recall();
  assert.equal(plain.length, 3);
  assert.deepEqual(await recall(), plain.toReversed());
  assert.deepEqual(reranker.requests.at(-1).body.documents, plain);
});

test("a late, unreadable, oversized or failing re-ranker leaves the order as it was, with a warning", async () => {
  await seed("bad");
  reranker.answer({ status: 500 });
  const before = await ids("bad", "/sessions/s1/search?q=deploy");
  for (const [answer, said] of [
    // Headers, then nothing: only the bound on the whole call (Transport::sleep) ends it.
    [{ hang: true }, `the re-ranker did not answer within ${TIMEOUT_MS} ms`],
    [{ delayMs: TIMEOUT_MS + 300 }, `within ${TIMEOUT_MS} ms`],
    [{ body: "<html>teapot</html>" }, "is not JSON"],
    [{ body: { results: "all of them" } }, "has no results list"],
    [{ body: { results: [{ index: 7, relevance_score: 1 }] } }, "scores none of the 4 candidates"],
    [{ hugeBytes: 3 * 1024 * 1024 }, "is over 1048576 bytes"],
    [{ status: 401, body: { message: "bad key" } }, "answered HTTP 401"],
  ]) {
    const mark = log.length;
    reranker.answer(answer);
    const started = Date.now();
    assert.deepEqual(await ids("bad", "/sessions/s1/search?q=deploy"), before, said);
    assert.ok(Date.now() - started < TIMEOUT_MS + 2_000, `${said}: answered in time (${Date.now() - started} ms)`);
    const warned = await warnings(mark);
    assert.equal(warned.length, 1, `${said}: ${log.slice(mark).join("\n")}`);
    assert.ok(warned[0].includes(said), `${said}: ${warned[0]}`);
  }
  // Hostile: out of range, negative, repeated, without a score; what names a candidate is used.
  const mark = log.length;
  reranker.answer({ body: { results: [
    { index: 99, relevance_score: 9 }, { index: -1, relevance_score: 9 }, { index: 2, relevance_score: 0.4 },
    { index: 2, relevance_score: 0.99 }, { index: 0 }, { index: 1, relevance_score: 0.8 },
  ] } });
  assert.deepEqual(await ids("bad", "/sessions/s1/search?q=deploy"), [before[1], before[2], before[0], before[3]]);
  const warned = await warnings(mark);
  assert.equal(warned.length, 1);
  assert.match(warned[0], /4 entries of the answer name no candidate/);
});

test("the Workers AI re-ranker through the AI binding", async () => {
  const ai = aiBinding();
  const t = await startWorker({ ai, vars: { RERANK_PROVIDER: "workers-ai" } });
  try {
    for (const [id, text] of DEPLOYS) {
      assert.equal((await t.json("POST", "/agents/wai/sessions/s1/messages", { message: user(id, text) })).status, 201);
    }
    ai.rerank({ error: "AiError: capacity" });
    const r = await t.json("GET", "/agents/wai/sessions/s1/search?q=deploy");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const before = r.body.results.map((h) => h.id);
    assert.deepEqual((await t.json("GET", "/agents/wai/sessions/s1/search?q=deploy")).body.results.map((h) => h.id),
      before.toReversed());
    const run = ai.rerankRuns.at(-1);
    assert.equal(run.model, "@cf/baai/bge-reranker-base");
    assert.deepEqual(run.inputs, { query: "deploy", contexts: before.map((id) => ({ text: textOf(id) })), top_k: 4 });
  } finally {
    await t.stop();
  }
});

test("an invalid RERANK_* setting makes every request 503 not_configured naming it", async () => {
  const t = await startWorker({ vars: { RERANK_PROVIDER: "http", RERANK_MODEL: "m" } });
  try {
    const r = await t.json("GET", "/agents/x/sessions");
    assert.equal(r.status, 503);
    assert.equal(r.body.error.code, "not_configured");
    assert.match(r.body.error.message, /RERANK_BASE_URL is not set/);
  } finally {
    await t.stop();
  }
});
