// What a turn's vector is made of, measured with the real model (all-MiniLM-L6-v2 through
// tests/e2e/minilm.mjs) without the service: the turns' texts with one change alone, ranked by
// cosine ("dense") and fused as the service fuses (docs/REFERENCE.md#search-by-meaning: the bm25
// top 50 of bench/fts.mjs 1 : 0.25 the dense top 50 by reciprocal rank, K = 60; a turn found by
// meaning alone needs 0.42, one the words found too 0.2: the fixed floor the service had before it
// measured one per object, vectors::Scale). Its "base" reproduces the service's
// figures of bench/conversations.mjs (hit@10 with embeddings: ours 0.49 against 0.48, LoCoMo 0.69
// against 0.69), so a change is screened here and the service measured for what might win.
// Prints hit@10 / recall@10 / MRR@10 per question kind; asserts nothing. Long messages (chunks):
// bench/embed-chunks.mjs.
//
//   node bench/embed-context.mjs ours|<LoCoMo path> base,prev200,role,date,…   (bench/locomo.mjs reads the path)
//     base         the turn's text (what the service embeds)
//     prevN        the previous turn of the session (its first N bytes, cut at a word), a line
//                  break, the turn
//     prevshortN   the previous turn (200 bytes) before turns of at most N bytes only
//     prevsuffixN  the turn, then the previous turn's first N bytes
//     role         "user: " or "assistant: " before the turn (LoCoMo's turns begin with the
//                  speaker's name already: bench/locomo.mjs)
//     date         the session's date ("8 May 2023", from LoCoMo's session_N_date_time) and a line
//                  break before the turn; our corpus has no dates: one date for all, as the
//                  service's created dates of one load are
//     dateend      the date after the turn
//     mixW         the turn's vector plus W × the previous turn's, normalized (no other text)
import { buildConversations } from "./conversations-corpus.mjs";
import { loadLocomo } from "./locomo.mjs";
import { bm25Index, bm25Rank } from "./fts.mjs";
import { start } from "../tests/e2e/minilm.mjs";
import { readFileSync, readdirSync } from "node:fs";

const which = process.argv[2];
const variants = process.argv[3].split(",");
const LOCO = which;
const corpus = which === "ours" ? buildConversations({ count: 8, seed: 20261127 }) : loadLocomo(LOCO);
const KINDS = corpus.kinds ?? ["paraphrase", "lexical", "current"];
// LoCoMo session dates, "1:56 pm on 8 May, 2023" -> "8 May 2023"
const dates = {};
if (which !== "ours") for (const f of readdirSync(LOCO).filter((f) => f.endsWith(".json"))) {
  const raw = JSON.parse(readFileSync(`${LOCO}/${f}`, "utf8")); const c = raw.conversation ?? raw;
  for (const k of Object.keys(c)) { const m = /^session_(\d+)_date_time$/.exec(k); if (m) dates[`locomo-${f.replace(".json", "")}/s${m[1]}`] = c[k].replace(/^.* on /, "").replace(",", ""); }
}
const cut = (t, n) => { t = t.trim(); if (Buffer.byteLength(t) <= n) return t; let s = t.slice(0, n); const i = s.lastIndexOf(" "); return i > n / 2 ? s.slice(0, i) : s; };
const text = (v, t, prev, conv, sid) => {
  let m;
  if (v === "base") return t.text;
  if ((m = /^prev(\d+)$/.exec(v))) return prev ? `${cut(prev.text, +m[1])}\n${t.text}` : t.text;
  if ((m = /^prevshort(\d+)$/.exec(v))) return prev && Buffer.byteLength(t.text) <= +m[1] ? `${cut(prev.text, 200)}\n${t.text}` : t.text;
  if ((m = /^prevsuffix(\d+)$/.exec(v))) return prev ? `${t.text}\n${cut(prev.text, +m[1])}` : t.text;
  if (/^mix/.test(v)) return t.text;
  if (v === "role") return `${t.role}: ${t.text}`;
  if (v === "date") return `${dates[`${conv.id}/${sid}`] ?? "6 December 2026"}\n${t.text}`;
  if (v === "dateend") return `${t.text}\n(${dates[`${conv.id}/${sid}`] ?? "6 December 2026"})`;
  throw new Error(v);
};
const s = await start();
const cache = new Map();
async function embedAll(texts) {
  const need = [...new Set(texts.filter((t) => !cache.has(t)))];
  for (let i = 0; i < need.length; i += 64) { const vs = await s.embed(need.slice(i, i + 64)); vs.forEach((v, j) => cache.set(need[i + j], v)); }
  return texts.map((t) => cache.get(t));
}
const dot = (a, b) => { let d = 0; for (let i = 0; i < a.length; i++) d += a[i] * b[i]; return d; };
const score = {}; for (const v of variants) for (const sys of ["dense", "fused"]) score[`${v} ${sys}`] = Object.fromEntries(KINDS.map((k) => [k, []]));
const rec = (key, q, ranked) => { const top = ranked.slice(0, 10), ans = new Set(q.answers); const f = top.findIndex((id) => ans.has(id));
  score[key][q.kind].push({ hit: f >= 0 ? 1 : 0, recall: top.filter((x) => ans.has(x)).length / ans.size, rr: f < 0 ? 0 : 1 / (f + 1) }); };
