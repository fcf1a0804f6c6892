// Crash tests of the agent transfer (the rig: crash-rig.mjs; the other writes: crash.test.mjs).
// A big `POST /import` (sessions with oversize messages, so objects are put in R2 before the
// transaction, skills, a schedule and a choice of space), a memory space's `POST /import` (2,000
// memories with their versions and shared blocks: all there or none) and a `DELETE /` with `Confirm: erase` (an agent with many
// spilled objects) are killed at points spread over how long they take uncrashed: the import is
// then all there (its export byte-identical to the source's) or not at all, the erase's rows all
// gone or all there, and after the next write request the agent's `_spill/<agent>/` objects are
// exactly those its rows refer to and its `skills/<agent>/` ones exist only if it holds the data.
import { test } from "node:test";
import assert from "node:assert/strict";
import { useRig, state, tally, doRows, r2Keys, startKillable, TOKEN, call, crashAfter, text, count, swept } from "./crash-rig.mjs";

useRig();

// ── Agent transfer: POST /import and DELETE / (Confirm: erase) killed midway ─────────────────

/** SESSION_CONFIG of the transfer crashes: a skills block, so agents hold agent-scoped skills. */
const TRANSFER_CONFIG = { context: [{ label: "notes", kind: "writable" }, { label: "skills", kind: "skills" }] };
/** An assistant message with a tool output of `n` characters: one spilled object. */
const bigTool = (id, n) => ({ id, role: "assistant", parts: [
  { type: "text", text: `report ${id}` },
  { type: "dynamic-tool", toolName: "fetch", toolCallId: `call-${id}`, state: "output-available", input: {}, output: { body: "o".repeat(n) } }] });
/** A user message of `k` text parts of 5,000 characters: over the row limit by enough that
 * ~(k·5,000 − 1.8 MB)/4,750 parts are spilled, each to its own object. */
const manyParts = (id, k) => ({ id, role: "user", parts: Array.from({ length: k }, (_, j) => ({ type: "text", text: `${id} part ${j} `.padEnd(5000, "p") })) });

/** Restarts the runtime with the transfer config (once). */
async function transferRuntime() {
  if (state.vars.SESSION_CONFIG) return;
  state.vars = { ...state.vars, SESSION_CONFIG: JSON.stringify(TRANSFER_CONFIG) };
  await state.rt.kill();
  state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
}

/** GET /agents/{agent}/export: the NDJSON text. */
async function exportText(agent) {
  const r = await call("GET", "/export", undefined, {}, agent);
  assert.equal(r.status, 200, String(r.body).slice(0, 300));
  return typeof r.body === "string" ? r.body : JSON.stringify(r.body);
}

/** Fills `agent` with sessions, oversize messages (one or many objects each), skills and
 * memories; returns its export and what it holds in R2. */
