// Retrieval over long multi-session conversations, against local workerd (Miniflare running the
// built Worker + DO, persisted to a temporary directory). Prints figures; asserts nothing;
// progress goes to stderr. Run: node bench/conversations.mjs (after `bash scripts/build.sh`), or
// `npm run bench`, which runs it after bench/memory.mjs.
//
// The corpus (bench/conversations-corpus.mjs): conversations of a user and an assistant, each
// several hundred turns over 8–12 sessions, facts about the user stated along the way (some
// changed later), and questions in plain language whose answering turns are marked. Each
// conversation is loaded, through the API, into one agent of each of two Workers: "full text"
// (no embeddings) and "with embeddings" (EMBEDDINGS_* set: the real local model when
// tests/e2e/minilm.mjs is there, else the hashed stand-in of tests/e2e/llm-server.mjs; see
// BENCH_CONV_EMBEDDINGS). Then, for every question, as asked (no rewriting):
//
//  1. history search: GET /search?q=<question>&limit=10 (across the agent's sessions)
//  2. memory recall over the same turns: each turn stored as a memory (POST /memories/batch,
//     its session and message as its source), GET /memories/search?q=<question>
//  3. the baseline of the same run: plain BM25 computed here over the same turns, an OR of the
//     question's words without stop words, tokenized and stemmed as FTS5's `porter unicode61`
//     and scored with FTS5's bm25 formula (bench/fts.mjs)
//
// Figures per question kind (paraphrase / lexical / current; see the corpus) and overall:
//   hit@10     an answering turn is among the first 10
//   recall@10  the share of the question's answering turns among the first 10
//   MRR@10     1 / rank of the first answering turn (0 if not in the first 10)
//   outdated above its correction: of the "current" questions, those where a turn of the
//     earlier version ranks above every turn of the newest (or is in the top 10 without it)
//
// Memory recall counts each hit as recalled (recallCount + 1), and the count is a ranking
// signal (5 % of the score): to rank every question as a fresh store would without seeding the
// store again for each one, memory hits are asked 50 at a time and ranked by their score
// without the frequency term (0.70 · relevance + 0.15 · confidence + 0.10 · recency, from the
// hit's signals; docs/openapi.yaml, MemoryHit.score). Once per conversation and
// Worker the store is seeded again and the question whose ranking that correction changed most
// is asked on it, to check the correction (printed). BENCH_CONV_RESEED=1 seeds again before
// every memory question instead (exact, slow with a real model).
//
// Options (environment variables):
//   BENCH_CONV_COUNT        conversations (default 8; each ~300–450 turns, ~40 questions)
//   BENCH_CONV_SEED         the corpus's seed (default 20261127)
//   BENCH_CONV_CORPUS       ours (default: bench/conversations-corpus.mjs), or the path of a LoCoMo
//                           JSON file or folder (bench/locomo.mjs: a corpus we did not write; its
//                           question kinds are LoCoMo's categories)
//   BENCH_CONV_EMBEDDINGS   auto (default: minilm if tests/e2e/minilm.mjs exists, else hashed),
//                           minilm, hashed, or off (the "with embeddings" Worker is left out)
//   BENCH_CONV_PARTS        history,memory (default both)
//   BENCH_CONV_JOIN=G       each session's turns joined G at a time into one message (a long
//                           message: its answers are the messages holding an answering turn), to
//                           measure how long messages are found (neither corpus has a turn past
//                           800 bytes; the service embeds a message in parts of ~1,000 bytes)
//   BENCH_CONV_RESEED=1     memory recall on a freshly seeded store for every question
//   BENCH_CONV_MISSES=text|hybrid|bm25  list on stderr, for that system, the questions whose
//                           answering turns are not in the history search's top 10
//   BENCH_CONVERSATIONS=0   (read by bench/bench.mjs) skip this benchmark under `npm run bench`
//   RERANK_*                passed to every Worker as they are (docs/REFERENCE.md#re-ranking):
//                           RERANK_PROVIDER=http RERANK_BASE_URL=… RERANK_MODEL=… measures the
//                           history search with a real re-ranker (the memory part re-sorts the
//                           hits by their scores, so it measures the ranking without it)
import http from "node:http";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startScripted, EMBEDDING_DIMS } from "../tests/e2e/llm-server.mjs";
import { buildConversations, checkCorpus, corpusStats } from "./conversations-corpus.mjs";
import { loadLocomo } from "./locomo.mjs";
import { bm25Index, bm25Rank } from "./fts.mjs";
import { pct, ms, int, log, progress as progressFor, timed, client as textClient } from "./lib.mjs";

