// End-to-end: scoped tokens and CORS in workerd. The admin token (API_TOKEN) issues JWTs (HS256,
// TOKEN_SECRET) through POST /agents/{agent}/tokens; a scoped token opens one agent, optionally
// only some sessions, read-only or read-write, until it expires or the agent revokes it (open
// WebSockets included). Forged, tampered and expired tokens, a client-sent claims header and
// `%2e%2e` paths get nothing; refused writes change nothing. CORS_ORIGINS answers preflights
// without a token and marks every answer to an allowed origin; a page on another origin, in
// headless Chromium (playwright-core), calls the Worker with a scoped token only when its
// origin is listed. Tokens are forged here with node:crypto to test what the Worker refuses.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { createHmac } from "node:crypto";
import { existsSync } from "node:fs";
import WebSocket from "ws";
import { startWorker, nextMessage } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

const SECRET = "e2e-token-secret-0123456789abcdef0123456789";
const ADMIN = "test-token"; // the harness's default API_TOKEN
const ALLOWED = "http://allowed.example";
const CHROMIUM = "/usr/bin/chromium";
const MAX_TTL = 2_592_000;

let w; // TOKEN_SECRET, CORS_ORIGINS = ALLOWED + the listed page's origin, an LLM
let model;
/** Two tiny pages on other origins than the Worker: `listed` is in CORS_ORIGINS, `unlisted` not. */
const pages = { listed: null, unlisted: null };

before(async () => {
  pages.listed = await startPageServer();
  pages.unlisted = await startPageServer();
  model = await startModel();
  w = await startWorker({
    vars: {
      TOKEN_SECRET: SECRET,
      CORS_ORIGINS: ` ${ALLOWED} , ${pages.listed.origin}`,
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
    },
  });
});
after(async () => {
  await w?.stop();
  await model?.close();
  await pages.listed?.close();
  await pages.unlisted?.close();
});

// ── Helpers ──────────────────────────────────────────────────────────────────────────────────

