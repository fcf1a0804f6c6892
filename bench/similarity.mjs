// The minimum similarity of a hit found by meaning alone (crates/core/src/vectors/mod.rs,
// MIN_SIMILARITY), measured with the real all-MiniLM-L6-v2 (tests/e2e/minilm.mjs): how similar a
// question is to the text that answers it, and how similar it is to the nearest text that does
// not, and how similar questions about nothing stored are to the nearest of everything stored.
// Talks to the model server only (no Worker). Prints figures; asserts nothing.
// Run: node bench/similarity.mjs (after bash scripts/setup.sh installed the model).
//
//  - memories: the facts and questions of bench/memory-corpus.mjs (paraphrase, partial and
//    current questions; exact ones are found by their words anyway), per user;
//  - messages: the questions of bench/conversations-corpus.mjs (BENCH_SIM_CONVERSATIONS, default
//    2) and the turns that answer them, against every turn of the conversation;
//  - unrelated: questions about nothing the stores hold, against every fact and every turn.
//
// Then the fusion of message search (crates/core/src/vectors/fuse.rs), measured on the same
// conversations: the full-text list is plain BM25, an OR of the question's words (bench/fts.mjs,
// as FTS5 ranks it: the query compiler of another change makes message search that), the list by
// meaning the turns by cosine (at least MIN_SIMILARITY alone, SUPPORT beside a word match), and
// each fusion's hit@10 and MRR@10 per question kind.
//
// For a threshold t: "kept" is the share of questions whose answering text is at least t
// (a hit by meaning alone survives it), "unrelated nothing" the share of unrelated questions
// whose nearest text of all is below t (they find nothing by meaning).
import { start } from "../tests/e2e/minilm.mjs";
import { buildCorpus } from "./memory-corpus.mjs";
import { buildConversations } from "./conversations-corpus.mjs";
import { bm25Index, bm25Rank } from "./fts.mjs";
import { pct, log, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench similarity");
const CONVERSATIONS = Number(process.env.BENCH_SIM_CONVERSATIONS ?? 2);

/** Questions about nothing either corpus holds (checked: none shares a topic with a fact or a turn
 * of the corpora at their default seeds). */
export const UNRELATED = [
  "What is the boiling point of mercury?",
  "How many moons does Neptune have?",
  "How many valence electrons does boron have?",
  "Who wrote the Treaty of Westphalia?",
  "What is the derivative of arctangent?",
  "How do submarines equalize ballast pressure?",
  "Which enzyme breaks down lactose?",
  "What is the tallest volcano in the solar system?",
  "How is titanium refined from ore?",
  "What year did the Byzantine empire fall?",
  "quantum chromodynamics gluon confinement",
  "What is the airspeed of an unladen swallow?",
  "How are tectonic plates measured by satellites?",
  "How do you calculate the torque of a stepper motor?",
  "Recommend a compiler flag for vectorizing loops.",
  "What causes the aurora borealis?",
];

/** crates/core/src/vectors/mod.rs: the fixed floor and support the service had, and the scale that
 * replaced them (Scale: a store's baseline, the mean cosine over pairs of a spread sample of 256 of
 * its vectors; the floor ABOVE_BASELINE of the way from it to 1; the support the baseline). */
const MIN_SIMILARITY = 0.42;
const SUPPORT = 0.2;
const ABOVE_BASELINE = 0.275;
const SAMPLE = 256;
/** The second model of scripts/minilm/server.py (the wheel's word-piece vectors averaged). */
const STATIC_MODEL = "minilm-static-average";
/** The baseline of `vectors` (unit length) as the service measures it: a spread sample of SAMPLE. */
function baselineOf(vectors) {
  const pick = vectors.length <= SAMPLE ? vectors : Array.from({ length: SAMPLE }, (_, i) => vectors[Math.floor((i * vectors.length) / SAMPLE)]);
  const sum = pick[0].map((_, d) => pick.reduce((s, v) => s + v[d], 0));
  const k = pick.length;
  return (dot(sum, sum) - k) / (k * (k - 1));
}
const floorOf = (b) => b + (1 - b) * ABOVE_BASELINE;
/** Reciprocal rank fusion with these weights (crates/core/src/vectors/fuse.rs: K = 60). */
const rrf = (wl, ws) => (lexical, semantic) => {
  const score = new Map();
  lexical.forEach((i, r) => score.set(i, (score.get(i) ?? 0) + wl / (60 + r + 1)));
  semantic.forEach((i, r) => score.set(i, (score.get(i) ?? 0) + ws / (60 + r + 1)));
  return [...score].sort((a, b) => b[1] - a[1]).map(([i]) => i);
};
const FUSIONS = {
  "words only (BM25 OR)": (l) => l,
  "meaning only": (l, s) => s,
  "RRF 1 : 1": rrf(1, 1),
  "RRF 1 : 0.25 (the service's)": rrf(1, 0.25),
  "RRF 1 : 0.5": rrf(1, 0.5),
  "RRF 1 : 2": rrf(1, 2),
  "RRF 1 : 3": rrf(1, 3),
  "meaning first, then words": (l, s) => [...new Set([...s, ...l])],
};

const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
const norm = (v) => { const n = Math.sqrt(dot(v, v)); return v.map((x) => x / n); };

async function embedAll(server, texts, model) {
  const out = [];
  for (let i = 0; i < texts.length; i += 64) {
    out.push(...(await server.embed(texts.slice(i, i + 64), model)).map(norm));
    if (i % 640 === 0) progress(`embedded ${i + 64 > texts.length ? texts.length : i + 64}/${texts.length}`);
  }
  return out;
}

const f3 = (x) => x.toFixed(3);
const dist = (xs) => `p5 ${f3(pct(xs, 5))}  p25 ${f3(pct(xs, 25))}  median ${f3(pct(xs, 50))}  p75 ${f3(pct(xs, 75))}  p95 ${f3(pct(xs, 95))}`;

export async function main() {
  let server;
  try {
    server = await start();
  } catch (e) {
    log(`\nbench/similarity.mjs: skipped, all-MiniLM-L6-v2 did not start (${e.message.split("\n")[0]})`);
    return;
  }
  try {
    // Memories.
    const users = buildCorpus();
    const relatedMem = [], nearestOtherMem = [], unrelatedMax = [];
    const allTexts = [];
    for (const u of users) {
      const fv = await embedAll(server, u.facts.map((f) => f.content));
      const qs = u.queries.filter((q) => q.kind !== "exact");
      const qv = await embedAll(server, qs.map((q) => q.q));
      qs.forEach((q, i) => {
        const sims = u.facts.map((f, j) => [f.id, dot(qv[i], fv[j])]);
        const rel = sims.filter(([id]) => q.relevant.includes(id)).map(([, s]) => s);
        relatedMem.push(Math.max(...rel));
        nearestOtherMem.push(Math.max(...sims.filter(([id]) => !q.relevant.includes(id) && id !== q.outdated).map(([, s]) => s)));
      });
      allTexts.push(...fv);
    }
    // Messages.
    const relatedMsg = [], nearestOtherMsg = [];
    const fusion = Object.fromEntries(Object.keys(FUSIONS).map((f) => [f, {}]));
    for (const c of buildConversations({ count: CONVERSATIONS }).conversations) {
      const turns = c.sessions.flatMap((s) => s.turns);
      const tv = await embedAll(server, turns.map((t) => t.text));
      const qv = await embedAll(server, c.questions.map((q) => q.q));
      const index = bm25Index(turns.map((t) => t.text));
      c.questions.forEach((q, i) => {
        const lexical = bm25Rank(index, q.q).slice(0, 50);
        const cos = turns.map((t, j) => dot(qv[i], tv[j]));
        const semantic = cos.map((x, j) => [j, x]).filter(([j, x]) => x >= MIN_SIMILARITY || (x >= SUPPORT && lexical.includes(j)))
          .sort((a, b) => b[1] - a[1]).slice(0, 50).map(([j]) => j);
        for (const [name, f] of Object.entries(FUSIONS)) {
          const top = f(lexical, semantic).slice(0, 10).map((j) => turns[j].id);
          const first = top.findIndex((id) => q.answers.includes(id));
          for (const k of [q.kind, "all"]) {
            const m = (fusion[name][k] ??= { n: 0, hit: 0, mrr: 0 });
            m.n++;
            if (first >= 0) { m.hit++; m.mrr += 1 / (first + 1); }
          }
        }
        const sims = turns.map((t, j) => [t.id, cos[j]]);
        const rel = sims.filter(([id]) => q.answers.includes(id)).map(([, s]) => s);
        if (!rel.length) return;
        relatedMsg.push(Math.max(...rel));
        nearestOtherMsg.push(Math.max(...sims.filter(([id]) => !q.answers.includes(id) && !q.outdated.includes(id)).map(([, s]) => s)));
      });
      allTexts.push(...tv);
    }
    const uv = await embedAll(server, UNRELATED);
    for (const v of uv) unrelatedMax.push(Math.max(...allTexts.map((t) => dot(v, t))));

    log("\n## Minimum similarity of a hit by meaning alone (all-MiniLM-L6-v2, bench/similarity.mjs)\n");
    log(`memories: ${users.length} users, ${relatedMem.length} questions (paraphrase, partial, current); messages: ${CONVERSATIONS} conversations, ${relatedMsg.length} questions; ${UNRELATED.length} unrelated questions against ${allTexts.length} texts\n`);
    log(`question ↔ its fact                    ${dist(relatedMem)}`);
    log(`question ↔ nearest other fact          ${dist(nearestOtherMem)}`);
    log(`question ↔ its answering turn          ${dist(relatedMsg)}`);
    log(`question ↔ nearest other turn          ${dist(nearestOtherMsg)}`);
    log(`unrelated question ↔ nearest of all    ${dist(unrelatedMax)}  max ${f3(Math.max(...unrelatedMax))}\n`);
    log("| threshold | facts kept | answering turns kept | unrelated questions finding nothing |");
    log("|---|---|---|---|");
    const share = (xs, ok) => `${((100 * xs.filter(ok).length) / xs.length).toFixed(0)} %`;
    for (const t of [0.2, 0.25, 0.3, 0.35, 0.4, 0.42, 0.45, 0.5]) {
      log(`| ${t.toFixed(2)} | ${share(relatedMem, (s) => s >= t)} | ${share(relatedMsg, (s) => s >= t)} | ${share(unrelatedMax, (s) => s < t)} |`);
    }
    await floorFollowsTheModel(server, users);
    log(`\n## Fusion of message search (${CONVERSATIONS} conversations, ${relatedMsg.length} questions; hit@10 / MRR@10)\n`);
    const kinds = ["paraphrase", "lexical", "current", "all"];
    log(`| fusion | ${kinds.join(" | ")} |`);
    log(`|---|${kinds.map(() => "---").join("|")}|`);
    for (const [name, by] of Object.entries(fusion)) {
      log(`| ${name} | ${kinds.map((k) => by[k] ? `${(by[k].hit / by[k].n).toFixed(2)} / ${(by[k].mrr / by[k].n).toFixed(2)}` : "-").join(" | ")} |`);
    }
  } finally {
    await server.close();
  }
}

/**
 * The floor of a hit by meaning alone, fixed (0.42) and measured from each store's own vectors
 * (Scale), for two models: all-MiniLM-L6-v2 and the static average of its word-piece vectors. A
 * store is one user's facts, or one conversation's turns. "kept": questions whose answering text is
 * at least the floor; "unrelated nothing": UNRELATED questions whose nearest text of the store is
 * below it.
 */
async function floorFollowsTheModel(server, users) {
  log("\n## The floor follows the model (Scale: baseline of each store's own vectors)\n");
  log("| model | store | baseline (mean) | floor (mean) | kept: fixed 0.42 → scaled | unrelated nothing: fixed 0.42 → scaled |");
  log("|---|---|---|---|---|---|");
  const stores = [
    ["facts", users.map((u) => ({ items: u.facts.map((f) => ({ id: f.id, text: f.content })), questions: u.queries.filter((q) => q.kind !== "exact").map((q) => ({ q: q.q, answers: q.relevant })) }))],
    ["turns", buildConversations({ count: CONVERSATIONS }).conversations.map((c) => ({ items: c.sessions.flatMap((s) => s.turns), questions: c.questions }))],
  ];
  for (const model of [undefined, STATIC_MODEL]) {
    const uv = await embedAll(server, UNRELATED, model);
    for (const [name, list] of stores) {
      const bases = [], floors = [], keptFixed = [], keptScaled = [], nothingFixed = [], nothingScaled = [];
      for (const store of list) {
        const iv = await embedAll(server, store.items.map((t) => t.text), model);
        const qv = await embedAll(server, store.questions.map((q) => q.q), model);
        const floor = floorOf(baselineOf(iv));
        bases.push(baselineOf(iv)); floors.push(floor);
        store.questions.forEach((q, i) => {
          const best = Math.max(...store.items.map((t, j) => (q.answers.includes(t.id) ? dot(qv[i], iv[j]) : -1)));
          if (best < -0.5) return;
          keptFixed.push(best >= MIN_SIMILARITY); keptScaled.push(best >= floor);
        });
        for (const v of uv) {
          const nearest = Math.max(...iv.map((t) => dot(v, t)));
          nothingFixed.push(nearest < MIN_SIMILARITY); nothingScaled.push(nearest < floor);
        }
      }
      const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const share = (xs) => `${((100 * xs.filter(Boolean).length) / xs.length).toFixed(0)} %`;
      log(`| ${model ?? "all-MiniLM-L6-v2"} | ${name} (${list.length}) | ${f3(mean(bases))} | ${f3(mean(floors))} | ${share(keptFixed)} → ${share(keptScaled)} | ${share(nothingFixed)} → ${share(nothingScaled)} |`);
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
