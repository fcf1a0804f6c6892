// Export / import and scoped-token benchmark against local workerd (Miniflare running the built
// Worker + DO, persisted to a temporary directory). Prints figures; asserts nothing; progress
// goes to stderr. Run: node bench/transfer.mjs (after `bash scripts/build.sh`), or `npm run bench`,
// which runs it after bench/bench.mjs and bench/memory.mjs.
//
//  1. export / import throughput (messages/s, MB/s, wall ms) of
//     a. one session of BENCH_TRANSFER_MESSAGES messages (300-600 bytes of text each): the
//        session's document (GET /sessions/{sid}/export → POST /sessions/import?as= into another
//        agent), and the agent's NDJSON (GET /export → POST /import into a fresh agent);
//     b. an agent of BENCH_TRANSFER_SESSIONS sessions × BENCH_TRANSFER_PER_SESSION messages and
//        BENCH_TRANSFER_MEMORIES memories: GET /export → POST /import into a fresh agent;
//     each round trip checked byte for byte (the export of the import against the original), the
//     export's size, and the time to its first byte. workerd gzips a JSON answer for a client
//     that asks (Node's fetch does), not NDJSON: the session export is also timed without.
//  2. the cost of verifying a token: the same near-empty request (the latest leaf of a session
//     holding one message, the least a session-limited token may do) with the admin token, a
//     scoped read token for the whole agent, and a read token limited to that session,
//     interleaved in one run: wall ms p50/p90 per request, and workerd's CPU time per request
//     (its /proc utime+stime, 10 ms ticks summed over all requests of a kind; Linux only).
//
// Options (environment variables):
//   BENCH_TRANSFER_MESSAGES      messages of the one-session part (default 10000)
//   BENCH_TRANSFER_SESSIONS      sessions of the many-session agent (default 100)
//   BENCH_TRANSFER_PER_SESSION   messages per session there (default 100)
//   BENCH_TRANSFER_MEMORIES      memories there (default 200)
//   BENCH_TRANSFER_REQUESTS      requests per kind of token in part 2 (default 500)
//   BENCH_TRANSFER_PARTS         which parts to run (default session,agent,tokens)
//   BENCH_TRANSFER=0             (read by bench/bench.mjs) skip this benchmark under `npm run bench`
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { WORDS, mulberry32, pct, ms, int, log, progress as progressFor, timed, childWorkerds, cpuSeconds } from "./lib.mjs";

const MESSAGES = Number(process.env.BENCH_TRANSFER_MESSAGES ?? 10_000);
const SESSIONS = Number(process.env.BENCH_TRANSFER_SESSIONS ?? 100);
const PER_SESSION = Number(process.env.BENCH_TRANSFER_PER_SESSION ?? 100);
const MEMORIES = Number(process.env.BENCH_TRANSFER_MEMORIES ?? 200);
const REQUESTS = Number(process.env.BENCH_TRANSFER_REQUESTS ?? 500);
const PARTS = new Set((process.env.BENCH_TRANSFER_PARTS ?? "session,agent,tokens").split(","));
const ADMIN = "bench";
const SECRET = "bench-token-secret-0123456789abcdef0123456789";

// Random words from lib.mjs's generator.
const rand = mulberry32(11);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
/** 300-600 bytes of words. */
function text(i) {
  const want = 300 + Math.floor(rand() * 300);
  let t = `#${i}`;
  while (t.length < want) t += ` ${pick(WORDS)}`;
  return t.slice(0, want);
}
const msg = (id, i) => ({ id, role: i % 2 ? "assistant" : "user", parts: [{ type: "text", text: text(i) }] });
const median = (xs) => pct(xs, 50);
const signed = (x) => `${x < 0 ? "-" : "+"}${ms(Math.abs(x))}`;
const progress = progressFor("bench transfer");
const mb = (bytes) => `${(bytes / 1e6).toFixed(2)} MB`;
const rate = (n, bytes, t) => `${int(n / (t / 1000))} msg/s, ${(bytes / 1e6 / (t / 1000)).toFixed(1)} MB/s`;

/**
 * One request, its body read in full: {status, body (Buffer, decoded), ms (to the last byte),
 * headersMs, firstByteMs (to the first body chunk), encoding (the answer's Content-Encoding)}.
 * Throws on an error status. `auth`: the harness's option (true: the admin token; a string: that
 * token). Node's fetch asks for gzip (Accept-Encoding), as bench.mjs's requests do.
 */
async function request(w, method, path, { body, type, auth = true, headers = {} } = {}) {
  const init = { method, auth, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    init.headers["content-type"] = type ?? "application/json";
  }
  const t0 = performance.now();
  const r = await w.fetch(path, init);
  const headersMs = performance.now() - t0;
  const chunks = [];
  let firstByteMs = null;
  for await (const c of r.body ?? []) {
    if (firstByteMs === null) firstByteMs = performance.now() - t0;
    chunks.push(c);
  }
  const t = performance.now() - t0;
  const buf = Buffer.concat(chunks);
  if (r.status >= 400) throw new Error(`${method} ${path}: ${r.status} ${buf.toString("utf8", 0, 300)}`);
  return { status: r.status, body: buf, ms: t, headersMs, firstByteMs: firstByteMs ?? t, encoding: r.headers.get("content-encoding") };
}

