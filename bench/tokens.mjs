// Token estimates against a real tokenizer: a 50-turn conversation through the built Worker in
// workerd, whose model is a small OpenAI-compatible server here that counts each request's input
// tokens with OpenAI's o200k tokenizer (the `gpt-tokenizer` package: the system prompt, every
// message's text plus 4 per message, the tools' definitions as JSON) and says so in its usage, as
// a provider does. The turns alternate English prose, code, JSON and Chinese, so our estimate
// (the reference's heuristic: characters and words, crates/core/src/tokens.rs) drifts from the
// count in both directions. For each turn: our estimate of its input (recovered from `GET /usage`
// `calibration`, whose sums move by one turn at a time), the count, and the estimate the object
// would use for it calibrated by the turns before (docs/REFERENCE.md#token-calibration). Prints
// estimate ÷ counted before and after calibration, per kind and overall; asserts nothing.
//
//   BENCH_TOKENS=0        (read by bench/bench.mjs) skip it
//   BENCH_TOKENS_TURNS    turns (default 50)
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encode } from "gpt-tokenizer";
import { startWorker } from "../tests/e2e/harness.mjs";
import { log, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench tokens");
const TURNS = Number(process.env.BENCH_TOKENS_TURNS ?? 50);
const A = "/agents/bench-tokens";
const auth = { authorization: "Bearer bench", "content-type": "application/json" };

const count = (s) => (s ? encode(s).length : 0);
/** The input tokens of an OpenAI chat request, as o200k counts them. */
function counted(body) {
  let n = 0;
  for (const m of body.messages ?? []) {
    const text = typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text ?? "").join("");
    n += 4 + count(text) + count(JSON.stringify(m.tool_calls ?? ""));
  }
  for (const t of body.tools ?? []) n += count(JSON.stringify(t.function ?? t));
  return n;
}

const KINDS = {
  prose: (i) => `Turn ${i}: we talked about the trip to the coast again, the rented cottage near the harbour, whether the ferry runs on Sundays in October, and who brings the bikes. `.repeat(3),
  code: (i) => `fn handler_${i}(req: &Request) -> Result<Response, Error> {\n    let body: Value = serde_json::from_str(&req.body)?;\n    if body["items"].as_array().map_or(true, |a| a.is_empty()) { return Err(Error::invalid("items")); }\n    Ok(Response::json(200, &json!({"ok": true, "n": ${i}})))\n}\n`.repeat(2),
  json: (i) => JSON.stringify({ turn: i, items: Array.from({ length: 8 }, (_, k) => ({ id: `a1b2c3-${i}-${k}`, qty: k * 3, price: 12.5 + k, tags: ["x", "y"] })) }),
  chinese: (i) => `第${i}轮：我们再次讨论了去海边的旅行，港口附近租的小屋，十月的星期天渡轮是否运行，以及谁带自行车。`.repeat(3),
};
const kinds = Object.keys(KINDS);

// The model: answers each request with a short text of the turn's kind, counting its input.
const seen = [];
const server = http.createServer((req, res) => {
  let raw = "";
  req.on("data", (c) => { raw += c; });
  req.on("end", () => {
    const body = JSON.parse(raw || "{}");
    const prompt = counted(body);
    seen.push(prompt);
    const content = "Noted. " + "ok ".repeat(10);
    const usage = { prompt_tokens: prompt, completion_tokens: count(content), total_tokens: prompt + count(content) };
    if (body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      send({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { role: "assistant", content } }] });
      send({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
      send({ id: "c", object: "chat.completion.chunk", choices: [], usage });
      res.end("data: [DONE]\n\n");
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "c", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }], usage }));
    }
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const baseUrl = `http://127.0.0.1:${server.address().port}/v1`;

const dir = mkdtempSync(join(tmpdir(), "sa-bench-tokens-"));
const config = { context: [{ label: "notes", kind: "writable", content: "The user plans trips and writes Rust." }] };
const w = await startWorker({ persistDir: dir, apiToken: "bench",
  vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: baseUrl, LLM_MODEL: "o200k-counting", SESSION_CONFIG: JSON.stringify(config) } });
const call = async (method, path, body) => {
  const r = await fetch(new URL(`${A}${path}`, w.url), { method, headers: auth, body: body && JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return JSON.parse(text);
};

try {
  // Per turn: our estimate and the count, recovered from the calibration's sums over the newest
  // 20 turns (each turn adds its row; past 20, the oldest leaves, whose figures are known).
  const rows = [];
  let before = { estimatedInputTokens: 0, inputTokens: 0, turns: 0, ratio: 1 };
  for (let i = 0; i < TURNS; i++) {
    const kind = kinds[i % kinds.length];
    await call("POST", "/sessions/s/chat", { message: { id: `u${i}`, role: "user", parts: [{ type: "text", text: KINDS[kind](i) }] } });
    const c = (await call("GET", "/usage")).calibration;
    const dropped = c.turns === before.turns ? rows[rows.length - c.turns] : null;
    const estimate = c.estimatedInputTokens - before.estimatedInputTokens + (dropped?.estimate ?? 0);
    const billed = c.inputTokens - before.inputTokens + (dropped?.billed ?? 0);
    rows.push({ kind, estimate, billed, calibrated: estimate * before.ratio, model: seen.at(-1) });
    before = c;
    if (i % 10 === 9) progress(`${i + 1}/${TURNS} turns`);
  }
  const mismatched = rows.filter((r) => r.billed !== r.model).length;
  log(`\nToken estimates vs o200k counts: ${TURNS} turns of one conversation (prose, code, JSON, Chinese in turn),`);
  log(`each turn's input = system prompt + history + tools; estimate ÷ counted (1.00 = exact), mean |error|:`);
  if (mismatched) log(`(warning: ${mismatched} turns' recovered counts differ from what the model counted)`);
  const f2 = (x) => x.toFixed(2);
  const line = (label, rs) => {
    const raw = rs.map((r) => r.estimate / r.billed), cal = rs.map((r) => r.calibrated / r.billed);
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const err = (xs) => mean(xs.map((x) => Math.abs(x - 1)));
    log(`  ${label.padEnd(22)} heuristic ${f2(mean(raw))} (|err| ${(100 * err(raw)).toFixed(1)} %)   calibrated ${f2(mean(cal))} (|err| ${(100 * err(cal)).toFixed(1)} %)`);
  };
  for (const k of kinds) line(`turns ending in ${k}`, rows.filter((r) => r.kind === k));
  line("all turns", rows);
  line("after turn 10", rows.slice(10));
  log(`  (calibrated: each turn's estimate × the ratio of the turns before it; the first turn's ratio is 1)`);
} finally {
  await w.stop();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}
