// The hand-written surface: a client, an agent, a session. Every call goes through the typed
// `request` (request.ts), so its path, parameters, body and answer are checked against the
// generated types of docs/openapi.yaml.
import { ERROR_STATUS, SessionAgentError, isErrorCode } from "./errors.js";
import {
  fillPath, parseBody, queryString,
  type AgentPathsWith, type HttpMethod, type LooseOptions, type Operation, type OptionsArg, type PathsWith,
  type SuccessOf,
} from "./request.js";
import { SessionSocket, type ConnectOptions } from "./socket.js";
import { sseData } from "./sse.js";
import type {
  AddBlockRequest, AppendResult, AssistantMessage, BatchResult, ChatEvent, ChatRequest, ChatResult,
  Compaction, ContextBlock, ContinuationRequest, CreateCompactionRequest, CreateMemoryRequest,
  CreateSessionRequest, DeleteMemoriesRequest, Extracted, HistoryPage, ImportCounts, SpaceImportCounts, IngestEntriesRequest, IssueTokenRequest,
  IssuedToken, Memory, MemoryCategory, MemoryHit, MemoryList, MemoryVersion, Message, NewTurnRequest, ParentId,
  Prompt, RecentHistory, Revocation, RevokeTokensRequest, Schedule, ScheduleRun, CreateScheduleRequest,
  UpdateScheduleRequest, SearchEntry, SearchEntryList, SearchHit, SessionExport,
  SessionImport, SessionInfo, SessionStorage, SplitRequest, Tool, ToolName, UpdateMemoryRequest, UpdateSessionRequest, UsageRequest,
  PutMemoryRequest,
  UserMessage, SpaceChoice, SharedBlock,
} from "./types.js";

/**
 * `metadata.<key>=<value>` filters: every key must be in the metadata, its stored value equal to
 * this one as text (`{ n: 30 }` matches `30` and `"30"`, `{ vip: true }` matches `true` and
 * `"true"`).
 */
export type MetadataFilter = Record<string, string | number | boolean>;

/** The filters of the memory lists, searches and `forgetAll`; all that are given must hold. */
export interface MemoryFilters {
  /** One category or several (any of them). */
  category?: MemoryCategory | MemoryCategory[];
  /** Every one of these tags. */
  tag?: string | string[];
  /** At least one of these tags. */
  anyTag?: string | string[];
  /** ISO-8601 UTC times (or `YYYY-MM-DD` dates), exclusive. */
  createdAfter?: string;
  createdBefore?: string;
  updatedAfter?: string;
  updatedBefore?: string;
  metadata?: MetadataFilter;
  /** Memories whose `source.sessionId` is this session. */
  sessionId?: string;
}

/** The query parameters `metadata.<key>` of a metadata filter. */
type MetadataQuery = Record<`metadata.${string}`, string>;

function metadataQuery(metadata: MetadataFilter | undefined): MetadataQuery {
  const out: MetadataQuery = {};
  for (const [k, v] of Object.entries(metadata ?? {})) out[`metadata.${k}`] = String(v);
  return out;
}

/** Memory filters as query parameters (`category` as one comma list, `metadata.<key>` each). */
function memoryQuery<T extends MemoryFilters>({ metadata, category, tag, anyTag, ...rest }: T) {
  const list = (v: string | string[] | undefined) => (v === undefined ? undefined : ([] as string[]).concat(v));
  return {
    ...rest,
    ...(category === undefined ? {} : { category: list(category)!.join(",") }),
    ...(tag === undefined ? {} : { tag: list(tag) }),
    ...(anyTag === undefined ? {} : { anyTag: list(anyTag) }),
    ...metadataQuery(metadata),
  };
}

/** `fetch` as the client calls it. */
export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** Anything with a `fetch`: a Durable Object stub, a service binding. */
export interface FetcherLike {
  fetch(input: string, init?: RequestInit): Promise<Response>;
}

/** A Durable Object namespace binding (`env.SESSION_AGENT`). */
export interface NamespaceLike {
  idFromName(name: string): unknown;
  get(id: any): FetcherLike;
}

/** Over HTTP, through session-agent's front door (browsers, Node, other servers). */
export interface HttpClientOptions {
  /** The Worker's origin (and path prefix, if any), e.g. `https://session-agent.example.workers.dev`. */
  baseUrl: string | URL;
  /** `Authorization: Bearer <token>`: the admin `API_TOKEN` on servers, a scoped token in browsers. */
  token?: string;
  /** Default `globalThis.fetch`. */
  fetch?: FetchLike;
  /** Sent with every request. */
  headers?: Record<string, string>;
}

/** From a Worker, one agent's Durable Object stub: DO routes, no prefix, no token. */
export interface FetcherClientOptions {
  /** `env.SESSION_AGENT.get(env.SESSION_AGENT.idFromName(agent))`, or any `{ fetch }`. */
  fetcher: FetcherLike;
}

/** From a Worker, the namespace binding: `agent(name)` reaches `idFromName(name)`. */
export interface NamespaceClientOptions {
  namespace: NamespaceLike;
}

