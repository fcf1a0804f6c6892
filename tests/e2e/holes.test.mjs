// End-to-end regressions of the holes an outside review found, in workerd through the front door:
// one agent reaching another's skills (also through `..` in the path), a token in a URL,
// `Upgrade: websocket` on the wrong request, methods workerd reads as GET, /healthz for every
// method, loosely decoded query strings, a NUL in a search, the page without a CSP, a JSON object
// SESSION_CONFIG silently ignored, and WebSocket frames over the runtime's limit.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startWorker, nextMessage } from "./harness.mjs";

const TOKEN = "holes-token";
// An object var, as wrangler allows it ([vars] SESSION_CONFIG = { context = [...] }).
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: "You are careful." },
    { label: "skills", kind: "skills", description: "Playbooks" },
    { label: "library", kind: "skills", prefix: "library/", scope: "shared" },
  ],
};
let w;
let bucket;

before(async () => {
  w = await startWorker({ apiToken: TOKEN, vars: { SESSION_CONFIG: CONFIG } });
  bucket = await w.mf.getR2Bucket("SKILLS_BUCKET");
  await bucket.put("skills/b/secret", "b's private playbook", { customMetadata: { description: "only for b" } });
  await bucket.put("library/deploy", "1. test 2. ship");
});
after(async () => { await w?.stop(); });

/** A request exactly as given (node:http does not normalize the path or the method). */
function raw(method, path, headers = {}, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: w.url.port, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (d) => { text += d; });
      res.on("end", () => {
        let json = null;
        try { json = JSON.parse(text); } catch { json = text; }
        resolve({ status: res.statusCode, headers: res.headers, body: json });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}
const auth = { authorization: `Bearer ${TOKEN}` };

test("SESSION_CONFIG given as a JSON object var configures the agent", async () => {
  const r = await raw("GET", "/agents/a/sessions/s/context", auth);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.blocks.map((b) => b.label), ["soul", "skills", "library"]);
});

test("an agent cannot add a block that lists, loads or writes another agent's skills", async () => {
  const add = (block) => raw("POST", "/agents/a/sessions/s/context", { ...auth, "content-type": "application/json" }, JSON.stringify(block));
  for (const block of [
    { label: "x", kind: "skills", prefix: "skills/b/", scope: "shared" },
    { label: "x", kind: "skills", prefix: "skills/b/", scope: "agent" },
    { label: "x", kind: "skills", prefix: "skills/", scope: "shared" },
    { label: "x", kind: "readonly", r2Key: "skills/b/secret" },
  ]) {
    const r = await add(block);
    assert.equal(r.status, 400, `${JSON.stringify(block)}: ${JSON.stringify(r.body)}`);
  }
  assert.equal((await raw("GET", "/agents/a/sessions/s", auth)).status, 404, "nothing was stored");
  const b = await raw("GET", "/agents/b/sessions/s/context/skills", auth);
  assert.equal(b.body.content, "- secret: only for b");
  const a = await raw("GET", "/agents/a/sessions/s/context/skills", auth);
  assert.equal(a.body.content, "");
});

test("`..` in the path: the checks use the agent that is actually served", async () => {
  // workerd resolves /agents/a/%2e%2e/b/... to /agents/b/...: that request is agent b's in
  // every respect, its skills scope included (it lists b's own skills, and writes land there).
  for (const path of ["/agents/a/%2e%2e/b/sessions/s/context/skills", "/agents/a/../b/sessions/s/context/skills",
    "/agents/a/x;/../../b/sessions/s/context/skills"]) {
    const r = await raw("GET", path, auth);
    assert.equal(r.status, 200, path);
    assert.equal(r.body.content, "- secret: only for b", path);
  }
  const r = await raw("POST", "/agents/a/%2e%2e/b/sessions/s/tools/set_context", { ...auth, "content-type": "application/json" },
    JSON.stringify({ input: { label: "skills", content: "written via ..", metadata: { title: "dotdot" } } }));
  assert.equal(r.body.output, 'Indexed "dotdot" in skills.');
  assert.ok(await bucket.get("skills/b/dotdot"), "the write went to the served agent b");
  assert.equal(await bucket.get("skills/a/dotdot"), null);
  assert.equal((await raw("GET", "/agents/a/sessions/s/context/skills", auth)).body.content, "", "agent a is untouched");
});

