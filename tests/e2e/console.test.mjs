// End-to-end in a real browser: the console the Worker serves at GET / (console/, bundled into
// build/console/ by scripts/build-console.mjs), driven by headless Debian Chromium through
// playwright-core, against the built Worker in workerd whose model is the scripted streaming
// OpenAI-compatible server below (slow pieces, reasoning, tool calls, failures on demand).
// The console is given a scoped write token for its agent (POST /agents/{agent}/tokens), never
// the admin token, which only this test uses, to mint that token and to write "from elsewhere".
// The tests run in order on one page and one Worker; each leaves what the next one needs in
// `state`. Screenshots of the key steps go to test-artifacts/console/.
// The chat tests need the AI SDK UI message stream form of POST …/chat (a body with
// `trigger`, answered with `x-vercel-ai-ui-message-stream: v1`).
// Skips itself (with the reason) when /usr/bin/chromium or playwright-core is missing
// (scripts/setup.sh installs both) or when GET / does not answer the console.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { gzipSync } from "node:zlib";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { startWorker, collect, ROOT } from "./harness.mjs";

/** The admin token (API_TOKEN): only the test itself uses it. */
const ADMIN_TOKEN = "test-token";
const AGENT = "con";
const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(ROOT, "test-artifacts", "console");
const WAIT = 15_000;
const SOUL = "You are the console test agent.";
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", content: SOUL },
    { label: "notes", kind: "writable", description: "Scratch notes", maxTokens: 200 },
  ],
};

// ── A scripted streaming OpenAI-compatible model ─────────────────────────────────────────────
// POST /v1/chat/completions answers the next queued reply (`{content: "OK."}` when none is
// queued): `content` streamed as `pieces` (default: split after each space) one every
// `pieceDelayMs` (default 5), `reasoning` first as reasoning_content, then `toolCalls`;
// `status` + `body` answer an error instead.

async function startModel() {
  const requests = [];
  const queue = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      if (req.method !== "POST" || req.url.split("?")[0] !== "/v1/chat/completions") {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
        return;
      }
      let body = null;
      try { body = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch { /* not JSON */ }
      requests.push(body);
      const r = queue.shift() ?? { content: "OK." };
      if (r.status) {
        res.writeHead(r.status, { "content-type": "application/json" });
        res.end(JSON.stringify(r.body ?? { error: { message: "scripted failure" } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      const chunk = (delta, finish = null) => ({ id: "chatcmpl-test", object: "chat.completion.chunk", model: "test-model",
        choices: [{ index: 0, delta, finish_reason: finish }] });
      const wait = () => new Promise((resolve) => setTimeout(resolve, r.pieceDelayMs ?? 5));
      send(chunk({ role: "assistant", content: "" }));
      if (r.reasoning) send(chunk({ reasoning_content: r.reasoning }));
      const content = r.content ?? "";
      for (const p of r.pieces ?? (content ? content.split(/(?<= )/) : [])) {
        if (res.destroyed) return; // the Worker went away (a stopped turn)
        send(chunk({ content: p }));
        await wait();
      }
      for (const [i, c] of (r.toolCalls ?? []).entries()) {
        send(chunk({ tool_calls: [{ index: i, id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments ?? {}) } }] }));
      }
      send(chunk({}, r.toolCalls ? "tool_calls" : "stop"));
      send({ id: "chatcmpl-test", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 } });
      res.write("data: [DONE]\n\n");
      res.end();
    });
  });
  await new Promise((resolve, reject) => { server.once("error", reject); server.listen(0, "127.0.0.1", resolve); });
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    reply: (...r) => queue.push(...r),
    close: () => new Promise((resolve) => { server.close(() => resolve()); server.closeAllConnections?.(); }),
  };
}

/** A free TCP port on 127.0.0.1 (the Worker keeps it across restart(), so the page can reconnect). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// ── Set-up ───────────────────────────────────────────────────────────────────────────────────

let skipReason = null;
let model;
let w;
let browser;
/** @type {import("playwright-core").Page} */
let page;
let TOKEN = null;
let origin = null;
/** Uncaught exceptions and console errors of the pages; dialogs they opened. */
const pageErrors = [];
const dialogs = [];
/** Every request the main page made: {method, url, auth, body}; chat answers: {status, headers}. */
const requests = [];
const chatAnswers = [];
const state = { sid: null };
let shots = 0;

const A = `/agents/${AGENT}`;
const admin = (method, path, body) => w.json(method, path, body);
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });

before(async () => {
  if (!existsSync(CHROMIUM)) { skipReason = `${CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium`; return; }
  let chromium;
  try { ({ chromium } = await import("playwright-core")); } catch (e) { skipReason = `playwright-core is not installed (run scripts/setup.sh): ${e.message}`; return; }
  model = await startModel();
  w = await startWorker({
    apiToken: ADMIN_TOKEN,
    port: await freePort(),
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model",
      TOKEN_SECRET: "console-token-secret-0123456789abcdef", SESSION_CONFIG: JSON.stringify(CONFIG),
    },
  });
  const minted = await admin("POST", `${A}/tokens`, { scope: "write", ttlSeconds: 3600 });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  TOKEN = minted.body.token;
  const r = await w.fetch("/", { auth: false });
  const type = r.headers.get("content-type") ?? "";
  const html = await r.text();
  if (r.status !== 200 || !type.startsWith("text/html") || !html.includes("console.js")) {
    skipReason = `GET / does not serve the console (HTTP ${r.status}, content-type "${type}"): run node scripts/build-console.mjs`;
    return;
  }
  origin = w.url.href;
  rmSync(ARTIFACTS, { recursive: true, force: true });
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-features=LocalNetworkAccessChecks"],
  });
  page = await newPage();
  page.on("request", (q) => requests.push({ method: q.method(), url: q.url(), auth: q.headers().authorization ?? null, body: q.postData() }));
  page.on("response", async (resp) => {
    if (resp.request().method() === "POST" && /\/chat$/.test(resp.url())) chatAnswers.push({ status: resp.status(), headers: resp.headers() });
  });
});