const b64 = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
const JWT_HEADER = b64({ alg: "HS256", typ: "JWT" });
const sign = (input, secret = SECRET) => createHmac("sha256", secret).update(input).digest("base64url");
/** A token with these claims (and header), signed with `secret`. */
function forge(claims, { secret = SECRET, header = JWT_HEADER } = {}) {
  const input = `${header}.${b64(claims)}`;
  return `${input}.${sign(input, secret)}`;
}
/** The claims of a token, decoded (not verified). */
const claimsOf = (token) => JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString("utf8"));
const nowSec = () => Date.now() / 1000;
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** POST /agents/{agent}/tokens with the admin token: asserts 201, returns the answer. */
async function issue(agent, body, worker = w) {
  const r = await worker.json("POST", `/agents/${agent}/tokens`, body);
  assert.equal(r.status, 201, `POST /agents/${agent}/tokens ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
  return r.body;
}
const mint = async (agent, body) => (await issue(agent, body)).token;

/** `w.json` with a token (a string), none (false), or the admin token (true). */
const as = (auth, method, path, body, headers) => w.json(method, path, body, { auth, headers });

/** Asserts an error answer: status and code (and WWW-Authenticate: Bearer on a 401). */
function assertError(r, status, code, what = "") {
  assert.equal(r.status, status, `${what} ${JSON.stringify(r.body)}`);
  assert.equal(r.body?.error?.code, code, `${what} ${JSON.stringify(r.body)}`);
}
function assertUnauthorized(r, what = "") {
  assertError(r, 401, "unauthorized", what);
  assert.equal(r.headers.get("www-authenticate"), "Bearer", `${what}: WWW-Authenticate`);
}

/** The ids of a session's active branch, read with the admin token. */
async function historyIds(agent, sid) {
  const r = await w.json("GET", `/agents/${agent}/sessions/${sid}/history`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages.map((m) => m.id);
}
/** The session ids of an agent, read with the admin token. */
async function sessionIds(agent, worker = w) {
  const r = await worker.json("GET", `/agents/${agent}/sessions`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.sessions.map((s) => s.id);
}
async function memoryContents(agent) {
  const r = await w.json("GET", `/agents/${agent}/memories`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.memories.map((m) => m.content);
}

/** A request with its path sent exactly as written (fetch would resolve `%2e%2e` itself). */
function rawRequest(method, path, token, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({
      host: w.url.hostname, port: w.url.port, method, path,
      headers: { authorization: `Bearer ${token}`, ...(data ? { "content-type": "application/json" } : {}) },
    }, (res) => {
      let text = "";
      res.on("data", (c) => { text += c; });
      res.on("end", () => {
        let parsed = text;
        try { parsed = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, body: parsed });
      });
    });
    req.on("error", reject);
    req.end(data);
  });
}

/** Opens a socket with a scoped token in `?token=` (as browsers must). */
const socket = (path, token) => w.webSocket(path, { auth: token, query: true });
/** The status of a refused upgrade ("WebSocket upgrade refused: HTTP 403" → 403). */
async function refusedUpgrade(promise) {
  try {
    const ws = await promise;
    ws.close();
  } catch (e) {
    const m = /HTTP (\d+)/.exec(e.message);
    if (m) return Number(m[1]);
    throw e;
  }
  assert.fail("the WebSocket upgrade was accepted");
}
/** Sends a frame and resolves with the next one. */
async function ask(ws, frame, timeoutMs = 3000) {
  const next = nextMessage(ws, timeoutMs);
  ws.send(JSON.stringify(frame));
  return next;
}
/** Resolves with {code, reason} once `ws` closes. */
const closed = (ws, timeoutMs = 3000) => new Promise((resolve, reject) => {
  if (ws.readyState === WebSocket.CLOSED) return reject(new Error("already closed"));
  const timer = setTimeout(() => reject(new Error("the socket did not close in time")), timeoutMs);
  ws.once("close", (code, reason) => { clearTimeout(timer); resolve({ code, reason: reason.toString() }); });
});
/** The frames `ws` receives during `ms`. */
function framesFor(ws, ms) {
  const got = [];
  const on = (d) => { try { got.push(JSON.parse(d.toString())); } catch { got.push(d.toString()); } };
  ws.on("message", on);
  return sleep(ms).then(() => { ws.off("message", on); return got; });
}

/** An HTTP server on 127.0.0.1 (a free port: another origin than the Worker's) serving one page. */
async function startPageServer() {
  const server = http.createServer((req, res) => {
    if (req.url !== "/") { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(PAGE);
  });
  await new Promise((resolve, reject) => { server.once("error", reject); server.listen(0, "127.0.0.1", resolve); });
  const origin = `http://127.0.0.1:${server.address().port}`;
  return { origin, close: () => new Promise((r) => { server.close(() => r()); server.closeAllConnections?.(); }) };
}
/** The page: its script calls the Worker with a bearer token and reports what it could read. */
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>another origin</title></head><body>
<script>
window.callWorker = async (url, token, method, body) => {
  try {
    const headers = { authorization: "Bearer " + token };
    if (body !== undefined) headers["content-type"] = "application/json";
    const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (e) { json = text; }
    return { ok: true, status: r.status, body: json };
  } catch (e) {
    return { ok: false, name: e.name, message: String(e.message) };
  }
};
document.title = "ready";
</script></body></html>`;

// ── Issuing ──────────────────────────────────────────────────────────────────────────────────

test("POST /tokens issues an HS256 JWT signed with TOKEN_SECRET; bad requests are refused", async () => {
  const before = Date.now();
  const answer = await issue("issuer", { scope: "read", ttlSeconds: 90, sessions: ["s1", "s2", "s1"] });
  const after = Date.now();
  assert.deepEqual(Object.keys(answer).sort(), ["agent", "expiresAt", "kind", "scope", "sessions", "token"]);
  assert.equal(answer.kind, "agent");
  assert.equal(answer.agent, "issuer");
  assert.equal(answer.scope, "read");
  assert.deepEqual(answer.sessions, ["s1", "s2"], "duplicates are dropped");
  const [header, payload, signature] = answer.token.split(".");
  assert.deepEqual(JSON.parse(Buffer.from(header, "base64url")), { alg: "HS256", typ: "JWT" });
  assert.equal(signature, sign(`${header}.${payload}`), "HMAC-SHA-256 of header.payload with TOKEN_SECRET");
  const claims = claimsOf(answer.token);
  assert.deepEqual(Object.keys(claims).sort(), ["exp", "iat", "scope", "sessions", "sub"]);
  assert.deepEqual([claims.sub, claims.scope, claims.sessions], ["issuer", "read", ["s1", "s2"]]);
  assert.ok(claims.iat * 1000 >= before - 5 && claims.iat * 1000 <= after + 5, `iat ${claims.iat} in [${before}, ${after}]`);
  assert.ok(Math.abs(claims.iat * 1000 - Math.round(claims.iat * 1000)) < 0.01, "iat: seconds with milliseconds as fraction");
  assert.equal(Math.round((claims.exp - claims.iat) * 1000), 90_000);
  assert.equal(answer.expiresAt, new Date(Math.round(claims.exp * 1000)).toISOString());

  const wide = await issue("issuer", { scope: "write", ttlSeconds: MAX_TTL });
  assert.equal(wide.sessions, null);
  assert.equal(claimsOf(wide.token).sessions, undefined, "no sessions claim: every session");
  assert.equal(Math.round((claimsOf(wide.token).exp - claimsOf(wide.token).iat) * 1000), MAX_TTL * 1000);

  for (const body of [
    {}, { ttlSeconds: 60 }, { scope: "admin", ttlSeconds: 60 }, { scope: "READ", ttlSeconds: 60 },
    { scope: "read" }, { scope: "read", ttlSeconds: 0 }, { scope: "read", ttlSeconds: -5 },
    { scope: "read", ttlSeconds: MAX_TTL + 1 }, { scope: "read", ttlSeconds: 1.5 }, { scope: "read", ttlSeconds: "60" },
    { scope: "read", ttlSeconds: 60, sessions: [] }, { scope: "read", ttlSeconds: 60, sessions: "s1" },
    { scope: "read", ttlSeconds: 60, sessions: [1] }, { scope: "read", ttlSeconds: 60, sessions: ["a/b"] },
    { scope: "read", ttlSeconds: 60, agent: "other" }, "not json", "[1]",
  ]) {
    const r = await w.json("POST", "/agents/issuer/tokens", body);
    assertError(r, 400, "invalid_request", `POST /tokens ${JSON.stringify(body)}`);
    assert.equal(r.body.token, undefined);
  }
  // Only the admin token issues, and only with POST.
  const get = await w.json("GET", "/agents/issuer/tokens");
  assert.equal(get.status, 405);
  assert.match(get.headers.get("allow") ?? "", /POST/);
  assertUnauthorized(await as(false, "POST", "/agents/issuer/tokens", { scope: "read", ttlSeconds: 60 }), "no token");
  for (const t of [answer.token, wide.token]) {
    const r = await as(t, "POST", "/agents/issuer/tokens", { scope: "write", ttlSeconds: 60 });
    assertError(r, 403, "forbidden", "a scoped token issuing");
    assert.equal(r.body.token, undefined);
  }
});

// ── What a token opens ───────────────────────────────────────────────────────────────────────

test("a scoped token opens only its own agent", async () => {
  const t = await mint("alpha", { scope: "write", ttlSeconds: 60 });
  let r = await as(t, "POST", "/agents/alpha/sessions/s1/messages", { message: user("m1", "hello") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await as(t, "POST", "/agents/alpha/sessions", { name: "made with a token" });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal((await as(t, "GET", "/agents/alpha/sessions")).status, 200);
  assert.deepEqual(await historyIds("alpha", "s1"), ["m1"]);

  // Another agent: 403, for reads and writes, and nothing is written there.
  assertError(await as(t, "GET", "/agents/beta/sessions"), 403, "forbidden");
  assertError(await as(t, "GET", "/agents/beta/sessions/s1/history"), 403, "forbidden");
  assertError(await as(t, "POST", "/agents/beta/sessions/s1/messages", { message: user("x1", "intruder") }), 403, "forbidden");
  assertError(await as(t, "POST", "/agents/beta/memories", { content: "planted" }), 403, "forbidden");
  assert.equal(await refusedUpgrade(socket("/agents/beta/sessions/s1/ws", t)), 403);
  // A correctly signed token for beta does not open alpha either.
  const forgedBeta = forge({ sub: "beta", scope: "write", iat: nowSec(), exp: nowSec() + 60 });
  assertError(await as(forgedBeta, "GET", "/agents/alpha/sessions/s1/history"), 403, "forbidden");
  assert.equal((await as(forgedBeta, "GET", "/agents/beta/sessions")).status, 200, "it does open beta");
  assert.deepEqual(await historyIds("beta", "s1"), []);
  assert.deepEqual(await sessionIds("beta"), []);
  assert.deepEqual(await memoryContents("beta"), []);
});

test("a token limited to sessions opens those only, and no agent-wide route", async () => {
  const A = "/agents/limited";
  const t = await mint("limited", { scope: "write", ttlSeconds: 60, sessions: ["s1", "s3"] });
  let r = await as(t, "POST", `${A}/sessions/s1/messages`, { message: user("m1", "in s1") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await as(t, "POST", `${A}/sessions/s3/messages`, { message: user("m3", "in s3") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await as(t, "GET", `${A}/sessions/s1/history`);
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.messages.map((m) => m.id), ["m1"]);
  // The session id percent-encoded is the same session.
  assert.equal((await as(t, "GET", `${A}/sessions/%73%31/history`)).status, 200);

  // Other sessions: 403, reads and writes.
  assertError(await as(t, "GET", `${A}/sessions/s2/history`), 403, "forbidden");
  assertError(await as(t, "POST", `${A}/sessions/s2/messages`, { message: user("x", "no") }), 403, "forbidden");
  assertError(await as(t, "DELETE", `${A}/sessions/s2`), 403, "forbidden");
  // Agent-wide routes: 403.
  for (const [method, path, body] of [
    ["GET", "/sessions"], ["POST", "/sessions", { name: "new" }], ["GET", "/search?q=hello"],
    ["GET", "/memories"], ["POST", "/memories", { content: "planted" }], ["GET", "/memories/search?q=x"],
  ]) {
    assertError(await as(t, method, `${A}${path}`, body), 403, "forbidden", `${method} ${path}`);
  }
  // Nothing of that was done.
  assert.deepEqual((await sessionIds("limited")).sort(), ["s1", "s3"]);
  assert.deepEqual(await historyIds("limited", "s2"), []);
  assert.deepEqual(await memoryContents("limited"), []);
});

test("scope read allows GET only", async () => {
  const A = "/agents/reader";
  const modelCalls = model.requests.length;
  assert.equal((await w.json("POST", `${A}/sessions/s1/messages`, { message: user("m1", "seed") })).status, 201);
  const t = await mint("reader", { scope: "read", ttlSeconds: 60 });
  const wideRead = await as(t, "GET", `${A}/sessions/s1/history`);
  assert.equal(wideRead.status, 200);
  assert.deepEqual(wideRead.body.messages.map((m) => m.id), ["m1"]);
  assert.equal((await as(t, "GET", `${A}/sessions`)).status, 200);
  const sessionBefore = (await as(t, "GET", `${A}/sessions/s1`)).body;
  assert.equal(sessionBefore.id, "s1");
  assert.equal((await as(t, "GET", `${A}/memories`)).status, 200);

  for (const [method, path, body] of [
    ["POST", "/sessions/s1/messages", { message: user("m2", "write") }],
    ["POST", "/sessions", { name: "x" }],
    ["PATCH", "/sessions/s1", { name: "renamed" }],
    ["DELETE", "/sessions/s1"],
    ["DELETE", "/sessions/s1/messages/m1"],
    ["POST", "/sessions/s1/chat", { message: user("m3", "chat") }],
    ["POST", "/memories", { content: "planted" }],
  ]) {
    assertError(await as(t, method, `${A}${path}`, body), 403, "forbidden", `${method} ${path}`);
  }
  assert.deepEqual(await historyIds("reader", "s1"), ["m1"]);
  assert.deepEqual(await sessionIds("reader"), ["s1"]);
  assert.deepEqual((await w.json("GET", `${A}/sessions/s1`)).body, sessionBefore, "the session was not renamed");
  assert.deepEqual(await memoryContents("reader"), []);
  assert.equal(model.requests.length, modelCalls, "the refused chat never reached the model");
});

test("expired, forged, tampered and malformed tokens are 401 with WWW-Authenticate: Bearer", async () => {
  const A = "/agents/guarded";
  const path = `${A}/sessions/s1/history`;
  const good = forge({ sub: "guarded", scope: "write", iat: nowSec(), exp: nowSec() + 60 });
  assert.equal((await as(good, "GET", path)).status, 200, "a token forged with the right secret is a token");

  const expired = forge({ sub: "guarded", scope: "write", iat: nowSec() - 120, exp: nowSec() - 1 });
  const wrongSecret = forge({ sub: "guarded", scope: "write", iat: nowSec(), exp: nowSec() + 60 }, { secret: `${SECRET}x` });
  const read = await mint("guarded", { scope: "read", ttlSeconds: 60 });
  const [h, , s] = read.split(".");
  const escalated = `${h}.${b64({ ...claimsOf(read), scope: "write" })}.${s}`; // the read token's signature
  const otherAgent = `${h}.${b64({ ...claimsOf(read), sub: "elsewhere" })}.${s}`;
  const none = `${b64({ alg: "none", typ: "JWT" })}.${b64({ sub: "guarded", scope: "write", iat: nowSec(), exp: nowSec() + 60 })}.`;
  const hs512Header = forge({ sub: "guarded", scope: "write", iat: nowSec(), exp: nowSec() + 60 },
    { header: b64({ alg: "HS512", typ: "JWT" }) });
  const cases = {
    expired, wrongSecret, escalated, otherAgent, none, hs512Header,
    truncatedSignature: read.slice(0, -4),
    noSignature: read.split(".").slice(0, 2).join("."),
    garbage: "not-a-token",
    wrongAdmin: `${ADMIN}x`,
    empty: "",
  };
  for (const [name, token] of Object.entries(cases)) {
    assertUnauthorized(await as(false, "GET", path, undefined, { authorization: `Bearer ${token}` }), name);
    assertUnauthorized(await as(false, "POST", `${A}/sessions/s1/messages`, { message: user(`x-${name}`, "no") },
      { authorization: `Bearer ${token}` }), `${name} (write)`);
  }
  assertUnauthorized(await as(false, "GET", path), "no token at all");
  assertUnauthorized(await as(false, "GET", path, undefined, { authorization: `Basic ${read}` }), "not Bearer");
  // Outside a WebSocket upgrade a token in the URL counts for nothing.
  assertUnauthorized(await as(false, "GET", `${path}?token=${encodeURIComponent(read)}`), "?token= on HTTP");
  assertUnauthorized(await as(false, "GET", `${path}?token=${ADMIN}`), "admin ?token= on HTTP");
  // Sockets too.
  assert.equal(await refusedUpgrade(socket(`${A}/sessions/s1/ws`, expired)), 401);
  assert.equal(await refusedUpgrade(socket(`${A}/sessions/s1/ws`, wrongSecret)), 401);
  assert.equal(await refusedUpgrade(socket(`${A}/sessions/s1/ws`, escalated)), 401);
  assert.deepEqual(await historyIds("guarded", "s1"), [], "no refused write landed");
});

test("a client-sent x-session-agent-claims header is never trusted", async () => {
  const A = "/agents/claimed";
  const claimsHeader = (c) => ({ "x-session-agent-claims": JSON.stringify(c) });
  const readOnly = { sub: "claimed", scope: "read", sessions: ["other"], iat: nowSec(), exp: nowSec() + 60 };
  const expiredClaims = { sub: "nobody", scope: "read", iat: 1, exp: 2 };
  // With the admin token: the header would limit it if it were read; it is dropped.
  let r = await as(true, "POST", `${A}/sessions/s1/messages`, { message: user("m1", "admin") }, claimsHeader(readOnly));
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await as(true, "GET", `${A}/sessions`, undefined, claimsHeader(expiredClaims));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  r = await as(true, "GET", `${A}/sessions/s1/history`, undefined, { "x-session-agent-claims": "{not json" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  // Without a token, or with a read token, the header grants nothing.
  const write = { sub: "claimed", scope: "write", iat: nowSec(), exp: nowSec() + 60 };
  assertUnauthorized(await as(false, "POST", `${A}/sessions/s1/messages`, { message: user("x1", "anon") }, claimsHeader(write)));
  const limited = await mint("claimed", { scope: "read", ttlSeconds: 60, sessions: ["s1"] });
  assertError(await as(limited, "POST", `${A}/sessions/s1/messages`, { message: user("x2", "read") }, claimsHeader(write)), 403, "forbidden");
  assertError(await as(limited, "GET", `${A}/sessions/s2/history`, undefined, claimsHeader(write)), 403, "forbidden");
  // A socket opened with the admin token and the header: appends work (admin).
  const u = new URL(`${A}/sessions/s1/ws`, w.url);
  u.protocol = "ws:";
  const ws = new WebSocket(u, { headers: { authorization: `Bearer ${ADMIN}`, ...claimsHeader(readOnly) } });
  await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject); });
  try {
    const f = await ask(ws, { type: "append", message: user("m2", "admin socket") });
    assert.equal(f.type, "message", JSON.stringify(f));
    assert.equal(f.message.id, "m2");
  } finally {
    ws.close();
  }
  assert.deepEqual(await historyIds("claimed", "s1"), ["m1", "m2"]);
});

test("/agents/a/%2e%2e/b/... with a token for a does not reach agent b", async () => {
  const t = await mint("dota", { scope: "write", ttlSeconds: 60 });
  const refused = (r, what) => {
    assert.notEqual(r.status, 200, what);
    assert.notEqual(r.status, 201, what);
    assert.ok([401, 403, 404].includes(r.status), `${what}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  };
  for (const path of [
    "/agents/dota/%2e%2e/dotb/sessions",
    "/agents/dota/%2E%2E/dotb/sessions",
    "/agents/dota/../dotb/sessions",
    "/agents/dota/.%2e/dotb/sessions",
    "/agents/dota/sessions/%2e%2e/%2e%2e/%2e%2e/dotb/sessions",
  ]) {
    refused(await rawRequest("GET", path, t), `GET ${path}`);
  }
  const r = await rawRequest("GET", "/agents/dota/%2e%2e/dotb/sessions", t);
  assert.equal(r.status, 403, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "forbidden");
  for (const path of [
    "/agents/dota/%2e%2e/dotb/sessions/s1/messages",
    "/agents/dota/../dotb/sessions/s1/messages",
    "/agents/dota/sessions/%2e%2e/%2e%2e/dotb/sessions/s1/messages",
    "/agents/dota/sessions/x%2f..%2f..%2f..%2fdotb/sessions/s1/messages",
  ]) {
    refused(await rawRequest("POST", path, t, { message: user(`x${path.length}`, "smuggled") }), `POST ${path}`);
  }
  refused(await rawRequest("POST", "/agents/dota/%2e%2e/dotb/memories", t, { content: "smuggled" }), "POST memories");
  // Agent b got nothing.
  assert.deepEqual(await historyIds("dotb", "s1"), []);
  assert.deepEqual(await sessionIds("dotb"), []);
  assert.deepEqual(await memoryContents("dotb"), []);
  // The same resolved path with the admin token does reach b: the refusal above was the token's.
  const admin = await rawRequest("GET", "/agents/dota/%2e%2e/dotb/sessions", ADMIN);
  assert.equal(admin.status, 200, JSON.stringify(admin.body));
});