async function buildSource(agent, { sessions, skills }) {
  const post = async (path, body) => {
    const r = await call("POST", path, body, {}, agent);
    assert.ok(r.status === 201 || r.status === 200, `POST ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  };
  for (const [sid, messages] of Object.entries(sessions)) {
    let parent = null;
    for (const m of messages) {
      await post(`/sessions/${sid}/messages`, { message: m, ...(parent ? { parentId: parent } : {}) });
      parent = m.id;
    }
  }
  for (let i = 0; i < skills; i++) {
    await post(`/sessions/${Object.keys(sessions)[0]}/tools/set_context`, { input: { label: "skills", content: `Skill number ${i}.`, metadata: { title: `skill ${i}`, description: `the ${i}th` } } });
  }
  await post("/memories", { content: `${agent} likes crash tests`, tags: ["t"] });
  const notes = await call("PUT", `/sessions/${Object.keys(sessions)[0]}/context/notes`, { content: `${agent}'s notes` }, {}, agent);
  assert.equal(notes.status, 200, JSON.stringify(notes.body));
  // What moves with an agent besides its sessions: a schedule (a week away: the alarm leaves it
  // alone here) and the admin's choice of space.
  await post("/schedules", { prompt: `${agent}'s weekly review`, every: 604_800 });
  const chosen = await call("PUT", "/space", { space: `${agent}-team` }, {}, agent);
  assert.equal(chosen.status, 200, JSON.stringify(chosen.body));
  const ndjson = await exportText(agent);
  const keys = r2Keys(state.dir);
  const spilled = keys.filter((k) => k.startsWith(`_spill/${agent}/`)).length;
  const skillKeys = keys.filter((k) => k.startsWith(`skills/${agent}/`)).map((k) => k.slice(`skills/${agent}/`.length)).sort();
  assert.equal(skillKeys.length, skills);
  return { ndjson, spilled, skillKeys };
}

/** After a kill and restart: one write request to `agent` (its sweep, once the answer is out), then what it holds in R2
 * is exactly what its rows refer to: every `_spill/<agent>/` object referenced by a spill row
 * (`spilled` of them when it holds the data, none otherwise), its `skills/<agent>/` objects
 * `skillKeys` when it holds the data, none otherwise; nothing pending, no garbage anywhere. */
function checkObjects(kind, agent, holds, { spilled, skillKeys }) {
  return async () => {
    const r = await call("POST", "/sessions/after-crash/messages", { message: text(`w-${Date.now()}`, "user", "a write") }, {}, agent);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await swept();
    const referenced = new Set(doRows(state.dir, "SELECT key FROM spills").map((r) => r[0]));
    const keys = r2Keys(state.dir);
    const own = keys.filter((k) => k.startsWith(`_spill/${agent}/`));
    const orphans = keys.filter((k) => k.startsWith("_spill/") && !referenced.has(k));
    tally[kind].orphans.push(orphans.length);
    assert.deepEqual(orphans, [], "no spilled object without a row that refers to it");
    assert.equal(own.length, holds ? spilled : 0, `${agent}: spilled objects`);
    const skills = keys.filter((k) => k.startsWith(`skills/${agent}/`)).map((k) => k.slice(`skills/${agent}/`.length)).sort();
    assert.deepEqual(skills, holds ? skillKeys : [], `${agent}: skills in R2`);
    const pending = doRows(state.dir, "SELECT key FROM spill_pending").length;
    const garbage = doRows(state.dir, "SELECT key FROM spill_garbage").length;
    assert.equal(pending + garbage, 0, "nothing pending or waiting for the sweep");
  };
}

/** Objects the start-up recovery and earlier sweeps left for the next sweep (a kill mid-write). */
const leftForSweep = () => doRows(state.dir, "SELECT count(*) FROM spill_garbage").reduce((n, r) => n + r[0], 0);

/** An export without its skill records (and their count): the rows only. */
const rowsOnly = (ndjson) => ndjson.split("\n").filter((l) => l && !l.startsWith('{"kind":"skill"'))
  .map((l) => (l.startsWith('{"kind":"end"') ? l.replace(/,"skills":\d+/, "") : l)).join("\n");

/** Delays (ms): `fractions` of a request that takes `total` ms uncrashed. */
const spread = (total, fractions) => fractions.map((f) => Math.max(3, Math.round(f * total)));

test("killed mid-import: an agent import is there whole or not at all, and leaves no object behind", { timeout: 300_000 }, async () => {
  await transferRuntime();
  const source = await buildSource("import-src", {
    sessions: {
      a: [text("a1", "user", "first"), bigTool("a2", 2_000_000)],
      b: [text("b1", "user", "second"), manyParts("b2", 390)],
      c: [bigTool("c1", 1_900_000), bigTool("c2", 1_850_000), text("c3", "user", "third")],
      d: [text("d1", "user", "fourth"), text("d2", "assistant", "small")],
    },
    skills: 3,
  });
  assert.ok(source.spilled >= 20, `objects to put before the transaction: ${source.spilled}`);
  const empty = await exportText("import-nobody");
  const post = (agent) => () => call("POST", "/import", source.ndjson, { "content-type": "application/x-ndjson" }, agent);
  // How long an import takes here, to kill at points spread over it.
  const t0 = Date.now();
  const cal = await post("import-cal")();
  const took = Date.now() - t0;
  assert.equal(cal.status, 201, JSON.stringify(cal.body));
  assert.equal(await exportText("import-cal"), source.ndjson);
  tally.import = { kills: 0, committed: 0, absent: 0, orphans: [], staged: 0, ms: took };
  // Early kills land while the body is read or the objects are put, late ones around the commit.
  for (const [i, ms] of spread(took, [0.05, 0.25, 0.5, 0.75, 0.9, 1, 1.15, 1.5]).entries()) {
    const agent = `import-${i}`;
    const seen = await crashAfter(ms, post(agent));
    const now = await exportText(agent);
    const whole = now === source.ndjson;
    // Not there: nothing, not even the skills put before the kill (pending, so never listed, and
    // deleted by the next sweep: checkObjects checks they are gone after it).
    assert.ok(whole || now === empty, `after a kill at ${ms} ms the import is partly there:\n${now.slice(0, 600)}`);
    if (seen?.status === 201) assert.ok(whole, "an import the client was told is stored, is stored");
    if (whole) {
      const m = await call("GET", "/sessions/b/messages/b2", undefined, {}, agent);
      assert.deepEqual(m.body, manyParts("b2", 390), "the message of many spilled parts reads back whole");
    } else {
      assert.deepEqual((await call("GET", "/sessions", undefined, {}, agent)).body.sessions, []);
    }
    if (leftForSweep() > 0) tally.import.staged += 1;
    count("import", whole);
    await checkObjects("import", agent, whole, source)();
  }
});

/** The agent the erase crashes copy (by import), its export, and how long an erase takes. */
let eraseSetup = null;
async function eraseSource() {
  if (eraseSetup) return eraseSetup;
  await transferRuntime();
  const source = await buildSource("erase-src", {
    sessions: {
      a: [text("a1", "user", "first"), manyParts("a2", 380)],
      b: [manyParts("b1", 380), bigTool("b2", 1_900_000)],
      c: [manyParts("c1", 380)],
    },
    skills: 5,
  });
  // Many objects, but no more than one sweep (100) deletes after a crash.
  assert.ok(source.spilled >= 40 && source.spilled + source.skillKeys.length <= 100, `spilled: ${source.spilled}`);
  const empty = await exportText("erase-nobody");
  const fill = async (agent) => {
    const r = await call("POST", "/import", source.ndjson, { "content-type": "application/x-ndjson" }, agent);
    assert.equal(r.status, 201, JSON.stringify(r.body));
  };
  const erase = (agent) => () => call("DELETE", "", undefined, { confirm: "erase" }, agent);
  await fill("erase-cal");
  const t0 = Date.now();
  const cal = await erase("erase-cal")();
  const took = Date.now() - t0;
  assert.equal(cal.status, 204, JSON.stringify(cal.body));
  assert.equal(await exportText("erase-cal"), empty);
  assert.equal(r2Keys(state.dir).filter((k) => k.startsWith("_spill/erase-cal/") || k.startsWith("skills/erase-cal/")).length, 0);
  eraseSetup = { source, empty, fill, erase, took };
  return eraseSetup;
}

test("killed mid-erase: an erase is complete or not started, and leaves no object behind", { timeout: 300_000 }, async () => {
  const { source, empty, fill, erase, took } = await eraseSource();
  tally.erase = { kills: 0, committed: 0, absent: 0, orphans: [], staged: 0, ms: took };
  // The rows go in one transaction early on; most of the request is deleting the objects.
  for (const [i, ms] of spread(took, [0.02, 0.06, 0.12, 0.25, 0.45, 0.65, 0.85, 1.2]).entries()) {
    const agent = `erase-${i}`;
    await fill(agent);
    const seen = await crashAfter(ms, erase(agent));
    const now = await exportText(agent);
    // All there or all gone (skills still in R2 for the sweep are no longer listed).
    const erased = now === empty;
    assert.ok(erased || now === source.ndjson, `after a kill at ${ms} ms the erase is half done:\n${now.slice(0, 600)}`);
    if (seen?.status === 204) assert.ok(erased, "an erase the client was told is done, is done");
    if (leftForSweep() > 0) tally.erase.staged += 1;
    count("erase", erased);
    await checkObjects("erase", agent, !erased, source)();
  }
  // The source agent was never touched.
  assert.equal(await exportText("erase-src"), source.ndjson);
});

test("after an erase killed mid-sweep, the erased skills are gone and a skill written again under the same key stays", {
  timeout: 120_000,
}, async (t) => {
  const { source, empty, fill, erase, took } = await eraseSource();
  // Kill erases until one stops after its transaction with skills left for the sweep.
  tally["erase-skills"] = { kills: 0, committed: 0, absent: 0, orphans: [] };
  let agent = null;
  let key = null;
  for (const [i, ms] of spread(took, [0.15, 0.25, 0.35, 0.2, 0.3, 0.1]).entries()) {
    const a = `erase-skills-${i}`;
    await fill(a);
    await crashAfter(ms, erase(a));
    await exportText(a); // starts the object
    const waiting = doRows(state.dir, "SELECT key FROM spill_garbage").map((r) => r[0]).filter((k) => k.startsWith(`skills/${a}/`));
    if (waiting.length) { agent = a; key = waiting.sort()[0].slice(`skills/${a}/`.length); break; }
    await checkObjects("erase-skills", a, rowsOnly(await exportText(a)) !== rowsOnly(empty), source)();
  }
  if (!agent) return t.skip("no kill landed between the erase's commit and its sweep this time");
  const listed = await exportText(agent);
  // The model writes a skill of the same title again (so the same key), before any sweep ran.
  const r = await call("POST", "/sessions/again/tools/set_context", { input: { label: "skills", content: "Written again.", metadata: { title: key.replace("-", " ") } } }, {}, agent);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.output, `Indexed "${key}" in skills.`);
  const kept = r2Keys(state.dir).filter((k) => k.startsWith(`skills/${agent}/`));
  // Clean up whatever happens: one more write sweeps the rest.
  await call("POST", "/sessions/again/messages", { message: text("clean", "user", "sweep") }, {}, agent);
  assert.deepEqual(kept, [`skills/${agent}/${key}`], "the skill written after the erase is kept by the sweep");
  assert.equal(listed, empty, "an erased agent's export lists no skill, even before the sweep");
});

// ── A memory space's import killed midway ─────────────────────────────────────────────────────

/** The space API of the runtime with the admin token: {status, body}. */
async function spaceCall(method, space, path, body, headers = {}) {
  const init = { method, headers: { authorization: `Bearer ${TOKEN}`, ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers["content-type"] ??= "application/json";
  }
  const r = await fetch(new URL(`/spaces/${space}${path}`, state.rt.url), init);
  const t = await r.text();
  let json = null;
  try { json = t ? JSON.parse(t) : null; } catch { json = t; }
  return { status: r.status, body: json };
}
const spaceExport = async (space) => {
  const r = await spaceCall("GET", space, "/export");
  assert.equal(r.status, 200, String(r.body).slice(0, 300));
  return typeof r.body === "string" ? r.body : JSON.stringify(r.body);
};

test("killed mid-import: a space's import is there whole or not at all", { timeout: 300_000 }, async () => {
  await transferRuntime();
  const src = "space-src";
  for (let b = 0; b < 2; b++) {
    const memories = Array.from({ length: 1000 }, (_, i) => ({ content: `Fact ${b}-${i}: ${"the user likes long crash tests ".repeat(30)}`, tags: [`t${i % 7}`] }));
    const r = await spaceCall("POST", src, "/memories/batch", { memories });
    assert.equal(r.status, 201, JSON.stringify(r.body).slice(0, 300));
  }
  for (const label of ["plan", "notes", "gone"]) {
    assert.equal((await spaceCall("PUT", src, `/blocks/${label}`, { content: `the ${label}`, version: 0 })).status, 200);
  }
  assert.equal((await spaceCall("DELETE", src, "/blocks/gone")).status, 204);
  const ndjson = await spaceExport(src);
  const empty = await spaceExport("space-nobody");
  const post = (space) => () => spaceCall("POST", space, "/import", ndjson, { "content-type": "application/x-ndjson" });
  const t0 = Date.now();
  const cal = await post("space-cal")();
  const took = Date.now() - t0;
  assert.equal(cal.status, 201, JSON.stringify(cal.body));
  assert.equal(await spaceExport("space-cal"), ndjson);
  tally["space-import"] = { kills: 0, committed: 0, absent: 0, orphans: [], staged: 0, ms: took };
  for (const [i, ms] of spread(took, [0.1, 0.3, 0.5, 0.7, 0.85, 0.95, 1.05, 1.3]).entries()) {
    const space = `space-${i}`;
    const seen = await crashAfter(ms, post(space));
    const now = await spaceExport(space);
    const whole = now === ndjson;
    assert.ok(whole || now === empty, `after a kill at ${ms} ms the space's import is partly there:\n${now.slice(0, 600)}`);
    if (seen?.status === 201) assert.ok(whole, "an import the client was told is stored, is stored");
    count("space-import", whole);
  }
});
