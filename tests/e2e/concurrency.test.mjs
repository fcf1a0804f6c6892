// Concurrency in workerd: many clients at once on one session. Every answer is 2xx or 4xx, counts
// are exact, no message is lost or duplicated, and every socket of the session gets each frame
// exactly once. Prints the append rate and latency at 100 concurrent clients (figures, not
// assertions: timing belongs in the bench).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";
import { doRows } from "./killable.mjs";

const TOKEN = "conc-token";
let w;
let model;

before(async () => {
  model = await startModel();
  w = await startWorker({
    apiToken: TOKEN,
    vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "conc-model" },
  });
});
after(async () => {
  await w?.stop();
  await model?.close();
});

const text = (id, role, t) => ({ id, role, parts: [{ type: "text", text: t }] });
const call = (agent, method, path, body) => w.json(method, `/agents/${agent}${path}`, body);

/** Runs `tasks` (functions returning promises) with `width` of them in flight at once. */
async function pool(tasks, width) {
  const results = new Array(tasks.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  }));
  return results;
}

/** Opens `n` sockets on a session; each records the frames it gets. */
async function sockets(agent, sid, n) {
  const all = await Promise.all(Array.from({ length: n }, () => w.webSocket(`/agents/${agent}/sessions/${sid}/ws`)));
  return all.map((ws) => {
    const frames = [];
    ws.on("message", (d) => frames.push(JSON.parse(d.toString())));
    return { ws, frames };
  });
}

