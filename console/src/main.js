// The console at `/`: where a developer looks into an agent's memory. Sessions (list, create,
// rename, delete, search across them), a session's conversation as a tree (the shown branch
// with a ‹ k/n › switcher on every message that has siblings, regenerate and edit-and-resend
// as new branches), chat through the AI SDK's chat client (./chat.js) with a stop button, live
// updates over the session's WebSocket (reconnecting), and panels for the frozen system
// prompt and context blocks, the agent's memories and the session's compactions with their
// originals. It acts with a scoped token the user pastes (never the admin token) and renders
// every text with ./markdown.js, which builds DOM nodes and never parses HTML.
import { h, $, ago, pretty } from "./dom.js";
import { markdown } from "./markdown.js";
import { SessionChat, turnError } from "./chat.js";
import { SessionAgentClient, SessionAgentError } from "../../clients/ts/src/index.ts";

const el = {
  token: $("token"), agent: $("agent"), tokenInfo: $("token-info"), sessions: $("sessions"), search: $("search"),
  results: $("search-results"), head: $("session-head"), messages: $("messages"), status: $("status"),
  input: $("input"), send: $("send"), stop: $("stop"), form: $("composer"),
};
const store = {
  get(k) { try { return localStorage.getItem(k); } catch { return null; } },
  set(k, v) { try { if (v) localStorage.setItem(k, v); else localStorage.removeItem(k); } catch { /* no storage */ } },
};

const S = {
  token: "", claims: null,
  sessions: [],
  sid: null, session: null, chat: null,
  tree: new Map(), kids: new Map(), latest: null, // the session's message tree (from its export)
  compactions: [],
  leaf: null,           // the leaf of the shown branch
  want: null,           // the leaf of the branch last asked for (shown, or on its way)
  turnLeaf: null,       // the leaf before the running turn (what to show again if it fails)
  sentText: null,       // the text of the running turn's new user message
  ghost: null,          // a reply streamed by another client: {id, text, tools, reasoning, at}
  syncing: false,       // a turn ended and the tree is being read again
  own: new Set(),       // the reply ids of this page's turns: their socket frames are not another client's
  estimate: null,
  ws: null, pingTimer: null, refreshTimer: null, dirty: false, // ws: the session's SessionSocket
  gen: 0,               // bumped on every session switch: late answers of the old one are dropped
  nav: 0,               // bumped on every branch shown: only the latest asked for is drawn
  treeSeq: 0,           // bumped on every read of the tree: an older answer never replaces a newer one
  panel: "context",
};

// ── status line, token, API ───────────────────────────────────────────────────────────────────

function status(text, err) { el.status.textContent = text; el.status.className = err ? "err" : ""; }
const agent = () => el.agent.value.trim();

/** The claims of a scoped token (a JWT the front door signed), or null for anything else. */
function claimsOf(token) {
  const p = token.split(".");
  if (p.length !== 3) return null;
  try {
    const c = JSON.parse(atob(p[1].replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(p[1].length / 4) * 4, "=")));
    return c && typeof c.sub === "string" && (c.scope === "read" || c.scope === "write") ? c : null;
  } catch { return null; }
}

const NOT_SCOPED = "That is not a scoped token. Paste a token minted with POST /agents/{agent}/tokens (a JWT); never the admin token (API_TOKEN): the console keeps its token in this browser.";

/** Takes `t` as the token if it is a scoped one; anything else (the admin token…) is dropped unused. */
function setToken(t) {
  t = (t || "").trim();
  const c = t ? claimsOf(t) : null;
  if (t && !c) {
    el.token.value = "";
    S.token = ""; S.claims = null;
    store.set("sa-token", null);
    showTokenInfo();
    status(NOT_SCOPED, true);
    return false;
  }
  S.token = t; S.claims = c;
  el.token.value = t;
  store.set("sa-token", t || null);
  if (c && c.sub !== agent()) { el.agent.value = c.sub; store.set("sa-agent", c.sub); }
  showTokenInfo();
  return !!t;
}

function showTokenInfo() {
  const c = S.claims;
  el.tokenInfo.className = "";
  if (!c) { el.tokenInfo.textContent = ""; return; }
  const left = c.exp * 1000 - Date.now();
  const exp = left <= 0 ? "expired" : left < 3600e3 ? "expires in " + Math.ceil(left / 60e3) + " min" : "expires " + new Date(c.exp * 1000).toISOString().slice(0, 16).replace("T", " ");
  el.tokenInfo.textContent = c.scope + " · " + c.sub + (c.sessions ? " · " + c.sessions.length + " session(s) only" : "") + " · " + exp;
  if (left <= 0 || c.sessions) el.tokenInfo.className = "warn";
}

let client = null;

