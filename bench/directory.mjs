// The directory of agents against local workerd (Miniflare running the built Worker, its
// SessionAgent and AgentDirectory objects). Prints figures; asserts nothing; progress goes to
// stderr. Run: node bench/directory.mjs (after `bash scripts/build.sh`), or `npm run bench`,
// which runs it after the others.
//
//  1. the directory's cost per write: the same append requests to an agent with and without the
//     AGENT_DIRECTORY binding (two runtimes, interleaved blocks), p50/p90 wall ms, beside the
//     floor (an authenticated request to an empty DO) measured in the same run; and the alarm's
//     report (stats, the shard's write), from the agent's own log line, p50/p90.
//  2. listing BENCH_DIRECTORY_AGENTS (default 10,000) entries: the rows go in through the
//     shards' own report route (POST /report, 1,000 per request, straight to the shard through
//     Miniflare's namespace of AGENT_DIRECTORY: no agent needs to exist), then every page of
//     100 through the front door (16 shards asked in parallel, merged): p50/p90 per page, with
//     a prefix, and an activity filter.
//  3. the cross-agent export: BENCH_EXPORT_AGENTS agents (default 100) of BENCH_EXPORT_MESSAGES
//     messages (default 50) each, GET /directory/export whole: agents/s and MB/s, beside the
//     same agents' GET /export one after another from the client.
//
// Options (environment variables):
//   BENCH_DIRECTORY_WRITES  appends per runtime in part 1 (default 200)
//   BENCH_DIRECTORY_AGENTS  entries listed in part 2 (default 10000)
//   BENCH_EXPORT_AGENTS, BENCH_EXPORT_MESSAGES  part 3's agents and messages per agent
//   BENCH_DIRECTORY=0       (read by bench/bench.mjs) skip this benchmark under `npm run bench`
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { pct, ms, int, log, progress as progressFor, timed, client } from "./lib.mjs";

const WRITES = Number(process.env.BENCH_DIRECTORY_WRITES ?? 200);
const AGENTS = Number(process.env.BENCH_DIRECTORY_AGENTS ?? 10_000);
const EXPORT_AGENTS = Number(process.env.BENCH_EXPORT_AGENTS ?? 100);
const EXPORT_MESSAGES = Number(process.env.BENCH_EXPORT_MESSAGES ?? 50);
const progress = progressFor("directory");
const sleep = (t) => new Promise((r) => setTimeout(r, t));
const text = (id, t) => ({ id, role: "user", parts: [{ type: "text", text: t }] });

/** The shard of `kind:name`: FNV-1a modulo 16, as core::directory::shard_of. */
function shardOf(kind, name) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(`${kind}:${name}`)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h % 16;
}

const dirs = [];
/** A runtime; `reports` collects the agents' report times (their log line) when given. */
async function runtime({ directory, reports }) {
  const dir = mkdtempSync(join(tmpdir(), "sa-bench-directory-"));
  dirs.push(dir);
  const options = {};
  if (!directory) options.durableObjects = { SESSION_AGENT: { className: "SessionAgent", useSQLite: true } };
  if (reports) {
    options.handleRuntimeStdio = (stdout, stderr) => {
      let rest = "";
      stdout.on("data", (d) => {
        const parts = (rest + d).split("\n");
        rest = parts.pop();
        for (const l of parts) {
          const m = /directory report, (\d+) ms/.exec(l);
          if (m) reports.push(Number(m[1]));
        }
      });
      stderr.resume();
    };
  }
  return startWorker({ persistDir: dir, apiToken: "bench", vars: { DIRECTORY_REPORT_MS: "100" }, options });
}

