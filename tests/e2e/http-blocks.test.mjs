// End-to-end: blocks kept by the operator's own service (`kind: "http"`,
// crates/core/src/context/http.rs) in workerd, against a real HTTP service this test starts on
// 127.0.0.1. The block's text reaches the prompt the model is sent; `search_context` and
// `set_context`, called by the model in a turn, reach the service with the Worker secret named in
// SESSION_CONFIG as the bearer; a service that is down, late, or answers too much, no JSON or the
// wrong shape leaves the last text in the prompt with a warning in the log, and the turn goes
// on; `timeoutMs` is honoured; a block added at run time cannot be one. Mirrors
// tests/it/http_blocks.rs.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { captureOutput, startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

const TIMEOUT_MS = 600;
/** The Worker's log lines (stdout and stderr). */
const log = [];
let w;
let model;
/** @type {http.Server} */
let server;
let serviceUrl;
/** Every call the service got: {headers, body}. */
const calls = [];
/**
 * How the service answers a call's parsed body: `{status?, body}` (a string as it is, anything
 * else as JSON), or a function of (req, res) that answers itself.
 * @type {(body: any) => any}
 */
let answer = () => ({ body: { content: "" } });

before(async () => {
  server = http.createServer((req, res) => {
    let text = "";
    req.on("data", (d) => { text += d; });
    req.on("end", () => {
      let body;
      try { body = JSON.parse(text); } catch { body = text; }
      calls.push({ method: req.method, path: req.url, headers: req.headers, body });
      const a = answer(body);
      if (typeof a === "function") return a(req, res);
      res.writeHead(a.status ?? 200, { "content-type": "application/json" });
      res.end(typeof a.body === "string" ? a.body : JSON.stringify(a.body));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  serviceUrl = `http://127.0.0.1:${server.address().port}/context`;
  model = await startModel();
  const config = {
    cachedPrompt: false,
    context: [
      { label: "soul", kind: "readonly", content: "You are brief." },
      { label: "crm", kind: "http", url: serviceUrl, secret: "CRM_TOKEN", timeoutMs: TIMEOUT_MS,
        ops: ["search", "set", "load"], description: "The customer's record" },
    ],
  };
  w = await startWorker({
    vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      CRM_TOKEN: "crm-s3cret", SESSION_CONFIG: JSON.stringify(config) },
    options: captureOutput(log),
  });
});
after(async () => {
  await w?.stop();
  await model?.close();
  server?.closeAllConnections?.();
  await new Promise((r) => server ? server.close(r) : r());
});

const call = (method, path, body) => w.json(method, `/agents/alice${path}`, body);
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const crm = async (sid = "s") => {
  const r = await call("GET", `/sessions/${sid}/context/crm`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
};
/** The http-block warnings logged after line `from`. */
const warnings = async (from) => {
  await new Promise((r) => setTimeout(r, 150)); // the log arrives through a pipe
  return log.slice(from).filter((l) => l.includes('http block "crm"'));
};
/** A service that keeps one text per session: get, set (replace or append), search, load. */
const stateful = (texts) => (body) => {
  const sid = body.sessionId;
  switch (body.op) {
    case "get": return { body: { content: texts[sid] ?? "" } };
    case "set":
      texts[sid] = body.action === "append" ? `${texts[sid] ?? ""}\n${body.content}` : body.content;
      return { body: { content: texts[sid] } };
    case "search": return { body: { results: [{ key: "acme", content: `ACME: renewal due (asked: ${body.query})` }] } };
    case "load": return { body: { content: body.key === "pricing" ? "Pricing: 10 EUR a seat." : null } };
    default: return { status: 400, body: { error: "unknown op" } };
  }
};

test("the text reaches the prompt; the model's search_context and set_context reach the service with the secret", async () => {
  const texts = { s: "Alice Doe, gold customer since 2019" };
  answer = stateful(texts);
  calls.length = 0;
  const b = await crm();
  assert.equal(b.content, "Alice Doe, gold customer since 2019");
  assert.equal(b.kind, "http");
  assert.equal(b.writable, true);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].method, "POST");
  assert.equal(calls[0].headers.authorization, "Bearer crm-s3cret");
  assert.match(calls[0].headers["content-type"], /^application\/json/);
  assert.deepEqual(calls[0].body, { op: "get", label: "crm", agent: "alice", sessionId: "s" });

  calls.length = 0;
  model.reply(
    { toolCalls: [{ id: "t1", name: "search_context", arguments: { label: "crm", query: "renewal" } }] },
    { toolCalls: [{ id: "t2", name: "set_context", arguments: { label: "crm", content: "wants a call on Monday", action: "append" } }] },
    { content: "Noted." },
  );
  const before = model.requests.length;
  const r = await call("POST", "/sessions/s/chat", { message: user("u1", "any renewals?") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const sent = model.requests.slice(before);
  assert.equal(sent.length, 3);
  const system = sent[0].body.messages[0].content;
  assert.match(system, /CRM \(The customer's record\) \[searchable\]/);
  assert.match(system, /Alice Doe, gold customer since 2019/);
  const ops = calls.map((c) => c.body.op);
  assert.ok(ops.includes("search") && ops.includes("set"), ops.join());
  for (const c of calls) assert.equal(c.headers.authorization, "Bearer crm-s3cret");
  const search = calls.find((c) => c.body.op === "search");
  assert.deepEqual(search.body, { op: "search", label: "crm", agent: "alice", sessionId: "s", query: "renewal" });
  const set = calls.find((c) => c.body.op === "set");
  assert.equal(set.body.content, "wants a call on Monday");
  assert.equal(set.body.action, "append");
  // The tool results the model read.
  const toolMessages = sent[2].body.messages.filter((m) => m.role === "tool").map((m) => m.content);
  assert.deepEqual(toolMessages, ["[acme]\nACME: renewal due (asked: renewal)", "Written to crm."]);
  assert.equal(texts.s, "Alice Doe, gold customer since 2019\nwants a call on Monday");
  // load_context and unload_context through the tools route.
  const load = await call("POST", "/sessions/s/tools/load_context", { input: { label: "crm", key: "pricing" } });
  assert.equal(load.body.output, "Pricing: 10 EUR a seat.");
  const missing = await call("POST", "/sessions/s/tools/load_context", { input: { label: "crm", key: "nope" } });
  assert.equal(missing.body.output, "Not found: nope");
});

test("a service that goes down keeps the last text in the prompt, with a warning, and the turn succeeds", async () => {
  const texts = { d: "Bob Roe, churn risk" };
  answer = stateful(texts);
  assert.equal((await crm("d")).content, "Bob Roe, churn risk");
  // Down: the connection is cut at once.
  answer = () => (req, res) => { res.socket.destroy(); };
  let mark = log.length;
  assert.equal((await crm("d")).content, "Bob Roe, churn risk");
  let warned = await warnings(mark);
  assert.equal(warned.length, 1, log.slice(mark).join("\n"));
  assert.match(warned[0], /http block "crm" get: the block's service could not be reached .*; the last text read is shown/);
  assert.ok(!warned[0].includes("crm-s3cret"), "the secret never reaches the log");

  mark = log.length;
  model.reply({ content: "Hello Bob." });
  const before = model.requests.length;
  const r = await call("POST", "/sessions/d/chat", { message: user("u1", "hello") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.messages[0].parts.at(-1).text, "Hello Bob.");
  assert.match(model.requests[before].body.messages[0].content, /Bob Roe, churn risk/);
  assert.ok((await warnings(mark)).length >= 1);

  // The model's tool call while it is down: an error the model reads, not a failed turn.
  const out = await call("POST", "/sessions/d/tools/search_context", { input: { label: "crm", query: "x" } });
  assert.equal(out.status, 200);
  assert.equal(out.body.output, "Error: the block's service could not be reached");
});

test("timeoutMs bounds every call, the answer's reading included", async () => {
  const texts = { t: "Carol, VIP" };
  answer = stateful(texts);
  assert.equal((await crm("t")).content, "Carol, VIP");
  // Never answers.
  answer = () => () => {};
  let mark = log.length;
  let t0 = Date.now();
  assert.equal((await crm("t")).content, "Carol, VIP");
  let took = Date.now() - t0;
  assert.ok(took >= TIMEOUT_MS - 50 && took < TIMEOUT_MS + 2000, `took ${took} ms`);
  let warned = await warnings(mark);
  assert.match(warned[0], new RegExp(`did not answer within ${TIMEOUT_MS} ms`));
  // Headers at once, then a body that trickles forever.
  answer = () => (req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"content": "');
    const tick = setInterval(() => { if (!res.writableEnded && !res.destroyed) res.write("x"); else clearInterval(tick); }, 50);
    res.on("close", () => clearInterval(tick));
  };
  mark = log.length;
  t0 = Date.now();
  assert.equal((await crm("t")).content, "Carol, VIP");
  took = Date.now() - t0;
  assert.ok(took < TIMEOUT_MS + 2000, `took ${took} ms`);
  warned = await warnings(mark);
  assert.match(warned[0], new RegExp(`did not answer within ${TIMEOUT_MS} ms`));
  // A tool call: the model's error.
  answer = () => () => {};
  const out = await call("POST", "/sessions/t/tools/search_context", { input: { label: "crm", query: "x" } });
  assert.equal(out.body.output, `Error: the block's service did not answer within ${TIMEOUT_MS} ms`);
});

test("hostile answers (huge, not JSON, the wrong shape, a failing status) keep the last text with a warning", async () => {
  const texts = { h: "Dan, trial user" };
  answer = stateful(texts);
  assert.equal((await crm("h")).content, "Dan, trial user");
  const huge = JSON.stringify({ content: "x".repeat(2 * 1024 * 1024) });
  const cases = [
    ["answered too much", () => ({ body: huge })],
    ["not a JSON object", () => ({ body: "<html>nope</html>" })],
    ["not a JSON object", () => ({ body: "[1, 2, 3]" })],
    ["not a JSON object", () => ({ body: "\u0000\u0001garbage" })],
    ["not a text", () => ({ body: { content: 42 } })],
    ["not a text", () => ({ body: { text: "wrong field" } })],
    ["answered HTTP 500", () => ({ status: 500, body: "oops" })],
    ["answered HTTP 302", () => ({ status: 302, body: "" })],
    ["overloaded", () => ({ status: 503, body: { error: "overloaded" } })],
  ];
  for (const [said, a] of cases) {
    answer = a;
    const mark = log.length;
    assert.equal((await crm("h")).content, "Dan, trial user", said);
    const warned = await warnings(mark);
    assert.equal(warned.length, 1, `${said}: ${log.slice(mark).join("\n")}`);
    assert.ok(warned[0].includes(said), `${said}: ${warned[0]}`);
  }
  // The tools: an error the model reads, never the URL.
  for (const [body, want] of [
    [{ results: "nope" }, "Error: the block's service answered something that is not a list of results"],
    [{ results: [{ content: { nested: true } }] }, "Error: the block's service answered something that is not a list of results"],
    [{ error: "x".repeat(5000) }, `Error: ${"x".repeat(500)}…`],
  ]) {
    answer = () => ({ body });
    const out = await call("POST", "/sessions/h/tools/search_context", { input: { label: "crm", query: "q" } });
    assert.equal(out.status, 200);
    assert.equal(out.body.output, want);
    assert.ok(!out.body.output.includes("127.0.0.1"));
  }
  answer = () => ({ body: huge });
  const out = await call("POST", "/sessions/h/tools/load_context", { input: { label: "crm", key: "k" } });
  assert.equal(out.body.output, "Error: the block's service answered too much");
});

test("a block added at run time cannot call out", async () => {
  for (const block of [
    { label: "x", kind: "http", url: serviceUrl },
    { label: "x", kind: "readonly", content: "c", url: serviceUrl },
    { label: "x", kind: "readonly", content: "c", secret: "API_TOKEN" },
  ]) {
    const r = await call("POST", "/sessions/r/context", block);
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.code, "invalid_request");
  }
  const list = await call("GET", "/sessions/r/context");
  assert.deepEqual(list.body.blocks.map((b) => b.label), ["soul", "crm"]);
});
