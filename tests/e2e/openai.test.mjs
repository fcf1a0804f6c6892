// End-to-end: the OpenAI-compatible face driven by the official `openai` package (7.60.0) in
// workerd, against the scripted model of tests/e2e/llm-server.mjs. An app that changes its
// baseURL to …/agents/{agent}/v1 and its key to our token gets history (the stored tree),
// client tools, errors in OpenAI's shape (its APIError classes), and the Responses API with
// previous_response_id chains, branches, read back, input items, delete and store: false.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

let w;
let model;
const CONFIG = { context: [{ label: "memory", kind: "writable", description: "Facts", maxTokens: 200 }], chat: { models: ["small-model"] } };
const A = "/agents/oai";

before(async () => {
  model = await startModel();
  w = await startWorker({
    vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model", SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: "s".repeat(32) },
  });
});
after(async () => { await w?.stop(); await model?.close(); });
beforeEach(() => model.reset());

/** The official client pointed at the agent, with `key` (the admin token by default). */
const client = (key = "test-token", headers = {}) =>
  new OpenAI({ baseURL: new URL(`${A}/v1`, w.url).href, apiKey: key, maxRetries: 0, defaultHeaders: headers });
const call = (method, path, body) => w.json(method, `${A}${path}`, body);
const history = async (sid) => (await call("GET", `/sessions/${sid}/history?raw=1`)).body.messages;
const texts = (messages) => messages.map((m) => `${m.role}:${m.parts.filter((p) => p.type === "text").map((p) => p.text).join("")}`);
/** The last chat request the model got: its messages as role:text. */
const seen = () => model.requests.at(-1).body.messages.map((m) => `${m.role}:${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`);

test("GET /v1/models names the configured models; a model chat.models names answers, any other is ignored", async () => {
  const list = await client().models.list();
  assert.deepEqual(list.data.map((m) => [m.id, m.object]), [["test-model", "model"], ["small-model", "model"]]);
  const oai = client("test-token", { "x-session-id": "models" });
  model.reply({ content: "Small." });
  const small = await oai.chat.completions.create({ model: "small-model", messages: [{ role: "user", content: "hi" }] });
  assert.deepEqual([small.model, model.requests.at(-1).body.model], ["small-model", "small-model"]);
  model.reply({ content: "Configured." });
  const other = await oai.responses.create({ model: "gpt-4o", input: "hi again", conversation: "models" });
  assert.deepEqual([other.model, model.requests.at(-1).body.model], ["test-model", "test-model"]);
  const stored = await history("models");
  assert.deepEqual(stored.filter((m) => m.role === "assistant").map((m) => m.metadata.model), ["small-model", "test-model"]);
});

test("chat completions: whole, the history kept, a resent prefix, a sibling branch, a per-call system message", async () => {
  const oai = client("test-token", { "x-session-id": "c1" });
  model.reply({ content: "Hello Ada." });
  const first = await oai.chat.completions.create({ model: "anything", messages: [{ role: "user", content: "I am Ada" }] });
  assert.equal(first.object, "chat.completion");
  assert.equal(first.choices[0].message.content, "Hello Ada.");
  assert.equal(first.choices[0].finish_reason, "stop");
  assert.equal(first.usage.prompt_tokens, 100);
  assert.equal(first.usage.total_tokens, 120);
  let stored = await history("c1");
  assert.deepEqual(texts(stored), ["user:I am Ada", "assistant:Hello Ada."]);
  assert.equal(first.id, stored[1].id, "a completion's id is its stored message's");

  // The whole conversation sent back, with a system message for this call only.
  model.reply({ content: "You are Ada." });
  const messages = [
    { role: "system", content: "Answer in one line." },
    { role: "user", content: "I am Ada" },
    { role: "assistant", content: "Hello Ada." },
    { role: "user", content: "Who am I?" },
  ];
  const second = await oai.chat.completions.create({ model: "m", messages });
  assert.equal(second.choices[0].message.content, "You are Ada.");
  const system = model.requests.at(-1).body.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n");
  assert.match(system, /Answer in one line\./, "the client's system message reaches the model");
  assert.deepEqual(seen().filter((m) => !m.startsWith("system")), ["user:I am Ada", "assistant:Hello Ada.", "user:Who am I?"]);
  stored = await history("c1");
  assert.deepEqual(texts(stored), ["user:I am Ada", "assistant:Hello Ada.", "user:Who am I?", "assistant:You are Ada."]);
  const prompt = (await call("GET", "/sessions/c1/prompt")).body.prompt ?? "";
  assert.doesNotMatch(prompt, /one line/, "the per-call system message is never frozen");

  // Only the new message: the server holds the history.
  model.reply({ content: "Tea." });
  await oai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "What do I drink?" }] });
  assert.deepEqual(seen().filter((m) => !m.startsWith("system")).slice(0, 4), ["user:I am Ada", "assistant:Hello Ada.", "user:Who am I?", "assistant:You are Ada."]);
  assert.equal((await history("c1")).length, 6);

  // An edited second question: a sibling branch under the first answer.
  model.reply({ content: "Still Ada." });
  await oai.chat.completions.create({ model: "m", messages: [
    { role: "user", content: "I am Ada" }, { role: "assistant", content: "Hello Ada." }, { role: "user", content: "Really, who am I?" },
  ] });
  stored = await history("c1");
  assert.deepEqual(texts(stored), ["user:I am Ada", "assistant:Hello Ada.", "user:Really, who am I?", "assistant:Still Ada."]);
  const children = (await call("GET", `/sessions/c1/messages/${stored[1].id}/branches`)).body.messages;
  assert.deepEqual(texts(children), ["user:Who am I?", "user:Really, who am I?"], "the edit is a sibling of the question it replaces");
});

