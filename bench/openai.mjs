// The OpenAI-compatible face, measured against the built Worker in workerd and the scripted
// streaming model (tests/e2e/llm-server.mjs) on a conversation of 1,000 stored messages: the time
// to the first streamed token (from sending the request to the first piece of the reply's text)
// through POST …/v1/chat/completions (sending only the new message, and sending the whole
// conversation as an OpenAI app usually does, which is matched with the stored branch) beside
// POST …/sessions/{sid}/chat with `Accept: text/event-stream`, p50 and p99; and the bytes a
// client sends per turn with Responses' previous_response_id against resending the whole
// history. Raw fetch on both sides (no SDK time). Asserts nothing.
//
//   BENCH_OPENAI=0        (read by bench/bench.mjs) skip it
//   BENCH_OPENAI_RUNS     turns measured per way (default 30)
//   BENCH_OPENAI_MESSAGES stored messages before the first turn (default 1000)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { WORDS, mulberry32, pct, ms, log, int, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench openai");
const RUNS = Number(process.env.BENCH_OPENAI_RUNS ?? 30);
const SIZE = Number(process.env.BENCH_OPENAI_MESSAGES ?? 1000);
const A = "/agents/bench-openai";
const headers = { authorization: "Bearer bench", "content-type": "application/json" };
const rand = mulberry32(36);
const sentence = () => Array.from({ length: 14 }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");

const model = await startModel();
const dir = mkdtempSync(join(tmpdir(), "sa-bench-openai-"));
const vars = { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench-model" };
const w = await startWorker({ persistDir: dir, apiToken: "bench", vars });
const url = (path) => new URL(`${A}${path}`, w.url);

/** Stores `n` alternating user and assistant messages in `sid`; the conversation as an OpenAI client holds it. */
async function seed(sid, n) {
  const held = [];
  for (let i = 0; i < n; i += 500) {
    const messages = [];
    for (let j = i; j < Math.min(n, i + 500); j++) {
      const role = j % 2 ? "assistant" : "user";
      const text = `${sentence()} #${j}`;
      messages.push({ id: `${sid}-${j}`, role, parts: [{ type: "text", text }] });
      held.push({ role, content: text });
    }
    const r = await fetch(url(`/sessions/${sid}/messages/batch`), { method: "POST", headers, body: JSON.stringify({ messages }) });
    if (r.status >= 400) throw new Error(`seeding ${sid}: ${r.status} ${await r.text()}`);
  }
  return held;
}

/** POSTs `body` to `path` and reads the stream: [ms to the first text piece (`has` says which
 * event holds one), the whole text]. */
async function firstToken(path, body, extra, has) {
  model.reply({ content: "Fine thanks and you", pieceDelayMs: 1 });
  const t0 = performance.now();
  const r = await fetch(url(path), { method: "POST", headers: { ...headers, ...extra }, body: JSON.stringify(body) });
  if (r.status >= 400) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let text = "", first = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (first === null && has(text)) first = performance.now() - t0;
  }
  return [first, text];
}

try {
  const ways = { "POST …/sessions/{sid}/chat (our events)": [], "/v1/chat/completions, the new message only": [], "/v1/chat/completions, the whole conversation": [] };
  const sids = ["ours", "only-new", "whole"];
  const held = {};
  for (const sid of sids) { progress(`seeding ${sid}: ${SIZE} messages`); held[sid] = await seed(sid, SIZE); }
  const chunk = (t) => /"delta":\{"content":"[^"]/.test(t);
  for (let i = 0; i < RUNS; i++) {
    progress(`turn ${i + 1}/${RUNS}`);
    const question = `question ${i} ${sentence()}`;
    let [t] = await firstToken("/sessions/ours/chat", { message: { id: `q${i}`, role: "user", parts: [{ type: "text", text: question }] } },
      { accept: "text/event-stream" }, (s) => s.includes('"type":"delta"'));
    ways["POST …/sessions/{sid}/chat (our events)"].push(t);
    [t] = await firstToken("/v1/chat/completions", { model: "m", stream: true, messages: [{ role: "user", content: question }] },
      { "x-session-id": "only-new" }, chunk);
    ways["/v1/chat/completions, the new message only"].push(t);
    const whole = [...held.whole, { role: "user", content: question }];
    const [t2, text] = await firstToken("/v1/chat/completions", { model: "m", stream: true, messages: whole }, { "x-session-id": "whole" }, chunk);
    ways["/v1/chat/completions, the whole conversation"].push(t2);
    const reply = [...text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join("");
    held.whole = [...whole, { role: "assistant", content: reply }];
  }
  log(`\n## OpenAI-compatible face: time to the first streamed token on a ${int(SIZE)}-message conversation (${RUNS} turns each)\n`);
  log("| way | p50 | p99 |");
  log("|---|---|---|");
  for (const [way, xs] of Object.entries(ways)) log(`| ${way} | ${ms(pct(xs, 50))} | ${ms(pct(xs, 99))} |`);

  // Bytes sent per turn: Responses with previous_response_id against the whole history resent.
  let previous = null, conversation = [];
  const chained = [], resent = [];
  for (let i = 0; i < RUNS; i++) {
    progress(`bytes ${i + 1}/${RUNS}`);
    const input = `question ${i} ${sentence()}`;
    const body = { model: "m", input, ...(previous ? { previous_response_id: previous } : { conversation: "bytes" }) };
    const sent = JSON.stringify(body);
    chained.push(Buffer.byteLength(sent));
    model.reply({ content: `answer ${i} ${sentence()}` });
    const r = await fetch(url("/v1/responses"), { method: "POST", headers, body: sent });
    const answer = await r.json();
    previous = answer.id;
    conversation = [...conversation, { role: "user", content: input }];
    resent.push(Buffer.byteLength(JSON.stringify({ model: "m", messages: [...held.whole.slice(0, SIZE), ...conversation] })));
    conversation.push({ role: "assistant", content: answer.output?.[0]?.content?.[0]?.text ?? "" });
  }
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  log(`\n## Bytes a client sends per turn (${RUNS} turns after ${int(SIZE)} messages)\n`);
  log("| way | mean bytes | last turn |");
  log("|---|---|---|");
  log(`| /v1/responses with previous_response_id | ${int(mean(chained))} | ${int(chained.at(-1))} |`);
  log(`| the whole history resent (chat completions) | ${int(mean(resent))} | ${int(resent.at(-1))} |`);
} finally {
  await w.stop();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
