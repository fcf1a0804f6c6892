// End-to-end: compaction in workerd against a real OpenAI-compatible HTTP model
// (./llm-server.mjs on 127.0.0.1) — the exact summary prompt sent, the stored overlay laid
// over history (raw reads keep the originals), the call's usage on the session, iterative
// overlays, auto-compaction after appends (single and batch), provider failures that store
// nothing (HTTP errors, blank or skeleton summaries, timeouts, an unreachable model), no LLM
// configured, and synthetic `compaction_…` messages sent back by clients.
// Mirrors tests/it/compact_api.rs, which runs the same scenarios natively with a fake transport.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import { start as startLlm, DEFAULT_SUMMARY } from "./llm-server.mjs";

const TOKEN = "compaction-token";
/** Small numbers: a dozen ~29-token messages leave the newest two as the tail. */
const OPTIONS = { protectHead: 1, tailTokenBudget: 50, minTailMessages: 2 };
const AFTER = 200;
const CONTEXT = [{ label: "memory", kind: "writable", description: "Learned facts" }];

/** @type {import("./llm-server.mjs").LlmServer} */
let llm;
/** The model configured, manual compaction only. */
let w;
/** The model configured, auto-compaction after AFTER tokens. */
let auto;

/** The vars of a Worker whose model is `llm` (plus `extra`). */
function llmVars(compaction, extra = {}) {
  return {
    LLM_PROVIDER: "openai",
    LLM_BASE_URL: llm.baseUrl,
    LLM_MODEL: "test-model",
    LLM_API_KEY: "sk-test-key",
    SESSION_CONFIG: JSON.stringify({ context: CONTEXT, compaction }),
    ...extra,
  };
}

before(async () => {
  llm = await startLlm();
  w = await startWorker({ apiToken: TOKEN, vars: llmVars(OPTIONS) });
  auto = await startWorker({ apiToken: TOKEN, vars: llmVars({ after: AFTER, ...OPTIONS }) });
});
after(async () => {
  await w?.stop();
  await auto?.stop();
  await llm?.close();
});

/**
 * Calls the API of `agent` on `worker` and returns {status, body}.
 * @param {import("./harness.mjs").WorkerClient} worker
 */
async function call(worker, agent, method, path, body) {
  const r = await worker.json(method, `/agents/${agent}${path}`, body);
  return { status: r.status, body: r.body };
}
/** A UIMessage with one text part. */
const msg = (id, text, role = "user") => ({ id, role, parts: [{ type: "text", text }] });
/** A long-ish message text (~29 tokens with the per-message 4). */
const longText = (i) =>
  `Message ${i}: the deploy of service number ${i} is planned for Friday after the review, with a rollback plan.`;
/** Messages m<from>..m<to>, alternating user/assistant, with longText. */
const messages = (from, to) =>
  Array.from({ length: to - from + 1 }, (_, k) => {
    const i = from + k;
    return msg(`m${i}`, longText(i), i % 2 === 1 ? "user" : "assistant");
  });
const ids = (body) => body.messages.map((m) => m.id);

// ── The reference heuristic and prompt (docs/REFERENCE.md#tokens, docs/REFERENCE.md#summary-prompts), in JavaScript ──────────

/** max(UTF-16 length / 4, words × 1.3), rounded up; 0 for "". */
function estimateStr(text) {
  if (!text) return 0;
  const words = text.split(/\s/).filter((x) => x).length;
  return Math.ceil(Math.max(text.length / 4, words * 1.3));
}
/** 4 + the estimate of the text parts. */
const estimateMessage = (m) => 4 + m.parts.reduce((n, p) => n + (p.type === "text" ? estimateStr(p.text) : 0), 0);

const SECTIONS = `## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now \u2014 what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]`;

