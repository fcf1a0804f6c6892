// Per-agent rate limits in real workerd: RATE_LIMIT counted by the agent's Durable Object
// (exact, per agent; WebSocket frames count too), the Workers rate-limiting binding RATE_LIMITER
// checked by the front door, and a RATE_LIMIT that does not parse.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startWorker, nextMessage } from "./harness.mjs";

const get = (w, agent) => w.json("GET", `/agents/${agent}/sessions`);

function assertLimited(r) {
  assert.equal(r.status, 429, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "rate_limited");
  const after = Number(r.headers.get("retry-after"));
  assert.ok(Number.isInteger(after) && after >= 1 && after <= 60, `retry-after ${r.headers.get("retry-after")}`);
}

test("RATE_LIMIT: each agent gets its requests per window, then 429 with Retry-After; frames count", async () => {
  const w = await startWorker({ vars: { RATE_LIMIT: "4/60" } });
  try {
    const ws = await w.webSocket("/agents/a/sessions/s1/ws"); // 1
    for (let i = 0; i < 2; i++) assert.equal((await get(w, "a")).status, 200); // 2, 3
    ws.send(JSON.stringify({ type: "ping" })); // 4
    assert.deepEqual(await nextMessage(ws), { type: "pong" });
    assertLimited(await get(w, "a"));
    const r = await w.json("POST", "/agents/a/sessions/s1/messages", { message: { id: "m", role: "user", parts: [] } });
    assertLimited(r);
    ws.send(JSON.stringify({ type: "ping" }));
    const frame = await nextMessage(ws);
    assert.equal(frame.type, "error");
    assert.equal(frame.code, "rate_limited");
    // Another agent has its own window; the refused write stored nothing.
    assert.equal((await get(w, "b")).status, 200);
    ws.close();
  } finally {
    await w.stop();
  }
  const again = await startWorker({ vars: { RATE_LIMIT: "2/60" } });
  try {
    // A fresh runtime (a new object) starts a new window: nothing of a limit is stored.
    assert.equal((await get(again, "a")).status, 200);
  } finally {
    await again.stop();
  }
});

test("the RATE_LIMITER binding limits per agent at the front door", async () => {
  const w = await startWorker({ options: { ratelimits: { RATE_LIMITER: { simple: { limit: 2, period: 60 } } } } });
  try {
    assert.equal((await get(w, "x")).status, 200);
    assert.equal((await get(w, "x")).status, 200);
    const r = await get(w, "x");
    assertLimited(r);
    assert.equal(r.headers.get("retry-after"), "60");
    assert.equal((await get(w, "y")).status, 200, "another agent is another key");
    assert.equal((await w.fetch("/healthz", { auth: false })).status, 200, "health is not limited");
  } finally {
    await w.stop();
  }
});

test("a RATE_LIMIT that does not parse makes the agent answer 503 naming it", async () => {
  const w = await startWorker({ vars: { RATE_LIMIT: "lots" } });
  try {
    const r = await get(w, "a");
    assert.equal(r.status, 503);
    assert.equal(r.body.error.code, "not_configured");
    assert.match(r.body.error.message, /RATE_LIMIT/);
  } finally {
    await w.stop();
  }
});
