// The AI SDK's chat client as a framework binding sets it up, for the tests that drive the
// Worker with it (ai-sdk.test.mjs, turns.test.mjs): AbstractChat (what `useChat` wraps) over a
// plain array state, replaced on each change, that also records every message the stream wrote.
import { AbstractChat } from "ai";

/** The state a framework binding would give AbstractChat: an array, replaced on each change. */
export class ArrayState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
    /** Every message the stream wrote, in order (copies): to see the reply grow. */
    this.writes = [];
  }
  pushMessage = (m) => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => {
    this.writes.push(structuredClone(m));
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = (x) => structuredClone(x);
}

/** AbstractChat over an ArrayState (`view`), starting from `messages` (a reloaded history). */
export class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    const state = new ArrayState(messages);
    super({ ...init, state });
    this.view = state;
  }
}