/** The typed client (@session-agent/client) on the agent, with the token; made again when either changes. */
function api() {
  if (!S.token) throw new Error("no_token: paste a scoped token first");
  if (client?.token !== S.token || client.agent !== agent()) {
    client = { token: S.token, agent: agent(), api: new SessionAgentClient({ baseUrl: location.origin, token: S.token }).agent(agent()) };
  }
  return client.api;
}
const sapi = (sid = S.sid) => api().session(sid);

/** What the status line says of a failed call: `code: message` of the API's errors. */
const errorText = (e) => (e instanceof SessionAgentError ? e.code + ": " + e.message : String(e?.message ?? e));

// ── sessions ──────────────────────────────────────────────────────────────────────────────────

async function loadSessions() {
  if (!S.token) { status("Paste a scoped token (POST /agents/{agent}/tokens), never the admin token (or open the page as /#token=…)", true); return; }
  try {
    // A token limited to some sessions may not list them: its own list is in its claims.
    S.sessions = S.claims?.sessions
      ? await Promise.all(S.claims.sessions.map((id) => sapi(id).info().catch(() => ({ id, name: id, messageCount: 0 }))))
      : await api().sessions.list();
    renderSessions();
    if (!S.sessions.length && !S.sid) status("No sessions yet: create one, or just send a message.");
  } catch (e) { status("Listing sessions failed: " + errorText(e), true); }
}

function renderSessions() {
  el.sessions.replaceChildren(...S.sessions.map((s) => {
    const li = h("li", { dataset: { sid: s.id }, class: s.id === S.sid ? "active" : "" });
    const open = h("button.open", { type: "button", title: s.id, onclick: () => openSession(s.id) },
      h("span.name", null, s.name || s.id),
      h("small", null, s.messageCount + " msg · " + ago(s.updatedAt) + (s.name !== s.id ? " · " + s.id : "")));
    const rename = h("button.icon.rename", { type: "button", title: "Rename", onclick: () => startRename(li, s) }, "✎");
    const del = h("button.icon.delete", { type: "button", title: "Delete", onclick: () => confirmDelete(li, s) }, "✕");
    li.append(open, h("span.tools", null, rename, del));
    return li;
  }));
}

async function newSession() {
  try {
    const s = await api().sessions.create({ name: "Session " + new Date().toISOString().slice(0, 16).replace("T", " "), source: "console" });
    await loadSessions();
    await openSession(s.id, { created: s });
    return s.id;
  } catch (e) { status("Creating a session failed: " + errorText(e), true); return null; }
}

function startRename(li, s) {
  const input = h("input.rename-input", { value: s.name || s.id, maxlength: 256, "aria-label": "New name" });
  const save = async () => {
    const name = input.value.trim();
    if (!name || name === s.name) { renderSessions(); return; }
    try { await sapi(s.id).rename(name); status("Renamed to " + name); } catch (e) { status("Renaming failed: " + errorText(e), true); }
    await loadSessions();
    if (s.id === S.sid) renderHead();
  };
  input.onkeydown = (e) => { if (e.key === "Enter") { e.preventDefault(); save(); } else if (e.key === "Escape") renderSessions(); };
  li.replaceChildren(h("form.rename", { onsubmit: (e) => { e.preventDefault(); save(); } }, input,
    h("button", { type: "submit" }, "Save"), h("button", { type: "button", onclick: renderSessions }, "Cancel")));
  input.focus(); input.select();
}

function confirmDelete(li, s) {
  li.replaceChildren(h("div.confirm", null, h("span", null, "Delete “" + (s.name || s.id) + "” and everything stored for it?"),
    h("button.danger.yes", { type: "button", onclick: async () => {
      // Closed first: left open, its socket brings the delete back as a frame, whose refresh
      // would read the export of a session that is gone (a 404 in the browser's log).
      if (s.id === S.sid) closeSession();
      try { await sapi(s.id).delete(); status("Deleted " + s.id); } catch (e) { status("Deleting failed: " + errorText(e), true); }
      await loadSessions();
    } }, "Delete"),
    h("button.no", { type: "button", onclick: renderSessions }, "Cancel")));
}

// ── search across sessions ────────────────────────────────────────────────────────────────────

async function search(q) {
  if (!q.trim()) { el.results.hidden = true; el.results.replaceChildren(); return; }
  try {
    const results = await api().search(q, { limit: 20 });
    el.results.hidden = false;
    el.results.replaceChildren(
      h("li.results-head", null, results.length ? results.length + " hit(s)" : "No message matches “" + q + "”",
        h("button.icon", { type: "button", title: "Close", onclick: () => { el.search.value = ""; search(""); } }, "✕")),
      ...results.map((r) => {
        const s = S.sessions.find((x) => x.id === r.sessionId);
        return h("li.hit", { dataset: { sid: r.sessionId, id: r.id } }, h("button", { type: "button", onclick: () => openSession(r.sessionId, { focus: r.id }) },
          h("small", null, (s?.name || r.sessionId) + " · " + r.role + " · " + ago(r.createdAt)),
          h("span", null, r.content.length > 160 ? r.content.slice(0, 160) + "…" : r.content)));
      }));
  } catch (e) { status("Search failed: " + errorText(e), true); }
}

