// End-to-end: the tools of a remote MCP server (SESSION_CONFIG.tools.mcp) in the agent turn, in
// workerd, against a real MCP server built on the official SDK (./mcp-server.mjs: Streamable
// HTTP, stateful, event-stream answers) and the scripted model (./llm-server.mjs) calling them.
// The result reaches the model and is stored; the secret's header reaches the server; the
// allow-list filters; a slow tool is a tool error within timeoutMs, the turn answered; the tool
// list is kept between turns; a body naming another server reaches nothing; a stop while a
// tool runs ends the turn at once, the call stored with an error. Mirrors tests/it/mcp_client.rs.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";
import { start as startMcp } from "./mcp-server.mjs";

let w;
let model;
let crm;
let other;
let patient;
const TIMEOUT_MS = 1000;

before(async () => {
  model = await startModel();
  crm = await startMcp();
  other = await startMcp();
  patient = await startMcp();
  const config = {
    context: [{ label: "memory", kind: "writable", description: "Facts" }],
    tools: { mcp: [{ name: "crm", url: crm.url, secret: "CRM_MCP_TOKEN", allow: ["lookup_customer", "slow"], timeoutMs: TIMEOUT_MS },
      { name: "patient", url: patient.url, allow: ["slow"], timeoutMs: 20_000 }] },
  };
  w = await startWorker({
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      SESSION_CONFIG: JSON.stringify(config), CRM_MCP_TOKEN: "crm-s3cret",
    },
  });
});
after(async () => { await w?.stop(); await model?.close(); await crm?.close(); await other?.close(); await patient?.close(); });
beforeEach(() => { model.reset(); crm.reset(); other.reset(); patient.reset(); });

const A = "/agents/remote";
const call = (method, path, body) => w.json(method, `${A}${path}`, body);
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const toolNames = (req) => req.body.tools.map((t) => t.function.name);

