// Text tools of the bench (bench/conversations.mjs, bench/conversations-corpus.mjs): words as
// SQLite FTS5's `porter unicode61` tokenizer makes them (the tokenizer of every FTS table in
// migrations/), a stop-word list, and a BM25 ranking with FTS5's own formula, so a JS baseline
// computed over the same texts ranks them as a plain FTS5 OR query would.
//
// As far as practical: unicode61 here is "runs of letters and digits, lower-cased, diacritics
// removed" (FTS5 also treats private-use characters as token characters, and folds case by its
// own tables); porter is Martin Porter's 1980 algorithm as published (with the two departures
// of his reference C version that SQLite's fts5_tokenize.c also has: step 2's "bli" → "ble" and
// "logi" → "log"), applied, as FTS5 does, to tokens of 3 to 64 characters only.
// Checked once against SQLite's own FTS5 (Python's sqlite3, a `porter unicode61` table) over the
// first 3 conversations of bench/conversations-corpus.mjs: the same stem for each of its 2,280
// distinct words, and bm25Rank's top 10 equal, in order, to `… MATCH '"w1" OR "w2" …' ORDER BY
// bm25(f), rowid` for each of its 137 questions.

/** Words a BM25 (OR) query leaves out: the memory recall's list (crates/core/src/memory/recall.rs)
 * and more function words and question words. */
export const STOPWORDS = new Set((
  "a about all am an and any are as at be been but by can could did do does doing for from had has have he her him his how i if in " +
  "into is it its me my now of on or our she should so some than that the their them then there these they this those to too up us " +
  "was we were what when where which who whom why will with would you your user users s t d ll m re ve " +
  "just also again ever got get gets getting go goes going went still these days yes no not don didn doesn isn aren wasn " +
  "oh okay ok um hey hi please thanks thank really very much more most one ones any anything something"
).split(" "));

