// The sessions of the agent (the left column): the list, create, rename, delete (after asking),
// and full-text search across them (a hit opens its session at that message).
import { h, $, ago } from "./dom.js";
import { errorText } from "./state.js";

/**
 * `el`: {sessions, search, results}; `auth`: state.js's Auth; `status(text, err)`; `current()`:
 * the OpenSession on screen or null; `open(sid, {focus, created})`, `close()` and `drawHead()`:
 * the tree's and the conversation's.
 */
export function createSessions({ el, auth, status, current, open, close, drawHead }) {
  /** The SessionInfo of every session listed. */
  let list = [];

  async function load() {
    if (!auth.token) { status("Paste a scoped token (POST /agents/{agent}/tokens), never the admin token (or open the page as /#token=…)", true); return; }
    try {
      const api = auth.api();
      // A token limited to some sessions may not list them: its own list is in its claims
      // (one not registered yet answers 404: listed as such).
      list = auth.claims?.sessions
        ? await Promise.all(auth.claims.sessions.map((id) => api.session(id).info().catch(() => ({ id, name: id, messageCount: 0, registered: false }))))
        : await api.sessions.list();
      render();
      if (!list.length && !current()) status("No sessions yet: create one, or just send a message.");
    } catch (e) { status("Listing sessions failed: " + errorText(e), true); }
  }

  /** Forgets the list (another agent). */
  function clear() { list = []; render(); }

  /** The listed SessionInfo of `sid`, or null. */
  const info = (sid) => list.find((s) => s.id === sid) || null;

  function render() {
    const sid = current()?.sid;
    el.sessions.replaceChildren(...list.map((s) => {
      const li = h("li", { dataset: { sid: s.id }, class: s.id === sid ? "active" : "" });
      const openIt = h("button.open", { type: "button", title: s.id, onclick: () => open(s.id) },
        h("span.name", null, s.name || s.id),
        h("small", null, s.messageCount + " msg · " + ago(s.updatedAt) + (s.name !== s.id ? " · " + s.id : "")));
      const rename = h("button.icon.rename", { type: "button", title: "Rename", onclick: () => startRename(li, s) }, "✎");
      const del = h("button.icon.delete", { type: "button", title: "Delete", onclick: () => confirmDelete(li, s) }, "✕");
      li.append(openIt, h("span.tools", null, rename, del));
      return li;
    }));
  }

  /** Creates a session and opens it; its id, or null when that failed. */
  async function create() {
    try {
      const s = await auth.api().sessions.create({ name: "Session " + new Date().toISOString().slice(0, 16).replace("T", " "), source: "console" });
      await load();
      await open(s.id, { created: s });
      return s.id;
    } catch (e) { status("Creating a session failed: " + errorText(e), true); return null; }
  }

  function startRename(li, s) {
    const input = h("input.rename-input", { value: s.name || s.id, maxlength: 256, "aria-label": "New name" });
    const save = async () => {
      const name = input.value.trim();
      if (!name || name === s.name) { render(); return; }
      try {
        const renamed = await auth.api().session(s.id).rename(name);
        const cur = current();
        if (cur?.sid === s.id && cur.info) cur.info = { ...cur.info, name: renamed.name };
        status("Renamed to " + name);
      } catch (e) { status("Renaming failed: " + errorText(e), true); }
      await load();
      if (s.id === current()?.sid) drawHead();
    };
    input.onkeydown = (e) => { if (e.key === "Enter") { e.preventDefault(); save(); } else if (e.key === "Escape") render(); };
    li.replaceChildren(h("form.rename", { onsubmit: (e) => { e.preventDefault(); save(); } }, input,
      h("button", { type: "submit" }, "Save"), h("button", { type: "button", onclick: render }, "Cancel")));
    input.focus(); input.select();
  }

  function confirmDelete(li, s) {
    li.replaceChildren(h("div.confirm", null, h("span", null, "Delete “" + (s.name || s.id) + "” and everything stored for it?"),
      h("button.danger.yes", { type: "button", onclick: async () => {
        // Closed first: left open, its socket brings the delete back as a frame, whose refresh
        // would read the export of a session that is gone (a 404 in the browser's log).
        if (s.id === current()?.sid) close();
        try { await auth.api().session(s.id).delete(); status("Deleted " + s.id); } catch (e) { status("Deleting failed: " + errorText(e), true); }
        await load();
      } }, "Delete"),
      h("button.no", { type: "button", onclick: render }, "Cancel")));
  }

  /** Full-text search across the agent's sessions (`GET /search`); "" hides the results. */
  async function search(q) {
    if (!q.trim()) { el.results.hidden = true; el.results.replaceChildren(); return; }
    try {
      const results = await auth.api().search(q, { limit: 20 });
      el.results.hidden = false;
      el.results.replaceChildren(
        h("li.results-head", null, results.length ? results.length + " hit(s)" : "No message matches “" + q + "”",
          h("button.icon", { type: "button", title: "Close", onclick: () => { el.search.value = ""; search(""); } }, "✕")),
        ...results.map((r) => {
          const s = info(r.sessionId);
          return h("li.hit", { dataset: { sid: r.sessionId, id: r.id } }, h("button", { type: "button", onclick: () => open(r.sessionId, { focus: r.id }) },
            h("small", null, (s?.name || r.sessionId) + " · " + r.role + " · " + ago(r.createdAt)),
            h("span", null, r.content.length > 160 ? r.content.slice(0, 160) + "…" : r.content)));
        }));
    } catch (e) { status("Search failed: " + errorText(e), true); }
  }

  $("new-session").onclick = () => create();
  $("search-form").onsubmit = (e) => { e.preventDefault(); search(el.search.value); };
  el.search.oninput = () => { if (!el.search.value) search(""); };

  return { load, clear, info, render, create };
}