// ── Revocation ───────────────────────────────────────────────────────────────────────────────

test("POST /tokens/revoke refuses tokens issued before the time, closes their sockets (1008), and only moves forward", async () => {
  const A = "/agents/revoker";
  const t1 = await mint("revoker", { scope: "write", ttlSeconds: 600 });
  await sleep(5);
  const t2 = await mint("revoker", { scope: "write", ttlSeconds: 600, sessions: ["s1"] });
  const cut = new Date(Math.round(claimsOf(t2).iat * 1000)).toISOString();

  // Bad requests first: nothing is revoked by them.
  for (const body of [{ before: "yesterday" }, { before: 12 }, { after: cut }, { before: new Date(Date.now() + 60_000).toISOString() }]) {
    assertError(await w.json("POST", `${A}/tokens/revoke`, body), 400, "invalid_request", JSON.stringify(body));
  }
  assertError(await as(t1, "POST", `${A}/tokens/revoke`, {}), 403, "forbidden", "a scoped token revoking");
  assertUnauthorized(await as(false, "POST", `${A}/tokens/revoke`, {}), "no token");
  assert.equal((await as(t1, "GET", `${A}/sessions`)).status, 200, "t1 still works");

  // Revoke at t2's issue time: t1 (earlier) is out, t2 (issued at the cut) is still in.
  let r = await w.json("POST", `${A}/tokens/revoke`, { before: cut });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, { before: cut });
  r = await as(t1, "GET", `${A}/sessions`);
  assertError(r, 401, "unauthorized", "t1 after the revocation");
  assertError(await as(t1, "POST", `${A}/sessions/s1/messages`, { message: user("x1", "revoked") }), 401, "unauthorized");
  assert.equal(await refusedUpgrade(socket(`${A}/sessions/s1/ws`, t1)), 401);
  r = await as(t2, "POST", `${A}/sessions/s1/messages`, { message: user("m1", "t2 works") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  // An earlier time changes nothing: the answer is the time in force.
  r = await w.json("POST", `${A}/tokens/revoke`, { before: "2020-01-01T00:00:00Z" });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, { before: cut });
  assert.equal((await as(t2, "GET", `${A}/sessions/s1/history`)).status, 200);

  // Open sockets: scoped ones close with 1008 on the next revocation (default: now), the admin's stays.
  const t3 = await mint("revoker", { scope: "read", ttlSeconds: 600 });
  const limited = await socket(`${A}/sessions/s1/ws`, t2);
  const wide = await socket(`${A}/sessions/s2/ws`, t3);
  const admin = await w.webSocket(`${A}/sessions/s1/ws`);
  try {
    assert.deepEqual(await ask(limited, { type: "ping" }), { type: "pong" });
    assert.deepEqual(await ask(wide, { type: "ping" }), { type: "pong" });
    const closes = [closed(limited), closed(wide)];
    const start = Date.now();
    r = await w.json("POST", `${A}/tokens/revoke`, {});
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const revokedAt = Date.parse(r.body.before);
    assert.ok(revokedAt >= start - 5 && revokedAt <= Date.now() + 5, `before defaults to now: ${r.body.before}`);
    for (const c of await Promise.all(closes)) {
      assert.equal(c.code, 1008, JSON.stringify(c));
      assert.match(c.reason, /revoked/);
    }
    assert.deepEqual(await ask(admin, { type: "ping" }), { type: "pong" }, "the admin's socket stays open");
    for (const t of [t2, t3]) assertError(await as(t, "GET", `${A}/sessions/s1/history`), 401, "unauthorized");
    assert.equal(await refusedUpgrade(socket(`${A}/sessions/s1/ws`, t2)), 401);

    // A token issued after the revocation works, over HTTP and WebSocket.
    const fresh = await mint("revoker", { scope: "write", ttlSeconds: 60 });
    assert.ok(claimsOf(fresh).iat * 1000 >= revokedAt);
    assert.equal((await as(fresh, "GET", `${A}/sessions`)).status, 200);
    const again = await socket(`${A}/sessions/s1/ws`, fresh);
    const f = await ask(again, { type: "history" });
    assert.equal(f.type, "history");
    assert.deepEqual(f.messages.map((m) => m.id), ["m1"]);
    again.close();
  } finally {
    for (const s of [limited, wide, admin]) s.close();
  }
  // Revocation is per agent: another agent's token is untouched.
  const other = await mint("revoker-other", { scope: "read", ttlSeconds: 60 });
  assert.ok(claimsOf(other).iat * 1000 > 0);
  assert.equal((await as(other, "GET", "/agents/revoker-other/sessions")).status, 200);
  assert.deepEqual(await historyIds("revoker", "s1"), ["m1"]);
});

