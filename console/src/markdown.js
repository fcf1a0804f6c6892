// Markdown → DOM nodes, safe by construction: every piece of the source ends up in a text node
// or in an element this file creates (p, h1–h6, ul/ol/li, blockquote, pre/code, table, hr, a,
// strong, em, del, br). Raw HTML in a message is text; a link keeps its href only for http(s)
// and mailto URLs (and then opens in a new tab with rel="noopener noreferrer"); images are
// shown as links (the page loads no remote image). What it reads: fenced and indented-by-list
// code, ATX headings, rules, block quotes, nested lists, GitHub tables, paragraphs (a newline
// is a line break, as chat text is written), `code`, **strong**, *em*, ~~del~~, [links](…),
// <autolinks>, bare http(s) URLs and backslash escapes. markdown-it would be 40 kB gzip more
// for the same chat text.
import { h } from "./dom.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*)|$)/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** The markdown `src` as a fragment of DOM nodes. */
export function markdown(src) {
  const f = document.createDocumentFragment();
  blocks(String(src ?? "").replace(/\r\n?/g, "\n").replace(/\t/g, "    ").split("\n"), f, 0);
  return f;
}

function blocks(lines, out, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const indent = line.length - line.trimStart().length;
      const body = [];
      i++;
      while (i < lines.length && !new RegExp("^ {0,3}" + (fence[0] === "`" ? "`" : "~") + "{" + fence.length + ",}\\s*$").test(lines[i])) {
        body.push(lines[i].replace(new RegExp("^ {0," + indent + "}"), ""));
        i++;
      }
      i++; // the closing fence (or the end)
      const code = h("code", null, body.join("\n"));
      if (m[2]) code.dataset.lang = m[2];
      out.append(h("pre", null, code));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      out.append(h("h" + m[1].length, null, inline(m[2] || "")));
      i++;
      continue;
    }
    if (RULE.test(line)) { out.append(h("hr")); i++; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      const q = h("blockquote");
      if (depth < 20) blocks(body, q, depth + 1); else q.append(body.join("\n"));
      out.append(q);
      continue;
    }
    if ((m = ITEM.exec(line)) && depth < 20) { i = list(lines, i, out, depth); continue; }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = table(lines, i, out);
      continue;
    }
    // A paragraph: up to a blank line or the start of another block.
    const body = [line.trim()];
    i++;
    while (i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) && !RULE.test(lines[i]) &&
      !QUOTE.test(lines[i]) && !ITEM.test(lines[i])) {
      body.push(lines[i].trim());
      i++;
    }
    out.append(h("p", null, inline(body.join("\n"))));
  }
}

/** A list starting at lines[i]; returns the index after it. */
function list(lines, i, out, depth) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const l = ordered ? h("ol") : h("ul");
  if (ordered && parseInt(first[2], 10) !== 1) l.setAttribute("start", String(parseInt(first[2], 10)));
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const inner = indent + m[2].length + 1;
    const body = [m[3] || ""];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      const lead = line.length - line.trimStart().length;
      if (!line.trim()) {
        // A blank line: the item goes on only if the next line is indented into it.
        let j = i + 1;
        while (j < lines.length && !lines[j].trim()) j++;
        if (j < lines.length && lines[j].length - lines[j].trimStart().length >= inner) { body.push(""); i++; continue; }
        break;
      }
      if (lead >= Math.min(inner, indent + 2)) { body.push(line.slice(Math.min(lead, inner))); i++; continue; }
      if (ITEM.test(line) || FENCE.test(line) || HEADING.test(line) || QUOTE.test(line) || RULE.test(line)) break;
      if (!lines[i - 1].trim()) break;
      body.push(line.trim()); // a lazy continuation of the item's paragraph
      i++;
    }
    const li = h("li");
    blocks(body, li, depth + 1);
    l.append(li);
    // Blank lines between items of the same list.
    let j = i;
    while (j < lines.length && !lines[j].trim()) j++;
    const next = j < lines.length && ITEM.exec(lines[j]);
    if (j > i && next && next[1].length === indent && /\d/.test(next[2]) === ordered) i = j;
  }
  out.append(l);
  return i;
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function table(lines, i, out) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
  const cell = (tag, text, k) => { const c = h(tag, null, inline(text)); if (align[k]) c.className = "al-" + align[k]; return c; };
  const t = h("table", null, h("thead", null, h("tr", null, head.map((c, k) => cell("th", c, k)))));
  const body = h("tbody");
  i += 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
    const row = cells(lines[i]);
    body.append(h("tr", null, head.map((_, k) => cell("td", row[k] ?? "", k))));
    i++;
  }
  t.append(body);
  out.append(h("div.table", null, t));
  return i;
}

