// Benchmark against local workerd (Miniflare running the built Worker + DO, persisted to a
// temporary directory). Prints figures; asserts nothing. Run: npm run bench
//
// Options (environment variables):
//   BENCH_SEARCH_SIZES  messages searched, each size in its own agent (default 10000,100000)
//   BENCH_PATHS         path lengths of the history part (default 100,1000,10000)
//   BENCH_DEPTHS        path depths of the appends with compaction configured (default 10,1000,10000)
//   BENCH_MEMORY=0      skip bench/memory.mjs, long-term memory (its own options: at its top)
//   BENCH_QUERIES=0     skip bench/search.mjs: server CPU and wall time of novel plain-word
//                       searches at 1k / 10k / 100k rows, and the 100k / 1k ratio (its own
//                       options, BENCH_QUERY_SIZES, BENCH_QUERY_KINDS, …: at its top)
//   BENCH_VALIDITY=0    skip bench/validity.mjs: outdated facts above their corrections, with and
//                       without supersedes, with the real embedding model and without
//   BENCH_CONVERSATIONS=0  skip bench/conversations.mjs: history search and memory recall with
//                       plain questions over long multi-session conversations, beside a BM25 (OR)
//                       baseline (its own options, BENCH_CONV_COUNT, BENCH_CONV_EMBEDDINGS, …: at its top)
//   BENCH_VECTORS=0     skip bench/vectors.mjs: recall and search by meaning over 1k/10k/100k items
//                       (server CPU, p50/p99, the 100k/1k ratio), embedding calls and latency per
//                       write, the vector index's memory (its own options: at its top)
//   BENCH_SIMILARITY=0  skip bench/similarity.mjs: the similarities of questions to their answers
//                       and of unrelated questions, with all-MiniLM-L6-v2 (the minimum similarity)
//   BENCH_TRANSFER=0    skip bench/transfer.mjs, export / import and token verification (its own
//                       options, BENCH_TRANSFER_MESSAGES, BENCH_TRANSFER_SESSIONS, …: at its top)
//   BENCH_READS=0       skip bench/reads.mjs: every read's server CPU against the empty-DO floor
//                       (its own options, BENCH_READS_PATHS, …: at its top)
//   BENCH_TURNS=0       skip bench/turns.mjs: time from a stop to the model's connection closing,
//                       the resume request's first chunk against the floor, bytes kept per turn
//   BENCH_CLIENTS=0     skip bench/clients.mjs: the AI SDK's chat client on a long branch, and the
//                       sizes of the console, the client package and the Worker package
//   BENCH_DIRECTORY=0   skip bench/directory.mjs: a write's cost with and without the directory, the
//                       alarm's report, pages of 100 of 10,000 entries, the cross-agent export
//   BENCH_SCHEDULES_RUN=0  skip bench/schedules.mjs: the alarm's lateness for schedules due together,
//                       a scheduled run against a plain turn, maintenance per wake-up
//   BENCH_SPACES=0      skip bench/spaces.mjs: a turn's wall and server CPU with a shared memory
//                       space against own memories (the space reachable, then unreachable)
//   BENCH_CACHE=0       skip bench/cache.mjs: input tokens read from / written to the provider's
//                       prompt cache over 50 turns, by chat.cache setting
//   BENCH_OPENAI=0      skip bench/openai.mjs: the OpenAI-compatible face's first streamed token
//                       against POST …/chat on a 1,000-message conversation, and bytes per turn
//                       with previous_response_id against the whole history resent
//   BENCH_TOKENS=0      skip bench/tokens.mjs: our token estimates against a real tokenizer's
//                       counts, before and after the calibration by the provider's usage
//   BENCH_LATENCY=0     skip bench/latency.mjs: a turn's first streamed delta and a new agent's
//                       first request against the floor (its own options: at its top)
//   BENCH_MCP=0         skip bench/mcp.mjs: what one remote MCP tool call adds to a turn (p50,
//                       p99) against a local server, and a new object's first turn that lists
import { gzipSync } from "node:zlib";
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { WORDS, pct, ms, log, progress as progressFor, timed, client } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const SEARCH_SIZES = (process.env.BENCH_SEARCH_SIZES ?? "10000,100000").split(",").map(Number);
const PATHS = (process.env.BENCH_PATHS ?? "100,1000,10000").split(",").map(Number);

