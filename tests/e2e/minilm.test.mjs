// End-to-end: long-term memory recalled by meaning with a real sentence-embedding model.
// all-MiniLM-L6-v2 (./minilm.mjs: scripts/minilm/server.py, numpy, on 127.0.0.1) is the
// Worker's OpenAI-compatible embeddings endpoint. First its forward pass is checked against the
// cosines sentence-transformers' documentation prints (scripts/minilm/check.py, which also prints
// its speed); then memories stored over HTTP are found by queries that share no word with them,
// which full text alone cannot do; and a failing embeddings endpoint is caught up by a later write.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { startWorker, eventually } from "./harness.mjs";
import { start as startMiniLm, EMBEDDING_MODEL, EMBEDDING_DIMS, PYTHON, CHECK, cosine } from "./minilm.mjs";

/** @type {import("./minilm.mjs").MiniLmServer} */
let model;
let w;

before(async () => {
  model = await startMiniLm();
  w = await startWorker({
    vars: {
      EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: model.baseUrl, EMBEDDINGS_MODEL: EMBEDDING_MODEL,
      // The memory tools (memory_forget) need long-term memory configured; no turn runs here.
      SESSION_CONFIG: JSON.stringify({ memory: {} }),
    },
  });
});
after(async () => { await w?.stop(); await model?.close(); });

