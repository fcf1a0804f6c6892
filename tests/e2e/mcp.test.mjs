// The MCP endpoint (POST /agents/{agent}/sessions/{sid}/mcp) driven by the official MCP
// TypeScript SDK client (Streamable HTTP transport) against the Worker in workerd: initialize,
// list tools, call set_context, session_search and memory_recall; a scoped token works (read:
// list only), a wrong one is refused.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startWorker } from "./harness.mjs";

const CONFIG = {
  context: [{ label: "notes", kind: "writable", description: "Notes about the user", maxTokens: 200 }],
  searchableHistory: "history",
  memory: {},
};
let w;

before(async () => {
  w = await startWorker({ vars: { SESSION_CONFIG: JSON.stringify(CONFIG), TOKEN_SECRET: "mcp-test-token-secret-mcp-test-secret" } });
});
after(async () => { await w?.stop(); });

/** An SDK client connected to session `sid` of agent `agent` with bearer `token`. */
async function connect(agent, sid, token) {
  const url = new URL(`/agents/${agent}/sessions/${sid}/mcp`, w.url);
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  const client = new Client({ name: "session-agent-e2e", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

async function mint(agent, body) {
  const r = await w.json("POST", `/agents/${agent}/tokens`, body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.token;
}

const text = (result) => result.content.map((c) => c.text).join("");

test("the SDK client initializes, lists the session's tools and calls them", async () => {
  await w.json("POST", "/agents/m1/sessions/old/messages", { message: { id: "o1", role: "user", parts: [{ type: "text", text: "We talked about the Lisbon trip" }] } });
  await w.json("POST", "/agents/m1/memories", { content: "The user is vegetarian", tags: ["food"] });
  const client = await connect("m1", "s1", "test-token");
  try {
    assert.equal(client.getServerVersion()?.name, "session-agent");
    assert.ok(client.getServerCapabilities()?.tools, "tools capability");
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    const http = await w.json("GET", "/agents/m1/sessions/s1/tools");
    assert.deepEqual(names, http.body.tools.map((t) => t.name), "the same tools as GET …/tools");
    for (const n of ["set_context", "session_search", "memory_recall"]) assert.ok(names.includes(n), `${n} in ${names}`);

    const set = await client.callTool({ name: "set_context", arguments: { label: "notes", content: "prefers window seats" } });
    assert.equal(set.isError, false, text(set));
    const block = await w.json("GET", "/agents/m1/sessions/s1/context/notes");
    assert.equal(block.body.content, "prefers window seats");

    const found = await client.callTool({ name: "session_search", arguments: { query: "Lisbon" } });
    assert.match(text(found), /Lisbon trip/);
    const recalled = await client.callTool({ name: "memory_recall", arguments: { query: "vegetarian" } });
    assert.match(text(recalled), /vegetarian/);

    const over = await client.callTool({ name: "set_context", arguments: { label: "notes", content: "word ".repeat(2000) } });
    assert.equal(over.isError, true);
    assert.match(text(over), /^Error:/);
    await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }), /unknown tool/);
    await client.ping();
  } finally {
    await client.close();
  }
});

test("scoped tokens: write calls, read only lists, another session's or a wrong token is refused", async () => {
  const write = await mint("m2", { scope: "write", ttlSeconds: 300, sessions: ["s1"] });
  const client = await connect("m2", "s1", write);
  const r = await client.callTool({ name: "set_context", arguments: { label: "notes", content: "from a scoped token" } });
  assert.equal(r.isError, false, text(r));
  await client.close();

  const read = await mint("m2", { scope: "read", ttlSeconds: 300 });
  const reader = await connect("m2", "s1", read);
  assert.ok((await reader.listTools()).tools.length > 0);
  await assert.rejects(reader.callTool({ name: "set_context", arguments: { label: "notes", content: "x" } }), /403|forbidden/);
  await reader.close();
  const notes = await w.json("GET", "/agents/m2/sessions/s1/context/notes");
  assert.equal(notes.body.content, "from a scoped token", "the read token changed nothing");

  await assert.rejects(connect("m2", "s2", write), /forbidden/, "a token for s1 does not open s2");
  await assert.rejects(connect("m2", "s1", "wrong-token"), /unauthorized|401/);
});
