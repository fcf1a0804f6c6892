// @session-agent/client: a typed client for session-agent over HTTP (browsers, Node), straight
// to its Durable Object from a Worker, and over a session's WebSocket.
export {
  SessionAgentClient, AgentClient, SessionClient, SpaceClient, Sessions, Memories, Schedules, Tokens, ContextBlocks, textMessage,
  type ClientOptions, type HttpClientOptions, type FetcherClientOptions, type NamespaceClientOptions,
  type FetchLike, type FetcherLike, type NamespaceLike, type ChatOptions, type ContinueOptions, type Held,
  type MemoryFilters, type MetadataFilter,
} from "./client.js";
export { SessionAgentError, ERROR_STATUS, isErrorCode } from "./errors.js";
export {
  SessionSocket,
  type ConnectOptions, type ReconnectOptions, type OpenInfo, type CloseInfo, type SocketState,
  type WebSocketLike, type WebSocketConstructor,
} from "./socket.js";
export type {
  HttpMethod, Operation, PathsWith, AgentPathsWith, RequestOptions, SuccessOf,
} from "./request.js";
export type * from "./types.js";
export type { paths, components, operations } from "./openapi.js";