const COUNT = Number(process.env.BENCH_CONV_COUNT ?? 8);
const SEED = Number(process.env.BENCH_CONV_SEED ?? 20261127);
const EMBEDDINGS = process.env.BENCH_CONV_EMBEDDINGS ?? "auto";
const PARTS = new Set((process.env.BENCH_CONV_PARTS ?? "history,memory").split(","));
const RESEED = process.env.BENCH_CONV_RESEED === "1";
const MISSES = process.env.BENCH_CONV_MISSES;
/** The weight of the frequency signal in a memory hit's score (docs/openapi.yaml, MemoryHit). */
const FREQUENCY_WEIGHT = 0.05;
const CORPUS = process.env.BENCH_CONV_CORPUS ?? "ours";
const MINILM = join(dirname(fileURLToPath(import.meta.url)), "..", "tests", "e2e", "minilm.mjs");

const progress = progressFor("bench conversations");
const f2 = (x) => x.toFixed(2);
const sleep = (t) => new Promise((r) => setTimeout(r, t));

/** lib.mjs's client, answering parsed JSON (null for an empty answer). */
function client(w, agent) {
  const call = textClient(w, agent);
  return async (method, path, body) => {
    const text = await call(method, path, body);
    return text ? JSON.parse(text) : null;
  };
}

// ── The embeddings server: the one switch, and a counting proxy in front of it ─────────────────────

/** The embeddings server BENCH_CONV_EMBEDDINGS asks for: {label, baseUrl, model, close} or null. */
async function embeddingsServer(choice) {
  if (choice === "off") return null;
  if (choice === "minilm" || (choice === "auto" && existsSync(MINILM))) {
    try {
      const mod = await import(pathToFileURL(MINILM).href);
      const s = await mod.start();
      return { label: `all-MiniLM-L6-v2, local (tests/e2e/minilm.mjs)`, baseUrl: s.baseUrl, model: s.model ?? "all-MiniLM-L6-v2",
        close: async () => { await (s.close ?? s.stop)?.call(s); } };
    } catch (e) {
      if (choice === "minilm") throw e;
      progress(`tests/e2e/minilm.mjs did not start (${e.message}); using the hashed stand-in`);
    }
  } else if (choice !== "auto" && choice !== "hashed") throw new Error(`BENCH_CONV_EMBEDDINGS: auto, minilm, hashed or off, not ${choice}`);
  const s = await startScripted();
  return { label: `hashed stand-in (tests/e2e/llm-server.mjs: a ${EMBEDDING_DIMS}-dim bag of words; texts sharing no word are unrelated to it)`,
    baseUrl: s.baseUrl, model: "hashed-bag-of-words", close: () => s.close() };
}

/**
 * A proxy on 127.0.0.1 in front of `upstream` that counts what goes through: requests, texts,
 * requests in flight, the time of the last activity. The Worker is pointed at it, so the bench
 * sees when the service has stopped embedding, whichever server answers.
 */
async function countingProxy(upstream) {
  const st = { requests: 0, texts: 0, inFlight: 0, failed: 0, lastAt: performance.now() };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      st.inFlight++;
      st.requests++;
      st.lastAt = performance.now();
      const body = Buffer.concat(chunks);
      try {
        const input = JSON.parse(body.toString("utf8")).input;
        st.texts += Array.isArray(input) ? input.length : 1;
      } catch { /* not JSON: forwarded as it is */ }
      try {
        const headers = { "content-type": req.headers["content-type"] ?? "application/json" };
        if (req.headers.authorization) headers.authorization = req.headers.authorization;
        const r = await fetch(upstream.baseUrl + req.url.replace(/^\/v1/, ""), { method: req.method, headers, body: req.method === "GET" ? undefined : body });
        const out = Buffer.from(await r.arrayBuffer());
        if (r.status >= 400) st.failed++;
        res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
        res.end(out);
      } catch (e) {
        st.failed++;
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `proxy: ${e.message}` } }));
      } finally {
        st.inFlight--;
        st.lastAt = performance.now();
      }
    });
  });
  await new Promise((resolve, reject) => { server.once("error", reject); server.listen(0, "127.0.0.1", resolve); });
  return { st, baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    close: () => new Promise((resolve) => { server.close(() => resolve()); server.closeAllConnections?.(); }) };
}

