// The turn before the model's first token, and a new agent's first request, against the floor
// measured in the same run (imported by bench.mjs unless BENCH_LATENCY=0; runs on its own too:
// `node bench/latency.mjs` after a build). Prints figures; asserts nothing.
//
// The floor: an authenticated request to a Durable Object that holds nothing (`GET
// /agents/floor/sessions`), interleaved with every workload so drift spreads over all alike.
//  1. First streamed delta (our SSE, `accept: text/event-stream`) of a turn on a branch of
//     BENCH_LATENCY_BRANCH messages (default 1,000; each turn adds two) with BENCH_LATENCY_MEMORIES
//     memories (default 300) and injection on, the scripted model answering at once and its
//     embeddings after BENCH_LATENCY_EMBED_MS (default 9: a hosted embeddings model's round trip),
//     each question new (never a kept query vector); beside the same turn with `memory: {inject:
//     false}`. Wall ms p50/p99 from the client, ÷ the floor's; the server's CPU per turn (workerd's
//     utime+stime from /proc over blocks of 10 turns; 10 ms ticks).
//     The phases of each turn before its model call as the Worker times them (`TURN_SPANS`:
//     one JSON line per turn on its stdout), p50/p99.
//  2. A never-used agent's first request (`GET /agents/new-N/sessions`: the Durable Object is
//     created, its schema made) beside the same request to a warm agent, interleaved.
// Options: BENCH_LATENCY_TURNS (turns of each kind, default 60), BENCH_LATENCY_NEW (new agents,
// default 40), and the three above.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { WORDS, mulberry32, pct, ms, int, log, progress as progressFor, timed, client, childWorkerds, cpuSeconds } from "./lib.mjs";

const TURNS = Number(process.env.BENCH_LATENCY_TURNS ?? 60);
const BRANCH = Number(process.env.BENCH_LATENCY_BRANCH ?? 1000);
const MEMORIES = Number(process.env.BENCH_LATENCY_MEMORIES ?? 300);
const EMBED_MS = Number(process.env.BENCH_LATENCY_EMBED_MS ?? 9);
const NEW = Number(process.env.BENCH_LATENCY_NEW ?? 40);
const progress = progressFor("latency");
const rand = mulberry32(37);
const word = () => WORDS[Math.floor(rand() * WORDS.length)];
const sentence = (n = 14) => Array.from({ length: n }, word).join(" ");
const sleep = (t) => new Promise((r) => setTimeout(r, t));

