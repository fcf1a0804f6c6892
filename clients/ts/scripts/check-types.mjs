// Fails (exit 1) when src/openapi.ts is not what docs/openapi.yaml generates now:
// `npm run check --prefix clients/ts`. Regenerates into a temporary file and compares.
// `node scripts/check-types.mjs <spec>` checks against another OpenAPI document instead.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { GENERATE_COMMAND, OUTPUT, ROOT, SPEC, render } from "./openapi.mjs";

const spec = process.argv[2] ? resolve(process.argv[2]) : SPEC;
const dir = mkdtempSync(join(tmpdir(), "sa-client-types-"));
try {
  const fresh = join(dir, "openapi.ts");
  writeFileSync(fresh, await render(spec));
  const want = readFileSync(fresh, "utf8");
  let have = "";
  try { have = readFileSync(OUTPUT, "utf8"); } catch { /* missing: stale */ }
  if (have !== want) {
    const a = have.split("\n");
    const b = want.split("\n");
    let i = 0;
    while (i < Math.max(a.length, b.length) && a[i] === b[i]) i++;
    console.error(`types are stale: run \`${GENERATE_COMMAND}\` (${relative(ROOT, OUTPUT)} differs from what ${relative(ROOT, spec)} generates)`);
    console.error(`  first difference at line ${i + 1}:`);
    console.error(`  committed: ${a[i] === undefined ? "(end of file)" : a[i].trim()}`);
    console.error(`  generated: ${b[i] === undefined ? "(end of file)" : b[i].trim()}`);
    process.exit(1);
  }
  console.log(`${relative(ROOT, OUTPUT)} is up to date with ${relative(ROOT, spec)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