// ── WebSockets ───────────────────────────────────────────────────────────────────────────────

test("a read-scoped socket gets history and pongs; its appends are forbidden and it stays open", async () => {
  const A = "/agents/wsread";
  assert.equal((await w.json("POST", `${A}/sessions/s1/messages`, { message: user("m1", "seed") })).status, 201);
  const read = await mint("wsread", { scope: "read", ttlSeconds: 60, sessions: ["s1"] });
  const modelCalls = model.requests.length;
  const ws = await socket(`${A}/sessions/s1/ws`, read);
  try {
    let f = await ask(ws, { type: "history" });
    assert.equal(f.type, "history");
    assert.deepEqual(f.messages.map((m) => m.id), ["m1"]);
    assert.deepEqual(await ask(ws, { type: "ping" }), { type: "pong" });
    f = await ask(ws, { type: "append", message: user("x1", "not allowed") });
    assert.equal(f.type, "error", JSON.stringify(f));
    assert.equal(f.code, "forbidden");
    f = await ask(ws, { type: "chat", message: user("x2", "not allowed either") });
    assert.equal(f.type, "error", JSON.stringify(f));
    assert.equal(f.code, "forbidden");
    assert.equal(ws.readyState, WebSocket.OPEN);
    assert.deepEqual(await ask(ws, { type: "ping" }), { type: "pong" }, "the socket stays usable");
  } finally {
    ws.close();
  }
  assert.deepEqual(await historyIds("wsread", "s1"), ["m1"], "nothing was appended");
  assert.equal(model.requests.length, modelCalls, "the refused chat frame never reached the model");
  // A token limited to s1 does not open s2's socket; a write one appends on its own session.
  assert.equal(await refusedUpgrade(socket(`${A}/sessions/s2/ws`, read)), 403);
  const write = await mint("wsread", { scope: "write", ttlSeconds: 60, sessions: ["s1"] });
  const ww = await socket(`${A}/sessions/s1/ws`, write);
  try {
    const f = await ask(ww, { type: "append", message: user("m2", "allowed") });
    assert.equal(f.type, "message", JSON.stringify(f));
  } finally {
    ww.close();
  }
  assert.deepEqual(await historyIds("wsread", "s1"), ["m1", "m2"]);
  // The token goes in the Authorization header too (non-browser clients).
  const viaHeader = await w.webSocket(`${A}/sessions/s1/ws`, { auth: read });
  assert.deepEqual(await ask(viaHeader, { type: "ping" }), { type: "pong" });
  viaHeader.close();
});

