// End-to-end: the built Worker + SessionAgent DO in workerd (Miniflare), driven over HTTP.
// Every DO route through the front door, auth, name checks, limits, isolation, persistence.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { startWorker } from "./harness.mjs";

const TOKEN = "e2e-token";
let w;
let dir;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "sa-e2e-"));
  w = await startWorker({ persistDir: dir, apiToken: TOKEN });
});
after(async () => {
  await w?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Calls the API of `agent` (default a1) and returns {status, body, headers}. */
async function call(method, path, body, { agent = "a1", headers = {} } = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const r = await w.fetch(`/agents/${agent}${path}`, init);
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = text; }
  return { status: r.status, body: json, headers: r.headers };
}
/** POSTs a declared `size`-byte body with node:http and resolves with the status. The headers
 * go first; the body is only sent if no answer came within a second, and errors after the
 * answer (the server closing the upload) are ignored, so this cannot hang on an early 413. */
function rawPost(path, size) {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (f) => (v) => { if (!done) { done = true; clearTimeout(timer); f(v); } };
    const ok = finish(resolve);
    const fail = finish(reject);
    const req = http.request(new URL(path, w.url), {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", "content-length": size },
    });
    req.on("response", (res) => { res.resume(); ok(res.statusCode); req.destroy(); });
    req.on("error", (e) => fail(e));
    req.flushHeaders();
    const timer = setTimeout(() => {
      const chunk = Buffer.alloc(1 << 20, 120);
      let left = size;
      const pump = () => {
        while (left > 0 && !done) {
          const n = Math.min(left, chunk.length);
          left -= n;
          if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return req.once("drain", pump);
        }
        if (!done) req.end();
      };
      pump();
    }, 1000);
  });
}
const msg = (id, text, role = "user") => ({ id, role, parts: [{ type: "text", text }] });
const ids = (list) => list.map((m) => m.id);

test("health needs no token; the API does", async () => {
  const h = await w.fetch("/healthz", { auth: false });
  assert.equal(h.status, 200);
  assert.equal(await h.text(), "ok");
  for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: `Basic ${TOKEN}` }]) {
    const r = await w.fetch("/agents/a1/sessions", { auth: false, headers });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).error.code, "unauthorized");
    assert.equal(r.headers.get("www-authenticate"), "Bearer");
  }
  // ?token= is for WebSocket upgrades only.
  const q = await w.fetch(`/agents/a1/sessions?token=${TOKEN}`, { auth: false });
  assert.equal(q.status, 401);
  const ok = await w.fetch("/agents/a1/sessions");
  assert.equal(ok.status, 200);
  const nf = await w.fetch("/nope");
  assert.equal(nf.status, 404);
  assert.equal((await nf.json()).error.code, "not_found");
});

test("names are checked after decoding", async () => {
  for (const agent of ["bad%20name", "a%2Fb", "x".repeat(129), "%FF"]) {
    const r = await call("GET", "/sessions", undefined, { agent });
    assert.equal(r.status, 400, agent);
    assert.equal(r.body.error.code, "invalid_request");
  }
  assert.equal((await call("GET", "/sessions/bad%20sid/history")).status, 400);
  assert.equal((await call("GET", "/sessions/ok.sid:1-2_3/history")).status, 200);
});