// ── Set-up ─────────────────────────────────────────────────────────────────────────────────────────
const started = performance.now();
const corpus = CORPUS === "ours" ? buildConversations({ count: COUNT, seed: SEED }) : loadLocomo(CORPUS);
if (CORPUS === "ours") for (const p of checkCorpus(corpus)) progress(`corpus problem: ${p}`);
const JOIN = Number(process.env.BENCH_CONV_JOIN ?? 1);
if (JOIN > 1) joinTurns(corpus, JOIN);

/** Joins each session's turns `g` at a time into one (the first one's id and role), in place. */
function joinTurns(corpus, g) {
  const bytes = [];
  for (const conv of corpus.conversations) {
    const groupOf = new Map();
    for (const ses of conv.sessions) {
      const joined = [];
      for (let i = 0; i < ses.turns.length; i += g) {
        const ts = ses.turns.slice(i, i + g);
        ts.forEach((t) => groupOf.set(t.id, ts[0].id));
        joined.push({ ...ts[0], text: ts.map((t) => t.text).join("\n") });
        bytes.push(Buffer.byteLength(joined.at(-1).text));
      }
      ses.turns = joined;
    }
    for (const q of conv.questions) q.answers = [...new Set(q.answers.map((a) => groupOf.get(a) ?? a))];
  }
  bytes.sort((a, b) => a - b);
  progress(`turns joined ${g} at a time: ${bytes.length} messages, bytes p50 ${bytes[bytes.length >> 1]}, p90 ${bytes[Math.floor(bytes.length * 0.9)]}`);
}
const stats = corpus.stats ?? corpusStats(corpus);
const KINDS = corpus.kinds ?? ["paraphrase", "lexical", "current"];
const dir = mkdtempSync(join(tmpdir(), "sa-bench-conv-"));
const upstream = await embeddingsServer(EMBEDDINGS);
const proxy = upstream ? await countingProxy(upstream) : null;
const workers = {};
const MODES = [["full text", "text"], ...(proxy ? [["with embeddings", "hybrid"]] : [])];
// The same-run baselines: bm25 here, and with an embeddings server the same model's vectors
// ranked here by cosine alone (dense) and fused with bm25 by reciprocal rank (1 : 1, K = 60).
// BENCH_CONV_FUSIONS=w1,w2,…: also the service's own full-text list (top 50) fused here with the
// dense list by weighted reciprocal rank, meaning weighed w against the words' 1 (to choose the
// service's fusion by measurement).
const FUSIONS = (process.env.BENCH_CONV_FUSIONS ?? "").split(",").filter(Boolean).map(Number);
const SYSTEMS = [...MODES.map(([, k]) => k), "bm25", ...(upstream ? ["dense", "rrf", ...FUSIONS.map((w) => `text+dense ${w}`)] : [])];
const LABEL = { text: "full text", hybrid: "with embeddings", bm25: "bm25 OR (JS)", dense: "dense (JS)", rrf: "bm25+dense RRF (JS)",
  ...Object.fromEntries(FUSIONS.map((w) => [`text+dense ${w}`, `text+dense 1:${w}`])) };

/** `texts` embedded by the embeddings server itself (not through the proxy), 64 a request. */
async function embedAll(texts) {
  const out = [];
  for (let i = 0; i < texts.length; i += 64) {
    const r = await fetch(`${upstream.baseUrl}/embeddings`, { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: upstream.model, input: texts.slice(i, i + 64) }) });
    if (!r.ok) throw new Error(`embeddings for the dense baseline: ${r.status} ${await r.text()}`);
    for (const d of (await r.json()).data) out.push(d.embedding);
  }
  return out;
}
const cos = (a, b) => {
  let d = 0, x = 0, y = 0;
  for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; x += a[i] * a[i]; y += b[i] * b[i]; }
  return d / (Math.sqrt(x * y) || 1);
};
/** Reciprocal rank fusion of lists of ids (best first), K = 60, list i weighed weights[i] (1). */
function rrf(lists, n, weights = []) {
  const score = new Map();
  lists.forEach((list, l) => list.forEach((id, r) => score.set(id, (score.get(id) ?? 0) + (weights[l] ?? 1) / (60 + r + 1))));
  return [...score].sort((a, b) => b[1] - a[1]).slice(0, n).map(([id]) => id);
}