test("a remote tool runs: its result reaches the model and is stored; the secret reaches the server", async () => {
  model.reply({ toolCalls: [{ id: "c1", name: "crm__lookup_customer", arguments: { id: "42" } }] }, { content: "That is Ada." });
  const r = await call("POST", "/sessions/s1/chat", { message: user("u1", "who is customer 42?") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const [part, text] = r.body.messages[0].parts;
  assert.equal(part.toolName, "crm__lookup_customer");
  assert.equal(part.state, "output-available");
  assert.equal(part.output, "Customer 42: Ada Lovelace");
  assert.equal(text.text, "That is Ada.");
  // The model was offered the allowed tools beside the session's own, and read the result.
  const offered = toolNames(model.requests[0]);
  for (const n of ["set_context", "crm__lookup_customer", "crm__slow"]) assert.ok(offered.includes(n), `${n} in ${offered}`);
  assert.ok(!offered.includes("crm__delete_everything") && !offered.includes("crm__echo"), `${offered}`);
  const result = model.requests[1].body.messages.at(-1);
  assert.deepEqual([result.role, result.tool_call_id, result.content], ["tool", "c1", "Customer 42: Ada Lovelace"]);
  // Stored in the tree.
  const stored = (await call("GET", "/sessions/s1/history")).body.messages;
  assert.equal(stored[1].parts[0].output, "Customer 42: Ada Lovelace");
  // The server ran it once; every request carried the secret, each after initialize its session.
  assert.deepEqual(crm.calls, [{ name: "lookup_customer", args: { id: "42" } }]);
  assert.ok(crm.requests.length >= 1);
  for (const q of crm.requests) {
    assert.equal(q.headers.authorization, "Bearer crm-s3cret");
    if (q.rpc !== "initialize") assert.ok(q.headers["mcp-session-id"], `${q.rpc} without a session`);
  }
  assert.equal(crm.requests.filter((q) => q.rpc === "tools/call").length, 1);
});

test("the tool list is kept between turns: a later turn's call is one request", async () => {
  model.reply({ toolCalls: [{ id: "c1", name: "crm__lookup_customer", arguments: { id: "7" } }] }, { content: "Done." });
  assert.equal((await call("POST", "/sessions/s2/chat", { message: user("u1", "first") })).status, 201);
  crm.reset();
  model.reply({ toolCalls: [{ id: "c2", name: "crm__lookup_customer", arguments: { id: "8" } }] }, { content: "Done again." });
  const r = await call("POST", "/sessions/s2/chat", { message: user("u2", "second") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.messages[0].parts[0].output, "Customer 8: Ada Lovelace");
  assert.deepEqual(crm.requests.map((q) => q.rpc), ["tools/call"]);
});

test("a slow tool is a tool error within timeoutMs; the turn is answered and the error stored", async () => {
  model.reply({ toolCalls: [{ id: "c1", name: "crm__slow", arguments: { ms: 4000 } }] }, { content: "It timed out." });
  const started = Date.now();
  const r = await call("POST", "/sessions/s3/chat", { message: user("u1", "be slow") });
  const took = Date.now() - started;
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const [part, text] = r.body.messages[0].parts;
  assert.equal(part.state, "output-error");
  assert.equal(part.errorText, `Error: MCP server crm: no answer within ${TIMEOUT_MS} ms`);
  assert.equal(text.text, "It timed out.");
  assert.ok(took < 3500, `the turn waited ${took} ms`);
  const result = model.requests[1].body.messages.at(-1);
  assert.equal(result.content, part.errorText, "the model read the error");
  const stored = (await call("GET", "/sessions/s3/history")).body.messages;
  assert.equal(stored[1].parts[0].errorText, part.errorText);
});

test("a stop while a remote tool runs ends the turn at once; the call is stored with an error", async () => {
  model.reply({ toolCalls: [{ id: "c1", name: "patient__slow", arguments: { ms: 5000 } }] }, { content: "never asked" });
  const started = Date.now();
  const turn = call("POST", "/sessions/s5/chat", { message: user("u1", "take your time") });
  while (patient.calls.length === 0) {
    assert.ok(Date.now() - started < 10_000, "the tool call never reached the server");
    await new Promise((r) => setTimeout(r, 20));
  }
  const stop = await call("POST", "/sessions/s5/chat/stop");
  assert.deepEqual([stop.status, stop.body], [200, { stopped: true }]);
  const r = await turn;
  const took = Date.now() - started;
  // The tool's 5 s and the server's 20 s timeout are not waited for (the tool's timer is, by
  // the test process, before it exits: keep it short).
  assert.ok(took < 4000, `the turn ended ${took} ms after it began`);
  assert.ok(r.status < 500, JSON.stringify(r.body));
  const stored = (await call("GET", "/sessions/s5/history")).body.messages;
  assert.equal(stored.length, 2, JSON.stringify(stored));
  const [part] = stored[1].parts;
  assert.deepEqual([part.toolName, part.state, part.errorText], ["patient__slow", "output-error",
    "Error: the turn was stopped before the tool answered"]);
  assert.equal(stored[1].metadata.stopped, true);
  assert.equal(model.requests.length, 1, "the model was not called again");
});

test("a tool outside the allow-list is never run; a body naming another server reaches nothing", async () => {
  model.reply({ toolCalls: [{ id: "c1", name: "crm__delete_everything", arguments: {} }] }, { content: "Not allowed." });
  const body = {
    message: user("u1", "delete it all"),
    mcp: [{ name: "evil", url: other.url }],
    tools: [{ name: "evil_tool", url: other.url, inputSchema: { type: "object" } }],
    config: { tools: { mcp: [{ name: "evil", url: other.url }] } },
  };
  const r = await call("POST", "/sessions/s4/chat", body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.messages[0].parts[0].state, "output-error");
  assert.deepEqual(crm.calls, []);
  assert.equal(other.requests.length, 0, "a URL from the request was reached");
  assert.ok(!toolNames(model.requests[0]).some((n) => n.startsWith("evil__")));
});
