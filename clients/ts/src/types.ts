// Friendly names for the generated types (src/openapi.ts, from docs/openapi.yaml), the
// WebSocket frames among them.
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** An AI SDK `UIMessage`, stored verbatim. */
export type Message = Schemas["Message"];
export type MessagePart = Schemas["MessagePart"];
/** Where an appended message attaches: absent → the latest leaf, `null` → a new root. */
export type ParentId = Schemas["ParentId"];
export type SessionInfo = Schemas["SessionInfo"];
export type SearchHit = Schemas["SearchHit"];
export type Compaction = Schemas["Compaction"];
export type CompactionReport = Schemas["CompactionReport"];
export type AppendResult = Schemas["AppendResult"];
export type BatchResult = Schemas["BatchResult"];
export type RecentHistory = Schemas["RecentHistory"];
/** A page of a path or of a message's children, with the cursor of the page above. */
export type HistoryPage = Schemas["HistoryPage"];
export type CreateSessionRequest = Schemas["CreateSessionRequest"];
export type UpdateSessionRequest = Schemas["UpdateSessionRequest"];
/** A session's or a memory's metadata: a flat object of strings, numbers and booleans. */
export type Metadata = Schemas["Metadata"];
export type ForkRequest = Schemas["ForkRequest"];
export type UsageRequest = Schemas["UsageRequest"];
/** What a session holds: its rows and the bytes they store in SQLite, its spilled bytes in R2. */
export type SessionStorage = Schemas["SessionStorage"];
export type SplitRequest = Schemas["SplitRequest"];
export type CreateCompactionRequest = Schemas["CreateCompactionRequest"];
export type ContextBlock = Schemas["ContextBlock"];
export type AddBlockRequest = Schemas["AddBlockRequest"];
export type SearchEntry = Schemas["SearchEntry"];
export type SearchEntryList = Schemas["SearchEntryList"];
export type IngestEntriesRequest = Schemas["IngestEntriesRequest"];
export type Prompt = Schemas["Prompt"];
export type Tool = Schemas["Tool"];
export type ToolName = Tool["name"];
export type ClientTool = Schemas["ClientTool"];
export type ChatRequest = Schemas["ChatRequest"];
/** The body of a new turn (`{message, parentId?, tools?, memory?}`). */
export type NewTurnRequest = Extract<ChatRequest, { message: unknown }>;
/** The body of a continuation after client tools (`{messages, tools?, memory?}`). */
export type ContinuationRequest = Exclude<Extract<ChatRequest, { messages: unknown }>, { trigger: unknown }>;
/**
 * The AI SDK `useChat` body (`{messages, trigger, …}`), answered with the AI SDK's UI message
 * stream: for `DefaultChatTransport`, not for this client's `chat()`.
 */
export type UseChatRequest = Extract<ChatRequest, { trigger: unknown }>;
/** The user message of a new turn. */
export type UserMessage = NewTurnRequest["message"];
/** The one assistant message an agent turn stores. */
export type AssistantMessage = Schemas["AssistantMessage"];
export type ChatResult = Schemas["ChatResult"];
/** One server-sent event of `POST …/chat` with `Accept: text/event-stream`. */
export type ChatEvent = Schemas["ChatEvent"];
export type Memory = Schemas["Memory"];
export type MemoryCategory = Schemas["MemoryCategory"];
export type MemoryList = Schemas["MemoryList"];
export type MemoryHit = Schemas["MemoryHit"];
export type MemoryVersion = Schemas["MemoryVersion"];
export type CreateMemoryRequest = Schemas["CreateMemoryRequest"];
export type UpdateMemoryRequest = Schemas["UpdateMemoryRequest"];
export type PutMemoryRequest = Schemas["PutMemoryRequest"];
/** A call's memory spec (`memory` of a chat body): overrides the agent's memory config for one turn. */
export type ChatMemorySpec = Schemas["ChatMemorySpec"];
export type Schedule = Schemas["Schedule"];
export type ScheduleRun = Schemas["ScheduleRun"];
/** What a scheduled run reads across sessions: its session only, or every session. */
export type ScheduleReach = Schemas["ScheduleReach"];
export type CreateScheduleRequest = Schemas["CreateScheduleRequest"];
export type UpdateScheduleRequest = Schemas["UpdateScheduleRequest"];
export type DeleteMemoriesRequest = Schemas["DeleteMemoriesRequest"];
export type Extracted = Schemas["Extracted"];
export type TokenScope = Schemas["TokenScope"];
export type IssueTokenRequest = Schemas["IssueTokenRequest"];
export type IssuedToken = Schemas["IssuedToken"];
export type RevokeTokensRequest = Schemas["RevokeTokensRequest"];
export type Revocation = Schemas["Revocation"];
export type SpaceChoice = Schemas["SpaceChoice"];
export type SharedBlock = Schemas["SharedBlock"];
export type SessionExport = Schemas["SessionExport"];
export type SessionImport = Schemas["SessionImport"];
export type ImportCounts = Schemas["ImportCounts"];
export type SpaceImportCounts = Schemas["SpaceImportCounts"];
/** The body of every error answer: `{"error": {"code", "message"}}`. */
export type ErrorBody = Schemas["Error"];

