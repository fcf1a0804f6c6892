// The directory of agents in workerd: agents report themselves to their AgentDirectory shard
// after their writes (never on the answer path: the report is the alarm's), so after writes to
// three agents the directory lists exactly those; an erase removes one; a crash between a
// write and its report is repaired after the restart with no request to that agent; only the
// admin token reads it (a scoped token 403, none 401); pages with prefix and activity filters
// give every entry once; bad parameters are 400; usage per agent over a range after two turns
// (the scripted model over HTTP); the cross-agent export resumed from a cursor gives the rest
// exactly once.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker, eventually } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";
import { startKillable, doRows } from "./killable.mjs";

/** @type {import("./llm-server.mjs").LlmServer} */
let model;
let w;
const REPORT_MS = "200";
const vars = () => ({
  LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model", LLM_TIMEOUT_MS: "10000",
  TOKEN_SECRET: "directory-secret-directory-secret-0123456789", DIRECTORY_REPORT_MS: REPORT_MS,
});

before(async () => {
  model = await startModel();
  w = await startWorker({ vars: vars() });
});
after(async () => {
  await w?.stop();
  await model?.close();
});

const text = (id, role, t) => ({ id, role, parts: [{ type: "text", text: t }] });
const append = (agent, sid, id, t = "hello") =>
  w.json("POST", `/agents/${agent}/sessions/${sid}/messages`, { message: text(id, "user", t) });
