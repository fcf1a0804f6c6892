// Hostile input, end to end through the front door, for every operation of docs/openapi.yaml (the
// table below is read from the spec, so a new route is covered the day it is documented): NUL and
// control characters, invalid UTF-8, encoded slashes and dots, broken percent-encoding and
// over-long values in every path segment and query parameter; 10,000-deep JSON, duplicate keys,
// wrong content types, invalid and non-object JSON in every body; values at and just over every
// limit; hostile WebSocket frames. Requests go out raw (node:http), so nothing normalizes them.
//
// Expected: never a 5xx; every error has the shape {"error": {"code", "message"}} with a code the
// contract names; and a request that must be refused changes nothing: the agent's stored state
// (every table of its SQLite database and the R2 object list, read from the files) is the same
// before and after each group of such requests.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, startWorker, nextMessage } from "./harness.mjs";
import { doRows, r2Keys } from "./killable.mjs";

const TOKEN = "hostile-token";
const AGENT = "hostile";
const CODES = new Set(["invalid_request", "unauthorized", "not_found", "method_not_allowed", "conflict", "too_large",
  "over_budget", "not_configured", "llm_unavailable"]);
const CONFIG = { context: [
  { label: "memory", kind: "writable", maxTokens: 200 },
  { label: "knowledge", kind: "search" },
  { label: "skills", kind: "skills" },
] };
let w;
const sent = {};

before(async () => {
  // The directory report of the setup's writes waits an hour: the alarm that sends it (and
  // the shard it creates) would change the stored state between two snapshots on its own.
  w = await startWorker({ apiToken: TOKEN, vars: { SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: "hostile-token-secret-hostile-secret",
    DIRECTORY_REPORT_MS: "3600000" } });
  const text = (id, t) => ({ id, role: "user", parts: [{ type: "text", text: t }] });
  const r = await w.json("POST", `/agents/${AGENT}/sessions/s1/messages/batch`, { messages: [text("m1", "one"), text("m2", "two")] });
  assert.equal(r.status, 201);
  await w.json("POST", `/agents/${AGENT}/sessions/s1/compactions`, { summary: "sum", fromMessageId: "m1", toMessageId: "m2" });
  // The memory space of the same name: its database exists before the hostile requests, as the
  // agent's does (a request that reaches an object opens it, whatever it is refused for).
  assert.equal((await w.json("GET", `/spaces/${AGENT}/blocks`)).status, 200);
});
after(async () => {
  await w?.stop();
  const kinds = Object.entries(sent).map(([k, n]) => `${k} ${n}`).join(", ");
  console.log(`hostile: ${Object.values(sent).reduce((a, b) => a + b, 0)} requests sent (${kinds})`);
});

/** The operations of the spec: [method, path template]. */
function operations() {
  const out = [];
  let path = null;
  for (const line of readFileSync(join(ROOT, "docs/openapi.yaml"), "utf8").split("\n")) {
    const p = /^ {2}(\/\S*):\s*$/.exec(line);
    if (p) { path = p[1]; continue; }
    if (/^\S/.test(line)) path = null;
    const m = path && /^ {4}(get|put|post|patch|delete):\s*$/.exec(line);
    if (m) out.push([m[1].toUpperCase(), path]);
  }
  return out;
}

/** A raw request on a connection of its own (a kept-alive one that the server closes while it
 * idles, during the state reads, would fail the next request: a race of any HTTP client, not the
 * server's doing; holes.test.mjs covers kept-alive connections); resolves with {status, body
 * (parsed when JSON), headers}. */