/** Every `error.code` of the spec's `Error` schema (derived: it follows the spec). */
export type ApiErrorCode = ErrorBody["error"]["code"];
/** An error code as the client reports it: the spec's codes. */
export type ErrorCode = ApiErrorCode;

// ---------------------------------------------------------------------------------------------
// WebSocket frames (`GET …/sessions/{sid}/ws`).

type SpecServerFrame = Schemas["ServerFrame"];
type SpecFrame<T extends SpecServerFrame["type"]> = Extract<SpecServerFrame, { type: T }>;

/** Answer to a `history` frame (to the sending socket only). */
export type HistoryFrame = SpecFrame<"history">;
/** Answer to a `ping` frame. */
export type PongFrame = SpecFrame<"pong">;
/** A frame (or the turn of a `chat` frame) failed; the socket stays open. */
export type ErrorFrame = SpecFrame<"error">;
/**
 * A stored message (every socket of the session). `pending: true` is the echo a socket gets of
 * its own `chat` frame's user message at once, before the turn has stored it.
 */
export type MessageFrame = SpecFrame<"message">;
/** A piece of the reply's text while a turn streams. */
export type DeltaFrame = SpecFrame<"delta">;
/** The branch's token estimate (`idle`) and compaction progress (`compacting`). */
export type StatusFrame = SpecFrame<"status">;
/** A long-term memory was created, updated or deleted (sockets not limited to sessions). */
export type MemoryFrame = SpecFrame<"memory">;
/** A schedule's run ended (sockets not limited to sessions). */
export type ScheduleFrame = SpecFrame<"schedule">;
/** Messages were deleted. */
export type DeletedFrame = SpecFrame<"deleted">;
/** The session's messages were cleared. */
export type ClearedFrame = SpecFrame<"cleared">;
/** A context block changed, by a route or a tool. */
export type ContextFrame = SpecFrame<"context">;
/**
 * A turn's tool call as it is made (`input-available`) and answered (`output-available` with
 * `output`, `output-error` with `errorText`).
 */
export type ToolFrame = SpecFrame<"tool">;
/** The reasoning of a finished model step of a turn. */
export type ReasoningFrame = SpecFrame<"reasoning">;

/** Every frame the server sends on a session's WebSocket. */
export type ServerFrame =
  | HistoryFrame
  | PongFrame
  | ErrorFrame
  | MessageFrame
  | DeltaFrame
  | StatusFrame
  | MemoryFrame
  | ScheduleFrame
  | DeletedFrame
  | ClearedFrame
  | ContextFrame
  | ToolFrame
  | ReasoningFrame;

/**
 * Every frame a client may send: `append`, `history`, `chat`, `ping` and `cancel` (stops this
 * socket's running turn).
 */
export type ClientFrame = Schemas["ClientFrame"];
