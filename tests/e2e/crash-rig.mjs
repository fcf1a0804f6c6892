// The rig of the crash tests (crash.test.mjs, crash-transfer.test.mjs): a killable runtime on a
// persisted directory, requests to it, a kill at a chosen moment followed by a restart, the
// invariants every crash must leave intact, and the tally printed at the end. Each test file runs
// in its own process, so the state below is that file's.
import { before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startKillable, doRows, r2Keys } from "./killable.mjs";
import { start as startModel } from "./llm-server.mjs";

export { doRows, r2Keys, startKillable };
export const TOKEN = "crash-token";
export const AGENT = "crash";
/** The runtime, its directory and its vars (a test may restart it with other vars). */
export const state = { rt: null, dir: null, vars: null, model: null };
export const tally = {};

/** Registers the file's before/after hooks: the model, the directory, the runtime. */
export function useRig() {
  before(async () => {
    state.model = await startModel();
    state.dir = mkdtempSync(join(tmpdir(), "sa-crash-"));
    state.vars = { LLM_PROVIDER: "openai", LLM_BASE_URL: state.model.baseUrl, LLM_MODEL: "crash-model", LLM_TIMEOUT_MS: "10000" };
    state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
  });
  after(async () => {
    await state.rt?.kill();
    await state.model?.close();
    if (state.dir) rmSync(state.dir, { recursive: true, force: true });
    for (const [kind, t] of Object.entries(tally)) {
      const extra = (t.ms === undefined ? "" : `; the uncrashed request took ${t.ms} ms, ${t.staged} kills left objects for the sweep`);
      console.log(`crash: ${kind}: ${t.kills} kills, ${t.committed} committed, ${t.absent} absent, orphans after each: ${t.orphans.join(" ")}${extra}`);
    }
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function call(method, path, body, headers = {}, agent = AGENT) {
  const init = { method, headers: { authorization: `Bearer ${TOKEN}`, ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers["content-type"] ??= "application/json";
  }
  const r = await fetch(new URL(`/agents/${agent}${path}`, state.rt.url), init);
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = text; }
  return { status: r.status, body: json };
}

/** Sends `request`, kills the runtime `ms` later, restarts it; resolves with what the client saw. */
export async function crashAfter(ms, request) {
  const seen = request().then((r) => r, () => null);
  await sleep(ms);
  await state.rt.kill();
  const outcome = await seen;
  state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
  return outcome;
}

/** Waits (at most 10 s) for the sweep a write request runs once its answer is out: until
 * nothing waits in `spill_garbage` (an object's row goes after the object). */
export async function swept() {
  const waiting = () => doRows(state.dir, "SELECT count(*) FROM spill_garbage").reduce((n, r) => n + r[0], 0);
  for (const t0 = Date.now(); waiting() > 0 && Date.now() - t0 < 10_000;) await sleep(20);
}

/** Invariants every crash must leave intact, read from the files themselves. */
export async function checkStore(kind) {
  // One write request: its sweep (after the answer) deletes what a crash left for garbage.
  assert.equal((await call("POST", "/sessions/sweep/messages", { message: text(`sweep-${Date.now()}`, "user", "sweep") })).status, 201);
  await swept();
  const ghosts = doRows(state.dir, "SELECT count(*) FROM messages_fts_docsize WHERE id NOT IN (SELECT seq FROM messages)");
  const unindexed = doRows(state.dir, "SELECT count(*) FROM messages WHERE seq NOT IN (SELECT id FROM messages_fts_docsize)");
  assert.equal(ghosts.reduce((n, r) => n + r[0], 0), 0, "no search row without its message");
  assert.equal(unindexed.reduce((n, r) => n + r[0], 0), 0, "no message without its search row");
  const referenced = new Set(doRows(state.dir, "SELECT key FROM spills").map((r) => r[0]));
  const orphans = r2Keys(state.dir).filter((k) => k.startsWith("_spill/") && !referenced.has(k));
  const pending = doRows(state.dir, "SELECT key FROM spill_pending").length;
  const garbage = doRows(state.dir, "SELECT key FROM spill_garbage").length;
  tally[kind].orphans.push(orphans.length);
  assert.deepEqual(orphans, [], "no spilled object without a row that refers to it");
  assert.equal(pending + garbage, 0, "nothing pending or waiting for the sweep");
}

export function text(id, role, t) {
  return { id, role, parts: [{ type: "text", text: t }] };
}

export function count(kind, committed) {
  tally[kind] ??= { kills: 0, committed: 0, absent: 0, orphans: [] };
  tally[kind].kills += 1;
  tally[kind][committed ? "committed" : "absent"] += 1;
}
