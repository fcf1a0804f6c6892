// End-to-end: metadata on sessions and memories, and the filters of lists, searches and
// `DELETE /memories`, in workerd through the front door (the Durable Object's own SQLite and its
// JSON functions: `json_type`, `json_extract`, `->`), over plain HTTP and through the typed
// client (clients/ts). Set on create, replaced by PATCH, copied by a fork; every filter; the
// text comparison of numbers and booleans; hostile input (huge metadata, 17 keys, nested values,
// unicode keys, `metadata.` without a key, repeated one-value filters, dates like `2026-13-40`),
// each a 400 that changes nothing; a token limited to some sessions sees no other session's
// metadata. Mirrors tests/it/metadata.rs, which runs the same natively.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { ROOT, startWorker } from "./harness.mjs";

const run = promisify(execFile);
const PKG = join(ROOT, "clients", "ts");
const TOKEN = "metadata-test-token";
const SECRET = "e2e-metadata-secret-0123456789abcdef0123";
let w;
let lib;

before(async () => {
  await run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", PKG]);
  lib = await import(pathToFileURL(join(PKG, "dist/index.js")).href);
  w = await startWorker({ apiToken: TOKEN, vars: { TOKEN_SECRET: SECRET } });
});
after(async () => { await w?.stop(); });

/** Calls the API of `agent`: {status, body}. */
const call = async (agent, method, path, body) => {
  const r = await w.json(method, `/agents/${agent}${path}`, body);
  return { status: r.status, body: r.body };
};
const ok = async (promise, status = 200) => {
  const r = await promise;
  assert.equal(r.status, status, JSON.stringify(r.body));
  return r.body;
};
const refused = async (promise, why) => {
  const r = await promise;
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "invalid_request");
  assert.ok(r.body.error.message.includes(why), `${why}: ${r.body.error.message}`);
};
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const contents = (body) => (body.memories ?? body.results.map((h) => h.memory)).map((m) => m.content).sort();
/** What the agent holds, as the API shows it. */
const snapshot = async (agent) => JSON.stringify([
  await ok(call(agent, "GET", "/sessions")),
  await ok(call(agent, "GET", "/memories?limit=100")),
]);

test("sessions: metadata set on create, replaced by PATCH, copied by a fork, filtered by list and search", async () => {
  const A = "meta-sessions";
  const s = await ok(call(A, "POST", "/sessions", { name: "one", metadata: { plan: "pro", seats: 3.0, vip: true } }), 201);
  assert.deepEqual(s.metadata, { plan: "pro", seats: 3, vip: true });
  await ok(call(A, "POST", `/sessions/${s.id}/messages`, { message: user("m1", "deploy on friday") }), 201);
  await ok(call(A, "POST", "/sessions/other/messages", { message: user("m1", "deploy on monday") }), 201);
  assert.deepEqual((await ok(call(A, "GET", "/sessions/other"))).metadata, {});
  const fork = await ok(call(A, "POST", `/sessions/${s.id}/fork`, { atMessageId: "m1" }), 201);
  assert.deepEqual(fork.metadata, s.metadata);
  const idsOf = (body) => body.sessions.map((x) => x.id).sort();
  assert.deepEqual(idsOf(await ok(call(A, "GET", "/sessions?metadata.plan=pro"))), [fork.id, s.id].sort());
  assert.deepEqual(idsOf(await ok(call(A, "GET", "/sessions?metadata.seats=3&metadata.vip=true"))), [fork.id, s.id].sort());
  assert.deepEqual(idsOf(await ok(call(A, "GET", "/sessions?metadata.vip=1"))), []);
  const sessionsOf = (body) => [...new Set(body.results.map((h) => h.sessionId))].sort();
  assert.deepEqual(sessionsOf(await ok(call(A, "GET", "/search?q=deploy"))), ["other", fork.id, s.id].sort());
  assert.deepEqual(sessionsOf(await ok(call(A, "GET", "/search?q=deploy&metadata.plan=pro"))), [fork.id, s.id].sort());
  // PATCH replaces it whole (and the search kept before sees it at once).
  const p = await ok(call(A, "PATCH", "/sessions/other", { metadata: { plan: "pro" } }));
  assert.deepEqual([p.name, p.metadata], ["other", { plan: "pro" }]);
  assert.deepEqual(sessionsOf(await ok(call(A, "GET", "/search?q=deploy&metadata.plan=pro"))), ["other", fork.id, s.id].sort());
  assert.deepEqual((await ok(call(A, "PATCH", `/sessions/${fork.id}`, { name: "renamed" }))).metadata, s.metadata);
  await refused(call(A, "PATCH", `/sessions/${fork.id}`, {}), "new name, its new metadata, or both");
});