const reports = [];
const w = await runtime({ directory: true, reports });
const bare = await runtime({ directory: false });
try {
  // 1. Cost per write, with and without the binding.
  {
    const withDir = client(w, "writer");
    const without = client(bare, "writer");
    const floor = client(w, "floor");
    await withDir("GET", "/sessions");
    await without("GET", "/sessions");
    await floor("GET", "/sessions");
    const times = { with: [], without: [], floor: [] };
    progress(`${WRITES} appends on each runtime`);
    for (let i = 0; i < WRITES; i += 20) {
      for (const [k, c] of [["with", withDir], ["without", without]]) {
        for (let j = i; j < i + 20; j++) {
          const [t] = await timed(() => c("POST", "/sessions/s/messages", { message: text(`m${j}`, `message number ${j}`) }));
          times[k].push(t);
        }
      }
      for (let j = 0; j < 10; j++) times.floor.push((await timed(() => floor("GET", "/sessions")))[0]);
    }
    // Reports of many agents (each its own alarm), for the report's own time.
    for (let i = 0; i < 50; i++) await client(w, `reporter-${i}`)("POST", "/sessions/s/messages", { message: text("m", "hello") });
    await sleep(2_000);
    const f = pct(times.floor, 50);
    log(`directory: a write with AGENT_DIRECTORY: p50 ${ms(pct(times.with, 50))}, p90 ${ms(pct(times.with, 90))}; without: p50 ${ms(pct(times.without, 50))}, p90 ${ms(pct(times.without, 90))} ` +
      `(with / without p50: ${(pct(times.with, 50) / pct(times.without, 50)).toFixed(2)}); floor (empty DO read) p50 ${ms(f)}`);
    log(`directory: the alarm's report (stats + the shard's write, ${reports.length} reports): p50 ${pct(reports, 50)} ms, p90 ${pct(reports, 90)} ms`);
  }

  // 2. Listing AGENTS entries, pages of 100.
  {
    progress(`reporting ${int(AGENTS)} entries to the shards`);
    const ns = await w.mf.getDurableObjectNamespace("AGENT_DIRECTORY");
    const byShard = Array.from({ length: 16 }, () => []);
    const now = Date.now();
    for (let i = 0; i < AGENTS; i++) {
      const name = `agent-${String(i).padStart(6, "0")}`;
      const at = new Date(now - (AGENTS - i) * 1000).toISOString();
      byShard[shardOf("agent", name)].push({ kind: "agent", name, sessions: 1, messages: i % 100, memories: 0, sqliteBytes: 65536,
        r2Bytes: 0, createdAt: at, lastActiveAt: at });
    }
    const [tIn] = await timed(() => Promise.all(byShard.map(async (rows, n) => {
      const stub = ns.get(ns.idFromName(`directory-${n}`));
      for (let i = 0; i < rows.length; i += 1000) {
        const r = await stub.fetch("https://do/report", { method: "POST", body: JSON.stringify({ reports: rows.slice(i, i + 1000) }) });
        if (r.status !== 204) throw new Error(`report: ${r.status} ${await r.text()}`);
      }
    })));
    log(`directory: ${int(AGENTS)} entries reported straight to the 16 shards in ${ms(tIn)} (${int(AGENTS / (tIn / 1000))} rows/s)`);
    const pages = async (query) => {
      const times = [];
      let cursor = "";
      let seen = 0;
      for (;;) {
        const [t, r] = await timed(async () => (await w.fetch(`/directory?limit=100${query}${cursor ? `&cursor=${cursor}` : ""}`)).json());
        times.push(t);
        seen += r.items.length;
        if (!r.nextCursor) return { times, seen };
        cursor = encodeURIComponent(r.nextCursor);
      }
    };
    const all = await pages("&prefix=agent-");
    log(`directory: every page of 100 of ${int(all.seen)} entries (${all.times.length} pages): p50 ${ms(pct(all.times, 50))}, p90 ${ms(pct(all.times, 90))}`);
    const recent = new Date(now - (AGENTS / 10) * 1000).toISOString();
    const active = await pages(`&prefix=agent-&activeAfter=${recent}`);
    log(`directory: pages of 100 of the ${int(active.seen)} active in the last tenth (activeAfter): p50 ${ms(pct(active.times, 50))}`);
  }

  // 3. The cross-agent export.
  {
    progress(`${EXPORT_AGENTS} agents of ${EXPORT_MESSAGES} messages for the export`);
    const names = Array.from({ length: EXPORT_AGENTS }, (_, i) => `export-${String(i).padStart(4, "0")}`);
    for (const a of names) {
      const messages = Array.from({ length: EXPORT_MESSAGES }, (_, k) => text(`m${k}`, `message ${k} of agent ${a}, with a few more words to weigh it`));
      await client(w, a)("POST", "/sessions/s/messages/batch", { messages });
    }
    for (let t0 = Date.now(); Date.now() - t0 < 30_000;) {
      const r = await (await w.fetch(`/directory?prefix=export-&limit=1000`)).json();
      if (r.items.length === EXPORT_AGENTS) break;
      await sleep(200);
    }
    const [t, bytes] = await timed(async () => (await (await w.fetch("/directory/export?prefix=export-")).arrayBuffer()).byteLength);
    const [tOne, bytesOne] = await timed(async () => {
      let n = 0;
      for (const a of names) n += (await (await w.fetch(`/agents/${a}/export`)).arrayBuffer()).byteLength;
      return n;
    });
    log(`directory: the cross-agent export of ${EXPORT_AGENTS} agents (${EXPORT_MESSAGES} messages each): ${ms(t)}, ` +
      `${(EXPORT_AGENTS / (t / 1000)).toFixed(0)} agents/s, ${(bytes / 1e6 / (t / 1000)).toFixed(1)} MB/s (${(bytes / 1e6).toFixed(1)} MB); ` +
      `the same agents' GET /export one after another: ${ms(tOne)}, ${(bytesOne / 1e6 / (tOne / 1000)).toFixed(1)} MB/s (cross-agent / one by one time: ${(t / tOne).toFixed(2)})`);
  }
} finally {
  await w.stop();
  await bare.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