test("chat completions stream: chunks the package parses, usage chunk, [DONE]; session from metadata and user", async () => {
  const oai = client();
  model.reply({ content: "Hi there Bob.", pieces: ["Hi ", "there ", "Bob."] });
  const stream = await oai.chat.completions.create({
    model: "m", stream: true, stream_options: { include_usage: true }, metadata: { session_id: "s-meta" },
    messages: [{ role: "user", content: "hello" }],
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.every((c) => c.object === "chat.completion.chunk"));
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""), "Hi there Bob.");
  assert.equal(chunks.at(-2).choices[0].finish_reason, "stop");
  assert.deepEqual(chunks.at(-1).choices, []);
  assert.equal(chunks.at(-1).usage.completion_tokens, 20);
  const stored = await history("s-meta");
  assert.deepEqual(texts(stored), ["user:hello", "assistant:Hi there Bob."]);
  assert.equal(chunks[0].id, stored[1].id);

  // The SDK's stream helper assembles the same reply; `user` names the session.
  model.reply({ content: "Again." });
  const runner = oai.chat.completions.stream({ model: "m", user: "s-user", messages: [{ role: "user", content: "hi" }] });
  const done = await runner.finalChatCompletion();
  assert.equal(done.choices[0].message.content, "Again.");
  assert.deepEqual(texts(await history("s-user")), ["user:hi", "assistant:Again."]);
});

test("chat completions: the client's own tools round trip; the agent's tools never show", async () => {
  const oai = client("test-token", { "x-session-id": "tools" });
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  model.reply(
    { toolCalls: [{ id: "srv1", name: "set_context", arguments: { label: "memory", content: "asks about Paris" } }] },
    { toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] },
  );
  const asked = [{ role: "user", content: "Weather in Paris?" }];
  const first = await oai.chat.completions.create({ model: "m", messages: asked, tools });
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const calls = first.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]), [["call_1", "get_weather", { city: "Paris" }]]);
  assert.equal((await call("GET", "/sessions/tools/context/memory")).body.content, "asks about Paris", "the agent's own tool ran inside");

  model.reply({ content: "Sunny in Paris." });
  const second = await oai.chat.completions.create({ model: "m", tools, messages: [
    ...asked, first.choices[0].message, { role: "tool", tool_call_id: "call_1", content: "sunny, 24C" },
  ] });
  assert.equal(second.choices[0].message.content, "Sunny in Paris.");
  const last = model.requests.at(-1).body.messages;
  assert.ok(last.some((m) => m.role === "tool" && m.tool_call_id === "call_1" && /sunny, 24C/.test(m.content)), "the model reads the client's result");
  const stored = await history("tools");
  assert.equal(stored.length, 3);
  const part = stored[1].parts.find((p) => p.toolCallId === "call_1");
  assert.equal(part.state, "output-available");
  assert.equal(part.output, "sunny, 24C");

  // Streamed: the call comes as tool_calls deltas the package assembles.
  model.reply({ toolCalls: [{ id: "call_2", name: "get_weather", arguments: { city: "Oslo" } }] });
  const runner = oai.chat.completions.stream({ model: "m", tools, messages: [{ role: "user", content: "And Oslo?" }] });
  const done = await runner.finalChatCompletion();
  assert.equal(done.choices[0].finish_reason, "tool_calls");
  assert.equal(done.choices[0].message.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(done.choices[0].message.tool_calls[0].function.arguments), { city: "Oslo" });
});