const names = (page) => page.items.map((i) => i.name);
/** Every entry of the directory, page by page. */
async function all(client, query = "", limit = 100) {
  const out = [];
  let cursor = "";
  for (;;) {
    const r = await client.json("GET", `/directory?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.body.items.length <= limit);
    out.push(...r.body.items);
    if (!r.body.nextCursor) return out;
    cursor = r.body.nextCursor;
  }
}
const listed = async (prefix) => (await all(w, `&prefix=${prefix}`)).map((e) => e.name);

test("the directory lists exactly the agents that hold data; an erase removes one", async () => {
  for (const a of ["dir-a", "dir-b", "dir-c"]) assert.equal((await append(a, "s1", "m1")).status, 201);
  // A read only: nothing to report.
  assert.equal((await w.json("GET", "/agents/dir-d/sessions")).status, 200);
  await eventually("three agents listed", async () => (await listed("dir-")).length === 3, 10_000);
  assert.deepEqual(await listed("dir-"), ["dir-a", "dir-b", "dir-c"]);
  const [a] = await all(w, "&prefix=dir-a");
  assert.equal(a.kind, "agent");
  assert.equal(a.sessions, 1);
  assert.equal(a.messages, 1);
  assert.equal(a.memories, 0);
  assert.ok(a.sqliteBytes > 0, "the database's size");
  assert.equal(a.r2Bytes, 0);
  for (const k of ["createdAt", "lastActiveAt", "reportedAt"]) assert.ok(Date.parse(a[k]) > 0, k);
  // A later write moves lastActiveAt and the counts.
  assert.equal((await append("dir-a", "s2", "m2")).status, 201);
  const moved = await eventually("the new figures", async () => {
    const [e] = await all(w, "&prefix=dir-a");
    return e.sessions === 2 && e;
  }, 10_000);
  assert.ok(moved.lastActiveAt > a.lastActiveAt);
  const erase = await w.fetch("/agents/dir-b", { method: "DELETE", headers: { confirm: "erase" } });
  assert.equal(erase.status, 204);
  await eventually("the erased agent gone", async () => (await listed("dir-")).join() === "dir-a,dir-c", 10_000);
});

test("a refused request leaves no mark for the directory (its rolled-back writes included)", async () => {
  const a = "refused-a";
  assert.equal((await append(a, "s1", "m1")).status, 201);
  await eventually("the agent listed", async () => (await listed(a)).length === 1, 10_000);
  const mark = () => JSON.stringify(doRows(w.persistDir, `SELECT * FROM directory_report WHERE name = '${a}'`));
  const before = mark();
  assert.match(before, /refused-a/);
  const refused = [
    ["POST", `/agents/${a}/memories`, { content: "x", supersedes: ["mem_nope"] }],
    ["POST", `/agents/${a}/sessions/s1/chat`, { id: "s1", messages: [text("m9", "assistant", "last")], trigger: "submit-message" }],
    ["POST", `/agents/${a}/sessions/s1/messages`, { message: { id: "", role: "user", parts: [] } }],
    ["POST", `/agents/${a}/sessions/s1/messages/batch`, { messages: [text("n1", "user", "x"), { id: "n2" }] }],
  ];
  for (const [method, path, body] of refused) {
    const r = await w.json(method, path, body);
    assert.ok(r.status >= 400 && r.status < 500, `${path}: ${r.status}`);
  }
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(mark(), before);
});

test("only the admin token reads the directory: a scoped token is 403, none 401; bad parameters 400", async () => {
  const issued = await w.json("POST", "/agents/dir-a/tokens", { scope: "read", ttlSeconds: 600 });
  assert.equal(issued.status, 201, JSON.stringify(issued.body));
  for (const path of ["/directory", "/directory/usage", "/directory/export"]) {
    const scoped = await w.json("GET", path, undefined, { auth: issued.body.token });
    assert.equal(scoped.status, 403, path);
    assert.equal(scoped.body.error.code, "forbidden");
    const none = await w.json("GET", path, undefined, { auth: false });
    assert.equal(none.status, 401, path);
    assert.equal(none.body.error.code, "unauthorized");
    assert.equal((await w.json("GET", path, undefined, { auth: "wrong" })).status, 401);
    assert.equal((await w.json("POST", path, {})).status, 405);
  }
  for (const q of ["limit=0", "limit=1001", "limit=x", "kind=robot", "cursor=bogus", "cursor=agent:", "activeAfter=yesterday",
    "activeBefore=2026-13-45", "prefix=a%20b", "prefix=%FF"]) {
    const r = await w.json("GET", `/directory?${q}`);
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error.code, "invalid_request", q);
  }
  for (const q of ["from=nope", "to=2026-02-30T99:00:00Z", "from=2026-02-01T00:00:00.000Z&to=2026-01-01T00:00:00.000Z", "limit=5000"]) {
    assert.equal((await w.json("GET", `/directory/usage?${q}`)).status, 400, q);
  }
  assert.equal((await w.json("GET", "/directory/export?cursor=x")).status, 400);
});

test("pages with a prefix and activity filters give every entry once", async () => {
  const agents = Array.from({ length: 23 }, (_, i) => `page-${String(i).padStart(2, "0")}`);
  const t0 = new Date().toISOString();
  for (const a of agents.slice(0, 12)) assert.equal((await append(a, "s", "m")).status, 201);
  await new Promise((r) => setTimeout(r, 50));
  const mid = new Date().toISOString();
  for (const a of agents.slice(12)) assert.equal((await append(a, "s", "m")).status, 201);
  await eventually("23 agents listed", async () => (await listed("page-")).length === 23, 15_000);
  for (const limit of [1, 5, 7, 23, 100]) {
    const got = (await all(w, "&prefix=page-", limit)).map((e) => e.name);
    assert.deepEqual(got, agents, `limit ${limit}`);
  }
  const early = (await all(w, `&prefix=page-&activeAfter=${t0}&activeBefore=${mid}`, 4)).map((e) => e.name);
  assert.deepEqual(early, agents.slice(0, 12));
  const late = (await all(w, `&prefix=page-&activeAfter=${mid}`, 4)).map((e) => e.name);
  assert.deepEqual(late, agents.slice(12));
  assert.deepEqual((await all(w, "&prefix=page-&kind=space")).length, 0);
  const first = await w.json("GET", "/directory?prefix=page-&limit=5");
  assert.equal(first.body.nextCursor, "agent:page-04");
});

test("usage per agent over a range after two turns", async () => {
  const t0 = new Date().toISOString();
  for (const [a, n] of [["use-a", 2], ["use-b", 1]]) {
    for (let i = 0; i < n; i++) {
      model.reply({ content: `answer ${i}` });
      const r = await w.json("POST", `/agents/${a}/sessions/s${i}/chat`, { message: text(`u${i}`, "user", `question ${i}`) });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
  }
  const one = await w.json("GET", `/agents/use-a/usage?from=${t0}`);
  assert.equal(one.status, 200);
  assert.equal(one.body.turns, 2);
  assert.equal(one.body.inputTokens, 200);
  assert.equal(one.body.outputTokens, 40);
  assert.equal(one.body.bySession.length, 2);
  await eventually("both agents listed", async () => (await listed("use-")).length === 2, 10_000);
  const r = await w.json("GET", `/directory/usage?prefix=use-&from=${t0}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.items.map((i) => [i.name, i.turns, i.inputTokens, i.outputTokens]),
    [["use-a", 2, 200, 40], ["use-b", 1, 100, 20]]);
  assert.equal(r.body.nextCursor, null);
  const paged = await w.json("GET", `/directory/usage?prefix=use-&from=${t0}&limit=1`);
  assert.deepEqual(paged.body.items.map((i) => i.name), ["use-a"]);
  const rest = await w.json("GET", `/directory/usage?prefix=use-&from=${t0}&limit=1&cursor=${paged.body.nextCursor}`);
  assert.deepEqual(rest.body.items.map((i) => i.name), ["use-b"]);
  const before = await w.json("GET", `/directory/usage?prefix=use-&to=${t0}`);
  assert.deepEqual(before.body.items.map((i) => i.turns), [0, 0]);
});

