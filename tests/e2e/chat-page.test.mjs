// End-to-end in a real browser: the chat page the Worker serves at GET / (src/workers/chat_page.html)
// driven by headless Debian Chromium through playwright-core, against the built Worker in workerd
// whose model is a streaming OpenAI-compatible server on 127.0.0.1 (below). It lists and creates
// sessions over HTTP, sends a message over the WebSocket, watches the reply grow delta by delta,
// branches by regenerating, reconnects after the runtime restarts, and leaves a screenshot in
// test-artifacts/chat-page.png. The page is given a scoped write token for its agent (minted with
// POST /agents/{agent}/tokens), never the admin token, as its token field asks users to.
// Skips itself (with the reason) when /usr/bin/chromium or playwright-core is missing
// (scripts/setup.sh installs both) or when GET / does not answer the page yet.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startWorker, ROOT } from "./harness.mjs";

/** The admin token (API_TOKEN): only the test itself uses it, to mint the page's token and check. */
const ADMIN_TOKEN = "test-token";
const AGENT = "pw";
/** The page's token: a scoped write token for AGENT (every session), minted in before(). */
let TOKEN = null;
const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = join(ROOT, "test-artifacts");
/** The model's answers, in order: the first turn, then the regenerated one. */
const REPLIES = [
  "Hello! I am the scripted test model, and this reply arrives piece by piece.",
  "Here is a regenerated answer, on a new branch, streamed once more.",
];
const WAIT = 15_000;

// ── A streaming OpenAI-compatible model ──────────────────────────────────────────────────────
// POST /v1/chat/completions answers REPLIES[n] for the n-th request (the last one once they run
// out): with `stream: true` as server-sent events, one small piece every PIECE_MS, then a usage
// chunk and [DONE]; without it as one plain completion.
const PIECE_MS = 40;

/** "a b c" -> ["a ", "b ", "c"]: pieces a few characters long. */
const pieces = (text) => text.match(/\S+\s*/g);

async function startStreamingLlm() {
  const requests = [];
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
      const text = REPLIES[Math.min(requests.length, REPLIES.length - 1)];
      requests.push(body);
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
      if (!body?.stream) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id: "chatcmpl-test", object: "chat.completion", model: "test-model",
          choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }], usage,
        }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const event = (data) => res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
      const chunk = (delta, finish = null) => ({
        id: "chatcmpl-test", object: "chat.completion.chunk", model: "test-model",
        choices: [{ index: 0, delta, finish_reason: finish }],
      });
      event(chunk({ role: "assistant", content: "" }));
      for (const piece of pieces(text)) {
        await new Promise((r) => setTimeout(r, PIECE_MS));
        if (res.destroyed) return; // the caller went away
        event(chunk({ content: piece }));
      }
      event(chunk({}, "stop"));
      event({ id: "chatcmpl-test", object: "chat.completion.chunk", model: "test-model", choices: [], usage });
      event("[DONE]");
      res.end();
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
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

// ── Set-up: the reasons to skip come first ───────────────────────────────────────────────────

/** Why every test skips, or null. */
let skipReason = null;
let llm;
let w;
let browser;
/** @type {import("playwright-core").Page} */
let page;
/** Uncaught exceptions and console errors of the page. */
const pageErrors = [];
/** Every JSON frame the page's WebSockets received / sent, oldest first. */
const frames = [];
const sentFrames = [];
/** What the tests learn, for the ones after them. */
const state = { sid: null, userId: null, assistantId: null };

