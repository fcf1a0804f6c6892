// The AI SDK's chat client, framework-free: AbstractChat (what @ai-sdk/react's useChat,
// @ai-sdk/vue and @ai-sdk/svelte wrap) with a small ChatState that tells the console when to
// draw, and DefaultChatTransport posting the useChat body {id, messages, trigger, messageId?}
// to POST /agents/{agent}/sessions/{sid}/chat, which answers the AI SDK UI message stream.
import { AbstractChat, DefaultChatTransport } from "ai";

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
 * A chat on one session. `token()` is read at each request (the user may paste a new one);
 * `onChange()` is called on every change of messages, status or error; `onFinish` as
 * AbstractChat calls it.
 */
export class SessionChat extends AbstractChat {
  constructor({ sid, api, token, messages = [], onChange, onFinish, onError }) {
    super({
      id: sid,
      generateId: newId,
      state: new ChatState(messages, onChange),
      transport: new DefaultChatTransport({ api, headers: () => ({ authorization: "Bearer " + token() }) }),
      onFinish,
      onError,
    });
  }
}

/**
 * The `{code, message}` of a failed turn: an error answer before the stream
 * (`{"error":{code,message}}`, the AI SDK's APICallError carries it as its message and
 * `statusCode`) or the stream's `error` chunk (its `errorText`).
 */
export function turnError(e) {
  const text = String(e?.responseBody ?? e?.message ?? e);
  try {
    const j = JSON.parse(text);
    if (j && j.error) return { code: j.error.code || "error", message: j.error.message || text, status: e.statusCode };
  } catch { /* not JSON */ }
  const m = /^([a-z_]+): ([\s\S]*)$/.exec(text); // an error chunk's errorText: "<code>: <message>"
  if (m) return { code: m[1], message: m[2], status: e?.statusCode };
  return { code: e?.statusCode ? "http_" + e.statusCode : "error", message: text, status: e?.statusCode };
}