/** The reference's summary prompt (docs/REFERENCE.md#summary-prompts) for text-only `middle`. */
function summaryPrompt(middle, previous) {
  const budget = Math.max(Math.floor(middle.reduce((n, m) => n + estimateMessage(m), 0) * 0.2), 100);
  const content = middle.map((m) => `[${m.role}]\n${m.parts.map((p) => p.text).join("\n")}`).join("\n\n---\n\n");
  const tail = `${SECTIONS}\n\nTarget ~${budget} tokens. Be factual \u2014 only include information that was explicitly ` +
    "discussed in the conversation. Do NOT invent file paths, commands, or details that were not mentioned. " +
    "Write only the summary body.";
  if (previous) {
    return "You are updating a conversation summary. A previous summary exists below. New conversation turns have " +
      `occurred since then and need to be incorporated.\n\nPREVIOUS SUMMARY:\n${previous}\n\nNEW TURNS TO ` +
      `INCORPORATE:\n${content}\n\nUpdate the summary. PRESERVE existing information that is still relevant. ` +
      `ADD new information. Remove information only if it is clearly obsolete.\n\n${tail}`;
  }
  return "Create a concise summary of this conversation that preserves the important information for future " +
    `context.\n\nCONVERSATION TO SUMMARIZE:\n${content}\n\nUse this structure:\n\n${tail}`;
}

/** Asserts `c` is a stored overlay. */
function assertOverlay(c, from, to, summary) {
  assert.deepEqual(Object.keys(c).sort(), ["createdAt", "fromMessageId", "id", "summary", "toMessageId"]);
  assert.equal(typeof c.id, "string");
  assert.ok(c.id.length > 0);
  assert.ok(!Number.isNaN(Date.parse(c.createdAt)), c.createdAt);
  assert.equal(c.fromMessageId, from);
  assert.equal(c.toMessageId, to);
  assert.equal(c.summary, summary);
}

// ── Manual compaction ──────────────────────────────────────────────────────────────────────

test("POST /compact: the reference prompt goes to the model, the overlay is stored and applied", async () => {
  llm.reset();
  const a = "manual";
  const r = await call(w, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.compaction, undefined, "no auto-compaction configured");
  const before = (await call(w, a, "GET", "/sessions/s")).body;
  assert.equal(before.inputTokens, 0);
  assert.equal(before.outputTokens, 0);

  const c = await call(w, a, "POST", "/sessions/s/compact", {});
  assert.equal(c.status, 200, JSON.stringify(c.body));
  // Head m1 is protected; the tail is the newest two (each ~29 tokens, budget 50).
  assertOverlay(c.body.compaction, "m2", "m10", DEFAULT_SUMMARY);

  // Exactly one OpenAI-compatible call, with our model, key and the reference prompt (docs/REFERENCE.md#summary-prompts).
  assert.equal(llm.requests.length, 1);
  const req = llm.requests[0];
  assert.equal(req.url, "/v1/chat/completions");
  assert.equal(req.headers.authorization, "Bearer sk-test-key");
  assert.match(req.headers["content-type"], /^application\/json/);
  assert.equal(req.body.model, "test-model");
  assert.equal(req.body.stream, false);
  assert.equal(req.body.max_tokens, 512, "room for twice the 100-token budget, at least 512");
  assert.equal(req.body.messages.length, 1);
  assert.equal(req.body.messages[0].role, "user");
  const prompt = req.body.messages[0].content;
  for (let i = 2; i <= 10; i++) assert.ok(prompt.includes(longText(i)), `m${i} is summarized`);
  for (const i of [1, 11, 12]) assert.ok(!prompt.includes(`${longText(i)}`), `m${i} is not`);
  assert.equal(prompt, summaryPrompt(messages(2, 10), null));

  // Read time: the summary stands for m2..m10; raw shows every original.
  const h = (await call(w, a, "GET", "/sessions/s/history")).body;
  const synthetic = `compaction_${c.body.compaction.id}`;
  assert.deepEqual(ids(h), ["m1", synthetic, "m11", "m12"]);
  assert.deepEqual(h.messages[1], {
    id: synthetic, role: "assistant", parts: [{ type: "text", text: DEFAULT_SUMMARY }], createdAt: c.body.compaction.createdAt,
  });
  assert.deepEqual(h.messages[3], messages(12, 12)[0], "the tail is intact");
  const raw = (await call(w, a, "GET", "/sessions/s/history?raw=1")).body;
  assert.deepEqual(raw.messages, messages(1, 12));
  assert.deepEqual((await call(w, a, "GET", "/sessions/s/compactions")).body, { compactions: [c.body.compaction] });

  // The call's usage is on the session.
  const info = (await call(w, a, "GET", "/sessions/s")).body;
  assert.equal(info.inputTokens, 100);
  assert.equal(info.outputTokens, 20);
  assert.equal(info.messageCount, 12, "compaction deletes nothing");
});

