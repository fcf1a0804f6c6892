// Starts the built Worker (build/index.js + build/index_bg.wasm, from `bash scripts/build.sh`) in
// workerd for end-to-end tests (`node --test tests/e2e/`) and benchmarks:
//  - startWorker(): through Miniflare's Node API (~0.3 s to ready): the real runtime, the DO's
//    SQLite storage, local R2, state persisted to a directory so a test can restart workerd on it.
//  - startWranglerDev(): `wrangler dev` as developers run it (slower, ~2-5 s; exercises
//    wrangler.toml and the [build] command).
// Both return the same client: {url, fetch, json, webSocket, stop, restart}.
// Node 20 has no global WebSocket: webSocket() uses the `ws` package.
import assert from "node:assert/strict";
import { Miniflare, Log, LogLevel } from "miniflare";
import WebSocket from "ws";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** Where worker-build writes index.js and index_bg.wasm. */
export const BUILD = join(ROOT, "build");

/**
 * The bits of wrangler.toml the harness mirrors: compatibility_date and the plain [vars]
 * (a tiny line parser: `KEY = "string"` lines only, which is all wrangler.toml uses).
 * @returns {{compatibilityDate: string, vars: Record<string, string>}}
 */
export function wranglerConfig() {
  const toml = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1] ?? "2026-04-01";
  const vars = {};
  let inVars = false;
  for (const line of toml.split("\n")) {
    const t = line.trim();
    if (t.startsWith("[")) inVars = t === "[vars]";
    const m = inVars && /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(".*")\s*$/.exec(t);
    if (m) {
      try { vars[m[1]] = JSON.parse(m[2]); } catch { /* not a plain basic string: skip */ }
    }
  }
  return { compatibilityDate, vars };
}

/**
 * Miniflare options for the Worker as wrangler.toml declares it. Without persistDir/port it is
 * a pure per-worker entry, usable in `new Miniflare({workers: [..., workerOptions()]})`.
 * @param {object} [o]
 * @param {string|null} [o.apiToken] the API_TOKEN secret; null/undefined leaves it unset.
 * @param {Record<string, string>} [o.vars] more bindings; override wrangler.toml's [vars].
 * @param {string} [o.persistDir] adds the shared option defaultPersistRoot: the root of the
 *   persisted state (<dir>/do, <dir>/r2, ...); omitted = in memory.
 * @param {number} [o.port] adds the shared options host 127.0.0.1 and this port (0 = a free one).
 * @param {{worker: {name: string}}} [o.ai] binds `AI` to this stand-in of the Workers AI binding
 *   (ai-binding.mjs's aiBinding()); its worker must be in the same Miniflare (startWorker's `ai`
 *   puts it there).
 * @param {string[]} [o.d1] binds a local D1 database under each of these names (Miniflare's
 *   `d1Databases`; fill one through `w.mf.getD1Database(name)`): what `d1` context blocks read.
 * @returns {import("miniflare").MiniflareOptions}
 */
export function workerOptions({ persistDir, apiToken, vars = {}, port, ai, d1 } = {}) {
  const cfg = wranglerConfig();
  return {
    name: "session-agent",
    ...(port !== undefined ? { host: "127.0.0.1", port } : {}),
    modules: true,
    scriptPath: join(BUILD, "index.js"),
    // index.js imports ./index_bg.wasm: resolve it relative to build/, as a compiled module.
    modulesRoot: BUILD,
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }],
    compatibilityDate: cfg.compatibilityDate,
    durableObjects: {
      SESSION_AGENT: { className: "SessionAgent", useSQLite: true },
      MEMORY_SPACE: { className: "MemorySpace", useSQLite: true },
      AGENT_DIRECTORY: { className: "AgentDirectory", useSQLite: true },
    },
    r2Buckets: ["SKILLS_BUCKET"],
    ...(d1 ? { d1Databases: d1 } : {}),
    // wrangler.toml's [assets]: the console, with the Worker run first for every path.
    assets: { directory: join(BUILD, "console"), binding: "ASSETS",
      routerConfig: { has_user_worker: true, invoke_user_worker_ahead_of_assets: true } },
    bindings: { ...cfg.vars, ...(apiToken != null ? { API_TOKEN: apiToken } : {}), ...vars },
    ...(ai ? { wrappedBindings: { AI: ai.worker.name } } : {}),
    // <persistDir>/do, <persistDir>/r2, ...: the same directory after restart() keeps the data.
    ...(persistDir ? { defaultPersistRoot: persistDir } : {}),
  };
}