after(async () => {
  await browser?.close();
  await w?.stop();
  await model?.close();
});

async function newPage() {
  const p = await browser.newPage({ viewport: { width: 1400, height: 860 } });
  p.on("pageerror", (e) => pageErrors.push(`pageerror: ${e.message}`));
  p.on("console", (m) => { if (m.type() === "error") pageErrors.push(`console: ${m.text()}`); });
  p.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  return p;
}

async function shot(name, p = page) {
  await p.screenshot({ path: join(ARTIFACTS, `${String(++shots).padStart(2, "0")}-${name}.png`) });
}

/** The shown messages: [{role, id, text, streaming, pos}], in order. */
const bubbles = () => page.$$eval("#messages > .msg", (els) => els.map((e) => ({
  role: e.dataset.role, id: e.dataset.id,
  text: [...e.querySelectorAll(":scope > .body > .md")].map((t) => t.textContent).join("\n"),
  streaming: e.classList.contains("streaming"),
  pos: e.querySelector(":scope > .head .branch .pos")?.textContent ?? null,
})));

/** Waits until the shown branch is `expected` ([role, text] pairs, texts exact), nothing streaming. */
async function waitBranch(expected, what = "the branch") {
  try {
    await page.waitForFunction((exp) => {
      const els = [...document.querySelectorAll("#messages > .msg")];
      const text = (e) => [...e.querySelectorAll(":scope > .body > .md")].map((t) => t.textContent).join("\n");
      return document.body.dataset.chat === "ready" && els.length === exp.length &&
        els.every((e, i) => e.dataset.role === exp[i][0] && text(e) === exp[i][1] && !e.classList.contains("streaming"));
    }, expected, { timeout: WAIT });
  } catch (e) {
    assert.fail(`${what}: the page did not show ${JSON.stringify(expected)} (${e.message.split("\n")[0]});\n` +
      `shown: ${JSON.stringify(await bubbles().catch(() => "?"))}\nstatus: ${await page.textContent("#status").catch(() => "?")}\n` +
      `page errors: ${JSON.stringify(pageErrors)}`);
  }
  return bubbles();
}

/** The stored branch ids (admin), root → latest leaf, or → `leaf`. */
async function storedBranch(sid, leaf) {
  const r = await admin("GET", `${A}/sessions/${sid}/history?raw=1${leaf ? `&leaf=${encodeURIComponent(leaf)}` : ""}`);
  assert.equal(r.status, 200);
  return r.body.messages;
}

/** The bodies of the chat requests the page made since index `from`. */
const chatBodies = (from) => requests.slice(from).filter((q) => q.method === "POST" && /\/chat$/.test(q.url)).map((q) => JSON.parse(q.body));

async function waitStatus(re) {
  try {
    await page.waitForFunction((src) => new RegExp(src).test(document.getElementById("status").textContent), re.source, { timeout: WAIT });
  } catch {
    assert.fail(`the status line never matched ${re}: "${await page.textContent("#status")}"`);
  }
}

const needChat = "the AI SDK UI message stream form of POST …/chat";

/** page.waitForFunction that says what the page showed when it times out. */
async function waitFor(fn, arg, what) {
  try {
    await page.waitForFunction(fn, arg, { timeout: WAIT });
  } catch (e) {
    assert.fail(`timed out waiting until ${what} (${e.message.split("\n")[0]});\nshown: ${JSON.stringify(await bubbles().catch(() => "?"))}\n` +
      `chat: ${await page.evaluate(() => document.body.dataset.chat)}; status: ${await page.textContent("#status").catch(() => "?")}\n` +
      `model requests: ${model.requests.length}; page errors: ${JSON.stringify(pageErrors)}`);
  }
}

// ── The tests ────────────────────────────────────────────────────────────────────────────────