test("a second /compact grows the branch's one overlay from the same start", async () => {
  llm.reset();
  const a = "manual"; // continues the session of the test above
  const first = (await call(w, a, "GET", "/sessions/s/compactions")).body.compactions[0];
  assert.ok(first, "the test above compacted m2..m10");
  for (const m of messages(13, 15)) {
    assert.equal((await call(w, a, "POST", "/sessions/s/messages", { message: m })).status, 201);
  }
  const updated = "## Topic\nDeploy plans.\n\n## Key Points\n- the team deploys on Friday\n- services 11 to 13 too";
  llm.reply({ content: updated, usage: { prompt_tokens: 7, completion_tokens: 3 } });
  const c = await call(w, a, "POST", "/sessions/s/compact", {});
  assert.equal(c.status, 200, JSON.stringify(c.body));
  assertOverlay(c.body.compaction, first.fromMessageId, "m13", updated);
  assert.notEqual(c.body.compaction.id, first.id);

  // The update prompt: the previous summary plus the new turns m11..m13 only.
  assert.equal(llm.requests.length, 1);
  const prompt = llm.requests[0].body.messages[0].content;
  assert.ok(prompt.startsWith("You are updating a conversation summary."));
  assert.ok(prompt.includes(`PREVIOUS SUMMARY:\n${DEFAULT_SUMMARY}`));
  assert.equal(prompt, summaryPrompt(messages(11, 13), DEFAULT_SUMMARY));

  const h = (await call(w, a, "GET", "/sessions/s/history")).body;
  assert.deepEqual(ids(h), ["m1", `compaction_${c.body.compaction.id}`, "m14", "m15"]);
  assert.deepEqual(ids((await call(w, a, "GET", "/sessions/s/history?raw=1")).body), messages(1, 15).map((m) => m.id));
  const all = (await call(w, a, "GET", "/sessions/s/compactions")).body.compactions;
  assert.deepEqual(all.map((x) => x.id), [first.id, c.body.compaction.id], "both are kept; the newest applies");
  const info = (await call(w, a, "GET", "/sessions/s")).body;
  assert.deepEqual([info.inputTokens, info.outputTokens], [107, 23], "usages add up");

  // A sibling branch is neither extended nor hidden.
  const b = await call(w, a, "POST", "/sessions/s/messages", { message: msg("b1", "a branch"), parentId: "m3" });
  assert.equal(b.status, 201);
  assert.deepEqual(ids((await call(w, a, "GET", "/sessions/s/history?leaf=b1")).body), ["m1", "m2", "m3", "b1"]);
});

test("nothing to compact: {compaction: null} and no call to the model", async () => {
  llm.reset();
  const a = "short";
  await call(w, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 3) });
  const r = await call(w, a, "POST", "/sessions/s/compact", {});
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, { compaction: null });
  // An empty (unknown) session has nothing to compact either.
  assert.deepEqual((await call(w, a, "POST", "/sessions/empty/compact", {})).body, { compaction: null });
  assert.equal(llm.requests.length, 0);
  assert.deepEqual((await call(w, a, "GET", "/sessions/s/compactions")).body, { compactions: [] });
  // An unknown leaf is 404; a leafId that is not a string is 400.
  await call(w, a, "POST", "/sessions/long/messages/batch", { messages: messages(1, 12) });
  const missing = await call(w, a, "POST", "/sessions/long/compact", { leafId: "nope" });
  assert.equal(missing.status, 404, JSON.stringify(missing.body));
  assert.equal((await call(w, a, "POST", "/sessions/long/compact", { leafId: 7 })).status, 400);
  assert.equal(llm.requests.length, 0);
});