// ── a session: its tree, the shown branch, the chat ───────────────────────────────────────────

function closeSession() {
  closeSocket();
  clearTimeout(S.refreshTimer);
  S.chat?.stop();
  S.sid = null; S.session = null; S.chat = null; S.leaf = null; S.want = null; S.ghost = null; S.tree = new Map(); S.kids = new Map();
  S.compactions = []; S.estimate = null; S.syncing = false; S.sentText = null; S.gen++;
  delete el.messages.dataset.sid;
  setHash();
  renderSessions(); renderHead(); render(); renderPanel();
}

/** Opens session `sid`; `created`: its SessionInfo when this page just made it (no message, no export to read yet). */
async function openSession(sid, { focus, created } = {}) {
  if (sid !== S.sid) {
    closeSession();
    S.sid = sid;
    el.messages.dataset.sid = sid;
    const chat = new SessionChat({
      api: sapi(sid),
      onChange: scheduleRender,
      onFinish: (o) => { if (S.chat === chat) onTurnEnd(o); }, // not a turn of a session left since
    });
    S.chat = chat;
    setHash();
    renderSessions();
    connect();
  }
  const gen = S.gen;
  if (created && !S.tree.size) { S.session = created; renderHead(); } else await loadTree();
  if (gen !== S.gen) return;
  await showBranch(focus && S.tree.has(focus) ? newestLeafUnder(focus) : S.latest);
  if (focus) flash(focus);
  renderPanel();
}

function setHash() {
  const p = new URLSearchParams();
  if (agent()) p.set("agent", agent());
  if (S.sid) p.set("session", S.sid);
  try { history.replaceState(null, "", location.pathname + location.search + "#" + p); } catch { /* file: */ }
}

/** The session's tree from its export: every message of every branch with its parent, in write order. */
async function loadTree() {
  const sid = S.sid;
  const gen = S.gen;
  const seq = ++S.treeSeq;
  let doc = null;
  try { doc = await sapi(sid).export(); } catch (e) { if (e.status !== 404) status("Reading the session failed: " + errorText(e), true); }
  if (gen !== S.gen || seq !== S.treeSeq) return;
  S.tree = new Map(); S.kids = new Map(); S.latest = null;
  for (const [idx, row] of (doc?.messages || []).entries()) {
    const id = row.message.id;
    S.tree.set(id, { id, parentId: row.parentId, idx, role: row.message.role });
    S.latest = id;
  }
  for (const n of S.tree.values()) {
    const key = n.parentId != null && S.tree.has(n.parentId) ? n.parentId : "";
    if (!S.kids.has(key)) S.kids.set(key, []);
    S.kids.get(key).push(n.id);
  }
  S.session = doc?.session ? { ...doc.session, id: sid } : S.sessions.find((s) => s.id === sid) || null;
  S.compactions = doc?.compactions || [];
  renderHead();
}

/** The siblings of message `id` (itself included, oldest first), or null when it is not in the tree. */
function siblings(id) {
  const n = S.tree.get(id);
  if (!n) return null;
  return S.kids.get(n.parentId != null && S.tree.has(n.parentId) ? n.parentId : "") || [id];
}

/** The newest leaf at or under message `id`: the last-written message of its subtree. */
function newestLeafUnder(id) {
  let best = id;
  const walk = (x) => { for (const k of S.kids.get(x) || []) { if (S.tree.get(k).idx > S.tree.get(best).idx) best = k; walk(k); } };
  walk(id);
  return best;
}

/** Shows the branch from the root to `leaf` (overlays applied, as GET …/history answers it). */
async function showBranch(leaf) {
  const gen = S.gen;
  const nav = ++S.nav;
  S.want = leaf;
  let msgs = [];
  try {
    if (leaf) msgs = await sapi().history({ leafId: leaf });
  } catch (e) {
    if (e.status === 404 && leaf !== S.latest) return showBranch(S.latest);
    status("Reading the history failed: " + errorText(e), true);
  }
  if (gen !== S.gen || nav !== S.nav || !S.chat) return; // another branch was asked for since
  if (busy()) { S.dirty = true; return; } // a turn started meanwhile: its end reads the branch again
  S.leaf = msgs.length ? msgs[msgs.length - 1].id : null;
  if (S.ghost && S.tree.has(S.ghost.id)) S.ghost = null;
  S.chat.messages = msgs;
  scheduleRender();
}

