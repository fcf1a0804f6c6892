// A session as a tree: opening and closing it, its tree read from `GET …/export`, the branch
// shown (`GET …/history?leaf=`), the ‹ k/n › switcher's moves, and the turns that grow it
// through the AI SDK chat (chat.js): a new message, regenerate (a sibling reply) and
// edit-and-resend (a sibling user message), with stop (what was shown is kept) and a failed
// turn's text kept; a turn still running when the session is opened (after a reload) is
// followed with the AI SDK's resume request.
import { SessionChat, turnError } from "./chat.js";
import { OpenSession, Tree, errorText } from "./state.js";
import { NOT_SCOPED } from "./token.js";

/**
 * `el`: {messages, input, form, stop}; `auth`: state.js's Auth; `status(text, err)`; and the
 * other modules' parts it drives: `sessions` {load, render, info, create}, `view`
 * {render, scheduleRender, head, flash}, `socket` {connect, close}, `panels` {render, update}.
 */
export function createTree({ el, auth, status, sessions, view, socket, panels }) {
  /** The OpenSession on screen, or null. */
  let current = null;

  function close() {
    const s = current;
    current = null;
    if (s) { clearTimeout(s.refreshTimer); s.chat.stop(); }
    socket.close(s);
    delete el.messages.dataset.sid;
    setHash();
    sessions.render(); view.head(); view.render(); panels.render();
  }

  /**
   * Shows session `sid` (opened if it is not the one shown): its newest branch, or with `focus`
   * the newest branch through that message. `created`: its SessionInfo when this page has just
   * made it (no message yet: no export to read).
   */
  async function open(sid, { focus, created } = {}) {
    if (!auth.token) { status(NOT_SCOPED, true); return; }
    if (sid !== current?.sid) {
      close();
      const s = new OpenSession(sid, auth.api().session(sid));
      current = s;
      el.messages.dataset.sid = sid;
      s.chat = new SessionChat({
        api: s.api,
        onChange: view.scheduleRender,
        onFinish: (o) => { if (current === s) onTurnEnd(s, o); }, // not a turn of a session left since
      });
      setHash();
      sessions.render();
      socket.connect(s);
    }
    const s = current;
    if (created && !s.tree.size) { s.info = created; view.head(); } else await loadTree(s);
    if (s !== current) return;
    await showBranch(s, focus && s.tree.has(focus) ? s.tree.newestLeafUnder(focus) : s.tree.latest);
    if (focus) view.flash(focus);
    panels.render();
    // A turn that runs on without its page (chat.onDisconnect "finish"): follow it (204: none).
    if (s === current && !s.syncing && s.chat.status === "ready") {
      s.chat.resumeStream().catch(() => {});
    }
  }

  function setHash() {
    const p = new URLSearchParams();
    if (auth.agent()) p.set("agent", auth.agent());
    if (current) p.set("session", current.sid);
    try { history.replaceState(null, "", location.pathname + location.search + "#" + p); } catch { /* file: */ }
  }

  /** Reads the session's tree from its export (a session not registered yet has none: empty). */
  async function loadTree(s) {
    const seq = ++s.treeSeq;
    let doc = null;
    try {
      // A session the list lacks may not be registered yet (never written): its export would
      // answer 404. GET …/path-length answers 0 for it (as for any session without a message).
      const listed = sessions.info(s.sid);
      if ((listed && listed.registered !== false) || (await s.api.pathLength()) > 0) doc = await s.api.export();
    } catch (e) { if (e.status !== 404) status("Reading the session failed: " + errorText(e), true); }
    if (s !== current || seq !== s.treeSeq) return;
    s.tree = new Tree(doc?.messages);
    s.info = doc?.session ? { ...doc.session, id: s.sid } : sessions.info(s.sid);
    s.compactions = doc?.compactions || [];
    view.head();
  }

  /** Shows the branch from the root to `leaf` (overlays applied, as GET …/history answers it). */
  async function showBranch(s, leaf) {
    const nav = ++s.nav;
    s.want = leaf;
    let msgs = [];
    try {
      if (leaf) msgs = await s.api.history({ leafId: leaf });
    } catch (e) {
      if (e.status === 404 && leaf !== s.tree.latest) return showBranch(s, s.tree.latest);
      status("Reading the history failed: " + errorText(e), true);
    }
    if (s !== current || nav !== s.nav) return; // another branch (or session) was asked for since
    if (s.busy) { s.dirty = true; return; } // a turn started meanwhile: its end reads the branch again
    s.leaf = msgs.length ? msgs[msgs.length - 1].id : null;
    if (s.ghost && s.tree.has(s.ghost.id)) s.ghost = null;
    s.chat.messages = msgs;
    view.scheduleRender();
  }

  /** Reads the tree again and shows the branch it should: the newest one if it was shown, else the same. */
  async function refresh(s = current) {
    if (!s || s !== current) return;
    if (s.busy || s.syncing) { s.dirty = true; return; } // the turn's end reads the tree again anyway
    const newest = s.tree.latest;
    await loadTree(s);
    if (s !== current) return;
    // The branch asked for last, read after the tree: the user may have gone to another one
    // meanwhile, and another read (a refresh, the opening) may have shown one; followed to the
    // newest leaf if it was the newest. (Giving up when another branch had been shown since,
    // as before, left the page on a stale branch when two refreshes crossed.)
    const leaf = s.want;
    await showBranch(s, !leaf || leaf === newest || !s.tree.has(leaf) ? s.tree.latest : leaf);
    sessions.load();
  }

  /** A refresh of `s` soon, once for a burst of frames. */
  function scheduleRefresh(s) {
    clearTimeout(s.refreshTimer);
    s.refreshTimer = setTimeout(() => refresh(s), 120);
  }

  /** Switches message `id` of the shown branch to its sibling `k` steps away, and follows that sibling's newest leaf. */
  async function switchBranch(id, k) {
    const s = current;
    const sibs = s?.tree.siblings(id);
    if (!sibs || s.busy) return;
    const next = sibs[sibs.indexOf(id) + k];
    if (!next) return;
    await showBranch(s, s.tree.newestLeafUnder(next));
  }

  // ── turns ─────────────────────────────────────────────────────────────────────────────────

  async function sendInput() {
    const text = el.input.value.trim();
    if (!text || current?.busy) return;
    if (!auth.token) { status(NOT_SCOPED, true); return; }
    if (!current && !(await sessions.create())) return;
    const s = current;
    if (s) await runTurn(s, () => s.chat.sendMessage({ text }), text);
  }

  /** Regenerate: the branch up to the user message the reply answers; the server writes a sibling reply. */
  async function regenerate(assistantId) {
    const s = current;
    if (!s || s.busy) return;
    await runTurn(s, () => s.chat.regenerate({ messageId: assistantId }), null);
  }

  /** Edit and resend: the branch up to the edited message's parent, plus a new user message (new id: a sibling). */
  async function resend(userId, text) {
    const s = current;
    if (!s || s.busy || !text.trim()) return;
    const i = s.chat.messages.findIndex((m) => m.id === userId);
    if (i < 0) return;
    s.chat.messages = s.chat.messages.slice(0, i);
    await runTurn(s, () => s.chat.sendMessage({ text: text.trim() }), text.trim());
  }

  async function runTurn(s, start, text) {
    s.syncing = true;
    s.turnLeaf = s.leaf;
    s.sentText = text;
    s.ghost = null;
    if (text != null) el.input.value = "";
    status(text != null ? "Sent; waiting for the reply…" : "Regenerating…");
    try { await start(); } catch (e) { onTurnFailed(s, turnError(e)); }
  }

  /** AbstractChat's onFinish: a turn ended (done, stopped or failed). */
  async function onTurnEnd(s, { message, isAbort, isError }) {
    if (message?.id) s.own.add(message.id);
    if (isAbort) {
      // What was shown is stored (the user message at least): show the newest branch.
      s.sentText = null;
      status("Stopped: what was shown is kept.");
      await afterTurn(s, null, { newest: true });
    } else if (isError) {
      onTurnFailed(s, turnError(s.chat.error));
    } else {
      const usage = message.metadata?.usage;
      status("Reply stored" + (usage ? " (" + usage.inputTokens + " in / " + usage.outputTokens + " out tokens)" : "") + ".");
      s.sentText = null;
      await afterTurn(s, message.id);
    }
  }

  function onTurnFailed(s, err) {
    s.chat.clearError();
    restoreInput(s);
    status("The turn failed: " + err.code + ": " + err.message + " (nothing was stored; your message is back in the box)", true);
    afterTurn(s, s.turnLeaf);
  }

  function restoreInput(s) {
    if (s.sentText != null && !el.input.value.trim()) el.input.value = s.sentText;
    s.sentText = null;
  }

  /** After a turn: the tree read again, and the branch of its reply shown (else the one before it). */
  async function afterTurn(s, leaf, { newest = false } = {}) {
    s.dirty = false;
    try {
      await loadTree(s);
      if (s !== current) return;
      const fallback = !newest && s.turnLeaf && s.tree.has(s.turnLeaf) ? s.turnLeaf : s.tree.latest;
      await showBranch(s, leaf && s.tree.has(leaf) ? leaf : fallback);
    } finally {
      if (s === current) {
        s.syncing = false;
        view.scheduleRender();
        if (s.dirty) { s.dirty = false; scheduleRefresh(s); } // frames that came meanwhile (another client's writes too)
      }
    }
    sessions.load();
    panels.update("compactions", "context");
  }

  el.form.onsubmit = (e) => { e.preventDefault(); sendInput(); };
  el.input.onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendInput(); } };
  // The chat's own stop ends the request (which stops the turn, unless chat.onDisconnect is
  // "finish"); the stop route then stops a turn that runs on without its client.
  el.stop.onclick = async () => {
    const s = current;
    if (!s) return;
    await s.chat.stop();
    try { await s.api.stop(); } catch { /* the request is ended; the server's turn stops with it, or runs on */ }
  };

  return {
    /** The OpenSession on screen, or null. */
    get current() { return current; },
    open, close, refresh, scheduleRefresh, switchBranch, regenerate, resend,
  };
}
