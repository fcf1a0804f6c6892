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
//  4. how soon a write is searchable by meaning (with the real model when it starts): from a
//     write's answer to its vector, p50 / p99 over single writes (a message: polling a search of
//     its session by a query that shares no word with it, so only its vector finds it; a
//     memory: polling GET /memories/{id} until `embeddedAt`), and for a batch of 1,000 (one
//     POST …/messages/batch, one POST /memories/batch) until the last of it has its vector; and
//     1,000 memories against the stand-in answering each call after 200 ms, side by side (a
//     hosted endpoint's latency: what calls at once gain when the endpoint is not the bottleneck)
//
// Options (environment variables):
//   BENCH_VECTORS_SIZES   store sizes (default 1000,10000,100000)
//   BENCH_VECTORS_QUERIES distinct queries per size and kind (default 40)
//   BENCH_VECTORS_MODEL   auto (default: minilm if it starts), minilm, standin: the model of parts 2 and 4
//   BENCH_VECTORS_PARTS   scale,writes,fresh (default all three)
//   BENCH_VECTORS_FRESH   single writes of each kind in part 4 (default 20)
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
const PARTS = new Set((process.env.BENCH_VECTORS_PARTS ?? "scale,writes,fresh").split(","));
const FRESH = Number(process.env.BENCH_VECTORS_FRESH ?? 20);
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
/** The stand-in endpoint; each call answered after `delayMs` (a hosted endpoint's latency). */
function startStandIn(delayMs = 0) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => {
      const input = [JSON.parse(body).input].flat();
      requests.push(input.length);
      res.setHeader("content-type", "application/json");
      setTimeout(() => res.end(JSON.stringify({ object: "list", data: input.map((t, index) => ({ object: "embedding", index, embedding: standIn(t) })) })), delayMs);
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

// ── How soon a write is searchable by meaning ────────────────────────────────────────────────
/** A text and a query that share no word (so only the text's vector finds it) and are near for
 * all-MiniLM-L6-v2 (cosine 0.52, above the 0.42 a hit by meaning alone needs); `i` makes each
 * text distinct (a text embedded before would reuse its vector without a call). */
const FRESH_TEXT = (i) => `We adopted a beagle puppy from the rescue shelter on Saturday (${i}).`;
const FRESH_QUERY = "our new family dog?";

/** Milliseconds until `found()` is true, polling every `everyMs` (give up after `timeoutMs`). A
 * poll is a request the object serves between its embedding calls: a batch is polled less often,
 * so that polling takes little of the time measured. */
async function until(found, everyMs = 10, timeoutMs = 300_000) {
  const t0 = performance.now();
  for (;;) {
    if (await found()) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) throw new Error(`not embedded after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function freshness(dir, upstream, label) {
  const vars = { ...CONFIG, EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: upstream.baseUrl, EMBEDDINGS_MODEL: upstream.model };
  const w = await startWorker({ persistDir: join(dir, "fresh"), apiToken: "bench", vars });
  const call = client(w, "fresh");
  const json = async (...a) => JSON.parse(await call(...a));
  /** Whether message `id` of session `sid` is found by the query of meaning. */
  const found = (sid, id) => async () => (await json("GET", `/sessions/${sid}/search?q=${encodeURIComponent(FRESH_QUERY)}&limit=5`)).results.some((h) => h.id === id);
  const embedded = (id) => async () => (await json("GET", `/memories/${id}`)).embeddedAt != null;
  try {
    // The query's vector is kept by the service after its first search: ask it once first.
    await call("GET", `/search?q=${encodeURIComponent(FRESH_QUERY)}&limit=5`);
    const single = { message: [], memory: [] };
    for (let i = 0; i < FRESH; i++) {
      const m = { id: `f${i}`, role: "user", parts: [{ type: "text", text: FRESH_TEXT(i) }] };
      await call("POST", `/sessions/f${i}/messages`, { message: m });
      single.message.push(await until(found(`f${i}`, m.id)));
      const mem = await json("POST", "/memories", { content: FRESH_TEXT(1000 + i) });
      single.memory.push(await until(embedded(mem.id ?? mem.memory?.id)));
    }
    const batch = {};
    const N = 1000;
    const messages = Array.from({ length: N }, (_, k) => ({ id: `b${k}`, role: "user", parts: [{ type: "text", text: k === N - 1 ? FRESH_TEXT(5000) : fact(20_000 + k) }] }));
    const calls0 = upstream.requests.length;
    await call("POST", "/sessions/batch/messages/batch", { messages });
    batch.message = await until(found("batch", `b${N - 1}`), 100);
    batch.messageCalls = upstream.requests.length - calls0;
    await drain(upstream.requests);
    const memories = Array.from({ length: N }, (_, k) => ({ content: k === N - 1 ? FRESH_TEXT(6000) : fact(30_000 + k) }));
    const stored = await json("POST", "/memories/batch", { memories });
    const last = stored.memories.at(-1);
    batch.memory = await until(embedded(last.id), 100);
    log(`\n## How soon a write is searchable by meaning (${label})\n`);
    log(`from a write's answer to its vector (${FRESH} single writes of each kind, each waited for, polled every 10 ms; a batch polled every 100 ms):`);
    log(`one message (a search of its session by a query sharing no word with it finds it): p50 ${ms(pct(single.message, 50))} / p99 ${ms(pct(single.message, 99))}`);
    log(`one memory (GET /memories/{id} has embeddedAt): p50 ${ms(pct(single.memory, 50))} / p99 ${ms(pct(single.memory, 99))}`);
    log(`a batch of ${int(N)} messages (one POST …/messages/batch) until the last is found by meaning: ${(batch.message / 1000).toFixed(1)} s (${batch.messageCalls} embeddings calls)`);
    log(`a batch of ${int(N)} memories (one POST /memories/batch) until the last has embeddedAt: ${(batch.memory / 1000).toFixed(1)} s`);
  } finally {
    await w.stop();
  }
}

/** A batch of 1,000 memories against an endpoint that answers each call after `upstream`'s delay
 * and answers calls side by side (as a hosted one does): the time until the last is embedded. */
async function latencyBound(dir, upstream, delayMs) {
  const vars = { ...CONFIG, EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: upstream.baseUrl, EMBEDDINGS_MODEL: upstream.model };
  const w = await startWorker({ persistDir: join(dir, "fresh-slow"), apiToken: "bench", vars });
  const call = client(w, "slow");
  try {
    const calls0 = upstream.requests.length;
    const stored = JSON.parse(await call("POST", "/memories/batch", { memories: Array.from({ length: 1000 }, (_, k) => ({ content: fact(40_000 + k) })) }));
    const last = stored.memories.at(-1).id;
    const t = await until(async () => JSON.parse(await call("GET", `/memories/${last}`)).embeddedAt != null, 100);
    log(`a batch of 1,000 memories with an endpoint that answers each call after ${delayMs} ms, side by side (the stand-in, delayed): ${(t / 1000).toFixed(1)} s until the last has embeddedAt (${upstream.requests.length - calls0} calls)`);
  } finally {
    await w.stop();
  }
}

export async function main() {
  const dir = mkdtempSync(join(tmpdir(), "sa-bench-vectors-"));
  const standin = await startStandIn();
  try {
    if (PARTS.has("scale")) {
      const rows = [];
      await scale(dir, standin, rows);
      await scale(dir, null, rows);
      report(rows);
    }
    let real = null;
    if (MODEL !== "standin" && (PARTS.has("writes") || PARTS.has("fresh"))) {
      try {
        const { start, EMBEDDING_MODEL } = await import("../tests/e2e/minilm.mjs");
        const s = await start();
        const origin = s.requests;
        real = { baseUrl: s.baseUrl, model: EMBEDDING_MODEL, get requests() { return origin; }, close: () => s.close() };
      } catch (e) {
        if (MODEL === "minilm") throw e;
        progress(`all-MiniLM-L6-v2 did not start (${e.message.split("\n")[0]}); per-write figures with the stand-in`);
      }
    }
    try {
      if (PARTS.has("writes")) await perWrite(dir, real ?? standin, real ? "all-MiniLM-L6-v2, local" : "stand-in vectors");
      // The stand-in's vectors are words: a query sharing none with a text is not near it.
      if (PARTS.has("fresh")) {
        if (real) await freshness(dir, real, "all-MiniLM-L6-v2, local");
        else log("\n(how soon a write is searchable by meaning: needs all-MiniLM-L6-v2, which did not start)");
        const slow = await startStandIn(200);
        try {
          await latencyBound(dir, slow, 200);
        } finally {
          await slow.close();
        }
      }
    } finally {
      await real?.close();
    }
  } finally {
    await standin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