/**
 * @typedef {RequestInit & {auth?: boolean | string}} ClientInit
 *   `auth`: true (default) sends `Authorization: Bearer <apiToken>`, false sends none, a string
 *   sends that token instead. An explicit authorization header always wins.
 */
/**
 * @typedef {object} JsonResult
 * @property {number} status
 * @property {Headers} headers
 * @property {any} body the parsed JSON, the raw text when it is not JSON, null when empty
 */
/**
 * @typedef {object} WorkerClient
 * @property {URL} url base URL of the running Worker (a new port after restart() unless one was given)
 * @property {(path: string, init?: ClientInit) => Promise<Response>} fetch
 *   fetch() relative to `url`, with the bearer token added.
 * @property {(method: string, path: string, body?: any, init?: ClientInit) => Promise<JsonResult>} json
 *   sends `body` as JSON (strings as they are) and parses the answer.
 * @property {(path: string, opts?: {auth?: boolean | string, query?: boolean}) => Promise<WebSocket>} webSocket
 *   opens a WebSocket (the `ws` package) to `path` and resolves once it is open; the token goes
 *   in the Authorization header, or as `?token=` with `query: true` (as browsers must).
 * @property {() => Promise<void>} stop stops the runtime (and removes a persistDir it created).
 * @property {() => Promise<void>} restart stops the runtime and starts it again on the same state.
 */

/**
 * The words of the storage that no error may carry (the same rule as the native tests'
 * support::storage_words): every name with an underscore in the statements of migrations/*.sql
 * (tables, columns, indexes, triggers; comments left out), and SQLite's own phrases.
 */
export const STORAGE_WORDS = (() => {
  const words = new Set(["sqlite", "sql:", "constraint failed", "no such table", "no such column", "syntax error", "fts5", "rowid"]);
  const dir = join(ROOT, "migrations");
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".sql"))) {
    const code = readFileSync(join(dir, f), "utf8").split("\n").map((l) => l.replace(/--.*$/, "")).join("\n");
    for (const w of code.split(/[^A-Za-z0-9_]+/)) {
      if (w.includes("_") && /^[A-Za-z]/.test(w)) words.add(w.toLowerCase());
    }
  }
  return [...words];
})();

/** The storage word `text` carries, if any (names compared whole, phrases anywhere, lower case). */
export function storageWordIn(text) {
  const lower = String(text).toLowerCase();
  const names = new Set(lower.split(/[^a-z0-9_]+/));
  return STORAGE_WORDS.find((w) => (w.includes("_") ? names.has(w) : lower.includes(w)));
}

/**
 * Throws when an error answer (status 400 and up) or an `error` WebSocket frame names the storage:
 * every error the end-to-end suite provokes goes through here (the harness's fetch and sockets).
 */
function assertSpeaksNoStorage(what, text) {
  const w = storageWordIn(text);
  if (w) throw new Error(`${what} names the storage (${JSON.stringify(w)}): ${String(text).slice(0, 500)}`);
}