test("the token: the console asks for a scoped token and refuses the admin token", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  const fresh = await newPage();
  const seen = [];
  fresh.on("request", (q) => seen.push({ url: q.url(), auth: q.headers().authorization ?? null }));
  try {
    await fresh.goto(new URL("/", origin).href);
    assert.match(await fresh.getAttribute("#token", "placeholder"), /scoped token \(POST \/agents\/\{agent\}\/tokens\)/);
    assert.match(await fresh.$eval("#token", (e) => e.closest("label").textContent), /scoped token/);
    await fresh.waitForFunction(() => document.getElementById("status").textContent !== "", null, { timeout: WAIT });
    assert.match(await fresh.textContent("#status"), /scoped token \(POST \/agents\/\{agent\}\/tokens\), never the admin token/);

    // The admin token is refused: not kept, not stored, never sent.
    await fresh.fill("#token", ADMIN_TOKEN);
    await fresh.locator("#token").dispatchEvent("change");
    await fresh.waitForFunction(() => /not a scoped token/.test(document.getElementById("status").textContent), null, { timeout: WAIT });
    assert.equal(await fresh.inputValue("#token"), "", "the field is emptied");
    assert.equal(await fresh.evaluate(() => localStorage.getItem("sa-token")), null, "nothing is stored");
    await shot("admin-token-refused", fresh);

    // Through the address bar too.
    await fresh.goto("about:blank");
    await fresh.goto(new URL(`/#token=${ADMIN_TOKEN}&agent=${AGENT}`, origin).href);
    await fresh.waitForFunction(() => /not a scoped token/.test(document.getElementById("status").textContent), null, { timeout: WAIT });
    assert.ok(!fresh.url().includes(ADMIN_TOKEN), "the token is taken out of the address bar");
    assert.equal(await fresh.evaluate(() => localStorage.getItem("sa-token")), null);

    // A scoped token is taken: its claims are shown, it is stored, the sessions are listed with it.
    await fresh.fill("#token", TOKEN);
    await fresh.locator("#token").dispatchEvent("change");
    await fresh.waitForFunction(() => /write · con ·/.test(document.getElementById("token-info").textContent), null, { timeout: WAIT });
    assert.equal(await fresh.evaluate(() => localStorage.getItem("sa-token")), TOKEN);
    assert.equal(await fresh.inputValue("#agent"), AGENT, "the agent comes from the token");
    await fresh.waitForFunction(() => /No sessions yet/.test(document.getElementById("status").textContent), null, { timeout: WAIT });
    const api = seen.filter((q) => new URL(q.url).pathname.startsWith("/agents/"));
    assert.ok(api.length > 0 && api.every((q) => q.auth === `Bearer ${TOKEN}`), `every API call carries the scoped token: ${JSON.stringify(api)}`);
    assert.ok(!seen.some((q) => (q.auth ?? "").includes(ADMIN_TOKEN) || q.url.includes(ADMIN_TOKEN)), "the admin token was never sent");
  } finally {
    await fresh.close();
  }
});

test("sessions: the page takes the token from the hash, creates, renames and deletes (after asking)", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  await page.goto(new URL(`/#token=${TOKEN}&agent=${AGENT}`, origin).href);
  assert.equal(await page.inputValue("#token"), TOKEN);
  assert.ok(!page.url().includes(TOKEN), "the token is taken out of the address bar");
  assert.equal(await page.evaluate(() => localStorage.getItem("sa-token")), TOKEN);

  await page.click("#new-session");
  await page.waitForSelector("#sessions li[data-sid]", { timeout: WAIT });
  await page.click("#new-session");
  await page.waitForFunction(() => document.querySelectorAll("#sessions li[data-sid]").length === 2, null, { timeout: WAIT });
  const listed = (await admin("GET", `${A}/sessions`)).body.sessions;
  assert.equal(listed.length, 2, "two sessions were created over HTTP");
  const [second, first] = listed; // newest first
  assert.ok(listed.every((s) => s.source === "console"));
  // The newest is open: its socket is up.
  await page.waitForSelector(`body[data-ws="open"] #messages[data-sid="${second.id}"]`, { timeout: WAIT });

  // Rename the first.
  await page.click(`#sessions li[data-sid="${first.id}"] .rename`);
  await page.fill(".rename-input", "Tea <b>talk</b>");
  await page.press(".rename-input", "Enter");
  await page.waitForFunction((id) => document.querySelector(`#sessions li[data-sid="${id}"] .name`)?.textContent === "Tea <b>talk</b>", first.id, { timeout: WAIT });
  assert.equal((await admin("GET", `${A}/sessions/${first.id}`)).body.name, "Tea <b>talk</b>");

  // Delete the second: asked first; "Cancel" keeps it.
  await page.click(`#sessions li[data-sid="${second.id}"] .delete`);
  await page.waitForSelector(`#sessions li[data-sid="${second.id}"] .confirm .yes`, { timeout: WAIT });
  await shot("delete-confirmation");
  await page.click(`#sessions li[data-sid="${second.id}"] .confirm .no`);
  await page.waitForSelector(`#sessions li[data-sid="${second.id}"] .delete`, { timeout: WAIT });
  assert.equal((await admin("GET", `${A}/sessions/${second.id}`)).status, 200, "Cancel deleted nothing");
  await page.click(`#sessions li[data-sid="${second.id}"] .delete`);
  await page.click(`#sessions li[data-sid="${second.id}"] .confirm .yes`);
  await page.waitForFunction((id) => !document.querySelector(`#sessions li[data-sid="${id}"]`), second.id, { timeout: WAIT });
  assert.equal((await admin("GET", `${A}/sessions/${second.id}`)).status, 404, "the session is gone");

  await page.click(`#sessions li[data-sid="${first.id}"] .open`);
  await page.waitForSelector(`body[data-ws="open"] #messages[data-sid="${first.id}"]`, { timeout: WAIT });
  state.sid = first.id;
});

const REPLY1 = "Hello! I am the scripted test model, and this reply arrives piece by piece, slowly enough to be watched.";
const REPLY2 = "Here is a regenerated answer, on a new branch.";

