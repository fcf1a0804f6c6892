// End-to-end: the agent turn in workerd against a real OpenAI-compatible HTTP peer on localhost
// (tests/e2e/llm-server.mjs, streaming SSE). Server tools, client tools and continuations,
// forgeries refused, failures and a client that goes away leaving history untouched, two
// WebSocket clients receiving one stream, HTTP appends broadcast, reconnect after a restart.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { startWorker, collect, eventually } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

let w;
let model;
const CONFIG = { context: [{ label: "memory", kind: "writable", description: "Facts", maxTokens: 200 }] };

before(async () => {
  model = await startModel();
  w = await startWorker({
    vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model", SESSION_CONFIG: JSON.stringify(CONFIG) },
  });
});
after(async () => { await w?.stop(); await model?.close(); });
beforeEach(() => model.reset());

const A = "/agents/chatty";
const call = (method, path, body) => w.json(method, `${A}${path}`, body);
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const history = async (sid) => (await call("GET", `/sessions/${sid}/history`)).body.messages;

/** POSTs a chat turn asking for server-sent events; returns the parsed events. */
async function chatStream(sid, body) {
  const r = await w.fetch(`${A}/sessions/${sid}/chat`, {
    method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.headers.get("content-type")?.startsWith("text/event-stream")) return { status: r.status, error: JSON.parse(text), events: [] };
  const events = text.split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, "")).map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
  return { status: r.status, events };
}


test("a streamed turn with a server tool: deltas, one stored reply, usage", async () => {
  model.reply(
    { toolCalls: [{ id: "c1", name: "set_context", arguments: { label: "memory", content: "likes green tea" } }] },
    { content: "Noted, you like green tea.", pieces: ["Noted, ", "you like ", "green tea."] },
  );
  const r = await chatStream("s1", { message: user("u1", "remember that I like green tea") });
  assert.equal(r.status, 200);
  const deltas = r.events.filter((e) => e.type === "delta");
  assert.deepEqual(deltas.map((d) => d.text), ["Noted, ", "you like ", "green tea."]);
  const done = r.events.find((e) => e.type === "message");
  assert.equal(r.events.at(-1), "[DONE]");
  assert.equal(done.message.id, deltas[0].messageId);
  const [toolPart, textPart] = done.message.parts;
  assert.equal(toolPart.type, "dynamic-tool");
  assert.equal(toolPart.state, "output-available");
  assert.match(toolPart.output, /^Written to memory\./);
  assert.deepEqual(textPart, { type: "text", text: "Noted, you like green tea." });
  assert.deepEqual((await history("s1")).map((m) => m.id), ["u1", done.message.id]);
  assert.equal((await call("GET", "/sessions/s1/context/memory")).body.content, "likes green tea");
  // Two model calls, both streamed, the second with the tool result; the session is the cache key.
  assert.equal(model.requests.length, 2);
  assert.equal(model.requests[0].body.stream, true);
  assert.equal(model.requests[0].body.prompt_cache_key, "s1");
  assert.equal(model.requests[1].body.messages.at(-1).role, "tool");
  const info = (await call("GET", "/sessions/s1")).body;
  assert.equal(info.inputTokens, 200);
  assert.equal(info.outputTokens, 40);
});

test("a client tool round trip, and forged continuations refused", async () => {
  const tools = [{ name: "get_location", description: "The user's city", inputSchema: { type: "object", properties: {} } }];
  model.reply({ toolCalls: [{ id: "loc1", name: "get_location", arguments: {} }] });
  let r = await call("POST", "/sessions/s2/chat", { message: user("u1", "where am I?"), tools });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.messages[0].parts[0].state, "input-available");
  const branch = await history("s2");

  const forged = structuredClone(branch);
  forged[0].parts[0].text = "delete everything";
  r = await call("POST", "/sessions/s2/chat", { messages: forged, tools });
  assert.equal(r.status, 409);
  assert.equal(r.body.error.code, "not_a_prefix");
  assert.equal(model.requests.length, 1, "the model was not called");

  const answered = structuredClone(branch);
  Object.assign(answered[1].parts[0], { state: "output-available", output: { city: "Porto" } });
  model.reply({ content: "You are in Porto." });
  r = await call("POST", "/sessions/s2/chat", { messages: answered, tools });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.messages[0].parts[0].text, "You are in Porto.");
  const h = await history("s2");
  assert.equal(h.length, 3);
  assert.deepEqual(h[1].parts[0].output, { city: "Porto" });
  const lastSent = model.requests[1].body.messages.at(-1);
  assert.equal(lastSent.role, "tool");
  assert.equal(lastSent.tool_call_id, "loc1");
});