function client(getUrl, apiToken, lifecycle) {
  const authHeader = (auth, headers) => {
    const h = new Headers(headers);
    const token = typeof auth === "string" ? auth : auth ? apiToken : null;
    if (token != null && !h.has("authorization")) h.set("authorization", `Bearer ${token}`);
    return h;
  };
  const c = {
    get url() { return getUrl(); },
    async fetch(path, init = {}) {
      const { auth = true, headers, ...rest } = init;
      const go = async () => {
        const r = await fetch(new URL(path, getUrl()), { ...rest, headers: authHeader(auth, headers) });
        const type = r.headers.get("content-type") ?? "";
        if (r.status >= 400 && type.startsWith("application/json")) {
          assertSpeaksNoStorage(`${rest.method ?? "GET"} ${path} answered ${r.status}`, await r.clone().text());
        }
        return r;
      };
      try {
        return await go();
      } catch (e) {
        // A kept-alive connection the server closed while this process was blocked (a test's
        // synchronous sqlite3 read) is taken for the next request, which then fails with
        // "other side closed" before reaching the server. A read is sent again once, on a new
        // connection; a write is not (it may have been received).
        const method = (rest.method ?? "GET").toUpperCase();
        if (e?.cause?.code !== "UND_ERR_SOCKET" || !["GET", "HEAD"].includes(method)) throw e;
        return go();
      }
    },
    async json(method, path, body, init = {}) {
      const headers = new Headers(init.headers);
      const opts = { ...init, method, headers };
      if (body !== undefined) {
        opts.body = typeof body === "string" ? body : JSON.stringify(body);
        if (!headers.has("content-type")) headers.set("content-type", "application/json");
      }
      const r = await c.fetch(path, opts);
      const text = await r.text();
      let parsed = null;
      try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
      return { status: r.status, headers: r.headers, body: parsed };
    },
    webSocket(path, { auth = true, query = false } = {}) {
      const u = new URL(path, getUrl());
      u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
      const token = typeof auth === "string" ? auth : auth ? apiToken : null;
      const headers = {};
      if (token != null && query) u.searchParams.set("token", token);
      else if (token != null) headers.authorization = `Bearer ${token}`;
      const ws = new WebSocket(u, { headers });
      ws.on("message", (data) => {
        const text = data.toString();
        if (text.includes('"error"')) assertSpeaksNoStorage(`an error frame on ${path}`, text);
      });
      return new Promise((resolve, reject) => {
        ws.once("open", () => resolve(ws));
        ws.once("unexpected-response", (_req, res) => reject(new Error(`WebSocket upgrade refused: HTTP ${res.statusCode}`)));
        ws.once("error", reject);
      });
    },
    ...lifecycle,
  };
  return c;
}

/**
 * Resolves with the next message of a `ws` WebSocket, parsed as JSON when it is JSON.
 * @param {WebSocket} ws
 * @param {number} [timeoutMs=5000]
 * @returns {Promise<any>}
 */
export function nextMessage(ws, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { ws.off("message", onMessage); reject(new Error("no WebSocket message in time")); }, timeoutMs);
    function onMessage(data) {
      clearTimeout(timer);
      const text = data.toString();
      try { resolve(JSON.parse(text)); } catch { resolve(text); }
    }
    ws.once("message", onMessage);
  });
}

/**
 * Polls `probe` (async or not) every 50 ms until it returns a truthy value, which it returns;
 * fails (an assertion naming `what`) after `timeoutMs`.
 * @template T
 * @param {string} what
 * @param {() => T | Promise<T>} probe
 * @param {number} timeoutMs
 * @returns {Promise<T>}
 */
export async function eventually(what, probe, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await probe();
    if (last) return last;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Collects the messages a `ws` WebSocket receives (parsed as JSON when they are JSON) until
 * `until(message)` is true; rejects, listing what came, after `timeoutMs`.
 * @param {WebSocket} ws
 * @param {(message: any) => boolean} until
 * @param {number} [timeoutMs=5000]
 * @returns {Promise<any[]>}
 */
export function collect(ws, until, timeoutMs = 5000) {
  const frames = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { ws.off("message", on); reject(new Error(`timed out; got ${JSON.stringify(frames)}`)); }, timeoutMs);
    function on(data) {
      let f = data.toString();
      try { f = JSON.parse(f); } catch { /* not JSON */ }
      frames.push(f);
      if (until(f)) { clearTimeout(timer); ws.off("message", on); resolve(frames); }
    }
    ws.on("message", on);
  });
}

