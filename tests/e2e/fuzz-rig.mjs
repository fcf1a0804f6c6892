// What the two Schemathesis files share (fuzz.test.mjs: the session's message, history and turn
// operations; fuzz-rest.test.mjs: every other one; split so each stays within the per-file
// time limit of the test command). Schemathesis against docs/openapi.yaml on the running Worker (workerd through Miniflare, a real
// localhost model so /chat and /compact really run): every operation, all of Schemathesis's checks
// (no 5xx, status codes, content types, headers and bodies as the spec says, schema-valid requests
// accepted and schema-violating ones refused, Allow headers, auth, links), plus our own check from
// tests/fuzz/hooks.py: a request answered 4xx changed nothing stored (every table of every agent's
// SQLite and local R2, compared before and after the call).
//
// The WebSocket route (GET …/ws) is left out: an upgrade is not an HTTP exchange Schemathesis can
// drive (tests/e2e/chat.test.mjs and holes.test.mjs cover it). Answers that depend on stored data
// or on another part of the request (for example `message.id` = `{mid}`), which no JSON Schema can
// express, may honestly be 400: tests/fuzz/schemathesis.toml lists those operations and why.
//
// Budget: SA_FUZZ_EXAMPLES test cases per operation and phase (default 30: about 3,000 requests,
// 1-2 minutes); SA_FUZZ_SEED (default 1) makes a run repeatable. `SA_FUZZ_EXAMPLES=500` fuzzes
// for longer. Schemathesis is installed by scripts/setup.sh in $SA_TOOLS_DIR.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

const TOKEN = "fuzz-token";
const TOOLS = process.env.SA_TOOLS_DIR ?? join(process.env.HOME ?? "", ".cache", "sa-tools");
const ST = join(process.env.SA_SCHEMATHESIS_DIR ?? join(TOOLS, "schemathesis-4.32.5"), "bin", "st");
const EXAMPLES = process.env.SA_FUZZ_EXAMPLES ?? "30";
const SEED = process.env.SA_FUZZ_SEED ?? "1";
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: "You are careful." },
    { label: "memory", kind: "writable", description: "Facts", maxTokens: 200 },
    { label: "knowledge", kind: "search", description: "Searchable knowledge base" },
    { label: "skills", kind: "skills" },
    { label: "library", kind: "skills", prefix: "library/", scope: "shared" },
  ],
  searchableHistory: "history",
  compaction: { after: 2000, protectHead: 1, tailTokenBudget: 200, minTailMessages: 2 },
};

let w;
let model;
let dir;

/** Starts the Worker (with the scripted model) and stores the data the spec's examples name. */
export async function setUp() {
  model = await startModel();
  dir = mkdtempSync(join(tmpdir(), "sa-fuzz-"));
  w = await startWorker({
    persistDir: dir,
    apiToken: TOKEN,
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "fuzz-model", LLM_TIMEOUT_MS: "5000",
      SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: "fuzz-token-secret-fuzz-token-secret",
    },
  });
  // The data the spec's examples name (agent alice, session chat-1, messages m1..m4 and one
  // called batch), so example requests reach stored data instead of 404s.
  const text = (id, role, t) => ({ id, role, parts: [{ type: "text", text: t }] });
  const r = await w.json("POST", "/agents/alice/sessions/chat-1/messages/batch", {
    messages: [text("m1", "user", "Plan a trip to Lisbon"), text("m2", "assistant", "Here are three itineraries."),
      text("m3", "user", "The second one"), text("m4", "assistant", "Booked."), text("batch", "user", "a message called batch")],
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

/** Stops what setUp started. */
export async function tearDown() {
  await w?.stop();
  await model?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** Runs Schemathesis and resolves with its exit code and output. */
function schemathesis(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(ST, args, { cwd: dir, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { out += d; });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

/**
 * Runs Schemathesis on the operations `paths` selects (Schemathesis path options, e.g.
 * `["--include-path-regex", "…"]`; one option of a kind: a second replaces the first, so the
 * socket route's `/ws$` goes into the exclusion) and fails `t` on any failure.
 */
export async function fuzz(t, paths) {
  if (!existsSync(ST)) {
    assert.fail(`${ST} is missing: run bash scripts/setup.sh (it installs Schemathesis)`);
  }
  const started = Date.now();
  const { code, out } = await schemathesis([
    "--config-file", join(ROOT, "tests/fuzz/schemathesis.toml"),
    "run", join(ROOT, "docs/openapi.yaml"),
    "--url", w.url.href.replace(/\/$/, ""),
    "-H", `Authorization: Bearer ${TOKEN}`,
    "--checks", "all",
    "--max-examples", EXAMPLES,
    "--seed", SEED,
    ...paths,
    // One worker: the state check compares before and after each call.
    "--workers", "1",
    "--no-color", "--output-sanitize", "false",
  ], {
    SCHEMATHESIS_HOOKS: "hooks",
    PYTHONPATH: join(ROOT, "tests/fuzz"),
    SA_FUZZ_STATE_DIR: dir,
  });
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  const generated = /(\d+) generated/.exec(out)?.[1] ?? "?";
  const failures = /❌ (.+)$/gm;
  const kinds = [...out.matchAll(failures)].map((m) => m[1]).filter((k) => !/^(Examples|Coverage|Fuzzing|Stateful)$/.test(k));
  t.diagnostic(`fuzz: ${generated} requests (seed ${SEED}, ${EXAMPLES} per operation), ${kinds.length} failure kinds, ${seconds} s`);
  console.log(`fuzz: ${generated} requests fuzzed, ${kinds.length ? kinds.join("; ") : "0 failures"} (${seconds} s)`);
  if (code !== 0) {
    // The failures with their reproductions, then the summary.
    const from = out.search(/^=+ (FAILURES|ERRORS) =+$/m);
    console.log(from >= 0 ? out.slice(from) : out);
  }
  assert.equal(code, 0, `Schemathesis found failures (exit ${code}): ${kinds.join("; ")}`);
}
