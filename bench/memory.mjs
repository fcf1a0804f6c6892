// Long-term memory benchmark against local workerd (Miniflare running the built Worker + DO,
// persisted to a temporary directory) and the scripted OpenAI-compatible model of
// tests/e2e/llm-server.mjs (chat completions and deterministic embeddings on localhost). Prints
// figures; asserts nothing; progress goes to stderr. Run: node bench/memory.mjs (after
// `bash scripts/build.sh`), or `npm run bench`, which runs it after bench/bench.mjs.
//
//  1. recall quality on a labelled corpus (bench/memory-corpus.mjs): recall@5, MRR@10, nDCG@10
//     per query kind for the service's ranking (full text; hybrid with embeddings) and a plain
//     BM25 computed here over the same facts; how often an outdated fact outranks its correction
//  2. recall latency (p50/p95) over 1,000 / 10,000 / 100,000 memories in one agent
//  3. write rate: one memory per request, and batches of 1,000
//  4. the latency inject adds to a chat turn (instant local model)
//  5. extraction cost per turn: model calls and prompt size
//
// Options (environment variables):
//   BENCH_MEMORY_SIZES       store sizes of the latency part (default 1000,10000,100000)
//   BENCH_MEMORY_HYBRID_MAX  largest store measured with embeddings (default 100000)
//   BENCH_MEMORY_MISSES=1    list on stderr the quality queries whose relevant fact is not first
//   BENCH_MEMORY_PARTS       which parts to run (default floor,quality,write,latency,inject,extract)
//   BENCH_MEMORY_MINILM=0    leave out the real model: by default the quality part also runs with
//                            all-MiniLM-L6-v2 (tests/e2e/minilm.mjs, behind a caching proxy here so
//                            a reseeded store is not embedded again) when it starts; the other parts
//                            use the hashed vectors of tests/e2e/llm-server.mjs (100,000 texts with
//                            the real model would take most of an hour on this machine's CPU)
//   BENCH_MEMORY=0           (read by bench/bench.mjs) skip this benchmark under `npm run bench`
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel, EMBEDDING_DIMS } from "../tests/e2e/llm-server.mjs";
import { buildCorpus, checkCorpus } from "./memory-corpus.mjs";
import { mulberry32, pct, ms, int, log, progress as progressFor, timed, client as textClient } from "./lib.mjs";

const SIZES = (process.env.BENCH_MEMORY_SIZES ?? "1000,10000,100000").split(",").map(Number).sort((a, b) => a - b);
const HYBRID_MAX = Number(process.env.BENCH_MEMORY_HYBRID_MAX ?? 100_000);
const PARTS = new Set((process.env.BENCH_MEMORY_PARTS ?? "floor,quality,write,latency,inject,extract").split(","));

// mulberry32 for the random numbers: bench.mjs's LCG loses precision in doubles and cycles after
// a few thousand draws, too soon for 100,000 distinct facts.
const rand = mulberry32(7);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const progress = progressFor("bench memory");
const f2 = (x) => x.toFixed(2);

/** lib.mjs's client, answering parsed JSON (null for an empty answer). */
function client(w, agent) {
  const call = textClient(w, agent);
  return async (method, path, body) => {
    const text = await call(method, path, body);
    return text ? JSON.parse(text) : null;
  };
}
const search = (call, q, limit = 10) => call("GET", `/memories/search?q=${encodeURIComponent(q)}&limit=${limit}`).then((r) => r.results);

// ── Synthetic facts (latency, write rate, inject, extraction) ───────────────────────────────────────
const NAMES = "Ana Bruno Chen Dara Emil Fatima Goran Hana Ines Jonas Kofi Lena Marco Nadia Oskar Pia Quinn Rosa Sami Tariq Uma Vera Wen Xavi Yara Zane Alba Boris Cleo Dev Elif Farid Greta Hugo Ivo Jana Kai Luz Milo Noor".split(" ");
const RELS = "sister brother cousin neighbour colleague manager friend uncle aunt grandmother daughter son partner landlord dentist coach teacher mentor roommate nephew".split(" ");
const VERBS = "likes cooks recommends collects repairs sells photographs paints studies orders grows borrows avoids reviews restores".split(" ");
const ADJS = "spicy vintage tiny green wooden electric quiet bright handmade rare cheap heavy foldable organic ancient modern striped silver bitter fragrant".split(" ");
const OBJS = ("noodles bicycles teapots novels cameras maps lamps sneakers guitars radios puzzles candles scarves kites lenses watches " +
  "notebooks plants clocks knives mugs jackets drones boots paintings records chairs helmets tents rugs dumplings pastries curries " +
  "salads pickles cheeses wines coffees teas spices stamps coins shells fossils marbles posters comics keyboards headphones").split(" ");