/** The cross-agent export's lines, parsed. */
async function exportLines(query) {
  const r = await w.fetch(`/directory/export?${query}`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /ndjson/);
  return (await r.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

test("the cross-agent export, resumed from a cursor, gives the rest exactly once", async () => {
  const agents = ["exp-a", "exp-b", "exp-c", "exp-d"];
  for (const [i, a] of agents.entries()) {
    for (let k = 0; k <= i; k++) assert.equal((await append(a, `s${k}`, `m${k}`, `text of ${a} ${k}`)).status, 201);
  }
  await eventually("four agents listed", async () => (await listed("exp-")).length === 4, 10_000);
  const whole = await exportLines("prefix=exp-");
  const agentsOf = (lines) => [...new Set(lines.filter((l) => l.agent).map((l) => l.agent))];
  assert.deepEqual(agentsOf(whole), agents);
  const cursors = whole.filter((l) => l.cursor).map((l) => l.cursor);
  assert.deepEqual(cursors, agents.map((a) => `agent:${a}`));
  // Each agent's records are its own GET /export, whole (header first, end last).
  for (const a of agents) {
    const own = (await (await w.fetch(`/agents/${a}/export`)).text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const wrapped = whole.filter((l) => l.agent === a).map((l) => l.record);
    assert.equal(wrapped.length, own.length);
    assert.equal(wrapped.at(-1).kind, "end");
    assert.deepEqual(wrapped.map((r) => r.kind), own.map((r) => r.kind));
    assert.deepEqual(wrapped.filter((r) => r.kind === "message").map((r) => r.id ?? r.message?.id),
      own.filter((r) => r.kind === "message").map((r) => r.id ?? r.message?.id));
  }
  // Resumed after the second agent: the other two, once each.
  const rest = await exportLines(`prefix=exp-&cursor=${encodeURIComponent(cursors[1])}`);
  assert.deepEqual(agentsOf(rest), agents.slice(2));
  assert.deepEqual(rest.filter((l) => l.cursor).map((l) => l.cursor), cursors.slice(2));
  const tail = whole.slice(whole.findIndex((l) => l.cursor === cursors[1]) + 1);
  assert.equal(rest.length, tail.length);
  assert.deepEqual(rest.map((l) => l.agent ?? l.cursor), tail.map((l) => l.agent ?? l.cursor));
  assert.deepEqual(await exportLines(`prefix=exp-&cursor=${encodeURIComponent(cursors[3])}`), []);
});

test("a crash between a write and its report is repaired after the restart, with no request to the agent", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sa-directory-crash-"));
  const token = "crash-token";
  const kvars = { ...vars(), DIRECTORY_REPORT_MS: "1500" };
  let rt = await startKillable({ persistDir: dir, apiToken: token, vars: kvars });
  const api = async (method, path, body) => {
    const r = await fetch(new URL(path, rt.url), {
      method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const t = await r.text();
    return { status: r.status, body: t ? JSON.parse(t) : null };
  };
  try {
    const r = await api("POST", "/agents/crashed/sessions/s/messages", { message: text("m1", "user", "before the crash") });
    assert.equal(r.status, 201);
    // Killed before the report's delay is over: nothing reached the shard.
    await rt.kill();
    assert.deepEqual(doRows(dir, "SELECT name FROM directory_entries"), [], "no shard heard of it before the crash");
    assert.equal(doRows(dir, "SELECT count(*) FROM directory_report WHERE dirty_since IS NOT NULL")[0]?.[0], 1,
      "the mark committed with the write");
    rt = await startKillable({ persistDir: dir, apiToken: token, vars: kvars });
    const first = await api("GET", "/directory");
    assert.equal(first.status, 200);
    const entry = await eventually("the agent listed after the restart", async () => {
      const page = await api("GET", "/directory?prefix=crashed");
      return page.body.items.length === 1 && page.body.items[0];
    }, 20_000);
    assert.equal(entry.name, "crashed");
    assert.equal(entry.messages, 1);
    // The alarm started the object without telling it its name: it took the one its write
    // kept, so a token for the agent still opens it (and its data is keyed right).
    const issued = await api("POST", "/agents/crashed/tokens", { scope: "read", ttlSeconds: 600 });
    assert.equal(issued.status, 201);
    const r2 = await fetch(new URL("/agents/crashed/sessions/s/history", rt.url), { headers: { authorization: `Bearer ${issued.body.token}` } });
    assert.equal(r2.status, 200, await r2.clone().text());
    assert.equal((await r2.json()).messages.length, 1);
  } finally {
    await rt.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});
