// Crash tests: the runtime (workerd under Miniflare, in a process group of its own) is killed with
// SIGKILL in the middle of a write, at several moments, and started again on the same state.
// After each restart: the write is all or nothing (a batch's messages all there or none; a turn's
// user message and reply both or neither, a stopped one too; an oversize message whole or absent;
// with chat.onDisconnect "finish", the user message stored at the start stays and is answered
// when sent again), what the client
// was told was stored is stored, search and history agree (no index row without its message, no
// message without its index row), and after one more write request no object under `_spill/` in
// R2 lacks a row of the DO's `spills` table. The persisted SQLite files are read directly
// (killable.mjs), not through the Worker.
import { test } from "node:test";
import assert from "node:assert/strict";
import { useRig, state, call, crashAfter, checkStore, text, count, startKillable, TOKEN } from "./crash-rig.mjs";

useRig();

test("killed mid-batch: a batch is stored whole or not at all", { timeout: 300_000 }, async () => {
  const size = 2000;
  for (const [i, ms] of [15, 60, 150, 300, 600, 1500].entries()) {
    const sid = `batch-${i}`;
    const messages = Array.from({ length: size }, (_, k) => text(`b${i}-${k}`, k % 2 ? "assistant" : "user", `batchword${i} number ${k} of a long batch`));
    const seen = await crashAfter(ms, () => call("POST", `/sessions/${sid}/messages/batch`, { messages }));
    const h = await call("GET", `/sessions/${sid}/history?raw=1`);
    const n = h.body.messages.length;
    assert.ok(n === 0 || n === size, `after a kill at ${ms} ms the batch has ${n} of ${size} messages`);
    if (seen?.status === 201) assert.equal(n, size, "a batch the client was told is stored, is stored");
    if (n) {
      const s = await call("GET", `/sessions/${sid}`);
      assert.equal(s.body.totalMessages, size);
      assert.equal((await call("GET", `/sessions/${sid}/search?q=batchword${i}&limit=100`)).body.results.length, 100);
    } else {
      assert.equal((await call("GET", `/sessions/${sid}`)).status, 404, "an absent batch registered nothing");
      assert.equal((await call("GET", `/search?q=batchword${i}`)).body.results.length, 0, "and is not found");
    }
    count("batch", n > 0);
    await checkStore("batch");
  }
});

test("killed mid-turn: the user message and the reply are stored together or not at all", { timeout: 300_000 }, async () => {
  for (const [i, ms] of [30, 120, 250, 400, 650, 1200].entries()) {
    const sid = `turn-${i}`;
    state.model.reset();
    const pieces = Array.from({ length: 40 }, (_, k) => `piece${k} `);
    state.model.reply({ content: pieces.join(""), pieces, pieceDelayMs: 12 });
    const seen = await crashAfter(ms, () => call("POST", `/sessions/${sid}/chat`, { message: text(`u${i}`, "user", `turnword${i} tell me`) },
      { accept: "text/event-stream" }));
    const h = (await call("GET", `/sessions/${sid}/history`)).body.messages;
    assert.ok(h.length === 0 || h.length === 2, `after a kill at ${ms} ms the turn left ${h.length} messages`);
    if (h.length === 2) {
      assert.equal(h[0].id, `u${i}`);
      assert.equal(h[1].role, "assistant");
      assert.equal(h[1].parts.find((p) => p.type === "text")?.text, pieces.join(""), "the reply is whole");
    }
    if (typeof seen?.body === "string" && seen.body.includes("[DONE]")) assert.equal(h.length, 2, "a finished stream was stored");
    const hits = (await call("GET", `/sessions/${sid}/search?q=turnword${i}`)).body.results.length;
    assert.equal(hits, h.length ? 1 : 0, "search agrees with history");
    count("turn", h.length > 0);
    await checkStore("turn");
  }
});