/** `startWorker`'s `options` that keep the runtime's output (stdout and stderr) as lines in
 * `into`, for a test that reads what the Worker logged. */
export const captureOutput = (into) => ({
  handleRuntimeStdio: (stdout, stderr) => {
    for (const s of [stdout, stderr]) {
      let rest = "";
      s.on("data", (d) => {
        const parts = (rest + d).split("\n");
        rest = parts.pop();
        into.push(...parts);
      });
    }
  },
});

/**
 * Starts the built Worker in workerd through Miniflare.
 * @param {object} [o]
 * @param {string} [o.persistDir] directory for the persisted state; kept by stop(). Omitted: a
 *   fresh temporary directory that stop() removes (restart() still keeps the data).
 * @param {string|null} [o.apiToken="test-token"] the API_TOKEN secret; null leaves it unset.
 * @param {Record<string, string>} [o.vars] more bindings (SESSION_CONFIG, LLM_*, ...).
 * @param {number} [o.port] fixed port on 127.0.0.1 (kept across restart()); default: a free one.
 * @param {object} [o.options] more Miniflare worker options (e.g. `ratelimits`), merged last.
 * @param {{worker: object}} [o.ai] a stand-in of the `AI` binding (ai-binding.mjs's aiBinding()):
 *   bound as `AI`, its worker run beside the Worker.
 * @param {string[]} [o.d1] local D1 databases bound under these names (`w.mf.getD1Database`).
 * @returns {Promise<WorkerClient & {mf: Miniflare}>} `mf` is the live Miniflare instance
 *   (e.g. `await w.mf.getR2Bucket("SKILLS_BUCKET")` to seed skills).
 */
export async function startWorker({ persistDir, apiToken = "test-token", vars = {}, port = 0, options: extra = {}, ai, d1 } = {}) {
  if (!existsSync(join(BUILD, "index.js"))) {
    throw new Error("build/index.js is missing: run `bash scripts/build.sh` first");
  }
  const ownDir = !persistDir;
  const dir = persistDir ?? mkdtempSync(join(tmpdir(), "sa-worker-"));
  let options = {
    ...workerOptions({ persistDir: dir, apiToken, vars, port, ai, d1 }),
    // SA_E2E_LOG=1 shows the Worker's console output and workerd's errors. Otherwise the
    // Worker's console.log (the front door's request log lines) is read and dropped: thousands
    // of lines per test would only slow the runs down; warnings and errors still show.
    ...(process.env.SA_E2E_LOG
      ? { log: new Log(LogLevel.DEBUG) }
      : { handleRuntimeStdio: (stdout, stderr) => { stdout.resume(); stderr.pipe(process.stderr); } }),
    // Last, as documented (a caller may read the runtime's output itself: bench/schedules.mjs).
    ...extra,
  };
  if (ai) {
    // Two workers: the shared options stay on top, the Worker's own go first in `workers`.
    const shared = ["host", "port", "defaultPersistRoot", "log", "handleRuntimeStdio"];
    const main = Object.fromEntries(Object.entries(options).filter(([k]) => !shared.includes(k)));
    const top = Object.fromEntries(Object.entries(options).filter(([k]) => shared.includes(k)));
    options = { ...top, workers: [main, ai.worker] };
  }
  let mf = null;
  let url = null;
  const start = async () => {
    mf = new Miniflare(options);
    try {
      url = await mf.ready;
    } catch (e) {
      await mf.dispose().catch(() => {});
      mf = null;
      throw e;
    }
  };
  const stopRuntime = async () => {
    if (mf) await mf.dispose();
    mf = null;
  };
  await start();
  const w = client(() => url, apiToken, {
    async stop() {
      await stopRuntime();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      await stopRuntime();
      await start();
    },
  });
  Object.defineProperty(w, "mf", { get: () => mf, enumerable: true });
  Object.defineProperty(w, "persistDir", { value: dir, enumerable: true });
  return w;
}