test("sessions: create, get, list, rename, usage, fork, delete", async () => {
  const c = await call("POST", "/sessions", { name: "Chat", model: "m", source: "web" });
  assert.equal(c.status, 201);
  const sid = c.body.id;
  assert.match(c.body.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal((await call("GET", `/sessions/${sid}`)).body.name, "Chat");
  assert.equal((await call("POST", "/sessions", {})).status, 400);
  assert.equal((await call("PATCH", `/sessions/${sid}`, { name: "Renamed" })).body.name, "Renamed");
  assert.equal((await call("PATCH", "/sessions/nope", { name: "x" })).status, 404);
  const u = await call("POST", `/sessions/${sid}/usage`, { inputTokens: 10, outputTokens: 5, cost: 0.01 });
  assert.equal(u.status, 200);
  assert.deepEqual([u.body.inputTokens, u.body.outputTokens], [10, 5]);
  assert.ok(Math.abs(u.body.estimatedCost - 0.01) < 1e-9, `estimatedCost ${u.body.estimatedCost}: a sum, within a tolerance`);
  assert.equal((await call("POST", `/sessions/${sid}/usage`, { inputTokens: -1 })).status, 400);
  await call("POST", `/sessions/${sid}/messages/batch`, { messages: [msg("a", "first"), msg("b", "second", "assistant"), msg("c", "third")] });
  const f = await call("POST", `/sessions/${sid}/fork`, { atMessageId: "b", name: "Fork" });
  assert.equal(f.status, 201);
  assert.equal(f.body.parentSessionId, sid);
  assert.equal(f.body.messageCount, 2);
  const fh = await call("GET", `/sessions/${f.body.id}/history`);
  assert.deepEqual(fh.body.messages.map((m) => m.parts[0].text), ["first", "second"]);
  assert.equal((await call("POST", `/sessions/${sid}/fork`, { atMessageId: "zz" })).status, 404);
  const list = await call("GET", "/sessions");
  assert.equal(list.body.sessions[0].id, f.body.id, "newest updatedAt first");
  assert.ok(list.body.sessions.some((s) => s.id === sid));
  assert.equal((await call("DELETE", `/sessions/${sid}`)).status, 204);
  assert.equal((await call("GET", `/sessions/${sid}`)).status, 404);
  assert.deepEqual((await call("GET", `/sessions/${sid}/history?raw=1`)).body, { messages: [] });
  assert.equal((await call("DELETE", `/sessions/${sid}`)).status, 404);
});

test("messages: append rules, tree reads, update, delete, clear", async () => {
  const s = "/sessions/tree";
  let r = await call("POST", `${s}/messages`, { message: msg("q", "question") });
  assert.equal(r.status, 201);
  assert.deepEqual([r.body.parentId, r.body.inserted], [null, true]);
  r = await call("POST", `${s}/messages`, { message: msg("a1", "answer one", "assistant") });
  assert.equal(r.body.parentId, "q");
  r = await call("POST", `${s}/messages`, { message: msg("a2", "answer two", "assistant"), parentId: "q" });
  assert.equal(r.body.parentId, "q");
  r = await call("POST", `${s}/messages`, { message: msg("a1", "again") });
  assert.equal(r.status, 200);
  assert.equal(r.body.inserted, false);
  assert.equal(r.body.message.parts[0].text, "answer one");
  r = await call("POST", `${s}/messages`, { message: msg("x", "x"), parentId: "missing" });
  assert.equal(r.status, 404);
  r = await call("POST", `${s}/messages`, { message: msg("r2", "second root"), parentId: null });
  assert.equal(r.body.parentId, null);

  assert.deepEqual(ids((await call("GET", `${s}/history?leaf=a2`)).body.messages), ["q", "a2"]);
  assert.deepEqual(ids((await call("GET", `${s}/history`)).body.messages), ["r2"]);
  assert.equal((await call("GET", `${s}/history?leaf=zz`)).status, 404);
  assert.deepEqual(ids((await call("GET", `${s}/messages/q/branches`)).body.messages), ["a1", "a2"]);
  assert.equal((await call("GET", `${s}/leaf`)).body.id, "r2");
  assert.deepEqual((await call("GET", `${s}/path-length?leaf=a1`)).body, { length: 2 });
  assert.equal((await call("GET", `${s}/messages/a1`)).body.parts[0].text, "answer one");
  assert.equal((await call("GET", `${s}/messages/none`)).status, 404);

  r = await call("PUT", `${s}/messages/a1`, { message: { ...msg("a1", "edited", "assistant"), metadata: { v: 2 } } });
  assert.equal(r.status, 200);
  assert.equal((await call("GET", `${s}/messages/a1`)).body.metadata.v, 2);
  assert.equal((await call("PUT", `${s}/messages/a1`, { message: msg("other", "x") })).status, 400);

  r = await call("GET", `${s}/history/recent?maxBytes=1&minMessages=1`);
  assert.deepEqual([ids(r.body.messages), r.body.truncated], [["r2"], false]);
  assert.ok(r.body.totalContentBytes > 0);

  assert.equal((await call("DELETE", `${s}/messages/q`)).status, 204);
  assert.deepEqual(ids((await call("GET", `${s}/history?leaf=a2`)).body.messages), ["a2"], "children orphaned");
  assert.equal((await call("DELETE", `${s}/messages`)).status, 204);
  assert.deepEqual((await call("GET", `${s}/history`)).body, { messages: [] });
  assert.equal((await call("GET", `${s}/leaf`)).status, 404);
});

test("message ids are percent-encoded in paths and unique per session", async () => {
  const id = "tool/call 1?#%";
  await call("POST", "/sessions/p1/messages", { message: msg(id, "in p1") });
  await call("POST", "/sessions/p2/messages", { message: msg(id, "in p2") });
  const r = await call("GET", `/sessions/p1/messages/${encodeURIComponent(id)}`);
  assert.equal(r.status, 200);
  assert.equal(r.body.parts[0].text, "in p1");
  assert.equal((await call("GET", `/sessions/p2/messages/${encodeURIComponent(id)}`)).body.parts[0].text, "in p2");
});

test("batch appends are chained and all or nothing", async () => {
  const r = await call("POST", "/sessions/batch1/messages/batch", { messages: [msg("1", "one"), msg("2", "two"), msg("3", "three")] });
  assert.equal(r.status, 201);
  assert.deepEqual(r.body, { ids: ["1", "2", "3"], lastId: "3", inserted: 3 });
  const bad = await call("POST", "/sessions/batch1/messages/batch", { messages: [msg("4", "four"), { id: "5" }] });
  assert.equal(bad.status, 400);
  assert.equal((await call("GET", "/sessions/batch1/messages/4")).status, 404);
  assert.deepEqual(ids((await call("GET", "/sessions/batch1/history")).body.messages), ["1", "2", "3"]);
});

test("compaction overlays: stored, applied at read time, raw shows originals", async () => {
  const s = "/sessions/comp";
  await call("POST", `${s}/messages/batch`, { messages: [0, 1, 2, 3, 4].map((i) => msg(`m${i}`, `text ${i}`)) });
  const c = await call("POST", `${s}/compactions`, { summary: "the start", fromMessageId: "m0", toMessageId: "m2" });
  assert.equal(c.status, 201);
  assert.match(c.body.createdAt, /Z$/);
  assert.deepEqual(ids((await call("GET", `${s}/history`)).body.messages), [`compaction_${c.body.id}`, "m3", "m4"]);
  assert.deepEqual(ids((await call("GET", `${s}/history?raw=1`)).body.messages), ["m0", "m1", "m2", "m3", "m4"]);
  assert.equal((await call("GET", `${s}/compactions`)).body.compactions[0].summary, "the start");
  const bad = await call("POST", `${s}/compactions`, { summary: "x", fromMessageId: "m3", toMessageId: "m1" });
  assert.equal(bad.status, 400);
  assert.equal((await call("GET", `${s}/compactions`)).body.compactions.length, 1);
});

test("search: one session and across sessions, hostile input is safe", async () => {
  await call("POST", "/sessions/sa/messages", { message: msg("x1", "We deploy to production on Friday") });
  await call("POST", "/sessions/sb/messages", { message: msg("y1", "Production deploys are frozen") });
  let r = await call("GET", "/sessions/sa/search?q=production%20deploy");
  assert.deepEqual(r.body.results.map((h) => h.id), ["x1"]);
  assert.equal(r.body.results[0].sessionId, undefined);
  r = await call("GET", "/search?q=production");
  assert.deepEqual(r.body.results.map((h) => h.sessionId).sort(), ["sa", "sb"]);
  assert.ok(r.body.results.every((h) => h.createdAt.endsWith("Z")));
  r = await call("GET", `/search?q=${encodeURIComponent('"deploy to production"')}`);
  assert.deepEqual(r.body.results.map((h) => h.id), ["x1"]);
  for (const q of ['"', "NEAR(", "a OR", "((", "*", "col:x", "^", "'", "\\"]) {
    const h = await call("GET", `/search?q=${encodeURIComponent(q)}`);
    assert.equal(h.status, 200, q);
  }
  assert.equal((await call("GET", "/search?q=x&limit=101")).status, 400);
});

test("limits: body over 32 MiB and messages that cannot fit a row even spilled are 413", async () => {
  // 2,000 parts of 1 KB: over 1.8 MB, and no field large enough to move to R2.
  const parts = Array.from({ length: 2000 }, () => ({ type: "text", text: "x".repeat(1000) }));
  const big = { message: { id: "big", role: "user", parts } };
  let r = await call("POST", "/sessions/lim/messages", big);
  assert.equal(r.status, 413);
  assert.equal(r.body.error.code, "too_large");
  // The front door answers 413 from Content-Length without reading the body, and workerd then
  // closes the connection: fetch() would fail mid-upload, so this uses a raw request.
  const status = await rawPost(`/agents/a1/sessions/lim/messages`, 32 * 1024 * 1024 + 1);
  assert.equal(status, 413);
  assert.equal((await call("GET", "/sessions/lim")).status, 404, "nothing registered");
  r = await call("POST", "/sessions/lim/messages", "{not json");
  assert.equal(r.status, 400);
  r = await call("PUT", "/sessions");
  assert.equal(r.status, 405);
  assert.equal(r.headers.get("allow"), "GET, POST");
});

test("agents and sessions are isolated", async () => {
  await call("POST", "/sessions/shared/messages", { message: msg("m", "agent one") }, { agent: "iso1" });
  await call("POST", "/sessions/shared/messages", { message: msg("m", "agent two") }, { agent: "iso2" });
  const one = await call("GET", "/sessions/shared/history", undefined, { agent: "iso1" });
  const two = await call("GET", "/sessions/shared/history", undefined, { agent: "iso2" });
  assert.equal(one.body.messages[0].parts[0].text, "agent one");
  assert.equal(two.body.messages[0].parts[0].text, "agent two");
  const s1 = await call("GET", "/search?q=agent", undefined, { agent: "iso1" });
  assert.deepEqual(s1.body.results.map((h) => h.content), ["agent one"]);
  assert.deepEqual((await call("GET", "/sessions", undefined, { agent: "iso3" })).body, { sessions: [], nextCursor: null });
});

test("everything survives a restart of the runtime", async () => {
  await call("POST", "/sessions/keep/messages/batch", { messages: [msg("k1", "persisted words"), msg("k2", "more")] }, { agent: "durable" });
  await call("POST", "/sessions/keep/messages", { message: msg("k3", "branch"), parentId: "k1" }, { agent: "durable" });
  await call("POST", "/sessions/keep/compactions", { summary: "sum", fromMessageId: "k1", toMessageId: "k2" }, { agent: "durable" });
  const before = {
    sessions: (await call("GET", "/sessions", undefined, { agent: "durable" })).body,
    history: (await call("GET", "/sessions/keep/history?leaf=k2", undefined, { agent: "durable" })).body,
  };
  await w.restart();
  const after = {
    sessions: (await call("GET", "/sessions", undefined, { agent: "durable" })).body,
    history: (await call("GET", "/sessions/keep/history?leaf=k2", undefined, { agent: "durable" })).body,
  };
  assert.deepEqual(after, before);
  assert.equal((await call("GET", "/sessions/keep/leaf", undefined, { agent: "durable" })).body.id, "k3");
  const s = await call("GET", "/sessions/keep/search?q=persisted", undefined, { agent: "durable" });
  assert.deepEqual(s.body.results.map((h) => h.id), ["k1"]);
  const r = await call("POST", "/sessions/keep/messages", { message: msg("k4", "after restart") }, { agent: "durable" });
  assert.equal(r.body.parentId, "k3", "the latest leaf is found again after a cold start");
});

test("an unset API_TOKEN closes the API with 503", async () => {
  const d = mkdtempSync(join(tmpdir(), "sa-e2e-open-"));
  const open = await startWorker({ persistDir: d, apiToken: null });
  try {
    const r = await open.fetch("/agents/a1/sessions", { auth: false });
    assert.equal(r.status, 503);
    const body = await r.json();
    assert.equal(body.error.code, "not_configured");
    assert.match(body.error.message, /API_TOKEN/);
    assert.equal((await open.fetch("/healthz", { auth: false })).status, 200);
  } finally {
    await open.stop();
    rmSync(d, { recursive: true, force: true });
  }
});

test("reads kept between requests follow every write to their session (the read cache in workerd)", async () => {
  const a = { agent: "cache" };
  const msg = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
  const texts = async (path = "/sessions/c/history") => (await call("GET", path, undefined, a)).body.messages.map((m) => m.parts[0].text);
  for (let i = 0; i < 3; i++) assert.equal((await call("POST", "/sessions/c/messages", { message: msg(`m${i}`, `t${i}`) }, a)).status, 201);
  // Each read twice (the second one kept), then a write of another kind, then read again.
  const both = async (want) => {
    assert.deepEqual(await texts(), want);
    assert.deepEqual(await texts(), want);
    const recent = await texts("/sessions/c/history/recent?maxBytes=100000");
    assert.deepEqual(recent, want);
  };
  await both(["t0", "t1", "t2"]);
  assert.equal((await call("POST", "/sessions/c/messages", { message: msg("m3", "t3") }, a)).status, 201);
  await both(["t0", "t1", "t2", "t3"]);
  assert.equal((await call("PUT", "/sessions/c/messages/m1", { message: msg("m1", "edited") }, a)).status, 200);
  await both(["t0", "edited", "t2", "t3"]);
  assert.equal((await call("DELETE", "/sessions/c/messages/m3", undefined, a)).status, 204);
  await both(["t0", "edited", "t2"]);
  // A refused write changes nothing: the kept reads stay.
  const bad = await call("POST", "/sessions/c/messages/batch", { messages: [msg("m4", "t4"), msg("m4", "dup"), { id: "x" }] }, a);
  assert.equal(bad.status, 400);
  await both(["t0", "edited", "t2"]);
  // Another session's write leaves them kept; a batch at the end of the path grows them.
  assert.equal((await call("POST", "/sessions/other/messages", { message: msg("o0", "elsewhere") }, a)).status, 201);
  await both(["t0", "edited", "t2"]);
  assert.equal((await call("POST", "/sessions/c/messages/batch", { messages: [msg("m4", "t4"), msg("m5", "t5")] }, a)).status, 201);
  await both(["t0", "edited", "t2", "t4", "t5"]);
  assert.equal((await call("POST", "/sessions/c/compactions", { summary: "early", fromMessageId: "m0", toMessageId: "m1" }, a)).status, 201);
  assert.equal((await call("GET", "/sessions/c/history", undefined, a)).body.messages.length, 4, "the summary, t2, t4, t5");
  assert.equal((await call("DELETE", "/sessions/c/messages", undefined, a)).status, 204);
  await both([]);
});
