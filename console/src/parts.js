// How a message's content is drawn, in the conversation and in the panels alike: its parts (text
// as markdown, reasoning and tool calls collapsible, anything else as JSON) and the original
// messages behind a compaction, read page by page when opened.
import { h, pretty } from "./dom.js";
import { markdown } from "./markdown.js";
import { errorText } from "./state.js";

/** A message's parts: text as markdown, reasoning and tool calls collapsible, the rest as JSON. */
export function parts(list) {
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

/** An id short enough for a heading. */
export const short = (id) => (id.length > 14 ? id.slice(0, 8) + "…" : id);

/**
 * The original messages behind compaction `cid` (`c`: the Compaction, if known) of the session
 * whose SessionClient is `api`, read page by page when opened.
 */
export function originals(api, cid, c) {
  const list = h("div.originals-list");
  const det = h("details.originals", { dataset: { cid } },
    h("summary", null, "Original messages" + (c ? " (" + short(c.fromMessageId) + " … " + short(c.toMessageId) + ")" : "")), list);
  let next = 0;
  const more = async () => {
    try {
      const page = await api.expandCompaction(cid, { offset: next, limit: 50 });
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