/** Reads the tree again and shows the branch it should: the newest one if it was shown, else the same. */
async function refresh() {
  if (!S.sid) return;
  if (busy() || S.syncing) { S.dirty = true; return; } // the turn's end reads the tree again anyway
  const leaf = S.want; // the branch asked for last, even if its history is still on its way
  const followed = !leaf || leaf === S.latest;
  const nav = S.nav;
  await loadTree();
  if (nav !== S.nav) return; // the user went to another branch meanwhile: that one is drawn
  await showBranch(followed || !S.tree.has(leaf) ? S.latest : leaf);
  loadSessions();
}

function scheduleRefresh() {
  clearTimeout(S.refreshTimer);
  S.refreshTimer = setTimeout(refresh, 120);
}

const busy = () => S.chat && (S.chat.status === "submitted" || S.chat.status === "streaming");

/** Switches message `id` of the shown branch to its sibling `k` steps away, and follows that sibling's newest leaf. */
async function switchBranch(id, k) {
  const sibs = siblings(id);
  if (!sibs || busy()) return;
  const next = sibs[sibs.indexOf(id) + k];
  if (!next) return;
  await showBranch(newestLeafUnder(next));
}

// ── turns ─────────────────────────────────────────────────────────────────────────────────────

async function sendInput() {
  const text = el.input.value.trim();
  if (!text || busy()) return;
  if (!S.token) { status(NOT_SCOPED, true); return; }
  if (!S.sid && !(await newSession())) return;
  await runTurn(() => S.chat.sendMessage({ text }), text);
}

/** Regenerate: the branch up to the user message the reply answers; the server writes a sibling reply. */
async function regenerate(assistantId) {
  if (busy()) return;
  await runTurn(() => S.chat.regenerate({ messageId: assistantId }), null);
}

/** Edit and resend: the branch up to the edited message's parent, plus a new user message (new id: a sibling). */
async function resend(userId, text) {
  if (busy() || !text.trim()) return;
  const i = S.chat.messages.findIndex((m) => m.id === userId);
  if (i < 0) return;
  S.chat.messages = S.chat.messages.slice(0, i);
  await runTurn(() => S.chat.sendMessage({ text: text.trim() }), text.trim());
}

async function runTurn(start, text) {
  S.syncing = true;
  S.turnLeaf = S.leaf;
  S.sentText = text;
  S.ghost = null;
  if (text != null) el.input.value = "";
  status(text != null ? "Sent; waiting for the reply…" : "Regenerating…");
  try { await start(); } catch (e) { onTurnFailed(turnError(e)); }
}

/** AbstractChat's onFinish: a turn ended (done, stopped or failed). */
async function onTurnEnd({ message, isAbort, isError }) {
  if (message?.id) S.own.add(message.id);
  if (isAbort) {
    restoreInput();
    status("Stopped: the turn was aborted and nothing was stored.");
    await afterTurn(S.turnLeaf);
  } else if (isError) {
    onTurnFailed(turnError(S.chat.error));
  } else {
    const usage = message.metadata?.usage;
    status("Reply stored" + (usage ? " (" + usage.inputTokens + " in / " + usage.outputTokens + " out tokens)" : "") + ".");
    S.sentText = null;
    await afterTurn(message.id);
  }
}

function onTurnFailed(err) {
  S.chat?.clearError();
  restoreInput();
  status("The turn failed: " + err.code + ": " + err.message + " (nothing was stored; your message is back in the box)", true);
  afterTurn(S.turnLeaf);
}

function restoreInput() {
  if (S.sentText != null && !el.input.value.trim()) el.input.value = S.sentText;
  S.sentText = null;
}

async function afterTurn(leaf) {
  S.dirty = false;
  const gen = S.gen;
  try {
    await loadTree();
    if (gen !== S.gen) return;
    await showBranch(leaf && S.tree.has(leaf) ? leaf : S.turnLeaf && S.tree.has(S.turnLeaf) ? S.turnLeaf : S.latest);
  } finally {
    if (gen === S.gen) {
      S.syncing = false;
      scheduleRender();
      if (S.dirty) { S.dirty = false; scheduleRefresh(); } // frames that came meanwhile (another client's writes too)
    }
  }
  loadSessions();
  if (S.panel === "compactions" || S.panel === "context") renderPanel();
}

// ── the socket ────────────────────────────────────────────────────────────────────────────────

function wsState(v) { document.body.dataset.ws = v; }

function closeSocket() {
  clearInterval(S.pingTimer);
  wsState("closed");
  if (S.ws) { const ws = S.ws; S.ws = null; ws.close(); }
}