test("leafId compacts the path to that leaf", async () => {
  llm.reset();
  const a = "leaf";
  await call(w, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
  // A short branch off m8 becomes the latest leaf; leafId picks the long path again.
  await call(w, a, "POST", "/sessions/s/messages", { message: msg("x1", "side"), parentId: "m8" });
  const r = await call(w, a, "POST", "/sessions/s/compact", { leafId: "m12" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assertOverlay(r.body.compaction, "m2", "m10", DEFAULT_SUMMARY);
  assert.equal(llm.requests.length, 1);
  // Not on x1's path (m1..m8, x1): the overlay ends at m10.
  assert.deepEqual(ids((await call(w, a, "GET", "/sessions/s/history?leaf=x1")).body),
    ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "x1"]);
});

// ── Auto-compaction ────────────────────────────────────────────────────────────────────────

test("auto-compaction: the append that passes `after` compacts and reports it", async () => {
  llm.reset();
  const a = "auto";
  const prompt = (await call(auto, a, "GET", "/sessions/s/prompt")).body.prompt;
  let sent = [];
  let hit = null;
  for (let i = 1; i <= 20 && !hit; i++) {
    const m = messages(i, i)[0];
    const r = await call(auto, a, "POST", "/sessions/s/messages", { message: m });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    sent.push(m);
    const estimate = sent.reduce((n, x) => n + estimateMessage(x), 0) + estimateStr(prompt);
    if (r.body.compaction) {
      hit = { i, report: r.body.compaction, estimate };
    } else {
      assert.ok(estimate <= AFTER, `m${i}: ${estimate} tokens and no compaction`);
      assert.equal(llm.requests.length, 0);
    }
  }
  assert.ok(hit, "the estimate passed `after`");
  const { i, report, estimate } = hit;
  assert.equal(report.status, "compacted", JSON.stringify(report));
  assert.equal(report.tokenThreshold, AFTER);
  assert.ok(report.tokenEstimate > report.tokenThreshold);
  assert.equal(report.tokenEstimate, estimate, "messages + the frozen prompt, by the reference heuristic (docs/REFERENCE.md#branch-estimate)");
  assertOverlay(report.compaction, "m2", `m${i - 2}`, DEFAULT_SUMMARY);
  assert.equal(report.error, undefined);
  assert.equal(llm.requests.length, 1);
  assert.equal(llm.requests[0].body.messages[0].content, summaryPrompt(messages(2, i - 2), null));
  assert.deepEqual(ids((await call(auto, a, "GET", "/sessions/s/history")).body),
    ["m1", `compaction_${report.compaction.id}`, `m${i - 1}`, `m${i}`]);
  const info = (await call(auto, a, "GET", "/sessions/s")).body;
  assert.deepEqual([info.inputTokens, info.outputTokens], [100, 20]);

  // The next small append is under `after` again: no report, no call.
  const r = await call(auto, a, "POST", "/sessions/s/messages", { message: msg("small", "ok") });
  assert.equal(r.status, 201);
  assert.equal(r.body.compaction, undefined);
  assert.equal(llm.requests.length, 1);
  // A duplicate never triggers it.
  const dup = await call(auto, a, "POST", "/sessions/s/messages", { message: msg("small", "ok") });
  assert.equal(dup.status, 200);
  assert.equal(dup.body.inserted, false);
  assert.equal(dup.body.compaction, undefined);
});

test("auto-compaction after a batch append: the batch answer carries the report", async () => {
  llm.reset();
  const a = "auto-batch";
  const r = await call(auto, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.inserted, 12);
  assert.equal(r.body.lastId, "m12");
  const report = r.body.compaction;
  assert.ok(report, JSON.stringify(r.body));
  assert.equal(report.status, "compacted");
  assert.equal(report.tokenThreshold, AFTER);
  assert.ok(report.tokenEstimate > AFTER);
  assertOverlay(report.compaction, "m2", "m10", DEFAULT_SUMMARY);
  assert.equal(llm.requests.length, 1);
  // Sent again (all duplicates): nothing inserted, no compaction.
  const again = await call(auto, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12), parentId: null });
  assert.equal(again.status, 201);
  assert.equal(again.body.inserted, 0);
  assert.equal(again.body.compaction, undefined);
  assert.equal(llm.requests.length, 1);
});