test("killed mid-spill: an oversize message is stored whole or absent, and no object leaks", { timeout: 300_000 }, async () => {
  const big = (id) => ({ id, role: "assistant", parts: [
    { type: "text", text: `spillword ${id}` },
    { type: "dynamic-tool", toolName: "fetch", toolCallId: `call-${id}`, state: "output-available", input: {}, output: { body: "o".repeat(5_000_000) } }] });
  for (const [i, ms] of [5, 25, 60, 120, 250, 500, 1000].entries()) {
    const sid = `spill-${i}`;
    const msg = big(`s${i}`);
    const seen = await crashAfter(ms, () => call("POST", `/sessions/${sid}/messages`, { message: msg }));
    const got = await call("GET", `/sessions/${sid}/messages/s${i}`);
    assert.ok(got.status === 200 || got.status === 404, `status ${got.status}`);
    if (got.status === 200) assert.deepEqual(got.body, msg, "stored whole");
    if (seen?.status === 201) assert.equal(got.status, 200, "a message the client was told is stored, is stored");
    count("spill", got.status === 200);
    await checkStore("spill");
  }
});

test("killed around a stop: the stopped reply is stored with its user message or neither is", { timeout: 300_000 }, async () => {
  const pieces = Array.from({ length: 60 }, (_, k) => `stoppiece${k} `);
  for (const [i, ms] of [0, 5, 20, 60, 150].entries()) {
    const sid = `stop-${i}`;
    state.model.reset();
    state.model.reply({ content: pieces.join(""), pieces, pieceDelayMs: 40 });
    // The turn streams; once its first piece is out, the stop route is called and the runtime
    // killed `ms` after it.
    const turn = fetch(new URL(`/agents/crash/sessions/${sid}/chat`, state.rt.url), {
      method: "POST", headers: { authorization: "Bearer crash-token", "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ message: text(`u${i}`, "user", `stopword${i} go`) }),
    }).then(async (r) => { const reader = r.body.getReader(); await reader.read(); return reader; }, () => null);
    const reader = await turn;
    await crashAfter(ms, () => call("POST", `/sessions/${sid}/chat/stop`));
    reader?.cancel().catch(() => {});
    const h = (await call("GET", `/sessions/${sid}/history`)).body.messages;
    assert.ok(h.length === 0 || h.length === 2, `after a kill ${ms} ms after the stop the turn left ${h.length} messages`);
    if (h.length === 2) {
      assert.equal(h[1].metadata.stopped, true);
      assert.ok(pieces.join("").startsWith(h[1].parts[0].text), "the stored reply is what streamed");
    }
    count("stop", h.length > 0);
    await checkStore("stop");
  }
});

test("killed during a turn that runs without its client (onDisconnect: finish): the user message stays, answered again after", { timeout: 300_000 }, async () => {
  await state.rt.kill();
  state.vars = { ...state.vars, SESSION_CONFIG: JSON.stringify({ chat: { onDisconnect: "finish" } }) };
  state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
  const pieces = Array.from({ length: 40 }, (_, k) => `finishpiece${k} `);
  for (const [i, ms] of [100, 400, 900].entries()) {
    const sid = `finish-${i}`;
    state.model.reset();
    state.model.reply({ content: pieces.join(""), pieces, pieceDelayMs: 30 });
    await crashAfter(ms, () => call("POST", `/sessions/${sid}/chat`, { message: text(`f${i}`, "user", `finishword${i} go`) },
      { accept: "text/event-stream" }));
    const h = (await call("GET", `/sessions/${sid}/history`)).body.messages;
    assert.ok(h.length <= 2, `${h.length} messages`);
    if (h.length === 2) assert.equal(h[1].parts[0].text, pieces.join(""), "a reply is whole");
    assert.equal((await call("GET", `/sessions/${sid}/chat/x/stream`)).status, 204, "nothing runs after a restart");
    if (h.length === 1) {
      // The user message stored at the start, never answered: sent again, it is answered.
      state.model.reply({ content: "Answered now." });
      const again = await call("POST", `/sessions/${sid}/chat`, { message: text(`f${i}`, "user", `finishword${i} go`) });
      assert.equal(again.status, 201, JSON.stringify(again.body));
      assert.equal((await call("GET", `/sessions/${sid}/history`)).body.messages.length, 2);
    }
    count("finish", h.length > 0);
    await checkStore("finish");
  }
});
