// A corpus the bench did not write: LoCoMo (Maharana et al., 2024, "Evaluating Very Long-Term
// Conversational Memory of LLM Agents"), ten long conversations between two people over up to 35
// sessions, with questions whose evidence turns are marked. Not in any package registry, so not
// shipped here: give its JSON (the published locomo10.json, an array of samples, or a folder of
// one JSON file per sample) as BENCH_CONV_CORPUS=<path> to bench/conversations.mjs, which then
// measures history search and memory recall on it exactly as on its own corpus.
//
// Read as bench/conversations-corpus.mjs's shape: a conversation per sample (one agent), a
// session per `session_N` in order, a turn per utterance ("<speaker>: <text>", and the caption of
// a shared photo as "[shares <caption>]", as the published evaluations read them): the first
// speaker's turns are the user's, the other's the assistant's. Questions of categories 1–4 with
// evidence, by the category names of the published evaluations: 1 multi-hop, 2 temporal,
// 3 open-domain, 4 single-hop (5, adversarial, has no answer to find and is left out). A
// question's answering turns are its evidence turns.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

export const LOCOMO_KINDS = ["single-hop", "multi-hop", "temporal", "open-domain"];
const CATEGORY = { 1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop" };

/** The samples of `path`: a JSON array (locomo10.json) or a folder of one JSON object each. */
function samples(path) {
  if (statSync(path).isDirectory()) {
    return readdirSync(path).filter((f) => f.endsWith(".json")).sort()
      .map((f) => ({ id: f.replace(/\.json$/, ""), ...JSON.parse(readFileSync(join(path, f), "utf8")) }));
  }
  const all = JSON.parse(readFileSync(path, "utf8"));
  return (Array.isArray(all) ? all : [all]).map((s, i) => ({ id: s.sample_id ?? String(i), ...s }));
}

/** A message id of ours for LoCoMo's dialogue id "D3:12": "d3-12". */
const turnId = (dia) => dia.toLowerCase().replace(":", "-");

/**
 * The LoCoMo corpus at `path` in bench/conversations-corpus.mjs's shape, with `kinds` (the
 * question kinds, in print order) and `stats` (corpusStats's fields).
 */
export function loadLocomo(path) {
  const conversations = [];
  for (const raw of samples(path)) {
    const c = raw.conversation ?? raw; // locomo10.json nests it; the per-sample files do not
    const a = c.speaker_a;
    const sessions = [];
    for (let n = 1; Array.isArray(c[`session_${n}`]) || c[`session_${n}_date_time`]; n++) {
      const list = c[`session_${n}`];
      if (!Array.isArray(list) || list.length === 0) continue;
      sessions.push({
        id: `s${n}`,
        turns: list.map((t) => ({
          id: turnId(t.dia_id),
          role: t.speaker === a ? "user" : "assistant",
          text: `${t.speaker}: ${t.text}${t.blip_caption ? ` [shares ${t.blip_caption}]` : ""}`,
        })),
      });
    }
    const ids = new Set(sessions.flatMap((s) => s.turns.map((t) => t.id)));
    const questions = (raw.qa ?? c.qa ?? [])
      .filter((q) => CATEGORY[q.category] && Array.isArray(q.evidence))
      .map((q, i) => ({ id: `q${i}`, kind: CATEGORY[q.category], q: String(q.question),
        answers: [...new Set(q.evidence.flatMap((e) => String(e).split(/[;,]\s*/)).map((e) => turnId(e.trim())))].filter((e) => ids.has(e)),
        outdated: [] }))
      .filter((q) => q.answers.length > 0);
    conversations.push({ id: `locomo-${raw.id}`, agent: `locomo-${raw.id}`.replace(/[^A-Za-z0-9._-]/g, "-"), sessions, questions });
  }
  const turns = conversations.flatMap((c) => c.sessions.flatMap((s) => s.turns));
  const per = conversations.map((c) => c.sessions.reduce((n, s) => n + s.turns.length, 0));
  const perSession = conversations.flatMap((c) => c.sessions.map((s) => s.turns.length));
  const questions = conversations.flatMap((c) => c.questions);
  const byKind = {};
  for (const q of questions) byKind[q.kind] = (byKind[q.kind] ?? 0) + 1;
  const stats = {
    conversations: conversations.length, sessions: perSession.length,
    turnsPerSession: [Math.min(...perSession), Math.max(...perSession)], turns: turns.length,
    turnsPerConversation: [Math.min(...per), Math.max(...per)], userTurns: turns.filter((t) => t.role === "user").length,
    words: turns.reduce((n, t) => n + t.text.split(/\s+/).length, 0), facts: 0, changed: 0,
    questions: questions.length, byKind, answerTurns: questions.reduce((n, q) => n + q.answers.length, 0),
  };
  return { conversations, kinds: LOCOMO_KINDS, stats };
}
