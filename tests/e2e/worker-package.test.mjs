// The npm package @session-agent/worker ("use without Rust"): scripts/pack-worker.mjs packs the
// built Worker; the package is installed (extracted, no network) into a copy of
// examples/typescript, typechecked with its index.d.ts, bundled by wrangler itself (`wrangler
// deploy --dry-run`: the .wasm import from node_modules must come out as a wasm module), and
// the bundle is run in workerd (Miniflare) as wrangler.toml declares it: the user's own route,
// the user's own call to the Durable Object through its binding, the front door's API and
// WebSocket, and the console at `/` from the package's static files.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { Miniflare } from "miniflare";
import WebSocket from "ws";
import { BUILD, ROOT, nextMessage } from "./harness.mjs";

const run = promisify(execFile);
const TOKEN = "worker-package-e2e-token";
const built = existsSync(join(BUILD, "index.js"));
const skip = built ? false : "build/index.js is missing: run `bash scripts/build.sh` first";
// pack + wrangler types (~7 s) + tsc + wrangler dry-run + workerd start.
const timeout = 120_000;

const WRANGLER = join(ROOT, "node_modules/wrangler/bin/wrangler.js");
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const wranglerEnv = {
  ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", FORCE_COLOR: "0",
};

let tmp;        // scratch directory: the user's project and a build-less repository
let project;    // the copy of examples/typescript, with the package installed
let pkgDir;     // <project>/node_modules/@session-agent/worker
let tarball;    // { path, bytes, files, wasm, entries, line }
let dryRun;     // wrangler's output
let bundle;     // the dry-run's --outdir
let mf;
let url;

/** Runs a command; on failure the error carries its output. */
async function sh(cmd, args, opts) {
  try {
    return await run(cmd, args, { maxBuffer: 64 << 20, ...opts });
  } catch (e) {
    e.message += `\n--- stdout\n${e.stdout}\n--- stderr\n${e.stderr}`;
    throw e;
  }
}

/** The `KEY = "value"` lines of a [table] of a wrangler.toml (all the example uses). */
function tomlTable(toml, table) {
  const out = {};
  let inside = false;
  for (const line of toml.split("\n")) {
    const t = line.trim();
    if (t.startsWith("[")) inside = t === `[${table}]`;
    const m = inside && /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(".*"|true|false)\s*$/.exec(t);
    if (m) out[m[1]] = JSON.parse(m[2]);
  }
  return out;
}

before(async () => {
  if (skip) return;
  tmp = mkdtempSync(join(tmpdir(), "sa-worker-package-"));

  // 1. Pack, as a maintainer would.
  const { stdout } = await sh(process.execPath, [join(ROOT, "scripts/pack-worker.mjs")], { cwd: ROOT });
  const line = stdout.trim().split("\n").at(-1);
  const m = /^worker package: (\S+\.tgz) (\d+) bytes, (\d+) files \(wasm (\d+) bytes\)$/.exec(line);
  assert.ok(m, `pack-worker's last line: ${line}`);
  tarball = { line, path: m[1], bytes: +m[2], files: +m[3], wasm: +m[4] };
  assert.ok(existsSync(tarball.path), tarball.path);
  assert.equal(statSync(tarball.path).size, tarball.bytes);
  tarball.entries = (await sh("tar", ["-tzf", tarball.path])).stdout.trim().split("\n");

  // 2. The user's project: a copy of the example (without anything a local run left in it),
  //    with the package extracted where `npm install <tarball>` puts it.
  project = join(tmp, "app");
  const skipNames = new Set(["node_modules", ".wrangler", "dist", "worker-configuration.d.ts", "package-lock.json", ".dev.vars"]);
  cpSync(join(ROOT, "examples/typescript"), project, { recursive: true, filter: (src) => !skipNames.has(basename(src)) });
  pkgDir = join(project, "node_modules/@session-agent/worker");
  mkdirSync(pkgDir, { recursive: true });
  await sh("tar", ["-xzf", tarball.path, "-C", pkgDir, "--strip-components=1"]);

  // 3. Typecheck: the runtime types and Env from wrangler.toml, then tsc, the package's
  //    index.d.ts included (skipLibCheck off, so a broken declaration file fails).
  await sh(process.execPath, [WRANGLER, "types"], { cwd: project, env: wranglerEnv });
  await sh(process.execPath, [TSC, "-p", project, "--noEmit", "--skipLibCheck", "false"], { cwd: project });

  // 4. Bundle as `wrangler deploy` would, without an account.
  bundle = join(tmp, "dist");
  const out = await sh(process.execPath, [WRANGLER, "deploy", "--dry-run", "--outdir", bundle], { cwd: project, env: wranglerEnv });
  dryRun = out.stdout + out.stderr;

  // 5. Run the bundle in workerd, configured as the example's wrangler.toml says.
  const toml = readFileSync(join(project, "wrangler.toml"), "utf8");
  const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)[1];
  const assets = tomlTable(toml, "assets");
  mf = new Miniflare({
    modules: true,
    scriptPath: join(bundle, "index.js"),
    modulesRoot: bundle,
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }],
    compatibilityDate,
    durableObjects: { SESSION_AGENT: { className: "SessionAgent", useSQLite: true } },
    r2Buckets: ["SKILLS_BUCKET"],
    assets: {
      directory: join(project, assets.directory), binding: assets.binding,
      routerConfig: { has_user_worker: true, invoke_user_worker_ahead_of_assets: assets.run_worker_first },
    },
    bindings: { ...tomlTable(toml, "vars"), API_TOKEN: TOKEN },
    handleRuntimeStdio: (stdout, stderr) => { stdout.resume(); stderr.pipe(process.stderr); },
  });
  url = await mf.ready;
}, { timeout });