/** Appends `n` messages to `agent`'s session `sid`, in batches of at most 1,000. */
async function seedSession(w, agent, sid, n, batch = 1000) {
  for (let i = 0; i < n; i += batch) {
    const messages = [];
    for (let j = i; j < Math.min(n, i + batch); j++) messages.push(msg(`${sid}-${j}`, j));
    await request(w, "POST", `/agents/${agent}/sessions/${sid}/messages/batch`, { body: { messages } });
  }
}

/** How an answer travelled: gzipped by workerd (fetch asks for it), or as it is (and its gzip size). */
function encoded(r) {
  if (r.encoding) return `sent ${r.encoding} by workerd, decoded by fetch`;
  return `sent uncompressed (gzip would make it ${mb(gzipSync(r.body).length)})`;
}

/** "yes", or "no" and where the two first differ. */
function identical(a, b) {
  if (a.equals(b)) return "yes";
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const line = a.subarray(0, i).toString("utf8").split("\n").length;
  const around = (x) => JSON.stringify(x.toString("utf8", Math.max(0, i - 60), i + 60));
  return `no (${a.length} vs ${b.length} bytes; first difference at byte ${i}, line ${line}: ${around(a)} vs ${around(b)})`;
}

/** Runs `fn` `runs` times: the run with the median wall time. */
async function medianRun(runs, fn) {
  const rs = [];
  for (let i = 0; i < runs; i++) rs.push(await fn());
  return [...rs].sort((x, y) => x.ms - y.ms)[Math.floor(rs.length / 2)];
}