before(async () => {
  if (!existsSync(CHROMIUM)) {
    skipReason = `${CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium (apt-get install chromium)`;
    return;
  }
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch (e) {
    skipReason = `playwright-core is not installed (run scripts/setup.sh): ${e.message}`;
    return;
  }
  llm = await startStreamingLlm();
  w = await startWorker({
    apiToken: ADMIN_TOKEN,
    port: await freePort(),
    vars: {
      LLM_PROVIDER: "openai", LLM_BASE_URL: llm.baseUrl, LLM_MODEL: "test-model",
      TOKEN_SECRET: "chat-page-token-secret-0123456789abcdef",
    },
  });
  const minted = await w.json("POST", `/agents/${AGENT}/tokens`, { scope: "write", ttlSeconds: 3600 });
  if (minted.status !== 201) {
    skipReason = `POST /agents/${AGENT}/tokens does not issue scoped tokens yet (HTTP ${minted.status}: ${JSON.stringify(minted.body)})`;
    return;
  }
  TOKEN = minted.body.token;
  assert.notEqual(TOKEN, ADMIN_TOKEN);
  const r = await w.fetch("/", { auth: false });
  const type = r.headers.get("content-type") ?? "";
  await r.arrayBuffer();
  if (r.status !== 200 || !type.startsWith("text/html")) {
    skipReason = `GET / does not serve the chat page yet (HTTP ${r.status}, content-type "${type}")`;
    return;
  }
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root: no sandbox. The rest keeps Chromium off the (closed) network; Local Network Access
    // checks only get in the way of a page on 127.0.0.1 (newer Chromiums tighten them).
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-features=LocalNetworkAccessChecks"],
  });
  page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  page.on("pageerror", (e) => pageErrors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") pageErrors.push(`console: ${m.text()}`); });
  page.on("websocket", (ws) => {
    ws.on("framereceived", ({ payload }) => {
      try { frames.push(JSON.parse(String(payload))); } catch { /* not JSON */ }
    });
    ws.on("framesent", ({ payload }) => {
      try { sentFrames.push(JSON.parse(String(payload))); } catch { /* not JSON */ }
    });
  });
});

after(async () => {
  await browser?.close();
  await w?.stop();
  await llm?.close();
});

/** Polls `check` until it is true. */
async function waitUntil(check, what, timeoutMs = WAIT) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The shown bubbles: [{role, id, text, streaming}], in order. */
const bubbles = () => page.$$eval("#messages .msg", (els) => els.map((e) => ({
  role: e.dataset.role,
  id: e.dataset.id,
  text: [...e.querySelectorAll(".text")].map((t) => t.textContent).join(""),
  streaming: e.classList.contains("streaming"),
})));

/** Waits until the shown branch is exactly [user `userText`, assistant `reply`], the reply final. */
async function waitForBranch(userText, reply) {
  try {
    await page.waitForFunction(([u, a]) => {
      const els = [...document.querySelectorAll("#messages .msg")];
      const text = (e) => [...e.querySelectorAll(".text")].map((t) => t.textContent).join("");
      return els.length === 2 && els[0].dataset.role === "user" && text(els[0]) === u &&
        els[1].dataset.role === "assistant" && !els[1].classList.contains("streaming") && text(els[1]) === a;
    }, [userText, reply], { timeout: WAIT });
  } catch (e) {
    // Say what the page showed instead, and the last frames: the useful part when this fails.
    const shown = await bubbles().catch(() => "?");
    const status = await page.textContent("#status").catch(() => "?");
    assert.fail(`the page did not show [user "${userText}", assistant "${reply}"] (${e.message.split("\n")[0]});\n` +
      `shown: ${JSON.stringify(shown)}\nstatus: ${status}\nlast frames: ${JSON.stringify(frames.slice(-8))}\n` +
      `page errors: ${JSON.stringify(pageErrors)}`);
  }
}

/** Records the text of every assistant bubble at each change of #messages (in window.__seen). */
const watchAssistantText = () => page.evaluate(() => {
  window.__seen = [];
  const box = document.getElementById("messages");
  new MutationObserver(() => {
    for (const e of box.querySelectorAll('.msg[data-role="assistant"]')) {
      window.__seen.push({ id: e.dataset.id, streaming: e.classList.contains("streaming"),
        text: [...e.querySelectorAll(".text")].map((t) => t.textContent).join("") });
    }
  }).observe(box, { childList: true, subtree: true, characterData: true });
});

