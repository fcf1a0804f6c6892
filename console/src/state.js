// The console's state, in parts with one owner each; the entry (main.js) hands every module the
// parts it needs, and there is no global object. `Auth`: the scoped token, its claims and the
// typed client (@session-agent/client, bundled in from clients/ts/src) that acts with them.
// `OpenSession`: everything about the session on screen, a new one for each session opened, so
// an answer that comes back for a session left since is told by identity and dropped. `Tree`:
// a session's message tree as its export lists it. `store`: localStorage, when there is one.
import { SessionAgentClient, SessionAgentError } from "../../clients/ts/src/index.ts";

export const store = {
  get(k) { try { return localStorage.getItem(k); } catch { return null; } },
  set(k, v) { try { if (v) localStorage.setItem(k, v); else localStorage.removeItem(k); } catch { /* no storage */ } },
};

/** The claims of a scoped token (a JWT the front door signed), or null for anything else. */
export function claimsOf(token) {
  const p = token.split(".");
  if (p.length !== 3) return null;
  try {
    const c = JSON.parse(atob(p[1].replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(p[1].length / 4) * 4, "=")));
    return c && typeof c.sub === "string" && (c.scope === "read" || c.scope === "write") ? c : null;
  } catch { return null; }
}

/** What the status line says of a failed call: `code: message` for the API's errors. */
export const errorText = (e) => (e instanceof SessionAgentError ? e.code + ": " + e.message : String(e?.message ?? e));

/** The token the console acts with (a scoped one, or none), kept in localStorage. */
export class Auth {
  /** `agent()`: the agent the page is on (the header's field; a token's `sub` is put there). */
  constructor(agent) {
    this.agent = agent;
    this.token = "";
    this.claims = null;
    this.client = null;
  }

  /**
   * Takes `t` as the token if it is a scoped one ("" clears it) and keeps it in localStorage;
   * anything else (the admin token…) is dropped unsent and unstored: false then.
   */
  set(t) {
    t = (t || "").trim();
    const claims = t ? claimsOf(t) : null;
    const ok = !t || !!claims;
    this.token = ok ? t : "";
    this.claims = claims;
    store.set("sa-token", this.token || null);
    return ok;
  }

  /** The typed client's AgentClient for the token and the agent, made again when either changes. */
  api() {
    if (!this.token) throw new Error("no_token: paste a scoped token first");
    const agent = this.agent();
    if (this.client?.token !== this.token || this.client.agent !== agent) {
      const api = new SessionAgentClient({ baseUrl: location.origin, token: this.token }).agent(agent);
      this.client = { token: this.token, agent, api };
    }
    return this.client.api;
  }
}

/** A session's message tree: every message of every branch with its parent, in write order. */
export class Tree {
  /** From the `messages` of the session's export (`[{parentId, message}]`); empty without. */
  constructor(rows = []) {
    this.nodes = new Map(); // id → {id, parentId, idx (write order), role}
    this.kids = new Map();  // parent id ("" for the roots) → child ids, oldest first
    this.latest = null;     // the last message written
    for (const [idx, row] of rows.entries()) {
      const id = row.message.id;
      this.nodes.set(id, { id, parentId: row.parentId, idx, role: row.message.role });
      this.latest = id;
    }
    for (const n of this.nodes.values()) {
      const key = this.#parentKey(n);
      if (!this.kids.has(key)) this.kids.set(key, []);
      this.kids.get(key).push(n.id);
    }
  }

  get size() { return this.nodes.size; }
  has(id) { return this.nodes.has(id); }

  #parentKey(n) { return n.parentId != null && this.nodes.has(n.parentId) ? n.parentId : ""; }

  /** The siblings of message `id` (itself included, oldest first), or null when it is not in the tree. */
  siblings(id) {
    const n = this.nodes.get(id);
    return n ? this.kids.get(this.#parentKey(n)) || [id] : null;
  }

  /** The newest leaf at or under message `id`: the last-written message of its subtree. */
  newestLeafUnder(id) {
    let best = id;
    const walk = (x) => {
      for (const k of this.kids.get(x) || []) { if (this.nodes.get(k).idx > this.nodes.get(best).idx) best = k; walk(k); }
    };
    walk(id);
    return best;
  }
}

/** The session on screen. Made by tree.js when a session opens; dropped when it closes. */
export class OpenSession {
  /** `api`: the typed client's SessionClient of session `sid`. */
  constructor(sid, api) {
    this.sid = sid;
    this.api = api;
    this.chat = null;          // the AI SDK chat on it (chat.js): the shown branch is its messages
    this.info = null;          // its SessionInfo (from its export, else from the list)
    this.tree = new Tree();
    this.compactions = [];
    this.leaf = null;          // the leaf of the shown branch
    this.want = null;          // the leaf of the branch last asked for (shown, or on its way)
    this.turnLeaf = null;      // the leaf before the running turn (what to show again if it fails)
    this.sentText = null;      // the text of the running turn's new user message
    this.syncing = false;      // a turn ended and the tree is being read again
    this.dirty = false;        // something changed while a turn ran: read the tree again after it
    this.own = new Set();      // the reply ids of this page's turns: their socket frames are not another client's
    this.ghost = null;         // a reply streamed by another client: {id, text, tools, reasoning, timer}
    this.estimate = null;      // the last `status` frame (the branch's token estimate)
    this.nav = 0;              // bumped on every branch asked for: only the latest is drawn
    this.treeSeq = 0;          // bumped on every read of the tree: an older answer never replaces a newer one
    this.refreshTimer = null;
    this.socket = null;        // its SessionSocket (socket.js)
    this.pingTimer = null;
  }

  /** Whether a turn of this page runs (sent, or its reply streaming). */
  get busy() {
    const s = this.chat?.status;
    return s === "submitted" || s === "streaming";
  }
}
