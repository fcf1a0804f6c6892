// Builds the console served at `/` (console/ → build/console/, the Worker's static assets):
// esbuild bundles console/src/main.js and what it imports (npm packages included) into one
// minified ES module, console.js; index.html and console.css are copied as they are.
// Called by scripts/build.sh after the wasm (and when the wasm is fresh), so `wrangler dev`,
// `wrangler deploy` and the tests always serve the console of the checked-out sources.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "console");
const out = join(root, "build", "console");

const started = Date.now();
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(src, "src", "main.js")],
  outfile: join(out, "console.js"),
  bundle: true, minify: true, format: "esm", target: "es2022", platform: "browser",
  legalComments: "none", logLevel: "warning",
});
for (const f of ["index.html", "console.css"]) copyFileSync(join(src, f), join(out, f));
const size = ["index.html", "console.css", "console.js"].map((f) => statSync(join(out, f)).size).reduce((a, b) => a + b);
console.log(`build: console built in ${Date.now() - started} ms: build/console/ ${size} bytes`);
