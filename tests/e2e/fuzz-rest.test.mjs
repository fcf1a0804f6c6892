// Schemathesis, part 2: every operation but those of fuzz.test.mjs (sessions, blocks, tools,
// MCP, memories, tokens, export / import…), against docs/openapi.yaml on the running Worker;
// see fuzz-rig.mjs for what is checked.
import { test, before, after } from "node:test";
import { fuzz, setUp, tearDown } from "./fuzz-rig.mjs";

before(setUp);
after(tearDown);

test("Schemathesis on every other operation: every check, no failure; rejected requests change nothing", { timeout: 1_800_000 }, (t) =>
  fuzz(t, ["--exclude-path-regex", "/ws$|/sessions/\\{sid\\}/(messages|history|chat|compact|split)"]));