/** Calls the API of `agent`: {status, body}. */
const call = async (agent, method, path, body) => {
  const r = await w.json(method, `/agents/${agent}${path}`, body);
  return { status: r.status, body: r.body };
};
const search = async (agent, q) => {
  const r = await call(agent, "GET", `/memories/search?q=${encodeURIComponent(q)}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.results;
};
/** Polls `probe` until it returns a truthy value (harness.mjs `eventually`); fails after `timeoutMs`. */
const waitFor = (what, probe, timeoutMs = 15_000) => eventually(what, probe, timeoutMs);
/** Whether every text of `texts` was in a request the model answered with vectors. */
const embedded = (texts) => texts.every((t) => model.requests.some((r) => !r.failed && [r.body.input].flat().includes(t)));
/** One line per hit, for failure messages. */
const show = (hits) => hits.map((h) => `${h.memory.content} (${h.why})`).join("\n");

test("the forward pass matches the cosines sentence-transformers prints (scripts/minilm/check.py)", { timeout: 120_000 }, async (t) => {
  const { code, out } = await new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [CHECK], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { out += d; });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
  for (const line of out.split("\n").filter((l) => /^(loaded|speed|FAIL|\s+max)/.test(l))) t.diagnostic(line.trim());
  assert.equal(code, 0, out);
});

test("the server answers OpenAI's embeddings format with the model's vectors", async () => {
  const [a, b, c] = await model.embed(["The new movie is awesome", "The new movie is so great", "A woman watches TV"]);
  assert.equal(a.length, EMBEDDING_DIMS);
  assert.ok(Math.abs(Math.hypot(...a) - 1) < 1e-5, "a unit vector");
  // Printed by https://sbert.net/docs/sentence_transformer/usage/semantic_textual_similarity.html
  assert.ok(Math.abs(cosine(a, b) - 0.8939) < 1e-4, String(cosine(a, b)));
  assert.ok(Math.abs(cosine(a, c) - -0.0502) < 1e-4, String(cosine(a, c)));
  const r = await fetch(`${model.baseUrl}/embeddings`, { method: "POST", body: JSON.stringify({ model: EMBEDDING_MODEL, input: "hello world" }) });
  const body = await r.json();
  assert.equal(r.status, 200);
  assert.equal(body.object, "list");
  assert.deepEqual(body.data.map((d) => [d.object, d.index, d.embedding.length]), [["embedding", 0, EMBEDDING_DIMS]]);
  assert.equal(body.model, EMBEDDING_MODEL);
  assert.deepEqual(body.usage, { prompt_tokens: 4, total_tokens: 4 }, "[CLS] hello world [SEP]");
});

test("recall by meaning: the Volvo fact answers a question about a sibling's vehicle, in no shared word", async () => {
  const A = "by-meaning";
  const volvo = "My sister drives a red Volvo now.";
  const others = [
    "The user is allergic to peanuts.",
    "The user works night shifts as a nurse in Porto.",
    "The user's favourite film is Alien.",
    "The user plays chess every Tuesday evening.",
    "The user takes the bus to work.",
  ];
  const r = await call(A, "POST", "/memories/batch", { memories: [volvo, ...others].map((content) => ({ content })) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  // A batch is embedded after its answer: wait for the vectors, then for recall to use them.
  await waitFor("the memories' embeddings", () => embedded([volvo, ...others]));
  let hits = await waitFor("a semantic hit", async () => {
    const h = await search(A, "what car does my sister drive these days");
    return h[0]?.signals.semantic != null && h;
  });
  assert.equal(hits[0].memory.content, volvo, show(hits));
  assert.match(hits[0].why, /meaning/);

  // No word of these questions is in any memory (stop words aside): full text finds nothing,
  // the vectors find the one fact that answers each.
  for (const [question, answer] of [
    ["Which vehicle does my sibling own?", volvo],
    ["food the user must avoid", others[0]],
    ["How does the user commute?", others[4]],
  ]) {
    hits = await search(A, question);
    assert.equal(hits[0]?.memory.content, answer, `${question}\n${show(hits)}`);
    assert.equal(hits[0].signals.text, 0, "found by meaning alone");
    assert.ok(hits[0].signals.semantic > 0.4, `${question}: ${JSON.stringify(hits[0].signals)}`);
    assert.ok(hits.every((h) => h.signals.semantic <= hits[0].signals.semantic), show(hits));
  }
  // The query is embedded once per search, as one text (input as an array of one).
  const last = model.requests.at(-1);
  assert.equal(last.body.model, EMBEDDING_MODEL);
  assert.deepEqual(last.body.input, ["How does the user commute?"]);
});

test("a failing embeddings endpoint loses nothing: the memory waits, and a later write embeds it", async () => {
  const F = "flaky-minilm";
  const waiting = "The user's daughter is learning the violin.";
  await model.fail(1000);
  let r = await call(F, "POST", "/memories", { content: waiting });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await waitFor("the failed embedding", () => model.requests.some((e) => e.failed && [e.body.input].flat().includes(waiting)));
  let hits = await search(F, "Which instrument does the kid practise?");
  assert.deepEqual(hits, [], "no vector yet, and no shared word");

  await model.fail(0);
  r = await call(F, "POST", "/memories", { content: "The user grows tomatoes on the balcony." });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await waitFor("the waiting memory's embedding", () => embedded([waiting]));
  hits = await waitFor("the caught-up vector in recall", async () => {
    const h = await search(F, "Which instrument does the kid practise?");
    return h.length > 0 && h;
  });
  assert.equal(hits[0].memory.content, waiting, show(hits));
  assert.ok(hits[0].signals.semantic > 0.3, JSON.stringify(hits[0].signals));
});

/** Appends a user message with `text` to session `sid` of `agent`. */
const say = async (agent, sid, id, text) => {
  const r = await call(agent, "POST", `/sessions/${sid}/messages`, { message: { id, role: "user", parts: [{ type: "text", text }] } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
};
const history = async (agent, path, q) => {
  const r = await call(agent, "GET", `${path}?q=${encodeURIComponent(q)}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.results;
};

test("a paraphrased question finds its fact and its message, by /memories/search and /search; an unrelated one finds nothing", async () => {
  const A = "paraphrase-everywhere";
  const fact = "My sister drives a red Volvo now.";
  await say(A, "family", "m1", fact);
  await say(A, "family", "m2", "We should plan the garden party for June.");
  await say(A, "work", "m1", "The quarterly report is due on Thursday.");
  const r = await call(A, "POST", "/memories", { content: fact });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.embeddedAt, null, "answered before its vector exists");
  // Its vector follows the answer: embeddedAt is set then.
  const m = await waitFor("the memory's embeddedAt", async () => {
    const g = await call(A, "GET", `/memories/${r.body.id}`);
    return g.body.embeddedAt && g.body;
  });
  assert.ok(m.embeddedAt >= m.createdAt, JSON.stringify(m));
  await waitFor("the messages' vectors", () => embedded([fact, "We should plan the garden party for June."]));

  const question = "what car does my sister drive these days?";
  const across = await waitFor("the message by meaning", async () => (await history(A, "/search", question)).length > 0 && (await history(A, "/search", question)));
  assert.deepEqual(across.map((h) => [h.sessionId, h.id]), [["family", "m1"]], JSON.stringify(across));
  assert.deepEqual((await history(A, "/sessions/family/search", question)).map((h) => h.id), ["m1"]);
  assert.deepEqual(await history(A, "/sessions/work/search", question), [], "another session's message is not this one's");
  const recalled = await search(A, question);
  assert.equal(recalled[0]?.memory.content, fact, show(recalled));

  // Unrelated to everything stored: nothing by meaning, nothing by words.
  for (const q of ["How many valence electrons does boron have?", "What causes the aurora borealis?"]) {
    assert.deepEqual(await history(A, "/search", q), [], q);
    assert.deepEqual(await search(A, q), [], q);
  }
});