test("memories: every filter over HTTP, numbers and booleans compared as text", async () => {
  const A = "meta-memories";
  const store = (body) => ok(call(A, "POST", "/memories", body), 201);
  await store({ content: "Number thirty", tags: ["a", "b"], metadata: { n: 30, src: "crm" } });
  await store({ content: "String thirty", category: "daily", tags: ["b"], metadata: { n: "30" } });
  await store({ content: "Flag true", category: "conversation", sessionId: "s1", tags: ["c"], metadata: { flag: true } });
  await ok(call(A, "POST", "/memories/batch", { memories: [{ content: "Flag string", metadata: { flag: "true", "a.b-c_1": "x" } }] }), 201);
  const list = async (query) => contents(await ok(call(A, "GET", `/memories?${query}`)));
  assert.deepEqual(await list("metadata.n=30"), ["Number thirty", "String thirty"]);
  assert.deepEqual(await list("metadata.flag=true"), ["Flag string", "Flag true"]);
  assert.deepEqual(await list("metadata.n=30&metadata.src=crm"), ["Number thirty"]);
  assert.deepEqual(await list("metadata.a.b-c_1=x"), ["Flag string"]);
  assert.deepEqual(await list("category=daily,conversation"), ["Flag true", "String thirty"]);
  assert.deepEqual(await list("tag=a&tag=b"), ["Number thirty"]);
  assert.deepEqual(await list("anyTag=a&anyTag=c"), ["Flag true", "Number thirty"]);
  assert.deepEqual(await list("createdAfter=2000-01-01&createdBefore=2999-01-01T00:00:00Z&updatedAfter=2000-01-01"),
    ["Flag string", "Flag true", "Number thirty", "String thirty"]);
  assert.deepEqual(await list("createdAfter=2999-01-01"), []);
  assert.deepEqual(await list("sessionId=s1"), ["Flag true"]);
  const hits = await ok(call(A, "GET", "/memories/search?q=thirty&metadata.n=30&category=core"));
  assert.deepEqual(contents(hits), ["Number thirty"]);
  // DELETE /memories by the query's filters, then by a body's.
  assert.deepEqual(await ok(call(A, "DELETE", "/memories?metadata.flag=true&tag=c")), { deleted: 1 });
  // The body's metadata wins over every metadata.<key> of the query.
  assert.deepEqual(await ok(call(A, "DELETE", "/memories?metadata.n=31", { metadata: { n: 30 } })), { deleted: 2 });
  assert.deepEqual(await list(""), ["Flag string"]);
  // PATCH replaces it; the versions keep each.
  const [m] = (await ok(call(A, "GET", "/memories"))).memories;
  await ok(call(A, "PATCH", `/memories/${m.id}`, { metadata: {} }));
  const versions = (await ok(call(A, "GET", `/memories/${m.id}/history`))).versions;
  assert.deepEqual(versions.map((v) => v.metadata), [{ flag: "true", "a.b-c_1": "x" }, {}]);
});