test("memory frames reach admin and agent-wide sockets, never a session-limited one", async () => {
  const A = "/agents/memws";
  const wideRead = await mint("memws", { scope: "read", ttlSeconds: 60 });
  const limitedWrite = await mint("memws", { scope: "write", ttlSeconds: 60, sessions: ["s1"] });
  const admin = await w.webSocket(`${A}/sessions/s1/ws`);
  const wide = await socket(`${A}/sessions/s2/ws`, wideRead);
  const limited = await socket(`${A}/sessions/s1/ws`, limitedWrite);
  try {
    const adminGot = nextMessage(admin, 3000);
    const wideGot = nextMessage(wide, 3000);
    const limitedGot = framesFor(limited, 400);
    const r = await w.json("POST", `${A}/memories`, { content: "The user has a parrot." });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.deepEqual(await adminGot, { type: "memory", op: "created", memory: r.body });
    assert.deepEqual(await wideGot, { type: "memory", op: "created", memory: r.body });
    assert.deepEqual(await limitedGot, [], "the session-limited socket heard nothing");
    // It is alive, and the next frame it gets is the answer to its own ping (no memory frame queued).
    assert.deepEqual(await ask(limited, { type: "ping" }), { type: "pong" });
    // It does get its own session's frames.
    const own = nextMessage(limited, 3000);
    assert.equal((await w.json("POST", `${A}/sessions/s1/messages`, { message: user("m1", "hi") })).status, 201);
    const f = await own;
    assert.equal(f.type, "message");
    assert.equal(f.sessionId, "s1");
  } finally {
    for (const s of [admin, wide, limited]) s.close();
  }
});