after(async () => {
  await mf?.dispose();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** fetch() on the running Worker; the admin token with `auth: true`. */
function call(path, { auth = false, ...init } = {}) {
  const headers = new Headers(init.headers);
  if (auth) headers.set("authorization", `Bearer ${TOKEN}`);
  return fetch(new URL(path, url), { ...init, headers });
}
const texts = (messages) => messages.map((m) => m.parts[0].text);
/** The console's files (paths under build/console/). */
const consoleFiles = () => readdirSync(join(BUILD, "console"), { recursive: true })
  .filter((f) => statSync(join(BUILD, "console", f)).isFile()).map((f) => f.split("\\").join("/"));

test("pack-worker packs the built Worker, without Rust, and says how big it is", { skip, timeout }, () => {
  console.log(tarball.line);
  const files = tarball.entries.map((e) => e.replace(/^package\//, ""));
  assert.equal(files.length, tarball.files);
  for (const f of ["package.json", "README.md", "index.js", "index.d.ts", "index_bg.wasm"]) {
    assert.ok(files.includes(f), `${f} in ${files}`);
  }
  for (const f of consoleFiles()) assert.ok(files.includes(`console/${f}`), `console/${f} in ${files}`);
  const rust = files.filter((f) => /\.rs$|(^|\/)Cargo\.(toml|lock)$|rust-toolchain|\.cargo/.test(f));
  assert.deepEqual(rust, [], "no Rust file in the package");
  assert.equal(tarball.wasm, statSync(join(pkgDir, "index_bg.wasm")).size);
  assert.ok(tarball.bytes < tarball.wasm, "the tarball is compressed");

  // What was packed is what the build made.
  assert.ok(readFileSync(join(pkgDir, "index_bg.wasm")).equals(readFileSync(join(BUILD, "npm-worker/index_bg.wasm"))));
  assert.equal(readFileSync(join(pkgDir, "index.js"), "utf8"), readFileSync(join(BUILD, "npm-worker/index.js"), "utf8"));

  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  const root = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  assert.equal(pkg.name, "@session-agent/worker");
  assert.equal(pkg.version, root.version, "the version comes from the root package.json");
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.exports["."], { types: "./index.d.ts", default: "./index.js" });
  assert.equal(pkg.dependencies, undefined, "nothing to install beyond the package");

  // Nothing a user reads asks for a Rust toolchain.
  const readme = readFileSync(join(pkgDir, "README.md"), "utf8");
  assert.doesNotMatch(readme, /\bcargo\b|rustup|worker-build|wasm-pack|scripts\/build\.sh/i);
  assert.match(readme, /node_modules\/@session-agent\/worker\/console/);
});

test("pack-worker fails clearly without a build", { skip, timeout }, async () => {
  // A repository with everything but build/.
  const repo = join(tmp, "no-build");
  mkdirSync(join(repo, "scripts"), { recursive: true });
  cpSync(join(ROOT, "scripts/pack-worker.mjs"), join(repo, "scripts/pack-worker.mjs"));
  cpSync(join(ROOT, "packages/worker"), join(repo, "packages/worker"), { recursive: true });
  cpSync(join(ROOT, "package.json"), join(repo, "package.json"));
  const e = await run(process.execPath, [join(repo, "scripts/pack-worker.mjs")], { cwd: repo }).then(() => null, (err) => err);
  assert.ok(e, "pack-worker succeeded without a build");
  assert.equal(e.code, 1);
  assert.match(e.stderr, /build\/index\.js.*missing: run `bash scripts\/build\.sh` first/);
  assert.ok(!existsSync(join(repo, "build")), "it made nothing");
});

test("wrangler bundles the package's .wasm import from node_modules", { skip, timeout }, () => {
  const out = readdirSync(bundle);
  const wasm = out.filter((f) => f.endsWith(".wasm"));
  assert.equal(wasm.length, 1, `one wasm module in ${out}`);
  assert.ok(readFileSync(join(bundle, wasm[0])).equals(readFileSync(join(pkgDir, "index_bg.wasm"))), "the package's wasm, as it is");
  const js = readFileSync(join(bundle, "index.js"), "utf8");
  assert.match(js, new RegExp(`from "\\./${wasm[0].replace(/\./g, "\\.")}"`), "imported as a module, not inlined");
  assert.match(js, /from "cloudflare:workers"/);
  assert.match(dryRun, /env\.SESSION_AGENT \(SessionAgent\)\s+Durable Object/);
  // What the Miniflare options above assume of the example's wrangler.toml.
  const toml = readFileSync(join(project, "wrangler.toml"), "utf8");
  assert.match(toml, /^new_sqlite_classes = \["SessionAgent"\]$/m);
  assert.match(toml, /^binding = "SKILLS_BUCKET"$/m);
  assert.match(dryRun, /env\.ASSETS\s+Assets/);
  assert.match(dryRun, new RegExp(`Read ${consoleFiles().length} files? from the assets directory \\S*node_modules/@session-agent/worker/console`));
});

test("the user's own route answers", { skip, timeout }, async () => {
  const r = await call("/hello");
  assert.equal(r.status, 200);
  assert.equal(await r.text(), "hello from my own Worker\n");
});

test("the user's code calls the Durable Object through its binding; the front door sees the same object", { skip, timeout }, async () => {
  let r = await call("/notes?user=user-1");
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { messages: [] });
  for (const text of ["buy milk", "call Ada"]) {
    r = await call("/notes?user=user-1", { method: "POST", body: text });
    assert.equal(r.status, 200);
  }
  const { messages } = await r.json();
  assert.deepEqual(texts(messages), ["buy milk", "call Ada"]);
  assert.deepEqual(messages.map((m) => m.role), ["user", "user"]);
  assert.deepEqual(texts((await (await call("/notes?user=user-1")).json()).messages), ["buy milk", "call Ada"]);
  // Another user: another Durable Object.
  assert.deepEqual((await (await call("/notes?user=user-2")).json()).messages, []);

  // The front door: /agents/user-1/... reaches idFromName("user-1"), with the token only.
  r = await call("/agents/user-1/sessions/notes/history", { auth: true });
  assert.equal(r.status, 200);
  assert.deepEqual((await r.json()).messages, messages);
  r = await call("/agents/user-1/sessions/notes/history");
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.code, "unauthorized");
});

test("the front door's API works inside the user's Worker", { skip, timeout }, async () => {
  assert.equal(await (await call("/healthz")).text(), "ok");
  const message = { id: "m1", role: "user", parts: [{ type: "text", text: "Plan a trip to Lisbon" }] };
  let r = await call("/agents/alice/sessions/trip/messages", {
    auth: true, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message }),
  });
  assert.equal(r.status, 201, await r.clone().text());
  assert.equal((await r.json()).inserted, true);
  r = await call("/agents/alice/search?q=lisbon", { auth: true });
  assert.equal(r.status, 200);
  assert.deepEqual((await r.json()).results.map((h) => [h.sessionId, h.id]), [["trip", "m1"]]);
  r = await call("/agents/alice/sessions", { auth: true });
  assert.deepEqual((await r.json()).sessions.map((s) => s.id), ["trip"]);

  // A WebSocket through the user's fetch, to the DO the user's code re-exported.
  const ws = new WebSocket(new URL("/agents/user-1/sessions/notes/ws", url.href.replace(/^http/, "ws")), {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject); });
  try {
    ws.send(JSON.stringify({ type: "history" }));
    const frame = await nextMessage(ws);
    assert.equal(frame.type, "history");
    assert.deepEqual(texts(frame.messages), ["buy milk", "call Ada"]);
  } finally {
    ws.close();
  }
});

test("GET / is the console, from the package's static files", { skip, timeout }, async () => {
  const r = await call("/");
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /^text\/html/);
  assert.ok(r.headers.get("content-security-policy"), "the front door's headers");
  const html = await r.text();
  assert.equal(html, readFileSync(join(pkgDir, "console/index.html"), "utf8"));
  assert.equal(html, readFileSync(join(BUILD, "console/index.html"), "utf8"), "the build's console");
  for (const asset of consoleFiles().filter((f) => f !== "index.html")) {
    const a = await call(`/${asset}`);
    assert.equal(a.status, 200, asset);
    assert.ok(Buffer.from(await a.arrayBuffer()).equals(readFileSync(join(pkgDir, "console", asset))), asset);
  }
});
