// End-to-end: oversize messages in workerd with local R2. A 5 MB tool output is stored (its
// field in R2, the row under the limit), read back whole by every read, survives a restart of
// the runtime, and its object is deleted with the message.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";

let w;
before(async () => { w = await startWorker(); });
after(async () => { await w?.stop(); });

async function call(method, path, body, agent = "big") {
  const init = { method, headers: {} };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["content-type"] = "application/json"; }
  const r = await w.fetch(`/agents/${agent}${path}`, init);
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** An assistant message whose tool output is `n` characters of JSON text, plus a short text. */
function toolMessage(id, n) {
  return {
    id, role: "assistant", parts: [
      { type: "text", text: `report ${id}` },
      { type: "dynamic-tool", toolName: "fetch", toolCallId: `call-${id}`, state: "output-available",
        input: { url: "https://example.com/huge" }, output: { body: "o".repeat(n), rows: [1, 2, 3] } },
    ],
  };
}

/** The spilled objects of agent `agent` in local R2. */
async function spilled(agent = "big") {
  const bucket = await w.mf.getR2Bucket("SKILLS_BUCKET");
  return (await bucket.list({ prefix: `_spill/${agent}/` })).objects.map((o) => o.key);
}

test("a 5 MB tool output round-trips through R2, also across a restart", async () => {
  const big = toolMessage("m5", 5_000_000);
  let r = await call("POST", "/sessions/s/messages", { message: { id: "q", role: "user", parts: [{ type: "text", text: "fetch it" }] } });
  assert.equal(r.status, 201);
  r = await call("POST", "/sessions/s/messages", { message: big });
  assert.equal(r.status, 201, JSON.stringify(r.body).slice(0, 300));
  assert.deepEqual(r.body.message, big);
  const keys = await spilled();
  assert.equal(keys.length, 1);
  assert.match(keys[0], /^_spill\/big\/s\//);

  for (const path of ["/sessions/s/messages/m5", "/sessions/s/leaf"]) {
    r = await call("GET", path);
    assert.equal(r.status, 200, path);
    assert.deepEqual(r.body, big, path);
  }
  r = await call("GET", "/sessions/s/history");
  assert.deepEqual(r.body.messages[1], big);
  r = await call("GET", "/sessions/s/search?q=report");
  assert.equal(r.body.results[0].id, "m5");

  await w.restart();
  r = await call("GET", "/sessions/s/history?raw=1");
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.messages[1], big);
  assert.equal(r.body.messages[1].parts[1].output.body.length, 5_000_000);
});

test("updating and deleting oversize messages deletes their objects", async () => {
  let r = await call("POST", "/sessions/d/messages/batch", { messages: [toolMessage("a", 2_500_000), toolMessage("b", 2_500_000)] }, "gc");
  assert.equal(r.status, 201);
  assert.equal((await spilled("gc")).length, 2);
  r = await call("PUT", "/sessions/d/messages/a", { message: toolMessage("a", 10) }, "gc");
  assert.equal(r.status, 200);
  assert.equal((await spilled("gc")).length, 1);
  r = await call("DELETE", "/sessions/d", undefined, "gc");
  assert.equal(r.status, 204);
  assert.deepEqual(await spilled("gc"), []);
});

test("a message that cannot be made to fit is 413 and leaves nothing", async () => {
  const parts = Array.from({ length: 2000 }, () => ({ type: "text", text: "x".repeat(1000) }));
  const r = await call("POST", "/sessions/n/messages", { message: { id: "n", role: "user", parts } }, "nofit");
  assert.equal(r.status, 413);
  assert.equal(r.body.error.code, "too_large");
  assert.equal((await call("GET", "/sessions/n", undefined, "nofit")).status, 404);
  assert.deepEqual(await spilled("nofit"), []);
});