test("hostile metadata and filters are 400 and change nothing", async () => {
  const A = "meta-hostile";
  const s = await ok(call(A, "POST", "/sessions", { name: "s", metadata: { keep: 1 } }), 201);
  const m = await ok(call(A, "POST", "/memories", { content: "Kept.", metadata: { keep: 1 } }), 201);
  const before = await snapshot(A);
  const seventeen = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i]));
  const bad = [
    [seventeen, "at most 16 keys"],
    [{ a: { b: 1 } }, "metadata.a is nested"],
    [{ a: [1] }, "metadata.a is nested"],
    [{ a: null }, "metadata.a is null"],
    [{ "clé": 1 }, "\"clé\""],
    [{ "a b": 1 }, "\"a b\""],
    [{ "": 1 }, "not a metadata key"],
    [{ s: "x".repeat(2_000_000) }, "longer than 512"],
    ["x", "must be an object"],
  ];
  for (const [metadata, why] of bad) {
    await refused(call(A, "POST", "/sessions", { name: "n", metadata }), why);
    await refused(call(A, "PATCH", `/sessions/${s.id}`, { metadata }), why);
    await refused(call(A, "POST", "/memories", { content: "New.", metadata }), why);
    await refused(call(A, "PATCH", `/memories/${m.id}`, { metadata }), why);
  }
  const many = Array.from({ length: 17 }, (_, i) => `metadata.k${i}=v`).join("&");
  const filters = [
    ["metadata.=x", "key \"\""],
    ["metadata.a%20b=x", "\"a b\""],
    ["metadata.%F0%9F%98%80=x", "not a metadata key"],
    ["metadata.k=", "must be a value of 1-512"],
    [`metadata.k=${"v".repeat(600)}`, "must be a value of 1-512"],
    [many, "at most 16 metadata.<key> filters"],
    ["createdAfter=2026-13-40", "createdAfter must be an ISO-8601"],
    ["updatedBefore=2026-02-30T00:00:00Z", "updatedBefore must be"],
    ["createdAfter=2026-01-01&createdAfter=2026-01-02", "given more than once"],
    ["sessionId=a&sessionId=b", "given more than once"],
    ["category=core,,daily", "category must be"],
    ["tag=", "tag must be a tag"],
  ];
  for (const [query, why] of filters) {
    await refused(call(A, "GET", `/memories?${query}`), why);
    await refused(call(A, "GET", `/memories/search?q=kept&${query}`), why);
    await refused(call(A, "DELETE", `/memories?${query}`), why);
  }
  for (const [query, why] of filters.slice(0, 6)) {
    await refused(call(A, "GET", `/sessions?${query}`), why);
    await refused(call(A, "GET", `/search?q=kept&${query}`), why);
  }
  await refused(call(A, "DELETE", "/memories", { metadata: { a: { b: 1 } } }), "metadata.a must be a string, a number or a boolean");
  await refused(call(A, "DELETE", "/memories", { tag: [1] }), "tag must be a string or an array of strings");
  assert.equal(await snapshot(A), before, "nothing changed");
});

test("the typed client: metadata and filters as objects", async () => {
  const agent = new lib.SessionAgentClient({ baseUrl: w.url, token: TOKEN }).agent("meta-client");
  const s = await agent.sessions.create({ name: "c", metadata: { userId: "u-42", plan: "pro" } });
  assert.deepEqual(s.metadata, { userId: "u-42", plan: "pro" });
  await agent.sessions.create({ name: "d", metadata: { plan: "free" } });
  assert.deepEqual((await agent.sessions.list({ metadata: { plan: "pro" } })).map((x) => x.id), [s.id]);
  const page = await agent.sessions.page({ limit: 1, metadata: { userId: "u-42" } });
  assert.deepEqual([page.sessions.map((x) => x.id), page.nextCursor], [[s.id], null]);
  const changed = await agent.session(s.id).update({ metadata: { plan: "free" } });
  assert.deepEqual(changed.metadata, { plan: "free" });
  assert.equal((await agent.sessions.list({ metadata: { plan: "pro" } })).length, 0);
  await agent.session(s.id).append(user("m1", "deploy the app"));
  assert.equal((await agent.search("deploy", { metadata: { plan: "free" } })).length, 1);
  assert.equal((await agent.search("deploy", { metadata: { plan: "pro" } })).length, 0);
  const mem = agent.memories;
  await mem.store({ content: "Prefers trains.", tags: ["travel", "eu"], metadata: { n: 30, vip: true } });
  await mem.store({ content: "Is vegetarian.", category: "daily", tags: ["food"], metadata: { n: "30" } });
  const names = (list) => list.map((m) => m.content).sort();
  assert.deepEqual(names((await mem.list({ metadata: { n: 30 } })).memories), ["Is vegetarian.", "Prefers trains."]);
  assert.deepEqual(names((await mem.list({ metadata: { vip: true }, tag: ["travel", "eu"] })).memories), ["Prefers trains."]);
  assert.deepEqual(names((await mem.list({ category: ["daily", "conversation"] })).memories), ["Is vegetarian."]);
  assert.deepEqual(names((await mem.list({ anyTag: ["food", "nope"], createdAfter: "2000-01-01" })).memories), ["Is vegetarian."]);
  assert.deepEqual(names((await mem.recall("trains", { metadata: { vip: true } })).map((h) => h.memory)), ["Prefers trains."]);
  const e = await mem.list({ createdAfter: "2026-13-40" }).then(() => null, (err) => err);
  assert.ok(e instanceof lib.SessionAgentError && e.status === 400, String(e));
  assert.equal(await mem.forgetAll({ metadata: { n: 30 }, category: "daily" }), 1);
  assert.deepEqual(names((await mem.list()).memories), ["Prefers trains."]);
});