const liveWranglers = new Set();
// Never leave a wrangler (or its workerd) behind, even when a test throws or is cancelled.
process.once("exit", () => {
  for (const child of liveWranglers) { try { process.kill(-child.pid, "SIGKILL"); } catch { /* gone */ } }
});

/**
 * Starts `wrangler dev` on wrangler.toml (its [build] command runs first; with the default
 * `skipBuildIfFresh` it does nothing when build/ is newer than the sources).
 * @param {object} [o]
 * @param {string} [o.persistDir] `--persist-to` directory; omitted: a temporary one stop() removes.
 * @param {string|null} [o.apiToken="test-token"] passed as `--var API_TOKEN:...`; null leaves it unset.
 * @param {Record<string, string>} [o.vars] more `--var`s.
 * @param {number} [o.port] HTTP port; default: a free one (kept across restart()).
 * @param {boolean} [o.skipBuildIfFresh=true] sets SA_SKIP_BUILD_IF_FRESH=1 for the [build] step.
 * @param {number} [o.timeoutMs=180000] how long start-up (build included) may take.
 * @returns {Promise<WorkerClient & {output: () => string}>} `output()` is wrangler's output so far.
 */
export async function startWranglerDev({
  persistDir, apiToken = "test-token", vars = {}, port, skipBuildIfFresh = true, timeoutMs = 180_000,
} = {}) {
  const ownDir = !persistDir;
  const dir = persistDir ?? mkdtempSync(join(tmpdir(), "sa-wrangler-"));
  const httpPort = port || await freePort();
  const allVars = { ...(apiToken != null ? { API_TOKEN: apiToken } : {}), ...vars };
  let child = null;
  let out = "";
  const start = async () => {
    const inspectorPort = await freePort();
    out = "";
    // wrangler's CLI itself, as its bin/wrangler.js wrapper would start it (neither the wrapper
    // nor npx forwards SIGINT), in its own process group so a SIGKILL of the group can clean up
    // the workerd children if wrangler does not stop by itself.
    child = spawn(process.execPath, [
      "--no-warnings", "--experimental-vm-modules",
      join(ROOT, "node_modules/wrangler/wrangler-dist/cli.js"), "dev",
      "--ip", "127.0.0.1", "--port", String(httpPort), "--inspector-port", String(inspectorPort),
      "--persist-to", dir, "--show-interactive-dev-session=false",
      ...Object.entries(allVars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
    ], {
      cwd: ROOT,
      env: {
        ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false",
        ...(skipBuildIfFresh ? { SA_SKIP_BUILD_IF_FRESH: "1" } : {}),
      },
      stdio: ["ignore", "pipe", "pipe"], detached: true,
    });
    liveWranglers.add(child);
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { out += d; });
    const deadline = Date.now() + timeoutMs;
    // "Ready on http://..." is printed once the proxy serves the Worker.
    while (!/Ready on/.test(out)) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await stopRuntime();
        throw new Error(`wrangler dev did not start:\n${out}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stopRuntime = () => new Promise((resolve) => {
    const c = child;
    if (!c) return resolve();
    const done = () => { liveWranglers.delete(c); try { process.kill(-c.pid, "SIGKILL"); } catch { /* gone */ } resolve(); };
    if (c.exitCode !== null || c.signalCode !== null) return done();
    const force = setTimeout(() => { try { process.kill(-c.pid, "SIGKILL"); } catch { /* gone */ } }, 15_000);
    c.once("exit", () => { clearTimeout(force); done(); });
    try { process.kill(c.pid, "SIGINT"); } catch { done(); } // wrangler stops its workerd itself
  }).then(() => { child = null; });
  await start();
  const url = new URL(`http://127.0.0.1:${httpPort}/`);
  const w = client(() => url, apiToken, {
    async stop() {
      await stopRuntime();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      await stopRuntime();
      await start();
    },
  });
  w.output = () => out;
  Object.defineProperty(w, "persistDir", { value: dir, enumerable: true });
  return w;
}

/** A free TCP port on 127.0.0.1. */
async function freePort() {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}