/** Asserts that the bubble of `reply` was shown with only a part of it before the whole. */
async function assertGrew(reply) {
  const seen = await page.evaluate(() => window.__seen);
  const partial = seen.filter((s) => s.text.length > 0 && s.text.length < reply.length && reply.startsWith(s.text));
  assert.ok(partial.length > 0, `no intermediate state of the streamed reply was shown; seen: ${JSON.stringify(seen)}`);
  assert.ok(partial.some((s) => s.streaming), "the partial reply is shown in a .streaming bubble");
}

// ── The tests ────────────────────────────────────────────────────────────────────────────────

test("the token field asks for a scoped token, never the admin token", async (t) => {
  if (skipReason) return t.skip(skipReason);
  const served = await (await w.fetch("/", { auth: false })).text();
  const source = readFileSync(join(ROOT, "console/index.html"), "utf8");
  if (served !== source) return t.skip("build/ serves an older console/index.html: rebuild (bash scripts/build.sh)");
  // A page of its own (a fresh context: no stored token), so the main one loads fresh below.
  const fresh = await browser.newPage();
  try {
    await fresh.goto(new URL("/", w.url).href);
    const placeholder = await fresh.getAttribute("#token", "placeholder");
    assert.match(placeholder, /scoped token \(POST \/agents\/\{agent\}\/tokens\)/);
    assert.doesNotMatch(placeholder, /API token/i);
    assert.match(await fresh.$eval("#token", (e) => e.closest("label").textContent), /scoped token/);
    // With no token the status line says which token to use.
    await fresh.waitForFunction(() => document.getElementById("status").textContent !== "", null, { timeout: WAIT });
    assert.match(await fresh.textContent("#status"), /scoped token \(POST \/agents\/\{agent\}\/tokens\), never the admin token/);
  } finally {
    await fresh.close();
  }
});

test("the page loads with the token and agent from the hash and creates a session", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  await page.goto(new URL(`/#token=${TOKEN}&agent=${AGENT}`, w.url).href);
  assert.equal(await page.inputValue("#agent"), AGENT);
  assert.equal(await page.inputValue("#token"), TOKEN);
  assert.ok(!page.url().includes(TOKEN), "the token is taken out of the address bar");
  assert.equal(await page.evaluate(() => localStorage.getItem("sa-token")), TOKEN, "the scoped token is what the page keeps");

  await page.click("#new-session");
  const button = page.locator("#sessions button[data-sid]");
  await button.first().waitFor({ timeout: WAIT });
  state.sid = await button.first().getAttribute("data-sid");
  assert.equal(await button.first().textContent(), state.sid);
  const listed = await w.json("GET", `/agents/${AGENT}/sessions`);
  assert.equal(listed.status, 200);
  assert.deepEqual(listed.body.sessions.map((s) => s.id), [state.sid], "the page created one session over HTTP");
  // The new session is opened: its socket is up and its (empty) history shown.
  await page.waitForSelector(`body[data-ws="open"] #messages[data-sid="${state.sid}"]`, { timeout: WAIT });
  await page.waitForFunction(() => document.querySelectorAll("#messages .msg").length === 0, null, { timeout: WAIT });
  await waitUntil(() => frames.some((f) => f.type === "history" && f.sessionId === state.sid),
    "the page receives the history of the session");
});