test("a long answer is found by what its middle says: a message is embedded in parts of ~1,000 bytes", async () => {
  const L = "long-answers";
  // About 3 KB: baking for a kilobyte, then a paragraph about the sister's Volvo, then baking
  // again. The model reads ~256 tokens of a text, so one vector of the beginning holds only the
  // baking (cosine to the question -0.10; the part with the paragraph 0.49, above the floor,
  // 0.42 here); the question shares no word with the paragraph.
  const baking = "Knead the dough for ten minutes, let it rise in a warm place until doubled, then shape the loaves and bake them at two hundred degrees until golden. ";
  const volvo = "About my sister: she drives a red Volvo station wagon now, bought used last spring, and takes it to work every morning. She loves that Volvo and says the wagon handles snow well. ";
  const text = baking.repeat(7) + volvo.repeat(6) + baking.repeat(7);
  await say(L, "family", "m1", text);
  await say(L, "family", "m2", "We should plan the garden party for June.");
  const question = "what vehicle does my sibling own?";
  const hits = await waitFor("the long message by meaning", async () => {
    const h = await history(L, "/search", question);
    return h.length > 0 && h;
  });
  assert.deepEqual(hits.map((h) => h.id), ["m1"], JSON.stringify(hits.map((h) => h.id)));
  assert.deepEqual(await history(L, "/search", "How many valence electrons does boron have?"), [], "unrelated: nothing");
});

test("messages the embeddings endpoint failed for are caught up by a later write", async () => {
  const F = "flaky-messages";
  const text = "Our flight to Lisbon leaves at seven in the morning.";
  await model.fail(1000, 503);
  await say(F, "trip", "m1", text);
  await waitFor("the failed call", () => model.requests.some((e) => e.failed && [e.body.input].flat().includes(text)));
  const question = "When does the plane to Portugal depart?";
  assert.deepEqual(await history(F, "/search", question), [], "no vector yet, no shared word");
  await model.fail(0);
  await say(F, "trip", "m2", "Pack the sunscreen.");
  await waitFor("the caught-up vector", () => embedded([text]));
  const hits = await waitFor("the message by meaning", async () => {
    const h = await history(F, "/search", question);
    return h.length > 0 && h;
  });
  assert.equal(hits[0].id, "m1", JSON.stringify(hits));
});