const CITIES = ("Lisbon Porto Madrid Seville Lyon Nantes Berlin Leipzig Vienna Prague Krakow Riga Oslo Bergen Dublin Cork Glasgow Leeds " +
  "Bristol Bologna Turin Naples Athens Izmir Cairo Tunis Dakar Accra Nairobi Kigali Lusaka Durban Lima Quito Bogota Havana Denver " +
  "Austin Portland Halifax Quebec Osaka Busan Taipei Hanoi Manila Jakarta Perth Hobart Auckland").split(" ");
const DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(" ");
const MONTHS = "January February March April May June July August September October November December".split(" ");
const PLACES = "market library harbour station museum stadium bakery gallery cafe workshop".split(" ");
const ROOMS = "kitchen hallway attic garage study cellar".split(" ");
const PATTERNS = [
  () => `The user's ${pick(RELS)} ${pick(NAMES)} ${pick(VERBS)} ${pick(ADJS)} ${pick(OBJS)} in ${pick(CITIES)} on ${pick(DAYS)}s.`,
  () => `The user ${pick(VERBS)} ${pick(ADJS)} ${pick(OBJS)} every ${pick(DAYS)} with ${pick(NAMES)}.`,
  () => `The user keeps ${pick(ADJS)} ${pick(OBJS)} from ${pick(CITIES)} in the ${pick(ROOMS)}.`,
  () => `The user wants to visit ${pick(CITIES)} in ${pick(MONTHS)} with ${pick(RELS)} ${pick(NAMES)}.`,
  () => `The user's favourite ${pick(OBJS)} are the ${pick(ADJS)} ones from the ${pick(PLACES)} in ${pick(CITIES)}.`,
  () => `The user met ${pick(NAMES)} at the ${pick(PLACES)} in ${pick(CITIES)} in ${2000 + Math.floor(rand() * 26)}.`,
];
const seen = new Set();
/** A new synthetic fact (never the same text twice, so none merges into another). */
function fact() {
  for (let tries = 0; ; tries++) {
    const t = pick(PATTERNS)() + (tries > 20 ? ` (${seen.size})` : "");
    if (!seen.has(t)) { seen.add(t); return t; }
  }
}
const syntheticMemory = () => ({ content: fact(), tags: [pick(["family", "travel", "food", "hobby", "home", "work"])], score: Math.round((0.5 + rand() * 0.5) * 100) / 100 });
const question = () => pick([
  () => `What does my ${pick(RELS)} ${pick(NAMES)} do in ${pick(CITIES)}?`,
  () => `Any ideas for ${pick(ADJS)} ${pick(OBJS)} in ${pick(CITIES)} this ${pick(DAYS)}?`,
  () => `Remind me who I met at the ${pick(PLACES)} in ${pick(CITIES)}.`,
  () => `Should I bring ${pick(OBJS)} when I visit ${pick(CITIES)} in ${pick(MONTHS)}?`,
])();

