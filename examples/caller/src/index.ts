/**
 * session-caller: a Worker that keeps each user's memory in the `SessionAgent` Durable Object
 * of the `session-agent` Worker, through a Durable Object binding (see wrangler.toml).
 *
 * A binding is already a capability, so this Worker talks to the DO directly: no
 * `/agents/{agent}` prefix and no bearer token; those belong to session-agent's public front
 * door. The paths are the "DO routes" of the API contract (POST /sessions/{sid}/messages, GET
 * /search, ...).
 *
 *   POST /remember?user=ada&session=s1[&parent=<messageId>]   body: plain text
 *        appends the text as a user message, answers {messages: [...]}: the session's history
 *   GET  /recall?user=ada&q=paris[&limit=5]
 *        full-text search over all of ada's sessions, answers {results: [...]}
 *   POST /sessions?user=ada&name=Trip                          answers the new SessionInfo
 */

// ---------------------------------------------------------------------------------------------
// Types. `DurableObjectNamespace` and the other runtime types are globals from the Workers
// types (`npx wrangler types` or @cloudflare/workers-types); everything else is ours.

/** The bindings declared in wrangler.toml. */
export interface Env {
  SESSION_AGENT: DurableObjectNamespace;
  /** session-agent's front door (a service binding): used only to mint scoped tokens. */
  SESSION_AGENT_API?: Fetcher;
  /** session-agent's admin token (a secret of this Worker too); it never leaves the server. */
  API_TOKEN?: string;
}

/** A message in the AI SDK `UIMessage` shape; the DO stores it verbatim. */
export interface Message {
  id: string;
  role: "system" | "user" | "assistant";
  parts: Array<{ type: string; text?: string; [key: string]: unknown }>;
  createdAt?: string;
  metadata?: unknown;
}

export interface SessionInfo {
  id: string;
  name: string;
  parentSessionId: string | null;
  messageCount: number;
  createdAt: string;
  updatedAt: string;
  [key: string]: unknown; // model, source, token counts, ...
}

export interface SearchHit {
  sessionId: string;
  id: string;
  role: string;
  content: string;
  createdAt: string;
}

/** The DO's error codes (API.md, "Conventions"). */
export type ErrorCode =
  | "invalid_request" | "unauthorized" | "not_found" | "method_not_allowed" | "conflict"
  | "too_large" | "over_budget" | "not_configured" | "llm_unavailable";

/** A non-2xx answer of the DO, with its HTTP status and its `error.code`. */
export class SessionAgentError extends Error {
  override name = "SessionAgentError";
  constructor(readonly status: number, readonly code: ErrorCode, message: string) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// The client: one instance per agent (here: per user). Each agent is one Durable Object, so
// everything one user remembers lives together and is isolated from every other user.

export class SessionAgentClient {
  private readonly stub: DurableObjectStub;

  constructor(ns: DurableObjectNamespace, agent: string) {
    // idFromName is deterministic: the same name reaches the same object from any Worker,
    // including session-agent's own front door (/agents/{agent}/...).
    this.stub = ns.get(ns.idFromName(agent));
  }

  /** Appends `message`; `parentId` undefined → after the latest message, null → a new root. */
  append(sessionId: string, message: Message, parentId?: string | null) {
    const body = parentId === undefined ? { message } : { message, parentId };
    return this.call<{ message: Message; parentId: string | null; inserted: boolean }>(
      "POST", `/sessions/${enc(sessionId)}/messages`, body);
  }

  /** The messages from the root to the latest leaf (or to `leaf`). */
  async history(sessionId: string, leaf?: string): Promise<Message[]> {
    const qs = leaf === undefined ? "" : `?leaf=${enc(leaf)}`;
    return (await this.call<{ messages: Message[] }>("GET", `/sessions/${enc(sessionId)}/history${qs}`)).messages;
  }

  /** Full-text search across all of this agent's sessions. */
  async search(q: string, limit = 20): Promise<SearchHit[]> {
    const qs = new URLSearchParams({ q, limit: String(limit) });
    return (await this.call<{ results: SearchHit[] }>("GET", `/search?${qs}`)).results;
  }

  createSession(name: string): Promise<SessionInfo> {
    return this.call<SessionInfo>("POST", "/sessions", { name });
  }

  async listSessions(): Promise<SessionInfo[]> {
    return (await this.call<{ sessions: SessionInfo[] }>("GET", "/sessions")).sessions;
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    // A stub's fetch needs an absolute URL, but the host is never used: only the path and
    // query reach the DO.
    const res = await this.stub.fetch(`https://agent${path}`, {
      method,
      headers: body === undefined ? undefined : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) {
      // Errors are {"error": {"code", "message"}}; fall back to the status for anything else.
      const err = await res.json<{ error?: { code?: ErrorCode; message?: string } }>().catch(() => ({ error: undefined }));
      throw new SessionAgentError(res.status, err.error?.code ?? "invalid_request",
        err.error?.message ?? `${method} ${path}: HTTP ${res.status}`);
    }
    return (res.status === 204 ? undefined : await res.json()) as T;
  }
}

/** Session and message ids go into paths: percent-encode them. */
const enc = encodeURIComponent;

// ---------------------------------------------------------------------------------------------
// The Worker.

/** The DO's rule for agent names; keeping to it lets the front door reach the same memory. */
const NAME = /^[A-Za-z0-9._:-]{1,128}$/;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const param = (k: string) => url.searchParams.get(k) ?? undefined;
    const route = `${request.method} ${url.pathname}`;
    try {
      const user = param("user");
      if (!user || !NAME.test(user)) {
        throw new SessionAgentError(400, "invalid_request", "?user= must be 1-128 of [A-Za-z0-9._:-]");
      }
      const agent = new SessionAgentClient(env.SESSION_AGENT, user);

      if (route === "POST /remember") {
        const session = param("session") ?? "default";
        const message: Message = {
          id: crypto.randomUUID(),
          role: "user",
          parts: [{ type: "text", text: await request.text() }],
        };
        await agent.append(session, message, param("parent"));
        return Response.json({ messages: await agent.history(session) });
      }
      if (route === "GET /recall") {
        const limit = Number(param("limit") ?? 20);
        return Response.json({ results: await agent.search(param("q") ?? "", limit) });
      }
      if (route === "POST /token") {
        // What a browser of this user gets: a token for this user's agent only (and one session
        // when ?session= is given), never the admin token. The front door signs it. (In a real
        // app `user` comes from your own sign-in, not from the query as in this demo.)
        if (!env.SESSION_AGENT_API || !env.API_TOKEN) {
          throw new SessionAgentError(503, "not_configured", "bind SESSION_AGENT_API and set API_TOKEN to mint tokens");
        }
        const session = param("session");
        const res = await env.SESSION_AGENT_API.fetch(`https://session-agent/agents/${enc(user)}/tokens`, {
          method: "POST",
          headers: { authorization: `Bearer ${env.API_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ scope: "write", ttlSeconds: 3600, ...(session ? { sessions: [session] } : {}) }),
        });
        return new Response(res.body, { status: res.status, headers: { "content-type": "application/json" } });
      }
      if (route === "POST /sessions") {
        return Response.json(await agent.createSession(param("name") ?? "untitled"), { status: 201 });
      }
      return Response.json({ error: { code: "not_found", message: `no route ${route}` } }, { status: 404 });
    } catch (e) {
      // The DO's typed errors pass through with their status and code; anything else is ours.
      if (e instanceof SessionAgentError) {
        return Response.json({ error: { code: e.code, message: e.message } }, { status: e.status });
      }
      throw e;
    }
  },
} satisfies ExportedHandler<Env>;