/** The session's SessionSocket: it reopens itself (backoff 250 ms doubling to 5 s) until closed. */
function connect() {
  const sid = S.sid;
  if (!sid || !S.token) return;
  wsState("connecting");
  const ws = sapi(sid).connect({
    reconnect: { initialDelayMs: 250, maxDelayMs: 5000 },
    onOpen: ({ attempts }) => {
      if (S.ws !== ws) return;
      wsState("open");
      clearInterval(S.pingTimer);
      S.pingTimer = setInterval(() => { if (ws.state === "open") ws.send({ type: "ping" }); }, 30000);
      if (attempts > 0) { status("Reconnected to " + sid); refresh(); renderPanel(); } // writes may have come meanwhile
    },
    onFrame: (f) => { if (S.ws === ws) onFrame(f); },
    onClose: ({ code, reconnecting, delayMs }) => {
      if (S.ws !== ws) return;
      clearInterval(S.pingTimer); wsState("closed");
      if (reconnecting) status("Disconnected; reconnecting in " + (delayMs / 1000).toFixed(1) + " s…", true);
      else status("Disconnected" + (code === 1008 ? ": the token expired or was revoked (paste a new one)" : "") + ".", true);
    },
  });
  S.ws = ws;
}

function onFrame(f) {
  if (f.sessionId && f.sessionId !== S.sid) return;
  switch (f.type) {
    case "message":
      if (!f.pending) scheduleRefresh();
      break;
    case "deleted": case "cleared":
      scheduleRefresh();
      break;
    case "delta": case "tool": case "reasoning": {
      if (busy() || S.own.has(f.messageId) || S.tree.has(f.messageId)) break; // our own turn: the chat client shows it
      const g = S.ghost && S.ghost.id === f.messageId ? S.ghost : (S.ghost = { id: f.messageId, text: "", tools: new Map(), reasoning: "" });
      // A turn that fails sends no message frame: its ghost goes once the frames stop.
      clearTimeout(g.timer);
      g.timer = setTimeout(() => { if (S.ghost === g) { S.ghost = null; scheduleRender(); } }, 8000);
      if (f.type === "delta") g.text += f.text || "";
      else if (f.type === "reasoning") g.reasoning += f.text || "";
      else g.tools.set(f.toolCallId, f);
      scheduleRender();
      break;
    }
    case "status":
      S.estimate = f;
      if (f.phase === "compacting") status("Compacting…");
      else if (f.compacted || f.error) { status(f.error ? "Compaction failed: " + f.error.message : "Compacted (" + f.compacted.tokensBefore + " tokens before)", !!f.error); scheduleRefresh(); }
      if (S.ghost && !busy()) scheduleRefresh();
      renderHead();
      break;
    case "context":
      if (S.panel === "context") renderPanel();
      break;
    case "memory":
      if (S.panel === "memories") renderPanel();
      break;
    case "error":
      status("Socket error " + f.code + ": " + f.message, true);
      break;
  }
}

// ── drawing the conversation ──────────────────────────────────────────────────────────────────

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

/** Bubbles by message id with what they were drawn from, so a streamed reply redraws only itself. */
const drawn = new Map();

function render() {
  const chat = S.chat;
  const running = busy();
  el.send.hidden = running;
  el.stop.hidden = !running;
  el.send.disabled = !S.token;
  el.input.placeholder = S.claims?.scope === "read" ? "A read-only token: chatting needs scope write" : "Message (Enter sends, Shift+Enter for a new line)";
  // data-chat: none, submitted, streaming, syncing (the turn ended, the tree is read again), ready, error.
  document.body.dataset.chat = !chat ? "none" : running || !S.syncing ? chat.status : "syncing";
  if (!chat) {
    drawn.clear();
    el.messages.replaceChildren(h("p.empty", null, S.token ? "Pick or create a session." : "Paste a scoped token to begin."));
    return;
  }
  const msgs = chat.messages;
  const nodes = [];
  const seen = new Set();
  msgs.forEach((m, i) => {
    const streaming = running && i === msgs.length - 1 && m.role === "assistant";
    const sibs = siblings(m.id);
    const key = JSON.stringify([m, sibs, streaming, running || S.syncing, i > 0 && msgs[i - 1].role]);
    let d = drawn.get(m.id);
    if (!d || d.key !== key) { d = { key, node: bubble(m, i, { streaming, running: running || S.syncing, sibs }) }; drawn.set(m.id, d); }
    seen.add(m.id);
    nodes.push(d.node);
  });
  if (running && chat.status === "submitted") nodes.push(h("div.msg.pending", { dataset: { role: "assistant" } }, h("div.head", null, h("span.role", null, "assistant")), h("div.body", null, h("span.dots", null, "…"))));
  if (S.ghost && !seen.has(S.ghost.id)) nodes.push(ghostBubble(S.ghost));
  for (const id of drawn.keys()) if (!seen.has(id)) drawn.delete(id);
  if (!nodes.length) nodes.push(h("p.empty", null, "No messages yet: say something."));
  const atBottom = el.messages.scrollHeight - el.messages.scrollTop - el.messages.clientHeight < 40;
  el.messages.replaceChildren(...nodes);
  if (atBottom || running) el.messages.scrollTop = el.messages.scrollHeight;
}

