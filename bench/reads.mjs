// Reads against the floor (imported by bench.mjs unless BENCH_READS=0; runs on its own too:
// `node bench/reads.mjs` after a build). Prints figures; asserts nothing.
//
// Every read workload's server CPU per operation (workerd's utime+stime from /proc, summed over
// blocks of requests; 10 ms ticks) beside the floor measured in the same run: an authenticated
// request to a Durable Object that holds nothing (`GET /agents/floor/sessions`). Workloads run
// in interleaved blocks, so drift (other load on the machine) spreads over all of them alike.
// Requests say `Accept-Encoding: identity`: local workerd gzips a response in the same process
// (about two thirds of a 500 KB history's CPU), which on Cloudflare the edge does outside the
// Worker; one workload shows that cost apart. The workloads:
//   - history of paths of 100 / 1,000 / 1,500 / 10,000 messages (300-600 bytes of text each),
//     and pages of 100 (`?limit=100`, the first and one in the middle) of the 10,000 path. A
//     history read again with nothing written in between comes from the DO's read cache; so
//     the 1,500 path is also read up to a different leaf each time (paths of 1,300 to 1,500
//     messages, each read once): the read that walks and assembles;
//   - the recent window of 64 KB of the 10,000 path;
//   - a turn's pair of requests on a path of 1,500 and more: an append, then the history up to
//     it; beside the append alone. The read after an append grows the kept history;
//   - search in one session of 10,000 messages, and across an agent of 100,000, for two words
//     found in about a fifth of the messages, and for a rarer word. A search asked again with
//     nothing written comes from the read cache too; so the two words are also asked in a
//     different letter case each time (the same search, found anew);
//   - the sessions list of the agent of 100,000 messages, and one of its sessions;
//   - `GET …/prompt` and `GET …/tools` of a session with context blocks and memory on;
//   - the cold first read: history of the 10,000 path right after workerd restarts.
// Options: BENCH_READS_PATHS (default 100,1000,1500,10000), BENCH_READS_SEARCH (default
// 10000,100000), BENCH_READS_SCALE (default 1: multiplies the requests per workload).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { WORDS, mulberry32, pct, ms, int, log, progress as progressFor, childWorkerds, cpuSeconds, client } from "./lib.mjs";

const PATHS = (process.env.BENCH_READS_PATHS ?? "100,1000,1500,10000").split(",").map(Number);
const SEARCH = (process.env.BENCH_READS_SEARCH ?? "10000,100000").split(",").map(Number);
const SCALE = Number(process.env.BENCH_READS_SCALE ?? 1);
const progress = progressFor("bench reads");
const rand = mulberry32(15);
const text = (i) => {
  const n = 50 + Math.floor(rand() * 50);
  const t = `${Array.from({ length: n }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ")} #${i}`.slice(0, 300 + Math.floor(rand() * 300));
  // The rare word of the search workloads: one message in 1,300.
  return i % 1300 === 7 ? `${t} zeppelin` : t;
};
const msg = (id, i) => ({ id, role: i % 2 ? "assistant" : "user", parts: [{ type: "text", text: text(i) }] });
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: "You are a careful assistant. ".repeat(20) },
    { label: "memory", kind: "writable", description: "Facts about the user", maxTokens: 2000 },
    { label: "notes", kind: "search", description: "Searchable notes" },
  ],
  memory: true,
};

async function seed(call, sid, n, from = 0) {
  for (let i = 0; i < n; i += 1000) {
    const messages = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) messages.push(msg(`${sid}-${from + j}`, j));
    await call("POST", `/sessions/${sid}/messages/batch`, { messages });
  }
}