/** Waits until every socket has at least `n` frames of `type` (or fails after a while). */
async function settle(socks, type, n) {
  for (let i = 0; i < 500; i++) {
    if (socks.every((s) => s.frames.filter((f) => f.type === type).length >= n)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

test("100 concurrent appends to one session: all stored once, in one chain; 50 sockets get each frame once", { timeout: 300_000 }, async () => {
  const agent = "conc-a";
  const socks = await sockets(agent, "s", 50);
  const n = 100;
  const answers = await Promise.all(Array.from({ length: n }, (_, i) =>
    call(agent, "POST", "/sessions/s/messages", { message: text(`m${i}`, "user", `concword m${i}`) })));
  assert.deepEqual(answers.map((a) => a.status), Array(n).fill(201));
  // Duplicates and invalid appends at the same time: refused or no-ops, and no frames.
  const extra = await Promise.all([
    ...Array.from({ length: 20 }, (_, i) => call(agent, "POST", "/sessions/s/messages", { message: text(`m${i}`, "user", "again") })),
    ...Array.from({ length: 20 }, () => call(agent, "POST", "/sessions/s/messages", { message: { id: "", role: "user", parts: [] } })),
  ]);
  assert.deepEqual(extra.map((a) => a.status), [...Array(20).fill(200), ...Array(20).fill(400)]);
  const h = (await call(agent, "GET", "/sessions/s/history")).body.messages.map((m) => m.id);
  assert.equal(h.length, n, "every append on one chain (each the child of the latest leaf)");
  assert.equal(new Set(h).size, n, "no duplicate");
  assert.deepEqual([...h].sort(), Array.from({ length: n }, (_, i) => `m${i}`).sort(), "none lost");
  const info = (await call(agent, "GET", "/sessions/s")).body;
  assert.equal(info.totalMessages, n);
  assert.equal(info.messageCount, n);
  const found = (await call(agent, "GET", "/sessions/s/search?q=concword&limit=100")).body.results.length;
  assert.equal(found, n);
  await settle(socks, "message", n);
  await settle(socks, "status", n);
  for (const [i, s] of socks.entries()) {
    const ids = s.frames.filter((f) => f.type === "message").map((f) => f.message.id);
    assert.equal(ids.length, n, `socket ${i}: ${ids.length} message frames`);
    assert.equal(new Set(ids).size, n, `socket ${i}: each message once`);
    assert.deepEqual(ids, h, `socket ${i}: in the order they were stored`);
    assert.equal(s.frames.filter((f) => f.type === "status").length, n, `socket ${i}: one status per stored append`);
    s.ws.close();
  }
});

test("append rate at 100 concurrent clients (printed)", { timeout: 300_000 }, async (t) => {
  const agent = "conc-rate";
  const total = 1000;
  const latencies = [];
  const started = performance.now();
  const answers = await pool(Array.from({ length: total }, (_, i) => async () => {
    const t0 = performance.now();
    const r = await call(agent, "POST", `/sessions/s${i % 10}/messages`, { message: text(`r${i}`, "user", `rate ${i}`) });
    latencies.push(performance.now() - t0);
    return r.status;
  }), 100);
  const seconds = (performance.now() - started) / 1000;
  assert.deepEqual([...new Set(answers)], [201]);
  const counts = await Promise.all(Array.from({ length: 10 }, (_, k) => call(agent, "GET", `/sessions/s${k}`)));
  assert.equal(counts.reduce((sum, c) => sum + c.body.totalMessages, 0), total);
  latencies.sort((a, b) => a - b);
  const line = `concurrency: ${total} appends by 100 concurrent clients: ${(total / seconds).toFixed(0)} appends/s, ` +
    `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`;
  t.diagnostic(line);
});

test("batch, delete, clear, fork and chat racing on one session: no 5xx, a consistent store", { timeout: 300_000 }, async () => {
  const agent = "conc-mix";
  const sid = "mix";
  const socks = await sockets(agent, sid, 10);
  model.reset();
  let seq = 0;
  const ops = [];
  for (let round = 0; round < 12; round++) {
    const r = round;
    ops.push(() => call(agent, "POST", `/sessions/${sid}/messages/batch`, {
      messages: Array.from({ length: 20 }, (_, k) => text(`b${r}-${k}`, k % 2 ? "assistant" : "user", `mixword batch ${r} ${k}`)),
    }));
    ops.push(() => call(agent, "POST", `/sessions/${sid}/messages`, { message: text(`a${seq++}`, "user", `mixword single ${r}`) }));
    ops.push(() => call(agent, "DELETE", `/sessions/${sid}/messages/b${Math.max(0, r - 1)}-3`));
    ops.push(() => call(agent, "POST", `/sessions/${sid}/fork`, { atMessageId: `b${Math.max(0, r - 1)}-5`, name: `fork ${r}` }));
    ops.push(() => call(agent, "POST", `/sessions/${sid}/chat`, { message: text(`u${r}`, "user", `mixword question ${r}`) }));
    if (r % 4 === 3) ops.push(() => call(agent, "DELETE", `/sessions/${sid}/messages`));
  }
  // Shuffled deterministically, all in flight at once.
  const order = ops.map((op, i) => [((i * 7919) % 101), op]).sort((a, b) => a[0] - b[0]).map((x) => x[1]);
  const answers = await Promise.all(order.map((op) => op()));
  const statuses = answers.map((a) => a.status);
  assert.ok(statuses.every((s) => s < 500), `no 5xx: ${statuses.join(" ")}`);
  assert.ok(statuses.some((s) => s < 300) && statuses.some((s) => s >= 400), "the race had winners and losers");
  // The store is consistent: every message has its index row and the reverse; a turn's user
  // message has its reply (and the reverse) unless a clear or delete came after; forks are
  // chains whose messages all came from the session.
  const ghosts = doRows(w.persistDir, "SELECT count(*) FROM messages_fts_docsize WHERE id NOT IN (SELECT seq FROM messages)");
  const unindexed = doRows(w.persistDir, "SELECT count(*) FROM messages WHERE seq NOT IN (SELECT id FROM messages_fts_docsize)");
  assert.equal(ghosts.reduce((n, r) => n + r[0], 0) + unindexed.reduce((n, r) => n + r[0], 0), 0);
  const stored = doRows(w.persistDir, `SELECT id, parent_id FROM messages WHERE session_id = '${sid}'`);
  const info = (await call(agent, "GET", `/sessions/${sid}`)).body;
  assert.equal(info.totalMessages, stored.length);
  for (const [id] of stored.filter(([id]) => /^u\d+$/.test(id))) {
    assert.ok(stored.some(([, p]) => p === id), `the user message ${id} of a turn has its reply`);
  }
  const sessions = (await call(agent, "GET", "/sessions")).body.sessions.filter((s) => s.parentSessionId === sid);
  for (const f of sessions) {
    const h = (await call(agent, "GET", `/sessions/${f.id}/history`)).body.messages;
    assert.equal(h.length, f.totalMessages, "a fork is one chain");
    assert.ok(h.every((m) => m.parts[0].text.startsWith("mixword") || m.role === "assistant"), "copied from the session");
  }
  // Sockets: each got each stored message frame once (no frame twice).
  await new Promise((r) => setTimeout(r, 300));
  for (const s of socks) {
    const ids = s.frames.filter((f) => f.type === "message").map((f) => f.message.id);
    assert.ok(ids.length > 0);
    assert.equal(new Set(ids).size, ids.length, "no message frame twice");
    s.ws.close();
  }
});
