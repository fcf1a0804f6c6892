// Turns that keep going, measured against the built Worker in workerd and the scripted streaming
// model (tests/e2e/llm-server.mjs): how long after a stop the model's connection closes (the
// client aborting mid-stream, `POST …/chat/stop`, and a stop while the model is silent, which the
// stream's keep-alive comment every 250 ms notices), and the resume request: time to its first (replayed)
// chunk beside the empty-DO request (the floor), and the bytes a running turn keeps for its
// readers (`x-replay-bytes`) by reply size. Asserts nothing.
//
//   BENCH_TURNS=0        (read by bench/bench.mjs) skip it
//   BENCH_TURNS_RUNS     stops and resumes measured per kind (default 20)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { pct, ms, log, int, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench turns");
const RUNS = Number(process.env.BENCH_TURNS_RUNS ?? 20);
const A = "/agents/bench-turns";
const auth = { authorization: "Bearer bench", "content-type": "application/json" };
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const sleep = (t) => new Promise((r) => setTimeout(r, t));

const model = await startModel();
const dir = mkdtempSync(join(tmpdir(), "sa-bench-turns-"));
const vars = { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench-model" };
const w = await startWorker({ persistDir: dir, apiToken: "bench", vars });
const wf = await startWorker({ apiToken: "bench", vars: { ...vars, SESSION_CONFIG: JSON.stringify({ chat: { onDisconnect: "finish" } }) } });
const url = (worker, path) => new URL(`${A}${path}`, worker.url);

/** Starts a UI-message-stream turn in `sid`; resolves once `until(text so far)` holds. */
async function startTurn(worker, sid, i, until) {
  const ctrl = new AbortController();
  const res = await fetch(url(worker, `/sessions/${sid}/chat`), {
    method: "POST", headers: auth, signal: ctrl.signal,
    body: JSON.stringify({ id: sid, messages: [user(`u${i}`, "go")], trigger: "submit-message" }),
  });
  const reader = res.body.getReader();
  let text = "";
  while (!until(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  return { ctrl, reader };
}

/** Waits for the model's next cut-off connection after `n` of them; its time. */
async function nextCut(n) {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(2)) {
    if (model.cutOff.length > n) return model.cutOff[n];
  }
  throw new Error("the model's connection was never closed");
}

try {
  const slow = { content: Array.from({ length: 200 }, (_, i) => `w${i}`).join(" "), pieceDelayMs: 50 };
  const stops = { "client aborts mid-stream": [], "POST …/chat/stop mid-stream": [], "client aborts, model silent": [] };
  for (let i = 0; i < RUNS; i++) {
    progress(`stops ${i + 1}/${RUNS}`);
    model.reply(slow);
    let t = await startTurn(w, `stop-a-${i}`, i, (s) => s.includes("text-delta"));
    let n = model.cutOff.length, t0 = Date.now();
    t.ctrl.abort();
    stops["client aborts mid-stream"].push((await nextCut(n)) - t0);

    model.reply(slow);
    t = await startTurn(w, `stop-r-${i}`, i, (s) => s.includes("text-delta"));
    n = model.cutOff.length; t0 = Date.now();
    await fetch(url(w, `/sessions/stop-r-${i}/chat/stop`), { method: "POST", headers: auth });
    stops["POST …/chat/stop mid-stream"].push((await nextCut(n)) - t0);
    t.ctrl.abort();

    model.reply({ content: "late", delayMs: 5000 });
    t = await startTurn(w, `stop-s-${i}`, i, (s) => s.includes('"start"'));
    await sleep(100);
    n = model.cutOff.length; t0 = Date.now();
    t.ctrl.abort();
    stops["client aborts, model silent"].push((await nextCut(n)) - t0);
  }
  log("\n## Turns that keep going (bench/turns.mjs)\n");
  log(`Time from a stop to the model's connection closing (${RUNS} each):\n`);
  log("| stop | p50 | p99 | max |");
  log("|---|---|---|---|");
  for (const [k, xs] of Object.entries(stops)) log(`| ${k} | ${ms(pct(xs, 50))} | ${ms(pct(xs, 99))} | ${ms(Math.max(...xs))} |`);

  // The floor: the empty-DO request, then resumes of turns with replies of several sizes so far.
  const floor = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await (await fetch(url(wf, `/sessions/none-${i}/chat/x/stream`), { headers: auth })).arrayBuffer();
    floor.push(performance.now() - t0);
  }
  log(`\nResume request: time to its first chunk, and the bytes a running turn keeps for its readers (${RUNS} each; floor = a resume request when nothing runs, ${ms(pct(floor, 50))} p50):\n`);
  log("| reply so far | first chunk p50 | p99 | p50 / floor | x-replay-bytes | first read (bytes) |");
  log("|---|---|---|---|---|---|");
  for (const pieces of [10, 1000, 10000]) {
    const firsts = [];
    let kept = 0, replayed = 0;
    for (let i = 0; i < RUNS; i++) {
      progress(`resume ${pieces} pieces ${i + 1}/${RUNS}`);
      const sid = `res-${pieces}-${i}`;
      // `pieces` pieces at once, then a long pause: the turn runs while it is resumed.
      const words = Array.from({ length: pieces }, (_, k) => `word${k} `);
      model.reply({ content: words.join(""), pieces: words, pieceDelayMs: 0, hangAfterPieces: pieces });
      const t = await startTurn(wf, sid, i, (s) => s.includes(`word${pieces - 1} `));
      t.ctrl.abort(); // onDisconnect: finish: the turn runs on
      const t0 = performance.now();
      const res = await fetch(url(wf, `/sessions/${sid}/chat/${sid}/stream`), { headers: auth });
      const reader = res.body.getReader();
      const first = await reader.read();
      firsts.push(performance.now() - t0);
      kept = Number(res.headers.get("x-replay-bytes"));
      replayed = first.value?.length ?? 0;
      await reader.cancel();
      await fetch(url(wf, `/sessions/${sid}/chat/stop`), { method: "POST", headers: auth });
    }
    log(`| ${int(pieces)} pieces | ${ms(pct(firsts, 50))} | ${ms(pct(firsts, 99))} | ${(pct(firsts, 50) / pct(floor, 50)).toFixed(2)} | ${int(kept)} | ${int(replayed)} |`);
  }
} finally {
  await w.stop();
  await wf.stop();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