function bubble(m, i, { streaming, running, sibs }) {
  const synthetic = m.id.startsWith("compaction_");
  const d = h("div.msg", { dataset: { role: m.role, id: m.id }, class: (streaming ? "streaming" : "") + (synthetic ? " summary" : "") });
  const head = h("div.head", null, h("span.role", null, synthetic ? "summary" : m.role));
  if (sibs && sibs.length > 1) {
    const k = sibs.indexOf(m.id);
    head.append(h("span.branch", { title: "Branches here: siblings of this message" },
      h("button.prev", { type: "button", title: "Previous branch", disabled: k === 0 || running, onclick: () => switchBranch(m.id, -1) }, "‹"),
      h("span.pos", null, k + 1 + "/" + sibs.length),
      h("button.next", { type: "button", title: "Next branch", disabled: k === sibs.length - 1 || running, onclick: () => switchBranch(m.id, 1) }, "›")));
  }
  const meta = [];
  if (m.metadata?.model) meta.push(m.metadata.model);
  const u = m.metadata?.usage;
  if (u && (u.inputTokens != null || u.outputTokens != null)) meta.push((u.inputTokens ?? "?") + "→" + (u.outputTokens ?? "?") + " tok");
  if (m.createdAt) meta.push(ago(m.createdAt));
  head.append(h("span.meta", { title: m.id }, meta.join(" · ")));
  const body = h("div.body");
  if (!running && !S.syncing && !synthetic && S.tree.has(m.id)) {
    if (m.role === "assistant" && i > 0 && S.chat.messages[i - 1].role === "user") {
      head.append(h("button.act.regen", { type: "button", title: "A new reply to the same message, as a sibling branch", onclick: () => regenerate(m.id) }, "↻ Regenerate"));
    }
    if (m.role === "user") {
      head.append(h("button.act.edit", { type: "button", title: "Edit and send as a new branch", onclick: () => editMessage(d, body, m) }, "✎ Edit"));
    }
  }
  d.append(head, body);
  if (synthetic) {
    const cid = m.id.slice("compaction_".length);
    body.append(h("div.md", null, markdown(textOf(m))));
    body.append(originals(cid, S.compactions.find((c) => c.id === cid)));
  } else {
    body.append(...parts(m.parts));
  }
  return d;
}

const textOf = (m) => (m.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n\n");

/** A message's parts: text as markdown, reasoning and tool calls collapsible, the rest as JSON. */
function parts(list) {
  const out = [];
  for (const p of list || []) {
    if (!p || typeof p !== "object") continue;
    if (p.type === "text") out.push(h("div.md", null, markdown(p.text)));
    else if (p.type === "reasoning") {
      out.push(h("details.reasoning", null, h("summary", null, "Reasoning" + (p.state === "streaming" ? "…" : "")), h("div.pre", null, p.text || "")));
    } else if (p.type === "dynamic-tool" || (typeof p.type === "string" && p.type.startsWith("tool-"))) {
      out.push(tool(p.toolName || p.type.slice(5), p));
    } else if (p.type === "step-start") {
      if (out.length) out.push(h("hr.step"));
    } else if (p.type === "file") {
      out.push(h("div.file", null, "file: " + (p.filename || p.mediaType || "?")));
    } else {
      out.push(h("details.part", null, h("summary", null, String(p.type)), h("pre", null, pretty(p))));
    }
  }
  return out;
}

function tool(name, p) {
  const state = p.state === "output-error" ? "error" : p.state === "output-available" ? "done" : p.state === "input-available" ? "called" : p.state || "";
  return h("details.tool", { dataset: { state: p.state || "" } },
    h("summary", null, h("span.tool-tag", null, "tool"), h("span.tool-name", null, name), h("span.tool-state", { class: state === "error" ? "bad" : "" }, state)),
    h("div.tool-io", null,
      h("div.label", null, "input"), h("pre.tool-input", null, pretty(p.input ?? {})),
      p.state === "output-error" ? [h("div.label", null, "error"), h("pre.tool-error", null, String(p.errorText ?? ""))]
        : p.output !== undefined ? [h("div.label", null, "output"), h("pre.tool-output", null, pretty(p.output))] : null));
}

function ghostBubble(g) {
  const ps = [];
  if (g.reasoning) ps.push({ type: "reasoning", text: g.reasoning });
  for (const t of g.tools.values()) ps.push({ type: "dynamic-tool", ...t });
  if (g.text) ps.push({ type: "text", text: g.text });
  return h("div.msg.streaming.ghost", { dataset: { role: "assistant", id: g.id } },
    h("div.head", null, h("span.role", null, "assistant"), h("span.meta", null, "written by another client")), h("div.body", null, parts(ps)));
}

function editMessage(d, body, m) {
  const box = h("textarea.edit-input", { rows: 3, value: textOf(m) });
  body.replaceChildren(h("form.edit-form", { onsubmit: (e) => { e.preventDefault(); resend(m.id, box.value); } }, box,
    h("div.row", null, h("button.send-edit", { type: "submit" }, "Send as a new branch"),
      h("button", { type: "button", onclick: () => { drawn.delete(m.id); render(); } }, "Cancel"))));
  box.onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); resend(m.id, box.value); } };
  box.focus();
}