test("with real vectors, a query that quotes a fact finds it first, and memory_forget {query} forgets only a clear best match", async () => {
  const A = "quotes-and-forgets";
  /** Stores `texts` one by one, a moment apart (each newer than the last), and waits for their vectors. */
  const storeApart = async (texts) => {
    for (const content of texts) {
      const r = await call(A, "POST", "/memories", { content });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await waitFor("the memories' embeddings", () => embedded(texts));
  };
  const colour = "Favourite colour is teal, like the old front door.";
  await storeApart([colour, "Teal ducks live near the lake behind the house."]);
  const hits = await waitFor("both found by meaning", async () => {
    const h = await search(A, "favourite colour is teal");
    return h.length >= 2 && h.every((x) => x.signals.semantic != null) && h;
  });
  assert.equal(hits[0].memory.content, colour, show(hits));

  const pizza = "Favourite pizza is margherita from the Kestrel Lane corner shop.";
  await storeApart(["Old phone number is 555 0142, from the Kestrel Lane flat.", pizza, "Keep the bicycle in the Kestrel Lane shed."]);
  const forget = async (query) => {
    const r = await call(A, "POST", "/sessions/s/tools/memory_forget", { input: { query } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.output;
  };
  const held = async () => (await call(A, "GET", "/memories?limit=100")).body.memories.map((m) => m.content);
  let out = await forget("favourite pizza margherita Kestrel Lane");
  assert.ok(out.startsWith("Forgot memory mem_") && out.endsWith(pizza), out);
  assert.equal((await held()).length, 4);
  // The phone number and the bicycle match "Kestrel Lane" about as well: nothing goes.
  out = await forget("Kestrel Lane");
  assert.match(out, /^Several memories match "Kestrel Lane"/, out);
  assert.equal((await held()).length, 4, "nothing forgotten");
});

test("the least similarity of a hit by meaning alone follows the model: unrelated questions find nothing with either of two models, paraphrases still find their facts", { timeout: 120_000 }, async () => {
  // Twenty-four facts of one user (past the 16 a baseline needs), no word in common with the
  // questions below.
  const facts = [
    "My sister drives a red Volvo now.", "I am allergic to peanuts.", "Our daughter Maya started violin lessons in March.",
    "I work as a nurse at the city hospital.", "We adopted a grey cat called Pixel.", "My favourite food is spicy Thai curry.",
    "I run five kilometres every Sunday morning.", "The wifi password at home is written on the fridge.", "My brother lives in Toronto.",
    "I prefer window seats on flights.", "Our wedding anniversary is on the ninth of October.", "I am learning Portuguese before our trip to Lisbon.",
    "My dentist appointment moved to Friday afternoon.", "I drink my coffee black without sugar.", "We are renovating the upstairs bathroom.",
    "My manager is called Priya.", "I keep my passport in the blue drawer of the desk.", "Our son plays goalkeeper for the school football team.",
    "I grow tomatoes and basil on the balcony.", "My laptop is a ten-year-old ThinkPad.", "I get migraines when I skip breakfast.",
    "We take the train to visit my parents at Christmas.", "I collect vinyl records of jazz from the sixties.", "My car insurance renews in January.",
  ];
  // With the second model (the wheel's word-piece vectors averaged: scripts/minilm/model.py
  // embed_static) these reach 0.47–0.52 to their nearest fact, above the fixed 0.42 the floor
  // was; its facts are 0.44 alike on average, so its floor is about 0.60. With all-MiniLM-L6-v2
  // they reach at most 0.21 (its facts: 0.10 alike, floor about 0.35).
  const unrelated = ["How many moons does Neptune have?", "Who wrote the Treaty of Westphalia?"];
  const stat = await startWorker({
    vars: {
      EMBEDDINGS_PROVIDER: "openai", EMBEDDINGS_BASE_URL: model.baseUrl, EMBEDDINGS_MODEL: "minilm-static-average",
      SESSION_CONFIG: JSON.stringify({ memory: {} }),
    },
  });
  try {
    for (const [label, worker] of [["all-MiniLM-L6-v2", w], ["minilm-static-average", stat]]) {
      const A = `floor-follows-${label.toLowerCase()}`;
      const ids = [];
      for (const content of facts) {
        const r = await worker.json("POST", `/agents/${A}/memories`, { content });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        ids.push(r.body.id);
      }
      await waitFor(`${label}: every fact's vector`, async () => {
        for (const id of ids) {
          if (!(await worker.json("GET", `/agents/${A}/memories/${id}`)).body.embeddedAt) return false;
        }
        return true;
      }, 60_000);
      const recall = async (q) => {
        const r = await worker.json("GET", `/agents/${A}/memories/search?q=${encodeURIComponent(q)}`);
        assert.equal(r.status, 200, JSON.stringify(r.body));
        return r.body.results;
      };
      for (const q of unrelated) assert.deepEqual(await recall(q), [], `${label}: ${q}`);
      // Words still find a fact whatever the model.
      assert.equal((await recall("peanuts"))[0]?.memory.content, "I am allergic to peanuts.", label);
      if (label === "all-MiniLM-L6-v2") {
        // The floor measured from this user's own facts (about 0.35) keeps the paraphrases (0.45–0.57).
        for (const [q, fact] of [["what vehicle does my sibling use?", facts[0]], ["which nuts must I avoid?", facts[1]], ["what instrument is our kid studying?", facts[2]]]) {
          const hits = await recall(q);
          assert.equal(hits[0]?.memory.content, fact, `${q}\n${show(hits)}`);
        }
      }
    }
  } finally {
    await stat.stop();
  }
});
