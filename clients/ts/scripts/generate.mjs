// Regenerates src/openapi.ts from docs/openapi.yaml: `npm run generate --prefix clients/ts`.
import { writeFileSync } from "node:fs";
import { relative } from "node:path";
import { OUTPUT, ROOT, SPEC, render } from "./openapi.mjs";

const text = await render(SPEC);
writeFileSync(OUTPUT, text);
console.log(`wrote ${relative(ROOT, OUTPUT)} (${text.length} bytes) from ${relative(ROOT, SPEC)}`);