test("a token limited to one session sees and changes no other session's metadata", async () => {
  const A = "meta-limited";
  await ok(call(A, "POST", "/sessions/mine/messages", { message: user("m1", "my launch") }), 201);
  await ok(call(A, "POST", "/sessions/theirs/messages", { message: user("m1", "the launch code") }), 201);
  await ok(call(A, "PATCH", "/sessions/mine", { metadata: { owner: "me" } }));
  await ok(call(A, "PATCH", "/sessions/theirs", { metadata: { owner: "them", secret: "s3cr3t" } }));
  await ok(call(A, "POST", "/memories", { content: "Their note.", category: "conversation", sessionId: "theirs", metadata: { secret: "s3cr3t" } }), 201);
  const issued = await ok(call(A, "POST", "/tokens", { sessions: ["mine"], scope: "write", ttlSeconds: 600 }), 201);
  const as = async (method, path, body) => {
    const r = await w.json(method, `/agents/${A}${path}`, body, { auth: issued.token });
    return { status: r.status, body: r.body };
  };
  // Its own session, metadata included; PATCH of its own works.
  assert.deepEqual((await ok(as("GET", "/sessions/mine"))).metadata, { owner: "me" });
  assert.deepEqual((await ok(as("PATCH", "/sessions/mine", { metadata: { owner: "me", n: 1 } }))).metadata, { owner: "me", n: 1 });
  const before = await snapshot(A);
  // Everything that would show or change another session's metadata, or filter by it: 403,
  // and the answer names none of it.
  const refusedPaths = [
    ["GET", "/sessions/theirs"],
    ["GET", "/sessions"],
    ["GET", "/sessions?metadata.owner=them"],
    ["GET", "/search?q=launch&metadata.secret=s3cr3t"],
    ["GET", "/memories?sessionId=theirs"],
    ["GET", "/memories?metadata.secret=s3cr3t"],
    ["GET", "/memories/search?q=note&metadata.secret=s3cr3t"],
    ["DELETE", "/memories?sessionId=theirs"],
    ["DELETE", "/memories?metadata.secret=s3cr3t"],
    ["PATCH", "/sessions/theirs", { metadata: {} }],
    ["PATCH", "/sessions/theirs", { name: "taken" }],
    ["GET", "/sessions/theirs/export"],
  ];
  for (const [method, path, body] of refusedPaths) {
    const r = await as(method, path, body);
    assert.equal(r.status, 403, `${method} ${path}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "forbidden", `${method} ${path}`);
    const text = JSON.stringify(r.body);
    assert.ok(!text.includes("s3cr3t") && !text.includes("them"), `${method} ${path} leaks: ${text}`);
  }
  assert.equal(await snapshot(A), before, "nothing changed");
});