test("auto-compaction with the model failing: the append still succeeds and reports why", async () => {
  llm.reset();
  const a = "auto-fail";
  const first = await call(auto, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 5) });
  assert.equal(first.status, 201);
  assert.equal(first.body.compaction, undefined, "still under `after`");
  llm.reply({ status: 500, body: { error: { message: "model overloaded" } } });
  const big = msg("late", "x ".repeat(200).trim());
  const r = await call(auto, a, "POST", "/sessions/s/messages", { message: big });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.inserted, true);
  assert.equal(r.body.compaction.status, "failed", JSON.stringify(r.body.compaction));
  assert.equal(r.body.compaction.error.code, "llm_unavailable");
  assert.equal(r.body.compaction.error.message, "the model answered HTTP 500", "the provider's words stay in the log");
  assert.ok(r.body.compaction.tokenEstimate > AFTER);
  assert.equal(r.body.compaction.tokenThreshold, AFTER);
  assert.equal(r.body.compaction.compaction, undefined);
  assert.equal(llm.requests.length, 1);
  assert.deepEqual((await call(auto, a, "GET", "/sessions/s/messages/late")).body, big);
  assert.deepEqual((await call(auto, a, "GET", "/sessions/s/compactions")).body, { compactions: [] });
  // Same for a batch append, with a blank summary this time.
  llm.reply({ content: "  \n " });
  const b = await call(auto, a, "POST", "/sessions/s/messages/batch", { messages: messages(20, 21) });
  assert.equal(b.status, 201, JSON.stringify(b.body));
  assert.equal(b.body.inserted, 2);
  assert.equal(b.body.compaction.status, "failed");
  assert.equal(b.body.compaction.error.code, "llm_unavailable");
  assert.deepEqual((await call(auto, a, "GET", "/sessions/s/compactions")).body, { compactions: [] });
  assert.equal((await call(auto, a, "GET", "/sessions/s")).body.messageCount, 8);
  // The model back: the next append compacts.
  const ok = await call(auto, a, "POST", "/sessions/s/messages", { message: msg("again", "one more") });
  assert.equal(ok.status, 201);
  assert.equal(ok.body.compaction.status, "compacted", JSON.stringify(ok.body.compaction));
});

// ── Provider failures ──────────────────────────────────────────────────────────────────────

