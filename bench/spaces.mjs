// Memory spaces against local workerd (Miniflare running the built Worker, SessionAgent and
// MemorySpace, a scripted OpenAI-compatible model answering at once). Prints figures; asserts
// nothing; progress goes to stderr. Run: node bench/spaces.mjs (after `bash scripts/build.sh`),
// or `npm run bench`, which runs it after the others.
//
// Turn overhead of a shared space against own memories: the agent `solo` holds BENCH_SPACE_MEMORIES
// memories of its own; the agent `team:a` none, its space `team` the same ones. Both inject
// (`memory.inject`, extraction off so the turn is measured alone). BENCH_SPACE_TURNS JSON turns
// of each, interleaved, asking about a stored fact: wall ms p50/p99 per turn (client side), and
// workerd's CPU per turn (from /proc, in batches of 10 turns: /proc counts 10 ms ticks), p50/p99
// over the batches. The floor: the empty-DO request (`GET /sessions` of an agent with nothing).
// Then the same with the space's Durable Object made unreachable (no MEMORY_SPACE binding).
//
// Options (environment variables):
//   BENCH_SPACE_MEMORIES   memories in each store (default 300)
//   BENCH_SPACE_TURNS      turns of each kind (default 100)
//   BENCH_SPACES=0         (read by bench/bench.mjs) skip this benchmark under `npm run bench`
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { WORDS, mulberry32, pct, ms, log, progress as progressFor, timed, client, childWorkerds, cpuSeconds } from "./lib.mjs";

const MEMORIES = Number(process.env.BENCH_SPACE_MEMORIES ?? 300);
const TURNS = Number(process.env.BENCH_SPACE_TURNS ?? 100);
const progress = progressFor("spaces");
const CONFIG = { memory: { space: true, extract: false, inject: { limit: 5 } } };

const model = await startModel();
const random = mulberry32(7);
const word = () => WORDS[Math.floor(random() * WORDS.length)];
const facts = Array.from({ length: MEMORIES }, (_, i) => ({
  content: `The user's ${word()} ${word()} preference number ${i} is ${word()} ${word()}.`, score: 0.5 + random() / 2,
}));

async function run(label, options) {
  const w = await startWorker({
    apiToken: "bench",
    vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench-model", SESSION_CONFIG: JSON.stringify(CONFIG) },
    options,
  });
  try {
    const solo = client(w, "solo");
    const team = client(w, "team:a");
    const floorCall = client(w, "floor");
    for (let i = 0; i < facts.length; i += 100) {
      await solo("POST", "/memories/batch", { memories: facts.slice(i, i + 100) });
      if (label === "reachable") {
        const r = await w.fetch("/spaces/team/memories/batch", { method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ memories: facts.slice(i, i + 100) }) });
        if (r.status >= 400) throw new Error(`space batch: ${r.status} ${await r.text()}`);
      }
    }
    const pids = childWorkerds();
    const cpu = () => pids.reduce((s, p) => { try { return s + cpuSeconds(p); } catch { return s; } }, 0);
    const floor = [];
    for (let i = 0; i < 50; i++) floor.push((await timed(() => floorCall("GET", "/sessions")))[0]);
    const walls = { solo: [], team: [] };
    const cpus = { solo: [], team: [] };
    for (let b = 0; b < TURNS / 10; b++) {
      for (const [name, call] of [["solo", solo], ["team", team]]) {
        const before = cpu();
        for (let i = 0; i < 10; i++) {
          model.reply({ content: "Noted." });
          const f = facts[Math.floor(random() * facts.length)].content.split(" ").slice(2, 4).join(" ");
          const [t] = await timed(() => call("POST", `/sessions/s${b}/chat`, {
            message: { id: `${name}-${b}-${i}`, role: "user", parts: [{ type: "text", text: `What about my ${f}?` }] },
          }));
          walls[name].push(t);
        }
        cpus[name].push(((cpu() - before) * 1000) / 10);
      }
      progress(`${label}: ${(b + 1) * 10} turns of each`);
    }
    const injected = model.requests.filter((r) => JSON.stringify(r.body).includes("<user-memory>")).length;
    log(`\n## Memory spaces: turn overhead, space ${label} (${MEMORIES} memories in each store, ${TURNS} turns of each)`);
    log(`floor (GET /sessions of an empty agent): p50 ${ms(pct(floor, 50))}`);
    for (const name of ["solo", "team"]) {
      const what = name === "solo" ? "own memories (solo)        " : `shared space (team:a)      `;
      log(`${what} wall p50 ${ms(pct(walls[name], 50))} p99 ${ms(pct(walls[name], 99))} (${(pct(walls[name], 50) / pct(floor, 50)).toFixed(1)}× floor); ` +
        `server CPU per turn p50 ${ms(pct(cpus[name], 50))} p99 ${ms(pct(cpus[name], 99))}`);
    }
    log(`space / own: wall p50 ${(pct(walls.team, 50) / pct(walls.solo, 50)).toFixed(2)}×, CPU p50 ${(pct(cpus.team, 50) / Math.max(0.1, pct(cpus.solo, 50))).toFixed(2)}×; turns sent a <user-memory> block: ${injected} of ${model.requests.length}`);
    model.reset();
  } finally {
    await w.stop();
  }
}

try {
  await run("reachable");
  await run("unreachable (no MEMORY_SPACE binding)", { durableObjects: { SESSION_AGENT: { className: "SessionAgent", useSQLite: true } } });
} finally {
  await model.close();
}