/** The original messages behind compaction `cid`, read page by page when opened. */
function originals(cid, c) {
  const list = h("div.originals-list");
  const det = h("details.originals", { dataset: { cid } },
    h("summary", null, "Original messages" + (c ? " (" + short(c.fromMessageId) + " … " + short(c.toMessageId) + ")" : "")), list);
  let next = 0;
  const more = async () => {
    try {
      const page = await sapi().expandCompaction(cid, { offset: next, limit: 50 });
      list.querySelector(".more")?.remove();
      for (const m of page.messages) {
        list.append(h("div.msg.original", { dataset: { role: m.role, id: m.id } }, h("div.head", null, h("span.role", null, m.role), h("span.meta", { title: m.id }, short(m.id))), h("div.body", null, parts(m.parts))));
      }
      next = page.nextOffset;
      if (next != null) list.append(h("button.more", { type: "button", onclick: more }, "More (" + (page.total - next) + " left)"));
      det.dataset.total = page.total;
    } catch (e) { list.append(h("p.err", null, "Reading the originals failed: " + errorText(e))); }
  };
  det.ontoggle = () => { if (det.open && next === 0 && !list.childElementCount) more(); };
  return det;
}

const short = (id) => (id.length > 14 ? id.slice(0, 8) + "…" : id);

function flash(id) {
  requestAnimationFrame(() => {
    const b = el.messages.querySelector('.msg[data-id="' + CSS.escape(id) + '"]');
    if (!b) return;
    b.classList.add("flash");
    b.scrollIntoView({ block: "center" });
    setTimeout(() => b.classList.remove("flash"), 2500);
  });
}

function renderHead() {
  const s = S.session;
  if (!S.sid) { el.head.replaceChildren(); return; }
  const e = S.estimate;
  el.head.replaceChildren(...[
    h("b", null, s?.name || S.sid), h("small", null, S.sid),
    s ? h("small", null, s.messageCount ?? S.tree.size, " msg · ", (s.inputTokens ?? 0) + " in / " + (s.outputTokens ?? 0) + " out tokens" + (s.endReason ? " · ended: " + s.endReason : "")) : null,
    e && e.tokenEstimate != null ? h("small", null, "branch ≈ " + e.tokenEstimate + (e.tokenThreshold != null ? "/" + e.tokenThreshold : "") + " tokens") : null,
  ].filter(Boolean));
}

// ── panels: prompt and blocks, memories, compactions ──────────────────────────────────────────

const panelBody = $("panel-body");

async function renderPanel() {
  for (const b of document.querySelectorAll("#tabs button")) b.setAttribute("aria-selected", String(b.dataset.tab === S.panel));
  const which = S.panel;
  const gen = S.gen;
  const show = (...nodes) => { if (which === S.panel && gen === S.gen) panelBody.replaceChildren(...nodes.filter(Boolean)); };
  panelBody.dataset.panel = which;
  if (!S.token) return show(h("p.empty", null, "No token."));
  try {
    if (which === "memories") return show(...(await memoriesPanel()));
    if (!S.sid) return show(h("p.empty", null, "Open a session to see its " + (which === "context" ? "prompt and blocks." : "compactions.")));
    if (which === "context") {
      const [p, blocks] = await Promise.all([sapi().prompt(), sapi().context.list()]);
      return show(
        h("h3", null, "System prompt ", h("small", null, p.frozen ? "frozen" : "rendered per turn")),
        h("pre.prompt", null, p.prompt || "(empty)"),
        h("h3", null, "Context blocks ", h("small", null, String(blocks.length))),
        ...blocks.map((b) => h("details.block", { open: true, dataset: { label: b.label } },
          h("summary", null, h("b", null, b.label), " ", h("small", null, b.kind + " · " + b.tokens + (b.maxTokens ? "/" + b.maxTokens : "") + " tok" + (b.writable ? "" : " · read-only"))),
          b.description ? h("p.desc", null, b.description) : null,
          h("pre.block-content", null, b.content || "(empty)"))));
    }
    if (which === "compactions") {
      const compactions = await sapi().compactions();
      const shown = new Set((S.chat?.messages || []).filter((m) => m.id.startsWith("compaction_")).map((m) => m.id.slice(11)));
      if (!compactions.length) return show(h("p.empty", null, "No compactions in this session."));
      return show(...compactions.slice().reverse().map((c) => h("div.compaction", { dataset: { cid: c.id } },
        h("div.head", null, h("b", null, "Summary"), h("small", null, " " + ago(c.createdAt) + (shown.has(c.id) ? " · applied on this branch" : ""))),
        h("div.md", null, markdown(c.summary)),
        h("small.range", null, "covers " + c.fromMessageId + " … " + c.toMessageId),
        originals(c.id, c))));
    }
  } catch (e) { show(h("p.err", null, "Reading failed: " + errorText(e))); }
}

