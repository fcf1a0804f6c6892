// Search by meaning at scale, against local workerd (Miniflare running the built Worker + DO,
// persisted to a temporary directory). Prints figures; asserts nothing; progress goes to stderr.
// Run: node bench/vectors.mjs (after `bash scripts/build.sh`), or `npm run bench`.
//
// Embedding 100,000 texts with the real all-MiniLM-L6-v2 takes too long here (about 30 texts/s on
// this machine's CPU), so the scale part uses stand-in vectors of the model's size: a local
// embeddings endpoint (in this file) answers 384-dimension unit vectors, the sum of one fixed
// pseudo-random vector per word (so texts sharing words are near, as with a sentence model).
// The index's work depends on the dimensions and the number of items, not on what the numbers
// mean. The per-write figures (embedding calls, write latency) use the real model when
// tests/e2e/minilm.mjs can start it (BENCH_VECTORS_MODEL=minilm|standin).
//
//  1. recall and search over 1,000 / 10,000 / 100,000 items (memories: GET /memories/search;
//     messages: GET /search), each query distinct (no answer or query vector is reused): the
//     workerd process's CPU per query (/proc/<pid>/stat deltas) and wall p50 / p99, and the
//     100k / 1k ratio
//  2. embedding calls per write (POST /memories, a message append) and write latency with
//     embeddings on and off (the answer does not wait for the vector)
//  3. the index's memory at 100,000 items (computed from its layout: 48 bytes of code for 384
//     dimensions, 8 of seq and 4 of scope per item; docs/REFERENCE.md#search-by-meaning)
//
// Options (environment variables):
//   BENCH_VECTORS_SIZES   store sizes (default 1000,10000,100000)
//   BENCH_VECTORS_QUERIES distinct queries per size and kind (default 40)
//   BENCH_VECTORS_MODEL   auto (default: minilm if it starts), minilm, standin: the model of part 2
//   BENCH_VECTORS=0       (read by bench/bench.mjs) skip this benchmark under `npm run bench`
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { mulberry32, pct, ms, int, log, progress as progressFor, timed, client, childWorkerds, cpuSeconds } from "./lib.mjs";

const SIZES = (process.env.BENCH_VECTORS_SIZES ?? "1000,10000,100000").split(",").map(Number).sort((a, b) => a - b);
const QUERIES = Number(process.env.BENCH_VECTORS_QUERIES ?? 40);
const MODEL = process.env.BENCH_VECTORS_MODEL ?? "auto";
const DIMS = 384;
const progress = progressFor("bench vectors");
/** Room for 100,000+ memories (the default limit is 10,000); no extraction. */
const CONFIG = { SESSION_CONFIG: JSON.stringify({ memory: { maxMemories: 1_000_000, extract: false } }) };