test("a turn: the user's message at once, the reply seen part way through, then stored", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.sid, "a session is open (previous test)");
  model.reply({ content: REPLY1, pieceDelayMs: 70 });
  const from = requests.length;
  await page.fill("#input", "hello there");
  await page.press("#input", "Enter");
  // The user's message is shown before the reply is complete, and the box is emptied.
  await page.waitForFunction(() => [...document.querySelectorAll('#messages > .msg[data-role="user"]')].some((e) => e.textContent.includes("hello there")), null, { timeout: 3000 });
  assert.equal(await page.inputValue("#input"), "");
  // Part of the reply, in a streaming bubble.
  try {
    await page.waitForFunction((full) => {
      const a = document.querySelector('#messages > .msg.streaming[data-role="assistant"] .md');
      const text = a?.textContent ?? "";
      return text.length > 10 && text.length < full.length - 10 && full.startsWith(text);
    }, REPLY1, { timeout: WAIT });
  } catch {
    assert.fail(`no part of the reply was seen while it streamed (${needChat}); status: ${await page.textContent("#status")}; shown: ${JSON.stringify(await bubbles())}; chat answers: ${JSON.stringify(chatAnswers)}`);
  }
  assert.ok(await page.isVisible("#stop"), "the stop button shows while the turn runs");
  await shot("streaming");
  const [u, a] = await waitBranch([["user", "hello there"], ["assistant", REPLY1]]);

  // The request was the useChat body; the answer the UI message stream.
  const [body] = chatBodies(from);
  assert.equal(body.trigger, "submit-message");
  assert.equal(body.id, state.sid);
  assert.deepEqual(body.messages.map((m) => [m.id, m.role, m.parts]), [[u.id, "user", [{ type: "text", text: "hello there" }]]]);
  assert.equal(chatAnswers.at(-1).headers["x-vercel-ai-ui-message-stream"], "v1");
  // What is shown is what is stored.
  assert.deepEqual((await storedBranch(state.sid)).map((m) => m.id), [u.id, a.id]);
  Object.assign(state, { u1: u.id, a1: a.id });
});

test("regenerate: a sibling reply, ‹ 2/2 ›, and switching back and forth", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.a1, "a first reply is shown (previous test)");
  model.reply({ content: REPLY2 });
  const from = requests.length;
  await page.click(`.msg[data-id="${state.a1}"] .regen`);
  const [u, a] = await waitBranch([["user", "hello there"], ["assistant", REPLY2]], "after Regenerate");
  assert.equal(u.id, state.u1, "the same user message");
  assert.notEqual(a.id, state.a1);
  await page.waitForFunction((id) => document.querySelector(`.msg[data-id="${id}"] .branch .pos`)?.textContent === "2/2", a.id, { timeout: WAIT });
  const [body] = chatBodies(from);
  assert.equal(body.trigger, "regenerate-message");
  assert.deepEqual(body.messages.map((m) => m.id), [state.u1], "the branch up to the user message");
  const kids = (await admin("GET", `${A}/sessions/${state.sid}/messages/${state.u1}/branches`)).body.messages;
  assert.deepEqual(kids.map((m) => m.id), [state.a1, a.id], "two replies under the same user message");
  // The model saw the branch only, without the first answer.
  assert.doesNotMatch(JSON.stringify(model.requests.at(-1).messages), /scripted test model/);
  await shot("regenerated-2of2");

  await page.click(`.msg[data-id="${a.id}"] .branch .prev`);
  let shown = await waitBranch([["user", "hello there"], ["assistant", REPLY1]], "after ‹");
  assert.equal(shown[1].pos, "1/2");
  assert.equal(shown[1].id, state.a1);
  await page.click(`.msg[data-id="${state.a1}"] .branch .next`);
  shown = await waitBranch([["user", "hello there"], ["assistant", REPLY2]], "after ›");
  assert.equal(shown[1].pos, "2/2");
  state.a2 = a.id;
});

test("edit and resend: a new user message beside the edited one, as a branch", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.a2, "a regenerated reply is shown (previous test)");
  model.reply({ content: "Second answer." });
  await page.fill("#input", "second question");
  await page.press("#input", "Enter");
  const [, , u2] = await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question"], ["assistant", "Second answer."]]);

  model.reply({ content: "Edited answer." });
  const from = requests.length;
  await page.click(`.msg[data-id="${u2.id}"] .edit`);
  await page.fill(".edit-input", "second question, edited");
  await page.click(".send-edit");
  const shown = await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question, edited"], ["assistant", "Edited answer."]], "after the edit");
  assert.notEqual(shown[2].id, u2.id, "a new user message");
  assert.equal(shown[2].pos, "2/2");
  const [body] = chatBodies(from);
  assert.equal(body.trigger, "submit-message");
  assert.deepEqual(body.messages.map((m) => m.id), [state.u1, state.a2, shown[2].id], "the branch up to the edited message's parent, then the new message");
  const kids = (await admin("GET", `${A}/sessions/${state.sid}/messages/${state.a2}/branches`)).body.messages;
  assert.deepEqual(kids.map((m) => [m.id, m.role]), [[u2.id, "user"], [shown[2].id, "user"]], "siblings under the same parent");
  assert.equal((await admin("GET", `${A}/sessions/${state.sid}/messages/${u2.id}`)).body.parts[0].text, "second question", "the edited message is kept as it was");
  await shot("edited-branch");

  await page.click(`.msg[data-id="${shown[2].id}"] .branch .prev`);
  await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question"], ["assistant", "Second answer."]], "back to the first version");
  await page.click(`.msg[data-id="${u2.id}"] .branch .next`);
  await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question, edited"], ["assistant", "Edited answer."]]);

  // The first message edited: a new root beside it; back to the old root shows its newest branch.
  model.reply({ content: "A fresh start." });
  await page.click(`.msg[data-id="${state.u1}"] .edit`);
  await page.fill(".edit-input", "hello again");
  await page.click(".send-edit");
  const root = await waitBranch([["user", "hello again"], ["assistant", "A fresh start."]], "after editing the first message");
  assert.equal(root[0].pos, "2/2");
  const roots = (await admin("GET", `${A}/sessions/${state.sid}/export`)).body.messages.filter((r) => r.parentId === null);
  assert.deepEqual(roots.map((r) => r.message.id), [state.u1, root[0].id], "two roots");
  await page.click(`.msg[data-id="${root[0].id}"] .branch .prev`);
  await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question, edited"], ["assistant", "Edited answer."]], "the old root's newest branch");
  state.leaf = shown[3].id;
  state.root2 = root[0].id;
});

