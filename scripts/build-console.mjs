// Builds the console served at `/` (console/ → build/console/, the Worker's static assets):
// esbuild bundles console/src/main.js and what it imports (the typed client's TypeScript
// sources, clients/ts/src, by relative path; npm packages: the AI SDK's chat client) into one
// minified ES module, console.js; index.html and console.css are copied as they are. It prints
// the size, and what a browser downloads (gzip).
// Called by scripts/build.sh after the wasm (and when the wasm is fresh), so `wrangler dev`,
// `wrangler deploy` and the tests always serve the console of the checked-out sources.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "console");
const out = join(root, "build", "console");

const started = Date.now();
// Built beside and then swapped in, so a Worker running meanwhile never finds the folder empty.
const next = `${out}.next`;
rmSync(next, { recursive: true, force: true });
mkdirSync(next, { recursive: true });
await build({
  entryPoints: [join(src, "src", "main.js")],
  outfile: join(next, "console.js"),
  bundle: true, minify: true, format: "esm", target: "es2022", platform: "browser",
  legalComments: "none", logLevel: "warning",
});
for (const f of ["index.html", "console.css"]) copyFileSync(join(src, f), join(next, f));
rmSync(out, { recursive: true, force: true });
renameSync(next, out);
const files = ["index.html", "console.js", "console.css"].map((f) => readFileSync(join(out, f)));
const size = files.reduce((a, b) => a + b.length, 0);
const gzip = files.reduce((a, b) => a + gzipSync(b, { level: 9 }).length, 0);
console.log(`build: console built in ${Date.now() - started} ms: build/console/ ${size} bytes (${gzip} bytes gzip)`);
