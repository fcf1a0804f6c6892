// What the two Schemathesis files share (fuzz.test.mjs: the session's message, history and turn
// operations; fuzz-rest.test.mjs: every other one; split so each stays within the per-file
// time limit of the test command). Schemathesis against docs/openapi.yaml on the running Worker (workerd through Miniflare, a real
// localhost model so /chat and /compact really run): every operation, all of Schemathesis's checks
// as tests/fuzz/schemathesis.toml sets them (no 5xx, response time, status codes, content types, headers and bodies as the spec says, schema-valid requests
// accepted and schema-violating ones refused, Allow headers, auth, links), plus our own check from
// tests/fuzz/hooks.py: a request answered 4xx changed nothing stored (every table of every agent's
// SQLite and local R2, compared before and after the call, but for what only background work
// writes; a refused call that changed something while the Worker's model was called, which only
// background work does then, is sent again once the model is quiet and judged by that call, and a
// change while the model was called anyway is let go: each run prints how many calls were judged,
// sent again and let go, and fails if none was judged).
//
// The WebSocket route (GET …/ws) is left out: an upgrade is not an HTTP exchange Schemathesis can
// drive (tests/e2e/chat.test.mjs and holes.test.mjs cover it). Answers that depend on stored data
// or on another part of the request (for example `message.id` = `{mid}`), which no JSON Schema can
// express, may honestly be 400: tests/fuzz/schemathesis.toml lists those operations and why.
//
// Three tokens, each its own run with its own seed: a session-limited write token (for chat-1
// only; the first run, while what it must never see is still stored: SA_FUZZ_SECRETS in hooks.py),
// an agent-wide read token, then the admin token. Every phase runs, the stateful one included
// (the spec's links).
//
// Budget: SA_FUZZ_EXAMPLES test cases per operation and phase for the admin token (default 30:
// about 3,000 requests, 1-2 minutes), a third of that for each scoped token. Seeds are new each
// run and printed (with the command that repeats a failing one); SA_FUZZ_SEED fixes them (the
// scoped runs take the next two numbers). `SA_FUZZ_EXAMPLES=500` fuzzes for longer. Schemathesis
// is installed by scripts/setup.sh in $SA_TOOLS_DIR.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

const TOKEN = "fuzz-token";
const TOOLS = process.env.SA_TOOLS_DIR ?? join(process.env.HOME ?? "", ".cache", "sa-tools");
const ST = join(process.env.SA_SCHEMATHESIS_DIR ?? join(TOOLS, "schemathesis-4.32.5"), "bin", "st");
const EXAMPLES = Number(process.env.SA_FUZZ_EXAMPLES ?? "30");
const SEED = process.env.SA_FUZZ_SEED ? Number(process.env.SA_FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);
/** What a token limited to chat-1 must never be answered: stored in the session `vault`. */
const SECRETS = ["ZEBRA-7731-vault-message", "ZEBRA-7731-vault-memory"];
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: "You are careful." },
    { label: "memory", kind: "writable", description: "Facts", maxTokens: 200 },
    { label: "knowledge", kind: "search", description: "Searchable knowledge base" },
    { label: "skills", kind: "skills" },
    { label: "library", kind: "skills", prefix: "library/", scope: "shared" },
  ],
  searchableHistory: "history",
  memory: {},
  compaction: { after: 2000, protectHead: 1, tailTokenBudget: 200, minTailMessages: 2 },
};

let w;
let model;
let dir;

