// The one place that turns docs/openapi.yaml into src/openapi.ts, shared by generate.mjs and
// check-types.mjs so both always use the same generator options.
import openapiTS, { astToString } from "openapi-typescript";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** clients/ts */
export const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
/** The repository root. */
export const ROOT = join(PACKAGE, "..", "..");
/** The API contract the types come from. */
export const SPEC = join(ROOT, "docs", "openapi.yaml");
/** The committed, generated file. */
export const OUTPUT = join(PACKAGE, "src", "openapi.ts");
/** How to regenerate, for messages. */
export const GENERATE_COMMAND = "npm run generate --prefix clients/ts";

/** The version of the openapi-typescript that `import` found (named in the file's header). */
function generatorVersion() {
  let dir = dirname(fileURLToPath(import.meta.resolve("openapi-typescript")));
  while (!existsSync(join(dir, "package.json")) || JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).name !== "openapi-typescript") {
    const up = dirname(dir);
    if (up === dir) return "(unknown version)";
    dir = up;
  }
  return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
}

/**
 * The TypeScript source of the types of `spec` (default docs/openapi.yaml).
 * - emptyObjectsUnknown: `type: object` without properties (a JSON Schema, a tool's input) is
 *   `unknown`, not `Record<string, never>` (which would refuse every real value).
 * - defaultNonNullable false: a request field with a `default` stays optional.
 * @param {string} [spec]
 * @returns {Promise<string>}
 */
export async function render(spec = SPEC) {
  const ast = await openapiTS(pathToFileURL(spec), {
    emptyObjectsUnknown: true,
    defaultNonNullable: false,
    silent: true,
  });
  return [
    `// Generated from docs/openapi.yaml by openapi-typescript ${generatorVersion()} (clients/ts/scripts/generate.mjs).`,
    `// Do not edit: change the spec and run \`${GENERATE_COMMAND}\`.`,
    "",
    astToString(ast),
  ].join("\n");
}