export type ClientOptions = HttpClientOptions | FetcherClientOptions | NamespaceClientOptions;

const PREFIX = "/agents/{agent}";
/** A stub's fetch needs an absolute URL; only its path and query reach the object. */
const STUB_ORIGIN = "https://agent";

/**
 * The session-agent client. Over HTTP: `new SessionAgentClient({ baseUrl, token })`. Inside a
 * Worker: `new SessionAgentClient({ fetcher: stub })` (or `{ namespace: env.SESSION_AGENT }`),
 * which calls the Durable Object's routes directly.
 */
export class SessionAgentClient {
  readonly #fetch: FetchLike | undefined;
  readonly #base: string | undefined;
  readonly #token: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #fetcher: FetcherLike | undefined;
  readonly #namespace: NamespaceLike | undefined;

  constructor(options: ClientOptions) {
    this.#headers = {};
    if ("baseUrl" in options) {
      const base = new URL(String(options.baseUrl));
      this.#base = `${base.origin}${base.pathname.replace(/\/+$/, "")}`;
      this.#token = options.token;
      // Called as a plain function: a stored `globalThis.fetch` loses its `this` in browsers.
      this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
      this.#headers = { ...options.headers };
    } else if ("fetcher" in options) {
      this.#fetcher = options.fetcher;
    } else if ("namespace" in options) {
      this.#namespace = options.namespace;
    } else {
      throw new TypeError("SessionAgentClient needs { baseUrl, token }, { fetcher } or { namespace }");
    }
  }

  /** Over HTTP (`baseUrl`), or straight to a Durable Object (`fetcher`, `namespace`). */
  get mode(): "http" | "fetcher" | "namespace" {
    return this.#base !== undefined ? "http" : this.#fetcher ? "fetcher" : "namespace";
  }

