// Schedules and the alarm against local workerd (Miniflare running the built Worker + DO, a
// scripted OpenAI-compatible model answering at once). Prints figures; asserts nothing; progress
// goes to stderr. Run: node bench/schedules.mjs (after `bash scripts/build.sh`), or `npm run
// bench`, which runs it after the others.
//
//  1. alarm lateness: BENCH_SCHEDULES one-shot schedules all due at the same moment; for each
//     run, startedAt - at (p50, p99, max); the alarm's wake-ups it took (the Worker's log line of
//     each wake-up) and runs per wake-up; whether runs overlapped (each starts after the one
//     before ended: one after another).
//  2. a scheduled run against a plain turn: POST /schedules/{id}/run (a fresh history: the
//     configured blocks, no session) against POST /sessions/{sid}/chat (JSON) with the same
//     model answer, BENCH_SCHEDULE_TURNS of each, interleaved: wall ms p50/p90.
//  3. maintenance per wake-up: BENCH_EXPIRING memories expiring at the same moment, purged by
//     the alarm (500 per wake-up at most): rows and ms of each wake-up, from its log line.
//
// Options (environment variables):
//   BENCH_SCHEDULES        schedules due together (default 100)
//   BENCH_SCHEDULE_TURNS   runs of each kind in part 2 (default 30)
//   BENCH_EXPIRING         memories expiring together in part 3 (default 1200)
//   BENCH_SCHEDULES_RUN=0  (read by bench/bench.mjs) skip this benchmark under `npm run bench`
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { pct, ms, log, progress as progressFor, timed, client } from "./lib.mjs";

const N = Number(process.env.BENCH_SCHEDULES ?? 100);
const TURNS = Number(process.env.BENCH_SCHEDULE_TURNS ?? 30);
const EXPIRING = Number(process.env.BENCH_EXPIRING ?? 1200);
const progress = progressFor("schedules");
const sleep = (t) => new Promise((r) => setTimeout(r, t));

const model = await startModel();
const dir = mkdtempSync(join(tmpdir(), "sa-bench-schedules-"));
// The Worker's console lines, for the alarm's own account of each wake-up.
const lines = [];
const w = await startWorker({
  persistDir: dir,
  apiToken: "bench",
  vars: {
    LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench-model",
    SESSION_CONFIG: JSON.stringify({ context: [{ label: "soul", kind: "readonly", content: "You are brief." }] }),
  },
  options: {
    handleRuntimeStdio: (stdout, stderr) => {
      let rest = "";
      stdout.on("data", (d) => {
        const parts = (rest + d).split("\n");
        rest = parts.pop();
        for (const l of parts) if (l.includes("SessionAgent alarm:")) lines.push({ at: Date.now(), line: l });
      });
      stderr.resume();
    },
  },
});
/** The wake-ups logged since `from` (ms): `{runs, purged, ms}` each. */
const wakeups = (from) => lines.filter((l) => l.at >= from).map(({ line }) => {
  const m = /alarm: (\d+) runs, (\d+) expired memories purged, (\d+) ms/.exec(line);
  return m ? { runs: +m[1], purged: +m[2], ms: +m[3] } : null;
}).filter(Boolean);

try {
  // 1. Lateness of N schedules due together.
  {
    const call = client(w, "late");
    await call("GET", "/schedules");
    const at = new Date(Date.now() + 5_000 + N * 15).toISOString();
    progress(`creating ${N} one-shots due at ${at}`);
    const ids = [];
    for (let i = 0; i < N; i++) ids.push(JSON.parse(await call("POST", "/schedules", { prompt: `task ${i}`, at })).id);
    // One short answer each (the scripted model streams its default answer word by word, 5 ms
    // apart: that would be most of a run).
    for (let i = 0; i < N; i++) model.reply({ content: "done" });
    const from = Date.now();
    const runs = [];
    for (const t0 = Date.now(); runs.length < N && Date.now() - t0 < 120_000;) {
      await sleep(500);
      runs.length = 0;
      for (const id of ids) {
        const r = JSON.parse(await call("GET", `/schedules/${id}/runs`)).runs[0];
        if (r && r.status !== "running") runs.push(r);
      }
      progress(`${runs.length}/${N} ran`);
    }
    const late = runs.map((r) => Date.parse(r.startedAt) - Date.parse(at));
    const sorted = [...runs].sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt));
    let overlaps = 0;
    for (let i = 1; i < sorted.length; i++) if (Date.parse(sorted[i].startedAt) < Date.parse(sorted[i - 1].endedAt)) overlaps++;
    const woke = wakeups(from).filter((x) => x.runs > 0);
    const per = woke.map((x) => x.runs);
    log(`schedules: ${runs.length}/${N} one-shots due at the same moment ran; lateness (startedAt - at) first ${ms(Math.min(...late))}, p50 ${ms(pct(late, 50))}, p99 ${ms(pct(late, 99))}, max ${ms(Math.max(...late))}; per run ${ms(pct(runs.map((r) => Date.parse(r.endedAt) - Date.parse(r.startedAt)), 50))} p50 (startedAt to endedAt)`);
    log(`schedules: ${woke.length} wake-ups ran them (runs per wake-up: ${per.join(" ")}; wake-up ms: ${woke.map((x) => x.ms).join(" ")}); runs overlapping the one before: ${overlaps} (one after another)`);
  }

  // 2. A scheduled run (fresh history) against a plain turn.
  {
    const call = client(w, "overhead");
    const s = JSON.parse(await call("POST", "/schedules", { prompt: "Say hi.", every: 86_400 }));
    const sched = [];
    const turn = [];
    for (let i = 0; i < TURNS; i++) {
      model.reply({ content: "hi" });
      sched.push((await timed(() => call("POST", `/schedules/${s.id}/run`)))[0]);
      model.reply({ content: "hi" });
      const message = { id: `u${i}`, role: "user", parts: [{ type: "text", text: "Say hi." }] };
      turn.push((await timed(() => call("POST", `/sessions/t${i}/chat`, { message })))[0]);
    }
    log(`schedules: a run by hand (fresh history) p50 ${ms(pct(sched, 50))}, p90 ${ms(pct(sched, 90))}; a plain turn (new session, JSON) p50 ${ms(pct(turn, 50))}, p90 ${ms(pct(turn, 90))} (${TURNS} each, model answering at once)`);
  }

  // 3. Expired memories purged by the alarm.
  {
    const call = client(w, "maint");
    const expiresAt = new Date(Date.now() + 4_000 + EXPIRING * 2).toISOString();
    for (let i = 0; i < EXPIRING; i += 500) {
      const memories = [];
      for (let j = i; j < Math.min(EXPIRING, i + 500); j++) memories.push({ content: `fact number ${j} about the bench`, expiresAt });
      await call("POST", "/memories/batch", { memories });
    }
    const from = Date.now();
    progress(`${EXPIRING} memories expire at ${expiresAt}`);
    for (const t0 = Date.now(); Date.now() - t0 < 60_000;) {
      await sleep(500);
      const done = wakeups(from).reduce((n, x) => n + x.purged, 0);
      if (done >= EXPIRING) break;
    }
    const woke = wakeups(from).filter((x) => x.purged > 0);
    const left = JSON.parse(await call("GET", "/memories?limit=1")).memories.length;
    log(`schedules: maintenance: ${EXPIRING} memories expiring together purged by ${woke.length} wake-ups (rows, ms each: ${woke.map((x) => `${x.purged} rows ${x.ms} ms`).join(", ")}); ${left} left listed`);
  }
} finally {
  await w.stop();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