test("sending a message streams the reply into a growing bubble", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.sid, "a session is open (previous test)");
  await watchAssistantText();
  await page.fill("#input", "hello there");
  await page.click("#send");
  await waitForBranch("hello there", REPLIES[0]);
  await assertGrew(REPLIES[0]);
  assert.equal(await page.inputValue("#input"), "", "the input is cleared");

  const [user, assistant] = await bubbles();
  state.userId = user.id;
  state.assistantId = assistant.id;
  const deltas = frames.filter((f) => f.type === "delta" && f.messageId === assistant.id);
  assert.ok(deltas.length >= 2, `the reply came in several delta frames (got ${deltas.length})`);
  assert.equal(deltas.map((d) => d.text).join(""), REPLIES[0], "the deltas add up to the reply");

  assert.equal(llm.requests.length, 1);
  assert.equal(llm.requests[0].stream, true, "the Worker asked the model to stream");
  assert.match(JSON.stringify(llm.requests[0].messages), /hello there/);
  const history = await w.json("GET", `/agents/${AGENT}/sessions/${state.sid}/history`);
  assert.equal(history.status, 200);
  assert.deepEqual(history.body.messages.map((m) => [m.id, m.role]),
    [[user.id, "user"], [assistant.id, "assistant"]], "the page shows what is stored");
});

test("Regenerate makes a sibling branch and shows it", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.assistantId, "a first reply is shown (previous test)");
  await watchAssistantText();
  const sentBefore = sentFrames.length;
  await page.click(`.msg[data-id="${state.assistantId}"] .regen`);
  await waitForBranch("hello there", REPLIES[1]);
  await assertGrew(REPLIES[1]);
  // The frame: the same user message with a new id, under the parent of the first one (none: a root).
  const chat = sentFrames.slice(sentBefore).find((f) => f.type === "chat");
  assert.ok(chat, "Regenerate sent a chat frame");
  assert.equal(chat.parentId, null);
  assert.equal(chat.message.role, "user");
  assert.notEqual(chat.message.id, state.userId);
  assert.deepEqual(chat.message.parts, [{ type: "text", text: "hello there" }]);
  await waitUntil(() => sentFrames.slice(sentBefore).some((f) => f.type === "history"),
    "the page asks for the active branch after the reply");

  const [user, assistant] = await bubbles();
  assert.notEqual(user.id, state.userId, "the user message was sent again with a new id");
  assert.notEqual(assistant.id, state.assistantId);
  assert.equal(llm.requests.length, 2);
  // The model saw the branch only: no trace of the first answer.
  assert.doesNotMatch(JSON.stringify(llm.requests[1].messages), /scripted test model/);

  const history = await w.json("GET", `/agents/${AGENT}/sessions/${state.sid}/history`);
  assert.deepEqual(history.body.messages.map((m) => m.id), [user.id, assistant.id], "the new branch is the active one");
  const old = await w.json("GET", `/agents/${AGENT}/sessions/${state.sid}/messages/${encodeURIComponent(state.assistantId)}`);
  assert.equal(old.status, 200, "the first branch is kept");
  assert.equal(old.body.parts.find((p) => p.type === "text").text, REPLIES[0]);
  state.userId = user.id;
  state.assistantId = assistant.id;

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, "chat-page.png"), fullPage: true });
});

test("the page reconnects after the socket closes and shows the history again", { timeout: 60_000 }, async (t) => {
  if (skipReason) return t.skip(skipReason);
  assert.ok(state.assistantId, "a conversation is shown (previous tests)");
  const histories = () => frames.filter((f) => f.type === "history").length;
  const before = histories();
  await w.restart(); // same port, same storage: every socket of the old runtime closes
  await waitUntil(() => histories() > before, "the page reconnects and receives the history again");
  await page.waitForFunction(() => document.body.dataset.ws === "open", null, { timeout: WAIT });
  await waitForBranch("hello there", REPLIES[1]);
  assert.deepEqual((await bubbles()).map((b) => b.id), [state.userId, state.assistantId]);
});

test("the page logged no errors", (t) => {
  if (skipReason) return t.skip(skipReason);
  // The closed socket during the restart may log a WebSocket error: that one is expected.
  const errors = pageErrors.filter((e) => !/WebSocket/i.test(e));
  assert.deepEqual(errors, []);
});
