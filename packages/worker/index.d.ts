// Types of @session-agent/worker: the built session-agent Worker (wasm + JS glue).
// The Workers runtime types (`cloudflare:workers`, Request, DurableObjectNamespace, ...) come
// from your project: `npx wrangler types` (worker-configuration.d.ts) or @cloudflare/workers-types.
import { DurableObject, WorkerEntrypoint } from "cloudflare:workers";

/**
 * The bindings session-agent reads (see README.md, "Configuration"). Only `SESSION_AGENT` is
 * required; the front door also needs `ASSETS` for the console and `API_TOKEN` for the API.
 * Your own `Env` may hold more: anything with these fields will do.
 */
export interface SessionAgentEnv {
  /** The Durable Object namespace of the `SessionAgent` class (`class_name = "SessionAgent"`). */
  SESSION_AGENT: DurableObjectNamespace<SessionAgent>;
  /** Optional: memory spaces shared by the agents of one user (`class_name = "MemorySpace"`). */
  MEMORY_SPACE?: DurableObjectNamespace<MemorySpace>;
  /** How long an agent waits for its memory space (ms, default 5000). */
  SPACE_TIMEOUT_MS?: string;
  /** The directory's shards (`class_name = "AgentDirectory"`): optional; see README.md, "The directory". */
  AGENT_DIRECTORY?: DurableObjectNamespace<AgentDirectory>;
  /** Milliseconds an agent's directory report waits after its first write (default 2000). */
  DIRECTORY_REPORT_MS?: string;
  /** The console's static files (`[assets] binding = "ASSETS"`, `run_worker_first = true`). */
  ASSETS?: Fetcher;
  /** R2: skills, readonly texts and oversize messages. */
  SKILLS_BUCKET?: R2Bucket;
  /** Secret: the admin bearer token of the front door. Unset: every /agents/ request is 503. */
  API_TOKEN?: string;
  /** Secret: signs scoped tokens for browsers (32 random bytes or more). */
  TOKEN_SECRET?: string;
  /** The agent's context blocks and policies: a JSON string (or object). */
  SESSION_CONFIG?: string | object;
  /** `openai`, `anthropic`, `workers-ai` or `none` (default). */
  LLM_PROVIDER?: string;
  LLM_BASE_URL?: string;
  LLM_MODEL?: string;
  LLM_API_KEY?: string;
  LLM_TIMEOUT_MS?: string;
  EMBEDDINGS_PROVIDER?: string;
  EMBEDDINGS_BASE_URL?: string;
  EMBEDDINGS_MODEL?: string;
  EMBEDDINGS_API_KEY?: string;
  /** `workers-ai` (`@cf/baai/bge-reranker-base` through `AI`), `http` (a Cohere/Jina-shaped `/rerank`) or `none` (default). */
  RERANK_PROVIDER?: string;
  RERANK_BASE_URL?: string;
  RERANK_MODEL?: string;
  RERANK_API_KEY?: string;
  RERANK_CANDIDATES?: string;
  RERANK_TIMEOUT_MS?: string;
  /** Comma-separated origins (or `*`) whose pages may call the API. */
  CORS_ORIGINS?: string;
  /** `"<requests>/<seconds>"` per agent, counted in its Durable Object. */
  RATE_LIMIT?: string;
  /** `off` hides the console at `/`. */
  CHAT_PAGE?: string;
  /** Workers AI, for `LLM_PROVIDER` / `EMBEDDINGS_PROVIDER` / `RERANK_PROVIDER` = `workers-ai`. */
  AI?: unknown;
  /** A Workers rate-limiting binding (`[[ratelimits]]`), keyed by agent name. */
  RATE_LIMITER?: unknown;
}

/**
 * The Durable Object: the memory of one agent (its sessions, messages, search, compaction,
 * context blocks, long-term memory, the agent turn). Re-export it from your Worker's main
 * module and bind it (`class_name = "SessionAgent"`, with a `new_sqlite_classes` migration).
 *
 * Talk to it with `stub.fetch()` and the **DO routes** of the API: the front door's paths
 * without the `/agents/{agent}` prefix and without a token, e.g.
 * `POST https://do/sessions/{sid}/messages` with `{"message": UIMessage}` or
 * `GET https://do/sessions/{sid}/history`. It has no RPC methods.
 */
export declare class SessionAgent extends DurableObject<SessionAgentEnv> {
  fetch(request: Request): Promise<Response>;
  alarm(): Promise<void>;
  webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void>;
  webSocketClose(ws: WebSocket, code: number, reason: string, wasClean: boolean): Promise<void>;
  webSocketError(ws: WebSocket, error: unknown): Promise<void>;
}

/**
 * A memory space: the memories and shared blocks of the agents mapped to it (re-export it and
 * bind it as `MEMORY_SPACE`, `class_name = "MemorySpace"`, with a `new_sqlite_classes`
 * migration). Its DO routes are `/memories…`, `/blocks…`, `/tokens/revoke` and `DELETE /`.
 */
export declare class MemorySpace extends DurableObject<SessionAgentEnv> {
  fetch(request: Request): Promise<Response>;
  alarm(): Promise<void>;
}

/**
 * One shard of the directory of agents (`GET /directory…` at the front door, admin token).
 * Re-export it and bind it as `AGENT_DIRECTORY` (`class_name = "AgentDirectory"`, with a
 * `new_sqlite_classes` migration) to keep the directory; without the binding nothing is
 * reported. Only the Workers layer talks to it.
 */
export declare class AgentDirectory extends DurableObject<SessionAgentEnv> {
  fetch(request: Request): Promise<Response>;
}

/**
 * The front door: `GET /healthz`, the console (every path outside `/agents/`, from `ASSETS`)
 * and the API under `/agents/{agent}/…` (bearer `API_TOKEN` or a scoped token), forwarded to
 * `SESSION_AGENT.idFromName(agent)`.
 *
 * Re-export it as your Worker's default export (`export { default } from
 * "@session-agent/worker"`), or call it from your own `fetch`:
 * `new SessionAgentFrontDoor(ctx, env).fetch(request)`.
 */
declare class SessionAgentFrontDoor extends WorkerEntrypoint<SessionAgentEnv> {
  constructor(ctx: ExecutionContext, env: SessionAgentEnv);
  fetch(request: Request): Promise<Response>;
}
export default SessionAgentFrontDoor;