test("Upgrade: websocket is honoured only on an actual handshake of …/ws", async () => {
  const up = { ...auth, upgrade: "websocket", connection: "upgrade" };
  for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
    const r = await raw(method, "/agents/a/sessions/s/ws", up, method === "DELETE" ? undefined : "{}");
    assert.equal(r.status, 405, `${method}: ${JSON.stringify(r.body)}`);
    assert.equal(r.headers.allow, "GET");
    assert.equal(r.body.error.code, "method_not_allowed");
  }
  // Elsewhere the header would make workerd show a POST as a GET: refused, nothing created.
  const r = await raw("POST", "/agents/a/sessions", { ...up, "content-type": "application/json" }, JSON.stringify({ name: "x" }));
  assert.equal(r.status, 400);
  assert.deepEqual((await raw("GET", "/agents/a/sessions", auth)).body.sessions, []);
  // A real client still connects.
  const ws = await w.webSocket("/agents/a/sessions/s/ws");
  ws.send(JSON.stringify({ type: "ping" }));
  assert.deepEqual(await nextMessage(ws), { type: "pong" });
  ws.close();
});

test("?token= opens only the WebSocket handshake, never another route", async () => {
  for (const path of ["/agents/a/sessions?token=" + TOKEN, "/agents/a/sessions/s/history?token=" + TOKEN]) {
    assert.equal((await raw("GET", path)).status, 401, path);
    assert.equal((await raw("GET", path, { upgrade: "websocket" })).status, 400, path);
  }
  const ws = await w.webSocket("/agents/a/sessions/s/ws", { query: true });
  ws.send(JSON.stringify({ type: "ping" }));
  assert.deepEqual(await nextMessage(ws), { type: "pong" });
  ws.close();
  await assert.rejects(w.webSocket("/agents/a/sessions/s/ws", { auth: "wrong", query: true }), /401/);
});

test("methods are taken as sent: unknown ones are 405, /healthz and the page only read", async () => {
  const q = await raw("QUERY", "/agents/a/sessions", auth);
  assert.equal(q.status, 405);
  assert.equal(q.headers.allow, "GET, POST");
  const m = await raw("QUERY", "/agents/a/sessions/s/messages/m1", auth);
  assert.equal(m.status, 405);
  for (const path of ["/healthz", "/", "/console.js", "/console.css"]) {
    assert.equal((await raw("GET", path)).status, 200, path);
    assert.equal((await raw("HEAD", path)).status, 200, path);
    const p = await raw("POST", path, {}, "x");
    assert.equal(p.status, 405, path);
    assert.equal(p.headers.allow, "GET, HEAD", path);
  }
});

test("the page forbids everything but its own script, style and origin, and framing", async () => {
  for (const path of ["/", "/console.js", "/console.css"]) {
    const r = await raw("GET", path);
    const csp = r.headers["content-security-policy"];
    assert.match(csp, /default-src 'none'/, path);
    assert.match(csp, /script-src 'self'/, path);
    assert.match(csp, /frame-ancestors 'none'/, path);
    assert.equal(r.headers["x-frame-options"], "DENY");
    assert.equal(r.headers["x-content-type-options"], "nosniff");
  }
  const page = await raw("GET", "/");
  assert.doesNotMatch(page.body, /<script>|<style>|\son[a-z]+=/, "no inline script, style or handler");
});

test("query strings must be UTF-8 after decoding, on every route", async () => {
  for (const path of ["/agents/a/search?q=%FF%FE", "/agents/a/sessions/s/history?leaf=%C3", "/agents/a/sessions?x=%FF",
    "/agents/a/sessions/s/history?%FF=1"]) {
    const r = await raw("GET", path, auth);
    assert.equal(r.status, 400, path);
    assert.equal(r.body.error.code, "invalid_request");
  }
  assert.equal((await raw("GET", "/agents/a/search?q=caf%C3%A9", auth)).status, 200);
});

