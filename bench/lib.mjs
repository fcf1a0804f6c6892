// What the bench files share (bench.mjs, memory.mjs, conversations.mjs, transfer.mjs, reads.mjs, clients.mjs): the
// vocabulary, a seeded random generator, percentiles and printing, timing, a client for one
// agent's routes, and workerd's CPU time from /proc.
import { readdirSync, readFileSync } from "node:fs";

/** Words for synthetic message texts. */
export const WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu deploy production database latency cache memory session agent search index token budget summary branch message history window prompt context skill tool model stream socket worker durable object storage query result error retry timeout request response header payload schema migration version release friday monday weekend customer invoice order payment refund shipping warehouse inventory report dashboard metric alert incident review design feature bug fix test coverage benchmark profile".split(" ");

/** A seeded generator of numbers in [0, 1) (mulberry32: full 32-bit period, exact in doubles). */
export function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The `p`th percentile of `xs`. */
export const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
export const ms = (x) => `${x.toFixed(1)} ms`;
export const int = (n) => Math.round(n).toLocaleString("en-US");
export const log = (...a) => console.log(...a);
/** A progress printer for stderr, its lines tagged `[<tag> hh:mm:ss]`. */
export const progress = (tag) => (...a) => process.stderr.write(`[${tag} ${new Date().toISOString().slice(11, 19)}] ${a.join(" ")}\n`);

/** Runs `fn`: [milliseconds, its result]. */
export async function timed(fn) { const t = performance.now(); const r = await fn(); return [performance.now() - t, r]; }

/** `(method, path, body?) → answer text` for the routes of `agent` on the Worker `w`; an
 * error status throws. */
export function client(w, agent) {
  return async (method, path, body) => {
    const init = { method, headers: {} };
    if (body !== undefined) { init.body = JSON.stringify(body); init.headers["content-type"] = "application/json"; }
    const r = await w.fetch(`/agents/${agent}${path}`, init);
    const text = await r.text();
    if (r.status >= 400) throw new Error(`${agent}: ${method} ${path}: ${r.status} ${text.slice(0, 300)}`);
    return text;
  };
}

/** The pids of the workerd processes that are children of this one (Miniflare starts them); [] off Linux. */
export function childWorkerds() {
  try {
    return readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, "utf8");
        const [comm, rest] = [stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), stat.slice(stat.lastIndexOf(")") + 2).split(" ")];
        return comm.includes("workerd") && Number(rest[1]) === process.pid;
      } catch { return false; }
    }).map(Number);
  } catch { return []; }
}

/** CPU seconds (user + system) `pid` has used, from /proc (10 ms ticks). */
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ is 100 on Linux
}
