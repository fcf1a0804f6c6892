// A remote MCP server for end-to-end tests and the bench, built on the official
// `@modelcontextprotocol/sdk` (McpServer + StreamableHTTPServerTransport, stateful: one session
// per `initialize`, answers as event streams, the SDK's default) on a node http server on
// 127.0.0.1 (a free port). The Worker in workerd reaches it through SESSION_CONFIG.tools.mcp.
// Tools: `lookup_customer {id}` (answers "Customer <id>: Ada Lovelace"), `slow {ms}` (answers
// after `ms` milliseconds), `echo {text}` (answers its text), `delete_everything` (for an
// allow-list to leave out). Every HTTP request's method, headers and JSON-RPC method are recorded.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

/**
 * @typedef {object} McpRequest
 * @property {string} method the HTTP method
 * @property {import("node:http").IncomingHttpHeaders} headers
 * @property {string|undefined} rpc the JSON-RPC method (undefined for a GET or DELETE)
 * @property {any} params the JSON-RPC params
 */
/**
 * @typedef {object} RemoteMcp
 * @property {string} url `http://127.0.0.1:PORT/mcp`
 * @property {McpRequest[]} requests every request received, oldest first
 * @property {{name: string, args: any}[]} calls every tool call run, oldest first
 * @property {() => void} reset forgets the recorded requests and calls
 * @property {() => Promise<void>} close stops the server (open connections too)
 */

/** A new McpServer with the tools above, recording their calls into `calls`. */
function tools(calls) {
  const server = new McpServer({ name: "crm", version: "1.0.0" });
  const text = (t) => ({ content: [{ type: "text", text: t }] });
  server.registerTool("lookup_customer", { description: "Finds a customer by id", inputSchema: { id: z.string() } }, async ({ id }) => {
    calls.push({ name: "lookup_customer", args: { id } });
    return text(`Customer ${id}: Ada Lovelace`);
  });
  server.registerTool("slow", { description: "Answers after ms milliseconds", inputSchema: { ms: z.number() } }, async ({ ms }) => {
    calls.push({ name: "slow", args: { ms } });
    await new Promise((r) => setTimeout(r, ms));
    return text(`slept ${ms} ms`);
  });
  server.registerTool("echo", { description: "Answers its text", inputSchema: { text: z.string() } }, async ({ text: t }) => {
    calls.push({ name: "echo", args: { text: t } });
    return text(t);
  });
  server.registerTool("delete_everything", { description: "Deletes everything" }, async () => {
    calls.push({ name: "delete_everything", args: {} });
    return text("deleted");
  });
  return server;
}

/** Starts the server. @returns {Promise<RemoteMcp>} */
export async function start() {
  /** @type {McpRequest[]} */
  const requests = [];
  const calls = [];
  /** @type {Map<string, StreamableHTTPServerTransport>} */
  const sessions = new Map();
  const srv = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const text = Buffer.concat(chunks).toString("utf8");
    let body;
    try { body = text ? JSON.parse(text) : undefined; } catch { body = undefined; }
    requests.push({ method: req.method, headers: req.headers, rpc: body?.method, params: body?.params });
    const sid = req.headers["mcp-session-id"];
    let transport = typeof sid === "string" ? sessions.get(sid) : undefined;
    if (!transport) {
      if (req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no such session" }, id: null }));
        return;
      }
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { sessions.set(id, t); },
      });
      t.onclose = () => { if (t.sessionId) sessions.delete(t.sessionId); };
      await tools(calls).connect(t);
      transport = t;
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = /** @type {import("node:net").AddressInfo} */ (srv.address());
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    calls,
    reset() { requests.length = 0; calls.length = 0; },
    async close() {
      for (const t of sessions.values()) await t.close().catch(() => {});
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    },
  };
}