  /**
   * One agent. With `{ fetcher }` the stub already is the agent: `name` may be left out (and
   * is not used to route).
   */
  agent(name?: string): AgentClient {
    if (name === undefined && !this.#fetcher) throw new TypeError("agent(name): the agent's name is needed");
    return new AgentClient(this, name);
  }

  /** One memory space (`/spaces/{space}/…`): the memories and shared blocks of the agents
   * mapped to it. Over HTTP (`{ baseUrl }`) only. */
  space(name: string): SpaceClient {
    return new SpaceClient(this, name);
  }

  /**
   * Any operation of the spec, typed: `request("get", "/agents/{agent}/sessions/{sid}/leaf",
   * { path: { agent: "a", sid: "s" } })`. Resolves with the parsed answer; throws
   * `SessionAgentError` for a non-2xx one.
   */
  async request<M extends HttpMethod, P extends PathsWith<M>>(
    method: M, path: P, ...[options]: OptionsArg<Operation<P, M>>
  ): Promise<SuccessOf<Operation<P, M>>> {
    const res = await this.send(method, path, (options as unknown as LooseOptions | undefined) ?? {});
    return (await parseBody(res)) as SuccessOf<Operation<P, M>>;
  }

  /** As `request`, but resolves with the `Response` itself (streams: chat, export). */
  async raw<M extends HttpMethod, P extends PathsWith<M>>(
    method: M, path: P, ...[options]: OptionsArg<Operation<P, M>>
  ): Promise<Response> {
    return this.send(method, path, (options as unknown as LooseOptions | undefined) ?? {});
  }

  /** Sends one request; throws `SessionAgentError` unless the answer is 2xx. */
  async send(method: string, template: string, o: LooseOptions): Promise<Response> {
    const headers = new Headers(this.#headers);
    for (const [k, v] of Object.entries(o.headers ?? {})) headers.set(k, v);
    let body: string | undefined;
    if (o.body !== undefined) {
      if (typeof o.body === "string") {
        body = o.body;
      } else {
        body = JSON.stringify(o.body);
        if (!headers.has("content-type")) headers.set("content-type", "application/json");
      }
    }
    const params = o.path ?? {};
    const init: RequestInit = { method: method.toUpperCase(), headers };
    if (body !== undefined) init.body = body;
    if (o.signal) init.signal = o.signal;
    let res: Response;
    if (this.#base !== undefined) {
      if (this.#token !== undefined && !headers.has("authorization")) headers.set("authorization", `Bearer ${this.#token}`);
      res = await this.#fetch!(`${this.#base}${fillPath(template, params)}${queryString(o.query)}`, init);
    } else {
      if (!template.startsWith(PREFIX)) {
        throw new TypeError(`${template} is served by session-agent's front door only, not by its Durable Object`);
      }
      const path = fillPath(template.slice(PREFIX.length), params) || "/";
      res = await this.#stub(params.agent).fetch(`${STUB_ORIGIN}${path}${queryString(o.query)}`, init);
    }
    if (!res.ok) throw await SessionAgentError.fromResponse(res, `${method.toUpperCase()} ${template}`);
    return res;
  }

  /** The WebSocket URL of a session (`ws:`/`wss:`, with `?token=`). HTTP mode only. */
  socketUrl(agent: string | undefined, sid: string, token = this.#token): string {
    if (this.#base === undefined) {
      throw new TypeError("connect() needs a client made with { baseUrl }: a Durable Object stub has no WebSocket URL");
    }
    if (agent === undefined) throw new TypeError("connect() needs the agent's name");
    const url = new URL(`${this.#base}${fillPath("/agents/{agent}/sessions/{sid}/ws", { agent, sid })}`);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    if (token !== undefined) url.searchParams.set("token", token);
    return url.toString();
  }

  #stub(agent: unknown): FetcherLike {
    if (this.#fetcher) return this.#fetcher;
    if (typeof agent !== "string") throw new TypeError("the agent's name is needed to reach its Durable Object");
    return this.#namespace!.get(this.#namespace!.idFromName(agent));
  }
}

type AgentPath<M extends HttpMethod> = AgentPathsWith<M>;
type AgentArgs<M extends HttpMethod, P extends AgentPath<M>> = OptionsArg<Operation<P, M>, "agent">;

/** One agent (one Durable Object): its sessions, search across them, long-term memory, tokens. */
export class AgentClient {
  /** The agent's sessions registry. */
  readonly sessions: Sessions;
  /** Long-term memory: facts about the user that outlive sessions. */
  readonly memories: Memories;
  /** Scoped tokens (admin token only; HTTP only). */
  readonly tokens: Tokens;
  /** Scheduled turns run by the agent's alarm, and their runs. */
  readonly schedules: Schedules;

  constructor(
    readonly client: SessionAgentClient,
    /** The agent's name (`undefined` only with a `{ fetcher }` client). */
    readonly name: string | undefined,
  ) {
    this.sessions = new Sessions(this);
    this.memories = new Memories(this);
    this.tokens = new Tokens(this);
    this.schedules = new Schedules(this);
  }

  /** One session of this agent. */
  session(sid: string): SessionClient {
    return new SessionClient(this, sid);
  }

  /**
   * Any operation under `/agents/{agent}`, typed, with `agent` filled in: e.g.
   * `request("get", "/agents/{agent}/sessions/{sid}/path-length", { path: { sid }, query: { leaf } })`.
   */
  async request<M extends HttpMethod, P extends AgentPath<M>>(
    method: M, path: P, ...[options]: AgentArgs<M, P>
  ): Promise<SuccessOf<Operation<P, M>>> {
    return (await parseBody(await this.#send(method, path, options as unknown as LooseOptions | undefined))) as SuccessOf<Operation<P, M>>;
  }

  /** As `request`, resolving with the `Response` (for streamed answers). */
  async raw<M extends HttpMethod, P extends AgentPath<M>>(
    method: M, path: P, ...[options]: AgentArgs<M, P>
  ): Promise<Response> {
    return this.#send(method, path, options as unknown as LooseOptions | undefined);
  }

  #send(method: string, path: string, options: LooseOptions | undefined): Promise<Response> {
    const o = options ?? {};
    return this.client.send(method, path, { ...o, path: { ...o.path, agent: this.name } });
  }

  /**
   * Full-text search across all of the agent's sessions (`GET /search`); with `metadata`, only
   * the sessions whose metadata matches.
   */
  async search(q: string, options: { limit?: number; metadata?: MetadataFilter } = {}): Promise<SearchHit[]> {
    const { metadata, ...rest } = options;
    const query = { q, ...rest, ...metadataQuery(metadata) };
    return (await this.request("get", "/agents/{agent}/search", { query })).results;
  }

  /** The whole agent as NDJSON, format `session-agent/3` (admin token only; `GET /export`). */
  async export(): Promise<string> {
    return this.request("get", "/agents/{agent}/export");
  }

  /** Imports an NDJSON export into this agent, which must hold nothing (admin; `POST /import`). */
  async import(ndjson: string): Promise<ImportCounts> {
    return this.request("post", "/agents/{agent}/import", {
      body: ndjson, headers: { "content-type": "application/x-ndjson" },
    });
  }

  /** The memory space the agent uses, and why (admin token only). */
  async space(): Promise<SpaceChoice> {
    return this.request("get", "/agents/{agent}/space");
  }

  /** Maps the agent to `space` (`null`: none; admin token only). */
  async setSpace(space: string | null): Promise<SpaceChoice> {
    return this.request("put", "/agents/{agent}/space", { body: { space } });
  }

  /** Erases everything the agent holds (admin; `DELETE /agents/{agent}` with `Confirm: erase`). */
  async erase(): Promise<void> {
    await this.request("delete", "/agents/{agent}", { headers: { Confirm: "erase" } });
  }
}

/** `GET/POST /sessions`, `POST /sessions/import`. */
export class Sessions {
  constructor(private readonly agent: AgentClient) {}

  /** Every session (whose metadata matches `metadata`), most recently updated first. */
  async list(options: { metadata?: MetadataFilter } = {}): Promise<SessionInfo[]> {
    const query = metadataQuery(options.metadata);
    return (await this.agent.request("get", "/agents/{agent}/sessions", { query })).sessions;
  }

  /** One page of the sessions (`limit` ≤ 100; with `metadata`, of those whose metadata matches)
   * and the `nextCursor` of the page after it (`null` after the last one): pass it back as `cursor`. */
  async page(
    options: { limit: number; cursor?: string; metadata?: MetadataFilter },
  ): Promise<{ sessions: SessionInfo[]; nextCursor: string | null }> {
    const { metadata, ...rest } = options;
    const query = { ...rest, ...metadataQuery(metadata) };
    const { sessions, nextCursor } = await this.agent.request("get", "/agents/{agent}/sessions", { query });
    return { sessions, nextCursor: nextCursor ?? null };
  }

  /** A new session under a server-chosen id. */
  async create(input: CreateSessionRequest): Promise<SessionInfo> {
    return this.agent.request("post", "/agents/{agent}/sessions", { body: input });
  }

  /** Imports a session document (`as`: under another id). */
  async import(document: SessionImport | SessionExport, options: { as?: string } = {}): Promise<SessionInfo> {
    return this.agent.request("post", "/agents/{agent}/sessions/import", {
      body: document as SessionImport, query: options,
    });
  }
}

/** `/schedules…`: agent turns the agent's alarm runs (agent-wide tokens only). */
export class Schedules {
  constructor(private readonly agent: AgentClient) {}

  /** A new schedule: `prompt` and exactly one of `at` (ISO-8601, future), `every` (seconds,
   * ≥ 60) and `cron` (five fields, UTC); `sessionId` makes each run a turn of that session. */
  async create(input: CreateScheduleRequest): Promise<Schedule> {
    return this.agent.request("post", "/agents/{agent}/schedules", { body: input });
  }

  /** One page of the schedules by `nextRunAt` (finished one-shots last) and the `nextCursor`
   * of the page after it (`null` after the last one). */
  async page(options: { limit?: number; cursor?: string } = {}): Promise<{ schedules: Schedule[]; nextCursor: string | null }> {
    const { schedules, nextCursor } = await this.agent.request("get", "/agents/{agent}/schedules", { query: options });
    return { schedules, nextCursor: nextCursor ?? null };
  }

  async get(id: string): Promise<Schedule> {
    return this.agent.request("get", "/agents/{agent}/schedules/{schedule}", { path: { schedule: id } });
  }

  /** Pauses or resumes (`paused`), renames, changes the prompt or the timing. */
  async update(id: string, patch: UpdateScheduleRequest): Promise<Schedule> {
    return this.agent.request("patch", "/agents/{agent}/schedules/{schedule}", { path: { schedule: id }, body: patch });
  }

  /** Deletes the schedule with its runs. */
  async delete(id: string): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/schedules/{schedule}", { path: { schedule: id } });
  }

  /** One page of its recorded runs, newest first. */
  async runs(id: string, options: { limit?: number; cursor?: string } = {}): Promise<{ runs: ScheduleRun[]; nextCursor: string | null }> {
    const { runs, nextCursor } = await this.agent.request("get", "/agents/{agent}/schedules/{schedule}/runs", {
      path: { schedule: id }, query: options,
    });
    return { runs, nextCursor: nextCursor ?? null };
  }

  /** Runs it now (its timing unchanged) and answers the run; `409` while a run of it goes. */
  async run(id: string): Promise<ScheduleRun> {
    return this.agent.request("post", "/agents/{agent}/schedules/{schedule}/run", { path: { schedule: id } });
  }
}

/** Which facts a memory read sees: those that hold now (default), those that held at `asOf`
 * (ISO-8601), or with `includeSuperseded: "1"` all of them. */
export type Held = { asOf?: string; includeSuperseded?: "0" | "1" | "true" | "false" };

/** `/memories…`. */
export class Memories {
  constructor(private readonly agent: AgentClient) {}

  /** Stores a fact (the same text again in the same category merges into the stored one). */
  async store(input: string | CreateMemoryRequest): Promise<Memory> {
    const body = typeof input === "string" ? { content: input } : input;
    return this.agent.request("post", "/agents/{agent}/memories", { body });
  }

  /** Stores up to 1,000 facts, all or nothing. */
  async storeMany(memories: CreateMemoryRequest[]): Promise<Memory[]> {
    return (await this.agent.request("post", "/agents/{agent}/memories/batch", { body: { memories } })).memories;
  }

  /** Ranked recall of the memories the filters select that hold now (`asOf`: what held then;
   * `includeSuperseded`: all), each hit with its `score` and `why`. */
  async recall(q: string, options: MemoryFilters & Held & { limit?: number } = {}): Promise<MemoryHit[]> {
    const query = { q, ...memoryQuery(options) };
    return (await this.agent.request("get", "/agents/{agent}/memories/search", { query })).results;
  }

  /** One page of the memories the filters select that hold now (or `asOf` a time, or
   * `includeSuperseded`), newest first (`nextCursor` for the next). */
  async list(options: MemoryFilters & Held & { limit?: number; cursor?: string } = {}): Promise<MemoryList> {
    return this.agent.request("get", "/agents/{agent}/memories", { query: memoryQuery(options) });
  }

  async get(id: string): Promise<Memory> {
    return this.agent.request("get", "/agents/{agent}/memories/{memory}", { path: { memory: id } });
  }

  /** Changes the given fields (a new version is kept). */
  async update(id: string, patch: UpdateMemoryRequest): Promise<Memory> {
    return this.agent.request("patch", "/agents/{agent}/memories/{memory}", { path: { memory: id }, body: patch });
  }

  /** Stores a memory under `id` when none of it is stored, else replaces it (a new version). */
  async put(id: string, memory: PutMemoryRequest): Promise<Memory> {
    return this.agent.request("put", "/agents/{agent}/memories/{memory}", { path: { memory: id }, body: memory });
  }

  /** Forgets one memory. */
  async forget(id: string): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/memories/{memory}", { path: { memory: id } });
  }

  /** Forgets every memory the filters select (all of them without any); the count. */
  async forgetAll(filters: MemoryFilters & DeleteMemoriesRequest = {}): Promise<number> {
    return (await this.agent.request("delete", "/agents/{agent}/memories", { body: filters })).deleted;
  }

  /** Every version of a memory, and who wrote it. */
  async history(id: string): Promise<MemoryVersion[]> {
    return (await this.agent.request("get", "/agents/{agent}/memories/{memory}/history", { path: { memory: id } })).versions;
  }
}

/** One memory space, over HTTP: its memories, shared blocks and tokens. */
export class SpaceClient {
  constructor(readonly client: SessionAgentClient, readonly name: string) {}

  /** One page of the space's memories that hold now, newest first. */
  async memories(options: MemoryFilters & Held & { limit?: number; cursor?: string } = {}): Promise<MemoryList> {
    return this.client.request("get", "/spaces/{space}/memories", { path: { space: this.name }, query: memoryQuery(options) });
  }

  /** Stores a fact in the space (every agent of it recalls it). */
  async store(input: string | CreateMemoryRequest): Promise<Memory> {
    const body = typeof input === "string" ? { content: input } : input;
    return this.client.request("post", "/spaces/{space}/memories", { path: { space: this.name }, body });
  }

  /** Ranked recall in the space. */
  async recall(q: string, options: MemoryFilters & Held & { limit?: number } = {}): Promise<MemoryHit[]> {
    const query = { q, ...memoryQuery(options) };
    return (await this.client.request("get", "/spaces/{space}/memories/search", { path: { space: this.name }, query })).results;
  }

  /** Forgets one memory of the space. */
  async forget(id: string): Promise<void> {
    await this.client.request("delete", "/spaces/{space}/memories/{memory}", { path: { space: this.name, memory: id } });
  }

  /** The space's shared blocks that hold a text. */
  async blocks(): Promise<SharedBlock[]> {
    return (await this.client.request("get", "/spaces/{space}/blocks", { path: { space: this.name } })).blocks;
  }

  /** One shared block (empty, `updatedAt` null, when never written or deleted). */
  async block(label: string): Promise<SharedBlock> {
    return this.client.request("get", "/spaces/{space}/blocks/{label}", { path: { space: this.name, label } });
  }

  /** Replaces a shared block's text if its version is still `version` (else `version_conflict`). */
  async replace(label: string, content: string, version: number): Promise<SharedBlock> {
    return this.client.request("put", "/spaces/{space}/blocks/{label}", { path: { space: this.name, label }, body: { content, version } });
  }

  /** Appends to a shared block. */
  async append(label: string, content: string): Promise<SharedBlock> {
    return this.client.request("post", "/spaces/{space}/blocks/{label}/append", { path: { space: this.name, label }, body: { content } });
  }

  /** A scoped token of the space (admin token only). */
  async issueToken(input: Omit<IssueTokenRequest, "sessions">): Promise<IssuedToken> {
    return this.client.request("post", "/spaces/{space}/tokens", { path: { space: this.name }, body: input });
  }

  /** The whole space as NDJSON, format `session-agent/3` (admin token only). */
  async export(): Promise<string> {
    return this.client.request("get", "/spaces/{space}/export", { path: { space: this.name } });
  }

  /** Imports a space's NDJSON export into this space, which must hold nothing (admin token only). */
  async import(ndjson: string): Promise<SpaceImportCounts> {
    return this.client.request("post", "/spaces/{space}/import", {
      path: { space: this.name }, body: ndjson, headers: { "content-type": "application/x-ndjson" },
    });
  }

  /** Erases the space's memories and blocks (admin; `Confirm: erase`). */
  async erase(): Promise<void> {
    await this.client.request("delete", "/spaces/{space}", { path: { space: this.name }, headers: { confirm: "erase" } });
  }
}

/** `POST /tokens`, `POST /tokens/revoke` (admin token only). */
export class Tokens {
  constructor(private readonly agent: AgentClient) {}

  /** A scoped token for this agent (front door only: needs a `{ baseUrl }` client). */
  async issue(input: IssueTokenRequest): Promise<IssuedToken> {
    return this.agent.request("post", "/agents/{agent}/tokens", { body: input });
  }

  /** Revokes the agent's scoped tokens issued before `before` (default: now). */
  async revoke(input: RevokeTokensRequest = {}): Promise<Revocation> {
    return this.agent.request("post", "/agents/{agent}/tokens/revoke", { body: input });
  }
}

/** Options of a new agent turn. */
export interface ChatOptions extends Omit<NewTurnRequest, "message"> {
  /** Each piece of the reply's text as it streams. */
  onDelta?: (text: string, messageId: string) => void;
  /** Aborts the request (the turn then stores nothing). */
  signal?: AbortSignal;
}

/** Options of a continuation after client tools. */
export interface ContinueOptions extends Omit<ContinuationRequest, "messages"> {
  onDelta?: (text: string, messageId: string) => void;
  signal?: AbortSignal;
}

/** One session: its message tree, history, search, compaction, context, tools and the agent turn. */
export class SessionClient {
  /** The session's context blocks and their entries. */
  readonly context: ContextBlocks;

  constructor(
    readonly agent: AgentClient,
    readonly id: string,
  ) {
    this.context = new ContextBlocks(agent, id);
  }

  private get path() {
    return { sid: this.id };
  }

  /** The session's registry entry (`404 not_found` before its first write). */
  async info(): Promise<SessionInfo> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}", { path: this.path });
  }