function fuse(lex, sem) { const sc = new Map(); lex.forEach((id, r) => sc.set(id, (sc.get(id) ?? 0) + 1 / (61 + r))); sem.forEach((id, r) => sc.set(id, (sc.get(id) ?? 0) + 0.25 / (61 + r)));
  return [...sc].sort((a, b) => b[1] - a[1]).map(([id]) => id); }
const t0 = Date.now();
for (const conv of corpus.conversations) {
  const rows = conv.sessions.flatMap((s) => s.turns.map((t, i) => ({ t, prev: s.turns[i - 1], sid: s.id })));
  const turns = rows.map((r) => r.t);
  const index = bm25Index(turns.map((t) => t.text));
  const qv = await embedAll(conv.questions.map((q) => q.q));
  for (const v of variants) {
    let m;
    let tv = await embedAll(rows.map((r) => text(v, r.t, r.prev, conv, r.sid)));
    if ((m = /^mix([\d.]+)$/.exec(v))) {
      const w = +m[1];
      const pv = await embedAll(rows.map((r) => r.prev?.text ?? ""));
      tv = tv.map((x, i) => { if (!rows[i].prev) return x; const y = x.map((a, j) => a + w * pv[i][j]); const n = Math.hypot(...y); return y.map((a) => a / n); });
    }
    conv.questions.forEach((q, qi) => {
      const sims = tv.map((x, i) => [i, dot(x, qv[qi])]).sort((a, b) => b[1] - a[1]);
      rec(`${v} dense`, q, sims.slice(0, 10).map(([i]) => turns[i].id));
      const lex = bm25Rank(index, q.q).slice(0, 50);
      const lexSet = new Set(lex);
      const sem = sims.slice(0, 50).filter(([i, c]) => c >= 0.42 || (lexSet.has(i) && c >= 0.2)).map(([i]) => turns[i].id);
      rec(`${v} fused`, q, fuse(lex.map((i) => turns[i].id), sem));
    });
  }
  process.stderr.write(`${conv.id} ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
}
await s.close();
const f2 = (x) => x.toFixed(3);
const cell = (key, kinds) => { const xs = kinds.flatMap((k) => score[key][k]); const a = (f) => xs.reduce((s, m) => s + m[f], 0) / xs.length; return `${f2(a("hit"))}/${f2(a("recall"))}/${f2(a("rr"))}`; };
console.log(`${which}: hit@10/R@10/MRR`);
console.log("".padEnd(22) + [...KINDS, "all"].map((k) => k.padEnd(20)).join(""));
for (const key of Object.keys(score)) console.log(key.padEnd(22) + [...KINDS.map((k) => [k]), KINDS].map((ks) => cell(key, ks).padEnd(20)).join(""));