test("stop ends the running turn and keeps what was shown; a reload mid-turn does too", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.leaf, "a conversation is shown (previous tests)");
  // A session of its own, so the branches the next tests expect stay as they are.
  const sid = "stop-1";
  assert.equal((await admin("POST", `${A}/sessions/${sid}/messages`, { message: user("s0", "a session to stop in") })).status, 201);
  await page.click("#refresh");
  await page.click(`#sessions li[data-sid="${sid}"] .open`);
  await page.waitForSelector(`#messages[data-sid="${sid}"] .msg[data-id="s0"]`, { timeout: WAIT });
  const long = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
  const streamingHas = (re) => page.waitForFunction((src) => new RegExp(src).test(document.querySelector('#messages > .msg.streaming[data-role="assistant"]')?.textContent ?? ""), re, { timeout: WAIT });
  model.reply({ content: long, pieceDelayMs: 120 });
  await page.fill("#input", "tell me a long story");
  await page.press("#input", "Enter");
  await streamingHas("word2");
  await page.click("#stop");
  await waitStatus(/Stopped/);
  await page.waitForFunction(() => document.getElementById("stop").hidden, null, { timeout: WAIT });
  const stored = (await admin("GET", `${A}/sessions/${sid}/export`)).body.messages;
  assert.equal(stored.length, 3, "the user message and the reply so far");
  const stopped = stored.at(-1).message;
  assert.equal(stopped.metadata.stopped, true);
  assert.match(stopped.parts[0].text, /^word0 word1 word2/);
  assert.ok(!stopped.parts[0].text.includes("word39"));
  await waitBranch([["user", "a session to stop in"], ["user", "tell me a long story"], ["assistant", stopped.parts[0].text.trim()]], "the branch with the stopped reply");
  assert.equal(await page.inputValue("#input"), "", "the message was kept, not put back in the box");
  await shot("stopped");

  // A reload mid-turn: the page goes away, the turn stops (chat.onDisconnect "stop"), and the
  // reloaded page shows what was kept (its resume request answers 204: nothing runs).
  model.reply({ content: long, pieceDelayMs: 120 });
  await page.fill("#input", "and another one");
  await page.press("#input", "Enter");
  await streamingHas("word2");
  const seen = requests.length;
  await page.reload();
  let kept = null;
  for (const deadline = Date.now() + WAIT; !kept && Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
    const m = (await admin("GET", `${A}/sessions/${sid}/export`)).body.messages;
    if (m.length === 5) kept = m.at(-1).message;
  }
  assert.ok(kept, "the reloaded turn was kept");
  assert.equal(kept.metadata.stopped, true);
  await page.waitForFunction((text) => [...document.querySelectorAll('#messages > .msg[data-role="assistant"]')].some((e) => e.textContent.includes(text)),
    kept.parts[0].text.slice(0, 20), { timeout: WAIT });
  await waitFor((n) => performance.getEntriesByType("resource").some((e) => /\/chat\/[^/]+\/stream$/.test(new URL(e.name).pathname)), null, "the reloaded page asked to resume");
  assert.ok(requests.length > seen);
  await shot("reloaded");

  // Back to the conversation the next tests go on with.
  await page.click(`#sessions li[data-sid="${state.sid}"] .open`);
  await page.waitForSelector(`#messages[data-sid="${state.sid}"] .msg[data-id="${state.root2}"]`, { timeout: WAIT });
  await page.click(`.msg[data-id="${state.root2}"] .branch .prev`);
  await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question, edited"], ["assistant", "Edited answer."]]);
  await page.fill("#input", "");
});

test("a failed turn: the error is shown and the text stays in the box", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.leaf, "a conversation is shown (previous tests)");
  const before = (await admin("GET", `${A}/sessions/${state.sid}/export`)).body.messages.length;
  model.reply({ status: 500, body: { error: { message: "upstream overloaded" } } });
  await page.fill("#input", "will this fail?");
  await page.press("#input", "Enter");
  // The provider's words go to the operator's log, never to the page: the status says what failed.
  await waitStatus(/failed.*the model answered HTTP 500/);
  assert.equal(await page.getAttribute("#status", "class"), "err");
  assert.equal(await page.inputValue("#input"), "will this fail?");
  await shot("failed-turn");
  assert.equal((await admin("GET", `${A}/sessions/${state.sid}/export`)).body.messages.length, before, "nothing was stored");
  await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question, edited"], ["assistant", "Edited answer."]], "the branch as stored");
  await page.fill("#input", "");
});