/**
 * Waits until the service has embedded what it embeds after a write: at least `texts` more
 * texts sent to the embeddings server since `since` (when known), nothing in flight and nothing
 * new for 400 ms; then, if memories carry `embeddedAt`, until none of `call`'s agent lacks it.
 */
async function settle(call, since, texts = 0, timeoutMs = 900_000) {
  const t0 = performance.now();
  for (;;) {
    await sleep(50);
    const quiet = proxy.st.inFlight === 0 ? performance.now() - Math.max(proxy.st.lastAt, t0) : 0;
    if (performance.now() - t0 > timeoutMs) { progress(`embeddings still busy after ${timeoutMs / 1000} s; going on`); return; }
    if (quiet < 400) continue;
    if (proxy.st.texts - since < texts) {
      if (quiet < 5000) continue;
      progress(`embeddings: expected ${texts} texts, the server saw ${proxy.st.texts - since}, and nothing for 5 s; going on`);
      return;
    }
    const waiting = PARTS.has("memory") ? await unembedded(call) : null;
    if (!waiting) return;
    if (quiet > 30_000) { progress(`embeddings: ${waiting} memories without embeddedAt after 30 s of quiet; going on`); return; }
  }
}
/** Memories without a vector, when memories say (`embeddedAt`); null when they do not. */
async function unembedded(call) {
  let cursor = null, n = 0, said = false;
  do {
    const page = await call("GET", `/memories?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    for (const m of page.memories) if ("embeddedAt" in m) { said = true; if (m.embeddedAt == null) n++; }
    cursor = page.nextCursor;
  } while (cursor);
  return said ? n : null;
}

const scores = {}; // part -> system -> kind -> [{hit, recall, rr}]
const stale = {}; // part -> system -> {outranked, missing, n}
const lat = {}; // part -> system -> [ms]
for (const part of ["history", "memory"]) {
  scores[part] = Object.fromEntries(SYSTEMS.map((s) => [s, Object.fromEntries(KINDS.map((k) => [k, []]))]));
  stale[part] = Object.fromEntries(SYSTEMS.map((s) => [s, { outranked: 0, missing: 0, n: 0 }]));
  lat[part] = Object.fromEntries(SYSTEMS.map((s) => [s, []]));
}
const loads = { text: { ms: 0 }, hybrid: { ms: 0, settleMs: 0, requests: 0, texts: 0 } };
const checks = { text: { same: 0, n: 0, changed: 0 }, hybrid: { same: 0, n: 0, changed: 0 } };
let memoriesStored = 0;

function record(part, system, q, ranked) {
  const top = ranked.slice(0, 10);
  const ans = new Set(q.answers);
  const found = top.filter((id) => ans.has(id)).length;
  const first = top.findIndex((id) => ans.has(id));
  scores[part][system][q.kind].push({ hit: first >= 0 ? 1 : 0, recall: found / ans.size, rr: first < 0 ? 0 : 1 / (first + 1) });
  if (q.kind === "current") {
    const old = new Set(q.outdated);
    const [o, c] = [top.findIndex((id) => old.has(id)), first];
    const st = stale[part][system];
    st.n++;
    if (o >= 0 && (c < 0 || o < c)) st.outranked++;
    if (c < 0) st.missing++;
  }
  if (part === "history" && MISSES === system && first < 0) {
    progress(`miss (${system}, ${q.kind}): ${JSON.stringify(q.q)} wants ${q.answers.join(", ")}; top 3: ${top.slice(0, 3).join(", ") || "nothing"}`);
  }
}

/**
 * The memory hits ranked as on a fresh store, as turn ids. The score without its frequency term,
 * 0.70 · relevance + 0.15 · confidence + 0.10 · recency from the unrounded signals (the weights of
 * docs/openapi.yaml, MemoryHit.score), rounded to 4 decimals as the service rounds; ties the later
 * stored first, as the service (the turns are stored in conversation order: `order` is a turn's
 * position). A hit whose answered score is not that formula plus 0.05 · frequency (the ranking
 * changed) is ranked by its score minus 0.05 · frequency instead, and counted in `offFormula`.
 */
let offFormula = 0;
function freshOrder(results, order) {
  return results
    .map((h) => {
      const id = h.memory.source?.messageId ?? `?${h.memory.id}`;
      const g = h.signals ?? {};
      let s = 0.7 * g.relevance + 0.15 * g.confidence + 0.1 * g.recency;
      if (!(Math.abs(Math.round((s + FREQUENCY_WEIGHT * g.frequency) * 1e4) / 1e4 - h.score) <= 1e-4)) {
        offFormula++;
        s = h.score - FREQUENCY_WEIGHT * (g.frequency ?? 0);
      }
      return { id, s: Math.round(s * 1e4), at: order.get(id) ?? -1 };
    })
    .sort((a, b) => b.s - a.s || b.at - a.at)
    .map((x) => x.id);
}

try {
  const rerank = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("RERANK_")));
  if (rerank.RERANK_PROVIDER) progress(`re-ranked by ${rerank.RERANK_PROVIDER} ${rerank.RERANK_MODEL ?? ""} ${rerank.RERANK_BASE_URL ?? ""}`);
  const vars = (key) => ({ ...rerank,
    ...(key === "hybrid" ? { EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: proxy.baseUrl, EMBEDDINGS_MODEL: upstream.model } : {}) });
  for (const [, key] of MODES) workers[key] = await startWorker({ persistDir: join(dir, key), apiToken: "bench", vars: vars(key) });

  for (const conv of corpus.conversations) {
    const turns = conv.sessions.flatMap((s) => s.turns);
    const order = new Map(turns.map((t, i) => [t.id, i]));
    const sessionOf = new Map(conv.sessions.flatMap((s) => s.turns.map((t) => [t.id, s.id])));
    const memories = turns.map((t) => ({ content: t.text, sessionId: sessionOf.get(t.id), messageId: t.id }));
    const calls = {};
    /** Stores the turns as memories (after forgetting all): the stored count and where the
     * embeddings server's text count stood before. */
    const storeMemories = async (key) => {
      const call = calls[key];
      await call("DELETE", "/memories");
      const since = proxy?.st.texts ?? 0;
      const ids = new Set();
      for (let i = 0; i < memories.length; i += 1000) {
        const r = await call("POST", "/memories/batch", { memories: memories.slice(i, i + 1000) });
        for (const m of r.memories) ids.add(m.id);
      }
      return { stored: ids.size, since };
    };
    const seedMemories = async (key) => {
      const { stored, since } = await storeMemories(key);
      if (key === "hybrid") await settle(calls[key], since, stored);
    };

    // Load: the sessions in order (one batch each), then the turns as memories; then, with
    // embeddings, wait until the service has embedded what it embeds.
    for (const [label, key] of MODES) {
      const call = (calls[key] = client(workers[key], conv.agent));
      const [since, requests] = [proxy?.st.texts ?? 0, proxy?.st.requests ?? 0];
      let mem = { stored: 0, since };
      const [t] = await timed(async () => {
        for (const s of conv.sessions) {
          await call("POST", `/sessions/${s.id}/messages/batch`, { messages: s.turns.map((x) => ({ id: x.id, role: x.role, parts: [{ type: "text", text: x.text }] })) });
        }
        if (PARTS.has("memory")) mem = await storeMemories(key);
      });
      loads[key].ms += t;
      if (key === "text") memoriesStored += mem.stored;
      if (key === "hybrid") {
        const [s] = await timed(() => settle(call, mem.since, mem.stored));
        loads.hybrid.settleMs += s;
        loads.hybrid.requests += proxy.st.requests - requests;
        loads.hybrid.texts += proxy.st.texts - since;
      }
      progress(`${conv.id} (${turns.length} turns, ${conv.questions.length} questions): loaded into "${label}" in ${(t / 1000).toFixed(1)} s`);
    }

    // The questions.
    const index = bm25Index(turns.map((t) => t.text));
    const corrected = { text: new Map(), hybrid: new Map() };
    const turnVectors = upstream ? await embedAll(turns.map((t) => t.text)) : null;
    const questionVectors = upstream ? await embedAll(conv.questions.map((q) => q.q)) : null;
    for (const [qi, q] of conv.questions.entries()) {
      const [tb, ranked] = await timed(async () => bm25Rank(index, q.q).slice(0, 10).map((i) => turns[i].id));
      for (const part of ["history", "memory"]) if (PARTS.has(part)) { record(part, "bm25", q, ranked); lat[part].bm25.push(tb); }
      if (upstream) {
        const dense = turnVectors.map((v, i) => [i, cos(v, questionVectors[qi])]).sort((a, b) => b[1] - a[1]).slice(0, 100).map(([i]) => turns[i].id);
        const fused = rrf([bm25Rank(index, q.q).slice(0, 100).map((i) => turns[i].id), dense], 10);
        for (const part of ["history", "memory"]) if (PARTS.has(part)) { record(part, "dense", q, dense); record(part, "rrf", q, fused); }
      }
      for (const [, key] of MODES) {
        const call = calls[key];
        if (PARTS.has("history")) {
          const [t, r] = await timed(() => call("GET", `/search?q=${encodeURIComponent(q.q)}&limit=10`));
          lat.history[key].push(t);
          record("history", key, q, r.results.map((h) => h.id));
          if (key === "text" && FUSIONS.length && upstream) {
            const words = (await call("GET", `/search?q=${encodeURIComponent(q.q)}&limit=50`)).results.map((h) => h.id);
            const dense = turnVectors.map((v, i) => [i, cos(v, questionVectors[qi])]).sort((a, b) => b[1] - a[1]).slice(0, 50).map(([i]) => turns[i].id);
            for (const w of FUSIONS) record("history", `text+dense ${w}`, q, rrf([words, dense], 10, [1, w]));
          }
        }
        if (PARTS.has("memory")) {
          if (RESEED) await seedMemories(key);
          const [t, r] = await timed(() => call("GET", `/memories/search?q=${encodeURIComponent(q.q)}&limit=50`));
          lat.memory[key].push(t);
          const fresh = freshOrder(r.results, order).slice(0, 10);
          const raw = r.results.slice(0, 10).map((h) => h.memory.source?.messageId);
          const moved = fresh.filter((id, i) => raw[i] !== id).length;
          if (moved) checks[key].changed++;
          corrected[key].set(q.id, { fresh, moved });
          record("memory", key, q, fresh);
        }
      }
    }

    // The frequency correction checked: the question it changed most, on a fresh store.
    if (PARTS.has("memory") && !RESEED) {
      for (const [, key] of MODES) {
        const [qid, c] = [...corrected[key]].sort((a, b) => b[1].moved - a[1].moved)[0] ?? [];
        if (!c?.moved) continue;
        await seedMemories(key);
        const q = conv.questions.find((x) => x.id === qid);
        const r = await calls[key]("GET", `/memories/search?q=${encodeURIComponent(q.q)}&limit=10`);
        const fresh = r.results.map((h) => h.memory.source?.messageId);
        checks[key].n++;
        if (fresh.join() === c.fresh.join()) checks[key].same++;
        else progress(`frequency correction (${key}) for ${JSON.stringify(q.q)}: corrected ${c.fresh.join(" ")} vs fresh ${fresh.join(" ")}`);
      }
    }
    progress(`${conv.id}: ${conv.questions.length} questions asked`);
  }

  // ── Printing ───────────────────────────────────────────────────────────────────────────────────
  const k = stats.byKind;
  log(`── retrieval over long conversations (bench/conversations.mjs; corpus ${CORPUS === "ours" ? `bench/conversations-corpus.mjs, seed ${SEED}` : `LoCoMo (bench/locomo.mjs) from ${CORPUS}`}) ──`);
  log(`corpus: ${stats.conversations} conversation${stats.conversations === 1 ? "" : "s"} (one agent each), ${stats.sessions} sessions of ${stats.turnsPerSession.join("–")} turns, ` +
    `${int(stats.turns)} turns (${stats.turnsPerConversation.join("–")} per conversation, ${int(stats.userTurns)} by the user, ${int(stats.words)} words); ` +
    `${stats.facts} facts, ${stats.changed} of them changed later; ${stats.questions} questions: ${KINDS.map((x) => `${k[x] ?? 0} ${x}`).join(", ")}; ` +
    `${f2(stats.answerTurns / stats.questions)} answering turns per question`);
  log(`embeddings ("with embeddings"): ${upstream ? `${upstream.label}, model name "${upstream.model}"` : "off (BENCH_CONV_EMBEDDINGS=off)"}`);
  const load = MODES.map(([label, key]) => `${label} ${(loads[key].ms / 1000).toFixed(1)} s`).join(", ");
  const emb = proxy ? `; then embedding took ${(loads.hybrid.settleMs / 1000).toFixed(1)} s (${int(loads.hybrid.requests)} requests, ${int(loads.hybrid.texts)} texts${proxy.st.failed ? `, ${proxy.st.failed} failed` : ""})` : "";
  log(`load (sessions as message batches${PARTS.has("memory") ? `, then ${int(memoriesStored)} memories: the turns, identical texts merged` : ""}): ${load}${emb}`);
  const cell = (part, s, kinds) => {
    const xs = kinds.flatMap((x) => scores[part][s][x]);
    if (!xs.length) return "–";
    const avg = (f) => xs.reduce((a, m) => a + m[f], 0) / xs.length;
    return `${f2(avg("hit"))} / ${f2(avg("recall"))} / ${f2(avg("rr"))}`;
  };
  const table = (part, title) => {
    log(title);
    log(`  ${"".padEnd(18)}${SYSTEMS.map((s) => LABEL[s].padEnd(22)).join("")}`);
    for (const [name, kinds] of [...KINDS.map((x) => [x, [x]]), ["all", KINDS]]) {
      const n = kinds.reduce((a, x) => a + scores[part].bm25[x].length, 0);
      log(`  ${`${name} (${n})`.padEnd(18)}${SYSTEMS.map((s) => cell(part, s, kinds).padEnd(22)).join("")}`);
    }
    const st = (s) => `${stale[part][s].outranked}/${stale[part][s].n}` + (stale[part][s].missing ? ` (newest not in top 10: ${stale[part][s].missing})` : "");
    if (KINDS.includes("current")) log(`  outdated turn above its correction (current questions, top 10): ${SYSTEMS.map((s) => `${LABEL[s]} ${st(s)}`).join("; ")}`);
    log(`  latency p50 / p95 / p99: ${MODES.map(([label, key]) => `${label} ${ms(pct(lat[part][key], 50))} / ${ms(pct(lat[part][key], 95))} / ${ms(pct(lat[part][key], 99))}`).join("; ")}`);
  };
  if (PARTS.has("history")) table("history", "history search, GET /search?q=<question>&limit=10 across sessions: hit@10 / recall@10 / MRR@10");
  if (PARTS.has("memory")) {
    table("memory", "memory recall, every turn a memory, GET /memories/search?q=<question>&limit=50, its top 10: hit@10 / recall@10 / MRR@10 (bm25 column: the same turns)");
    if (RESEED) log("  (each memory question on a freshly seeded store)");
    else {
      log(`  (ranked as a fresh store would, the score's frequency term (recall counts) taken out, over the first 50 hits; that changed the top 10 of ` +
        `${MODES.map(([label, key]) => `${checks[key].changed} questions (${label})`).join(", ")}; checked against a freshly seeded store on ` +
        `${MODES.map(([label, key]) => `${checks[key].same}/${checks[key].n} (${label})`).join(", ")} of them` +
        `${offFormula ? `; ${offFormula} hits' scores were not the documented formula, so only their frequency term was taken out` : ""})`);
    }
  }
  log(`  (bm25 OR: the question's words without stop words, porter unicode61 tokens as FTS5, FTS5's bm25 with k1 = 1.2, b = 0.75, over each conversation's turns; ` +
    `kinds: paraphrase shares no rare word with its answering turns, lexical does (a stem in ≤ 2 % of the conversation's turns), current asks for the newest version of a changed fact)`);
} finally {
  for (const w of Object.values(workers)) await w.stop().catch(() => {});
  await proxy?.close();
  await upstream?.close();
  rmSync(dir, { recursive: true, force: true });
  progress(`done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}
