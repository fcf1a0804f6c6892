// Real clients (imported by bench.mjs unless BENCH_CLIENTS=0; runs on its own too:
// `node bench/clients.mjs` after a build). Prints figures; asserts nothing.
//  1. The AI SDK's chat client (`ai`'s AbstractChat, as useChat runs it, with its
//     DefaultChatTransport) on a 1,000-message branch with the instant local model: time to the
//     first UI-message chunk the client processed, and to `finish` (the stored reply), per turn;
//     beside it our own SSE dialect's first delta on the same branch.
//  2. Sizes: the console's transfer size (gzip of what `/` loads), the packed TypeScript client
//     (clients/ts) and the packed Worker (@session-agent/worker).
// Options: BENCH_CLIENT_TURNS (default 20), BENCH_CLIENT_BRANCH (default 1000).
import { gzipSync } from "node:zlib";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { AbstractChat, DefaultChatTransport } from "ai";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { WORDS, mulberry32, pct, ms, int, log, progress as progressFor, client } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const TURNS = Number(process.env.BENCH_CLIENT_TURNS ?? 20);
const BRANCH = Number(process.env.BENCH_CLIENT_BRANCH ?? 1000);
const progress = progressFor("clients");
const rand = mulberry32(14);
const sentence = (n = 14) => Array.from({ length: n }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");

/** AbstractChat's state as a framework binding keeps it, noting when the reply first changed. */
class TimedState {
  constructor(messages) { this.messages = messages; this.status = "ready"; this.error = undefined; this.firstWrite = null; }
  pushMessage = (m) => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.firstWrite ??= performance.now(); this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; };
  snapshot = (x) => structuredClone(x);
}
class Chat extends AbstractChat {
  constructor({ messages, ...init }) { const state = new TimedState(messages); super({ ...init, state }); this.timing = state; }
}

const dir = mkdtempSync(join(tmpdir(), "sa-bench-clients-"));
const model = await startModel();
const w = await startWorker({ persistDir: dir, apiToken: "bench", vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench" } });
try {
  progress(`seeding a ${BRANCH}-message branch`);
  const call = client(w, "clients");
  for (let i = 0; i < BRANCH; i += 500) {
    const messages = [];
    for (let j = i; j < Math.min(BRANCH, i + 500); j++) {
      messages.push({ id: `m${j}`, role: j % 2 ? "assistant" : "user", parts: [{ type: "text", text: `${sentence()} #${j}` }] });
    }
    await call("POST", "/sessions/t/messages/batch", { messages });
  }
  const history = JSON.parse(await call("GET", "/sessions/t/history")).messages;
  const chat = new Chat({
    id: "t", messages: history,
    transport: new DefaultChatTransport({ api: `${w.url.origin}/agents/clients/sessions/t/chat`, headers: { authorization: "Bearer bench" } }),
  });
  progress(`${TURNS} turns through DefaultChatTransport`);
  const first = [];
  const done = [];
  const bodyBytes = [];
  for (let i = 0; i < TURNS; i++) {
    model.reply({ content: "A short answer of a few words.", pieces: ["A short ", "answer of ", "a few words."], pieceDelayMs: 0 });
    chat.timing.firstWrite = null;
    bodyBytes.push(JSON.stringify(chat.messages).length);
    const t0 = performance.now();
    await chat.sendMessage({ text: sentence() });
    const t1 = performance.now();
    if (chat.status !== "ready") throw new Error(`turn ${i}: ${chat.error}`);
    first.push((chat.timing.firstWrite ?? t1) - t0);
    done.push(t1 - t0);
  }
  // Our SSE dialect on the same branch (the first `delta` event), for comparison.
  const delta = [];
  for (let i = 0; i < TURNS; i++) {
    model.reply({ content: "Streamed answer.", pieces: ["Streamed ", "answer."], pieceDelayMs: 0 });
    const t0 = performance.now();
    const r = await w.fetch("/agents/clients/sessions/t/chat", { method: "POST", headers: { accept: "text/event-stream", "content-type": "application/json" },
      body: JSON.stringify({ message: { id: `sse${i}`, role: "user", parts: [{ type: "text", text: sentence() }] } }) });
    const reader = r.body.getReader();
    await reader.read();
    delta.push(performance.now() - t0);
    while (!(await reader.read()).done) { /* drain */ }
  }
  log(`useChat turn (AbstractChat + DefaultChatTransport, ${BRANCH}-message branch, ${int(pct(bodyBytes, 50) / 1024)} KiB request body, instant local model): first chunk p50 ${ms(pct(first, 50))}, p95 ${ms(pct(first, 95))}; finish p50 ${ms(pct(done, 50))}, p95 ${ms(pct(done, 95))}; our SSE's first delta on the same branch p50 ${ms(pct(delta, 50))}`);
} finally {
  await w.stop();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}

// Sizes.
const consoleDir = join(root, "build/console");
if (existsSync(consoleDir)) {
  const files = readdirSync(consoleDir);
  const sizes = files.map((f) => [f, gzipSync(readFileSync(join(consoleDir, f)), { level: 9 }).length]);
  const total = sizes.reduce((a, [, n]) => a + n, 0);
  log(`console transfer size: ${int(total)} bytes gzip (${sizes.map(([f, n]) => `${f} ${int(n)}`).join(", ")})`);
}
const packed = (cwd) => JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }))[0];
const clientDir = join(root, "clients/ts");
if (existsSync(join(clientDir, "dist"))) {
  const p = packed(clientDir);
  log(`client package (@session-agent/client): ${int(p.size)} bytes packed, ${int(p.unpackedSize)} unpacked, ${p.entryCount} files`);
} else {
  log("client package: clients/ts/dist is missing (build it with its tsc step first)");
}
const out = execFileSync(process.execPath, [join(root, "scripts/pack-worker.mjs")], { encoding: "utf8" });
log(out.trim().split("\n").at(-1));