test("XSS attempts in messages, names and the model's reply are shown as text", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  const sid = "xss-1";
  const evil = [
    `<img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script>`,
    `[click me](javascript:window.__xss=3) [data](data:text/html,<script>alert(1)</script>) ![pic](javascript:alert(4)) ` +
      `<a href="javascript:alert(5)">raw link</a> [ok](https://example.com/a) **bold** <b>not bold</b>` +
      "\n\n- item one\n- item two\n\n```html\n<script>window.__xss=12</script>\n```",
  ];
  assert.equal((await admin("POST", `${A}/sessions/${sid}/messages`, { message: user("x1", evil[0]) })).status, 201);
  assert.equal((await admin("POST", `${A}/sessions/${sid}/messages`, { message: { id: "x2", role: "assistant", parts: [{ type: "text", text: evil[1] }] } })).status, 201);
  assert.equal((await admin("PATCH", `${A}/sessions/${sid}`, { name: `<img src=x onerror="window.__xss=6">` })).status, 200);
  await page.click("#refresh");
  await page.click(`#sessions li[data-sid="${sid}"] .open`);
  await page.waitForSelector('#messages[data-sid="xss-1"] .msg[data-id="x2"]', { timeout: WAIT });
  // And the model writes some too, streamed.
  model.reply({ content: `Sure: <img src=y onerror="window.__xss=7"> <iframe src="javascript:alert(8)"></iframe> done`, pieces: ["Sure: <im", "g src=y onerror=\"window.__", "xss=7\"> <ifr", "ame src=\"javascript:alert(8)\"></iframe> done"] });
  await page.fill("#input", "say something nasty");
  await page.press("#input", "Enter");
  await waitFor(() => document.body.dataset.chat === "ready" && /done$/.test(document.querySelector("#messages > .msg:last-child .md")?.textContent ?? ""), null, "the model's reply is shown");
  await shot("xss-as-text");

  const found = await page.evaluate(() => ({
    xss: window.__xss ?? null,
    elements: document.querySelectorAll("img, script:not([src='/console.js']), iframe, object, embed, [onerror], [onclick], #messages b").length,
    hrefs: [...document.querySelectorAll("a[href]")].map((a) => [a.getAttribute("href"), a.rel, a.target, a.textContent]),
    strong: [...document.querySelectorAll("#messages strong")].map((e) => e.textContent),
    items: [...document.querySelectorAll('#messages .msg[data-id="x2"] li')].map((e) => e.textContent),
    code: document.querySelector('#messages .msg[data-id="x2"] pre code')?.textContent,
    text: document.getElementById("messages").textContent,
    name: document.querySelector('#sessions li[data-sid="xss-1"] .name').textContent,
  }));
  assert.equal(found.xss, null, "no script ran");
  assert.equal(found.elements, 0, "no element was made from the messages' HTML");
  assert.deepEqual(found.hrefs, [["https://example.com/a", "noopener noreferrer", "_blank", "ok"]], "only the https link is a link");
  assert.deepEqual(found.strong, ["bold"], "markdown is rendered");
  assert.deepEqual(found.items, ["item one", "item two"]);
  assert.equal(found.code, "<script>window.__xss=12</script>");
  for (const s of [`<img src=x onerror="window.__xss=1">`, "<script>window.__xss=2</script>", "[click me](javascript:window.__xss=3)",
    `<a href="javascript:alert(5)">raw link</a>`, "<b>not bold</b>", `<img src=y onerror="window.__xss=7">`, "<iframe"]) {
    assert.ok(found.text.includes(s), `shown as text: ${s}`);
  }
  assert.equal(found.name, `<img src=x onerror="window.__xss=6">`);
  assert.deepEqual(dialogs, [], "no dialog was opened");
});

test("reasoning and tool calls are collapsible, with the tool's name, input and output or error", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.sid);
  // Opened again, the session shows its newest branch (the edited first message); ‹ goes back.
  await page.click(`#sessions li[data-sid="${state.sid}"] .open`);
  await page.waitForSelector(`#messages[data-sid="${state.sid}"] .msg[data-id="${state.root2}"]`, { timeout: WAIT });
  await page.click(`.msg[data-id="${state.root2}"] .branch .prev`);
  await waitBranch([["user", "hello there"], ["assistant", REPLY2], ["user", "second question, edited"], ["assistant", "Edited answer."]]);
  model.reply(
    { reasoning: "The user wants me to remember a drink.", toolCalls: [
      { id: "c1", name: "set_context", arguments: { label: "notes", content: "likes green tea" } },
      { id: "c2", name: "no_such_tool", arguments: { x: 1 } },
    ] },
    { content: "Noted: green tea." },
  );
  await page.fill("#input", "remember that I like green tea");
  await page.press("#input", "Enter");
  await waitFor(() => document.body.dataset.chat === "ready" && document.querySelector("#messages > .msg:last-child .md")?.textContent === "Noted: green tea.", null, "the reply after the tool calls is shown");
  const last = page.locator("#messages > .msg:last-child");
  const reasoning = last.locator("details.reasoning");
  assert.equal(await reasoning.count(), 1);
  assert.equal(await reasoning.evaluate((d) => d.open), false, "closed at first");
  await reasoning.locator("summary").click();
  assert.equal(await reasoning.evaluate((d) => d.open), true);
  assert.match(await reasoning.textContent(), /remember a drink/);
  const tools = last.locator("details.tool");
  assert.equal(await tools.count(), 2);
  await tools.nth(0).locator("summary").click();
  await tools.nth(1).locator("summary").click();
  assert.match(await tools.nth(0).locator("summary").textContent(), /set_context/);
  assert.match(await tools.nth(0).locator(".tool-input").textContent(), /"content": "likes green tea"/);
  assert.match(await tools.nth(0).locator(".tool-output").textContent(), /Written to notes/);
  assert.match(await tools.nth(1).locator("summary").textContent(), /no_such_tool.*error/);
  assert.match(await tools.nth(1).locator(".tool-error").textContent(), /no tool named "no_such_tool"/);
  await shot("reasoning-and-tools");
  state.toolUser = (await bubbles()).at(-2).id;
});