// ── Set-up ─────────────────────────────────────────────────────────────────────────────────────────
const started = performance.now();
const dir = mkdtempSync(join(tmpdir(), "sa-bench-transfer-"));
const before = new Set(childWorkerds());
let w;
try {
  w = await startWorker({ persistDir: dir, apiToken: ADMIN, vars: { TOKEN_SECRET: SECRET } });
  const workerdPid = childWorkerds().find((p) => !before.has(p)) ?? null;

  // Imports go to agents never used before: their DO is started (and its schema made) first,
  // so an import's time is the import's.
  const warm = (agent) => request(w, "GET", `/agents/${agent}/sessions`);

  // ── 1a. One session ────────────────────────────────────────────────────────────────────────────
  if (PARTS.has("session")) {
    progress(`seeding one session of ${int(MESSAGES)} messages`);
    const [seedMs] = await timed(() => seedSession(w, "one", "big", MESSAGES));
    log(`── export / import: one session of ${int(MESSAGES)} messages (300-600 bytes of text each; seeded in batches of 1,000 at ${int(MESSAGES / (seedMs / 1000))} msg/s) ──`);

    const exp = await medianRun(3, () => request(w, "GET", "/agents/one/sessions/big/export"));
    const plain = await medianRun(3, () => request(w, "GET", "/agents/one/sessions/big/export", { headers: { "accept-encoding": "identity" } }));
    log(`session export (GET /sessions/big/export, one JSON document): ${mb(exp.body.length)} in ${ms(exp.ms)}: ${rate(MESSAGES, exp.body.length, exp.ms)}; first byte after ${ms(exp.firstByteMs)}; ` +
      `${encoded(exp)} (median of 3)`);
    log(`  the same with Accept-Encoding: identity: ${ms(plain.ms)}: ${rate(MESSAGES, plain.body.length, plain.ms)}; first byte after ${ms(plain.firstByteMs)}; ${encoded(plain)}`);
    await warm("one-copy");
    const imp = await request(w, "POST", "/agents/one-copy/sessions/import?as=big", { body: exp.body });
    log(`session import (POST /sessions/import?as=big, into another agent): ${ms(imp.ms)}: ${rate(MESSAGES, exp.body.length, imp.ms)}`);
    const back = await request(w, "GET", "/agents/one-copy/sessions/big/export");
    log(`  session round trip byte-identical: ${identical(exp.body, back.body)}`);

    const aexp = await medianRun(3, () => request(w, "GET", "/agents/one/export"));
    log(`agent export (GET /export, NDJSON, streamed): ${mb(aexp.body.length)} in ${ms(aexp.ms)}: ${rate(MESSAGES, aexp.body.length, aexp.ms)}; first byte after ${ms(aexp.firstByteMs)}; ${encoded(aexp)} (median of 3)`);
    await warm("one-fresh");
    const aimp = await request(w, "POST", "/agents/one-fresh/import", { body: aexp.body, type: "application/x-ndjson" });
    log(`agent import (POST /import, into a fresh agent): ${ms(aimp.ms)}: ${rate(MESSAGES, aexp.body.length, aimp.ms)}; answer ${aimp.body.toString("utf8")}`);
    const aback = await request(w, "GET", "/agents/one-fresh/export");
    log(`  agent round trip byte-identical: ${identical(aexp.body, aback.body)}`);
  }

  // ── 1b. Many sessions and memories ─────────────────────────────────────────────────────────────
  if (PARTS.has("agent")) {
    const total = SESSIONS * PER_SESSION;
    progress(`seeding ${SESSIONS} sessions × ${PER_SESSION} messages and ${MEMORIES} memories`);
    for (let s = 0; s < SESSIONS; s++) await seedSession(w, "many", `s${s}`, PER_SESSION);
    for (let i = 0; i < MEMORIES; i += 1000) {
      const memories = [];
      for (let j = i; j < Math.min(MEMORIES, i + 1000); j++) {
        memories.push({ content: `Fact ${j}: ${text(j).slice(0, 80 + Math.floor(rand() * 120))}`, tags: [pick(["work", "home", "travel", "food"])], score: Math.round((0.5 + rand() * 0.5) * 100) / 100 });
      }
      await request(w, "POST", "/agents/many/memories/batch", { body: { memories } });
    }
    log(`── export / import: one agent of ${int(SESSIONS)} sessions × ${int(PER_SESSION)} messages (${int(total)}) and ${int(MEMORIES)} memories ──`);
    const aexp = await medianRun(3, () => request(w, "GET", "/agents/many/export"));
    log(`agent export (GET /export, NDJSON, streamed): ${mb(aexp.body.length)} in ${ms(aexp.ms)}: ${rate(total, aexp.body.length, aexp.ms)}; first byte after ${ms(aexp.firstByteMs)}; ${encoded(aexp)} (median of 3)`);
    await warm("many-fresh");
    const aimp = await request(w, "POST", "/agents/many-fresh/import", { body: aexp.body, type: "application/x-ndjson" });
    log(`agent import (POST /import, into a fresh agent): ${ms(aimp.ms)}: ${rate(total, aexp.body.length, aimp.ms)}; answer ${aimp.body.toString("utf8")}`);
    const aback = await request(w, "GET", "/agents/many-fresh/export");
    log(`  agent round trip byte-identical: ${identical(aexp.body, aback.body)}`);
  }

  // ── 2. Token verification ──────────────────────────────────────────────────────────────────────
  if (PARTS.has("tokens")) {
    progress("token verification");
    await request(w, "POST", "/agents/tokens/sessions/floor/messages", { body: { message: msg("only", 0) } });
    const mint = async (body) => JSON.parse((await request(w, "POST", "/agents/tokens/tokens", { body })).body.toString("utf8")).token;
    const KINDS = [
      ["admin token", true],
      ["scoped read token (whole agent)", await mint({ scope: "read", ttlSeconds: 3600 })],
      ["scoped read token (limited to the session)", await mint({ scope: "read", ttlSeconds: 3600, sessions: ["floor"] })],
    ];
    const path = "/agents/tokens/sessions/floor/leaf";
    for (const [, auth] of KINDS) for (let i = 0; i < 30; i++) await request(w, "GET", path, { auth });
    // Blocks of 50 sequential requests per kind, the kinds' order rotating from block to block.
    const BLOCK = 50;
    const walls = KINDS.map(() => []);
    const cpu = KINDS.map(() => 0);
    for (let round = 0; walls[0].length < REQUESTS; round++) {
      for (let k = 0; k < KINDS.length; k++) {
        const kind = (round + k) % KINDS.length;
        const auth = KINDS[kind][1];
        const n = Math.min(BLOCK, REQUESTS - walls[kind].length);
        const c0 = workerdPid ? cpuSeconds(workerdPid) : 0;
        for (let i = 0; i < n; i++) walls[kind].push((await request(w, "GET", path, { auth })).ms);
        if (workerdPid) cpu[kind] += cpuSeconds(workerdPid) - c0;
      }
    }
    log(`── token verification: GET /sessions/{sid}/leaf on an agent holding one message, ${int(REQUESTS)} sequential requests per token, interleaved in blocks of ${BLOCK} ──`);
    const cpuMs = (k) => (cpu[k] * 1000) / walls[k].length;
    for (let k = 0; k < KINDS.length; k++) {
      const x = walls[k];
      const vs = k === 0 ? "" : `; vs admin: p50 ×${(pct(x, 50) / pct(walls[0], 50)).toFixed(2)} (${signed(pct(x, 50) - pct(walls[0], 50))}), p90 ×${(pct(x, 90) / pct(walls[0], 90)).toFixed(2)}`;
      const c = workerdPid ? `; workerd CPU ${cpuMs(k).toFixed(2)} ms/request` + (k === 0 ? "" : ` (×${(cpuMs(k) / cpuMs(0)).toFixed(2)})`) : "";
      log(`${KINDS[k][0]}: wall p50 ${ms(pct(x, 50))}, p90 ${ms(pct(x, 90))}${vs}${c}`);
    }
    log(`  (wall time over localhost; ${workerdPid ? "CPU: the whole workerd process's utime+stime from /proc, 10 ms ticks summed per kind, so ±~" + (10 * Math.ceil(REQUESTS / BLOCK) / REQUESTS).toFixed(2) + " ms/request" : "no CPU figure: workerd's /proc entry was not found"}; Miniflare reports no per-request CPU time)`);
  }
} finally {
  await w?.stop();
  rmSync(dir, { recursive: true, force: true });
  progress(`done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}
