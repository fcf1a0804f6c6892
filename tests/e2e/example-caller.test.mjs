// examples/caller: a TypeScript Worker that binds session-agent's SessionAgent class by
// script_name and calls it with the typed client @session-agent/client (clients/ts, given the
// DO stub). Bundles it with esbuild (the client's source comes in through the tsconfig's
// `paths`), runs both Workers in one workerd (Miniflare), and drives the caller over HTTP: what
// it appends is in the DO (seen through the front door too), users are isolated, and the DO's
// errors come back as the client's typed error code.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { BUILD, ROOT, workerOptions } from "./harness.mjs";

const TOKEN = "caller-e2e-token";
const built = existsSync(join(BUILD, "index.js"));
const skip = built ? false : "build/index.js is missing: run `bash scripts/build.sh` first";

let mf;
let caller;
let agent;

before(async () => {
  if (skip) return;
  // The example as wrangler would bundle it: TypeScript in, one ES module out.
  const out = await build({
    entryPoints: [join(ROOT, "examples/caller/src/index.ts")],
    bundle: true, write: false, format: "esm", platform: "neutral", target: "es2022",
    logLevel: "silent", metafile: true, absWorkingDir: ROOT,
  });
  // The client is bundled in from clients/ts/src, not left as an import.
  const inputs = Object.keys(out.metafile.inputs);
  assert.ok(inputs.includes("clients/ts/src/client.ts"), `bundled: ${inputs.join(", ")}`);
  assert.doesNotMatch(out.outputFiles[0].text, /^import\b/m);
  mf = new Miniflare({
    workers: [
      {
        name: "session-caller",
        modules: [{ type: "ESModule", path: "caller.mjs", contents: out.outputFiles[0].text }],
        compatibilityDate: "2026-04-01",
        // wrangler.toml's script_name binding: the class is defined by the other worker.
        durableObjects: { SESSION_AGENT: { className: "SessionAgent", scriptName: "session-agent" } },
        serviceBindings: { SESSION_AGENT_API: "session-agent" },
        bindings: { API_TOKEN: TOKEN },
      },
      workerOptions({ apiToken: TOKEN, vars: { TOKEN_SECRET: "caller-test-token-secret-caller-test" } }),
    ],
  });
  await mf.ready;
  caller = await mf.getWorker("session-caller");
  agent = await mf.getWorker("session-agent");
});
after(async () => { await mf?.dispose(); });

/** Calls the caller worker; returns {status, body}. */
async function call(method, path, body) {
  const r = await caller.fetch(`http://caller${path}`, { method, body });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}
const texts = (messages) => messages.map((m) => m.parts[0].text);

test("remember appends through the binding and the DO has it", { skip }, async () => {
  let r = await call("POST", "/remember?user=ada&session=trip", "I am going to Paris in May");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(texts(r.body.messages), ["I am going to Paris in May"]);
  r = await call("POST", "/remember?user=ada&session=trip", "Book a hotel near the Louvre");
  assert.deepEqual(texts(r.body.messages), ["I am going to Paris in May", "Book a hotel near the Louvre"]);
  const [first, second] = r.body.messages;
  assert.equal(first.role, "user");
  assert.match(first.id, /^[0-9a-f-]{36}$/);
  assert.notEqual(first.id, second.id);

  // Same Durable Object as session-agent's front door /agents/ada/...: idFromName("ada").
  const h = await agent.fetch("http://agent/agents/ada/sessions/trip/history", { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(h.status, 200);
  assert.deepEqual((await h.json()).messages, r.body.messages);

  // parent= branches: a reply to the first message makes a second child of it.
  r = await call("POST", `/remember?user=ada&session=trip&parent=${encodeURIComponent(first.id)}`, "Actually, Lyon");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(texts(r.body.messages), ["I am going to Paris in May", "Actually, Lyon"]);
});

test("recall searches across the user's sessions", { skip }, async () => {
  await call("POST", "/remember?user=ada&session=work", "The Paris office opens at nine");
  const r = await call("GET", "/recall?user=ada&q=paris");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.results.map((x) => x.sessionId).sort(), ["trip", "work"]);
  for (const hit of r.body.results) assert.match(hit.content, /Paris/);
  const one = await call("GET", "/recall?user=ada&q=paris&limit=1");
  assert.equal(one.body.results.length, 1);
});

test("two users are isolated", { skip }, async () => {
  await call("POST", "/remember?user=bob&session=trip", "Bob likes Rome");
  assert.deepEqual((await call("GET", "/recall?user=bob&q=paris")).body.results, []);
  assert.deepEqual((await call("GET", "/recall?user=ada&q=rome")).body.results, []);
  const bob = await call("GET", "/recall?user=bob&q=rome");
  assert.deepEqual(bob.body.results.map((x) => x.content), ["Bob likes Rome"]);
  // Same session id, different agent: separate histories.
  const r = await call("POST", "/remember?user=bob&session=trip", "and pasta");
  assert.deepEqual(texts(r.body.messages), ["Bob likes Rome", "and pasta"]);
});

test("sessions created through the client", { skip }, async () => {
  const r = await call("POST", "/sessions?user=cy&name=Groceries");
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.name, "Groceries");
  const m = await call("POST", `/remember?user=cy&session=${encodeURIComponent(r.body.id)}`, "milk");
  assert.deepEqual(texts(m.body.messages), ["milk"]);
});

test("the DO's errors surface as the typed error code", { skip }, async () => {
  // Unknown parent: the DO answers 404 not_found; the client throws SessionAgentError and the
  // caller maps it back to status + code.
  let r = await call("POST", "/remember?user=ada&session=trip&parent=no-such-message", "orphan");
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, "not_found");
  assert.equal(typeof r.body.error.message, "string");
  // A rejected request changes nothing.
  const h = await agent.fetch("http://agent/agents/ada/sessions/trip/history", { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.ok(!texts((await h.json()).messages).includes("orphan"));

  // Bad input the DO rejects: a non-numeric limit.
  r = await call("GET", "/recall?user=ada&q=paris&limit=lots");
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, "invalid_request");

  // The caller's own checks use the same shape.
  r = await call("GET", "/recall?q=paris");
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, "invalid_request");
  r = await call("GET", "/nope?user=ada");
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, "not_found");
});

test("POST /token hands a browser a scoped token for its user only, never the admin token", { skip }, async () => {
  const r = await call("POST", "/token?user=ada&session=trip");
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.deepEqual(Object.keys(r.body).sort(), ["agent", "expiresAt", "kind", "scope", "sessions", "token"]);
  assert.notEqual(r.body.token, TOKEN);
  const as = (path) => agent.fetch(`http://agent${path}`, { headers: { authorization: `Bearer ${r.body.token}` } });
  assert.equal((await as("/agents/ada/sessions/trip/history")).status, 200);
  assert.equal((await as("/agents/ada/sessions/work/history")).status, 403, "another session");
  assert.equal((await as("/agents/bob/sessions/trip/history")).status, 403, "another user");
  // The front door's refusal comes back typed too: a session id it does not accept.
  const bad = await call("POST", `/token?user=ada&session=${encodeURIComponent("no/slash")}`);
  assert.equal(bad.status, 400, JSON.stringify(bad.body));
  assert.equal(bad.body.error.code, "invalid_request");
});