/** Starts the Worker (with the scripted model) and stores the data the spec's examples name. */
export async function setUp() {
  dir = mkdtempSync(join(tmpdir(), "sa-fuzz-"));
  model = await startModel({ activityFile: join(dir, "model-activity.json") });
  w = await startWorker({
    persistDir: dir,
    apiToken: TOKEN,
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "fuzz-model", LLM_TIMEOUT_MS: "5000",
      SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: "fuzz-token-secret-fuzz-token-secret",
      // Directory reports wait an hour: the alarm that sends one (and the shard it creates)
      // would change the stored state on its own, between a rejected request's two readings.
      DIRECTORY_REPORT_MS: "3600000",
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
  // What a token for chat-1 must never see: a message and a conversation memory of `vault`.
  // Every letter and digit as a word of its own, so that the short words the fuzzer generates
  // find them (a search in this version must match all of its words).
  const words = "abcdefghijklmnopqrstuvwxyz0123456789".split("").join(" ");
  const v = await w.json("POST", "/agents/alice/sessions/vault/messages", { message: text("v1", "user", `the code is ${SECRETS[0]} ${words}`) });
  assert.equal(v.status, 201, JSON.stringify(v.body));
  const m = await w.json("POST", "/agents/alice/memories", { content: `vault note ${SECRETS[1]} ${words}`, category: "conversation", sessionId: "vault" });
  assert.equal(m.status, 201, JSON.stringify(m.body));
  const token = async (body) => {
    const t = await w.json("POST", "/agents/alice/tokens", { ttlSeconds: 3600, ...body });
    assert.equal(t.status, 201, JSON.stringify(t.body));
    return t.body.token;
  };
  tokens = { limited: await token({ scope: "write", sessions: ["chat-1"] }), read: await token({ scope: "read" }) };
}

let tokens;

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
 * The configuration of the session-limited run: tests/fuzz/schemathesis.toml, plus dictionaries
 * that point half of the generated values at what such a token may reach and must not see
 * past: its session (`chat-1`; generated ids are refused before anything is read), the tools
 * that search, the history block, and words of the secrets' session (every letter and digit is
 * a word there).
 */
function aimed() {
  const file = join(dir, "schemathesis-limited.toml");
  const words = [..."abcdefghijklmnopqrstuvwxyz0123456789", "code", "vault", "note", "the"];
  writeFileSync(file, `${readFileSync(join(ROOT, "tests/fuzz/schemathesis.toml"), "utf8")}
[dictionaries.reach-sid]
values = ["chat-1"]

[dictionaries.reach-tools]
values = ["session_search", "search_context", "memory_recall", "memory_forget", "expand_compaction"]

[dictionaries.reach-labels]
values = ["history"]

[dictionaries.reach-words]
values = ${JSON.stringify(words)}

[parameters]
"path.sid" = { dictionary = "reach-sid", probability = 0.5 }
"path.name" = { dictionary = "reach-tools", probability = 0.6 }
"body.input.label" = { dictionary = "reach-labels", probability = 0.4 }
"body.input.query" = { dictionary = "reach-words", probability = 0.6 }
"query.q" = { dictionary = "reach-words", probability = 0.5 }
`);
  return file;
}

/**
 * Runs Schemathesis on the operations `paths` selects (Schemathesis path options, e.g.
 * `["--include-path-regex", "…"]`; one option of a kind: a second replaces the first, so the
 * socket route's `/ws$` goes into the exclusion) once per token (session-limited, read, admin)
 * and fails `t` on any failure, naming the token and the seed that found it.
 */
export async function fuzz(t, paths) {
  if (!existsSync(ST)) {
    assert.fail(`${ST} is missing: run bash scripts/setup.sh (it installs Schemathesis)`);
  }
  const runs = [
    { kind: "session-limited", token: tokens.limited, examples: Math.max(1, Math.round(EXAMPLES / 3)), seed: SEED + 1, secrets: SECRETS, config: aimed() },
    { kind: "read", token: tokens.read, examples: Math.max(1, Math.round(EXAMPLES / 3)), seed: SEED + 2, secrets: [] },
    { kind: "admin", token: TOKEN, examples: EXAMPLES, seed: SEED, secrets: [] },
  ];
  const failed = [];
  const tallyFile = join(dir, "state-check.json");
  for (const run of runs) {
    const started = Date.now();
    rmSync(tallyFile, { force: true });
    const { code, out } = await schemathesis([
      "--config-file", run.config ?? join(ROOT, "tests/fuzz/schemathesis.toml"),
      "run", join(ROOT, "docs/openapi.yaml"),
      "--url", w.url.href.replace(/\/$/, ""),
      "-H", `Authorization: Bearer ${run.token}`,
      "--max-examples", String(run.examples),
      "--seed", String(run.seed),
      ...paths,
      // One worker: the state check compares before and after each call.
      "--workers", "1",
      "--no-color", "--output-sanitize", "false",
    ], {
      SCHEMATHESIS_HOOKS: "hooks",
      PYTHONPATH: join(ROOT, "tests/fuzz"),
      SA_FUZZ_STATE_DIR: dir,
      SA_FUZZ_MODEL_ACTIVITY: join(dir, "model-activity.json"),
      SA_FUZZ_SECRETS: run.secrets.join("|"),
    });
    // hooks.py's tally: refused calls judged and not (the model was called meanwhile), and the
    // names of its list of what background work writes that no database had.
    const tally = existsSync(tallyFile) ? JSON.parse(readFileSync(tallyFile, "utf8")) : null;
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    const generated = /(\d+) generated/.exec(out)?.[1] ?? "?";
    const kinds = [...out.matchAll(/❌ (.+)$/gm)].map((m) => m[1]).filter((k) => !/^(Examples|Coverage|Fuzzing|Stateful)$/.test(k));
    const judged = !tally ? "no tally" : `${tally.judged} refused requests judged, ${tally.sent_again} sent again after the model's work, ` +
      `${tally.model_busy} changes let go (the model was called meanwhile${tally.model_busy ? `: ${tally.model_busy_tables.join(" ")}` : ""}), ${(tally.waited_ms / 1000).toFixed(1)} s waited for it`;
    const line = `fuzz (${run.kind} token, seed ${run.seed}, ${run.examples} per operation): ${generated} requests, ` +
      `${kinds.length ? kinds.join("; ") : "0 failures"}; ${judged} (${seconds} s)`;
    t.diagnostic(line);
    console.log(line);
    if (!tally || tally.judged === 0 || tally.unseen.length > 0) {
      failed.push(`${run.kind} token: the refused-request check ${!tally ? "wrote no tally" : tally.judged === 0
        ? "judged no request" : `lists what no database has: ${tally.unseen.join(", ")} (tests/fuzz/hooks.py BACKGROUND)`}`);
    }
    if (code !== 0) {
      // The failures with their reproductions, then the summary, and how to run it again.
      const from = out.search(/^=+ (FAILURES|ERRORS) =+$/m);
      console.log(from >= 0 ? out.slice(from) : out);
      console.log(`repeat with SA_FUZZ_SEED=${SEED} (this run's seed ${run.seed} is SA_FUZZ_SEED plus ${run.seed - SEED})`);
      failed.push(`${run.kind} token, seed ${run.seed}: exit ${code}: ${kinds.join("; ")}`);
    }
  }
  assert.deepEqual(failed, [], `Schemathesis found failures: ${failed.join(" | ")}`);
}