const INLINE = new RegExp([
  /\\(?<esc>[!-/:-@[-`{-~])/.source,
  /(?<ticks>`+)(?<code>[^`]|[^`][\s\S]*?[^`])\k<ticks>(?!`)/.source,
  /(?<bang>!?)\[(?<label>(?:\\.|[^\\[\]]|\[(?:\\.|[^\\[\]])*\])*)\]\(\s*(?<url><[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/.source,
  /<(?<auto>(?:https?:\/\/|mailto:)[^\s<>]+)>/.source,
  /(?<bare>https?:\/\/[^\s<>]*[^\s<>.,:;"'!?)\]*_~])/.source,
  /\*\*(?=\S)(?<s1>[\s\S]*?\S)\*\*|(?<![\p{L}\p{N}])__(?=\S)(?<s2>[\s\S]*?\S)__(?![\p{L}\p{N}])/.source,
  /\*(?=[^\s*])(?<e1>[\s\S]*?[^\s*])\*(?!\*)|(?<![\p{L}\p{N}_])_(?=[^\s_])(?<e2>[\s\S]*?[^\s_])_(?![\p{L}\p{N}_])/.source,
  /~~(?=\S)(?<del>[\s\S]*?\S)~~/.source,
].join("|"), "gu");

/** Only these URLs become links. */
export function safeUrl(url) {
  const u = String(url).trim();
  return /^(https?:\/\/|mailto:)/i.test(u) && !/[\u0000-\u001f\u007f]/.test(u) ? u : null;
}

function link(url, children, title) {
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer", title }, children);
}

/** Inline markdown as an array of nodes; `inLink` leaves nested links out. */
function inline(text, inLink = false, depth = 0) {
  const out = [];
  const plain = (s) => {
    const lines = s.split("\n");
    lines.forEach((l, k) => { if (k) out.push(h("br")); if (l) out.push(document.createTextNode(l)); });
  };
  if (depth > 12) { plain(text); return out; }
  const re = new RegExp(INLINE.source, INLINE.flags);
  let last = 0;
  let m;
  while ((m = re.exec(text))) {
    const g = m.groups;
    const isLink = g.label !== undefined || g.auto !== undefined || g.bare !== undefined;
    if (isLink && inLink) continue; // no links inside a link: read as text
    plain(text.slice(last, m.index));
    last = re.lastIndex;
    if (g.esc !== undefined) out.push(document.createTextNode(g.esc));
    else if (g.code !== undefined) out.push(h("code", null, g.code.replace(/\n/g, " ").replace(/^ (.*) $/, "$1")));
    else if (g.label !== undefined) {
      const url = safeUrl(g.url.replace(/^<|>$/g, "").replace(/\\(.)/g, "$1"));
      const label = g.bang ? ["image: ", g.label || url] : inline(g.label, true, depth + 1);
      if (url) out.push(link(url, label, g.bang ? url : undefined));
      else plain(m[0]); // a javascript:, data: or relative link stays the text it was
    } else if (g.auto !== undefined) out.push(link(g.auto, g.auto.replace(/^mailto:/i, "")));
    else if (g.bare !== undefined) out.push(link(g.bare, g.bare));
    else if (g.s1 !== undefined || g.s2 !== undefined) out.push(h("strong", null, inline(g.s1 ?? g.s2, inLink, depth + 1)));
    else if (g.e1 !== undefined || g.e2 !== undefined) out.push(h("em", null, inline(g.e1 ?? g.e2, inLink, depth + 1)));
    else if (g.del !== undefined) out.push(h("del", null, inline(g.del, inLink, depth + 1)));
    if (m[0].length === 0) re.lastIndex++;
  }
  plain(text.slice(last));
  return out;
}
