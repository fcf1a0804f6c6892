// Long messages, measured with the real model (all-MiniLM-L6-v2 through tests/e2e/minilm.mjs)
// without the service, as bench/embed-context.mjs (its header: dense, and fused as the service
// fuses): neither corpus has a turn past 800 bytes (the model reads 256 tokens, about 1,000
// bytes), so each session's turns are joined G at a time into one message (its answers: the
// messages holding an answering turn). One vector of its beginning (the service's: 2,000 bytes
// cut at a word) against chunks of at most C bytes cut at a word, a message's similarity its
// best chunk's. Prints hit@10 / recall@10 / MRR@10 per question kind; asserts nothing.
//
//   node bench/embed-chunks.mjs ours|<LoCoMo path> G C   (bench/locomo.mjs reads the path)
import { buildConversations } from "./conversations-corpus.mjs";
import { loadLocomo } from "./locomo.mjs";
import { bm25Index, bm25Rank } from "./fts.mjs";
import { start } from "../tests/e2e/minilm.mjs";
const [which, G, C] = [process.argv[2], +process.argv[3], +process.argv[4]];
const corpus = which === "ours" ? buildConversations({ count: 8, seed: 20261127 }) : loadLocomo(which);
const KINDS = corpus.kinds ?? ["paraphrase", "lexical", "current"];
const cutAt = (t, n) => { if (Buffer.byteLength(t) <= n) return t; let s = t.slice(0, n); const i = s.lastIndexOf(" "); return i > n / 2 ? s.slice(0, i) : s; };
function chunks(t, n) { const out = []; let rest = t.trim(); while (rest) { const c = cutAt(rest, n); out.push(c.trim()); rest = rest.slice(c.length).trim(); } return out; }
const s = await start();
async function embedAll(texts) { const out = []; for (let i = 0; i < texts.length; i += 64) out.push(...await s.embed(texts.slice(i, i + 64))); return out; }
const dot = (a, b) => { let d = 0; for (let i = 0; i < a.length; i++) d += a[i] * b[i]; return d; };
const score = {}; for (const v of ["begin", "chunks"]) for (const sys of ["dense", "fused"]) score[`${v} ${sys}`] = Object.fromEntries(KINDS.map((k) => [k, []]));
const rec = (key, q, ranked) => { const top = ranked.slice(0, 10), ans = q.groups; const f = top.findIndex((id) => ans.has(id));
  score[key][q.kind].push({ hit: f >= 0 ? 1 : 0, recall: top.filter((x) => ans.has(x)).length / ans.size, rr: f < 0 ? 0 : 1 / (f + 1) }); };
function fuse(lex, sem) { const sc = new Map(); lex.forEach((id, r) => sc.set(id, (sc.get(id) ?? 0) + 1 / (61 + r))); sem.forEach((id, r) => sc.set(id, (sc.get(id) ?? 0) + 0.25 / (61 + r)));
  return [...sc].sort((a, b) => b[1] - a[1]).map(([id]) => id); }
let lens = [], truncated = 0;
for (const conv of corpus.conversations) {
  const groups = []; const groupOf = new Map();
  for (const ses of conv.sessions) for (let i = 0; i < ses.turns.length; i += G) { const ts = ses.turns.slice(i, i + G); ts.forEach((t) => groupOf.set(t.id, groups.length)); groups.push(ts.map((t) => t.text).join("\n")); }
  lens.push(...groups.map((g) => Buffer.byteLength(g)));
  const index = bm25Index(groups);
  const qv = await embedAll(conv.questions.map((q) => q.q));
  const begin = await embedAll(groups.map((g) => cutAt(g, 2000)));
  const pieces = groups.map((g) => chunks(g, C));
  const flat = await embedAll(pieces.flat());
  let k = 0; const cv = pieces.map((p) => p.map(() => flat[k++]));
  for (const [qi, q0] of conv.questions.entries()) {
    const q = { ...q0, groups: new Set(q0.answers.map((a) => groupOf.get(a))) };
    for (const [v, sim] of [["begin", (i) => dot(begin[i], qv[qi])], ["chunks", (i) => Math.max(...cv[i].map((c) => dot(c, qv[qi])))]]) {
      const sims = groups.map((_, i) => [i, sim(i)]).sort((a, b) => b[1] - a[1]);
      rec(`${v} dense`, q, sims.slice(0, 10).map(([i]) => i));
      const lex = bm25Rank(index, q.q).slice(0, 50); const lexSet = new Set(lex);
      rec(`${v} fused`, q, fuse(lex, sims.slice(0, 50).filter(([i, c]) => c >= 0.42 || (lexSet.has(i) && c >= 0.2)).map(([i]) => i)));
    }
  }
  process.stderr.write(`${conv.id}\n`);
}
await s.close();
lens.sort((a, b) => a - b);
console.log(`${which}: ${lens.length} messages of ${G} turns, bytes p50 ${lens[lens.length >> 1]} p90 ${lens[Math.floor(lens.length * 0.9)]}; chunks of <= ${C} bytes`);
const f2 = (x) => x.toFixed(3);
const cell = (key, kinds) => { const xs = kinds.flatMap((k) => score[key][k]); const a = (f) => xs.reduce((s, m) => s + m[f], 0) / xs.length; return `${f2(a("hit"))}/${f2(a("recall"))}/${f2(a("rr"))}`; };
console.log("".padEnd(16) + [...KINDS, "all"].map((k) => k.padEnd(20)).join(""));
for (const key of Object.keys(score)) console.log(key.padEnd(16) + [...KINDS.map((k) => [k]), KINDS].map((ks) => cell(key, ks).padEnd(20)).join(""));
