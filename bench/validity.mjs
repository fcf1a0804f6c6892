// What is true now, measured on the memory corpus (bench/memory-corpus.mjs) with the real model
// (tests/e2e/minilm.mjs: all-MiniLM-L6-v2 served locally) and without embeddings. Per user, the
// facts go in one batch, then each later correction by its own `POST /memories` a few
// milliseconds after (so recency cannot tell them apart by much), either plainly ("neither":
// nothing marks the correction) or with `supersedes: [the fact it corrects]`. Then every query of
// the corpus, as asked. Prints nDCG@10 per query kind and overall, and how often the outdated
// fact ranks above its correction in the top 10 of a "current" question. (Each query moves the
// recall counters of its hits; the store is not reseeded between queries, unlike
// bench/memory.mjs's quality part: the frequency signal weighs 0.05.) Asserts nothing.
//
//   BENCH_VALIDITY=0   (read by bench/bench.mjs) skip it
//   BENCH_VALIDITY_RUNS  which runs (default "neither+minilm,supersedes+minilm,neither+off")
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startMiniLm, EMBEDDING_MODEL } from "../tests/e2e/minilm.mjs";
import { buildCorpus } from "./memory-corpus.mjs";
import { log, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench validity");
const RUNS = (process.env.BENCH_VALIDITY_RUNS ?? "neither+minilm,supersedes+minilm,neither+off").split(",");
const corpus = buildCorpus();
const ndcg = (ranked, relevant) => {
  let got = 0;
  ranked.slice(0, 10).forEach((id, i) => { if (relevant.includes(id)) got += 1 / Math.log2(i + 2); });
  let ideal = 0;
  for (let i = 0; i < Math.min(10, relevant.length); i++) ideal += 1 / Math.log2(i + 2);
  return got / ideal;
};
const avg = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function run(marks, embeddings) {
  const minilm = embeddings === "minilm" ? await startMiniLm() : null;
  const dir = mkdtempSync(join(tmpdir(), "sa-bench-validity-"));
  const vars = minilm ? { EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: minilm.baseUrl, EMBEDDINGS_MODEL: EMBEDDING_MODEL } : {};
  const w = await startWorker({ persistDir: dir, apiToken: "bench", vars });
  const call = async (agent, method, path, body) => {
    const r = await fetch(new URL(`/agents/${agent}${path}`, w.url), {
      method, headers: { authorization: "Bearer bench", "content-type": "application/json" }, body: body ? JSON.stringify(body) : undefined,
    });
    const text = await r.text();
    if (r.status >= 400) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  // Every text embedded: the embeddings endpoint quiet for 700 ms.
  const quiet = async () => {
    if (!minilm) return;
    for (let n = -1; n !== minilm.requests.length;) { n = minilm.requests.length; await new Promise((r) => setTimeout(r, 700)); }
  };
  const kinds = {};
  let outranked = 0, current = 0, missing = 0;
  try {
    for (const user of corpus) {
      const agent = `v-${user.agent}`;
      const ours = new Map(); // service id -> corpus id
      const first = user.facts.filter((f) => !f.later);
      const stored = await call(agent, "POST", "/memories/batch", { memories: first.map((f) => ({ content: f.content, tags: f.tags, score: f.score })) });
      stored.memories.forEach((m, i) => ours.set(m.id, first[i].id));
      const theirs = new Map([...ours].map(([a, b]) => [b, a]));
      for (const f of user.facts.filter((f) => f.later)) {
        await new Promise((r) => setTimeout(r, 2));
        const corrects = marks === "supersedes"
          ? [...new Set(user.queries.filter((q) => q.kind === "current" && q.relevant[0] === f.id).map((q) => theirs.get(q.outdated)))]
          : [];
        const m = await call(agent, "POST", "/memories", { content: f.content, tags: f.tags, score: f.score, supersedes: corrects });
        ours.set(m.id, f.id);
      }
      await quiet();
      for (const q of user.queries) {
        const hits = (await call(agent, "GET", `/memories/search?q=${encodeURIComponent(q.q)}&limit=10`)).results;
        const ranked = hits.map((h) => ours.get(h.memory.id));
        (kinds[q.kind] ??= []).push(ndcg(ranked, q.relevant));
        if (q.kind === "current") {
          current++;
          const [o, c] = [ranked.indexOf(q.outdated), ranked.indexOf(q.relevant[0])];
          if (o >= 0 && (c < 0 || o < c)) outranked++;
          if (c < 0) missing++;
        }
      }
      progress(`${marks}, ${embeddings}: ${user.agent} done`);
    }
  } finally {
    await w.stop();
    await minilm?.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const overall = avg(Object.values(kinds).flat());
  const label = `${marks === "supersedes" ? "with supersedes" : "neither marked"}, ${embeddings === "minilm" ? "all-MiniLM-L6-v2" : "no embeddings"}`;
  log(`  ${label.padEnd(40)} outdated above its correction ${outranked}/${current} (correction not in the top 10: ${missing}); nDCG@10 overall ${overall.toFixed(3)}; ` +
    Object.entries(kinds).map(([k, v]) => `${k} ${avg(v).toFixed(3)}`).join(", "));
}

const nFacts = corpus.reduce((a, u) => a + u.facts.length, 0);
const nQueries = corpus.reduce((a, u) => a + u.queries.length, 0);
log(`what holds now: ${corpus.length} users, ${nFacts} facts (corrections stored after the others), ${nQueries} queries (bench/validity.mjs)`);
for (const r of RUNS) {
  const [marks, embeddings] = r.split("+");
  await run(marks, embeddings);
}