  async rename(name: string): Promise<SessionInfo> {
    return this.update({ name });
  }

  /** A new name, new metadata (replacing the old whole; `{}` clears it), or both. */
  async update(change: UpdateSessionRequest): Promise<SessionInfo> {
    return this.agent.request("patch", "/agents/{agent}/sessions/{sid}", { path: this.path, body: change });
  }

  /** Deletes the session with everything in it. */
  async delete(): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/sessions/{sid}", { path: this.path });
  }

  /** Copies the path root → `atMessageId` into a new session (not with a token limited to sessions: `403`). */
  async fork(input: { atMessageId: string; name?: string | null }): Promise<SessionInfo> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/fork", { path: this.path, body: input });
  }

  /** Adds token and cost usage. */
  async addUsage(usage: UsageRequest): Promise<SessionInfo> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/usage", { path: this.path, body: usage });
  }

  /** What the session holds: its rows and the bytes they store in SQLite, its spilled bytes in R2. */
  async storage(): Promise<SessionStorage> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/storage", { path: this.path });
  }

  /**
   * Ends this session and goes on in a new one that starts from its summary (not with a token
   * limited to sessions: `403`).
   */
  async split(input: SplitRequest = {}): Promise<SessionInfo> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/split", { path: this.path, body: input });
  }

  /**
   * Appends a message. `parentId` absent: after the latest leaf; `null`: a new root; an id:
   * a reply to that message (`404 not_found` if it is not in the session).
   */
  async append(message: Message, options: { parentId?: ParentId } = {}): Promise<AppendResult> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/messages", {
      path: this.path, body: { message, ...options },
    });
  }

  /** Appends messages as one chain, all or nothing. */
  async appendMany(messages: Message[], options: { parentId?: ParentId } = {}): Promise<BatchResult> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/messages/batch", {
      path: this.path, body: { messages, ...options },
    });
  }

  /** One message (`404 not_found` if it is not in the session). */
  async message(mid: string): Promise<Message> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/messages/{mid}", { path: { ...this.path, mid } });
  }

  /** Replaces a message's content (same id and place in the tree). */
  async updateMessage(mid: string, message: Message): Promise<Message> {
    return this.agent.request("put", "/agents/{agent}/sessions/{sid}/messages/{mid}", {
      path: { ...this.path, mid }, body: { message },
    });
  }

  /** Deletes a message; its children become roots. */
  async deleteMessage(mid: string): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/sessions/{sid}/messages/{mid}", { path: { ...this.path, mid } });
  }

  /** Deletes several messages (1 to 1,000), all or nothing: an unknown id is `404 not_found` and
   * nothing is deleted. Their children become roots. The ids deleted, each once. */
  async deleteMessages(ids: string[]): Promise<string[]> {
    return (await this.agent.request("post", "/agents/{agent}/sessions/{sid}/messages/delete", {
      path: this.path, body: { ids },
    })).deleted;
  }

  /** Deletes every message of the session (the session stays). */
  async clear(): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/sessions/{sid}/messages", { path: this.path });
  }

  /**
   * The path root → `leafId` (default: the latest leaf), compaction overlays applied unless
   * `raw`; `truncate` cuts older messages as they are sent to a model.
   */
  async history(options: { leafId?: string; raw?: boolean; truncate?: boolean } = {}): Promise<Message[]> {
    const query = {
      leaf: options.leafId,
      raw: options.raw === undefined ? undefined : options.raw ? "1" as const : "0" as const,
      truncate: options.truncate === undefined ? undefined : options.truncate ? "1" as const : "0" as const,
    };
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/history", { path: this.path, query })).messages;
  }

  /**
   * One page of the path: at most `limit` messages ending at `leafId` (default: the latest
   * leaf), or with `before` (a `nextBefore`) the ones above that message. Walk up a long path
   * with `nextBefore` until it is `null`.
   */
  async historyPage(options: { limit?: number; before?: string; leafId?: string; raw?: boolean }): Promise<HistoryPage> {
    const query = {
      limit: options.limit,
      before: options.before,
      leaf: options.leafId,
      raw: options.raw === undefined ? undefined : options.raw ? "1" as const : "0" as const,
    };
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/history", { path: this.path, query });
  }

  /**
   * The most recent messages of the latest branch within `maxBytes`; with `before` (a
   * `nextBefore`), the window of the path above that message.
   */
  async recent(options: { maxBytes: number; minMessages?: number; before?: string }): Promise<RecentHistory> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/history/recent", { path: this.path, query: options });
  }

  /** The latest leaf, or `null` when the session has no message. */
  async leaf(): Promise<Message | null> {
    try {
      return await this.agent.request("get", "/agents/{agent}/sessions/{sid}/leaf", { path: this.path });
    } catch (e) {
      if (e instanceof SessionAgentError && e.code === "not_found") return null;
      throw e;
    }
  }

  /** The children of a message: the branches that start after it. */
  async branches(mid: string): Promise<Message[]> {
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/messages/{mid}/branches", {
      path: { ...this.path, mid },
    })).messages;
  }

  /** A page of a message's children: the newest `limit`, or those older than `before`. */
  async branchesPage(mid: string, options: { limit?: number; before?: string }): Promise<HistoryPage> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/messages/{mid}/branches", {
      path: { ...this.path, mid }, query: options,
    });
  }

  /** How many messages the path root → `leafId` (default: the latest leaf) has. */
  async pathLength(options: { leafId?: string } = {}): Promise<number> {
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/path-length", {
      path: this.path, query: { leaf: options.leafId },
    })).length;
  }

  /** Full-text search in this session. */
  async search(q: string, options: { limit?: number } = {}): Promise<SearchHit[]> {
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/search", {
      path: this.path, query: { q, ...options },
    })).results;
  }

  /** The session's summary overlays. */
  async compactions(): Promise<Compaction[]> {
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/compactions", { path: this.path })).compactions;
  }

  /** Stores a summary overlay of your own. */
  async addCompaction(input: CreateCompactionRequest): Promise<Compaction> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/compactions", { path: this.path, body: input });
  }

  /** The original messages behind an overlay, paged. */
  async expandCompaction(cid: string, options: { offset?: number; limit?: number } = {}) {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/compactions/{cid}/messages", {
      path: { ...this.path, cid }, query: options,
    });
  }

  /** Summarizes the middle of a path with the configured LLM; `null` when there is nothing to do. */
  async compact(options: { leafId?: string | null } = {}): Promise<Compaction | null> {
    return (await this.agent.request("post", "/agents/{agent}/sessions/{sid}/compact", {
      path: this.path, body: options,
    })).compaction;
  }

  /** The frozen system prompt. */
  async prompt(): Promise<Prompt> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/prompt", { path: this.path });
  }

  /** Renders the system prompt again and stores it; the new prompt. */
  async refreshPrompt(): Promise<string> {
    return (await this.agent.request("post", "/agents/{agent}/sessions/{sid}/prompt/refresh", { path: this.path })).prompt;
  }

  /** The LLM tools generated for this session. */
  async tools(): Promise<Tool[]> {
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/tools", { path: this.path })).tools;
  }

  /** Runs one of the session's tools as the model would; the output string the model sees. */
  async executeTool(name: ToolName, input: Record<string, unknown> = {}): Promise<string> {
    return (await this.agent.request("post", "/agents/{agent}/sessions/{sid}/tools/{name}", {
      path: { ...this.path, name }, body: { input },
    })).output;
  }

  /**
   * One agent turn: the model answers `message` (a new `user` message) with the session's
   * prompt, history and tools. Streams (`onDelta` gets each piece of text) and resolves with
   * the one assistant message the turn stored. Throws `SessionAgentError` when the turn is
   * refused or fails (an `error` event of the stream included).
   */
  async chat(message: UserMessage, options: ChatOptions = {}): Promise<AssistantMessage> {
    const { onDelta, signal, ...rest } = options;
    return this.#turn({ message, ...rest }, onDelta, signal);
  }

  /**
   * Continues a turn after client tools: `messages` is the branch as `history({leafId})`
   * answered it, with the pending tool calls answered.
   */
  async continue(messages: Message[], options: ContinueOptions = {}): Promise<AssistantMessage> {
    const { onDelta, signal, ...rest } = options;
    return this.#turn({ messages, ...rest }, onDelta, signal);
  }

  async #turn(
    body: ChatRequest,
    onDelta: ((text: string, messageId: string) => void) | undefined,
    signal: AbortSignal | undefined,
  ): Promise<AssistantMessage> {
    const what = "POST /agents/{agent}/sessions/{sid}/chat";
    const res = await this.agent.raw("post", "/agents/{agent}/sessions/{sid}/chat", {
      path: this.path, body, headers: { accept: "text/event-stream" }, ...(signal ? { signal } : {}),
    });
    if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream") || !res.body) {
      const result = (await res.json()) as ChatResult;
      return result.messages[0]!;
    }
    let reply: AssistantMessage | undefined;
    for await (const data of sseData(res.body)) {
      if (data === "[DONE]") break;
      const event = JSON.parse(data) as ChatEvent;
      if (event.type === "delta") onDelta?.(event.text, event.messageId);
      else if (event.type === "message") reply = event.message;
      else if (event.type === "error") {
        const code = isErrorCode(event.code) ? event.code : "internal";
        throw new SessionAgentError(ERROR_STATUS[code], event.code as typeof code, event.message);
      }
    }
    if (!reply) throw new SessionAgentError(ERROR_STATUS.internal, "internal", `${what}: the stream ended without the reply`);
    return reply;
  }

  /**
   * Stops the session's running turn: it keeps what was shown (`metadata.stopped`). Resolves
   * with whether a turn was running.
   */
  async stop(): Promise<boolean> {
    return (await this.agent.request("post", "/agents/{agent}/sessions/{sid}/chat/stop", { path: this.path })).stopped;
  }

  /** Distills the latest exchange (to `leafId`) into long-term memories now. */
  async extractMemories(options: { leafId?: string | null } = {}): Promise<Extracted> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/memories/extract", { path: this.path, body: options });
  }

  /** The session as one JSON document (format `session-agent/1`). */
  async export(): Promise<SessionExport> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/export", { path: this.path });
  }

  /**
   * Opens the session's WebSocket (HTTP clients only) and keeps it open: typed frames in
   * `onFrame`, `send()` for client frames, reconnects with backoff after an unexpected close.
   */
  connect(options: ConnectOptions): SessionSocket {
    return new SessionSocket(this.agent.client.socketUrl(this.agent.name, this.id, options.token), options);
  }
}