test("search across sessions opens the hit's session at its message", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.toolUser, "previous test");
  await page.click('#sessions li[data-sid="xss-1"] .open');
  await page.waitForSelector('#messages[data-sid="xss-1"] .msg[data-id="x1"]', { timeout: WAIT });
  await page.fill("#search", "green tea");
  await page.press("#search", "Enter");
  await page.waitForSelector(`#search-results li.hit[data-id="${state.toolUser}"]`, { timeout: WAIT });
  const hits = await page.$$eval("#search-results li.hit", (els) => els.map((e) => [e.dataset.sid, e.dataset.id]));
  assert.ok(hits.every(([sid]) => sid === state.sid), JSON.stringify(hits));
  await shot("search-results");
  await page.click(`#search-results li.hit[data-id="${state.toolUser}"] button`);
  await page.waitForSelector(`#messages[data-sid="${state.sid}"] .msg.flash[data-id="${state.toolUser}"]`, { timeout: WAIT });
  await page.fill("#search", "");
  await page.press("#search", "Enter");
});

test("panels: the frozen prompt and blocks, the agent's memories (search, forget), compactions with their originals", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.sid);
  // Prompt and blocks, live.
  await page.click('#tabs button[data-tab="context"]');
  await page.waitForSelector("#panel-body pre.prompt", { timeout: WAIT });
  assert.match(await page.textContent("#panel-body pre.prompt"), new RegExp(SOUL));
  await page.waitForFunction(() => /likes green tea/.test(document.querySelector('#panel-body .block[data-label="notes"] .block-content')?.textContent), null, { timeout: WAIT });
  assert.equal((await admin("PUT", `${A}/sessions/${state.sid}/context/notes`, { content: "likes oolong <script>window.__xss=10</script>" })).status, 200);
  await page.waitForFunction(() => /likes oolong <script>/.test(document.querySelector('#panel-body .block[data-label="notes"] .block-content')?.textContent), null, { timeout: WAIT });
  await shot("panel-context");

  // Memories: written elsewhere, shown live; ranked search; forget after asking.
  await page.click('#tabs button[data-tab="memories"]');
  await page.waitForSelector('#panel-body[data-panel="memories"] .mem-search', { timeout: WAIT });
  const m1 = (await admin("POST", `${A}/memories`, { content: "The user prefers trains to planes.", tags: ["travel"], score: 0.9 })).body;
  const m2 = (await admin("POST", `${A}/memories`, { content: `The user likes <img src=x onerror="window.__xss=11"> tea.` })).body;
  await page.waitForSelector(`#panel-body .memory[data-id="${m2.id}"]`, { timeout: WAIT });
  await page.waitForSelector(`#panel-body .memory[data-id="${m1.id}"]`, { timeout: WAIT });
  assert.match(await page.textContent(`#panel-body .memory[data-id="${m1.id}"]`), /#travel/);
  assert.match(await page.textContent(`#panel-body .memory[data-id="${m2.id}"] .content`), /<img src=x/);
  await page.fill(".mem-search input", "trains");
  await page.press(".mem-search input", "Enter");
  await page.waitForFunction(() => document.querySelectorAll("#panel-body .memory").length === 1 && /text match/.test(document.querySelector("#panel-body .memory .why")?.textContent), null, { timeout: WAIT });
  await shot("panel-memories-search");
  await page.click("#panel-body .note .link"); // show all
  await page.waitForSelector(`#panel-body .memory[data-id="${m2.id}"]`, { timeout: WAIT });
  await page.click(`#panel-body .memory[data-id="${m2.id}"] .forget`);
  await page.click(`#panel-body .memory[data-id="${m2.id}"] .confirm .yes`);
  await page.waitForFunction((id) => !document.querySelector(`#panel-body .memory[data-id="${id}"]`), m2.id, { timeout: WAIT });
  assert.equal((await admin("GET", `${A}/memories/${m2.id}`)).status, 404, "forgotten");
  assert.equal((await admin("GET", `${A}/memories/${m1.id}`)).status, 200);

  // A compaction of the first exchange: the summary replaces it on the branch, the originals open.
  const c = await admin("POST", `${A}/sessions/${state.sid}/compactions`, { summary: "## Summary\nThe user said **hello** twice.", fromMessageId: state.u1, toMessageId: state.a2 });
  assert.equal(c.status, 201, JSON.stringify(c.body));
  await page.click("#refresh");
  await page.waitForSelector(`#messages > .msg.summary[data-id="compaction_${c.body.id}"]`, { timeout: WAIT });
  assert.match(await page.textContent(`#messages > .msg.summary .md`), /The user said hello twice/);
  await page.click('#tabs button[data-tab="compactions"]');
  await page.waitForSelector(`#panel-body .compaction[data-cid="${c.body.id}"]`, { timeout: WAIT });
  assert.match(await page.textContent(`#panel-body .compaction[data-cid="${c.body.id}"]`), /applied on this branch/);
  await page.click(`#panel-body .compaction[data-cid="${c.body.id}"] details.originals summary`);
  await page.waitForFunction(() => document.querySelectorAll("#panel-body details.originals .msg.original").length === 2, null, { timeout: WAIT });
  const originals = await page.$$eval("#panel-body details.originals .msg.original", (els) => els.map((e) => [e.dataset.id, e.querySelector(".md")?.textContent]));
  assert.deepEqual(originals, [[state.u1, "hello there"], [state.a2, REPLY2]]);
  // The same from the summary in the conversation.
  await page.click("#messages > .msg.summary details.originals summary");
  await page.waitForFunction(() => document.querySelectorAll("#messages > .msg.summary .msg.original").length === 2, null, { timeout: WAIT });
  await shot("panel-compactions");
  assert.equal(await page.evaluate(() => window.__xss ?? null), null);
});

