// Type tests: `tsc -p tsconfig.test.json` (scripts/test.sh step 2, `npm run check`). Each
// `@ts-expect-error` must be an error, so these fail the check if the typing gets looser.
import {
  SessionAgentClient, SessionAgentError, textMessage,
  type ApiErrorCode, type ClientFrame, type ErrorCode, type Message, type ServerFrame,
} from "../src/index.js";
import type { components } from "../src/openapi.js";

declare const stub: { fetch(input: string, init?: RequestInit): Promise<Response> };
const http = new SessionAgentClient({ baseUrl: "https://agents.example", token: "t" });
const viaStub = new SessionAgentClient({ fetcher: stub });
const a = http.agent("a1");
const s = a.session("s1");
const m: Message = textMessage("user", "hello");

/** Exactly equal types. */
type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
const assertType = <T extends true>(): T | undefined => undefined;

// The error codes are the spec's.
assertType<Equal<ApiErrorCode, components["schemas"]["Error"]["error"]["code"]>>();
assertType<Equal<ErrorCode, ApiErrorCode>>();
// @ts-expect-error not a code of the spec
const notACode: ErrorCode = "teapot";
new SessionAgentError(404, "not_found", "x");

export async function typed() {
  // Paths, parameters, bodies and answers come from the spec.
  const leaf = await a.request("get", "/agents/{agent}/sessions/{sid}/leaf", { path: { sid: "s1" } });
  assertType<Equal<typeof leaf, components["schemas"]["Message"]>>();
  // @ts-expect-error no such path
  await a.request("get", "/agents/{agent}/nowhere");
  // @ts-expect-error the path parameter sid is required
  await a.request("get", "/agents/{agent}/sessions/{sid}/leaf");
  // @ts-expect-error GET has no body... and this path has no PUT
  await a.request("put", "/agents/{agent}/sessions");
  // @ts-expect-error maxBytes is a required query parameter
  await a.request("get", "/agents/{agent}/sessions/{sid}/history/recent", { path: { sid: "s1" }, query: {} });
  // @ts-expect-error the erase needs its Confirm header
  await a.request("delete", "/agents/{agent}");
  await a.request("delete", "/agents/{agent}", { headers: { Confirm: "erase" } });
  // @ts-expect-error CreateSessionRequest has `name`
  await a.request("post", "/agents/{agent}/sessions", { body: { title: "x" } });
  const created = await a.request("post", "/agents/{agent}/sessions", { body: { name: "x" } });
  assertType<Equal<typeof created, components["schemas"]["SessionInfo"]>>();
  const deleted = await a.request("delete", "/agents/{agent}/sessions/{sid}", { path: { sid: "s1" } });
  assertType<Equal<typeof deleted, undefined>>();
  const health = await http.request("get", "/healthz");
  assertType<Equal<typeof health, "ok">>();
  const exported = await a.export();
  assertType<Equal<typeof exported, string>>();

  // The surface.
  const appended = await s.append(m, { parentId: null });
  assertType<Equal<typeof appended.inserted, boolean>>();
  // @ts-expect-error a message needs parts
  await s.append({ id: "x", role: "user" });
  const reply = await s.chat(textMessage("user", "hi"), {
    tools: [{ name: "get_location", inputSchema: { type: "object", properties: {} } }],
    onDelta: (text, messageId) => void [text.length, messageId.length],
  });
  assertType<Equal<typeof reply.role, "assistant">>();
  const hits = await a.memories.recall("trains", { limit: 3 });
  assertType<Equal<typeof hits[number]["why"], string>>();
  // Metadata and filters.
  const pro = await a.sessions.list({ metadata: { plan: "pro", seats: 3, vip: true } });
  assertType<Equal<typeof pro[number]["metadata"], components["schemas"]["Metadata"]>>();
  await a.sessions.page({ limit: 10, metadata: { plan: "pro" } });
  await a.search("deploy", { metadata: { plan: "pro" } });
  await s.update({ metadata: { userId: "u-42" } });
  await s.update({ name: "renamed" });
  await a.memories.list({ category: ["core", "daily"], tag: ["x", "y"], anyTag: "z", createdAfter: "2026-11-01", metadata: { n: 30 } });
  await a.memories.recall("trains", { category: "core", metadata: { vip: true }, limit: 3 });
  await a.memories.forgetAll({ tag: ["x"], metadata: { n: 30 } });
  // @ts-expect-error not a category
  await a.memories.list({ category: "forever" });
  // @ts-expect-error metadata filters are strings, numbers or booleans
  await a.memories.list({ metadata: { nested: { a: 1 } } });
  // @ts-expect-error stored metadata is flat too
  await a.memories.store({ content: "x", metadata: { nested: [1] } });
  // @ts-expect-error not a tool of the session
  await s.executeTool("rm_rf", {});
  // Schedules.
  const sch = await a.schedules.create({ prompt: "Morning brief", cron: "30 7 * * 1-5" });
  assertType<Equal<typeof sch.nextRunAt, string | null>>();
  await a.schedules.create({ prompt: "once", at: "2026-11-23T09:00:00.000Z", sessionId: "chat-1" });
  await a.schedules.update(sch.id, { paused: true, every: 3600 });
  const { runs } = await a.schedules.runs(sch.id, { limit: 10 });
  assertType<Equal<typeof runs[number]["status"], "ok" | "error" | "running">>();
  const ran = await a.schedules.run(sch.id);
  assertType<Equal<typeof ran.reply, string | null>>();
  // @ts-expect-error a schedule needs a prompt
  await a.schedules.create({ every: 60 });
  // @ts-expect-error not a field of a schedule change
  await a.schedules.update(sch.id, { nextRunAt: "2026-11-23T09:00:00.000Z" });
  await viaStub.agent().session("s1").history();
}

export function frames(f: ServerFrame): string | undefined {
  switch (f.type) {
    case "error": { const code: ErrorCode = f.code; return code; }
    case "message": return f.pending ? "pending" : f.message.id;
    case "tool": return `${f.toolName} ${f.state}`;
    case "deleted": return f.ids.join();
    case "context": return f.label;
    case "status": return f.phase;
    case "memory": return f.op;
    case "schedule": return `${f.scheduleId} ${f.run.status}`;
    default: return f.type;
  }
}

export function sending() {
  const socket = s.connect({ onFrame: frames });
  const ok: ClientFrame[] = [{ type: "cancel" }, { type: "ping" }, { type: "history", leafId: null }, { type: "append", message: m }];
  for (const f of ok) socket.send(f);
  // @ts-expect-error not a client frame
  socket.send({ type: "subscribe" });
  return notACode;
}

// A continuation is the plain `{messages}` form, never the useChat one (with `trigger`).
assertType<Equal<import("../src/index.js").ContinuationRequest, {
  messages: Message[];
  tools?: components["schemas"]["ClientTool"][];
  memory?: components["schemas"]["ChatMemory"];
  cache?: components["schemas"]["ChatCache"];
}>>();