function raw(method, path, { headers = {}, body, auth = true } = {}) {
  return new Promise((resolve, reject) => {
    const h = { ...(auth ? { authorization: `Bearer ${TOKEN}` } : {}), ...headers };
    if (body !== undefined && h["content-length"] === undefined) h["content-length"] = Buffer.byteLength(body);
    const req = http.request({ host: "127.0.0.1", port: w.url.port, method, path, headers: h, agent: false }, (res) => {
      const chunks = [];
      res.on("data", (d) => chunks.push(d));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { json = text; }
        resolve({ status: res.statusCode, body: json, headers: res.headers });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** Asserts the answer is not a 5xx and, when it is an error, has the contract's shape. */
function wellFormed(r, what) {
  assert.ok(r.status < 500, `${what}: ${r.status} ${JSON.stringify(r.body)}`);
  if (r.status >= 400 && r.status !== 404 || r.body?.error) {
    assert.ok(r.body && typeof r.body.error === "object", `${what}: error shape, got ${JSON.stringify(r.body)}`);
    assert.ok(CODES.has(r.body.error.code), `${what}: code ${r.body.error.code}`);
    assert.equal(typeof r.body.error.message, "string", what);
  }
}

const MOVES_ON_ITS_OWN = ["spill_garbage", "directory_report", "directory_entries"];

/** The agent's whole stored state, from the files: every table of every DO database, R2 keys. */
function state() {
  const tables = doRows(w.persistDir, "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%'")
    // The directory report (its own row, and the shards' rows) moves on the alarm a moment
    // after the setup's writes, not with any request: left out, as the sweep's garbage is.
    .map((r) => r[0]).filter((t, i, all) => all.indexOf(t) === i && !MOVES_ON_ITS_OWN.includes(t)).sort();
  return JSON.stringify([tables.map((t) => [t, doRows(w.persistDir, `SELECT * FROM "${t}"`).map((r) => JSON.stringify(r)).sort()]), r2Keys(w.persistDir).sort()]);
}

const VALUES = { agent: AGENT, space: AGENT, sid: "s1", mid: "m1", label: "memory", cid: "c1", name: "session_search", memory: "mem_x", key: "k1", chatId: "s1", schedule: "sch_x" };

/** Segment variants that no parameter accepts: each request carrying one must be refused. */
const REFUSED = {
  agent: ["%00", "a%01b", "%7F", "%FF", "%C3", "%C0%AF", "a%2Fb", "a%20b", "%", "%G1", "x".repeat(129), "%E2%80%8B"],
  space: ["%00", "a%01b", "%7F", "%FF", "%C3", "%C0%AF", "a%2Fb", "a%20b", "%", "%G1", "x".repeat(129), "%E2%80%8B"],
  sid: ["%00", "a%01b", "%7F", "%FF", "%C3", "%C0%AF", "a%2Fb", "a%20b", "%G1", "x".repeat(129), "%E2%80%8B"],
  mid: ["%00", "a%0Ab", "%7F", "%C2%85", "%FF", "%C3", "%C0%AF", "x".repeat(257)],
  label: ["%00", "%FF", "a%2Fb", "a%20b", "x".repeat(65), "%C3%A9"],
  cid: ["%00", "%FF", "%C0%AF"],
  name: ["%00", "%FF", "%C3"],
  memory: ["%00", "a%01b", "%FF", "%C3", "%C0%AF", "a%2Fb", "x".repeat(300)],
  key: ["%00", "%FF", "%C3", "%C0%AF"],
  // Not checked on the session's resume route (the client may make a new one), but it must decode.
  chatId: ["%FF", "%C3", "%C0%AF"],
  schedule: ["%00", "a%01b", "%FF", "%C3", "%C0%AF", "a%2Fb", "x".repeat(300)],
};
/** Variants that may route elsewhere (workerd resolves dots) or be valid: no 5xx, well formed. */
const ROUTED = ["..", "%2e%2e", ".", ";/../", "%2F", "x".repeat(10_000), ""];

function concrete(template, override = {}) {
  return template.replace(/\{(\w+)\}/g, (_, k) => override[k] ?? encodeURIComponent(VALUES[k]));
}

test("every path segment of every operation: hostile values are refused and change nothing", { timeout: 300_000 }, async () => {
  const ops = operations();
  assert.ok(ops.length >= 40, `the spec lists ${ops.length} operations`);
  const before = state();
  for (const [method, template] of ops) {
    for (const param of template.match(/\{\w+\}/g)?.map((p) => p.slice(1, -1)) ?? []) {
      for (const v of REFUSED[param]) {
        const path = concrete(template, { [param]: v });
        const r = await raw(method, path, { body: method === "GET" || method === "DELETE" ? undefined : "{}", headers: { "content-type": "application/json" } });
        sent.segments = (sent.segments ?? 0) + 1;
        wellFormed(r, `${method} ${path.slice(0, 120)}`);
        assert.ok(r.status >= 400, `${method} ${path.slice(0, 120)}: refused, got ${r.status}`);
      }
    }
  }
  assert.equal(state(), before, "refused requests changed the stored state");
  for (const [method, template] of ops) {
    for (const param of template.match(/\{\w+\}/g)?.map((p) => p.slice(1, -1)) ?? []) {
      for (const v of ROUTED) {
        const path = concrete(template, { [param]: v });
        const r = await raw(method, path, { body: method === "GET" || method === "DELETE" ? undefined : "{}", headers: { "content-type": "application/json" } });
        sent.routed = (sent.routed ?? 0) + 1;
        wellFormed(r, `${method} ${path.slice(0, 120)}`);
      }
    }
  }
});

test("every query parameter: NUL, control characters, invalid UTF-8, broken encoding", { timeout: 300_000 }, async () => {
  const queries = ["q", "limit", "leaf", "raw", "truncate", "keepRecent", "maxToolOutputChars", "maxTextChars", "maxBytes",
    "minMessages", "offset", "token", "x", "cursor", "prefix", "kind", "from", "to", "activeAfter", "activeBefore"];
  const invalid = ["%FF", "%C3", "%C0%AF", "a%ED%A0%80b"];
  const others = ["%00", "a%01b", "%", "%G1", "%2F", "..", "x".repeat(5000), "-1", "1e999", "%2B", "+"];
  const gets = operations().filter(([m, t]) => m === "GET" && (t.startsWith("/agents/") || t.startsWith("/directory")));
  // Not UTF-8 after decoding, in a name or a value: refused on every route, nothing stored.
  const before = state();
  for (const [method, template] of gets) {
    for (const q of queries) {
      for (const v of invalid) {
        for (const path of [`${concrete(template)}?${q}=${v}`, `${concrete(template)}?${v}=${q}`]) {
          const r = await raw(method, path);
          sent.queries = (sent.queries ?? 0) + 1;
          wellFormed(r, `${method} ${path.slice(0, 120)}`);
          assert.equal(r.status, 400, `${path}: invalid UTF-8 is refused`);
        }
      }
    }
  }
  assert.equal(state(), before, "refused queries changed the stored state");
  // Anything else: answered (or refused) without a 5xx, well formed.
  for (const [method, template] of operations().filter(([m]) => m === "GET")) {
    for (const q of queries) {
      for (const v of others) {
        const path = `${concrete(template)}?${q}=${v}`;
        const r = await raw(method, path);
        sent.queries += 1;
        wellFormed(r, `${method} ${path.slice(0, 120)}`);
      }
    }
  }
});

test("every body: deep nesting, duplicate keys, wrong types and content types, invalid JSON", { timeout: 300_000 }, async () => {
  const deepArray = "[".repeat(10_000) + "]".repeat(10_000);
  const deepObject = '{"a":'.repeat(10_000) + "1" + "}".repeat(10_000);
  const deepMessage = `{"message":{"id":"deep","role":"user","parts":[{"type":"text","text":"x","meta":${deepObject}}]}}`;
  const bodies = [
    ["deep array", deepArray, "application/json"],
    ["deep object", deepObject, "application/json"],
    ["deep inside a message", deepMessage, "application/json"],
    ["invalid JSON", '{"message": ', "application/json"],
    ["not an object", "[1,2,3]", "application/json"],
    ["a string", '"hello"', "application/json"],
    ["form data", "a=1&b=2", "application/x-www-form-urlencoded"],
    ["binary", "\u0000\u0001\uFFFD", "application/octet-stream"],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), "application/json"],
    ["BOM", "\uFEFF{}", "application/json"],
    ["null", "null", "application/json"],
  ];
  const before = state();
  for (const [method, template] of operations().filter(([m]) => m !== "GET" && m !== "DELETE")) {
    if (template === "/") continue;
    for (const [what, body, type] of bodies) {
      const path = concrete(template);
      const r = await raw(method, path, { body, headers: { "content-type": type } });
      sent.bodies = (sent.bodies ?? 0) + 1;
      wellFormed(r, `${method} ${path} with ${what}`);
      if (template.startsWith("/agents/")) assert.ok(r.status >= 400, `${method} ${path} with ${what}: refused, got ${r.status}`);
    }
  }
  assert.equal(state(), before, "refused bodies changed the stored state");
  // Duplicate keys: the last one wins, everywhere, and what is stored is valid JSON.
  const dup = '{"message":{"id":"first","role":"user","parts":[]},"message":{"id":"d1","id":"d2","role":"user","parts":[{"type":"text","text":"a","text":"b"}]}}';
  const r = await raw("POST", `/agents/${AGENT}/sessions/dup/messages`, { body: dup, headers: { "content-type": "application/json" } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const stored = await raw("GET", `/agents/${AGENT}/sessions/dup/messages/d2`);
  assert.deepEqual(stored.body, { id: "d2", role: "user", parts: [{ type: "text", text: "b" }] });
  assert.equal((await raw("GET", `/agents/${AGENT}/sessions/dup/messages/first`)).status, 404);
  // A wrong content type with a JSON body is read as JSON (the contract does not check it).
  const plain = await raw("POST", `/agents/${AGENT}/sessions/dup/messages`, { body: JSON.stringify({ message: { id: "p1", role: "user", parts: [] } }), headers: { "content-type": "text/plain" } });
  assert.equal(plain.status, 201);
  sent.bodies += 3;
});

test("a memory space refuses conversation memories on every write path and changes nothing", async () => {
  const send = (method, path, body) => raw(method, `/spaces/${AGENT}${path}`, { body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const core = await send("POST", "/memories", { content: "The user likes ferries.", sessionId: "s1" });
  assert.equal(core.status, 201, JSON.stringify(core.body));
  const talk = { content: "We talked about ferries.", category: "conversation", sessionId: "s1" };
  const before = state();
  for (const [what, method, path, body] of [
    ["one", "POST", "/memories", talk],
    ["one, consolidated", "POST", "/memories", { ...talk, consolidate: true }],
    ["one without a session", "POST", "/memories", { content: "We talked.", category: "conversation" }],
    ["in a batch", "POST", "/memories/batch", { memories: [{ content: "The user likes boats." }, talk] }],
    ["a change of category", "PATCH", `/memories/${core.body.id}`, { category: "conversation" }],
  ]) {
    const r = await send(method, path, body);
    sent.conversation = (sent.conversation ?? 0) + 1;
    wellFormed(r, what);
    assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "invalid_request", what);
  }
  assert.equal(state(), before, "refused conversation memories changed the stored state");
});

/** Metadata at and just over its limits (16 keys of 64 characters, strings of 512 characters,
 * not bytes), on sessions and memories, and the filters' (16 `metadata.<key>`, 16 `tag`). */
function metadataLimits(post) {
  const key = (i) => String(i).padStart(64, "k");
  const full = (n, value) => Object.fromEntries(Array.from({ length: n }, (_, i) => [key(i), value]));
  const list = (query) => raw("GET", `/agents/${AGENT}/memories?${query}`);
  const filters = (name, n) => Array.from({ length: n }, (_, i) => `${name}=${i}`).join("&");
  const cases = [];
  for (const [where, body] of [["session", (metadata) => ["/sessions", { name: "meta", metadata }]],
    ["memory", (metadata) => ["/memories", { content: "Limits.", metadata }]]]) {
    const at = (what, metadata, status) => cases.push([`${where} metadata: ${what}`, () => post(...body(metadata)), status]);
    at("16 keys of 64 characters, strings of 512 characters", full(16, "é".repeat(512)), 201);
    at("17 keys", full(17, 1), 400);
    at("a key of 65 characters", { ["k".repeat(65)]: 1 }, 400);
    at("a string of 513 characters", { s: "é".repeat(513) }, 400);
  }
  cases.push(["16 metadata.<key> filters", () => list(filters("metadata.k", 16).replace(/k=(\d+)/g, "k$1=v")), 200]);
  cases.push(["17 metadata.<key> filters", () => list(filters("metadata.k", 17).replace(/k=(\d+)/g, "k$1=v")), 400]);
  cases.push(["16 tag filters", () => list(filters("tag", 16)), 200]);
  cases.push(["17 tag filters", () => list(filters("tag", 17)), 400]);
  cases.push(["a metadata filter value of 512 characters", () => list(`metadata.k=${"v".repeat(512)}`), 200]);
  cases.push(["a metadata filter value of 513 characters", () => list(`metadata.k=${"v".repeat(513)}`), 400]);
  return cases;
}

test("values at and just over every limit", { timeout: 300_000 }, async () => {
  const post = (path, body) => raw("POST", `/agents/${AGENT}${path}`, { body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const msg = (id, t = "x") => ({ id, role: "user", parts: [{ type: "text", text: t }] });
  const cases = [
    ["message id of 256 characters", () => post("/sessions/lim/messages", { message: msg("i".repeat(256)) }), 201],
    ["message id of 257 characters", () => post("/sessions/lim/messages", { message: msg("i".repeat(257)) }), 400],
    ["session name of 256 characters", () => post("/sessions", { name: "n".repeat(256) }), 201],
    ["session name of 257 characters", () => post("/sessions", { name: "n".repeat(257) }), 400],
    ["session id of 128 characters", () => post(`/sessions/${"s".repeat(128)}/messages`, { message: msg("a") }), 201],
    ["session id of 129 characters", () => post(`/sessions/${"s".repeat(129)}/messages`, { message: msg("a") }), 400],
    ["block label of 64 characters", () => post("/sessions/lim/context", { label: "l".repeat(64), kind: "writable" }), 201],
    ["block label of 65 characters", () => post("/sessions/lim/context", { label: "l".repeat(65), kind: "writable" }), 400],
    ["search limit 100", () => raw("GET", `/agents/${AGENT}/search?q=x&limit=100`), 200],
    ["search limit 101", () => raw("GET", `/agents/${AGENT}/search?q=x&limit=101`), 400],
    ["agent of 128 characters", () => raw("GET", `/agents/${"a".repeat(128)}/sessions`), 200],
    ["agent of 129 characters", () => raw("GET", `/agents/${"a".repeat(129)}/sessions`), 400],
    ["maxTokens over budget", () => post("/sessions/lim/context", { label: "tight", kind: "writable", maxTokens: 1, content: "far too long" }), 422],
    ...metadataLimits(post),
  ];
  for (const [what, send, status] of cases) {
    const r = await send();
    sent.limits = (sent.limits ?? 0) + 1;
    wellFormed(r, what);
    assert.equal(r.status, status, `${what}: ${JSON.stringify(r.body).slice(0, 200)}`);
  }
  // A message of exactly 1,800,000 bytes of JSON stays in its row; one byte more is stored
  // whole with its large field in R2.
  const sized = (id, n) => {
    const m = msg(id, "");
    m.parts[0].text = "y".repeat(n - JSON.stringify(m).length);
    assert.equal(JSON.stringify(m).length, n);
    return m;
  };
  for (const [id, n, spilled] of [["at", 1_800_000, false], ["over", 1_800_001, true]]) {
    const m = sized(id, n);
    const keys = r2Keys(w.persistDir).length;
    assert.equal((await post("/sessions/big/messages", { message: m })).status, 201, id);
    assert.deepEqual((await raw("GET", `/agents/${AGENT}/sessions/big/messages/${id}`)).body, m, `${id}: read back whole`);
    assert.equal(r2Keys(w.persistDir).length > keys, spilled, `${id}: spilled to R2`);
    sent.limits += 2;
  }
  // Bodies of exactly 32 MiB are read; a declared 32 MiB + 1 is refused before the body is sent.
  const limit = 32 * 1024 * 1024;
  const head = JSON.stringify({ message: msg("padded") });
  const padded = head.slice(0, -1) + " ".repeat(limit - head.length) + "}";
  assert.equal(Buffer.byteLength(padded), limit);
  assert.equal((await raw("POST", `/agents/${AGENT}/sessions/big/messages`, { body: padded, headers: { "content-type": "application/json" } })).status, 201);
  const over = await raw("POST", `/agents/${AGENT}/sessions/big/messages`, { body: "", headers: { "content-type": "application/json", "content-length": String(limit + 1) } }).catch(() => ({ status: 413 }));
  assert.equal(over.status, 413);
  sent.limits += 2;
});

test("hostile WebSocket frames get error frames and the socket stays usable", { timeout: 120_000 }, async () => {
  const ws = await w.webSocket(`/agents/${AGENT}/sessions/wsh/ws`);
  const frames = [
    "not json", "", "[]", "null", '"ping"', "{}", '{"type": 5}', '{"type": "nope"}', '{"type": "append"}',
    '{"type": "append", "message": {"id": "", "role": "user", "parts": []}}', '{"type": "history", "leafId": 7}',
    '{"type": "chat"}', "[".repeat(10_000) + "]".repeat(10_000), '{"type":"append","message":' + '{"a":'.repeat(10_000) + "1" + "}".repeat(10_000) + "}",
    '{"type": "append", "message": {"id": "x\\u0000", "role": "user", "parts": []}}',
  ];
  for (const f of frames) {
    ws.send(f);
    const e = await nextMessage(ws, 10_000);
    assert.equal(e.type, "error", `${f.slice(0, 60)}: ${JSON.stringify(e)}`);
    assert.ok(CODES.has(e.code), e.code);
    ws.send(JSON.stringify({ type: "ping" }));
    assert.deepEqual(await nextMessage(ws), { type: "pong" }, "the socket stays usable");
    sent.frames = (sent.frames ?? 0) + 1;
  }
  ws.send(Buffer.from([0, 1, 2]), { binary: true });
  assert.equal((await nextMessage(ws)).code, "invalid_request");
  // Just under our frame limit: answered; over it: too_large (holes.test.mjs); both keep the socket.
  ws.send(JSON.stringify({ type: "ping", pad: "p".repeat(16 * 1024 * 1024 - 64) }));
  assert.deepEqual(await nextMessage(ws, 20_000), { type: "pong" });
  sent.frames += 2;
  ws.close();
});
