// The TypeScript client package (clients/ts, @session-agent/client) against the built Worker in
// workerd: builds it with tsc, imports dist/, and drives sessions, the message tree, search,
// a streamed turn, long-term memory, schedules, typed errors (status, code, Retry-After), the Durable
// Object modes (a namespace and a stub, no token), the WebSocket with its reconnect across a
// runtime restart, the stale-types check, and `npm pack` (what the tarball holds, its size).
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import WebSocket from "ws";
import { ROOT, startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

const run = promisify(execFile);
const PKG = join(ROOT, "clients", "ts");
const TOKEN = "client-test-token";
const SECRET = "client-test-token-secret-0123456789abcdef";
const CONFIG = { context: [{ label: "memory", kind: "writable", description: "Facts", maxTokens: 200 }] };

let lib; // the built package: clients/ts/dist/index.js
let w;
let model;
let client; // over HTTP with the admin token

before(async () => {
  // The package as `npm run build` makes it.
  await run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", PKG]);
  lib = await import(pathToFileURL(join(PKG, "dist/index.js")).href);
  model = await startModel();
  // A fixed port: the socket reconnects to the same URL after restart().
  w = await startWorker({
    apiToken: TOKEN, port: await freePort(),
    vars: {
      TOKEN_SECRET: SECRET, LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      SESSION_CONFIG: JSON.stringify(CONFIG),
    },
  });
  client = new lib.SessionAgentClient({ baseUrl: w.url, token: TOKEN });
});
after(async () => { await w?.stop(); await model?.close(); });
beforeEach(() => model?.reset());

const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const ids = (messages) => messages.map((m) => m.id);

/** Awaits `promise` and returns the SessionAgentError it rejects with (fails if it resolves). */
async function failure(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof lib.SessionAgentError, `not a SessionAgentError: ${e?.stack ?? e}`);
    assert.equal(e.name, "SessionAgentError");
    assert.equal(typeof e.message, "string");
    return e;
  }
  assert.fail("resolved; expected a SessionAgentError");
}

