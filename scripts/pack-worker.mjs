#!/usr/bin/env node
// Packs the built Worker as the npm package @session-agent/worker, for TypeScript projects
// that have no Rust toolchain (packages/worker/README.md says how they use it).
//
//   node scripts/pack-worker.mjs        (after `bash scripts/build.sh`)
//
// Assembles build/npm-worker/ from what the build wrote (build/index.js, build/index_bg.wasm,
// build/console/) and what is hand-written (packages/worker/: package.json, index.d.ts,
// README.md), sets the version from the root package.json, and runs `npm pack` there. The
// tarball goes to build/; the last line printed is
//   worker package: <tarball> <N> bytes, <M> files (wasm <N> bytes)
// Exits non-zero, saying why, when the build is missing or incomplete.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const BUILD = join(ROOT, "build");
const SRC = join(ROOT, "packages", "worker");
const OUT = join(BUILD, "npm-worker");

function fail(message) {
  console.error(`pack-worker: ${message}`);
  process.exit(1);
}

// What the build must have written. The package is only ever made from a complete build.
const built = ["index.js", "index_bg.wasm", "console/index.html"];
const missing = built.filter((f) => !existsSync(join(BUILD, f)));
if (missing.length) {
  fail(`build/${missing.join(", build/")} missing: run \`bash scripts/build.sh\` first`);
}
const hand = ["package.json", "index.d.ts", "README.md"];
const missingHand = hand.filter((f) => !existsSync(join(SRC, f)));
if (missingHand.length) fail(`packages/worker/${missingHand.join(", packages/worker/")} missing`);

// index.js may import only the wasm next to it and the runtime's own module: anything else
// would be missing from the package (or need a bundler rule the user does not have).
const js = readFileSync(join(BUILD, "index.js"), "utf8");
const imports = [...js.matchAll(/\bimport\s*(?:[\w${}\s,*]+?\s*from\s*)?["']([^"']+)["']/g)].map((m) => m[1]);
const unexpected = imports.filter((s) => s !== "./index_bg.wasm" && s !== "cloudflare:workers");
if (!imports.includes("./index_bg.wasm")) fail("build/index.js does not import ./index_bg.wasm: not the expected worker-build output");
if (unexpected.length) fail(`build/index.js imports ${unexpected.join(", ")}, which the package does not ship`);

const rootPkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const pkg = JSON.parse(readFileSync(join(SRC, "package.json"), "utf8"));
pkg.version = rootPkg.version;

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
cpSync(join(BUILD, "index.js"), join(OUT, "index.js"));
cpSync(join(BUILD, "index_bg.wasm"), join(OUT, "index_bg.wasm"));
cpSync(join(BUILD, "console"), join(OUT, "console"), { recursive: true });
for (const f of hand.filter((f) => f !== "package.json")) cpSync(join(SRC, f), join(OUT, f));
writeFileSync(join(OUT, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);

// npm pack needs no network for a package without dependencies; no scripts run.
let packed;
try {
  const out = execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", BUILD], {
    cwd: OUT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" },
  });
  packed = JSON.parse(out)[0];
} catch (e) {
  fail(`npm pack failed in ${relative(ROOT, OUT)}: ${e.stderr || e.message}`);
}
const tarball = join(BUILD, packed.filename);
const bytes = statSync(tarball).size;
const wasm = packed.files.find((f) => f.path === "index_bg.wasm");
if (!wasm) fail("the tarball has no index_bg.wasm (check `files` in packages/worker/package.json)");
const rust = packed.files.filter((f) => /\.rs$|(^|\/)Cargo\.(toml|lock)$|rust-toolchain/.test(f.path));
if (rust.length) fail(`the tarball has Rust files: ${rust.map((f) => f.path).join(", ")}`);
console.log(`worker package: ${tarball} ${bytes} bytes, ${packed.files.length} files (wasm ${wasm.size} bytes)`);