/** `…/context`: the session's context blocks, and the entries of `search` blocks. */
export class ContextBlocks {
  constructor(
    private readonly agent: AgentClient,
    private readonly sid: string,
  ) {}

  /** Every block, as the prompt renders it. */
  async list(): Promise<ContextBlock[]> {
    return (await this.agent.request("get", "/agents/{agent}/sessions/{sid}/context", { path: { sid: this.sid } })).blocks;
  }

  /** Adds a block to this session at run time. */
  async add(block: AddBlockRequest): Promise<ContextBlock> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/context", { path: { sid: this.sid }, body: block });
  }

  async get(label: string): Promise<ContextBlock> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/context/{label}", { path: { sid: this.sid, label } });
  }

  /** Replaces a writable block's text. */
  async set(label: string, content: string): Promise<ContextBlock> {
    return this.agent.request("put", "/agents/{agent}/sessions/{sid}/context/{label}", {
      path: { sid: this.sid, label }, body: { content },
    });
  }

  /** Appends to a writable block's text. */
  async append(label: string, content: string): Promise<ContextBlock> {
    return this.agent.request("post", "/agents/{agent}/sessions/{sid}/context/{label}/append", {
      path: { sid: this.sid, label }, body: { content },
    });
  }

  /** Removes the block from this session. */
  async remove(label: string): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/sessions/{sid}/context/{label}", { path: { sid: this.sid, label } });
  }

  /** One page of a search block's entries. */
  async entries(label: string, options: { limit?: number; cursor?: string } = {}): Promise<SearchEntryList> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/context/{label}/entries", {
      path: { sid: this.sid, label }, query: options,
    });
  }

  /** Adds up to 1,000 entries to a search block, all or nothing; their keys. */
  async ingest(label: string, entries: IngestEntriesRequest["entries"]): Promise<string[]> {
    return (await this.agent.request("post", "/agents/{agent}/sessions/{sid}/context/{label}/entries", {
      path: { sid: this.sid, label }, body: { entries },
    })).keys;
  }

  async entry(label: string, key: string): Promise<SearchEntry> {
    return this.agent.request("get", "/agents/{agent}/sessions/{sid}/context/{label}/entries/{key}", {
      path: { sid: this.sid, label, key },
    });
  }

  async deleteEntry(label: string, key: string): Promise<void> {
    await this.agent.request("delete", "/agents/{agent}/sessions/{sid}/context/{label}/entries/{key}", {
      path: { sid: this.sid, label, key },
    });
  }
}

/** A text message (`{id, role, parts: [{type: "text", text}]}`) with a random id unless given. */
export function textMessage<R extends string>(role: R, text: string, id: string = crypto.randomUUID()) {
  return { id, role, parts: [{ type: "text", text }] } satisfies Message;
}
