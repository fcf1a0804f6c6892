// A Worker runtime that a test can kill like a crash: workerd (under Miniflare) runs in a child
// process group of its own, started by this module, so SIGKILL to the group stops the runtime
// mid-write with no chance to clean up; start() again on the same directory is the restart.
// Also reads the persisted state directly (DO SQLite, local R2) with python3's sqlite3, to see
// what a crash left behind independently of the Worker's own answers.
import { spawn, spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const CHILD = join(dirname(fileURLToPath(import.meta.url)), "killable-child.mjs");

/**
 * Starts the built Worker in a child process on `persistDir` (state kept across kills).
 * @param {{persistDir: string, apiToken: string, vars?: Record<string, unknown>}} o
 * @returns {Promise<{url: URL, kill: () => Promise<void>}>}
 */
export function startKillable({ persistDir, apiToken, vars = {} }) {
  const child = spawn(process.execPath, [CHILD], {
    env: { ...process.env, SA_KILLABLE: JSON.stringify({ persistDir, apiToken, vars }) },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  return new Promise((resolve, reject) => {
    const fail = (why) => { try { process.kill(-child.pid, "SIGKILL"); } catch { /* gone */ } reject(new Error(`${why}\n${out}`)); };
    const timer = setTimeout(() => fail("the runtime did not start in time"), 30_000);
    child.on("exit", (code) => { clearTimeout(timer); fail(`the runtime exited (${code}) before it was ready`); });
    child.stderr.on("data", (d) => { out += d; });
    child.stdout.on("data", (d) => {
      out += d;
      const m = /READY (\S+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      const exited = new Promise((r) => child.once("exit", r));
      resolve({
        url: new URL(m[1]),
        /** SIGKILL to the whole group (node and workerd): a crash, mid-whatever. */
        async kill() {
          try { process.kill(-child.pid, "SIGKILL"); } catch { /* gone */ }
          await exited;
        },
      });
    });
  });
}

/** Rows of `sql` in every DO database under `persistDir` (each row an array). */
export function doRows(persistDir, sql) {
  return sqliteRows(filesUnder(join(persistDir, "do")), sql);
}

/** The keys of every object in local R2 under `persistDir`. */
export function r2Keys(persistDir) {
  return sqliteRows(filesUnder(join(persistDir, "r2")), "SELECT key FROM _mf_objects").map((r) => r[0]);
}

function filesUnder(dir) {
  const out = [];
  const walk = (d) => {
    let entries = [];
    try { entries = readdirSync(d, { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".sqlite") && e.name !== "metadata.sqlite") out.push(p);
    }
  };
  walk(dir);
  return out;
}

function sqliteRows(files, sql) {
  const script = `
import json, sqlite3, sys
rows = []
for f in json.loads(sys.argv[1]):
    con = sqlite3.connect("file:" + f + "?mode=ro", uri=True)
    try:
        rows += [[v.hex() if isinstance(v, bytes) else v for v in r] for r in con.execute(sys.argv[2])]
    except sqlite3.OperationalError:
        pass  # a database without that table (R2 metadata, a half-created one)
    con.close()
print(json.dumps(rows))`;
  const r = spawnSync("python3", ["-c", script, JSON.stringify(files), sql], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`python3 sqlite read failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
