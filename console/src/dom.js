// DOM helpers. Everything the console shows is built with createElement and text nodes: no
// string of HTML ever reaches the DOM (no innerHTML, insertAdjacentHTML or document.write), so
// nothing a message, a memory or the model writes can become markup.

/**
 * h("div.msg.user", {dataset: {id}, onclick}, "text", child, [more]) → an element.
 * Attributes: `class`, `dataset`, `on*` handlers (properties, not attributes: CSP-safe), `hidden`,
 * `disabled`, `open`, `value`, `checked`; anything else is set with setAttribute. Children:
 * strings (text nodes), nodes, arrays, null/false (skipped).
 */
export function h(tag, attrs, ...children) {
  const [name, ...classes] = tag.split(".");
  const e = document.createElement(name || "div");
  if (classes.length) e.className = classes.join(" ");
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === "class") e.className = [e.className, v].filter(Boolean).join(" ");
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k.startsWith("on")) e[k] = v;
      else if (k === "hidden" || k === "disabled" || k === "open" || k === "value" || k === "checked") e[k] = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export const $ = (id) => document.getElementById(id);

/** "3 min ago", "2 h ago", or the date. */
export function ago(iso) {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return "";
  const s = (Date.now() - t) / 1000;
  if (s < 45) return "just now";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return new Date(t).toISOString().slice(0, 10);
}

/** JSON for a <pre>: strings as they are, anything else indented. */
export function pretty(v) {
  if (typeof v === "string") return v;
  try { return JSON.stringify(v, null, 2) ?? String(v); } catch { return String(v); }
}