/** Resolves once `check()` is truthy (polled), or fails after `ms`. */
async function until(what, check, ms = 10_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

test("sessions, append, history, branches, leaf and search through the client", async () => {
  const agent = client.agent("ada");
  const created = await agent.sessions.create({ name: "Trip", source: "client-test" });
  assert.match(created.id, /^[0-9a-f-]{36}$/);
  assert.equal(created.name, "Trip");
  assert.ok((await agent.sessions.list()).some((s) => s.id === created.id));
  // Pages of one, through the client, until the cursor runs out: the same list.
  await agent.sessions.create({ name: "Second" });
  const paged = [];
  let page = await agent.sessions.page({ limit: 1 });
  for (;;) {
    paged.push(...page.sessions.map((x) => x.id));
    if (page.nextCursor === null) break;
    page = await agent.sessions.page({ limit: 1, cursor: page.nextCursor });
  }
  assert.deepEqual(paged, (await agent.sessions.list()).map((x) => x.id));

  const s = agent.session(created.id);
  assert.equal(await s.leaf(), null, "an empty session has no leaf");
  const first = await s.append(user("m1", "I am going to Paris in May"));
  assert.deepEqual([first.inserted, first.parentId], [true, null]);
  await s.append(user("m2", "Book a hotel near the Louvre"));
  assert.deepEqual(ids(await s.history()), ["m1", "m2"]);
  // A reply to m1: a second branch; the latest leaf is on it now.
  assert.equal((await s.append(user("m3", "Actually, Lyon"), { parentId: "m1" })).parentId, "m1");
  assert.deepEqual(ids(await s.branches("m1")), ["m2", "m3"]);
  assert.deepEqual(ids(await s.history()), ["m1", "m3"]);
  assert.deepEqual(ids(await s.history({ leafId: "m2" })), ["m1", "m2"]);
  assert.equal((await s.leaf()).id, "m3");
  assert.equal(await s.pathLength({ leafId: "m2" }), 2);
  // Pages: of the path, of a message's children, and recent windows further up.
  const top = await s.historyPage({ limit: 1 });
  assert.deepEqual([ids(top.messages), top.nextBefore], [["m3"], "m3"]);
  const above = await s.historyPage({ before: top.nextBefore });
  assert.deepEqual([ids(above.messages), above.nextBefore], [["m1"], null]);
  const kids = await s.branchesPage("m1", { limit: 1 });
  assert.deepEqual([ids(kids.messages), kids.nextBefore], [["m3"], "m3"]);
  assert.deepEqual(ids((await s.branchesPage("m1", { before: "m3" })).messages), ["m2"]);
  const window = await s.recent({ maxBytes: 0 });
  assert.deepEqual([ids(window.messages), window.truncated, window.nextBefore], [["m3"], true, "m3"]);
  const older = await s.recent({ maxBytes: 0, before: window.nextBefore });
  assert.deepEqual([ids(older.messages), older.truncated, older.nextBefore], [["m1"], false, null]);
  // Idempotent by id, and a batch.
  assert.equal((await s.append(user("m1", "again"))).inserted, false);
  const batch = await s.appendMany([user("b1", "first of two"), user("b2", "second of two")], { parentId: null });
  assert.deepEqual([batch.ids, batch.inserted], [["b1", "b2"], 2]);
  // Ids are percent-encoded into paths.
  await s.append(user("tool/call #1", "an id with a slash"), { parentId: null });
  assert.equal((await s.message("tool/call #1")).parts[0].text, "an id with a slash");

  // Search in the session and across the agent's sessions.
  await agent.session("work").append(user("w1", "The Paris office opens at nine"));
  assert.deepEqual(ids(await s.search("paris")), ["m1"]);
  const hits = await agent.search("paris");
  assert.deepEqual(hits.map((h) => h.sessionId).sort(), [created.id, "work"].sort());
  assert.equal((await agent.search("paris", { limit: 1 })).length, 1);

  // The typed low-level request reaches any operation.
  const { length } = await agent.request("get", "/agents/{agent}/sessions/{sid}/path-length", {
    path: { sid: created.id }, query: { leaf: "m2" },
  });
  assert.equal(length, 2);
  assert.equal(await client.request("get", "/healthz"), "ok");
  const rpc = await agent.request("post", "/agents/{agent}/sessions/{sid}/mcp", {
    path: { sid: created.id }, body: { jsonrpc: "2.0", id: 1, method: "tools/list" },
  });
  assert.deepEqual(rpc.result.tools.map((t) => t.name), (await s.tools()).map((t) => t.name));

  const renamed = await s.rename("Trip to Lyon");
  assert.equal(renamed.name, "Trip to Lyon");
  assert.equal((await s.info()).totalMessages, 6);
  await s.delete();
  assert.equal((await failure(s.info())).code, "not_found");
});

test("chat streams deltas and resolves with the stored reply; stream errors are typed", async () => {
  const s = client.agent("ada").session("chat");
  model.reply({ content: "Paris in May is lovely.", pieces: ["Paris ", "in May ", "is lovely."] });
  const deltas = [];
  const reply = await s.chat(user("u1", "Where am I going?"), { onDelta: (text, id) => deltas.push([text, id]) });
  assert.deepEqual(deltas.map(([t]) => t), ["Paris ", "in May ", "is lovely."]);
  assert.ok(deltas.every(([, id]) => id === reply.id), "deltas carry the reply's id");
  assert.equal(reply.role, "assistant");
  assert.deepEqual(reply.parts, [{ type: "text", text: "Paris in May is lovely." }]);
  assert.equal(reply.metadata.model, "test-model");
  assert.deepEqual(ids(await s.history()), ["u1", reply.id]);
  assert.equal(model.requests.at(-1).body.stream, true);

  // 409 conflict: the user message is already in the session (refused before the model).
  const dup = await failure(s.chat(user("u1", "again")));
  assert.deepEqual([dup.status, dup.code], [409, "conflict"]);
  // 409 not_a_prefix: a continuation whose branch was rewritten.
  const branch = await s.history();
  branch[0].parts[0].text = "something else";
  const forged = await failure(s.continue(branch));
  assert.deepEqual([forged.status, forged.code], [409, "not_a_prefix"]);

  // The model fails before anything streamed: an HTTP error answer.
  model.reply({ status: 500 });
  const down = await failure(s.chat(user("u2", "hello?")));
  assert.deepEqual([down.status, down.code], [503, "llm_unavailable"]);
  // It fails after text streamed (its second call, after a server tool): an `error` event.
  model.reply(
    { content: "Noting that. ", toolCalls: [{ id: "c1", name: "set_context", arguments: { label: "memory", content: "Paris" } }] },
    { status: 500 },
  );
  const seen = [];
  const mid = await failure(s.chat(user("u3", "remember Paris"), { onDelta: (t) => seen.push(t) }));
  assert.deepEqual([mid.status, mid.code], [503, "llm_unavailable"]);
  assert.deepEqual(seen, ["Noting ", "that. "], "the deltas before the error reached onDelta");
  assert.deepEqual(ids(await s.history()), ["u1", reply.id], "a failed turn stores nothing");
});

test("the request a turn sends, and its event stream read across awkward chunks (CRLF, split UTF-8)", async () => {
  const reply = { id: "r1", role: "assistant", parts: [{ type: "text", text: "Crème brûlée 🍮" }], createdAt: "2026-01-01T00:00:00.000Z",
    metadata: { model: "m", usage: { inputTokens: 1, outputTokens: 2 } } };
  const sse = [": a comment", 'data: {"type":"delta","messageId":"r1","text":"Crème "}', "",
    'data: {"type":"delta","messageId":"r1","text":"brûlée 🍮"}', "", `data: ${JSON.stringify({ type: "message", message: reply })}`, "",
    "data: [DONE]", "", ""].join("\r\n");
  const bytes = new TextEncoder().encode(sse);
  const seen = [];
  const fake = new lib.SessionAgentClient({
    baseUrl: "https://agents.example/prefix/", token: "tok",
    fetch: async (url, init) => {
      seen.push({ url, method: init.method, headers: Object.fromEntries(init.headers), body: JSON.parse(init.body) });
      // Five bytes at a time: lines, "\r\n" pairs and multi-byte characters all get split.
      const body = new ReadableStream({
        start(c) { for (let i = 0; i < bytes.length; i += 5) c.enqueue(bytes.slice(i, i + 5)); c.close(); },
      });
      return new Response(body, { status: 200, headers: { "content-type": "text/event-stream; charset=utf-8" } });
    },
  });
  const deltas = [];
  const got = await fake.agent("a:1").session("s 1").chat(user("u1", "dessert?"), { onDelta: (t) => deltas.push(t), memory: false });
  assert.deepEqual(got, reply);
  assert.deepEqual(deltas, ["Crème ", "brûlée 🍮"]);
  assert.deepEqual(seen, [{
    url: "https://agents.example/prefix/agents/a%3A1/sessions/s%201/chat",
    method: "POST",
    headers: { accept: "text/event-stream", authorization: "Bearer tok", "content-type": "application/json" },
    body: { message: user("u1", "dessert?"), memory: false },
  }]);
});

test("long-term memory: store, recall, list, update, history, forget", async () => {
  const memories = client.agent("mem").memories;
  const m = await memories.store({ content: "The user prefers trains to planes.", tags: ["travel"], score: 0.9 });
  assert.match(m.id, /^mem_/);
  assert.deepEqual([m.category, m.tags, m.score], ["core", ["travel"], 0.9]);
  await memories.store("The user is vegetarian.");
  const hits = await memories.recall("trains");
  assert.equal(hits[0].memory.id, m.id);
  assert.equal(typeof hits[0].why, "string");
  assert.equal((await memories.list()).memories.length, 2);
  assert.equal((await memories.list({ tag: "travel" })).memories.length, 1);
  const changed = await memories.update(m.id, { content: "The user prefers night trains." });
  assert.equal(changed.content, "The user prefers night trains.");
  assert.equal((await memories.get(m.id)).content, "The user prefers night trains.");
  assert.deepEqual((await memories.history(m.id)).map((v) => v.content),
    ["The user prefers trains to planes.", "The user prefers night trains."]);
  await memories.forget(m.id);
  const gone = await failure(memories.get(m.id));
  assert.deepEqual([gone.status, gone.code], [404, "not_found"]);
  assert.equal(await memories.forgetAll(), 1);
});

test("memory spaces: an agent's space, shared memories and blocks, the space's tokens", async () => {
  const agent = client.agent("solo-agent");
  assert.deepEqual(await agent.space(), { space: null, source: "none", mode: "alongside" });
  assert.equal((await agent.setSpace("family")).space, "family");
  const space = client.space("family");
  const m = await space.store("The user has two cats.");
  assert.equal((await space.recall("cats"))[0].memory.id, m.id);
  assert.equal((await space.memories()).memories.length, 1);
  const b = await space.append("notes", "- feed the cats");
  assert.deepEqual([b.version, b.content], [1, "- feed the cats"]);
  const stale = await failure(space.replace("notes", "x", 0));
  assert.deepEqual([stale.status, stale.code], [409, "version_conflict"]);
  assert.equal((await space.replace("notes", "- cats fed", 1)).version, 2);
  assert.deepEqual((await space.blocks()).map((x) => x.label), ["notes"]);
  const t = await space.issueToken({ scope: "read", ttlSeconds: 60 });
  assert.equal(t.kind, "space");
  const reader = new lib.SessionAgentClient({ baseUrl: w.url, token: t.token });
  assert.equal((await reader.space("family").block("notes")).content, "- cats fed");
  const denied = await failure(reader.agent("solo-agent").sessions.list());
  assert.equal(denied.status, 403);
  await space.forget(m.id);
  await space.erase();
  // The erase counts a version past the last one (no version is given twice): empty, at 3.
  assert.deepEqual([(await space.block("notes")).version, (await space.block("notes")).content], [3, ""]);
  assert.equal((await agent.setSpace(null)).space, null);
});

test("schedules: create, page, update, run by hand, runs, delete", async () => {
  const schedules = client.agent("sched").schedules;
  const s = await schedules.create({ prompt: "Morning brief.", cron: "30 7 * * 1-5" });
  assert.match(s.id, /^sch_/);
  assert.deepEqual([s.at, s.every, s.cron, s.paused], [null, null, "30 7 * * 1-5", false]);
  assert.deepEqual((await schedules.page()).schedules.map((x) => x.id), [s.id]);
  const paused = await schedules.update(s.id, { paused: true, every: 3600 });
  assert.deepEqual([paused.paused, paused.every, paused.cron], [true, 3600, null]);
  model.reply({ content: "Brief: nothing today." });
  const run = await schedules.run(s.id);
  assert.deepEqual([run.status, run.reply], ["ok", "Brief: nothing today."]);
  assert.deepEqual((await schedules.runs(s.id)).runs.map((r) => r.id), [run.id]);
  const bad = await failure(schedules.create({ prompt: "p", every: 59 }));
  assert.deepEqual([bad.status, bad.code], [400, "invalid_request"]);
  await schedules.delete(s.id);
  const gone = await failure(schedules.get(s.id));
  assert.deepEqual([gone.status, gone.code], [404, "not_found"]);
});

test("errors are typed: status, code (the spec's enum), Retry-After", async () => {
  // Every code of the spec's Error schema has its status.
  const spec = readFileSync(join(ROOT, "docs/openapi.yaml"), "utf8");
  const block = /\n {4}Error:\n[\s\S]*?enum:\n((?: {16}- \w+\n)+)/.exec(spec);
  assert.ok(block, "the Error schema's code enum in docs/openapi.yaml");
  const codes = block[1].trim().split("\n").map((l) => l.trim().slice(2));
  assert.deepEqual(Object.keys(lib.ERROR_STATUS).sort(), [...codes].sort());
  assert.ok(codes.every((c) => lib.isErrorCode(c)) && !lib.isErrorCode("teapot"));

  const s = client.agent("errs").session("s1");
  await s.append(user("m1", "hello"));
  let e = await failure(s.append(user("m2", "orphan"), { parentId: "no-such-message" }));
  assert.deepEqual([e.status, e.code, e.retryAfter], [404, "not_found", undefined]);
  assert.match(e.message, /no-such-message/);
  e = await failure(client.agent("errs").search("x", { limit: 0 }));
  assert.deepEqual([e.status, e.code], [400, "invalid_request"]);
  e = await failure(client.agent("bad/name").sessions.list());
  assert.deepEqual([e.status, e.code], [400, "invalid_request"]);

  // 401: a wrong token.
  const stranger = new lib.SessionAgentClient({ baseUrl: w.url, token: "not-the-token" });
  e = await failure(stranger.agent("errs").sessions.list());
  assert.deepEqual([e.status, e.code], [401, "unauthorized"]);

  // 403: a scoped read token may read, not write, and opens its own agent only.
  const issued = await client.agent("errs").tokens.issue({ scope: "read", ttlSeconds: 60 });
  assert.deepEqual([issued.agent, issued.scope, issued.sessions], ["errs", "read", null]);
  const reader = new lib.SessionAgentClient({ baseUrl: w.url, token: issued.token });
  assert.deepEqual(ids(await reader.agent("errs").session("s1").history()), ["m1"]);
  e = await failure(reader.agent("errs").session("s1").append(user("m3", "no")));
  assert.deepEqual([e.status, e.code], [403, "forbidden"]);
  e = await failure(reader.agent("someone-else").sessions.list());
  assert.deepEqual([e.status, e.code], [403, "forbidden"]);
  // Only the admin token issues tokens.
  e = await failure(reader.agent("errs").tokens.issue({ scope: "read", ttlSeconds: 60 }));
  assert.deepEqual([e.status, e.code], [403, "forbidden"]);

  // 429 with Retry-After, from an agent over RATE_LIMIT.
  const limited = await startWorker({ apiToken: TOKEN, vars: { RATE_LIMIT: "2/60" } });
  try {
    const c = new lib.SessionAgentClient({ baseUrl: limited.url, token: TOKEN });
    await c.agent("busy").sessions.list();
    await c.agent("busy").sessions.list();
    e = await failure(c.agent("busy").sessions.list());
    assert.deepEqual([e.status, e.code], [429, "rate_limited"]);
    assert.ok(Number.isInteger(e.retryAfter) && e.retryAfter >= 1 && e.retryAfter <= 60, `retryAfter ${e.retryAfter}`);
  } finally {
    await limited.stop();
  }
});

test("straight to the Durable Object: a namespace or a stub, no prefix and no token", async () => {
  const ns = await w.mf.getDurableObjectNamespace("SESSION_AGENT");
  const viaNamespace = new lib.SessionAgentClient({ namespace: ns });
  assert.equal(viaNamespace.mode, "namespace");
  await viaNamespace.agent("direct").session("s1").append(user("d1", "written through the binding"));
  // The same object the front door reaches at /agents/direct/...
  assert.deepEqual(ids(await client.agent("direct").session("s1").history()), ["d1"]);
  assert.deepEqual(ids(await client.agent("other").session("s1").history()), [], "another agent, another object");

  const viaStub = new lib.SessionAgentClient({ fetcher: ns.get(ns.idFromName("direct")) });
  assert.equal(viaStub.mode, "fetcher");
  const s = viaStub.agent().session("s1");
  assert.equal((await s.leaf()).id, "d1");
  const e = await failure(s.append(user("d2", "orphan"), { parentId: "nope" }));
  assert.deepEqual([e.status, e.code], [404, "not_found"]);
  // The front door's own routes do not exist on a stub.
  await assert.rejects(viaStub.request("get", "/healthz"), /front door only/);
  assert.throws(() => s.connect({ WebSocket, onFrame() {} }), /baseUrl/);
});

test("the WebSocket: typed frames, reconnects across a runtime restart, not after close()", async () => {
  const s = client.agent("sock").session("s1");
  await s.append(user("p1", "persist me"));
  const frames = [];
  const opens = [];
  const closes = [];
  const socket = s.connect({
    WebSocket,
    onFrame: (f) => frames.push(f),
    // Re-asking for the history on every open is the caller's choice.
    onOpen: (info) => { opens.push(info); socket.send({ type: "history" }); },
    onClose: (info) => closes.push(info),
    reconnect: { initialDelayMs: 50, maxDelayMs: 400 },
  });
  const next = async (what, pred) => {
    const from = frames.length;
    return until(what, () => frames.slice(from).find(pred));
  };
  assert.equal(socket.state, "connecting");
  await socket.opened();
  assert.equal(socket.state, "open");
  const h1 = await until("history", () => frames.find((f) => f.type === "history"));
  assert.deepEqual(ids(h1.messages), ["p1"]);
  assert.deepEqual(opens, [{ reconnected: false, attempts: 0 }]);

  let got = next("pong", (f) => f.type === "pong");
  socket.send({ type: "ping" });
  await got;
  got = next("message", (f) => f.type === "message" && f.message.id === "p2");
  socket.send({ type: "append", message: user("p2", "over the socket") });
  assert.equal((await got).sessionId, "s1");
  // A write over HTTP reaches the socket too.
  got = next("message", (f) => f.type === "message" && f.message.id === "p3");
  await s.append(user("p3", "over HTTP"));
  await got;
  got = next("error", (f) => f.type === "error");
  socket.send({ type: "history", leafId: 5 });
  assert.equal((await got).code, "invalid_request");
  // A chat frame: its message echoed as pending, deltas; `cancel` stops it, keeping what was shown.
  model.reply({ content: "a b c d e f", pieces: ["a ", "b ", "c ", "d ", "e ", "f"], pieceDelayMs: 150 });
  const pending = next("the pending echo", (f) => f.type === "message" && f.pending === true && f.message.id === "c1");
  const delta = next("delta", (f) => f.type === "delta");
  got = next("the stopped reply", (f) => f.type === "message" && f.message.role === "assistant" && f.message.metadata?.stopped === true);
  socket.send({ type: "chat", message: user("c1", "talk slowly") });
  await pending;
  await delta;
  socket.send({ type: "cancel" });
  await got;

  // The runtime restarts: the socket closes unexpectedly, retries with backoff, comes back.
  const historiesBefore = frames.filter((f) => f.type === "history").length;
  await w.restart();
  await until("the reconnect", () => opens.length === 2);
  assert.equal(opens[1].reconnected, true);
  assert.ok(closes.length >= 1 && closes.every((c) => c.reconnecting === true), JSON.stringify(closes));
  assert.ok(closes.every((c) => c.delayMs >= 25 && c.delayMs <= 400), JSON.stringify(closes));
  const h2 = await until("history after the reconnect", () => frames.filter((f) => f.type === "history")[historiesBefore]);
  const stopped = (await got).message;
  assert.ok(stopped.parts.length > 0 && !stopped.parts[0].text.includes("f"), "stored as far as it streamed");
  assert.deepEqual(ids(h2.messages), ["p1", "p2", "p3", "c1", stopped.id], "the state survived, the stopped turn with it");
  got = next("message", (f) => f.type === "message" && f.message.id === "p4");
  socket.send({ type: "append", message: user("p4", "after the restart") });
  await got;

  // close(): for good, no reconnect.
  socket.close();
  await until("the close", () => closes.at(-1)?.reconnecting === false);
  assert.equal(socket.state, "closed");
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(opens.length, 2, "no reconnect after close()");
  assert.throws(() => socket.send({ type: "ping" }), /not open/);
  await assert.rejects(socket.opened(), /closed/);
});

test("a socket whose scoped token is revoked closes with 1008 and does not reconnect", async () => {
  const agent = client.agent("revoked");
  const { token } = await agent.tokens.issue({ scope: "write", ttlSeconds: 600 });
  const closes = [];
  const frames = [];
  let opens = 0;
  const socket = agent.session("s1").connect({
    WebSocket, token, onFrame: (f) => frames.push(f), onOpen: () => { opens++; }, onClose: (c) => closes.push(c),
    reconnect: { initialDelayMs: 50 },
  });
  await socket.opened();
  // One frame first, as tests/e2e/access.test.mjs does: a socket that never sent one is closed
  // too (its close frame arrives at once), but workerd then keeps the connection open for about
  // 10 s more, and only then does `ws` report the close (the socket reads `closing` meanwhile).
  socket.send({ type: "ping" });
  await until("pong", () => frames.some((f) => f.type === "pong"));
  await agent.tokens.revoke();
  await until("the close", () => closes.length >= 1);
  assert.deepEqual([closes[0].code, closes[0].reason, closes[0].reconnecting], [1008, "token revoked", false], JSON.stringify(closes));
  assert.equal(socket.state, "closed");
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(opens, 1);
});

test("the stale-types check passes on the spec and fails on a changed one", async () => {
  const check = join(PKG, "scripts/check-types.mjs");
  const ok = await run(process.execPath, [check]);
  assert.match(ok.stdout, /up to date/);
  const dir = mkdtempSync(join(tmpdir(), "sa-client-spec-"));
  try {
    const changed = join(dir, "openapi.yaml");
    writeFileSync(changed, readFileSync(join(ROOT, "docs/openapi.yaml"), "utf8").replace("- rate_limited\n", "- rate_limited\n                - teapot\n"));
    const r = await run(process.execPath, [check, changed]).then(() => null, (e) => e);
    assert.ok(r, "the check passed on a changed spec");
    assert.equal(r.code, 1);
    assert.match(r.stderr, /types are stale: run `npm run generate --prefix clients\/ts`/);
    assert.match(r.stderr, /teapot/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("npm pack: the tarball holds dist/*.js and dist/*.d.ts, and works on its own", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sa-client-pack-"));
  try {
    // prepack builds dist/ first.
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", dir], { cwd: PKG });
    const [info] = JSON.parse(stdout);
    const tarball = join(dir, info.filename);
    const listing = (await run("tar", ["tzf", tarball])).stdout.trim().split("\n").sort();
    for (const f of ["package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts",
      "package/dist/openapi.d.ts", "package/dist/client.js", "package/dist/socket.js"]) {
      assert.ok(listing.includes(f), `${f} is in the tarball: ${listing.join(", ")}`);
    }
    assert.deepEqual(listing.filter((f) => !/^package\/(dist\/[\w.]+\.(js|d\.ts)|package\.json|README\.md)$/.test(f)), [],
      "nothing but dist/, package.json and the README");
    const size = readFileSync(tarball).length;
    assert.equal(size, info.size);
    const js = info.files.filter((f) => f.path.endsWith(".js")).reduce((n, f) => n + f.size, 0);
    const types = info.files.filter((f) => f.path.endsWith(".d.ts")).reduce((n, f) => n + f.size, 0);
    console.log(`client package: ${size} bytes packed (gzip), ${info.unpackedSize} bytes unpacked, ${info.entryCount} files` +
      ` (runtime JS ${js} bytes, .d.ts ${types} bytes)`);

    // Unpacked and imported by its package.json's exports, it talks to the Worker.
    await run("tar", ["xzf", tarball, "-C", dir]);
    const manifest = JSON.parse(readFileSync(join(dir, "package/package.json"), "utf8"));
    assert.deepEqual(manifest.exports["."], { types: "./dist/index.d.ts", import: "./dist/index.js" });
    const packed = await import(pathToFileURL(join(dir, "package", manifest.exports["."].import)).href);
    const c = new packed.SessionAgentClient({ baseUrl: w.url, token: TOKEN });
    assert.ok(Array.isArray(await c.agent("ada").sessions.list()));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