test("errors are OpenAI's shape and the package's classes; nothing is stored", async () => {
  const oai = client("test-token", { "x-session-id": "errs" });
  const refused = async (p, Class, status) => {
    const e = await p.then(() => null, (e) => e);
    assert.ok(e instanceof Class, `expected ${Class.name}, got ${e}`);
    assert.equal(e.status, status);
    assert.equal(typeof e.error.message, "string");
    assert.ok("param" in e.error && "type" in e.error && "code" in e.error, JSON.stringify(e.error));
    return e;
  };
  let e = await refused(oai.chat.completions.create({ model: "m", messages: [] }), OpenAI.BadRequestError, 400);
  assert.equal(e.error.type, "invalid_request_error");
  assert.equal(e.error.param, "messages");
  e = await refused(oai.chat.completions.create({ model: "m", messages: [{ role: "robot", content: "x" }] }), OpenAI.BadRequestError, 400);
  assert.equal(e.error.param, "messages[0].role");
  await refused(oai.chat.completions.create({ model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }), OpenAI.BadRequestError, 400);
  await refused(oai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search" }] }), OpenAI.BadRequestError, 400);
  await refused(client("wrong").chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }), OpenAI.AuthenticationError, 401);
  // A conversation that is not what the session holds.
  model.reply({ content: "ok" });
  await oai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "first" }] });
  e = await refused(oai.chat.completions.create({ model: "m", messages: [
    { role: "user", content: "not first" }, { role: "assistant", content: "ok" }, { role: "user", content: "next" },
  ] }), OpenAI.ConflictError, 409);
  assert.equal(e.error.param, "messages[0]");
  // A model that fails: 503, nothing stored.
  model.reply({ status: 500 });
  await refused(oai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "boom" }] }), OpenAI.InternalServerError, 503);
  assert.deepEqual(texts(await history("errs")), ["user:first", "assistant:ok"]);
  // A read-only scoped token may not run a turn.
  const token = (await call("POST", "/tokens", { scope: "read", ttlSeconds: 600 })).body.token;
  await refused(client(token).chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }), OpenAI.PermissionDeniedError, 403);
  // A token limited to a session may not name another.
  const limited = (await call("POST", "/tokens", { scope: "write", ttlSeconds: 600, sessions: ["mine"] })).body.token;
  await refused(client(limited, { "x-session-id": "theirs" }).chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }), OpenAI.PermissionDeniedError, 403);
  model.reply({ content: "yours" });
  const ok = await client(limited, { "x-session-id": "mine" }).chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
  assert.equal(ok.choices[0].message.content, "yours");
  assert.equal((await call("GET", "/sessions/theirs/history")).status, 200);
  assert.deepEqual((await history("theirs")), []);
});

