// The cached conversation prefix, measured from the requests the model receives: a 50-turn
// conversation through the built Worker in workerd, whose model is a small Anthropic Messages
// server here that keeps a prompt cache as Anthropic documents it (a prefix is cached up to each
// `cache_control` mark; a later request reads the longest cached prefix that it starts with and
// that ends at most 20 blocks before one of its own marks; tokens counted with OpenAI's o200k
// tokenizer, `gpt-tokenizer`, in place of Anthropic's) and reports `cache_read_input_tokens`,
// `cache_creation_input_tokens` and `input_tokens` as Anthropic does. Three agents, one per
// setting of `chat.cache`: off (`false`), the default (the frozen prompt and the tools), and
// `messages: 1` (the newest message too), with the default 50-message window and without one.
// Prints, per setting, the input tokens of the 50 turns
// split into read from the cache / written to it / neither, what the service reported as cached
// (`GET /usage`), and the input's price relative to no cache at Anthropic's multipliers (a read
// 0.1×, a 5-minute write 1.25×). Asserts nothing.
//
//   BENCH_CACHE=0        (read by bench/bench.mjs) skip it
//   BENCH_CACHE_TURNS    turns (default 50)
import http from "node:http";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encode } from "gpt-tokenizer";
import { startWorker } from "../tests/e2e/harness.mjs";
import { log, int, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench cache");
const TURNS = Number(process.env.BENCH_CACHE_TURNS ?? 50);
const auth = { authorization: "Bearer bench", "content-type": "application/json" };
const count = (s) => (s ? encode(s).length : 0);

/** The request as Anthropic caches it: tools, then system blocks, then each message's blocks. */
function blocks(body) {
  const out = [];
  for (const t of body.tools ?? []) out.push({ text: JSON.stringify({ ...t, cache_control: undefined }), mark: !!t.cache_control });
  for (const s of body.system ?? []) out.push({ text: s.text, mark: !!s.cache_control });
  for (const m of body.messages ?? []) {
    for (const c of m.content ?? []) out.push({ text: `${m.role}:${JSON.stringify({ ...c, cache_control: undefined })}`, mark: !!c.cache_control });
  }
  return out;
}

const cache = new Set(); // hashes of the cached prefixes (no expiry: the turns come within seconds)
const totals = new Map(); // model (one per agent) → {read, written, plain}
function answer(body) {
  const bs = blocks(body);
  const hashes = [];
  let h = createHash("sha256");
  for (const b of bs) { h.update(b.text); hashes.push(h.copy().digest("hex")); }
  const tokens = bs.map((b) => count(b.text));
  const marks = bs.flatMap((b, i) => (b.mark ? [i] : []));
  // The longest cached prefix within 20 blocks before a mark.
  let hit = -1;
  for (const m of marks) for (let i = m; i >= Math.max(0, m - 20); i--) if (cache.has(hashes[i])) { hit = Math.max(hit, i); break; }
  const last = marks.length ? marks[marks.length - 1] : -1;
  for (const m of marks) cache.add(hashes[m]);
  const sum = (a, b) => tokens.slice(a, b).reduce((x, y) => x + y, 0);
  const read = sum(0, hit + 1);
  const written = last > hit ? sum(hit + 1, last + 1) : 0;
  const plain = sum(0, bs.length) - read - written;
  const t = totals.get(body.model) ?? { read: 0, written: 0, plain: 0 };
  totals.set(body.model, { read: t.read + read, written: t.written + written, plain: t.plain + plain });
  return { input_tokens: plain, cache_read_input_tokens: read, cache_creation_input_tokens: written };
}

const server = http.createServer((req, res) => {
  let raw = "";
  req.on("data", (c) => { raw += c; });
  req.on("end", () => {
    const body = JSON.parse(raw || "{}");
    const usage = answer(body);
    const text = "Noted: " + "that sounds good. ".repeat(8);
    if (body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      send("message_start", { type: "message_start", message: { id: "m", type: "message", role: "assistant", content: [], model: body.model, usage: { ...usage, output_tokens: 1 } } });
      send("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
      send("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } });
      send("content_block_stop", { type: "content_block_stop", index: 0 });
      send("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: count(text) } });
      send("message_stop", { type: "message_stop" });
      res.end();
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "m", type: "message", role: "assistant", model: body.model, content: [{ type: "text", text }],
        stop_reason: "end_turn", usage: { ...usage, output_tokens: count(text) } }));
    }
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const baseUrl = `http://127.0.0.1:${server.address().port}`;

// [label, chat.cache, chat.maxMessages]: the default window sends the newest 50 messages, so
// past turn 25 the conversation's start moves every turn and no prefix of it is the last one's.
const SETTINGS = [
  ["cache: false", false, undefined],
  ["the default (prompt, tools)", undefined, undefined],
  ["messages: 1", { messages: 1 }, undefined],
  ["messages: 1, maxMessages: 0", { messages: 1 }, 0],
];
const context = [
  { label: "soul", kind: "readonly", content: "You are a careful travel planner. ".repeat(60) },
  { label: "notes", kind: "writable", description: "What you learned about the trip" },
];
const dir = mkdtempSync(join(tmpdir(), "sa-bench-cache-"));
const workers = [];
try {
  const rows = [];
  for (const [label, cacheSetting, maxMessages] of SETTINGS) {
    const model = `claude-bench-${rows.length}`;
    const chat = { ...(cacheSetting === undefined ? {} : { cache: cacheSetting }), ...(maxMessages === undefined ? {} : { maxMessages }) };
    const w = await startWorker({ persistDir: join(dir, String(rows.length)), apiToken: "bench", vars: {
      LLM_PROVIDER: "anthropic", LLM_BASE_URL: baseUrl, LLM_MODEL: model, LLM_API_KEY: "k",
      SESSION_CONFIG: JSON.stringify({ context, chat }) } });
    workers.push(w);
    const call = async (method, path, body) => {
      const r = await fetch(new URL(`/agents/bench-cache${path}`, w.url), { method, headers: auth, body: body && JSON.stringify(body) });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return JSON.parse(text);
    };
    for (let i = 0; i < TURNS; i++) {
      const text = `Turn ${i}: for day ${i + 1} of the trip we want a morning walk by the harbour, lunch somewhere quiet, and an idea for the evening if it rains. `.repeat(2);
      await call("POST", "/sessions/s/chat", { message: { id: `u${i}`, role: "user", parts: [{ type: "text", text }] } });
    }
    const usage = await call("GET", "/usage");
    rows.push({ label, t: totals.get(model), reported: usage.cachedInputTokens, input: usage.inputTokens });
    progress(`${label}: ${TURNS} turns`);
  }
  log(`\nPrompt cache over ${TURNS} turns of one conversation (Anthropic Messages format, cache kept as Anthropic documents it; o200k token counts):`);
  log(`${"chat.cache".padEnd(30)}${"input tokens".padStart(14)}${"read".padStart(10)}${"written".padStart(10)}${"neither".padStart(10)}${"reported cached".padStart(17)}${"price vs none".padStart(15)}`);
  const none = rows[0].t.read + rows[0].t.written + rows[0].t.plain; // the same window as the next two
  for (const { label, t, reported, input } of rows) {
    const total = t.read + t.written + t.plain;
    const price = (t.plain + 0.1 * t.read + 1.25 * t.written) / none;
    log(`${label.padEnd(30)}${int(total).padStart(14)}${int(t.read).padStart(10)}${int(t.written).padStart(10)}${int(t.plain).padStart(10)}${int(reported).padStart(17)}${price.toFixed(2).padStart(15)}` +
      (input !== total ? `  (the service counted ${int(input)} input tokens)` : ""));
  }
} finally {
  for (const w of workers) await w.stop();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}