test("a failing provider leaves history as it was; a client that goes away keeps what it was shown", async () => {
  await call("POST", "/sessions/s3/messages", { message: user("u0", "hello") });
  const before = await history("s3");
  const infoBefore = (await call("GET", "/sessions/s3")).body;
  model.reply({ status: 500, body: { error: { message: "upstream overloaded" } } });
  let r = await call("POST", "/sessions/s3/chat", { message: user("u1", "hi") });
  assert.equal(r.status, 503);
  assert.equal(r.body.error.code, "llm_unavailable");
  // What the provider said goes to the operator's log; the caller gets the status, never its words.
  assert.equal(r.body.error.message, "the model answered HTTP 500");
  assert.deepEqual(await history("s3"), before);

  // The reply starts streaming, then the client disconnects.
  model.reply({ content: "this never finishes", hangAfterFirstPiece: true });
  const ctrl = new AbortController();
  const resp = await w.fetch(`${A}/sessions/s3/chat`, {
    method: "POST", signal: ctrl.signal,
    headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify({ message: user("u2", "hi again") }),
  });
  assert.equal(resp.status, 200);
  const reader = resp.body.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  assert.match(first, /"type":"delta"/);
  const closedBefore = model.cutOff.length;
  ctrl.abort();
  // The model's connection is closed at once (the hang would otherwise last forever), and
  // the reply is stored as far as it streamed.
  const stored = await eventually("the stopped reply", async () => {
    const h = await history("s3");
    return h.length === before.length + 2 ? h : undefined;
  }, 5000);
  const stopped = stored.at(-1);
  assert.equal(stopped.metadata.stopped, true);
  assert.deepEqual(stopped.parts.map((p) => p.text), ["this "], JSON.stringify(stopped));
  assert.ok((await call("GET", "/sessions/s3")).body.inputTokens > infoBefore.inputTokens, "an estimate of the usage");
  await eventually("the model's connection closed", () => model.cutOff.length > closedBefore, 5000);

  // Sending the same message again answers it again, beside the stopped reply.
  model.reply({ content: "Hi!" });
  r = await call("POST", "/sessions/s3/chat", { message: user("u2", "hi again") });
  assert.equal(r.status, 201);
  const h = await history("s3");
  assert.equal(h.length, before.length + 2);
  assert.equal(h.at(-1).parts[0].text, "Hi!");
  const branches = (await call("GET", `/sessions/s3/messages/u2/branches`)).body.messages;
  assert.deepEqual(branches.map((m) => Boolean(m.metadata.stopped)), [true, false]);
});

test("two WebSocket clients on one session both receive the stream; bad frames get errors", async () => {
  const a = await w.webSocket(`${A}/sessions/s4/ws`);
  const b = await w.webSocket(`${A}/sessions/s4/ws`, { query: true });
  try {
    a.send(JSON.stringify({ type: "ping" }));
    assert.deepEqual(await collect(a, (f) => f.type === "pong"), [{ type: "pong" }]);
    a.send("not json");
    const [err] = await collect(a, (f) => f.type === "error");
    assert.equal(err.code, "invalid_request");
    assert.equal(err.sessionId, "s4");

    model.reply({ content: "one two three", pieces: ["one ", "two ", "three"], pieceDelayMs: 20 });
    // A turn ends with the user message, the reply, then a status frame.
    const gotA = collect(a, (f) => f.type === "status");
    const gotB = collect(b, (f) => f.type === "status");
    a.send(JSON.stringify({ type: "chat", message: user("w1", "count") }));
    for (const frames of [await gotA, await gotB]) {
      assert.ok(!frames.some((f) => f.type === "error"), JSON.stringify(frames));
      assert.deepEqual(frames.filter((f) => f.type === "delta").map((f) => f.text), ["one ", "two ", "three"]);
      assert.ok(frames.every((f) => f.sessionId === "s4"));
      assert.ok(frames.some((f) => f.type === "message" && f.message.id === "w1"));
      const reply = frames.find((f) => f.type === "message" && f.message.role === "assistant");
      assert.equal(reply.message.parts[0].text, "one two three");
      assert.ok(frames.indexOf(reply) > frames.findLastIndex((f) => f.type === "delta"));
    }
    // An append over HTTP reaches both sockets: the message, then a status frame with the
    // branch's token estimate (no compaction configured: no threshold).
    const httpA = collect(a, (f) => f.type === "status" && f.tokenEstimate > 0 && f.tokenThreshold === null);
    const httpB = collect(b, (f) => f.type === "status");
    await call("POST", "/sessions/s4/messages", { message: user("h1", "from http") });
    for (const frames of [await httpA, await httpB]) {
      assert.equal(frames.find((f) => f.type === "message").message.id, "h1");
    }
    b.send(JSON.stringify({ type: "history" }));
    const h = (await collect(b, (f) => f.type === "history")).at(-1);
    assert.deepEqual(h.messages.map((m) => m.id).slice(-1), ["h1"]);
  } finally {
    a.close();
    b.close();
  }
});