let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const sentence = (n = 14) => Array.from({ length: n }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");
const msg = (id, i) => ({ id, role: i % 2 ? "assistant" : "user", parts: [{ type: "text", text: `${sentence()} #${i}` }] });

const progress = progressFor("bench");


async function seedSession(call, sid, n, batch = 500) {
  for (let i = 0; i < n; i += batch) {
    const msgs = [];
    for (let j = i; j < Math.min(n, i + batch); j++) msgs.push(msg(`${sid}-${j}`, j));
    await call("POST", `/sessions/${sid}/messages/batch`, { messages: msgs });
  }
}

async function latency(call, path, runs) {
  const xs = [];
  let bytes = 0;
  for (let i = 0; i < runs; i++) { const [t, body] = await timed(() => call("GET", path)); xs.push(t); bytes = body.length; }
  return { p50: pct(xs, 50), p95: pct(xs, 95), bytes };
}

const dir = mkdtempSync(join(tmpdir(), "sa-bench-"));
let w = await startWorker({ persistDir: dir, apiToken: "bench" });
try {
  const wasm = readFileSync(join(root, "build/index_bg.wasm"));
  const js = readFileSync(join(root, "build/index.js"));
  log(`wasm: ${(wasm.length / 1024).toFixed(0)} KiB raw, ${(gzipSync(wasm).length / 1024).toFixed(0)} KiB gzip; JS glue ${(gzipSync(js).length / 1024).toFixed(1)} KiB gzip`);

  const call = client(w, "bench");
  await call("GET", "/sessions"); // start the DO
  // Appends, one per request.
  const N = 500;
  const appendTimes = [];
  const [appendTotal] = await timed(async () => {
    for (let i = 0; i < N; i++) {
      const [t] = await timed(() => call("POST", "/sessions/appends/messages", { message: msg(`a${i}`, i) }));
      appendTimes.push(t);
    }
  });
  log(`append (1 message/request, sequential): ${(N / (appendTotal / 1000)).toFixed(0)} msg/s, p50 ${ms(pct(appendTimes, 50))}, p95 ${ms(pct(appendTimes, 95))}`);
  const [batchTotal] = await timed(() => seedSession(call, "batched", 20_000, 1000));
  log(`append (batches of 1,000): ${(20_000 / (batchTotal / 1000)).toFixed(0)} msg/s`);

  // History along paths of several lengths.
  for (const n of PATHS) {
    progress(`seeding a path of ${n}`);
    await seedSession(call, `path${n}`, n);
    const r = await latency(call, `/sessions/path${n}/history`, n >= 10_000 ? 10 : 20);
    const recent = await latency(call, `/sessions/path${n}/history/recent?maxBytes=50000`, 20);
    log(`history, path of ${n}: p50 ${ms(r.p50)}, p95 ${ms(r.p95)} (${(r.bytes / 1024).toFixed(0)} KiB); recent 50 KB window: p50 ${ms(recent.p50)}`);
  }

  // Search over 10k and 100k messages, each in its own agent.
  for (const total of SEARCH_SIZES) {
    const agent = `search${total}`;
    const sc = client(w, agent);
    const sessions = Math.max(1, total / 10_000);
    progress(`seeding ${total} messages in ${sessions} sessions`);
    for (let s = 0; s < sessions; s++) await seedSession(sc, `s${s}`, total / sessions, 1000);
    const queries = { "one common word": "deploy", "two words": "memory budget", phrase: '"production database"', prefix: "warehou*", "no hit": "zzzzqqq" };
    for (const [label, q] of Object.entries(queries)) {
      const one = await latency(sc, `/sessions/s0/search?q=${encodeURIComponent(q)}&limit=20`, 20);
      const all = await latency(sc, `/search?q=${encodeURIComponent(q)}&limit=20`, 20);
      log(`search over ${total} (${label}): one session p50 ${ms(one.p50)}, all sessions p50 ${ms(all.p50)} / p95 ${ms(all.p95)}`);
    }
  }

  // Cold start: restart workerd, then the first request to a DO that holds 10,000+ messages.
  const big = PATHS.includes(10_000) ? "path10000" : `path${PATHS[PATHS.length - 1]}`;
  await w.restart();
  const cold = client(w, "bench");
  const [first] = await timed(() => cold("GET", `/sessions/${big}/leaf`));
  const [firstAppend] = await timed(() => cold("POST", `/sessions/${big}/messages`, { message: msg("after-restart", 1) }));
  const warm = await latency(cold, `/sessions/${big}/leaf`, 20);
  log(`cold start (DO with ${20_000 + N + PATHS.reduce((a, b) => a + b, 0)} messages): first request ${ms(first)}, first append ${ms(firstAppend)}; warm leaf p50 ${ms(warm.p50)}`);
  await w.stop();

  // Auto-compaction configured (the threshold never reached, so every append computes the
  // branch estimate and compares): the incremental estimate keeps appends flat in path depth.
  // The reference re-reads and re-parses the whole path on every append here (docs/REFERENCE.md#branch-estimate).
  progress("appends with compaction configured");
  w = await startWorker({ persistDir: dir, apiToken: "bench", vars: { SESSION_CONFIG: JSON.stringify({ compaction: { after: 1e12 } }) } });
  const cc = client(w, "compaction");
  for (const depth of (process.env.BENCH_DEPTHS ?? "10,1000,10000").split(",").map(Number)) {
    const sid = `depth${depth}`;
    await seedSession(cc, sid, depth, 1000);
    const xs = [];
    const [total] = await timed(async () => {
      for (let i = 0; i < 100; i++) {
        const [t] = await timed(() => cc("POST", `/sessions/${sid}/messages`, { message: msg(`${sid}-x${i}`, i) }));
        xs.push(t);
      }
    });
    log(`append with compaction.after set, path depth ${depth}: 100 appends in ${(total / 1000).toFixed(2)} s, p50 ${ms(pct(xs, 50))}, p95 ${ms(pct(xs, 95))}`);
  }

  // A 5 MB tool output: its field spilled to R2 on append, put back on read.
  const huge = { id: "huge", role: "assistant", parts: [{ type: "dynamic-tool", toolName: "fetch", toolCallId: "c", state: "output-available", input: {}, output: "o".repeat(5_000_000) }] };
  const [put] = await timed(() => cc("POST", "/sessions/spill/messages", { message: huge }));
  const read = await latency(cc, "/sessions/spill/messages/huge", 10);
  log(`5 MB tool output: append ${ms(put)} (field to R2), read back p50 ${ms(read.p50)} (${(read.bytes / 1e6).toFixed(1)} MB)`);
  await w.stop();

  // Agent turns against a local scripted model that answers at once (so the figures are our
  // overhead: history, prompt, tools, one transaction, frames): a branch of 1,000 messages,
  // JSON turns and streamed turns (time to the first delta).
  progress("agent turns");
  const model = await startModel();
  try {
    w = await startWorker({ persistDir: dir, apiToken: "bench", vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench" } });
    const tc = client(w, "turns");
    await seedSession(tc, "t", 1000, 1000);
    const turnTimes = [];
    for (let i = 0; i < 30; i++) {
      model.reply({ content: "A short answer of a few words.", pieces: ["A short ", "answer of ", "a few words."], pieceDelayMs: 0 });
      const [t] = await timed(() => tc("POST", "/sessions/t/chat", { message: { id: `q${i}`, role: "user", parts: [{ type: "text", text: sentence() }] } }));
      turnTimes.push(t);
    }
    const firstDelta = [];
    for (let i = 0; i < 20; i++) {
      model.reply({ content: "Streamed answer.", pieces: ["Streamed ", "answer."], pieceDelayMs: 0 });
      const t0 = performance.now();
      const r = await w.fetch("/agents/turns/sessions/t/chat", { method: "POST", headers: { accept: "text/event-stream", "content-type": "application/json" },
        body: JSON.stringify({ message: { id: `sq${i}`, role: "user", parts: [{ type: "text", text: sentence() }] } }) });
      const reader = r.body.getReader();
      await reader.read();
      firstDelta.push(performance.now() - t0);
      while (!(await reader.read()).done) { /* drain */ }
    }
    log(`agent turn (1,000-message branch, instant local model): p50 ${ms(pct(turnTimes, 50))}, p95 ${ms(pct(turnTimes, 95))}; streamed: first delta p50 ${ms(pct(firstDelta, 50))}`);
  } finally {
    await model.close();
  }
} finally {
  await w.stop();
  rmSync(dir, { recursive: true, force: true });
}
if (process.env.BENCH_READS !== "0") await import("./reads.mjs"); // reads against the floor: bench/reads.mjs
if (process.env.BENCH_MEMORY !== "0") await import("./memory.mjs"); // long-term memory: bench/memory.mjs
if (process.env.BENCH_QUERIES !== "0") await import("./search.mjs"); // novel plain-word searches by store size: bench/search.mjs
if (process.env.BENCH_CONVERSATIONS !== "0") await import("./conversations.mjs"); // retrieval over long conversations: bench/conversations.mjs
if (process.env.BENCH_VALIDITY !== "0") await import("./validity.mjs"); // what holds now: bench/validity.mjs
if (process.env.BENCH_VECTORS !== "0") await (await import("./vectors.mjs")).main(); // search by meaning at scale: bench/vectors.mjs
if (process.env.BENCH_SIMILARITY !== "0") await (await import("./similarity.mjs")).main(); // the minimum similarity, measured: bench/similarity.mjs
if (process.env.BENCH_TRANSFER !== "0") await import("./transfer.mjs"); // export / import, tokens: bench/transfer.mjs
if (process.env.BENCH_TURNS !== "0") await import("./turns.mjs"); // stop and resume: bench/turns.mjs
if (process.env.BENCH_CLIENTS !== "0") await import("./clients.mjs"); // useChat's client, package sizes: bench/clients.mjs
if (process.env.BENCH_SCHEDULES_RUN !== "0") await import("./schedules.mjs"); // the alarm: bench/schedules.mjs
if (process.env.BENCH_SPACES !== "0") await import("./spaces.mjs"); // memory spaces: bench/spaces.mjs
if (process.env.BENCH_DIRECTORY !== "0") await import("./directory.mjs"); // the directory of agents: bench/directory.mjs
if (process.env.BENCH_CACHE !== "0") await import("./cache.mjs"); // the cached prefix: bench/cache.mjs
if (process.env.BENCH_OPENAI !== "0") await import("./openai.mjs"); // the OpenAI-compatible face: bench/openai.mjs
if (process.env.BENCH_TOKENS !== "0") await import("./tokens.mjs"); // token estimates vs counts: bench/tokens.mjs
if (process.env.BENCH_LATENCY !== "0") await import("./latency.mjs"); // the turn before its first token, a new agent: bench/latency.mjs
if (process.env.BENCH_MCP !== "0") await import("./mcp.mjs"); // remote MCP tools in a turn: bench/mcp.mjs
