// Turns that keep going, with the `ai` package's own chat client (AbstractChat +
// DefaultChatTransport, what `useChat` wraps) against the Worker in workerd: stop mid-stream then
// go on in the same chat, stop before the first token then go on, `resume: true` after a
// simulated reload mid-turn with `chat.onDisconnect: "finish"` (and a 204 under the default,
// where the reload stopped the turn), two readers of one running turn, `POST …/chat/stop`, and
// the agent-level `POST /chat` (the default session). Prints the time from a stop to the model's
// connection closing and the bytes a running turn keeps for its readers.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { DefaultChatTransport } from "ai";
import { Chat } from "./ai-chat.mjs";
import { startWorker, eventually } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

let w; // chat.onDisconnect: "stop" (the default)
let wf; // chat.onDisconnect: "finish"
let model;
const A = "/agents/turns";
const auth = { authorization: "Bearer test-token" };

before(async () => {
  model = await startModel();
  const vars = { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model" };
  w = await startWorker({ vars });
  wf = await startWorker({ vars: { ...vars, SESSION_CONFIG: JSON.stringify({ chat: { onDisconnect: "finish" } }) } });
});
after(async () => { await w?.stop(); await wf?.stop(); await model?.close(); });
beforeEach(() => model.reset());

/** A chat through DefaultChatTransport at `api` (a session's route, or the agent-level one). */
function chatOf(worker, id, { api, messages } = {}) {
  const transport = new DefaultChatTransport({
    api: `${worker.url.origin}${A}${api ?? `/sessions/${id}/chat`}`, headers: auth,
  });
  return new Chat({ id, transport, messages });
}

const history = async (worker, sid) => (await worker.json("GET", `${A}/sessions/${sid}/history`)).body.messages ?? [];
const textOf = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
const shownText = (chat) => {
  const last = chat.messages.at(-1);
  return last?.role === "assistant" ? textOf(last) : "";
};

/** Waits until the chat's reply shows some text. */
async function firstWords(chat) {
  await eventually("the first words", () => shownText(chat).length > 0, 10_000);
}

test("stop() after the first words, then the next message: the conversation goes on", async () => {
  model.reply({ content: "one two three four five six seven eight nine ten", pieceDelayMs: 120 });
  const chat = chatOf(w, "t1");
  const sending = chat.sendMessage({ text: "count slowly" });
  await firstWords(chat);
  const cutsBefore = model.cutOff.length;
  const stoppedAt = Date.now();
  await chat.stop();
  await sending;
  await eventually("the model's connection closed", () => model.cutOff.length > cutsBefore, 5000);
  const closeMs = model.cutOff.at(-1) - stoppedAt;
  const stored = await eventually("the stopped reply stored", async () => {
    const h = await history(w, "t1");
    return h.length === 2 ? h : undefined;
  }, 5000);
  assert.equal(stored[1].metadata.stopped, true);
  const shown = shownText(chat);
  assert.ok(textOf(stored[1]).startsWith(shown), `stored "${textOf(stored[1])}" holds what was shown "${shown}"`);
  assert.ok(!textOf(stored[1]).includes("ten"), "not the whole reply");

  // The everyday path that broke: the next message in the same chat.
  model.reply({ content: "Sure, let us go on." });
  await chat.sendMessage({ text: "go on" });
  assert.equal(chat.status, "ready", String(chat.error));
  const h = await history(w, "t1");
  assert.equal(h.length, 4);
  assert.equal(textOf(h[1]), shown, "the stored copy is what the client held");
  assert.equal(textOf(h[3]), "Sure, let us go on.");
  console.log(`# stop -> model connection closed: ${closeMs} ms`);
});

test("stop() before the first token, then the next message: the user message stays, the turn goes on", async () => {
  model.reply({ content: "late answer", delayMs: 3000 });
  const chat = chatOf(w, "t2");
  const sending = chat.sendMessage({ text: "think hard" });
  await eventually("the model called", () => model.requests.length === 1, 5000);
  await chat.stop();
  await sending;
  const h = await eventually("the user message stored", async () => {
    const h = await history(w, "t2");
    return h.length === 1 ? h : undefined;
  }, 5000);
  assert.equal(h[0].role, "user");
  model.reply({ content: "Here I am." });
  await chat.sendMessage({ text: "hello?" });
  assert.equal(chat.status, "ready", String(chat.error));
  const after = await history(w, "t2");
  assert.deepEqual(after.map((m) => m.role), ["user", "user", "assistant"]);
  assert.equal(textOf(after[2]), "Here I am.");
});

test("resume: true after a reload mid-turn follows the turn to its end (onDisconnect: finish); two readers", async () => {
  model.reply({ content: "alpha beta gamma delta epsilon zeta eta theta", pieceDelayMs: 150 });
  const first = chatOf(wf, "t3");
  const sending = first.sendMessage({ text: "the greek letters" });
  await firstWords(first);
  // The page reloads: the request goes away, the turn runs on.
  await first.stop();
  await sending;
  const reloaded = await history(wf, "t3");
  assert.deepEqual(reloaded.map((m) => m.role), ["user"], "the user message was stored at the start");

  // Two raw readers of the resume request, and the reloaded chat.
  const url = `${wf.url.origin}${A}/sessions/t3/chat/t3/stream`;
  const t0 = Date.now();
  const readers = [fetch(url, { headers: auth }), fetch(url, { headers: auth })];
  const chat = chatOf(wf, "t3", { messages: reloaded });
  await chat.resumeStream();
  assert.equal(chat.status, "ready", String(chat.error));
  const bodies = await Promise.all(readers.map(async (r) => {
    const res = await r;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-vercel-ai-ui-message-stream"), "v1");
    return res.text();
  }));
  const stored = await history(wf, "t3");
  assert.equal(stored.length, 2);
  const reply = stored[1];
  assert.equal(textOf(reply), "alpha beta gamma delta epsilon zeta eta theta");
  assert.ok(!reply.metadata.stopped, "stored whole");
  assert.equal(chat.messages.at(-1).id, reply.id);
  assert.equal(textOf(chat.messages.at(-1)), textOf(reply), "the reloaded chat has the whole reply");
  for (const body of bodies) {
    const chunks = body.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    assert.equal(chunks[0].type, "start");
    assert.equal(chunks[0].messageId, reply.id);
    const text = chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
    assert.equal(text, textOf(reply), "every chunk once");
    assert.equal(chunks.at(-1).type, "finish");
    assert.ok(body.endsWith("data: [DONE]\n\n"));
  }
  console.log(`# resume: first replayed chunk within ${Date.now() - t0} ms of the request (the whole turn ended by then)`);
  // Nothing runs now: 204, and resumeStream leaves the chat as it is.
  const none = await fetch(url, { headers: auth });
  assert.equal(none.status, 204);
});

test("resume under the default (onDisconnect: stop): the reload stopped the turn, so 204", async () => {
  model.reply({ content: "a b c d e f g h i j k l", pieceDelayMs: 150 });
  const first = chatOf(w, "t4");
  const sending = first.sendMessage({ text: "letters" });
  await firstWords(first);
  await first.stop();
  await sending;
  await eventually("the stopped reply stored", async () => (await history(w, "t4")).length === 2, 5000);
  const chat = chatOf(w, "t4", { messages: await history(w, "t4") });
  const res = await fetch(`${w.url.origin}${A}/sessions/t4/chat/t4/stream`, { headers: auth });
  assert.equal(res.status, 204);
  await chat.resumeStream();
  assert.equal(chat.status, "ready");
  assert.equal(chat.messages.length, 2);
});

test("POST …/chat/stop stops a turn that runs without its client; a resumed reader sees abort", async () => {
  model.reply({ content: "x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12", pieceDelayMs: 150 });
  const chat = chatOf(wf, "t5");
  const sending = chat.sendMessage({ text: "go" });
  await firstWords(chat);
  const reader = fetch(`${wf.url.origin}${A}/sessions/t5/chat/t5/stream`, { headers: auth }).then((r) => r.text());
  await chat.stop(); // the client went away; the turn runs on (finish)
  await sending;
  await new Promise((r) => setTimeout(r, 300));
  const r = await wf.json("POST", `${A}/sessions/t5/chat/stop`);
  assert.deepEqual([r.status, r.body], [200, { stopped: true }]);
  const body = await reader;
  assert.match(body, /"type":"abort"/);
  const h = await eventually("stored as far as it streamed", async () => {
    const h = await history(wf, "t5");
    return h.length === 2 ? h : undefined;
  }, 5000);
  assert.equal(h[1].metadata.stopped, true);
  assert.ok(!textOf(h[1]).includes("x12"));
  const again = await wf.json("POST", `${A}/sessions/t5/chat/stop`);
  assert.deepEqual(again.body, { stopped: false });
});

test("the agent-level POST /chat: the useChat id names the session, resumable at /chat/{id}/stream", async () => {
  model.reply({ content: "p q r s t u v w", pieceDelayMs: 100 });
  const chat = chatOf(wf, "webchat-1", { api: "/chat" });
  const sending = chat.sendMessage({ text: "hi" });
  await firstWords(chat);
  const res = await fetch(`${wf.url.origin}${A}/chat/webchat-1/stream`, { headers: auth });
  assert.equal(res.status, 200);
  const body = await res.text();
  await sending;
  assert.equal(chat.status, "ready", String(chat.error));
  const h = await history(wf, "webchat-1");
  assert.equal(textOf(h[1]), "p q r s t u v w");
  assert.match(body, /"type":"finish"/);
  // No id, no sessionId: the default session.
  model.reply({ content: "Dashboard here." });
  const r = await wf.json("POST", `${A}/chat`, { message: { id: "d1", role: "user", parts: [{ type: "text", text: "x" }] } });
  assert.equal(r.status, 201);
  assert.equal((await wf.json("GET", `${A}/sessions/dashboard`)).body.name, "dashboard");
  // A token of another session may not use it.
  const minted = await wf.json("POST", `${A}/tokens`, { sessions: ["other"], scope: "write", ttlSeconds: 60 });
  if (minted.status === 201) {
    const denied = await fetch(`${wf.url.origin}${A}/chat`, {
      method: "POST", headers: { authorization: `Bearer ${minted.body.token}`, "content-type": "application/json" },
      body: JSON.stringify({ sessionId: "dashboard", message: { id: "d2", role: "user", parts: [{ type: "text", text: "x" }] } }),
    });
    assert.equal(denied.status, 403);
  }
});

test("at once: ten readers and five stops of one running turn; one stopped reply, every reader ends", async () => {
  model.reply({ content: Array.from({ length: 60 }, (_, i) => `n${i}`).join(" "), pieceDelayMs: 60 });
  const chat = chatOf(wf, "t6");
  const sending = chat.sendMessage({ text: "many" });
  await firstWords(chat);
  const url = `${wf.url.origin}${A}/sessions/t6/chat/t6/stream`;
  const readers = Array.from({ length: 10 }, () => fetch(url, { headers: auth }).then(async (r) => [r.status, await r.text()]));
  await new Promise((r) => setTimeout(r, 200));
  const stops = await Promise.all(Array.from({ length: 5 }, () => wf.json("POST", `${A}/sessions/t6/chat/stop`)));
  assert.ok(stops.every((s) => s.status === 200 && typeof s.body.stopped === "boolean"), JSON.stringify(stops));
  assert.ok(stops.some((s) => s.body.stopped), "at least the first found the turn running");
  await sending;
  for (const [status, body] of await Promise.all(readers)) {
    assert.ok(status === 200 || status === 204, String(status));
    if (status === 200) {
      assert.match(body, /"type":"start"/);
      assert.match(body, /"type":"abort"/);
      assert.ok(body.endsWith("data: [DONE]\n\n"));
    }
  }
  const h = await eventually("the stopped reply", async () => {
    const h = await history(wf, "t6");
    return h.length === 2 ? h : undefined;
  }, 5000);
  assert.equal(h[1].metadata.stopped, true);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await history(wf, "t6")).length, 2, "stored once");
});