test("the model failing: 503 llm_unavailable and nothing is stored", async () => {
  llm.reset();
  const a = "failing";
  await call(w, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
  const unchanged = async () => {
    assert.deepEqual((await call(w, a, "GET", "/sessions/s/compactions")).body, { compactions: [] });
    assert.deepEqual((await call(w, a, "GET", "/sessions/s/history")).body.messages, messages(1, 12));
    const info = (await call(w, a, "GET", "/sessions/s")).body;
    assert.deepEqual([info.inputTokens, info.outputTokens], [0, 0]);
  };
  // HTTP 500 with an OpenAI error object: the status is passed on, its message only to the log.
  llm.reply({ status: 500, body: { error: { message: "the model is overloaded" } } });
  let r = await call(w, a, "POST", "/sessions/s/compact", {});
  assert.equal(r.status, 503, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "llm_unavailable");
  assert.equal(r.body.error.message, "the model answered HTTP 500");
  await unchanged();
  // Other failures: 429 with a plain-text body, an answer that is not JSON, one without choices.
  for (const reply of [
    { status: 429, body: "slow down" },
    { status: 200, body: "<html>gateway</html>" },
    { status: 200, body: { choices: [] } },
  ]) {
    llm.reply(reply);
    r = await call(w, a, "POST", "/sessions/s/compact", {});
    assert.equal(r.status, 503, `${JSON.stringify(reply)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "llm_unavailable");
  }
  // Blank and skeleton summaries are refused.
  for (const content of ["", "   \n", "## Topic\n[What the conversation is about]\n\n## Key Points\n\n## Current State\n\n## Open Items\n"]) {
    llm.reply({ content });
    r = await call(w, a, "POST", "/sessions/s/compact", {});
    assert.equal(r.status, 503, `${JSON.stringify(content)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "llm_unavailable");
  }
  assert.equal(llm.requests.length, 7, "one call each");
  await unchanged();
  // An answer over the 8 MiB a whole answer may be is not read on (nor kept in memory): 503.
  llm.reply({ status: 200, body: "x".repeat(9 * 1024 * 1024) });
  r = await call(w, a, "POST", "/sessions/s/compact", {});
  assert.equal(r.status, 503, JSON.stringify(r.body));
  assert.deepEqual([r.body.error.code, r.body.error.message], ["llm_unavailable", "the answer is over 8388608 bytes"]);
  await unchanged();
});

test("LLM_TIMEOUT_MS: a model slower than that is 503 llm_unavailable", async () => {
  llm.reset();
  const slow = await startWorker({ apiToken: TOKEN, vars: llmVars(OPTIONS, { LLM_TIMEOUT_MS: "300" }) });
  try {
    await call(slow, "a", "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
    llm.reply({ delayMs: 2000 });
    const t0 = Date.now();
    const r = await call(slow, "a", "POST", "/sessions/s/compact", {});
    const took = Date.now() - t0;
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, "llm_unavailable");
    assert.match(r.body.error.message, /300 ms/);
    assert.ok(took < 1900, `answered after ${took} ms, not after the model's 2 s`);
    assert.equal(llm.requests.length, 1);
    assert.deepEqual((await call(slow, "a", "GET", "/sessions/s/compactions")).body, { compactions: [] });
    // Within the limit it works.
    llm.reply({ delayMs: 50 });
    const ok = await call(slow, "a", "POST", "/sessions/s/compact", {});
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.compaction.toMessageId, "m10");
  } finally {
    await slow.stop();
  }
});

test("an unreachable model is 503 llm_unavailable", async () => {
  const gone = await startLlm();
  const baseUrl = gone.baseUrl;
  await gone.close(); // nothing listens on that port any more
  const down = await startWorker({ apiToken: TOKEN, vars: llmVars(OPTIONS, { LLM_BASE_URL: baseUrl }) });
  try {
    await call(down, "a", "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
    const r = await call(down, "a", "POST", "/sessions/s/compact", {});
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, "llm_unavailable");
    assert.deepEqual((await call(down, "a", "GET", "/sessions/s/compactions")).body, { compactions: [] });
  } finally {
    await down.stop();
  }
});

// ── No model ───────────────────────────────────────────────────────────────────────────────

test("no LLM configured: /compact is 503 not_configured when there is something to compact", async () => {
  llm.reset();
  const config = JSON.stringify({ compaction: { after: AFTER, ...OPTIONS } });
  for (const vars of [{ SESSION_CONFIG: config }, { SESSION_CONFIG: config, LLM_PROVIDER: "none", LLM_BASE_URL: llm.baseUrl, LLM_MODEL: "m" }]) {
    const plain = await startWorker({ apiToken: TOKEN, vars });
    try {
      const b = await call(plain, "a", "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
      assert.equal(b.status, 201, JSON.stringify(b.body));
      // Auto-compaction is configured but cannot run: reported, the append succeeds.
      assert.equal(b.body.compaction.status, "failed");
      assert.equal(b.body.compaction.error.code, "not_configured");
      const r = await call(plain, "a", "POST", "/sessions/s/compact", {});
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.equal(r.body.error.code, "not_configured");
      assert.match(r.body.error.message, /LLM_PROVIDER/);
      // Nothing to compact needs no model.
      await call(plain, "a", "POST", "/sessions/short/messages", { message: msg("only", "hi") });
      assert.deepEqual((await call(plain, "a", "POST", "/sessions/short/compact", {})).body, { compaction: null });
      // Everything else works without a model.
      assert.equal((await call(plain, "a", "GET", "/sessions/s/history")).body.messages.length, 12);
      assert.deepEqual((await call(plain, "a", "GET", "/sessions/s/compactions")).body, { compactions: [] });
    } finally {
      await plain.stop();
    }
  }
  assert.equal(llm.requests.length, 0, "LLM_PROVIDER none never calls LLM_BASE_URL");
});

test("an incomplete LLM configuration makes the agent 503 not_configured, naming the variable", async () => {
  const broken = await startWorker({ apiToken: TOKEN, vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: llm.baseUrl } });
  try {
    const r = await call(broken, "a", "GET", "/sessions");
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, "not_configured");
    assert.match(r.body.error.message, /LLM_MODEL/);
  } finally {
    await broken.stop();
  }
});