/** The tokens of `text` as FTS5's unicode61 tokenizer makes them (before porter). */
export function rawTokens(text) {
  return String(text).normalize("NFD").replace(/\p{M}+/gu, "").toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** The tokens of `text` as `porter unicode61` indexes them. */
export function tokens(text) {
  return rawTokens(text).map(stem);
}

/** The tokens of a query, stop words left out (checked before stemming), each once. */
export function queryTerms(text) {
  return [...new Set(rawTokens(text).filter((w) => !STOPWORDS.has(w)).map(stem))];
}

// ── Porter (1980) ────────────────────────────────────────────────────────────────────────────────

const isCons = (w, i) => {
  const c = w[i];
  if ("aeiou".includes(c)) return false;
  if (c === "y") return i === 0 ? true : !isCons(w, i - 1);
  return true;
};
/** m(): the number of VC sequences in w[0..end). */
function measure(w, end = w.length) {
  let n = 0, i = 0;
  while (i < end && isCons(w, i)) i++;
  for (;;) {
    while (i < end && !isCons(w, i)) i++;
    if (i >= end) return n;
    while (i < end && isCons(w, i)) i++;
    n++;
    if (i >= end) return n;
  }
}
const hasVowel = (w, end = w.length) => { for (let i = 0; i < end; i++) if (!isCons(w, i)) return true; return false; };
const doubleCons = (w) => w.length >= 2 && w[w.length - 1] === w[w.length - 2] && isCons(w, w.length - 1);
/** *o: the stem ends cvc, the last c not w, x or y. */
const cvc = (w, end = w.length) => end >= 3 && isCons(w, end - 3) && !isCons(w, end - 2) && isCons(w, end - 1) && !"wxy".includes(w[end - 1]);

/** Replaces suffix `s` by `r` when the rest has m() > `min`; [word, matched?]. */
function rule(w, s, r, min) {
  if (!w.endsWith(s)) return [w, false];
  const stemLen = w.length - s.length;
  return [measure(w, stemLen) > min ? w.slice(0, stemLen) + r : w, true];
}
function firstRule(w, rules, min) {
  for (const [s, r] of rules) {
    const [out, matched] = rule(w, s, r, min);
    if (matched) return out;
  }
  return w;
}

const STEP2 = [["ational", "ate"], ["tional", "tion"], ["enci", "ence"], ["anci", "ance"], ["izer", "ize"], ["bli", "ble"], ["alli", "al"],
  ["entli", "ent"], ["eli", "e"], ["ousli", "ous"], ["ization", "ize"], ["ation", "ate"], ["ator", "ate"], ["alism", "al"],
  ["iveness", "ive"], ["fulness", "ful"], ["ousness", "ous"], ["aliti", "al"], ["iviti", "ive"], ["biliti", "ble"], ["logi", "log"]];
const STEP3 = [["icate", "ic"], ["ative", ""], ["alize", "al"], ["iciti", "ic"], ["ical", "ic"], ["ful", ""], ["ness", ""]];
const STEP4 = ["al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize"];

/** The Porter stem of one lower-case token (tokens under 3 or over 64 characters unchanged, as
 * FTS5; any character but a, e, i, o, u and y is a consonant, digits too, as in FTS5's C). */
export function stem(word) {
  let w = word;
  if (w.length < 3 || w.length > 64) return w;
  // 1a
  if (w.endsWith("sses")) w = w.slice(0, -2);
  else if (w.endsWith("ies")) w = w.slice(0, -2);
  else if (w.endsWith("ss")) { /* keep */ } else if (w.endsWith("s")) w = w.slice(0, -1);
  // 1b
  let more = false;
  if (w.endsWith("eed")) { if (measure(w, w.length - 3) > 0) w = w.slice(0, -1); }
  else if (w.endsWith("ed") && hasVowel(w, w.length - 2)) { w = w.slice(0, -2); more = true; }
  else if (w.endsWith("ing") && hasVowel(w, w.length - 3)) { w = w.slice(0, -3); more = true; }
  if (more) {
    if (w.endsWith("at") || w.endsWith("bl") || w.endsWith("iz")) w += "e";
    else if (doubleCons(w) && !"lsz".includes(w[w.length - 1])) w = w.slice(0, -1);
    else if (measure(w) === 1 && cvc(w)) w += "e";
  }
  // 1c
  if (w.endsWith("y") && hasVowel(w, w.length - 1)) w = w.slice(0, -1) + "i";
  // 2, 3
  w = firstRule(w, STEP2, 0);
  w = firstRule(w, STEP3, 0);
  // 4
  for (const s of STEP4) {
    if (!w.endsWith(s)) continue;
    const stemLen = w.length - s.length;
    if (measure(w, stemLen) > 1 && (s !== "ion" || "st".includes(w[stemLen - 1]))) w = w.slice(0, stemLen);
    break;
  }
  // 5a
  if (w.endsWith("e")) {
    const m = measure(w, w.length - 1);
    if (m > 1 || (m === 1 && !cvc(w, w.length - 1))) w = w.slice(0, -1);
  }
  // 5b
  if (measure(w) > 1 && doubleCons(w) && w.endsWith("l")) w = w.slice(0, -1);
  return w;
}
// ── BM25 as FTS5's bm25() ────────────────────────────────────────────────────────────────────────

/** An index of `texts` (one column each) for bm25Rank. */
export function bm25Index(texts) {
  const docs = texts.map((t) => {
    const toks = tokens(t);
    const tf = new Map();
    for (const x of toks) tf.set(x, (tf.get(x) ?? 0) + 1);
    return { len: toks.length, tf };
  });
  const df = new Map();
  for (const d of docs) for (const t of d.tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
  const avgdl = docs.reduce((a, d) => a + d.len, 0) / Math.max(1, docs.length);
  return { docs, df, avgdl, n: docs.length };
}

/**
 * Indexes of the texts matching any term of `query` (stop words left out), best first; ties
 * keep insertion order, as FTS5. FTS5's formula: idf = ln((N − n + 0.5) / (n + 0.5)), at least
 * 1e-6; k1 = 1.2, b = 0.75; document length in tokens.
 */
export function bm25Rank({ docs, df, avgdl, n }, query, k1 = 1.2, b = 0.75) {
  const terms = queryTerms(query);
  const scored = [];
  docs.forEach((d, i) => {
    let s = 0;
    for (const t of terms) {
      const tf = d.tf.get(t);
      if (!tf) continue;
      const nt = df.get(t);
      const idf = Math.max(1e-6, Math.log((n - nt + 0.5) / (nt + 0.5)));
      s += idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * d.len) / avgdl));
    }
    if (s > 0) scored.push([i, s]);
  });
  scored.sort((x, y) => y[1] - x[1] || x[0] - y[0]);
  return scored.map(([i]) => i);
}
