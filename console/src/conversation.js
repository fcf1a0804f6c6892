// The conversation (the middle column): the session's head line, and the shown branch as
// bubbles, each with its ‹ k/n › switcher when it has siblings, Regenerate on a reply and Edit
// on a user message, a summary in place of what a compaction covers, and a reply another client
// is streaming drawn as it comes. Drawn once per animation frame; a bubble is made again only
// when what it shows changed, so a streamed reply redraws only itself.
import { h, ago } from "./dom.js";
import { markdown } from "./markdown.js";
import { parts, originals } from "./parts.js";

const textOf = (m) => (m.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n\n");

/**
 * `el`: {head, messages, input, send, stop}; `auth`: state.js's Auth; `current()`: the
 * OpenSession on screen or null; `actions`: the tree's {switchBranch, regenerate, resend}.
 */
export function createConversation({ el, auth, current, actions }) {
  /** Bubbles by message id with what they were drawn from. */
  const drawn = new Map();
  let queued = false;

  function scheduleRender() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; render(); });
  }

  function render() {
    const s = current();
    const chat = s?.chat;
    const running = !!s?.busy;
    el.send.hidden = running;
    el.stop.hidden = !running;
    el.send.disabled = !auth.token;
    el.input.placeholder = auth.claims?.scope === "read" ? "A read-only token: chatting needs scope write" : "Message (Enter sends, Shift+Enter for a new line)";
    // data-chat: none, submitted, streaming, syncing (the turn ended, the tree is read again), ready, error.
    document.body.dataset.chat = !chat ? "none" : running || !s.syncing ? chat.status : "syncing";
    if (!chat) {
      drawn.clear();
      el.messages.replaceChildren(h("p.empty", null, auth.token ? "Pick or create a session." : "Paste a scoped token to begin."));
      return;
    }
    const msgs = chat.messages;
    const nodes = [];
    const seen = new Set();
    msgs.forEach((m, i) => {
      const streaming = running && i === msgs.length - 1 && m.role === "assistant";
      const sibs = s.tree.siblings(m.id);
      const key = JSON.stringify([m, sibs, streaming, running || s.syncing, i > 0 && msgs[i - 1].role]);
      let d = drawn.get(m.id);
      if (!d || d.key !== key) { d = { key, node: bubble(s, m, i, { streaming, running: running || s.syncing, sibs }) }; drawn.set(m.id, d); }
      seen.add(m.id);
      nodes.push(d.node);
    });
    if (running && chat.status === "submitted") nodes.push(h("div.msg.pending", { dataset: { role: "assistant" } }, h("div.head", null, h("span.role", null, "assistant")), h("div.body", null, h("span.dots", null, "…"))));
    if (s.ghost && !seen.has(s.ghost.id)) nodes.push(ghostBubble(s.ghost));
    for (const id of drawn.keys()) if (!seen.has(id)) drawn.delete(id);
    if (!nodes.length) nodes.push(h("p.empty", null, "No messages yet: say something."));
    const atBottom = el.messages.scrollHeight - el.messages.scrollTop - el.messages.clientHeight < 40;
    el.messages.replaceChildren(...nodes);
    if (atBottom || running) el.messages.scrollTop = el.messages.scrollHeight;
  }

  function bubble(s, m, i, { streaming, running, sibs }) {
    const synthetic = m.id.startsWith("compaction_");
    const d = h("div.msg", { dataset: { role: m.role, id: m.id }, class: (streaming ? "streaming" : "") + (synthetic ? " summary" : "") });
    const head = h("div.head", null, h("span.role", null, synthetic ? "summary" : m.role));
    if (sibs && sibs.length > 1) {
      const k = sibs.indexOf(m.id);
      head.append(h("span.branch", { title: "Branches here: siblings of this message" },
        h("button.prev", { type: "button", title: "Previous branch", disabled: k === 0 || running, onclick: () => actions.switchBranch(m.id, -1) }, "‹"),
        h("span.pos", null, k + 1 + "/" + sibs.length),
        h("button.next", { type: "button", title: "Next branch", disabled: k === sibs.length - 1 || running, onclick: () => actions.switchBranch(m.id, 1) }, "›")));
    }
    const meta = [];
    if (m.metadata?.model) meta.push(m.metadata.model);
    const u = m.metadata?.usage;
    if (u && (u.inputTokens != null || u.outputTokens != null)) meta.push((u.inputTokens ?? "?") + "→" + (u.outputTokens ?? "?") + " tok");
    if (m.createdAt) meta.push(ago(m.createdAt));
    head.append(h("span.meta", { title: m.id }, meta.join(" · ")));
    const body = h("div.body");
    if (!running && !s.syncing && !synthetic && s.tree.has(m.id)) {
      if (m.role === "assistant" && i > 0 && s.chat.messages[i - 1].role === "user") {
        head.append(h("button.act.regen", { type: "button", title: "A new reply to the same message, as a sibling branch", onclick: () => actions.regenerate(m.id) }, "↻ Regenerate"));
      }
      if (m.role === "user") {
        head.append(h("button.act.edit", { type: "button", title: "Edit and send as a new branch", onclick: () => editMessage(body, m) }, "✎ Edit"));
      }
    }
    d.append(head, body);
    if (synthetic) {
      const cid = m.id.slice("compaction_".length);
      body.append(h("div.md", null, markdown(textOf(m))));
      body.append(originals(s.api, cid, s.compactions.find((c) => c.id === cid)));
    } else {
      body.append(...parts(m.parts));
    }
    return d;
  }

  function ghostBubble(g) {
    const ps = [];
    if (g.reasoning) ps.push({ type: "reasoning", text: g.reasoning });
    for (const t of g.tools.values()) ps.push({ type: "dynamic-tool", ...t });
    if (g.text) ps.push({ type: "text", text: g.text });
    return h("div.msg.streaming.ghost", { dataset: { role: "assistant", id: g.id } },
      h("div.head", null, h("span.role", null, "assistant"), h("span.meta", null, "written by another client")), h("div.body", null, parts(ps)));
  }

  function editMessage(body, m) {
    const box = h("textarea.edit-input", { rows: 3, value: textOf(m) });
    body.replaceChildren(h("form.edit-form", { onsubmit: (e) => { e.preventDefault(); actions.resend(m.id, box.value); } }, box,
      h("div.row", null, h("button.send-edit", { type: "submit" }, "Send as a new branch"),
        h("button", { type: "button", onclick: () => { drawn.delete(m.id); render(); } }, "Cancel"))));
    box.onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); actions.resend(m.id, box.value); } };
    box.focus();
  }

  /** Scrolls message `id` into view and makes it flash. */
  function flash(id) {
    requestAnimationFrame(() => {
      const b = el.messages.querySelector('.msg[data-id="' + CSS.escape(id) + '"]');
      if (!b) return;
      b.classList.add("flash");
      b.scrollIntoView({ block: "center" });
      setTimeout(() => b.classList.remove("flash"), 2500);
    });
  }

  /** The session's name, id, counts and the branch's token estimate. */
  function head() {
    const s = current();
    if (!s) { el.head.replaceChildren(); return; }
    const i = s.info;
    const e = s.estimate;
    el.head.replaceChildren(...[
      h("b", null, i?.name || s.sid), h("small", null, s.sid),
      i ? h("small", null, i.messageCount ?? s.tree.size, " msg · ", (i.inputTokens ?? 0) + " in / " + (i.outputTokens ?? 0) + " out tokens" + (i.endReason ? " · ended: " + i.endReason : "")) : null,
      e && e.tokenEstimate != null ? h("small", null, "branch ≈ " + e.tokenEstimate + (e.tokenThreshold != null ? "/" + e.tokenThreshold : "") + " tokens") : null,
    ].filter(Boolean));
  }

  return { render, scheduleRender, head, flash };
}
