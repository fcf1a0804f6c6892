// A node:test reporter (scripts/test.sh passes it with --test-reporter): one line per test file,
// "<seconds> <file>", the file's whole run (its hooks, runtimes and tests), the longest first.
// node runs each file as a test of its own: its `test:complete` event carries the file's name as
// the test's name.
import { relative } from "node:path";

export default async function* fileTimes(source) {
  const files = [];
  for await (const event of source) {
    const d = event.data;
    if (event.type === "test:complete" && d?.file && d.name === d.file && d.nesting === 0) {
      files.push([d.details?.duration_ms ?? 0, relative(process.cwd(), d.file)]);
    }
  }
  files.sort((a, b) => b[0] - a[0]);
  for (const [ms, file] of files) yield `${(ms / 1000).toFixed(1)} ${file}\n`;
}