test("live updates: writes and a turn from another client show up, deletes disappear", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  const shownLeaf = (await bubbles()).at(-1).id;
  const stored = await storedBranch(state.sid);
  assert.equal(shownLeaf, stored.at(-1).id, "the latest branch is shown");
  assert.equal((await admin("POST", `${A}/sessions/${state.sid}/messages`, { message: user("ext-1", "written from elsewhere") })).status, 201);
  await page.waitForSelector('#messages > .msg[data-id="ext-1"]', { timeout: WAIT });

  // Another client chats over its own socket: the reply streams into this page too.
  const other = await w.webSocket(`${A}/sessions/${state.sid}/ws`, { auth: TOKEN, query: true });
  try {
    model.reply({ content: "An answer that another client asked for, streaming in slowly.", pieceDelayMs: 90 });
    const done = collect(other, (f) => f.type === "message" && f.message.role === "assistant", WAIT);
    other.send(JSON.stringify({ type: "chat", message: user("ext-2", "a question from elsewhere") }));
    await page.waitForFunction(() => {
      const g = document.querySelector("#messages > .msg.ghost .md")?.textContent ?? "";
      return g.length > 5 && !g.endsWith("slowly.");
    }, null, { timeout: WAIT });
    await shot("live-turn-from-elsewhere");
    const reply = (await done).at(-1).message;
    await page.waitForSelector(`#messages > .msg[data-id="${reply.id}"]:not(.ghost)`, { timeout: WAIT });
    assert.ok(await page.isVisible('#messages > .msg[data-id="ext-2"]'));
    assert.equal(await page.locator("#messages > .msg.ghost").count(), 0);
    state.extReply = reply.id;
  } finally {
    other.close();
  }
  assert.equal((await admin("DELETE", `${A}/sessions/${state.sid}/messages/${state.extReply}`)).status, 204);
  await page.waitForFunction((id) => !document.querySelector(`#messages > .msg[data-id="${id}"]`), state.extReply, { timeout: WAIT });
});

test("the page reconnects after workerd restarts and shows writes made after", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  await page.waitForSelector('body[data-ws="open"]', { timeout: WAIT });
  await w.restart(); // same port, same storage: every socket of the old runtime closes
  await page.waitForFunction(() => document.body.dataset.ws !== "open", null, { timeout: WAIT });
  await page.waitForSelector('body[data-ws="open"]', { timeout: 20_000 });
  assert.equal((await admin("POST", `${A}/sessions/${state.sid}/messages`, { message: user("after-restart", "written after the restart") })).status, 201);
  await page.waitForSelector('#messages > .msg[data-id="after-restart"]', { timeout: WAIT });
  await shot("after-restart");
});

test("the console is small: its transfer size", { timeout: 10_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  const sizes = {};
  for (const [k, path] of [["html", "/"], ["js", "/console.js"], ["css", "/console.css"]]) {
    const r = await w.fetch(path, { auth: false });
    assert.equal(r.status, 200, path);
    assert.match(r.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    sizes[k] = gzipSync(Buffer.from(await r.arrayBuffer()), { level: 9 }).length;
  }
  const total = sizes.html + sizes.js + sizes.css;
  console.log(`console transfer size: ${total} bytes gzip (html ${sizes.html}, js ${sizes.js}, css ${sizes.css})`);
  assert.ok(total < 120_000, `the console stays under 120 kB gzip (${total})`);
});

test("CHAT_PAGE=off: no console, the API as before", { timeout: 30_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  const off = await startWorker({ apiToken: ADMIN_TOKEN, vars: { CHAT_PAGE: "off" } });
  try {
    for (const path of ["/", "/console.js", "/console.css", "/index.html"]) {
      const r = await off.json("GET", path, undefined, { auth: false });
      assert.equal(r.status, 404, path);
      assert.equal(r.body.error.code, "not_found", path);
    }
    assert.equal((await off.json("GET", `${A}/sessions`)).status, 200);
  } finally {
    await off.stop();
  }
});

test("the page logged no errors", (t) => {
  if (skipReason) return t.skip(skipReason);
  // The restart closes the socket (and a reconnect attempt may fail while workerd starts): those
  // WebSocket errors are expected; so are the failed requests of the refused turn (HTTP 503).
  const errors = pageErrors.filter((e) => !/WebSocket|Failed to load resource: the server responded with a status of 503/i.test(e));
  assert.deepEqual(errors, []);
  assert.deepEqual(dialogs, []);
});
