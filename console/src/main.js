"use strict";
(() => {
const $ = (id) => document.getElementById(id);
const el = { token: $("token"), agent: $("agent"), sessions: $("sessions"), messages: $("messages"),
  input: $("input"), send: $("send"), status: $("status"), form: $("composer") };
const store = { get(k) { try { return localStorage.getItem(k); } catch { return null; } },
  set(k, v) { try { localStorage.setItem(k, v); } catch { /* no storage */ } } };

const S = {
  sid: null,        // the open session
  ws: null,         // its socket
  messages: [],     // the shown branch, root first
  streaming: new Map(), // messageId -> text received so far
  retries: 0, retryTimer: null, pingTimer: null, syncTimer: null,
};

// <body data-ws="connecting|open|closed"> and <div id="messages" data-sid>: for tests and styling.
function wsState(v) { document.body.dataset.ws = v; }
function status(text, err) { el.status.textContent = text; el.status.className = err ? "err" : ""; }
const token = () => el.token.value.trim();
const agent = () => el.agent.value.trim() || "demo";
const base = () => "/agents/" + encodeURIComponent(agent());
function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 15) | 64; b[8] = (b[8] & 63) | 128;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
}

async function api(method, path, body) {
  const r = await fetch(base() + path, { method, headers: { authorization: "Bearer " + token(),
    ...(body ? { "content-type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const data = await r.json().catch(() => null);
  if (!r.ok) throw new Error((data && data.error && (data.error.code + ": " + data.error.message)) || "HTTP " + r.status);
  return data;
}

// ---- sessions ----
async function loadSessions(selectId) {
  if (!token()) { status("Enter a scoped token (POST /agents/{agent}/tokens), never the admin token (or open the page with #token=...)", true); return; }
  try {
    const { sessions = [] } = await api("GET", "/sessions");
    el.sessions.replaceChildren(...sessions.map((s) => {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button"; b.dataset.sid = s.id; b.textContent = s.id;
      b.title = (s.name || s.id) + " · " + (s.messageCount || 0) + " messages";
      if (s.id === S.sid) b.classList.add("active");
      b.onclick = () => openSession(s.id);
      li.append(b);
      if (s.name && s.name !== s.id) { const n = document.createElement("small"); n.textContent = s.name; li.append(n); }
      return li;
    }));
    if (!sessions.length) status("No sessions yet: create one.");
    else if (!S.sid) status(sessions.length + " session(s)");
    if (selectId) openSession(selectId);
  } catch (e) { status("Listing sessions failed: " + e.message, true); }
}

async function newSession() {
  const id = await api("POST", "/sessions", { name: "Chat " + new Date().toISOString().slice(0, 16).replace("T", " ") })
    .then((s) => s.id, (e) => { status("Creating a session failed: " + e.message, true); return null; });
  if (id) await loadSessions(id);
  return id;
}

// ---- socket ----
function closeSocket() {
  clearTimeout(S.retryTimer); clearInterval(S.pingTimer);
  wsState("closed");
  if (S.ws) { const ws = S.ws; S.ws = null; ws.onclose = ws.onmessage = ws.onerror = null; try { ws.close(); } catch { /* closed */ } }
}

function openSession(sid) {
  if (sid !== S.sid) { closeSocket(); S.sid = sid; el.messages.dataset.sid = sid; S.messages = []; S.streaming.clear(); S.retries = 0; render(); }
  for (const b of el.sessions.querySelectorAll("button")) b.classList.toggle("active", b.dataset.sid === sid);
  if (!S.ws) connect();
}

function connect() {
  const sid = S.sid;
  if (!sid) return;
  const url = (location.protocol === "https:" ? "wss" : "ws") + "://" + location.host + base() + "/sessions/" +
    encodeURIComponent(sid) + "/ws?token=" + encodeURIComponent(token());
  status("Connecting to " + sid + "…");
  const ws = new WebSocket(url);
  S.ws = ws; wsState("connecting");
  ws.onopen = () => {
    S.retries = 0; wsState("open");
    status("Connected to " + sid);
    send({ type: "history" });
    S.pingTimer = setInterval(() => send({ type: "ping" }), 30000);
  };
  ws.onmessage = (ev) => { let f; try { f = JSON.parse(ev.data); } catch { return; } onFrame(f); };
  ws.onclose = () => {
    if (S.ws !== ws) return;
    clearInterval(S.pingTimer); S.ws = null; wsState("closed");
    const wait = Math.min(5000, 500 * 2 ** S.retries++);
    status("Disconnected; reconnecting in " + (wait / 1000) + " s…", true);
    S.retryTimer = setTimeout(() => { if (S.sid === sid && !S.ws) connect(); }, wait);
  };
}

function send(frame) {
  if (!S.ws || S.ws.readyState !== WebSocket.OPEN) { status("Not connected yet", true); return false; }
  S.ws.send(JSON.stringify(frame));
  return true;
}

function onFrame(f) {
  if (f.sessionId && f.sessionId !== S.sid) return;
  switch (f.type) {
    case "history":
      S.messages = Array.isArray(f.messages) ? f.messages : [];
      for (const m of S.messages) S.streaming.delete(m.id);
      render();
      break;
    case "message": {
      const m = f.message;
      if (!m || !m.id) break;
      const i = S.messages.findIndex((x) => x.id === m.id);
      if (i >= 0) S.messages[i] = m; else S.messages.push(m);
      S.streaming.delete(m.id);
      render();
      // The reply is in: show the branch the server now calls active (a regenerate made a new one).
      if (m.role === "assistant") { status("Reply received"); clearTimeout(S.syncTimer); S.syncTimer = setTimeout(() => send({ type: "history" }), 300); }
      break;
    }
    case "delta": {
      if (!f.messageId || S.messages.some((x) => x.id === f.messageId)) break;
      const text = (S.streaming.get(f.messageId) || "") + (f.text || "");
      S.streaming.set(f.messageId, text);
      const b = el.messages.querySelector('.msg[data-id="' + CSS.escape(f.messageId) + '"]');
      if (b) b.querySelector(".text").textContent = text;
      else { clearEmpty(); el.messages.append(bubble({ id: f.messageId, role: "assistant" }, text)); }
      scroll();
      break;
    }
    case "status":
      const of = f.tokenThreshold != null ? "/" + f.tokenThreshold : "";
      status("Status: " + f.phase + (f.tokenEstimate != null ? " (" + f.tokenEstimate + of + " tokens)" : "") + (f.error ? " — " + f.error.message : ""));
      break;
    case "error":
      status("Error " + f.code + ": " + f.message, true);
      break;
  }
}

// ---- rendering ----
function partsView(parts) {
  const out = [];
  for (const p of parts || []) {
    if (p.type === "text") out.push({ text: p.text });
    else if (p.type === "dynamic-tool" || (p.type || "").startsWith("tool-")) {
      out.push({ tool: "🔧 " + (p.toolName || p.type.slice(5)) + (p.state === "output-error" ? " (error)" : "") });
    }
  }
  return out;
}

function bubble(m, streamingText) {
  const d = document.createElement("div");
  d.className = "msg" + (streamingText != null ? " streaming" : "");
  d.dataset.role = m.role; d.dataset.id = m.id;
  const head = document.createElement("div");
  head.className = "role"; head.textContent = m.role;
  d.append(head);
  if (streamingText != null) {
    const t = document.createElement("div"); t.className = "text"; t.textContent = streamingText; d.append(t);
    return d;
  }
  for (const p of partsView(m.parts)) {
    const t = document.createElement("div");
    if (p.tool) { t.className = "tool"; t.textContent = p.tool; } else { t.className = "text"; t.textContent = p.text; }
    d.append(t);
  }
  if (m.role === "assistant" && userBefore(S.messages.indexOf(m)) >= 0) {
    const r = document.createElement("button");
    r.type = "button"; r.className = "regen"; r.dataset.testid = "regenerate"; r.textContent = "Regenerate";
    r.onclick = () => regenerate(m.id);
    head.append(r);
  }
  return d;
}

function clearEmpty() { const e = el.messages.querySelector(".empty"); if (e) e.remove(); }
function scroll() { el.messages.scrollTop = el.messages.scrollHeight; }

function render() {
  const nodes = S.messages.map((m) => bubble(m));
  for (const [id, text] of S.streaming) nodes.push(bubble({ id, role: "assistant" }, text));
  if (!nodes.length) {
    const p = document.createElement("p"); p.className = "empty";
    p.textContent = S.sid ? "No messages yet: say something." : "Pick or create a session.";
    nodes.push(p);
  }
  el.messages.replaceChildren(...nodes);
  scroll();
}

// Index of the user message an assistant message at index i answers, or -1.
function userBefore(i) { for (let j = i - 1; j >= 0; j--) if (S.messages[j].role === "user") return j; return -1; }

// A sibling branch: the same user message again (new id) under the same parent.
function regenerate(assistantId) {
  const j = userBefore(S.messages.findIndex((m) => m.id === assistantId));
  if (j < 0) return;
  const u = S.messages[j];
  const message = { id: uuid(), role: "user", parts: JSON.parse(JSON.stringify(u.parts || [])) };
  if (!send({ type: "chat", message, parentId: j > 0 ? S.messages[j - 1].id : null })) return;
  S.messages = S.messages.slice(0, j); // the new branch grows from here
  render();
  status("Regenerating…");
}

async function sendInput() {
  const text = el.input.value.trim();
  if (!text) return;
  if (!S.sid && !(await newSession())) return;
  const message = { id: uuid(), role: "user", parts: [{ type: "text", text }] };
  if (send({ type: "chat", message })) { el.input.value = ""; status("Sent; waiting for the reply…"); }
}

// ---- wiring ----
el.form.onsubmit = (e) => { e.preventDefault(); sendInput(); };
el.input.onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendInput(); } };
$("new-session").onclick = () => newSession();
$("refresh").onclick = () => loadSessions();
el.token.onchange = () => { store.set("sa-token", token()); closeSocket(); if (S.sid) connect(); loadSessions(); };
el.agent.onchange = () => {
  store.set("sa-agent", agent()); closeSocket(); S.sid = null; delete el.messages.dataset.sid; S.messages = []; S.streaming.clear();
  el.sessions.replaceChildren(); render(); loadSessions();
};

const hash = new URLSearchParams(location.hash.slice(1));
el.token.value = hash.get("token") || store.get("sa-token") || "";
el.agent.value = hash.get("agent") || store.get("sa-agent") || "demo";
if (hash.get("token")) {
  store.set("sa-token", hash.get("token"));
  hash.delete("token"); // keep the secret out of the address bar and the browser history
  try { history.replaceState(null, "", location.pathname + location.search + (hash.toString() ? "#" + hash : "")); } catch { /* file: */ }
}
if (hash.get("agent")) store.set("sa-agent", agent());
loadSessions(hash.get("session") || undefined);
})();