// ── Synthetic messages ─────────────────────────────────────────────────────────────────────

test("a synthetic compaction_ message sent back by a client is not stored", async () => {
  llm.reset();
  const a = "synthetic";
  await call(w, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) });
  const c = (await call(w, a, "POST", "/sessions/s/compact", {})).body.compaction;
  const seen = (await call(w, a, "GET", "/sessions/s/history")).body.messages;
  assert.equal(seen[1].id, `compaction_${c.id}`);

  // The overlay's own synthetic message, and a made-up one.
  for (const m of [seen[1], msg("compaction_xyz", "a summary a client made up", "assistant")]) {
    const r = await call(w, a, "POST", "/sessions/s/messages", { message: m });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.inserted, false);
    assert.equal(r.body.synthetic, true);
    assert.equal(r.body.compaction, undefined);
    assert.equal((await call(w, a, "GET", `/sessions/s/messages/${m.id}`)).status, 404);
  }
  // A client sending its whole visible history back plus a new message: only the new one is stored.
  const r = await call(w, a, "POST", "/sessions/s/messages/batch", { messages: [...seen, msg("m13", "new")], parentId: null });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.inserted, 1);
  assert.deepEqual(r.body.ids, ["m1", "m11", "m12", "m13"]);
  const info = (await call(w, a, "GET", "/sessions/s")).body;
  assert.equal(info.messageCount, 13);
  assert.deepEqual(ids((await call(w, a, "GET", "/sessions/s/history?raw=1")).body),
    [...messages(1, 12).map((m) => m.id), "m13"]);
  assert.deepEqual(ids((await call(w, a, "GET", "/sessions/s/history")).body), ["m1", `compaction_${c.id}`, "m11", "m12", "m13"]);
  assert.equal(llm.requests.length, 1);
});

// ── The summarizer and the provider's counts (docs/REFERENCE.md#token-calibration) ─────────

test("compaction.model: the summary is asked of that model; the turns' counts calibrate the estimate (GET /usage)", async () => {
  llm.reset();
  const cheap = await startWorker({ apiToken: TOKEN, vars: llmVars({ ...OPTIONS, model: "cheap-summarizer" }) });
  try {
    const a = "steered";
    assert.equal((await call(cheap, a, "POST", "/sessions/s/messages/batch", { messages: messages(1, 12) })).status, 201);
    const c = await call(cheap, a, "POST", "/sessions/s/compact", {});
    assert.equal(c.status, 200, JSON.stringify(c.body));
    assert.equal(llm.requests.at(-1).body.model, "cheap-summarizer");
    // Two turns the provider counts at 900 input tokens each: the ledger keeps our estimate
    // beside them, and GET /usage says how they compare.
    llm.reply({ content: "ok", usage: { prompt_tokens: 900, completion_tokens: 2 } }, { content: "ok", usage: { prompt_tokens: 900, completion_tokens: 2 } });
    for (const id of ["u1", "u2"]) {
      const r = await call(cheap, a, "POST", "/sessions/t/chat", { message: msg(id, "hello there") });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    const u = (await call(cheap, a, "GET", "/usage")).body;
    assert.equal(u.calibration.model, "test-model");
    assert.equal(u.calibration.turns, 2);
    assert.equal(u.calibration.inputTokens, 1800);
    assert.ok(u.calibration.estimatedInputTokens > 0 && u.calibration.estimatedInputTokens < 1800, JSON.stringify(u.calibration));
    assert.ok(Math.abs(u.calibration.ratio - Math.min(4, 1800 / u.calibration.estimatedInputTokens)) < 1e-9, JSON.stringify(u.calibration));
    // A bad summarizer name is a configuration error: 503 not_configured, nothing stored.
    const bad = await startWorker({ apiToken: TOKEN, vars: llmVars({ ...OPTIONS, model: "" }) });
    try {
      const r = await call(bad, a, "POST", "/sessions/s/messages", { message: msg("x", "hi") });
      assert.equal(r.status, 503, JSON.stringify(r.body));
    } finally {
      await bad.stop();
    }
  } finally {
    await cheap.stop();
  }
});