test("a socket whose token expires gets unauthorized frames; the expired token opens nothing", async () => {
  const A = "/agents/expiring";
  const answer = await issue("expiring", { scope: "write", ttlSeconds: 1, sessions: ["s1"] });
  const expMs = Date.parse(answer.expiresAt);
  const ws = await socket(`${A}/sessions/s1/ws`, answer.token);
  try {
    const f = await ask(ws, { type: "append", message: user("m1", "in time") });
    assert.equal(f.type, "message", JSON.stringify(f));
    await sleep(Math.max(0, expMs - Date.now()) + 50);
    for (const frame of [{ type: "history" }, { type: "append", message: user("m2", "too late") }]) {
      const e = await ask(ws, frame);
      assert.equal(e.type, "error", JSON.stringify(e));
      assert.equal(e.code, "unauthorized", JSON.stringify(e));
    }
  } finally {
    ws.close();
  }
  assertUnauthorized(await as(answer.token, "GET", `${A}/sessions/s1/history`), "expired over HTTP");
  assert.equal(await refusedUpgrade(socket(`${A}/sessions/s1/ws`, answer.token)), 401);
  assert.deepEqual(await historyIds("expiring", "s1"), ["m1"]);
});

// ── Chat over SSE ────────────────────────────────────────────────────────────────────────────

test("an SSE chat turn works with a (session-limited) write token, not with a read one", async () => {
  const A = "/agents/chatter";
  const write = await mint("chatter", { scope: "write", ttlSeconds: 60, sessions: ["c1"] });
  const read = await mint("chatter", { scope: "read", ttlSeconds: 60, sessions: ["c1"] });
  model.reset();
  const sse = (token, sid, body) => w.fetch(`${A}/sessions/${sid}/chat`, {
    method: "POST", auth: token, body: JSON.stringify(body),
    headers: { "content-type": "application/json", accept: "text/event-stream" },
  });
  // Refused first: nothing reaches the model.
  for (const [token, sid, code] of [[read, "c1", "forbidden"], [write, "c2", "forbidden"]]) {
    const r = await sse(token, sid, { message: user("x1", "refused") });
    assert.equal(r.status, 403);
    assert.equal((await r.json()).error.code, code);
  }
  assert.equal(model.requests.length, 0);

  model.reply({ content: "Hello from the model.", pieces: ["Hello ", "from the model."] });
  const r = await sse(write, "c1", { message: user("u1", "hi") });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type") ?? "", /^text\/event-stream/);
  const events = (await r.text()).split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""))
    .map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
  assert.deepEqual(events.filter((e) => e.type === "delta").map((e) => e.text), ["Hello ", "from the model."]);
  const done = events.find((e) => e.type === "message");
  assert.ok(done, JSON.stringify(events));
  assert.equal(events.at(-1), "[DONE]");
  assert.equal(model.requests.length, 1);
  assert.match(JSON.stringify(model.requests[0].body.messages), /"hi"/);
  assert.deepEqual(await historyIds("chatter", "c1"), ["u1", done.message.id]);
  assert.deepEqual(await historyIds("chatter", "c2"), []);
});

// ── CORS ─────────────────────────────────────────────────────────────────────────────────────

const corsHeaderNames = (h) => [...h.keys()].filter((k) => k.startsWith("access-control-"));
const list = (v) => (v ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);

