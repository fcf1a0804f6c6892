// What the bench files share (bench.mjs, memory.mjs, transfer.mjs): the vocabulary, a seeded
// random generator, percentiles and printing, timing, and a client for one agent's routes.

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