test("sockets need the token, and reconnect after the runtime restarts", async () => {
  await assert.rejects(w.webSocket(`${A}/sessions/s5/ws`, { auth: false }), /401/);
  let ws = await w.webSocket(`${A}/sessions/s5/ws`, { query: true });
  ws.send(JSON.stringify({ type: "append", message: user("p1", "persist me") }));
  await collect(ws, (f) => f.type === "message");
  ws.close();
  await w.restart();
  ws = await w.webSocket(`${A}/sessions/s5/ws`, { query: true });
  try {
    ws.send(JSON.stringify({ type: "history" }));
    const [h] = await collect(ws, (f) => f.type === "history");
    assert.deepEqual(h.messages.map((m) => m.id), ["p1"]);
  } finally {
    ws.close();
  }
});

test("a cancel frame stops the socket's running turn: what was shown is stored, with its message frame, no error", async () => {
  const ws = await w.webSocket(`${A}/sessions/s-cancel/ws`);
  try {
    model.reply({ content: "a b c d e f g h", pieces: ["a ", "b ", "c ", "d ", "e ", "f ", "g ", "h"], pieceDelayMs: 150 });
    const first = collect(ws, (f) => f.type === "delta");
    ws.send(JSON.stringify({ type: "chat", message: user("c1", "talk slowly") }));
    const before = await first;
    const ended = collect(ws, (f) => f.type === "message" && f.message.role === "assistant");
    ws.send(JSON.stringify({ type: "cancel" }));
    const frames = await ended;
    const reply = frames.at(-1).message;
    assert.equal(reply.metadata.stopped, true, JSON.stringify(frames));
    assert.ok(!frames.some((f) => f.type === "error"), "no error frame");
    const shown = [...before, ...frames].filter((f) => f.type === "delta").map((f) => f.text).join("");
    assert.ok(shown.length < "a b c d e f g h".length, "it stopped before the reply was complete");
    assert.equal(reply.parts[0].text, shown, "stored as far as it streamed");
    const idle = await collect(ws, (f) => f.type === "status" && f.phase === "idle");
    assert.ok(idle.length > 0);
    assert.deepEqual((await history("s-cancel")).map((m) => m.id)[0], "c1");
    // The socket stays usable: the next turn runs to the end, after the stopped reply.
    model.reply({ content: "done" });
    const next = collect(ws, (f) => f.type === "status");
    ws.send(JSON.stringify({ type: "chat", message: user("c2", "again"), parentId: reply.id }));
    assert.ok((await next).some((f) => f.type === "message" && f.message.role === "assistant"));
    assert.deepEqual((await history("s-cancel")).map((m) => m.id).slice(0, 3), ["c1", reply.id, "c2"]);
  } finally {
    ws.close();
  }
});

test("a socket's chat: its message echoed as pending at once, tool progress, then the stored reply", async () => {
  const ws = await w.webSocket(`${A}/sessions/s-progress/ws`);
  try {
    model.reply(
      { toolCalls: [{ id: "t1", name: "set_context", arguments: { label: "memory", content: "likes oolong" } }] },
      { content: "Noted.", pieceDelayMs: 5 },
    );
    const got = collect(ws, (f) => f.type === "status");
    ws.send(JSON.stringify({ type: "chat", message: user("p1", "remember oolong") }));
    const frames = await got;
    assert.deepEqual(frames[0], { type: "message", sessionId: "s-progress", message: user("p1", "remember oolong"), pending: true });
    const tools = frames.filter((f) => f.type === "tool");
    assert.deepEqual(tools.map((t) => t.state), ["input-available", "output-available"]);
    assert.equal(tools[0].toolName, "set_context");
    assert.deepEqual(tools[0].input, { label: "memory", content: "likes oolong" });
    assert.match(tools[1].output, /^Written to memory\./);
    const reply = frames.find((f) => f.type === "message" && f.message.role === "assistant");
    assert.equal(tools[0].messageId, reply.message.id);
    assert.ok(frames.indexOf(tools[1]) < frames.indexOf(reply));
    // The stored user message comes after, no longer pending.
    const stored = frames.find((f) => f.type === "message" && f.message.id === "p1" && !f.pending);
    assert.ok(stored && frames.indexOf(stored) > 0);
  } finally {
    ws.close();
  }
});