test("responses: a previous_response_id chain, a branch, read back, input items, delete", async () => {
  const oai = client();
  model.reply({ content: "Hi Ada." });
  const r1 = await oai.responses.create({ model: "m", input: "I am Ada", instructions: "Be brief." });
  assert.equal(r1.object, "response");
  assert.equal(r1.status, "completed");
  assert.equal(r1.output_text, "Hi Ada.");
  assert.equal(r1.usage.input_tokens, 100);
  const sid = r1.conversation.id;
  const system = model.requests.at(-1).body.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n");
  assert.match(system, /Be brief\./, "instructions reach the model, for this call only");
  model.reply({ content: "You are Ada." });
  const r2 = await oai.responses.create({ model: "m", input: "Who am I?", previous_response_id: r1.id });
  assert.equal(r2.previous_response_id, r1.id);
  assert.equal(r2.conversation.id, sid);
  assert.deepEqual(seen().filter((m) => !m.startsWith("system")), ["user:I am Ada", "assistant:Hi Ada.", "user:Who am I?"]);
  // From the older response again: a sibling branch.
  model.reply({ content: "Ada, still." });
  const r3 = await oai.responses.create({ model: "m", input: [{ role: "user", content: "My name?" }], previous_response_id: r1.id });
  assert.deepEqual(seen().filter((m) => !m.startsWith("system")), ["user:I am Ada", "assistant:Hi Ada.", "user:My name?"]);
  const children = (await call("GET", `/sessions/${sid}/messages/${r1.id}/branches`)).body.messages;
  assert.deepEqual(texts(children), ["user:Who am I?", "user:My name?"]);

  // Read back, and the items that led to it (newest first; asc; pages).
  const got = await oai.responses.retrieve(r2.id);
  assert.equal(got.output_text, "You are Ada.");
  assert.equal(got.previous_response_id, r1.id);
  const items = [];
  for await (const item of oai.responses.inputItems.list(r2.id, { limit: 1 })) items.push(item);
  assert.deepEqual(items.map((i) => i.type + ":" + (i.content?.[0]?.text ?? "")), ["message:Who am I?", "message:Hi Ada.", "message:I am Ada"]);
  const asc = await oai.responses.inputItems.list(r2.id, { order: "asc" });
  assert.equal(asc.data[0].content[0].text, "I am Ada");

  // A conversation by id continues its newest branch.
  model.reply({ content: "Noted." });
  const r4 = await oai.responses.create({ model: "m", input: "I like tea", conversation: sid });
  assert.deepEqual(seen().filter((m) => !m.startsWith("system")).slice(0, 3), ["user:I am Ada", "assistant:Hi Ada.", "user:My name?"]);
  assert.equal(r4.conversation.id, sid);

  // Delete: the message goes as DELETE …/messages/{mid} does.
  const before = (await history(sid)).length;
  const deleted = await w.json("DELETE", `${A}/v1/responses/${r4.id}`);
  assert.deepEqual(deleted.body, { id: r4.id, object: "response", deleted: true });
  assert.equal((await history(sid)).length, before - 1);
  const gone = await oai.responses.retrieve(r4.id).then(() => null, (e) => e);
  assert.ok(gone instanceof OpenAI.NotFoundError);
  assert.equal(gone.error.type, "not_found_error");
});

test("responses: store false stores nothing; function tools round trip; the stream's events", async () => {
  const oai = client();
  model.reply({ content: "Kept nowhere." });
  const r = await oai.responses.create({ model: "m", input: "secret", store: false, conversation: "nostore" });
  assert.equal(r.output_text, "Kept nowhere.");
  assert.deepEqual(await history("nostore"), []);
  assert.ok((await oai.responses.retrieve(r.id).then(() => null, (e) => e)) instanceof OpenAI.NotFoundError);

  const tools = [{ type: "function", name: "lookup", description: "Look up", parameters: { type: "object", properties: { q: { type: "string" } } } }];
  model.reply({ toolCalls: [{ id: "fc1", name: "lookup", arguments: { q: "x" } }] });
  const asked = await oai.responses.create({ model: "m", input: "look x up", tools });
  const call = asked.output.find((o) => o.type === "function_call");
  assert.deepEqual([call.call_id, call.name, JSON.parse(call.arguments)], ["fc1", "lookup", { q: "x" }]);
  model.reply({ content: "x is 42." });
  const answered = await oai.responses.create({ model: "m", previous_response_id: asked.id, tools,
    input: [{ type: "function_call_output", call_id: "fc1", output: "42" }] });
  assert.equal(answered.output_text, "x is 42.");
  assert.ok(model.requests.at(-1).body.messages.some((m) => m.role === "tool" && m.content.includes("42")));

  model.reply({ content: "Streamed reply.", pieces: ["Streamed ", "reply."] });
  const stream = await oai.responses.create({ model: "m", input: "stream it", stream: true, conversation: "rs" });
  const events = [];
  for await (const e of stream) events.push(e);
  const kinds = events.map((e) => e.type);
  assert.deepEqual(kinds.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
  assert.equal(kinds.at(-1), "response.completed");
  assert.equal(events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join(""), "Streamed reply.");
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const done = events.at(-1).response;
  assert.equal(done.output[0].content[0].text, "Streamed reply.");
  assert.equal(done.id, (await history("rs"))[1].id);
  // The SDK's stream helper agrees.
  model.reply({ content: "Helper." });
  const final = await oai.responses.stream({ model: "m", input: "again", conversation: "rs" }).finalResponse();
  assert.equal(final.output_text, "Helper.");
});