test("a NUL or other control character in a search is a word separator, not a 500", async () => {
  const post = (m) => raw("POST", "/agents/a/sessions/n/messages", { ...auth, "content-type": "application/json" }, JSON.stringify({ message: m }));
  assert.equal((await post({ id: "m1", role: "user", parts: [{ type: "text", text: "we deploy on friday" }] })).status, 201);
  for (const path of ["/agents/a/sessions/n/search?q=de%00ploy", "/agents/a/search?q=de%00ploy", "/agents/a/search?q=%00",
    "/agents/a/sessions/n/search?q=deploy%00friday"]) {
    const r = await raw("GET", path, auth);
    assert.equal(r.status, 200, `${path}: ${JSON.stringify(r.body)}`);
  }
  const hit = await raw("GET", "/agents/a/sessions/n/search?q=deploy%00friday", auth);
  assert.deepEqual(hit.body.results.map((h) => h.id), ["m1"]);
  const t = await raw("POST", "/agents/a/sessions/n/tools/session_search", { ...auth, "content-type": "application/json" },
    JSON.stringify({ input: { query: "de\u0000ploy" } }));
  assert.equal(t.status, 200);
  assert.doesNotMatch(t.body.output, /sql|Error/);
});

test("a WebSocket frame over our 16 MiB limit gets an error frame; the socket stays usable", async () => {
  const ws = await w.webSocket("/agents/a/sessions/big/ws");
  ws.send(JSON.stringify({ type: "ping", pad: "x".repeat(16 * 1024 * 1024) }));
  const e = await nextMessage(ws, 20_000);
  assert.equal(e.type, "error");
  assert.equal(e.code, "too_large");
  ws.send(JSON.stringify({ type: "ping" }));
  assert.deepEqual(await nextMessage(ws), { type: "pong" });
  ws.close();
});

test("every write reaches the session's sockets: update, delete, clear, context, manual compact", async () => {
  const ws = await w.webSocket("/agents/a/sessions/f/ws");
  const frames = [];
  ws.on("message", (d) => frames.push(JSON.parse(d.toString())));
  const send = (method, path, body) => raw(method, `/agents/a/sessions/f${path}`, { ...auth, "content-type": "application/json" },
    body === undefined ? undefined : JSON.stringify(body));
  const settle = async (n) => {
    for (let i = 0; i < 100 && frames.length < n; i++) await new Promise((r) => setTimeout(r, 20));
    return frames.splice(0).map((f) => (f.type === "status" ? `status:${f.phase}` : f.type));
  };
  await send("POST", "/messages", { message: { id: "m1", role: "user", parts: [{ type: "text", text: "hi" }] } });
  assert.deepEqual(await settle(2), ["message", "status:idle"]);
  await send("PUT", "/messages/m1", { message: { id: "m1", role: "user", parts: [{ type: "text", text: "edited" }] } });
  assert.deepEqual(await settle(2), ["message", "status:idle"]);
  await send("POST", "/tools/set_context", { input: { label: "skills", content: "a skill", metadata: { title: "t" } } });
  assert.deepEqual(await settle(1), ["context"]);
  await send("DELETE", "/messages/m1");
  assert.deepEqual(await settle(2), ["deleted", "status:idle"]);
  await send("DELETE", "/messages");
  assert.deepEqual(await settle(2), ["cleared", "status:idle"]);
  ws.close();
});

test("an answer the front door gives itself still reads the body, so a kept-alive connection survives", async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const on = (method, path, headers, body) => new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: w.url.port, method, path, headers, agent }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, socket: req.socket }));
    });
    req.on("error", reject);
    req.end(body);
  });
  const body = JSON.stringify({ name: "x".repeat(10_000) });
  const first = await on("POST", "/healthz", {}, body);
  const steps = [
    ["POST", "/agents/a/sessions", { authorization: "Bearer wrong" }, 401],
    ["POST", "/agents/bad%20name/sessions", {}, 400],
    ["GET", "/nowhere", {}, 404],
    // Every path outside /agents/ is the console's (static files): only read.
    ["POST", "/nowhere", {}, 405],
    ["POST", "/", {}, 405],
    ["GET", "/healthz", {}, 200],
  ];
  for (const [method, path, headers, status] of steps) {
    const r = await on(method, path, headers, method === "GET" ? undefined : body);
    assert.equal(r.status, status, `${method} ${path}`);
    assert.equal(r.socket, first.socket, `${method} ${path}: the same connection`);
  }
  agent.destroy();
});
