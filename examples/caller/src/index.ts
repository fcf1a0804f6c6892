/**
 * session-caller: a Worker that keeps each user's memory in the `SessionAgent` Durable Object
 * of the `session-agent` Worker, through a Durable Object binding (see wrangler.toml), with the
 * typed client `@session-agent/client` (clients/ts in this repository).
 *
 * A binding is already a capability, so this Worker talks to the DO directly: the client is
 * made with the stub (`{ fetcher }`) and calls the "DO routes" of the API contract (POST
 * /sessions/{sid}/messages, GET /search, ...): no `/agents/{agent}` prefix and no bearer token;
 * those belong to session-agent's public front door.
 *
 *   POST /remember?user=ada&session=s1[&parent=<messageId>]   body: plain text
 *        appends the text as a user message, answers {messages: [...]}: the session's history
 *   GET  /recall?user=ada&q=paris[&limit=5]
 *        full-text search over all of ada's sessions, answers {results: [...]}
 *   POST /sessions?user=ada&name=Trip                          answers the new SessionInfo
 *   POST /token?user=ada[&session=s1]                          a scoped token for ada's browser
 */
import { SessionAgentClient, SessionAgentError, type ErrorCode, type Message } from "@session-agent/client";

/** The bindings declared in wrangler.toml. `DurableObjectNamespace` and `Fetcher` are Workers types. */
export interface Env {
  SESSION_AGENT: DurableObjectNamespace;
  /** session-agent's front door (a service binding): used only to mint scoped tokens. */
  SESSION_AGENT_API?: Fetcher;
  /** session-agent's admin token (a secret of this Worker too); it never leaves the server. */
  API_TOKEN?: string;
}

/** The DO's rule for agent names; keeping to it lets the front door reach the same memory. */
const NAME = /^[A-Za-z0-9._:-]{1,128}$/;

/** An error answer in the DO's own shape, `{"error": {"code", "message"}}`. */
const fail = (status: number, code: ErrorCode, message: string) =>
  Response.json({ error: { code, message } }, { status });

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const param = (k: string) => url.searchParams.get(k) ?? undefined;
    const route = `${request.method} ${url.pathname}`;
    const user = param("user");
    if (!user || !NAME.test(user)) return fail(400, "invalid_request", "?user= must be 1-128 of [A-Za-z0-9._:-]");
    // One Durable Object per user. idFromName is deterministic: the same name reaches the same
    // object from any Worker, including session-agent's own front door (/agents/{user}/...).
    const stub = env.SESSION_AGENT.get(env.SESSION_AGENT.idFromName(user));
    const agent = new SessionAgentClient({ fetcher: stub }).agent(user);
    try {
      if (route === "POST /remember") {
        const session = agent.session(param("session") ?? "default");
        const message: Message = {
          id: crypto.randomUUID(),
          role: "user",
          parts: [{ type: "text", text: await request.text() }],
        };
        // parent absent: after the latest message; an id: a reply to it (404 if unknown).
        await session.append(message, { parentId: param("parent") });
        return Response.json({ messages: await session.history() });
      }
      if (route === "GET /recall") {
        // A limit that is not a number reaches the DO as it is, which refuses it (400).
        const limit = Number(param("limit") ?? 20);
        return Response.json({ results: await agent.search(param("q") ?? "", { limit }) });
      }
      if (route === "POST /token") {
        // What a browser of this user gets: a token for this user's agent only (and one session
        // when ?session= is given), never the admin token. The front door signs it, so this
        // call goes over HTTP, through the service binding, with the admin token. (In a real
        // app `user` comes from your own sign-in, not from the query as in this demo.)
        const front = env.SESSION_AGENT_API;
        if (!front || !env.API_TOKEN) {
          return fail(503, "not_configured", "bind SESSION_AGENT_API and set API_TOKEN to mint tokens");
        }
        const admin = new SessionAgentClient({
          baseUrl: "https://session-agent", token: env.API_TOKEN, fetch: (input, init) => front.fetch(input, init),
        });
        const session = param("session");
        const issued = await admin.agent(user).tokens.issue({
          scope: "write", ttlSeconds: 3600, ...(session ? { sessions: [session] } : {}),
        });
        return Response.json(issued, { status: 201 });
      }
      if (route === "POST /sessions") {
        return Response.json(await agent.sessions.create({ name: param("name") ?? "untitled" }), { status: 201 });
      }
      return fail(404, "not_found", `no route ${route}`);
    } catch (e) {
      // The DO's typed errors pass through with their status and code.
      if (e instanceof SessionAgentError) return fail(e.status, e.code, e.message);
      throw e;
    }
  },
} satisfies ExportedHandler<Env>;
