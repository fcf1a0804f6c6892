// The panels (the right column), one shown at a time by its tab: the session's frozen system
// prompt and context blocks, the agent's memories (ranked search, pages, forget after asking),
// and the session's compactions with their original messages.
import { h, $, ago } from "./dom.js";
import { markdown } from "./markdown.js";
import { originals } from "./parts.js";
import { errorText } from "./state.js";

/** `auth`: state.js's Auth; `status(text, err)`; `current()`: the OpenSession on screen or null. */
export function createPanels({ auth, status, current }) {
  const body = $("panel-body");
  const tabs = document.querySelectorAll("#tabs button");
  let which = "context";
  let seq = 0; // bumped on every drawing: only the latest one asked for is shown
  let memQuery = "";

  async function render() {
    for (const b of tabs) b.setAttribute("aria-selected", String(b.dataset.tab === which));
    const mine = ++seq;
    const s = current();
    const show = (...nodes) => { if (mine === seq && s === current()) body.replaceChildren(...nodes.filter(Boolean)); };
    body.dataset.panel = which;
    if (!auth.token) return show(h("p.empty", null, "No token."));
    try {
      if (which === "memories") return show(...(await memories()));
      if (!s) return show(h("p.empty", null, "Open a session to see its " + (which === "context" ? "prompt and blocks." : "compactions.")));
      if (which === "context") {
        const [p, blocks] = await Promise.all([s.api.prompt(), s.api.context.list()]);
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
        const compactions = await s.api.compactions();
        const shown = new Set((s.chat?.messages || []).filter((m) => m.id.startsWith("compaction_")).map((m) => m.id.slice(11)));
        if (!compactions.length) return show(h("p.empty", null, "No compactions in this session."));
        return show(...compactions.slice().reverse().map((c) => h("div.compaction", { dataset: { cid: c.id } },
          h("div.head", null, h("b", null, "Summary"), h("small", null, " " + ago(c.createdAt) + (shown.has(c.id) ? " · applied on this branch" : ""))),
          h("div.md", null, markdown(c.summary)),
          h("small.range", null, "covers " + c.fromMessageId + " … " + c.toMessageId),
          originals(s.api, c.id, c))));
      }
    } catch (e) { show(h("p.err", null, "Reading failed: " + errorText(e))); }
  }

  /** Draws the panel again if it is one of `names` (what a frame or a turn may have changed). */
  function update(...names) {
    if (names.includes(which)) render();
  }

  async function memories() {
    const api = auth.api();
    const form = h("form.mem-search", { onsubmit: (e) => { e.preventDefault(); memQuery = input.value.trim(); render(); } });
    const input = h("input", { type: "search", value: memQuery, placeholder: "Recall memories (ranked search)", "aria-label": "Search memories" });
    form.append(input, h("button", { type: "submit" }, "Search"));
    const list = h("ul.memories");
    if (memQuery) {
      const q = memQuery;
      const results = await api.memories.recall(q, { limit: 20 });
      list.append(...results.map((r) => memoryItem(api, r.memory, r)));
      return [form, h("p.note", null, results.length + " recalled for “" + q + "” (a search counts as a recall) ",
        h("button.link", { type: "button", onclick: () => { memQuery = ""; render(); } }, "show all")), list];
    }
    let cursor = null;
    const page = async () => {
      const r = await api.memories.list({ limit: 50, cursor: cursor || undefined });
      list.append(...r.memories.map((m) => memoryItem(api, m)));
      cursor = r.nextCursor;
      if (cursor) list.append(h("li.more-row", null, h("button.more", { type: "button", onclick: async (e) => { e.target.parentNode.remove(); await page(); } }, "More")));
      return r.memories.length;
    };
    const n = await page();
    return [form, n ? null : h("p.empty", null, "This agent has no memories yet."), list];
  }

  function memoryItem(api, m, hit) {
    const li = h("li.memory", { dataset: { id: m.id } },
      h("div.content", null, m.content),
      h("small", null, [m.category, (m.tags || []).map((t) => "#" + t).join(" "), m.score != null ? "score " + m.score : null,
        m.source?.sessionId ? "from " + m.source.sessionId : null, ago(m.createdAt), m.recallCount ? "recalled " + m.recallCount + "×" : null].filter(Boolean).join(" · ")),
      hit ? h("small.why", null, hit.score.toFixed(3) + " — " + hit.why) : null);
    const forget = h("button.forget", { type: "button", onclick: () => {
      forget.replaceWith(h("span.confirm", null, "Forget this memory? ",
        h("button.danger.yes", { type: "button", onclick: async () => {
          try { await api.memories.forget(m.id); li.remove(); status("Forgot " + m.id); } catch (e) { status("Forgetting failed: " + errorText(e), true); }
        } }, "Forget"),
        h("button.no", { type: "button", onclick: () => render() }, "Cancel")));
    } }, "Forget");
    li.append(forget);
    return li;
  }

  for (const b of tabs) b.onclick = () => { which = b.dataset.tab; render(); };

  return { render, update };
}
