// The AI SDK's chat client, framework-free: AbstractChat (what @ai-sdk/react's useChat,
// @ai-sdk/vue and @ai-sdk/svelte wrap) with a small ChatState that tells the console when to
// draw, and DefaultChatTransport posting the useChat body {id, messages, trigger, messageId?}
// to POST /agents/{agent}/sessions/{sid}/chat, which answers the AI SDK UI message stream. The
// transport's requests go through the typed client (its token, its SessionAgentError for an
// error answer).
import { AbstractChat, DefaultChatTransport } from "ai";
import { SessionAgentError } from "../../clients/ts/src/index.ts";

/** The ChatState AbstractChat keeps its messages, status and error in; `onChange` on every change. */
class ChatState {
  constructor(messages, onChange) {
    this._messages = messages;
    this._status = "ready";
    this._error = undefined;
    this.onChange = onChange;
  }
  get messages() { return this._messages; }
  set messages(v) { this._messages = v; this.onChange(); }
  get status() { return this._status; }
  set status(v) { this._status = v; this.onChange(); }
  get error() { return this._error; }
  set error(v) { this._error = v; this.onChange(); }
  pushMessage(m) { this._messages = this._messages.concat(m); this.onChange(); }
  popMessage() { this._messages = this._messages.slice(0, -1); this.onChange(); }
  replaceMessage(i, m) {
    const next = this._messages.slice();
    next[i] = this.snapshot(m); // the stream keeps writing into `m`: keep a copy
    this._messages = next;
    this.onChange();
  }
  snapshot(x) { return structuredClone(x); }
}

export const newId = () => crypto.randomUUID();

/**
 * A chat on one session: `api` is the typed client's SessionClient of it. `onChange()` is
 * called on every change of messages, status or error; `onFinish` as AbstractChat calls it.
 */
export class SessionChat extends AbstractChat {
  constructor({ api, messages = [], onChange, onFinish, onError }) {
    super({
      id: api.id,
      generateId: newId,
      state: new ChatState(messages, onChange),
      transport: new DefaultChatTransport({
        // The useChat body as the transport made it, sent by the client (which adds the token);
        // a GET is the resume request (resumeStream): the session's running turn, or 204.
        fetch: (_url, init) => init.method === "GET"
          ? api.agent.raw("get", "/agents/{agent}/sessions/{sid}/chat/{chatId}/stream", {
            path: { sid: api.id, chatId: api.id }, headers: init.headers, signal: init.signal,
          })
          : api.agent.raw("post", "/agents/{agent}/sessions/{sid}/chat", {
            path: { sid: api.id }, body: init.body, headers: init.headers, signal: init.signal,
          }),
      }),
      onFinish,
      onError,
    });
  }
}

/**
 * The `{code, message}` of a failed turn: an error answer before the stream (the client's
 * SessionAgentError) or the stream's `error` chunk (its `errorText`, "<code>: <message>").
 */
export function turnError(e) {
  if (e instanceof SessionAgentError) return { code: e.code, message: e.message };
  const text = String(e?.message ?? e);
  const m = /^([a-z_]+): ([\s\S]*)$/.exec(text);
  return m ? { code: m[1], message: m[2] } : { code: "error", message: text };
}
