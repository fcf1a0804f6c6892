// The AI SDK's own chat client against the running Worker: `useChat` is a thin wrapper over the
// `ai` package's AbstractChat, which talks through DefaultChatTransport (POST of
// `{id, messages, trigger, messageId}`, the UI message stream back). Here the same AbstractChat
// runs in Node with a plain array as its state, as the framework bindings give it: submit and
// stream (seen mid-way), a second turn with the branch as the client holds it, regenerate as a
// sibling, a client tool answered with addToolOutput and continued automatically inside the same
// message, an edit refused, stop keeping what was shown, a model failure after the start, and
// readUIMessageStream over the raw stream.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls, readUIMessageStream } from "ai";
import { Chat } from "./ai-chat.mjs";
import { startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

let w;
let model;
const A = "/agents/sdk";

before(async () => {
  model = await startModel();
  w = await startWorker({ vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model" } });
});
after(async () => { await w?.stop(); await model?.close(); });
beforeEach(() => model.reset());

/** A chat of session `sid` through DefaultChatTransport, as `useChat({transport})` sets it up. */
function chatOf(sid, { body, onToolCall, sendAutomaticallyWhen, headers } = {}) {
  const transport = new DefaultChatTransport({
    api: `${w.url.origin}${A}/sessions/${sid}/chat`,
    headers: headers ?? { authorization: "Bearer test-token" },
    ...(body ? { body } : {}),
  });
  return new Chat({ id: sid, transport, onToolCall, sendAutomaticallyWhen });
}

const history = async (sid) => (await w.json("GET", `${A}/sessions/${sid}/history`)).body.messages;

/** What the AI SDK changes in a message it streamed, taken out of both sides before comparing. */
function comparable(m) {
  const parts = m.parts.filter((p) => p.type !== "step-start").map((p) => {
    const { state, providerMetadata, providerExecuted, id, ...rest } = p;
    return p.type === "text" || p.type === "reasoning" ? rest : { ...rest, state, ...(id !== undefined ? { id } : {}) };
  });
  // As it goes over the wire: fields the SDK leaves undefined are not there.
  return JSON.parse(JSON.stringify({ id: m.id, role: m.role, parts }));
}

test("submit: the reply streams into the client's message (seen mid-way) and is the stored one", async () => {
  model.reply({ reasoning: "They greet me. ", content: "Hello there, nice to meet you.", pieceDelayMs: 30 });
  const chat = chatOf("s1");
  await chat.sendMessage({ text: "hello" });
  assert.equal(chat.status, "ready", String(chat.error));
  const [userMsg, reply] = chat.messages;
  assert.equal(userMsg.role, "user");
  assert.equal(reply.role, "assistant");
  // Mid-way: an earlier write held part of the text.
  const texts = chat.view.writes.map((m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join(""));
  assert.ok(texts.some((t) => t.length > 0 && t.length < "Hello there, nice to meet you.".length), JSON.stringify(texts));
  // The stored branch is what the client holds: same ids (start carried the stored id), same parts.
  const stored = await history("s1");
  assert.deepEqual(stored.map((m) => m.id), [userMsg.id, reply.id]);
  assert.deepEqual(comparable(reply), comparable(stored[1]));
  assert.deepEqual(reply.parts.filter((p) => p.type !== "step-start").map((p) => p.type), ["reasoning", "text"]);
  assert.equal(reply.parts.find((p) => p.type === "reasoning").text, "They greet me. ");
  // finish carried the usage as message metadata.
  assert.deepEqual(reply.metadata.usage, stored[1].metadata.usage);
  assert.equal(reply.metadata.usage.outputTokens, 20);

  // A second turn sends the whole branch as the client holds it (no createdAt, step-start parts,
  // part states): accepted.
  model.reply({ content: "Still here." });
  await chat.sendMessage({ text: "are you there?" });
  assert.equal(chat.status, "ready", String(chat.error));
  assert.equal(chat.messages.length, 4);
  assert.deepEqual((await history("s1")).map((m) => m.id), chat.messages.map((m) => m.id));
  // The model read the stored branch: user, assistant, user.
  const sent = model.requests.at(-1).body.messages.filter((m) => m.role !== "system");
  assert.deepEqual(sent.map((m) => m.role), ["user", "assistant", "user"]);
});

test("regenerate answers again as a sibling under the same user message", async () => {
  model.reply({ content: "First answer." });
  const chat = chatOf("s2");
  await chat.sendMessage({ text: "question" });
  const first = chat.messages[1];
  model.reply({ content: "Second answer." });
  await chat.regenerate();
  assert.equal(chat.status, "ready", String(chat.error));
  assert.equal(chat.messages.length, 2);
  const second = chat.messages[1];
  assert.notEqual(second.id, first.id);
  assert.equal(second.parts.find((p) => p.type === "text").text, "Second answer.");
  const userId = chat.messages[0].id;
  const branches = (await w.json("GET", `${A}/sessions/s2/messages/${userId}/branches`)).body.messages;
  assert.deepEqual(branches.map((m) => m.id).sort(), [first.id, second.id].sort());
  assert.deepEqual((await history("s2")).map((m) => m.id), [userId, second.id]);
});

test("a client tool: onToolCall + addToolOutput, continued automatically inside the same message", async () => {
  const tools = [{ name: "get_location", description: "Where the user is", inputSchema: { type: "object", properties: {} } }];
  model.reply({ toolCalls: [{ id: "loc1", name: "get_location", arguments: {} }] }, { content: "You are in Lisbon." });
  const seen = [];
  const chat = chatOf("s3", {
    body: { tools },
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      seen.push(toolCall.toolName);
      chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { city: "Lisbon" } });
    },
  });
  await chat.sendMessage({ text: "where am I?" });
  // The automatic resend runs after sendMessage's own response: wait for it.
  const deadline = Date.now() + 10_000;
  while ((chat.status !== "ready" || model.requests.length < 2) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(chat.status, "ready", String(chat.error));
  assert.deepEqual(seen, ["get_location"], "only the client's tool reached onToolCall");
  assert.equal(chat.messages.length, 2, "one assistant message, extended");
  const reply = chat.messages[1];
  const stored = await history("s3");
  assert.equal(stored.length, 2);
  assert.equal(stored[1].id, reply.id);
  assert.deepEqual(stored[1].parts, [
    { type: "dynamic-tool", toolName: "get_location", toolCallId: "loc1", state: "output-available", input: {}, output: { city: "Lisbon" } },
    { type: "text", text: "You are in Lisbon." },
  ]);
  assert.deepEqual(comparable(reply), comparable(stored[1]));
});

test("a server tool streams as a provider-executed call and never reaches onToolCall", async () => {
  model.reply({ toolCalls: [{ id: "c1", name: "session_search", arguments: { query: "anything" } }] }, { content: "Nothing found." });
  const seen = [];
  const chat = chatOf("s4", { onToolCall: ({ toolCall }) => seen.push(toolCall.toolName) });
  await chat.sendMessage({ text: "search" });
  assert.equal(chat.status, "ready", String(chat.error));
  assert.deepEqual(seen, []);
  const tool = chat.messages[1].parts.find((p) => p.type === "dynamic-tool");
  assert.equal(tool.state, "output-available");
  assert.equal(tool.providerExecuted, true);
  assert.deepEqual(comparable(chat.messages[1]), comparable((await history("s4"))[1]));
});

test("an edit of an earlier message (same id) is refused and changes nothing", async () => {
  model.reply({ content: "Answer." });
  const chat = chatOf("s5");
  await chat.sendMessage({ text: "original" });
  const before = await history("s5");
  const calls = model.requests.length;
  await chat.sendMessage({ text: "edited", messageId: chat.messages[0].id });
  assert.equal(chat.status, "error");
  assert.match(String(chat.error?.message), /not_a_prefix/);
  assert.deepEqual(await history("s5"), before);
  assert.equal(model.requests.length, calls, "the model was not called");
});

test("stop aborts the stream and keeps what was shown; the same chat goes on", async () => {
  // Slow but finite: without the abort the reply would be complete and stored within ~1 s.
  model.reply({ content: "This would finish in a second if nobody stopped it.", pieceDelayMs: 100 });
  const chat = chatOf("s6");
  const sending = chat.sendMessage({ text: "long one" });
  const deadline = Date.now() + 10_000;
  while (!chat.view.writes.some((m) => m.parts.some((p) => p.type === "text" && p.text)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(chat.view.writes.length > 0, "the first piece arrived before stop");
  await chat.stop();
  await sending;
  // The turn notices the closed stream at its next write; wait past the model's end, then look.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(model.requests.length, 1);
  const stored = await history("s6");
  assert.equal(stored.length, 2);
  assert.equal(stored[1].metadata.stopped, true);
  assert.ok(!stored[1].parts[0].text.includes("stopped it."), "not the whole reply");
  model.reply({ content: "Short one." });
  await chat.sendMessage({ text: "again" });
  assert.equal(chat.status, "ready", String(chat.error));
  assert.equal((await history("s6")).length, 4);
});

test("a model failure after the stream started is an error chunk; nothing is stored", async () => {
  model.reply({ status: 500 });
  const chat = chatOf("s7");
  await chat.sendMessage({ text: "hello" });
  assert.equal(chat.status, "error");
  assert.match(String(chat.error?.message), /llm_unavailable/);
  assert.deepEqual(await history("s7"), []);
});

test("readUIMessageStream over DefaultChatTransport's stream builds the stored message", async () => {
  model.reply({ reasoning: "Thinking. ", content: "Direct answer." });
  const transport = new DefaultChatTransport({
    api: `${w.url.origin}${A}/sessions/s8/chat`, headers: { authorization: "Bearer test-token" },
  });
  const userMsg = { id: "u-direct", role: "user", parts: [{ type: "text", text: "hi" }] };
  const stream = await transport.sendMessages({
    chatId: "s8", messages: [userMsg], trigger: "submit-message", messageId: undefined, abortSignal: undefined,
  });
  let last;
  for await (const m of readUIMessageStream({ stream })) last = m;
  const stored = await history("s8");
  assert.deepEqual(stored.map((m) => m.id), ["u-direct", last.id]);
  assert.deepEqual(comparable(last), comparable(stored[1]));
  assert.deepEqual(last.metadata, stored[1].metadata);
});

test("the response carries the UI message stream header; a bad body is a JSON 400", async () => {
  model.reply({ content: "ok" });
  const r = await w.fetch(`${A}/sessions/s9/chat`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ id: "s9", messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "x" }] }], trigger: "submit-message" }),
  });
  assert.equal(r.headers.get("x-vercel-ai-ui-message-stream"), "v1");
  assert.match(r.headers.get("content-type"), /^text\/event-stream/);
  const text = await r.text();
  assert.match(text, /^data: \{"type":"start","messageId":"[^"]+"\}\n\n/);
  assert.ok(text.endsWith("data: [DONE]\n\n"));
  const bad = await w.fetch(`${A}/sessions/s9/chat`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [], trigger: "submit-message" }),
  });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.code, "invalid_request");
});