test("CORS: preflights of listed origins are answered without a token; every answer to them carries the headers", async () => {
  const preflight = (origin, method = "POST", path = "/agents/corsy/sessions/s1/messages") => w.fetch(path, {
    method: "OPTIONS", auth: false,
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": "authorization, content-type" },
  });
  let r = await preflight(ALLOWED);
  assert.equal(r.status, 204);
  assert.equal(await r.text(), "");
  assert.equal(r.headers.get("access-control-allow-origin"), ALLOWED);
  for (const m of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
    assert.ok(list(r.headers.get("access-control-allow-methods")).includes(m.toLowerCase()), `allow-methods names ${m}`);
  }
  const allowHeaders = list(r.headers.get("access-control-allow-headers"));
  for (const h of ["authorization", "content-type"]) assert.ok(allowHeaders.includes(h), `allow-headers names ${h}: ${allowHeaders}`);
  assert.ok(Number(r.headers.get("access-control-max-age")) > 0);
  assert.ok(list(r.headers.get("vary")).includes("origin"));
  // Any path, even an unknown agent route or the token route, and the origin's case does not matter.
  for (const path of ["/agents/corsy/tokens", "/agents/corsy/nowhere", "/healthz"]) {
    r = await preflight(ALLOWED, "POST", path);
    assert.equal(r.status, 204, path);
    await r.arrayBuffer();
  }
  r = await preflight(ALLOWED.toUpperCase(), "GET");
  assert.equal(r.status, 204);
  await r.arrayBuffer();

  // An origin not listed: 403 and no CORS headers.
  for (const origin of ["http://evil.example", `${ALLOWED}:8080`, "https://allowed.example", "null"]) {
    r = await preflight(origin);
    assert.equal(r.status, 403, origin);
    assert.equal((await r.json()).error.code, "forbidden");
    assert.deepEqual(corsHeaderNames(r.headers), [], `${origin}: no CORS headers`);
  }

  // Real requests from the listed origin: success and errors alike carry the headers.
  const token = await mint("corsy", { scope: "write", ttlSeconds: 60, sessions: ["s1"] });
  const checks = [
    ["201 append", await w.fetch("/agents/corsy/sessions/s1/messages", {
      method: "POST", auth: token, headers: { origin: ALLOWED, "content-type": "application/json" },
      body: JSON.stringify({ message: user("m1", "from a browser") }),
    }), 201],
    ["200 history", await w.fetch("/agents/corsy/sessions/s1/history", { auth: token, headers: { origin: ALLOWED } }), 200],
    ["401 bad token", await w.fetch("/agents/corsy/sessions/s1/history", { auth: `${token}x`, headers: { origin: ALLOWED } }), 401],
    ["401 no token", await w.fetch("/agents/corsy/sessions", { auth: false, headers: { origin: ALLOWED } }), 401],
    ["403 other session", await w.fetch("/agents/corsy/sessions/s2/history", { auth: token, headers: { origin: ALLOWED } }), 403],
    ["404 no route", await w.fetch("/nowhere", { auth: false, headers: { origin: ALLOWED } }), 404],
    ["404 agent route", await w.fetch("/agents/corsy/nowhere", { auth: token, headers: { origin: ALLOWED } }), 404],
    ["200 health", await w.fetch("/healthz", { auth: false, headers: { origin: ALLOWED } }), 200],
  ];
  for (const [what, resp, status] of checks) {
    assert.equal(resp.status, status, what);
    await resp.arrayBuffer();
    assert.equal(resp.headers.get("access-control-allow-origin"), ALLOWED, what);
    const expose = list(resp.headers.get("access-control-expose-headers"));
    for (const h of ["x-vercel-ai-ui-message-stream", "mcp-session-id"]) assert.ok(expose.includes(h), `${what}: expose ${h}`);
  }
  assert.equal(checks[2][1].headers.get("www-authenticate"), "Bearer", "the 401 keeps WWW-Authenticate");
  // A request from an origin not listed is answered (the browser hides it) without CORS headers.
  r = await w.fetch("/agents/corsy/sessions/s1/history", { auth: token, headers: { origin: "http://evil.example" } });
  assert.equal(r.status, 200);
  await r.arrayBuffer();
  assert.deepEqual(corsHeaderNames(r.headers), []);
  // A plain OPTIONS (no Access-Control-Request-Method) is no preflight: it needs a token.
  r = await w.fetch("/agents/corsy/sessions", { method: "OPTIONS", auth: false, headers: { origin: ALLOWED } });
  assert.equal(r.status, 401);
  await r.arrayBuffer();
  // A socket from the listed origin still opens (101 is left alone).
  const u = new URL("/agents/corsy/sessions/s1/ws", w.url);
  u.protocol = "ws:";
  u.searchParams.set("token", token);
  const ws = new WebSocket(u, { origin: ALLOWED });
  await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject); });
  assert.deepEqual(await ask(ws, { type: "ping" }), { type: "pong" });
  ws.close();
  assert.deepEqual(await historyIds("corsy", "s1"), ["m1"]);
});

test("without TOKEN_SECRET no token is issued (503) and none accepted; without CORS_ORIGINS no CORS headers", async () => {
  const bare = await startWorker();
  try {
    const r = await bare.json("POST", "/agents/bare/tokens", { scope: "read", ttlSeconds: 60 });
    assertError(r, 503, "not_configured");
    assert.match(r.body.error.message, /TOKEN_SECRET/);
    const forged = forge({ sub: "bare", scope: "write", iat: nowSec(), exp: nowSec() + 60 });
    const refused = await bare.json("GET", "/agents/bare/sessions", undefined, { auth: forged });
    assertError(refused, 401, "unauthorized");
    assert.equal(refused.headers.get("www-authenticate"), "Bearer");
    // CORS: a preflight is not answered as one, and no answer has CORS headers.
    let resp = await bare.fetch("/agents/bare/sessions", {
      method: "OPTIONS", auth: false, headers: { origin: ALLOWED, "access-control-request-method": "GET" },
    });
    assert.notEqual(resp.status, 204);
    await resp.arrayBuffer();
    assert.deepEqual(corsHeaderNames(resp.headers), []);
    for (const [path, auth, status] of [["/agents/bare/sessions", true, 200], ["/agents/bare/sessions", false, 401], ["/nowhere", false, 404]]) {
      resp = await bare.fetch(path, { auth, headers: { origin: ALLOWED } });
      assert.equal(resp.status, status, path);
      await resp.arrayBuffer();
      assert.deepEqual(corsHeaderNames(resp.headers), [], `${path} ${status}`);
    }
  } finally {
    await bare.stop();
  }
});

test("CORS_ORIGINS=* allows every origin", async () => {
  const star = await startWorker({ vars: { CORS_ORIGINS: "*", TOKEN_SECRET: SECRET } });
  try {
    let r = await star.fetch("/agents/star/sessions", {
      method: "OPTIONS", auth: false,
      headers: { origin: "http://anywhere.example", "access-control-request-method": "GET", "access-control-request-headers": "authorization" },
    });
    assert.equal(r.status, 204);
    await r.arrayBuffer();
    assert.equal(r.headers.get("access-control-allow-origin"), "*");
    assert.ok(list(r.headers.get("access-control-allow-headers")).includes("authorization"));
    r = await star.fetch("/agents/star/sessions", { auth: false, headers: { origin: "http://anywhere.example" } });
    assert.equal(r.status, 401);
    await r.arrayBuffer();
    assert.equal(r.headers.get("access-control-allow-origin"), "*");
  } finally {
    await star.stop();
  }
});

