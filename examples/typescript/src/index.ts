/**
 * A TypeScript Worker with session-agent inside, from the npm package @session-agent/worker:
 * the wasm, its JS glue and the console come from node_modules, so no Rust toolchain is needed
 * to develop or deploy it.
 *
 *   GET  /hello                    answered by this Worker's own code
 *   POST /notes?user=ada           body: plain text. Appends it as a user message to ada's
 *                                  session "notes" through the Durable Object binding, answers
 *                                  {messages: [...]}: the session's history
 *   GET  /notes?user=ada           the same history
 *   anything else                  session-agent's front door: the console at `/`, `/healthz`,
 *                                  and the API under /agents/{agent}/ (bearer API_TOKEN)
 *
 * `/notes` has no authentication of its own, as written: put yours in front of `?user=`
 * before you deploy it. The front door's API is protected by API_TOKEN (or scoped tokens).
 */
import FrontDoor, { AgentDirectory, SessionAgent } from "@session-agent/worker";

// The Durable Object classes must be exported by the Worker's main module, under the
// class_name of wrangler.toml's bindings.
export { AgentDirectory, SessionAgent };

// `Env` is generated from wrangler.toml by `npx wrangler types` (worker-configuration.d.ts).
export default {
  async fetch(request, env, ctx): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/hello") {
      return new Response("hello from my own Worker\n", { headers: { "content-type": "text/plain" } });
    }
    if (url.pathname === "/notes") {
      return notes(request, url, env);
    }
    // Everything else: session-agent's own front door, as if it were this Worker's default
    // export (it serves the console from env.ASSETS and the API from env.SESSION_AGENT).
    return new FrontDoor(ctx, env).fetch(request);
  },
} satisfies ExportedHandler<Env>;

/** One user's notes, kept in the SessionAgent Durable Object of that user. */
async function notes(request: Request, url: URL, env: Env): Promise<Response> {
  const user = url.searchParams.get("user") || "user-1";
  // One Durable Object per user: idFromName(user) is also the object that the front door
  // reaches at /agents/{user}/…, so both see the same sessions.
  const agent = env.SESSION_AGENT.get(env.SESSION_AGENT.idFromName(user));
  // A binding is already a capability: the DO routes have no /agents/{agent} prefix and take
  // no token. The host name is not used.
  if (request.method === "POST") {
    const text = await request.text();
    const message = { id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text }] };
    const r = await agent.fetch("https://do/sessions/notes/messages", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message }),
    });
    if (!r.ok) return r; // the DO's error as it is: {"error": {"code", "message"}}
  } else if (request.method !== "GET") {
    return Response.json({ error: { code: "method_not_allowed", message: "GET or POST" } }, { status: 405 });
  }
  const history = await agent.fetch("https://do/sessions/notes/history");
  if (!history.ok) return history;
  const { messages } = await history.json<{ messages: unknown[] }>();
  return Response.json({ messages });
}
