// Schemathesis, part 1: the operations on a session's messages, history and turns (compaction
// and split included), against docs/openapi.yaml on the running Worker; see fuzz-rig.mjs for
// what is checked. Part 2 is fuzz-rest.test.mjs.
import { test, before, after } from "node:test";
import { fuzz, setUp, tearDown } from "./fuzz-rig.mjs";

before(setUp);
after(tearDown);

test("Schemathesis on messages, history and turns: every check, no failure; rejected requests change nothing", { timeout: 1_800_000 }, (t) =>
  fuzz(t, ["--include-path-regex", "/sessions/\\{sid\\}/(messages|history|chat|compact|split)", "--exclude-path-regex", "/ws$"]));
