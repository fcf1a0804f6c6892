// A real sentence-embedding model for end-to-end tests and the bench: all-MiniLM-L6-v2 served on
// 127.0.0.1 by scripts/minilm/server.py (numpy, OpenAI-compatible POST /v1/embeddings), run from
// the venv scripts/setup.sh installs ($SA_MINILM_DIR). Point the Worker at it with
// EMBEDDINGS_PROVIDER=openai, EMBEDDINGS_BASE_URL=<baseUrl>, EMBEDDINGS_MODEL=EMBEDDING_MODEL.
// Unlike ./llm-server.mjs (hashed bag-of-words vectors, for tests that need determinism and
// shared words), texts that mean the same are near here even with no word in common. Its
// forward pass is checked against sentence-transformers' printed cosines by
// scripts/minilm/check.py (run by ./minilm.test.mjs).
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { ROOT } from "./harness.mjs";

/** The model's name, the value for EMBEDDINGS_MODEL. */
export const EMBEDDING_MODEL = "all-MiniLM-L6-v2";
/** Dimensions of its vectors. */
export const EMBEDDING_DIMS = 384;
/** Tokens a text is cut to ([CLS] and [SEP] included), as sentence-transformers does. */
export const MAX_TOKENS = 256;

/** The venv of the model: $SA_MINILM_DIR, else $SA_TOOLS_DIR/minilm-<SA_MINILM_VERSION of scripts/env.sh>. */
export const MINILM_DIR = process.env.SA_MINILM_DIR ?? (() => {
  const version = /^export SA_MINILM_VERSION=(\S+)/m.exec(readFileSync(join(ROOT, "scripts", "env.sh"), "utf8"))?.[1];
  const tools = process.env.SA_TOOLS_DIR ?? join(process.env.HOME ?? "", ".cache", "sa-tools");
  return join(tools, `minilm-${version}`);
})();
/** Its Python. */
export const PYTHON = join(MINILM_DIR, "bin", "python");
/** The server and the check, in scripts/minilm/. */
export const SERVER = join(ROOT, "scripts", "minilm", "server.py");
export const CHECK = join(ROOT, "scripts", "minilm", "check.py");

/**
 * @typedef {object} LoggedRequest one POST /v1/embeddings, logged by the server before it answered
 * @property {any} body the request's JSON body (`{model, input: string | string[]}`; the text if not JSON)
 * @property {number} status what it was answered (500 for a failure injected by fail())
 * @property {boolean} failed the status was not 2xx
 */
/**
 * @typedef {object} MiniLmServer
 * @property {string} baseUrl `http://127.0.0.1:PORT/v1`, the value for EMBEDDINGS_BASE_URL
 * @property {LoggedRequest[]} requests every embeddings request, oldest first (appended as the
 *   server's log lines arrive, just before its answer is sent)
 * @property {(n?: number, status?: number) => Promise<void>} fail the next `n` embeddings
 *   requests (default 1) answer `status` (default 500) with an OpenAI error object; fail(0) ends it
 * @property {(input: string | string[], model?: string) => Promise<number[][]>} embed the vectors of `input`
 *   (by `model`: all-MiniLM-L6-v2 unless "minilm-static-average", the server's second model),
 *   asked of the server directly (logged like any request)
 * @property {() => Promise<void>} close stops the server
 */

/**
 * Starts the model server on a free port; resolves once it is listening (the model loaded,
 * about 2 s). Fails when the venv is missing (run bash scripts/setup.sh).
 * @param {{timeoutMs?: number}} [o]
 * @returns {Promise<MiniLmServer>}
 */
export function start({ timeoutMs = 60_000 } = {}) {
  if (!existsSync(PYTHON)) {
    return Promise.reject(new Error(`${PYTHON} is missing: run bash scripts/setup.sh (it installs all-MiniLM-L6-v2)`));
  }
  const child = spawn(PYTHON, [SERVER, "0"], {
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1", PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  /** @type {LoggedRequest[]} */
  const requests = [];
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return new Promise((resolve, reject) => {
    let baseUrl = null;
    const fail = (why) => { child.kill("SIGKILL"); reject(new Error(`${why}\n${stderr}`)); };
    const timer = setTimeout(() => fail(`the all-MiniLM-L6-v2 server did not listen within ${timeoutMs} ms`), timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (!baseUrl) reject(new Error(`the all-MiniLM-L6-v2 server exited (${code ?? signal}) before listening\n${stderr}`));
    });
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (!baseUrl) {
        const m = /^listening (\S+)$/.exec(line);
        if (!m) return;
        clearTimeout(timer);
        baseUrl = `http://${m[1]}/v1`;
        resolve(api(baseUrl));
        return;
      }
      let entry;
      try { entry = JSON.parse(line); } catch { return; }
      if (entry && "request" in entry) {
        requests.push({ body: entry.request, status: entry.status, failed: entry.status < 200 || entry.status >= 300 });
      }
    });
  });

  function api(baseUrl) {
    const origin = baseUrl.replace(/\/v1$/, "");
    return {
      baseUrl,
      requests,
      async fail(n = 1, status = 500) {
        const r = await fetch(`${origin}/control`, { method: "POST", body: JSON.stringify({ fail: n, status }) });
        if (!r.ok) throw new Error(`POST /control answered ${r.status}: ${await r.text()}`);
      },
      async embed(input, model = EMBEDDING_MODEL) {
        const r = await fetch(`${baseUrl}/embeddings`, {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, input }),
        });
        const body = await r.json();
        if (!r.ok) throw new Error(`POST /v1/embeddings answered ${r.status}: ${JSON.stringify(body)}`);
        return body.data.sort((a, b) => a.index - b.index).map((d) => d.embedding);
      },
      async close() {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
        await exited;
      },
    };
  }
}

/** The cosine of two vectors (the server's are unit vectors: their dot product). */
export function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return dot / Math.sqrt(na * nb);
}