test("Chromium: a page on a listed origin calls the Worker with a scoped token; an unlisted origin cannot", { timeout: 60_000 }, async (t) => {
  if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} is missing (scripts/setup.sh installs it)`);
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch (e) {
    return t.skip(`playwright-core is not installed: ${e.message}`);
  }
  const A = "browsed";
  const token = await mint(A, { scope: "write", ttlSeconds: 120, sessions: ["s1", "s2"] });
  const base = new URL(`/agents/${A}/sessions`, w.url).href;
  assert.notEqual(new URL(pages.listed.origin).port, w.url.port, "the page is on another origin");
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-features=LocalNetworkAccessChecks"],
  });
  try {
    const open = async (origin) => {
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => document.title === "ready", null, { timeout: 5000 });
      return page;
    };
    const call = (page, url, tok, method, body) =>
      page.evaluate(([u, k, m, b]) => window.callWorker(u, k, m, b ?? undefined), [url, tok, method, body ?? null]);

    // Listed: a preflighted POST with a JSON body, then GET history; the JSON answers are readable.
    const listed = await open(pages.listed.origin);
    assert.equal(await listed.evaluate(() => location.origin), pages.listed.origin);
    let r = await call(listed, `${base}/s1/messages`, token, "POST", { message: user("m1", "from another origin") });
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(r.status, 201, JSON.stringify(r));
    assert.equal(r.body.message.id, "m1");
    r = await call(listed, `${base}/s1/history`, token, "GET");
    assert.equal(r.status, 200, JSON.stringify(r));
    assert.deepEqual(r.body.messages.map((m) => [m.id, m.parts[0].text]), [["m1", "from another origin"]]);
    // Errors are readable too: a forbidden session, a bad token.
    r = await call(listed, `${base}/s3/history`, token, "GET");
    assert.deepEqual([r.ok, r.status, r.body?.error?.code], [true, 403, "forbidden"], JSON.stringify(r));
    r = await call(listed, `${base}/s1/history`, `${token}x`, "GET");
    assert.deepEqual([r.ok, r.status, r.body?.error?.code], [true, 401, "unauthorized"], JSON.stringify(r));

    // Not listed: the preflight is refused, fetch rejects with a TypeError, nothing is written.
    const unlisted = await open(pages.unlisted.origin);
    r = await call(unlisted, `${base}/s2/messages`, token, "POST", { message: user("x1", "from an unlisted origin") });
    assert.deepEqual([r.ok, r.name], [false, "TypeError"], JSON.stringify(r));
    r = await call(unlisted, `${base}/s1/history`, token, "GET");
    assert.deepEqual([r.ok, r.name], [false, "TypeError"], JSON.stringify(r));
    assert.deepEqual(await historyIds(A, "s2"), [], "the unlisted page wrote nothing");
    assert.deepEqual(await historyIds(A, "s1"), ["m1"]);
  } finally {
    await browser.close();
  }
});

// ── Regressions: each of these failed once (a revoked token's 401, socket tags that a session id
// could imitate, streamed chat skipping the Durable Object's token check) ─────────────────────

test("a revoked token's 401 carries WWW-Authenticate: Bearer, like every other 401", async () => {
  const t = await mint("revoked-header", { scope: "read", ttlSeconds: 60 });
  await sleep(5);
  assert.equal((await w.json("POST", "/agents/revoked-header/tokens/revoke", {})).status, 200);
  assertUnauthorized(await as(t, "GET", "/agents/revoked-header/sessions"), "revoked");
});

test("a session named \"agent\" gives a session-limited socket no memory frames", async () => {
  const A = "/agents/tagclash";
  const limited = await mint("tagclash", { scope: "read", ttlSeconds: 60, sessions: ["agent"] });
  const ws = await socket(`${A}/sessions/agent/ws`, limited);
  try {
    const got = framesFor(ws, 400);
    assert.equal((await w.json("POST", `${A}/memories`, { content: "An agent-wide secret." })).status, 201);
    assert.deepEqual(await got, [], "a token limited to session \"agent\" heard the agent's memory frames");
  } finally {
    ws.close();
  }
});

test("frames of a session named \"agent\" reach only that session's sockets", async () => {
  const A = "/agents/tagclash3";
  const ws = await w.webSocket(`${A}/sessions/other/ws`);
  try {
    const got = framesFor(ws, 400);
    assert.equal((await w.json("POST", `${A}/sessions/agent/messages`, { message: user("m1", "for session agent") })).status, 201);
    assert.deepEqual((await got).map((f) => f.sessionId), [], "a socket of session \"other\" got frames of session \"agent\"");
  } finally {
    ws.close();
  }
});

test("a read token limited to a session named like a token tag cannot write over its socket", async () => {
  const A = "/agents/tagclash2";
  const sid = "token:write:0:99999999999999";
  const read = await mint("tagclash2", { scope: "read", ttlSeconds: 60, sessions: [sid] });
  const ws = await socket(`${A}/sessions/${sid}/ws`, read);
  try {
    const f = await ask(ws, { type: "append", message: user("e1", "escalated") });
    assert.equal(f.type, "error", `a read token appended: ${JSON.stringify(f)}`);
    assert.equal(f.code, "forbidden");
  } finally {
    ws.close();
  }
  assert.deepEqual(await historyIds("tagclash2", sid), []);
});

test("a revoked write token cannot run an SSE chat turn", async () => {
  const A = "/agents/revoked-sse";
  const t = await mint("revoked-sse", { scope: "write", ttlSeconds: 60, sessions: ["c1"] });
  await sleep(5);
  assert.equal((await w.json("POST", `${A}/tokens/revoke`, {})).status, 200);
  assertError(await as(t, "POST", `${A}/sessions/c1/chat`, { message: user("u0", "json turn") }), 401, "unauthorized", "JSON chat");
  model.reset();
  model.reply({ content: "Should not be said." });
  const r = await w.fetch(`${A}/sessions/c1/chat`, {
    method: "POST", auth: t, body: JSON.stringify({ message: user("u1", "revoked but streaming") }),
    headers: { "content-type": "application/json", accept: "text/event-stream" },
  });
  const text = await r.text();
  assert.equal(r.status, 401, `streamed chat with a revoked token: HTTP ${r.status} ${text.slice(0, 200)}`);
  assert.equal(model.requests.length, 0, "the model was called");
  assert.deepEqual(await historyIds("revoked-sse", "c1"), [], "the turn was stored");
});