const dir = mkdtempSync(join(tmpdir(), "sa-bench-reads-"));
const before = new Set(childWorkerds());
let w = await startWorker({ persistDir: dir, apiToken: "bench", vars: { SESSION_CONFIG: JSON.stringify(CONFIG) } });
try {
  let pid = childWorkerds().find((p) => !before.has(p)) ?? null;
  if (!pid) log("reads: workerd's /proc entry was not found: no CPU figures");
  const reads = client(w, "reads");
  const search = client(w, "search");
  progress(`seeding paths of ${PATHS.join(", ")} messages`);
  for (const n of PATHS) await seed(reads, `p${n}`, n);
  if (PATHS.includes(1500)) await seed(reads, "t1500", 1500);
  for (const n of SEARCH) {
    progress(`seeding ${int(n)} messages to search`);
    // One session of 10,000 at most; the rest in sessions of 10,000.
    for (let s = 0; s * 10_000 < n; s++) await seed(search, `s${n}-${s}`, Math.min(10_000, n - s * 10_000), s * 10_000);
  }
  await client(w, "floor")("GET", "/sessions");
  const big = Math.max(...PATHS);
  const q = "deploy database";
  const rare = "zeppelin";
  // Each request of the uncached workload reads up to the next leaf up the 1,500 path.
  let leaves = 0;
  const uncached = { toString: () => `/agents/reads/sessions/p1500/history?leaf=p1500-${1499 - (leaves++ % 200)}` };
  // Each request of the uncached searches asks the two words in the next letter case.
  let cases = 0;
  const recased = () => {
    const k = ++cases;
    return encodeURIComponent([...q].map((c, i) => ((k >> i) & 1 ? c.toUpperCase() : c)).join(""));
  };
  // A turn's pair on the t1500 path: one message appended at its end, then its history.
  let turns = 0;
  const append = async () => {
    const i = turns++;
    await reads("POST", "/sessions/t1500/messages", { message: msg(`t1500-turn-${i}`, i) });
  };
  const appendThenRead = async (headers) => {
    await append();
    return w.fetch("/agents/reads/sessions/t1500/history", { headers });
  };
  /** [name, path, requests per block, headers, alone]: `alone` ones run after the others. */
  const workloads = [
    ["floor: empty DO (GET /agents/floor/sessions)", "/agents/floor/sessions", 40],
    ...PATHS.map((n) => [`history, ${int(n)} messages`, `/agents/reads/sessions/p${n}/history`, Math.max(2, Math.round(4000 / n))]),
    ...PATHS.filter((n) => n === 1500).map(() =>
      ["history, 1,300 to 1,500 messages, each path read once (not cached)", uncached, 20, undefined, "alone"]),
    ...PATHS.filter((n) => n === 1500).map(() => ["append one message to a path of 1,500+ (POST …/messages)", append, 10]),
    ...PATHS.filter((n) => n === 1500).map(() =>
      ["append one message, then the history up to it (1,500+ messages: a turn's pair)", appendThenRead, 10]),
    [`history, first page of 100 of ${int(big)}`, `/agents/reads/sessions/p${big}/history?limit=100`, 40],
    [`history, page of 100 in the middle of ${int(big)}`, `/agents/reads/sessions/p${big}/history?limit=100&before=p${big}-${Math.floor(big / 2)}`, 40],
    ...PATHS.filter((n) => n === 1000).map((n) => [`history, ${int(n)} messages, gzip (local workerd compresses in-process)`, `/agents/reads/sessions/p${n}/history`, 4, { "accept-encoding": "gzip" }]),
    [`recent 64 KB of ${int(big)}`, `/agents/reads/sessions/p${big}/history/recent?maxBytes=65536`, 20],
    ...SEARCH.map((n) => n <= 10_000
      ? [`search, one session of ${int(n)}`, `/agents/search/sessions/s${n}-0/search?q=${encodeURIComponent(q)}`, 20]
      : [`search across sessions, ${int(n)} messages`, `/agents/search/search?q=${encodeURIComponent(q)}`, 10]),
    ...SEARCH.map((n) => n <= 10_000
      ? [`search, one session of ${int(n)}, each query asked once (not cached)`, { toString: () => `/agents/search/sessions/s${n}-0/search?q=${recased()}` }, 20, undefined, "alone"]
      : [`search across sessions, ${int(n)} messages, each query asked once (not cached)`, { toString: () => `/agents/search/search?q=${recased()}` }, 10, undefined, "alone"]),
    ...SEARCH.map((n) => n <= 10_000
      ? [`search for a rare word, one session of ${int(n)}`, `/agents/search/sessions/s${n}-0/search?q=${rare}`, 20]
      : [`search for a rare word across sessions, ${int(n)} messages`, `/agents/search/search?q=${rare}`, 20]),
    ...SEARCH.filter((n) => n > 10_000).map((n) =>
      [`sessions list of an agent of ${int(n)} messages in ${Math.ceil(n / 10_000)} sessions (GET /sessions)`, "/agents/search/sessions", 10]),
    ...SEARCH.filter((n) => n > 10_000).map(() =>
      ["one session of 10,000 messages (GET /sessions/{sid})", `/agents/search/sessions/s${SEARCH.find((n) => n > 10_000)}-0`, 20]),
    ["prompt (GET …/prompt)", "/agents/reads/sessions/p100/prompt", 40],
    ["tools (GET …/tools)", "/agents/reads/sessions/p100/tools", 40],
  ];
  const bytes = new Map();
  // Warm every route once (and see that it answers).
  const IDENTITY = { "accept-encoding": "identity" };
  // A workload's path is a URL (or makes one each time), or a function that runs the operation
  // and returns the last response.
  const run = (path, headers) => (typeof path === "function" ? path(headers) : w.fetch(`${path}`, { headers }));
  for (const [name, path, , headers = IDENTITY] of workloads) {
    const r = (await run(path, headers)) ?? new Response("");
    const body = await r.text();
    if (r.status >= 400) { log(`reads: ${name}: ${r.status} ${body.slice(0, 200)} (left out)`); bytes.set(name, -1); continue; }
    bytes.set(name, body.length);
  }
  const live = workloads.filter(([name]) => bytes.get(name) >= 0);
  const walls = new Map(live.map(([name]) => [name, []]));
  const cpu = new Map(live.map(([name]) => [name, 0]));
  const ROUNDS = Math.max(1, Math.round(5 * SCALE));
  // The uncached reads run apart, with the floor, after the others: what they put in the read
  // cache would push out what the others read again.
  const alone = live.filter((x) => x[4]);
  const groups = [live.filter((x) => !x[4]), alone.length ? [live[0], ...alone] : []];
  for (const group of groups) for (let round = 0; round < ROUNDS; round++) {
    progress(`round ${round + 1}/${ROUNDS} over ${group.length} workloads`);
    for (let k = 0; k < group.length; k++) {
      const [name, path, n, headers = IDENTITY] = group[(round + k) % group.length];
      const c0 = pid ? cpuSeconds(pid) : 0;
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await (await run(path, headers))?.arrayBuffer();
        walls.get(name).push(performance.now() - t0);
      }
      if (pid) cpu.set(name, cpu.get(name) + cpuSeconds(pid) - c0);
    }
  }
  const cpuMs = (name) => (cpu.get(name) * 1000) / walls.get(name).length;
  const floor = live[0][0];
  log(`── reads against the floor (server CPU per operation: workerd's utime+stime, 10 ms ticks summed over ${ROUNDS} interleaved blocks per workload) ──`);
  for (const [name] of live) {
    const x = walls.get(name);
    const c = pid ? `CPU ${cpuMs(name).toFixed(2)} ms/op (×${(cpuMs(name) / cpuMs(floor)).toFixed(2)} floor)` : "CPU n/a";
    const size = bytes.get(name) >= 1024 ? `${int(bytes.get(name) / 1024)} KB` : `${bytes.get(name)} B`;
    log(`${name}: ${c}; wall p50 ${ms(pct(x, 50))}, p95 ${ms(pct(x, 95))}; ${size}, ${int(x.length)} requests`);
  }

  // The cold first read: a fresh workerd (the DO's first request opens its SQLite and runs the
  // migration check), then history of the longest path.
  await w.restart();
  pid = childWorkerds().find((p) => !before.has(p)) ?? null;
  const c0 = pid ? cpuSeconds(pid) : 0;
  const t0 = performance.now();
  const r = await w.fetch(`/agents/reads/sessions/p${big}/history`, { headers: IDENTITY });
  const body = await r.text();
  const t = performance.now() - t0;
  const c = pid ? `; workerd CPU ${((cpuSeconds(pid) - c0) * 1000).toFixed(0)} ms (start-up included)` : "";
  log(`cold first read: history of ${int(big)} messages after a restart: ${ms(t)} wall (${int(body.length / 1024)} KB)${c}`);
} finally {
  await w.stop();
  rmSync(dir, { recursive: true, force: true });
}