const model = await startModel({ embeddingsDelayMs: EMBED_MS });
const dir = mkdtempSync(join(tmpdir(), "sa-bench-latency-"));
// The phases of each turn: the Worker logs them with TURN_SPANS set, one JSON line per turn.
const spanLines = [];
let pending = "";
const w = await startWorker({
  persistDir: dir, apiToken: "bench",
  options: {
    handleRuntimeStdio(stdout, stderr) {
      stdout.on("data", (chunk) => {
        const lines = (pending + chunk.toString("utf8")).split("\n");
        pending = lines.pop();
        for (const l of lines) if (l.startsWith('{"spans":"turn"')) spanLines.push(JSON.parse(l).ms);
      });
      stderr.pipe(process.stderr);
    },
  },
  vars: {
    TURN_SPANS: "1",
    LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench-model",
    EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: model.baseUrl, EMBEDDINGS_MODEL: "bench-embeddings",
    SESSION_CONFIG: JSON.stringify({ memory: { extract: false, inject: { limit: 5 } } }),
  },
});
try {
  const call = client(w, "latency");
  const floorCall = client(w, "floor");
  await floorCall("GET", "/sessions");
  progress(`seeding a ${int(BRANCH)}-message branch and ${MEMORIES} memories`);
  for (let i = 0; i < BRANCH; i += 500) {
    const messages = [];
    for (let j = i; j < Math.min(BRANCH, i + 500); j++) {
      messages.push({ id: `m${j}`, role: j % 2 ? "assistant" : "user", parts: [{ type: "text", text: `${sentence()} #${j}` }] });
    }
    await call("POST", "/sessions/t/messages/batch", { messages });
  }
  for (let i = 0; i < MEMORIES; i += 100) {
    const memories = Array.from({ length: Math.min(100, MEMORIES - i) }, (_, k) => ({
      content: `The user's ${word()} ${word()} preference number ${i + k} is ${word()} ${word()}.`,
    }));
    await call("POST", "/memories/batch", { memories });
  }
  // The vectors are made after the writes: wait until no embeddings request came for 2 s.
  for (let seen = -1; seen !== model.embeddingRequests.length;) { seen = model.embeddingRequests.length; await sleep(2000); }

  const pids = childWorkerds();
  const cpu = () => pids.reduce((s, p) => { try { return s + cpuSeconds(p); } catch { return s; } }, 0);
  /** One streamed turn: ms to the first `delta` event. */
  async function turn(i, memory) {
    model.reply({ content: "A short answer.", pieces: ["A short ", "answer."], pieceDelayMs: 0 });
    const body = { message: { id: `q${i}`, role: "user", parts: [{ type: "text", text: `What about my ${word()} ${word()} ${i}?` }] } };
    if (!memory) body.memory = { inject: false };
    const t0 = performance.now();
    const r = await w.fetch("/agents/latency/sessions/t/chat", {
      method: "POST", headers: { accept: "text/event-stream", "content-type": "application/json" }, body: JSON.stringify(body),
    });
    if (r.status !== 200) throw new Error(`turn ${i}: ${r.status} ${await r.text()}`);
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let first = null;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (first === null && text.includes(`"type":"delta"`)) first = performance.now() - t0;
    }
    if (first === null) throw new Error(`turn ${i}: no delta in ${text.slice(0, 300)}`);
    return first;
  }
  const floor = [];
  const kinds = [];
  const delta = { memory: [], plain: [] };
  const cpus = { memory: [], plain: [], floor: [] };
  let n = 0;
  progress(`${TURNS} turns of each kind, interleaved with the floor`);
  for (let b = 0; b < TURNS / 10; b++) {
    for (const kind of ["memory", "plain", "floor"]) {
      const before = cpu();
      for (let i = 0; i < 10; i++) {
        if (kind === "floor") floor.push((await timed(() => floorCall("GET", "/sessions")))[0]);
        else { delta[kind].push(await turn(n++, kind === "memory")); kinds.push(kind); }
      }
      cpus[kind].push(((cpu() - before) * 1000) / 10);
    }
  }
  const injected = model.requests.filter((r) => JSON.stringify(r.body).includes("<user-memory>")).length;
  const f50 = pct(floor, 50);
  const f99 = pct(floor, 99);
  log(`\n## The turn before the first token (${int(BRANCH)}+ message branch, ${MEMORIES} memories, embeddings answer after ${EMBED_MS} ms, ${TURNS} turns of each)`);
  log(`floor (GET /sessions of an empty agent): p50 ${ms(f50)} p99 ${ms(f99)}; server CPU ${ms(pct(cpus.floor, 50))}/request`);
  for (const [kind, what] of [["memory", "first delta, injection on "], ["plain", "first delta, memory off   "]]) {
    const [p50, p99] = [pct(delta[kind], 50), pct(delta[kind], 99)];
    log(`${what} p50 ${ms(p50)} (${(p50 / f50).toFixed(1)}× floor) p99 ${ms(p99)} (${(p99 / f99).toFixed(1)}× floor); ` +
      `server CPU per turn p50 ${ms(pct(cpus[kind], 50))} (${(pct(cpus[kind], 50) / Math.max(0.01, pct(cpus.floor, 50))).toFixed(1)}× floor)`);
  }
  log(`(turns whose model request carried <user-memory>: ${injected} of ${TURNS * 2})`);
  // The seeding wrote no turn: the span lines are the measured turns', in their order.
  await sleep(200);
  if (spanLines.length === kinds.length) {
    for (const kind of ["memory", "plain"]) {
      const mine = spanLines.filter((_, i) => kinds[i] === kind);
      log(`phases of a turn before its model call, ${kind === "memory" ? "injection on" : "memory off"} (server, performance.now()):`);
      for (const name of Object.keys(mine[0] ?? {})) {
        const xs = mine.map((m) => m[name]).filter((x) => x !== undefined);
        log(`  ${name.padEnd(40)} p50 ${ms(pct(xs, 50))} p99 ${ms(pct(xs, 99))}`);
      }
    }
  } else {
    log(`(phases not shown: ${spanLines.length} span lines for ${kinds.length} turns)`);
  }

  progress(`${NEW} never-used agents' first requests beside a warm agent's`);
  const fresh = [];
  const warm = [];
  const run = Date.now().toString(36);
  for (let i = 0; i < NEW; i++) {
    fresh.push((await timed(() => client(w, `new-${run}-${i}`)("GET", "/sessions")))[0]);
    warm.push((await timed(() => floorCall("GET", "/sessions")))[0]);
  }
  log(`\n## A new agent's first request (${NEW} never-used agents, interleaved with a warm agent's request)`);
  log(`new agent: p50 ${ms(pct(fresh, 50))} p99 ${ms(pct(fresh, 99))}; warm agent: p50 ${ms(pct(warm, 50))} p99 ${ms(pct(warm, 99))}; ` +
    `ratio p50 ${(pct(fresh, 50) / pct(warm, 50)).toFixed(2)}×`);
} finally {
  await w.stop();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
