// Plain-word queries at growing store sizes (imported by bench.mjs unless BENCH_QUERIES=0; runs
// on its own too: `node bench/search.mjs` after a build). Prints figures; asserts nothing.
//
// Every query is three common words asked for the first time (the read cache cannot answer it):
// three distinct words of lib.mjs's vocabulary, each found in about half of the texts, so their
// OR matches about 85% of the store. For each size (default 1,000 / 10,000 / 100,000) one agent
// holds that many of each kind of text:
//   - messages: one session of N messages (300-600 bytes of text each), searched across sessions
//     (`GET /search`) and in the session (`GET /sessions/{sid}/search`, the session's token beside
//     the words);
//   - entries of a search block: N entries, searched with the `search_context` tool;
//   - memories: N memories (`maxMemories` raised), recalled with `GET /memories/search`.
// Server CPU per search is workerd's utime+stime from /proc (10 ms ticks) summed over interleaved
// blocks of requests and divided by their count; the floor is an authenticated request to a
// Durable Object that holds nothing (`GET /agents/floor/sessions`), measured the same way in
// the same blocks. Printed per size: CPU per search (and as a multiple of the floor), wall
// p50/p99; then per kind the ratio of the largest size to the smallest.
// Options: BENCH_QUERY_SIZES (default 1000,10000,100000), BENCH_QUERY_KINDS (default
// across,session,entries,memories), BENCH_QUERY_SCALE (default 1: multiplies the requests).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { WORDS, mulberry32, pct, ms, int, log, progress as progressFor, childWorkerds, cpuSeconds, client } from "./lib.mjs";