// ── The stand-in embeddings endpoint ───────────────────────────────────────────────────────────
const wordVectors = new Map();
function wordVector(w) {
  let v = wordVectors.get(w);
  if (!v) {
    let h = 2166136261;
    for (const c of w) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
    const r = mulberry32(h);
    v = Float64Array.from({ length: DIMS }, () => r() + r() + r() - 1.5);
    wordVectors.set(w, v);
  }
  return v;
}
function standIn(text) {
  const v = new Float64Array(DIMS);
  for (const w of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) wordVector(w).forEach((x, i) => { v[i] += x; });
  const n = Math.hypot(...v) || 1;
  return Array.from(v, (x) => x / n);
}
function startStandIn() {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => {
      const input = [JSON.parse(body).input].flat();
      requests.push(input.length);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ object: "list", data: input.map((t, index) => ({ object: "embedding", index, embedding: standIn(t) })) }));
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`, model: "standin-384", requests,
    close: () => new Promise((r) => server.close(r)),
  })));
}

// ── Texts ─────────────────────────────────────────────────────────────────────────────────────
const rand = mulberry32(11);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const NAMES = "Ana Bruno Chen Dara Emil Fatima Goran Hana Ines Jonas Kofi Lena Marco Nadia Oskar Pia Quinn Rosa Sami Tariq".split(" ");
const RELS = "sister brother cousin neighbour colleague manager friend uncle aunt daughter son partner coach teacher".split(" ");
const VERBS = "likes cooks recommends collects repairs sells photographs paints studies orders grows borrows".split(" ");
const OBJS = "noodles bicycles teapots novels cameras maps lamps sneakers guitars radios puzzles candles scarves kites lenses watches notebooks plants clocks mugs jackets boots records chairs tents".split(" ");
const CITIES = "Lisbon Porto Madrid Seville Lyon Nantes Berlin Leipzig Vienna Prague Krakow Riga Oslo Bergen Dublin Cork Glasgow Leeds Bristol Bologna".split(" ");
const fact = (i) => `My ${pick(RELS)} ${pick(NAMES)} ${pick(VERBS)} ${pick(OBJS)} in ${pick(CITIES)} (note ${i}).`;

// ── Running ───────────────────────────────────────────────────────────────────────────────────
async function drain(requests, quietMs = 400) {
  let last = requests.length;
  let quietSince = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 50));
    if (requests.length !== last) { last = requests.length; quietSince = performance.now(); continue; }
    if (performance.now() - quietSince > quietMs) return;
  }
}

async function scale(dir, upstream, rows) {
  const before = new Set(childWorkerds());
  const vars = { ...CONFIG, ...(upstream ? { EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: upstream.baseUrl, EMBEDDINGS_MODEL: upstream.model } : {}) };
  const mode = upstream ? "words and meaning" : "words only";
  const w = await startWorker({ persistDir: join(dir, upstream ? "scale" : "scale-off"), apiToken: "bench", vars });
  const pid = childWorkerds().find((p) => !before.has(p)) ?? null;
  const call = client(w, "scale");
  let have = 0;
  const r0 = mulberry32(5);
  const pickFrom = (xs) => xs[Math.floor(r0() * xs.length)];
  const ask = (i) => `who ${pickFrom(VERBS)} ${pickFrom(OBJS)} near ${pickFrom(CITIES)} ${i}`;
  try {
    for (const size of SIZES) {
      progress(`seeding ${int(size)} memories and ${int(size)} messages`);
      for (; have < size; have += 1000) {
        const n = Math.min(1000, size - have);
        await call("POST", "/memories/batch", { memories: Array.from({ length: n }, (_, k) => ({ content: fact(have + k) })) });
        const messages = Array.from({ length: n }, (_, k) => ({ id: `m${have + k}`, role: "user", parts: [{ type: "text", text: fact(have + k) }] }));
        await call("POST", `/sessions/s${Math.floor(have / 10_000)}/messages/batch`, { messages });
      }
      if (upstream) await drain(upstream.requests);
      progress(`${int(size)} embedded`);
      for (const [kind, path] of [["memory recall", "/memories/search"], ["message search", "/search"]]) {
        await call("GET", `${path}?q=${encodeURIComponent(ask(-1))}&limit=10`); // loads the index
        const wall = [];
        const c0 = pid ? cpuSeconds(pid) : 0;
        for (let i = 0; i < QUERIES; i++) {
          const [t] = await timed(() => call("GET", `${path}?q=${encodeURIComponent(ask(size + i))}&limit=10`));
          wall.push(t);
        }
        const cpu = pid ? ((cpuSeconds(pid) - c0) * 1000) / QUERIES : null;
        rows.push({ size, kind, mode, cpu, p50: pct(wall, 50), p99: pct(wall, 99) });
      }
    }
  } finally {
    await w.stop();
  }
}

function report(rows) {
  log("\n## Search by meaning at scale (bench/vectors.mjs; stand-in 384-dimension vectors, see its header)\n");
  log(`${QUERIES} distinct queries per row (each embedded once: wall time includes the local embeddings call; CPU is workerd's alone)\n`);
  log("| items | kind | search by | workerd CPU / query | wall p50 | wall p99 |");
  log("|---|---|---|---|---|---|");
  rows.sort((a, b) => a.size - b.size || a.kind.localeCompare(b.kind) || a.mode.localeCompare(b.mode));
  for (const r of rows) log(`| ${int(r.size)} | ${r.kind} | ${r.mode} | ${r.cpu == null ? "n/a" : ms(r.cpu)} | ${ms(r.p50)} | ${ms(r.p99)} |`);
  const [lo, hi] = [SIZES[0], SIZES.at(-1)];
  for (const kind of ["memory recall", "message search"]) {
    for (const mode of ["words and meaning", "words only"]) {
      const a = rows.find((r) => r.size === lo && r.kind === kind && r.mode === mode);
      const b = rows.find((r) => r.size === hi && r.kind === kind && r.mode === mode);
      if (a && b && a !== b) {
        log(`${kind} (${mode}): ${int(hi)} / ${int(lo)} ratio: CPU ${a.cpu ? (b.cpu / a.cpu).toFixed(2) : "n/a"}×, wall p50 ${(b.p50 / a.p50).toFixed(2)}× (target ≤ 3×)`);
      }
    }
  }
  const perItem = Math.ceil(DIMS / 64) * 8 + 8 + 4;
  log(`index memory at ${int(hi)} items per kind: ${perItem} bytes per item (${Math.ceil(DIMS / 64) * 8} of code, 8 of seq, 4 of scope) = ${(hi * perItem / 1e6).toFixed(1)} MB per kind, ${(2 * hi * perItem / 1e6).toFixed(1)} MB for memories and messages; ceiling 150,000 items per kind (${(150_000 * perItem / 1e6).toFixed(1)} MB at 384 dimensions, ${(150_000 * 76 / 1e6).toFixed(1)} MB at most with 512-bit codes)`);
}

