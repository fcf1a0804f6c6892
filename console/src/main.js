// The console at `/`: where a developer looks into an agent's memory. This entry finds the
// page's elements, makes the state (state.js) and the modules, handing each the parts it needs,
// wires the header (token, agent, reload) and starts from the address bar: a `#token=…` is
// taken out of it at once. The modules: sessions.js (list, create, rename, delete, search
// across), tree.js (a session's tree, the shown branch, the switcher, the turns: regenerate,
// edit-and-resend), conversation.js (drawing the branch), socket.js (live frames, reconnect),
// panels.js (prompt and blocks, memories, compactions), token.js (only a scoped token is taken).
// Every call is the typed client's (@session-agent/client); every text is drawn with dom.js and
// markdown.js, which build DOM nodes and never parse HTML.
import { $ } from "./dom.js";
import { Auth, store } from "./state.js";
import { createToken } from "./token.js";
import { createSessions } from "./sessions.js";
import { createTree } from "./tree.js";
import { createConversation } from "./conversation.js";
import { createSocket } from "./socket.js";
import { createPanels } from "./panels.js";

const el = {
  token: $("token"), agent: $("agent"), tokenInfo: $("token-info"), sessions: $("sessions"), search: $("search"),
  results: $("search-results"), head: $("session-head"), messages: $("messages"), status: $("status"),
  input: $("input"), send: $("send"), stop: $("stop"), form: $("composer"),
};

function status(text, err) { el.status.textContent = text; el.status.className = err ? "err" : ""; }

const auth = new Auth(() => el.agent.value.trim());
const current = () => tree.current;
const token = createToken({ el, auth, status });
const panels = createPanels({ auth, status, current });
const view = createConversation({
  el, auth, current,
  actions: { switchBranch: (id, k) => tree.switchBranch(id, k), regenerate: (id) => tree.regenerate(id), resend: (id, text) => tree.resend(id, text) },
});
const sessions = createSessions({
  el, auth, status, current, open: (sid, o) => tree.open(sid, o), close: () => tree.close(), drawHead: view.head,
});
const socket = createSocket({ status, current, tree: { refresh: (s) => tree.refresh(s), scheduleRefresh: (s) => tree.scheduleRefresh(s) }, view, panels });
const tree = createTree({ el, auth, status, sessions, view, socket, panels });

$("refresh").onclick = () => { sessions.load(); tree.refresh(); panels.render(); };
el.token.onchange = () => {
  const sid = tree.current?.sid;
  tree.close();
  if (token.set(el.token.value)) { status("Token set."); sessions.load(); if (sid) tree.open(sid); }
  panels.render();
};
el.agent.onchange = () => {
  store.set("sa-agent", auth.agent());
  tree.close();
  sessions.clear();
  if (auth.claims && auth.claims.sub !== auth.agent()) status("This token opens agent “" + auth.claims.sub + "” only.", true);
  else sessions.load();
  panels.render();
};
// A #token=… link opened on a console already open: start again with it (the hash is read at load).
window.onhashchange = () => { if (new URLSearchParams(location.hash.slice(1)).has("token")) location.reload(); };

const hash = new URLSearchParams(location.hash.slice(1));
const hashToken = hash.get("token");
el.agent.value = hash.get("agent") || store.get("sa-agent") || "";
if (hashToken != null) {
  hash.delete("token"); // keep the secret out of the address bar and the browser history
  try { history.replaceState(null, "", location.pathname + location.search + (hash.toString() ? "#" + hash : "")); } catch { /* file: */ }
}
if (hash.get("agent")) store.set("sa-agent", auth.agent());
const tokenOk = token.set(hashToken || store.get("sa-token") || "");
view.render(); view.head(); panels.render();
if (tokenOk || !hashToken) sessions.load().then(() => { if (hash.get("session") && auth.token) tree.open(hash.get("session")); });
