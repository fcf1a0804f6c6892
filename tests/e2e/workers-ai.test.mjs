// End-to-end: LLM_PROVIDER=workers-ai in workerd, the `AI` binding played by a local stand-in
// that speaks Workers AI's documented formats (./ai-binding.mjs, ./ai-binding-worker.mjs): a
// streamed turn arrives in pieces; a function-calling model is offered the session's tools, calls
// one, and gets its result back as a `role: "tool"` message; a text-only model gets neither tools
// nor tool messages and still streams; embeddings through the binding make a search by meaning.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, eventually } from "./harness.mjs";
import { aiBinding } from "./ai-binding.mjs";

const TOOL_MODEL = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";
const TEXT_MODEL = "@cf/meta/llama-3.1-8b-instruct";
const CONFIG = { context: [{ label: "memory", kind: "writable", description: "Facts", maxTokens: 200 }] };

let ai;
let w;

before(async () => {
  ai = aiBinding();
  w = await startWorker({
    ai,
    vars: { LLM_PROVIDER: "workers-ai", LLM_MODEL: TOOL_MODEL, SESSION_CONFIG: JSON.stringify(CONFIG) },
  });
});
after(async () => { await w?.stop(); });

const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });

/** POSTs a chat turn on `worker` asking for server-sent events; returns the parsed events. */
async function chatStream(worker, path, body) {
  const r = await worker.fetch(path, {
    method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify(body),
  });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.match(r.headers.get("content-type") ?? "", /^text\/event-stream/);
  return text.split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, "")).map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
}

test("a streamed turn: the binding is asked for a stream and its pieces arrive as deltas", async () => {
  const from = ai.runs.length;
  ai.reply({ response: "You like green tea.", pieces: ["You ", "like ", "green tea."], usage: { prompt_tokens: 30, completion_tokens: 6 } });
  const events = await chatStream(w, "/agents/wai/sessions/s1/chat", { message: user("u1", "what do I like?") });
  assert.deepEqual(events.filter((e) => e.type === "delta").map((d) => d.text), ["You ", "like ", "green tea."]);
  const done = events.find((e) => e.type === "message");
  assert.deepEqual(done.message.parts, [{ type: "text", text: "You like green tea." }]);
  assert.equal(events.at(-1), "[DONE]");
  const run = ai.runs[from];
  assert.equal(run.model, TOOL_MODEL);
  assert.equal(run.inputs.stream, true);
  const info = (await w.json("GET", "/agents/wai/sessions/s1")).body;
  assert.equal(info.inputTokens, 30);
  assert.equal(info.outputTokens, 6);
});

test("a function-calling model calls a server tool and answers from its result, given back as a tool message", async () => {
  const from = ai.runs.length;
  ai.reply(
    { toolCalls: [{ name: "set_context", arguments: { label: "memory", content: "likes green tea" } }] },
    { response: "Noted, you like green tea." },
  );
  const events = await chatStream(w, "/agents/wai/sessions/s2/chat", { message: user("u1", "remember that I like green tea") });
  const done = events.find((e) => e.type === "message");
  const [toolPart, textPart] = done.message.parts;
  assert.equal(toolPart.type, "dynamic-tool");
  assert.equal(toolPart.toolName, "set_context");
  assert.equal(toolPart.state, "output-available");
  assert.match(toolPart.output, /^Written to memory\./);
  assert.deepEqual(textPart, { type: "text", text: "Noted, you like green tea." });
  assert.equal((await w.json("GET", "/agents/wai/sessions/s2/context/memory")).body.content, "likes green tea");

  const [first, second] = ai.runs.slice(from);
  // The tools in the documented shape: {name, description, parameters}.
  const offered = first.inputs.tools.find((t) => t.name === "set_context");
  assert.ok(offered, JSON.stringify(first.inputs.tools));
  assert.equal(typeof offered.description, "string");
  assert.equal(offered.parameters.type, "object");
  // The second run carries the call and its result as a tool message, not as user text.
  const sent = second.inputs.messages;
  const call = sent.at(-2);
  assert.equal(call.role, "assistant");
  assert.equal(call.tool_calls[0].function.name, "set_context");
  assert.deepEqual(JSON.parse(call.tool_calls[0].function.arguments), { label: "memory", content: "likes green tea" });
  const result = sent.at(-1);
  assert.equal(result.role, "tool");
  assert.equal(result.name, "set_context");
  assert.match(result.tool_call_id, /^[a-z0-9]{9}$/);
  assert.equal(result.tool_call_id, call.tool_calls[0].id);
  assert.match(result.content, /^Written to memory\./);
  assert.ok(!sent.some((m) => m.role === "user" && /returned:/.test(m.content)), "no tool result as user text");
});

test("a model that fails is a 503 llm_unavailable, and nothing is stored", async () => {
  ai.reply({ error: "AiError: model overloaded" });
  const r = await w.json("POST", "/agents/wai/sessions/s3/chat", { message: user("u1", "hi") });
  assert.equal(r.status, 503, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "llm_unavailable");
  assert.doesNotMatch(JSON.stringify(r.body), /overloaded/);
  assert.deepEqual((await w.json("GET", "/agents/wai/sessions/s3/history")).body.messages ?? [], []);
});

test("a text-only model gets no tools and streams; embeddings through the binding find by meaning", async () => {
  const text = aiBinding();
  const t = await startWorker({
    ai: text,
    vars: {
      LLM_PROVIDER: "workers-ai", LLM_MODEL: TEXT_MODEL, SESSION_CONFIG: JSON.stringify({ ...CONFIG, memory: true }),
      EMBEDDINGS_PROVIDER: "workers-ai", EMBEDDINGS_MODEL: "@cf/baai/bge-small-en-v1.5",
    },
  });
  try {
    text.reply({ response: "Hello there, friend." }, { response: JSON.stringify({ facts: [] }) });
    const events = await chatStream(t, "/agents/plain/sessions/s1/chat", { message: user("u1", "hi") });
    assert.deepEqual(events.filter((e) => e.type === "delta").map((d) => d.text), ["Hello ", "there, ", "friend."]);
    const run = text.runs[0];
    assert.equal(run.model, TEXT_MODEL);
    assert.equal(run.inputs.stream, true);
    assert.equal(run.inputs.tools, undefined);
    assert.ok(run.inputs.messages.every((m) => Object.keys(m).sort().join() === "content,role"), JSON.stringify(run.inputs.messages));

    const stored = await t.json("POST", "/agents/plain/memories", { content: "The user rides a red bicycle." });
    assert.equal(stored.status, 201, JSON.stringify(stored.body));
    await eventually("the memory's embedding", () =>
      text.embeddingRuns.some((r) => r.inputs.text.includes("The user rides a red bicycle.")), 10_000);
    assert.equal(text.embeddingRuns.at(-1).model, "@cf/baai/bge-small-en-v1.5");
    const hit = await eventually("a semantic hit", async () =>
      (await t.json("GET", "/agents/plain/memories/search?q=red%20bicycle")).body.results
        .find((h) => h.signals.semantic !== null), 10_000);
    assert.equal(hit.memory.id, stored.body.id);
  } finally {
    await t.stop();
  }
});