// ── Set-up ─────────────────────────────────────────────────────────────────────────────────────────
const started = performance.now();
const model = await startModel();
const dir = mkdtempSync(join(tmpdir(), "sa-bench-memory-"));
const LLM = { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench" };
const EMBEDDINGS = { EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: model.baseUrl, EMBEDDINGS_MODEL: "bench-embeddings" };
// Inject on (its defaults), extract off; room for 100,000+ memories (the default limit is 10,000).
const CONFIG = { memory: { maxMemories: 1_000_000, inject: {}, extract: false } };
const workers = {};

/** The real model behind a cache (text → vector), or null: {baseUrl, requests, close}. */
async function startMiniLm() {
  if (process.env.BENCH_MEMORY_MINILM === "0") return null;
  let s;
  try {
    s = await (await import("../tests/e2e/minilm.mjs")).start();
  } catch (e) {
    progress(`all-MiniLM-L6-v2 did not start (${e.message.split("\n")[0]}): quality with the hashed vectors only`);
    return null;
  }
  const cache = new Map();
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", async () => {
      const parsed = JSON.parse(body);
      const input = [parsed.input].flat();
      requests.push({ body: { ...parsed, input }, failed: false });
      const missing = [...new Set(input.filter((t) => !cache.has(t)))];
      if (missing.length) (await s.embed(missing)).forEach((v, i) => cache.set(missing[i], v));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ object: "list", data: input.map((t, index) => ({ object: "embedding", index, embedding: cache.get(t) })) }));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { baseUrl: `http://127.0.0.1:${server.address().port}/v1`, requests,
    close: async () => { if (!server.listening) return; await new Promise((r) => server.close(r)); await s.close(); } };
}
const minilm = PARTS.has("quality") ? await startMiniLm() : null;
/**
 * Waits until every memory waiting for its vector has one. A batch's vectors are made after its
 * answer, in the Durable Object's background (crates/core/src/memory/mod.rs, After::EmbedMemories):
 * wait until the embeddings endpoint has been quiet for 300 ms. Returns the embeddings requests
 * it saw.
 */
async function drainEmbeddings(requests = model.embeddingRequests) {
  const start = requests.length;
  let last = start;
  let quietSince = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 25));
    const n = requests.length;
    if (requests.slice(last).some((r) => r.failed)) throw new Error("embeddings failed");
    if (n !== last) { last = n; quietSince = performance.now(); continue; }
    if (performance.now() - quietSince > 300) {
      if (n > 2000) requests.splice(0, n - 10);
      return n - start;
    }
  }
}