const mem = { q: "" };

async function memoriesPanel() {
  const form = h("form.mem-search", { onsubmit: (e) => { e.preventDefault(); mem.q = input.value.trim(); renderPanel(); } });
  const input = h("input", { type: "search", value: mem.q, placeholder: "Recall memories (ranked search)", "aria-label": "Search memories" });
  form.append(input, h("button", { type: "submit" }, "Search"));
  const list = h("ul.memories");
  if (mem.q) {
    const results = await api().memories.recall(mem.q, { limit: 20 });
    list.append(...results.map((r) => memoryItem(r.memory, r)));
    return [form, h("p.note", null, results.length + " recalled for “" + mem.q + "” (a search counts as a recall) ",
      h("button.link", { type: "button", onclick: () => { mem.q = ""; renderPanel(); } }, "show all")), list];
  }
  let cursor = null;
  const page = async () => {
    const r = await api().memories.list({ limit: 50, cursor: cursor || undefined });
    list.append(...r.memories.map((m) => memoryItem(m)));
    cursor = r.nextCursor;
    if (cursor) list.append(h("li.more-row", null, h("button.more", { type: "button", onclick: async (e) => { e.target.parentNode.remove(); await page(); } }, "More")));
    return r.memories.length;
  };
  const n = await page();
  return [form, n ? null : h("p.empty", null, "This agent has no memories yet."), list];
}

function memoryItem(m, hit) {
  const li = h("li.memory", { dataset: { id: m.id } },
    h("div.content", null, m.content),
    h("small", null, [m.category, (m.tags || []).map((t) => "#" + t).join(" "), m.score != null ? "score " + m.score : null,
      m.source?.sessionId ? "from " + m.source.sessionId : null, ago(m.createdAt), m.recallCount ? "recalled " + m.recallCount + "×" : null].filter(Boolean).join(" · ")),
    hit ? h("small.why", null, hit.score.toFixed(3) + " — " + hit.why) : null);
  const forget = h("button.forget", { type: "button", onclick: () => {
    forget.replaceWith(h("span.confirm", null, "Forget this memory? ",
      h("button.danger.yes", { type: "button", onclick: async () => {
        try { await api().memories.forget(m.id); li.remove(); status("Forgot " + m.id); } catch (e) { status("Forgetting failed: " + errorText(e), true); }
      } }, "Forget"),
      h("button.no", { type: "button", onclick: () => renderPanel() }, "Cancel")));
  } }, "Forget");
  li.append(forget);
  return li;
}

// ── wiring ────────────────────────────────────────────────────────────────────────────────────

el.form.onsubmit = (e) => { e.preventDefault(); sendInput(); };
el.input.onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendInput(); } };
el.stop.onclick = () => { S.chat?.stop(); };
$("new-session").onclick = () => newSession();
$("refresh").onclick = () => { loadSessions(); refresh(); renderPanel(); };
$("search-form").onsubmit = (e) => { e.preventDefault(); search(el.search.value); };
el.search.oninput = () => { if (!el.search.value) search(""); };
for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => { S.panel = b.dataset.tab; renderPanel(); };
el.token.onchange = () => {
  const sid = S.sid;
  closeSession();
  if (setToken(el.token.value)) { status("Token set."); loadSessions(); if (sid) openSession(sid); }
  renderPanel();
};
el.agent.onchange = () => {
  store.set("sa-agent", agent());
  closeSession();
  S.sessions = []; renderSessions();
  if (S.claims && S.claims.sub !== agent()) status("This token opens agent “" + S.claims.sub + "” only.", true);
  else loadSessions();
  renderPanel();
};
setInterval(showTokenInfo, 60000);
// A #token=… link opened on a console already open: start again with it (the hash is read at load).
window.onhashchange = () => { if (new URLSearchParams(location.hash.slice(1)).has("token")) location.reload(); };

const hash = new URLSearchParams(location.hash.slice(1));
const hashToken = hash.get("token");
el.agent.value = hash.get("agent") || store.get("sa-agent") || "";
if (hashToken != null) {
  hash.delete("token"); // keep the secret out of the address bar and the browser history
  try { history.replaceState(null, "", location.pathname + location.search + (hash.toString() ? "#" + hash : "")); } catch { /* file: */ }
}
if (hash.get("agent")) store.set("sa-agent", agent());
const tokenOk = setToken(hashToken || store.get("sa-token") || "");
render(); renderHead(); renderPanel();
if (tokenOk || !hashToken) loadSessions().then(() => { if (hash.get("session") && S.token) openSession(hash.get("session")); });
