// Schedules in workerd: the routes over HTTP with their errors (a refusal changes nothing), a
// one-shot firing through the real Durable Object alarm with the scripted model and recorded as
// a run, the `schedule` frame on an agent-wide socket, a run
// by hand and its 409, a schedule that came due while the runtime was down firing once after the
// restart (with no request to wake it), and a crash in the middle of a scheduled run: the run is failed or absent, never run
// twice, and the alarm still fires afterwards. A run in a session reads other sessions only when
// its schedule says `reach: "agent"`, whoever runs it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker, collect, eventually } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";
import { startKillable, doRows } from "./killable.mjs";

/** @type {import("./llm-server.mjs").LlmServer} */
let model;
let w;
const dir = mkdtempSync(join(tmpdir(), "sa-schedules-"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const vars = () => ({
  LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model", LLM_TIMEOUT_MS: "10000",
  TOKEN_SECRET: "schedules-test-token-secret-schedules-test",
});

before(async () => {
  model = await startModel();
  w = await startWorker({ persistDir: dir, vars: vars() });
});
after(async () => {
  await w?.stop();
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

const call = async (agent, method, path, body) => {
  const r = await w.json(method, `/agents/${agent}${path}`, body);
  return { status: r.status, body: r.body };
};
const inMs = (ms) => new Date(Date.now() + ms).toISOString();
const runsOf = async (agent, id) => (await call(agent, "GET", `/schedules/${id}/runs`)).body.runs;

test("schedules over HTTP: create, list, change, delete; bad input is 400 and changes nothing", async () => {
  const a = "sched-crud";
  const r = await call(a, "POST", "/schedules", { prompt: "Morning brief.", cron: "30 7 * * 1-5" });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const s = r.body;
  assert.equal(s.cron, "30 7 * * 1-5");
  assert.equal(new Date(s.nextRunAt).getUTCHours(), 7);
  const list = async () => (await call(a, "GET", "/schedules")).body.schedules;
  const before = await list();
  for (const body of [
    { prompt: "p", cron: "61 * * * *" },
    { prompt: "p", cron: "* * *" },
    { prompt: "p", at: "2020-01-01T00:00:00Z" },
    { prompt: "p", every: 59 },
    { prompt: "x".repeat(8001), every: 60 },
    { prompt: "p", at: inMs(60_000), every: 60 },
    { prompt: "p" },
    "not json",
  ]) {
    const bad = await call(a, "POST", "/schedules", body);
    assert.equal(bad.status, 400, `${JSON.stringify(body).slice(0, 80)} -> ${JSON.stringify(bad.body)}`);
    assert.equal(bad.body.error.code, "invalid_request");
  }
  assert.deepEqual(await list(), before, "nothing changed");
  const p = await call(a, "PATCH", `/schedules/${s.id}`, { paused: true, every: 3600 });
  assert.equal(p.status, 200);
  assert.equal(p.body.paused, true);
  assert.equal(p.body.every, 3600);
  assert.equal(p.body.cron, null);
  assert.equal((await call(a, "PATCH", `/schedules/${s.id}`, { every: 10 })).status, 400);
  assert.equal((await call(a, "GET", `/schedules/${s.id}`)).body.every, 3600);
  assert.equal((await call(a, "GET", `/schedules/${s.id}/run`)).status, 405);
  assert.equal((await call(a, "DELETE", `/schedules/${s.id}`)).status, 204);
  assert.equal((await call(a, "GET", `/schedules/${s.id}`)).status, 404);
});

test("a one-shot fires through the alarm, is recorded, and agent-wide sockets hear it", async () => {
  const a = "sched-alarm";
  // The object exists (a socket opens it) before the schedule is made.
  const ws = await w.webSocket(`/agents/${a}/sessions/s1/ws`);
  model.reply({ content: "Good morning from the alarm." });
  const calls = model.requests.length;
  const r = await call(a, "POST", "/schedules", { prompt: "Say good morning.", at: inMs(2_000) });
  assert.equal(r.status, 201);
  const id = r.body.id;
  const frames = await collect(ws, (f) => f.type === "schedule", 15_000);
  const frame = frames.find((f) => f.type === "schedule");
  assert.equal(frame.op, "run");
  assert.equal(frame.scheduleId, id);
  assert.equal(frame.run.status, "ok");
  assert.equal(frame.run.reply, "Good morning from the alarm.");
  assert.equal(model.requests.length, calls + 1, "one model call");
  const sent = model.requests.at(-1).body;
  assert.deepEqual(sent.messages.filter((m) => m.role === "user").length, 1, "a fresh history");
  const runs = await runsOf(a, id);
  assert.equal(runs.length, 1);
  assert.deepEqual(runs[0], frame.run);
  const after = (await call(a, "GET", `/schedules/${id}`)).body;
  assert.equal(after.nextRunAt, null);
  assert.ok(after.lastRunAt);
  assert.equal((await call(a, "GET", "/sessions")).body.sessions.length, 0, "no session written");
  ws.close();
});

test("a run in a session reaches other sessions only when its schedule says so, through the alarm and by hand", async () => {
  const a = "sched-reach";
  const text = (id, t) => ({ id, role: "user", parts: [{ type: "text", text: t }] });
  assert.equal((await call(a, "POST", "/sessions/alice-chat/messages", { message: text("a1", "my locker code is zebra 7731") })).status, 201);
  assert.equal((await call(a, "POST", "/sessions/bob-chat/messages", { message: text("b1", "hello, what is the locker code?") })).status, 201);
  const search = { toolCalls: [{ id: "c1", name: "session_search", arguments: { query: "locker code zebra" } }] };
  const seen = (from) => JSON.stringify(model.requests.slice(from).map((q) => q.body));
  // By default a run in bob-chat reaches bob-chat alone, as bob's own token would.
  model.reply(search, { content: "I cannot find it." });
  let from = model.requests.length;
  const s = (await call(a, "POST", "/schedules", { prompt: "Find the locker code.", at: inMs(1_500), sessionId: "bob-chat" })).body;
  assert.equal(s.reach, "session");
  await eventually("the alarm's run", async () => (await runsOf(a, s.id)).some((r) => r.status === "ok"), 15_000);
  assert.match(seen(from), /locker code\?/, "the run saw its own session");
  assert.doesNotMatch(seen(from), /7731/, "the run was shown alice-chat");
  // By hand with the admin token: still the schedule's reach, not the caller's.
  from = model.requests.length;
  model.reply(search, { content: "Still nothing." });
  assert.equal((await call(a, "POST", `/schedules/${s.id}/run`)).body.status, "ok");
  assert.doesNotMatch(seen(from), /7731/);
  const bob = await w.json("POST", `/agents/${a}/tokens`, { scope: "read", ttlSeconds: 600, sessions: ["bob-chat"] });
  const history = await w.json("GET", `/agents/${a}/sessions/bob-chat/history`, undefined, { auth: bob.body.token });
  assert.equal(history.status, 200);
  assert.doesNotMatch(JSON.stringify(history.body), /7731/, "alice-chat's words were copied where bob's token reads");
  // Said explicitly: every session.
  assert.equal((await call(a, "PATCH", `/schedules/${s.id}`, { reach: "agent" })).body.reach, "agent");
  assert.equal((await call(a, "PATCH", `/schedules/${s.id}`, { reach: "everyone" })).status, 400);
  from = model.requests.length;
  model.reply(search, { content: "It is zebra 7731." });
  assert.equal((await call(a, "POST", `/schedules/${s.id}/run`)).body.status, "ok");
  assert.match(seen(from), /7731/);
  // A fresh run: every session unless it says "session".
  const fresh = (await call(a, "POST", "/schedules", { prompt: "Find the locker code.", every: 3600 })).body;
  assert.equal(fresh.reach, "agent");
  const only = (await call(a, "POST", "/schedules", { prompt: "Find the locker code.", every: 3600, reach: "session" })).body;
  for (const [sch, finds] of [[fresh, true], [only, false]]) {
    from = model.requests.length;
    model.reply(search, { content: "done" });
    assert.equal((await call(a, "POST", `/schedules/${sch.id}/run`)).body.status, "ok");
    assert.equal(/7731/.test(seen(from)), finds, `a fresh run with reach ${sch.reach}`);
  }
});

test("a run by hand answers the run, and a second one while it goes is 409", async () => {
  const a = "sched-hand";
  const s = (await call(a, "POST", "/schedules", { prompt: "By hand.", every: 3600 })).body;
  model.reply({ content: "slowly", delayMs: 1500 });
  const first = call(a, "POST", `/schedules/${s.id}/run`);
  await eventually("the first run to start", async () => (await runsOf(a, s.id)).length === 1, 5_000);
  const second = await call(a, "POST", `/schedules/${s.id}/run`);
  assert.equal(second.status, 409, JSON.stringify(second.body));
  assert.equal(second.body.error.code, "conflict");
  const done = await first;
  assert.equal(done.status, 200);
  assert.equal(done.body.status, "ok");
  assert.equal(done.body.reply, "slowly");
  assert.ok(Date.parse(done.body.endedAt) - Date.parse(done.body.startedAt) >= 1000, "endedAt is when it ended");
  assert.equal((await call(a, "GET", `/schedules/${s.id}`)).body.nextRunAt, s.nextRunAt, "timing unchanged");
});

test("a schedule due while the runtime was down fires once after the restart", async () => {
  const a = "sched-down";
  const s = (await call(a, "POST", "/schedules", { prompt: "While you were away.", at: inMs(1_500) })).body;
  await w.stop();
  await sleep(2_500);
  model.reply({ content: "Back again." });
  const calls = model.requests.length;
  w = await startWorker({ persistDir: dir, vars: vars() });
  // The alarm survived the restart: the run happens without any request waking the object.
  await eventually("the missed run, with no request", () => doRows(dir, `SELECT status FROM schedule_runs WHERE schedule_id = '${s.id}'`).some((r) => r[0] === "ok"), 15_000);
  const runs = await eventually("the missed run", async () => {
    const r = await runsOf(a, s.id);
    return r.length === 1 && r[0].status !== "running" && r;
  }, 15_000);
  assert.equal(runs[0].status, "ok");
  assert.equal(runs[0].reply, "Back again.");
  await sleep(1_000);
  assert.equal((await runsOf(a, s.id)).length, 1, "once");
  assert.equal(model.requests.length, calls + 1);
});

// invariant 42 (docs/ARCHITECTURE.md): a run a crash cut short is marked failed when the object starts again.
test("a crash in the middle of a scheduled run: failed or absent, never run twice, the alarm goes on", async () => {
  const a = "sched-crash";
  const kdir = mkdtempSync(join(tmpdir(), "sa-schedules-crash-"));
  const token = "crash-token";
  let rt = await startKillable({ persistDir: kdir, apiToken: token, vars: vars() });
  const api = async (method, path, body) => {
    const r = await fetch(new URL(`/agents/${a}${path}`, rt.url), {
      method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: await r.json().catch(() => null) };
  };
  try {
    model.reset();
    model.reply({ content: "never seen", delayMs: 8_000 }, { content: "the later one ran" });
    const crashed = (await api("POST", "/schedules", { prompt: "Slow one.", at: inMs(1_500) })).body;
    const later = (await api("POST", "/schedules", { prompt: "Later one.", at: inMs(6_000) })).body;
    await eventually("the slow run to start", () => model.requests.length === 1, 10_000);
    await rt.kill();
    rt = await startKillable({ persistDir: kdir, apiToken: token, vars: vars() });
    const runs = (await api("GET", `/schedules/${crashed.id}/runs`)).body.runs;
    assert.ok(runs.length <= 1);
    if (runs.length === 1) {
      assert.equal(runs[0].status, "error");
      assert.match(runs[0].error, /interrupted/);
    }
    const ran = await eventually("the later schedule", async () => {
      const r = (await api("GET", `/schedules/${later.id}/runs`)).body.runs;
      return r.length === 1 && r[0].status !== "running" && r;
    }, 20_000);
    assert.equal(ran[0].reply, "the later one ran");
    assert.equal(model.requests.length, 2, "the crashed run was not run again");
    const prompts = model.requests.map((q) => JSON.stringify(q.body.messages));
    assert.equal(prompts.filter((p) => p.includes("Slow one.")).length, 1);
    // Summed over every database of the runtime (the agent's, and the directory shard it reported to).
    assert.equal(doRows(kdir, "SELECT count(*) FROM schedule_runs WHERE status IS NULL").reduce((n, r) => n + r[0], 0), 0);
  } finally {
    await rt.kill();
    rmSync(kdir, { recursive: true, force: true });
  }
});