try {
  workers.text = await startWorker({ persistDir: join(dir, "text"), apiToken: "bench", vars: { ...LLM, SESSION_CONFIG: JSON.stringify(CONFIG) } });
  workers.hybrid = await startWorker({ persistDir: join(dir, "hybrid"), apiToken: "bench", vars: { ...LLM, ...EMBEDDINGS, SESSION_CONFIG: JSON.stringify(CONFIG) } });
  const MODES = [["full text", "text"], ["hybrid", "hybrid"]];
  if (minilm) {
    const vars = { ...LLM, EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: minilm.baseUrl, EMBEDDINGS_MODEL: "all-MiniLM-L6-v2" };
    workers.minilm = await startWorker({ persistDir: join(dir, "minilm"), apiToken: "bench", vars: { ...vars, SESSION_CONFIG: JSON.stringify(CONFIG) } });
  }
  // The quality part runs with the real model too, when it started.
  const QUALITY_MODES = minilm ? [...MODES, ["hybrid, all-MiniLM-L6-v2", "minilm"]] : MODES;

  // Floor: a recall on an empty agent (the request, the DO, one FTS query; hybrid: + embedding the query).
  const floors = {};
  if (PARTS.has("floor")) {
  for (const [label, key] of MODES) {
    const call = client(workers[key], "empty");
    for (let i = 0; i < 10; i++) await search(call, "warm up");
    const xs = [];
    for (let i = 0; i < 30; i++) xs.push((await timed(() => search(call, "where does the user live")))[0]);
    floors[key] = pct(xs, 50);
  }
  log(`memory recall floor (empty agent, one request): full text p50 ${ms(floors.text)}, hybrid p50 ${ms(floors.hybrid)} (+ embedding the query over localhost)`);
  }

  // ── 1. Recall quality ──────────────────────────────────────────────────────────────────────────
  if (PARTS.has("quality")) {
  progress("recall quality");
  const corpus = buildCorpus();
  for (const p of checkCorpus(corpus)) progress(`corpus warning: ${p}`);
  const KINDS = ["exact", "forms", "partial", "paraphrase", "current"];
  const SYSTEMS = [...QUALITY_MODES, ["bm25 (JS)", "bm25"]];
  const scores = {}; // system -> kind -> [{r5, mrr, ndcg}]
  const stale = {}; // system -> {outranked, missing, n}
  const RELATIONS = ["lower", "equal", "higher"];
  const rels = () => Object.fromEntries(RELATIONS.map((r) => [r, { outranked: 0, n: 0 }]));
  for (const [, s] of SYSTEMS) { scores[s] = Object.fromEntries(KINDS.map((k) => [k, []])); stale[s] = { outranked: 0, missing: 0, n: 0, by: rels() }; }
  const reseeds = { text: 0, hybrid: 0, minilm: 0 };
  // Each reordering rule measured both ways: the order before the rules is the hits by the score
  // their signals give (relevance and what the agent knows, docs/openapi.yaml MemoryHit.score: a
  // rule that moves a hit changes its score, never its signals, and says so in `why`); a query a
  // rule moved counts as better, worse or the same by nDCG@10, then MRR@10
  // (rules: system -> rule -> kind -> {fired, better, worse}).
  const RULES = { "newer first (and its corrections search)": (h) => h.why.includes(", newer than "), "quoted first": (h) => h.why.includes("the query quotes it") };
  const rules = {};
  const plainScore = (h) => 0.7 * h.signals.relevance + 0.15 * h.signals.confidence + 0.1 * h.signals.recency + 0.05 * h.signals.frequency;
  const judge = (s, q, hits, idOf) => {
    const plain = [...hits].sort((a, b) => plainScore(b) - plainScore(a)).map(idOf);
    const now = hits.map(idOf);
    const [a, b] = [metrics(plain, q.relevant), metrics(now, q.relevant)];
    const d = b.ndcg - a.ndcg || b.mrr - a.mrr;
    // A loss where what moved above the asked fact is that fact's own correction (its id + ".now"):
    // the rule did what it is for, the corpus holds only the original relevant to this query.
    const above = (order) => { const i = order.findIndex((id) => q.relevant.includes(id)); return new Set(i < 0 ? order.slice(0, 10) : order.slice(0, i)); };
    const rose = [...above(now)].filter((id) => !above(plain).has(id));
    const ownCorrection = rose.length > 0 && rose.every((id) => q.relevant.some((r) => id === `${r}.now`));
    for (const [rule, fired] of Object.entries(RULES)) {
      if (!hits.some(fired)) continue;
      const m = ((rules[s] ??= {})[rule] ??= {})[q.kind] ??= { fired: 0, better: 0, worse: 0, own: 0 };
      m.fired++;
      if (d > 1e-9) m.better++;
      if (d < -1e-9) { m.worse++; if (ownCorrection) m.own++; }
    }
  };
  const record = (s, q, ranked) => {
    scores[s][q.kind].push(metrics(ranked, q.relevant));
    if (process.env.BENCH_MEMORY_MISSES && s !== "bm25" && !q.relevant.includes(ranked[0])) {
      progress(`miss (${s}, ${q.kind}): ${JSON.stringify(q.q)} wants ${q.relevant} at ${q.relevant.map((id) => ranked.indexOf(id) + 1 || "-")}; first: ${ranked[0] ?? "nothing"}`);
    }
    if (q.kind === "current") {
      const top = ranked.slice(0, 10);
      const [o, c] = [top.indexOf(q.outdated), top.indexOf(q.relevant[0])];
      const outranked = o >= 0 && (c < 0 || o < c);
      stale[s].n++;
      stale[s].by[q.relation].n++;
      if (outranked) { stale[s].outranked++; stale[s].by[q.relation].outranked++; }
      if (c < 0) stale[s].missing++;
    }
  };
  for (const user of corpus) {
    const byContent = new Map(user.facts.map((f) => [f.content, f.id]));
    // Baseline.
    const index = bm25Index(user.facts);
    for (const q of user.queries) record("bm25", q, bm25Rank(index, q.q).map((i) => user.facts[i].id));
    // The service: each query on a store as freshly seeded (recall counters at 0), so that one
    // query's recall counters (the frequency signal) never move another's ranking: the store is
    // reseeded whenever a hit had been recalled before.
    for (const [, key] of QUALITY_MODES) {
      const call = client(workers[key], `quality-${user.agent}`);
      const requests = key === "minilm" ? minilm.requests : model.embeddingRequests;
      const seedUser = async () => {
        await call("DELETE", "/memories");
        const mem = (f) => ({ content: f.content, tags: f.tags, score: f.score });
        // The facts, then the corrections (later); with embeddings, their vectors are made after
        // each answer (waited for below).
        const chunk = 1000;
        const before = requests.length;
        for (const part of [user.facts.filter((f) => !f.later), user.facts.filter((f) => f.later)]) {
          for (let i = 0; i < part.length; i += chunk) await call("POST", "/memories/batch", { memories: part.slice(i, i + chunk).map(mem) });
        }
        if (key !== "text") {
          const embedded = requests.slice(before).filter((r) => !r.failed).reduce((a, r) => a + r.body.input.length, 0);
          if (embedded !== user.facts.length) await drainEmbeddings(requests);
          if (requests.length > 2000) requests.length = 0;
        }
        reseeds[key]++;
      };
      await seedUser();
      for (const q of user.queries) {
        let hits = await search(call, q.q);
        if (hits.some((h) => h.memory.recallCount > 1)) {
          await seedUser();
          hits = await search(call, q.q);
        }
        const idOf = (h) => byContent.get(h.memory.content) ?? `?${h.memory.content}`;
        record(key, q, hits.map(idOf));
        judge(key, q, hits, idOf);
      }
    }
    progress(`quality: ${user.agent} done`);
  }
  const nFacts = corpus.reduce((a, u) => a + u.facts.length, 0);
  const nCorr = corpus.reduce((a, u) => a + u.facts.filter((f) => f.later).length, 0);
  const nQueries = corpus.reduce((a, u) => a + u.queries.length, 0);
  log(`memory recall quality: ${corpus.length} users (one agent each), ${nFacts} facts (${nCorr} of them later corrections), ${nQueries} queries; each figure recall@5 / MRR@10 / nDCG@10 ("current": only the correction is relevant)`);
  for (const k of KINDS) {
    const n = scores.bm25[k].length;
    const cell = (s) => { const xs = scores[s][k]; const avg = (f) => xs.reduce((a, m) => a + m[f], 0) / xs.length; return `${f2(avg("r5"))} / ${f2(avg("mrr"))} / ${f2(avg("ndcg"))}`; };
    log(`  ${k.padEnd(10)} (${String(n).padStart(3)} queries): full text ${cell("text")}; hybrid ${cell("hybrid")}${minilm ? `; hybrid, all-MiniLM-L6-v2 ${cell("minilm")}` : ""}; bm25 ${cell("bm25")}`);
  }
  {
    const all = (s) => { const xs = KINDS.flatMap((k) => scores[s][k]); const avg = (f) => xs.reduce((a, m) => a + m[f], 0) / xs.length; return `${f2(avg("r5"))} / ${f2(avg("mrr"))} / ${f2(avg("ndcg"))}`; };
    log(`  all        (${String(nQueries).padStart(3)} queries): full text ${all("text")}; hybrid ${all("hybrid")}${minilm ? `; hybrid, all-MiniLM-L6-v2 ${all("minilm")}` : ""}; bm25 ${all("bm25")}`);
  }
  const staleCell = (s) => `${stale[s].outranked}/${stale[s].n}` + (stale[s].missing ? ` (correction not in the top 10 at all: ${stale[s].missing})` : "");
  log(`  outdated fact above its correction ("current" queries, top 10): full text ${staleCell("text")}; hybrid ${staleCell("hybrid")}${minilm ? `; hybrid, all-MiniLM-L6-v2 ${staleCell("minilm")}` : ""}; bm25 ${staleCell("bm25")}`);
  for (const [, s] of QUALITY_MODES) {
    for (const [rule, byKind] of Object.entries(rules[s] ?? {})) {
      const all = Object.values(byKind).reduce((t, m) => ({ fired: t.fired + m.fired, better: t.better + m.better, worse: t.worse + m.worse, own: t.own + m.own }), { fired: 0, better: 0, worse: 0, own: 0 });
      log(`  rule "${rule}" (${s}): moved ${all.fired} rankings, ${all.better} better, ${all.worse} worse, ${all.own} of them only by the asked fact's own correction ranking above it (by nDCG@10, then MRR@10, against the hits by their signals' score)` +
        `; by kind (moved/+better/−worse (own correction)): ${KINDS.filter((k) => byKind[k]).map((k) => `${k} ${byKind[k].fired}/+${byKind[k].better}/−${byKind[k].worse} (${byKind[k].own})`).join(", ")}`);
    }
  }
  const byRel = (s) => RELATIONS.map((r) => `${r} ${stale[s].by[r].outranked}/${stale[s].by[r].n}`).join(", ");
  log(`  the same by the correction's score vs the fact's: full text ${byRel("text")}; hybrid ${byRel("hybrid")}`);
  log(`  (hybrid: the test server's embeddings are a ${EMBEDDING_DIMS}-dim hashed bag of words, so paraphrase gains are bounded by it: texts without a shared word are similar only by hash collisions${minilm ? "; hybrid, all-MiniLM-L6-v2: the real 384-dim sentence model, tests/e2e/minilm.mjs" : "; the real model did not start"})`);
  log(`  (bm25: k1=1.2, b=0.75 over lower-case alphanumeric tokens of text and tags, any term, no stemming, no stop words; service: each query on a freshly seeded store,` +
    ` recall counters at 0 (${reseeds.text} + ${reseeds.hybrid} + ${reseeds.minilm} seedings); corrections stored ms after the facts, so recency cannot tell them apart)`);

  }

  // ── 3. Write rate (before the big stores, on fresh agents) ────────────────────────────────────
  if (PARTS.has("write")) {
  progress("write rate");
  for (const [label, key] of MODES) {
    const call = client(workers[key], "writes");
    const N = 300;
    const xs = [];
    const [total] = await timed(async () => {
      for (let i = 0; i < N; i++) xs.push((await timed(() => call("POST", "/memories", syntheticMemory())))[0]);
    });
    log(`memory write (1 memory/request, sequential, ${label}${key === "hybrid" ? ": each write embeds" : ""}): ${int(N / (total / 1000))} memories/s, p50 ${ms(pct(xs, 50))}, p95 ${ms(pct(xs, 95))}`);
  }

  }

  // ── 2. Recall latency over growing stores (batch rates recorded on the way) ─────────────────────
  if (PARTS.has("latency")) {
  const LAT_QUERIES = {
    "common word (in 1/6)": "favourite",
    "two words": "sister Lisbon",
    question: "what does my cousin cook in Naples on Sundays",
    prefix: "Lisb",
    "no hit": "zzzzqqq",
  };
  const batchRates = { text: [], hybrid: [] };
  const latency = { text: {}, hybrid: {} };
  for (const [label, key] of MODES) {
    const call = client(workers[key], "big");
    let have = 0;
    for (const size of SIZES) {
      if (key === "hybrid" && size > HYBRID_MAX) break;
      progress(`${label}: seeding ${int(size)} memories`);
      let inserted = 0;
      const [t] = await timed(async () => {
        for (; have < size; have += 1000) {
          const n = Math.min(1000, size - have);
          await call("POST", "/memories/batch", { memories: Array.from({ length: n }, syntheticMemory) });
          inserted += n;
        }
      });
      let drain = null;
      if (key === "hybrid") drain = await timed(() => drainEmbeddings());
      batchRates[key].push({ from: size - inserted, to: size, rate: inserted / (t / 1000), drain });
      progress(`${label}: ${int(size)} seeded in ${(t / 1000).toFixed(1)} s${drain ? `, embedded in ${(drain[0] / 1000).toFixed(1)} s (${drain[1]} requests)` : ""}`);
      const runs = size >= 100_000 ? 10 : 20;
      latency[key][size] = {};
      for (const [ql, q] of Object.entries(LAT_QUERIES)) {
        await search(call, q);
        const xs = [];
        let n = 0;
        for (let i = 0; i < runs; i++) { const [dt, hits] = await timed(() => search(call, q)); xs.push(dt); n = hits.length; }
        latency[key][size][ql] = { p50: pct(xs, 50), p95: pct(xs, 95), n };
      }
    }
  }
  for (const size of SIZES) {
    for (const [label, key] of MODES) {
      const l = latency[key][size];
      if (!l) { log(`memory recall over ${int(size)} (${label}): not measured (BENCH_MEMORY_HYBRID_MAX=${HYBRID_MAX})`); continue; }
      log(`memory recall over ${int(size)} (${label}, limit 10): ` + Object.entries(l).map(([ql, r]) => `${ql} p50 ${ms(r.p50)} / p95 ${ms(r.p95)}`).join("; "));
    }
  }
  for (const [label, key] of MODES) {
    for (const b of batchRates[key]) {
      const embed = b.drain ? `; then embedding them took ${(b.drain[0] / 1000).toFixed(1)} s (${b.drain[1]} requests of ≤32 texts, after the answers; ${int((b.to - b.from) / ((b.drain[0]) / 1000))} memories/s), ${int((b.to - b.from) / ((b.to - b.from) / b.rate + b.drain[0] / 1000))} memories/s end to end` : "";
      log(`memory write (batches of 1,000, ${label}, store ${int(b.from)} → ${int(b.to)}): ${int(b.rate)} memories/s${embed}`);
    }
  }

  }

  // ── 4. Inject latency in a turn ───────────────────────────────────────────────────────────────
  if (PARTS.has("inject")) {
  progress("inject");
  for (const [label, key] of MODES) {
    const call = client(workers[key], "inject");
    await call("POST", "/memories/batch", { memories: Array.from({ length: 1000 }, syntheticMemory) });
    if (key === "hybrid") await drainEmbeddings();
    const on = [];
    const off = [];
    let injected = 0;
    let blockChars = 0;
    for (let i = 0; i < 62; i++) {
      const memory = i % 2 === 0;
      model.reset();
      model.reply({ content: "A short answer of a few words." });
      const body = { message: { id: `q${i}`, role: "user", parts: [{ type: "text", text: question() }] }, ...(memory ? {} : { memory: false }) };
      const [t, r] = await timed(() => call("POST", "/sessions/t/chat", body));
      if (i < 2) continue; // warm-up: the session's first turns
      (memory ? on : off).push(t);
      const ids = r.messages[0].metadata?.memories ?? [];
      if (memory) {
        injected += ids.length;
        const sys = model.requests[0].body.messages.filter((m) => m.role === "system");
        blockChars += sys.length > 1 ? sys[1].content.length : 0;
      } else if (ids.length) progress(`inject: a memory:false turn got memories ${ids}`);
    }
    const [pOn, pOff] = [pct(on, 50), pct(off, 50)];
    log(`memory inject (1,000 memories, ${label}, instant local model): turn p50 ${ms(pOn)} with inject vs ${ms(pOff)} with "memory": false, +${ms(pOn - pOff)}; p95 ${ms(pct(on, 95))} vs ${ms(pct(off, 95))}; ${f2(injected / on.length)} facts injected per turn (${int(blockChars / on.length)} chars)`);
  }
  }
  for (const key of Object.keys(workers)) { await workers[key].stop(); delete workers[key]; }
  await minilm?.close();

  // ── 5. Extraction cost per turn ───────────────────────────────────────────────────────────────
  if (PARTS.has("extract")) {
  progress("extraction");
  workers.extract = await startWorker({ persistDir: join(dir, "extract"), apiToken: "bench", vars: { ...LLM, ...EMBEDDINGS, SESSION_CONFIG: JSON.stringify({ memory: true }) } });
  {
    const call = client(workers.extract, "extract");
    await call("POST", "/memories/batch", { memories: Array.from({ length: 1000 }, syntheticMemory) });
    await drainEmbeddings();
    const TURNS = 20;
    const per = { calls: [], consolidations: [], extractChars: [], answerChars: [], embedRequests: [], embedTexts: [], after: [] };
    const charsOf = (req) => (req.body.messages ?? []).reduce((a, m) => a + (typeof m.content === "string" ? m.content.length : JSON.stringify(m.content ?? "").length), 0);
    let facts = 0;
    for (let i = 0; i < TURNS; i++) {
      model.reset();
      const rel = pick(RELS), name = pick(NAMES), verb = pick(VERBS), adj = pick(ADJS), obj = pick(OBJS), city = pick(CITIES), day = pick(DAYS);
      const list = [{ fact: `The user's ${rel} ${name} ${verb} ${adj} ${obj} in ${city} on ${day}s.`, score: 0.9, tags: ["family"] }];
      if (i % 2 === 1) list.push({ fact: `The user wants to visit ${city} in ${pick(MONTHS)}.`, score: 0.8, tags: ["travel"] });
      facts += list.length;
      model.reply(
        { content: "Noted, that sounds lovely." },
        { content: JSON.stringify({ facts: list }) },
        // One decision per fact that has similar memories (extra ones are dropped by the next reset()).
        ...list.map((f, j) => ({ content: JSON.stringify({ memory: [{ id: "new", text: f.fact, event: j === 0 ? "ADD" : "NONE" }] }) })),
      );
      const text = `My ${rel} ${name} ${verb} ${adj} ${obj} in ${city} every ${day}.` + (i % 2 ? ` I'd love to visit ${city} too.` : "");
      await call("POST", `/sessions/x/chat`, { message: { id: `x${i}`, role: "user", parts: [{ type: "text", text }] } });
      const answered = performance.now();
      // After the answer: wait until the model has heard nothing new for 300 ms.
      let last = -1, lastChange = performance.now(), lastAt = answered;
      for (;;) {
        const n = model.requests.length + model.embeddingRequests.length;
        if (n !== last) { last = n; lastChange = performance.now(); if (model.requests.length > 1) lastAt = lastChange; }
        if (model.requests.length >= 2 && performance.now() - lastChange > 300) break;
        if (performance.now() - answered > 15_000) { progress(`extraction: turn ${i} still busy after 15 s`); break; }
        await new Promise((r) => setTimeout(r, 10));
      }
      const [answer, ...after] = model.requests;
      per.calls.push(after.length);
      per.consolidations.push(after.length - 1);
      per.answerChars.push(charsOf(answer));
      per.extractChars.push(after.reduce((a, r) => a + charsOf(r), 0));
      per.embedRequests.push(model.embeddingRequests.length);
      per.embedTexts.push(model.embeddingRequests.reduce((a, r) => a + (Array.isArray(r.body.input) ? r.body.input.length : 1), 0));
      per.after.push(lastAt - answered);
    }
    const avg = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
    log(`memory extraction (${TURNS} turns, ${facts} facts scripted, 1,000 memories stored, hybrid): ${f2(avg(per.calls))} model calls per turn after the answer ` +
      `(1 extraction + ${f2(avg(per.consolidations))} consolidation: ${per.consolidations.reduce((a, b) => a + b, 0)} of the ${facts} facts had similar memories), ${int(avg(per.extractChars))} prompt chars per turn (~${int(avg(per.extractChars) / 4)} tokens) ` +
      `vs ${int(avg(per.answerChars))} for the answer itself; ${f2(avg(per.embedRequests))} embeddings requests (${f2(avg(per.embedTexts))} texts) per turn; ` +
      `the last model call ~${ms(pct(per.after, 50))} after the answer (p50)`);
    log(`  (the scripted server reports a fixed usage of 100 prompt + 20 completion tokens per call, so tokens here are prompt chars / 4)`);
  }
  }
} finally {
  for (const w of Object.values(workers)) await w.stop().catch(() => {});
  await model.close();
  await minilm?.close();
  rmSync(dir, { recursive: true, force: true });
  progress(`done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

// ── Metrics and the BM25 baseline ────────────────────────────────────────────────────────────────

/** recall@5, MRR@10, nDCG@10 (binary relevance) of `ranked` ids. */
function metrics(ranked, relevant) {
  const rel = new Set(relevant);
  const top = ranked.slice(0, 10);
  const r5 = ranked.slice(0, 5).filter((id) => rel.has(id)).length / rel.size;
  const first = top.findIndex((id) => rel.has(id));
  let dcg = 0, idcg = 0;
  top.forEach((id, i) => { if (rel.has(id)) dcg += 1 / Math.log2(i + 2); });
  for (let i = 0; i < Math.min(rel.size, 10); i++) idcg += 1 / Math.log2(i + 2);
  return { r5, mrr: first < 0 ? 0 : 1 / (first + 1), ndcg: dcg / idcg };
}

function tokens(t) { return t.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []; }

/** A BM25 index of facts (text and tags as one field). */
function bm25Index(facts) {
  const docs = facts.map((f) => tokens(`${f.content} ${f.tags.join(" ")}`));
  const df = new Map();
  for (const d of docs) for (const t of new Set(d)) df.set(t, (df.get(t) ?? 0) + 1);
  const avgdl = docs.reduce((a, d) => a + d.length, 0) / docs.length;
  return { docs, df, avgdl, n: docs.length };
}

/** Indexes of the facts matching any query term, best first (ties: the later fact first, as the service). */
function bm25Rank({ docs, df, avgdl, n }, q, k1 = 1.2, b = 0.75) {
  const terms = [...new Set(tokens(q))];
  const scored = [];
  docs.forEach((d, i) => {
    let s = 0;
    for (const t of terms) {
      const tf = d.filter((x) => x === t).length;
      if (!tf) continue;
      const nt = df.get(t);
      const idf = Math.log(1 + (n - nt + 0.5) / (nt + 0.5));
      s += idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * d.length / avgdl));
    }
    if (s > 0) scored.push([i, s]);
  });
  scored.sort((x, y) => y[1] - x[1] || y[0] - x[0]);
  return scored.map(([i]) => i);
}