const SIZES = (process.env.BENCH_QUERY_SIZES ?? "1000,10000,100000").split(",").map(Number).sort((a, b) => a - b);
const KINDS = new Set((process.env.BENCH_QUERY_KINDS ?? "across,session,entries,memories").split(","));
const SCALE = Number(process.env.BENCH_QUERY_SCALE ?? 1);
const progress = progressFor("bench search");
const rand = mulberry32(21);
const words = (lo, hi) => Array.from({ length: lo + Math.floor(rand() * (hi - lo)) }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");
const text = (i) => `${words(50, 100)} #${i}`.slice(0, 300 + Math.floor(rand() * 300));
const CONFIG = { context: [{ label: "notes", kind: "search", description: "Searchable notes" }], memory: { maxMemories: Math.max(...SIZES) } };

/** Three distinct words of the vocabulary, a new combination each time (1 in ~280,000 repeats). */
const seen = new Set();
function novel() {
  for (;;) {
    const q = new Set();
    while (q.size < 3) q.add(WORDS[Math.floor(rand() * WORDS.length)]);
    const key = [...q].sort().join(" ");
    if (!seen.has(key)) { seen.add(key); return [...q].join(" "); }
  }
}

async function seed(call, n) {
  for (let i = 0; i < n; i += 1000) {
    const m = Math.min(n, i + 1000) - i;
    const idx = Array.from({ length: m }, (_, j) => i + j);
    if (KINDS.has("across") || KINDS.has("session")) {
      await call("POST", "/sessions/s/messages/batch",
        { messages: idx.map((j) => ({ id: `m${j}`, role: j % 2 ? "assistant" : "user", parts: [{ type: "text", text: text(j) }] })) });
    }
    if (KINDS.has("entries")) await call("POST", "/sessions/s/context/notes/entries", { entries: idx.map((j) => ({ key: `e${j}`, content: text(j) })) });
    if (KINDS.has("memories")) await call("POST", "/memories/batch", { memories: idx.map((j) => ({ content: `${words(8, 20)} #${j}` })) });
  }
}

const dir = mkdtempSync(join(tmpdir(), "sa-bench-search-"));
const before = new Set(childWorkerds());
const w = await startWorker({ persistDir: dir, apiToken: "bench", vars: { SESSION_CONFIG: JSON.stringify(CONFIG) } });
try {
  const pid = childWorkerds().find((p) => !before.has(p)) ?? null;
  if (!pid) log("search: workerd's /proc entry was not found: no CPU figures");
  for (const n of SIZES) {
    progress(`seeding ${int(n)} of each kind`);
    await seed(client(w, `q${n}`), n);
  }
  await client(w, "floor")("GET", "/sessions");
  const IDENTITY = { "accept-encoding": "identity" };
  const get = (path) => () => w.fetch(path, { headers: IDENTITY });
  const post = (path, body) => () => w.fetch(path, { method: "POST", headers: { ...IDENTITY, "content-type": "application/json" }, body: JSON.stringify(body) });
  const q = () => encodeURIComponent(novel());
  /** [kind, size, label, a function making one request] */
  const workloads = [["floor", 0, "floor: empty DO (GET /agents/floor/sessions)", get("/agents/floor/sessions")]];
  for (const n of SIZES) {
    const a = `/agents/q${n}`;
    if (KINDS.has("across")) workloads.push(["across", n, `messages across sessions, ${int(n)} (GET /search)`, () => get(`${a}/search?q=${q()}`)()]);
    if (KINDS.has("session")) workloads.push(["session", n, `messages in one session of ${int(n)} (GET …/search)`, () => get(`${a}/sessions/s/search?q=${q()}`)()]);
    if (KINDS.has("entries")) workloads.push(["entries", n, `search block of ${int(n)} entries (search_context)`, () => post(`${a}/sessions/s/tools/search_context`, { input: { label: "notes", query: novel() } })()]);
    if (KINDS.has("memories")) workloads.push(["memories", n, `memories, ${int(n)} (GET /memories/search)`, () => get(`${a}/memories/search?q=${q()}`)()]);
  }
  // Warm every route once (and see that it answers).
  const live = [];
  for (const wl of workloads) {
    const r = await wl[3]();
    const body = await r.text();
    if (r.status >= 400) log(`search: ${wl[2]}: ${r.status} ${body.slice(0, 200)} (left out)`);
    else live.push(wl);
  }
  const walls = new Map(live.map((x) => [x[2], []]));
  const cpu = new Map(live.map((x) => [x[2], 0]));
  const ROUNDS = Math.max(1, Math.round(8 * SCALE));
  const BLOCK = 25;
  for (let round = 0; round < ROUNDS; round++) {
    progress(`round ${round + 1}/${ROUNDS} over ${live.length} workloads`);
    for (let k = 0; k < live.length; k++) {
      const [, , name, make] = live[(round + k) % live.length];
      const c0 = pid ? cpuSeconds(pid) : 0;
      for (let i = 0; i < BLOCK; i++) {
        const t0 = performance.now();
        await (await make()).arrayBuffer();
        walls.get(name).push(performance.now() - t0);
      }
      if (pid) cpu.set(name, cpu.get(name) + cpuSeconds(pid) - c0);
    }
  }
  const cpuMs = (name) => (cpu.get(name) * 1000) / walls.get(name).length;
  const floor = live[0][2];
  log(`── plain-word queries (three common words, each asked once) by store size: server CPU per search (workerd's utime+stime, 10 ms ticks summed over ${ROUNDS} interleaved blocks of ${BLOCK}), wall p50 / p99 ──`);
  for (const [, , name] of live) {
    const x = walls.get(name);
    const c = pid ? `CPU ${cpuMs(name).toFixed(2)} ms (×${(cpuMs(name) / cpuMs(floor)).toFixed(2)} floor)` : "CPU n/a";
    log(`${name}: ${c}; wall p50 ${ms(pct(x, 50))}, p99 ${ms(pct(x, 99))}; ${int(x.length)} requests`);
  }
  if (pid && SIZES.length > 1) {
    const [lo, hi] = [SIZES[0], SIZES[SIZES.length - 1]];
    for (const kind of ["across", "session", "entries", "memories"]) {
      const a = live.find((x) => x[0] === kind && x[1] === lo);
      const b = live.find((x) => x[0] === kind && x[1] === hi);
      if (!a || !b) continue;
      log(`${kind}: ${int(hi)} / ${int(lo)}: CPU ×${(cpuMs(b[2]) / cpuMs(a[2])).toFixed(2)}, wall p50 ×${(pct(walls.get(b[2]), 50) / pct(walls.get(a[2]), 50)).toFixed(2)}`);
    }
  }
} finally {
  await w.stop();
  rmSync(dir, { recursive: true, force: true });
}