async function perWrite(dir, upstream, label) {
  const results = {};
  for (const on of [false, true]) {
    const vars = on ? { ...CONFIG, EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: upstream.baseUrl, EMBEDDINGS_MODEL: upstream.model } : CONFIG;
    const w = await startWorker({ persistDir: join(dir, on ? "writes-on" : "writes-off"), apiToken: "bench", vars });
    const call = client(w, "writes");
    try {
      const memory = [], message = [];
      const calls0 = upstream.requests.length;
      const N = 40;
      for (let i = 0; i < N; i++) {
        memory.push((await timed(() => call("POST", "/memories", { content: fact(i) })))[0]);
        const m = { id: `w${i}`, role: "user", parts: [{ type: "text", text: fact(1000 + i) }] };
        message.push((await timed(() => call("POST", "/sessions/w/messages", { message: m })))[0]);
        if (on) await drain(upstream.requests, 150);
      }
      results[on ? "on" : "off"] = { memory, message, calls: on ? (upstream.requests.length - calls0) / (2 * N) : 0 };
    } finally {
      await w.stop();
    }
  }
  log(`\n## Writes with embeddings (${label})\n`);
  log(`embedding calls per write (one memory or one message per request, each waited for): ${results.on.calls.toFixed(2)}`);
  for (const k of ["memory", "message"]) {
    const [on, off] = [results.on[k], results.off[k]];
    log(`${k === "memory" ? "POST /memories" : "append a message"}: p50 ${ms(pct(on, 50))} / p99 ${ms(pct(on, 99))} with embeddings, p50 ${ms(pct(off, 50))} / p99 ${ms(pct(off, 99))} without (the vector is made after the answer)`);
  }
}

export async function main() {
  const dir = mkdtempSync(join(tmpdir(), "sa-bench-vectors-"));
  const standin = await startStandIn();
  try {
    const rows = [];
    await scale(dir, standin, rows);
    await scale(dir, null, rows);
    report(rows);
    let real = null;
    if (MODEL !== "standin") {
      try {
        const { start, EMBEDDING_MODEL } = await import("../tests/e2e/minilm.mjs");
        const s = await start();
        const requests = [];
        const origin = s.requests;
        real = { baseUrl: s.baseUrl, model: EMBEDDING_MODEL, get requests() { return origin; }, close: () => s.close() };
        void requests;
      } catch (e) {
        if (MODEL === "minilm") throw e;
        progress(`all-MiniLM-L6-v2 did not start (${e.message.split("\n")[0]}); per-write figures with the stand-in`);
      }
    }
    try {
      await perWrite(dir, real ?? standin, real ? "all-MiniLM-L6-v2, local" : "stand-in vectors");
    } finally {
      await real?.close();
    }
  } finally {
    await standin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
