// A scripted OpenAI-compatible model for end-to-end tests: a real HTTP server on 127.0.0.1 (a
// free port) that the Worker in workerd calls as its LLM (LLM_PROVIDER=openai,
// LLM_BASE_URL=<baseUrl>). POST /v1/chat/completions records each request and answers from a
// queue of scripted replies; with the queue empty it answers DEFAULT_SUMMARY (DEFAULT_JSON to a
// JSON-mode request).
// POST /v1/embeddings (EMBEDDINGS_PROVIDER=openai, EMBEDDINGS_BASE_URL=<baseUrl>) answers
// deterministic vectors (see embedVector): its requests go to `embeddingRequests`, never to
// `requests`, so tests that count chat completions see only those; `failEmbeddings(true)` makes
// it answer HTTP 500 until `failEmbeddings(false)` (or reset()).
// With `start({activityFile})` it keeps `{inFlight, lastMs}` in that file (replaced whole at each
// change): the model requests (of both kinds) being answered now, and when (Date.now()) the last
// one came in or ended, for a check in another process that must know whether the Worker is
// calling its model (tests/fuzz/hooks.py).
import { renameSync, writeFileSync } from "node:fs";
import http from "node:http";

/** The default summary: a valid, non-skeleton answer to the compaction prompt. */
export const DEFAULT_SUMMARY = "## Topic\nDeploy plans.\n\n## Key Points\n- the team deploys on Friday";
/** The default answer to a JSON-mode request (`response_format: json_object`, memory extraction):
 * no facts, and nothing to change for a consolidation. */
export const DEFAULT_JSON = '{"facts": [], "memory": []}';
/** The usage of every scripted completion unless a reply says otherwise. */
export const DEFAULT_USAGE = { prompt_tokens: 100, completion_tokens: 20 };

/**
 * @typedef {object} Reply one scripted answer (every key optional):
 * @property {string} [content] the completion's text (default DEFAULT_SUMMARY; "" or "   " for blank ones)
 * @property {{prompt_tokens: number, completion_tokens: number}} [usage] default DEFAULT_USAGE
 * @property {number} [status] an HTTP status; not 2xx answers `body` (default an OpenAI error object)
 * @property {any} [body] the exact answer body (a string as it is, anything else as JSON)
 * @property {number} [delayMs] wait this long before answering
 * @property {{id: string, name: string, arguments: object}[]} [toolCalls] tool calls to answer with
 * @property {string} [reasoning] with `stream: true` requests: reasoning streamed before the
 *   content (`reasoning_content` deltas, split after each space)
 * @property {string[]} [pieces] with `stream: true` requests: the content as these deltas
 *   (default: the content split after each space)
 * @property {number} [pieceDelayMs] wait this long between streamed deltas (default 5)
 * @property {boolean} [hangAfterFirstPiece] stream the first delta, then never finish
 * @property {number} [hangAfterPieces] stream this many deltas, then never finish
 */
/**
 * @typedef {object} RecordedRequest
 * @property {string} method
 * @property {string} url the path and query
 * @property {import("node:http").IncomingHttpHeaders} headers
 * @property {any} body the parsed JSON body (the raw text if it is not JSON)
 */
/**
 * @typedef {RecordedRequest & {failed: boolean}} EmbeddingRequest a POST /v1/embeddings
 *   (`body`: `{model, input: string | string[]}`); `failed`: it was answered 500 (failEmbeddings).
 */
/**
 * @typedef {object} LlmServer
 * @property {string} baseUrl `http://127.0.0.1:PORT/v1`, the value for LLM_BASE_URL (and
 *   EMBEDDINGS_BASE_URL)
 * @property {RecordedRequest[]} requests every chat completion request received, oldest first
 *   (embeddings requests are not in it)
 * @property {EmbeddingRequest[]} embeddingRequests every POST /v1/embeddings received, oldest first
 * @property {(...replies: Reply[]) => void} reply queues answers for the next chat completion requests
 * @property {(on?: boolean) => void} failEmbeddings while on, POST /v1/embeddings answers HTTP 500
 *   (an OpenAI error object) instead of vectors
 * @property {() => void} reset forgets the recorded requests (both lists) and the queued
 *   replies, and turns failEmbeddings off
 * @property {() => Promise<void>} close stops the server (open connections too)
 * @property {number[]} cutOff when (Date.now()) each chat completion's connection was closed by
 *   the caller before its answer ended, oldest first
 */

/** Dimensions of the vectors POST /v1/embeddings answers. */
export const EMBEDDING_DIMS = 64;
/** Words embedVector ignores (else every "The user …" memory would look alike). */
export const EMBEDDING_STOPWORDS = new Set(
  "a an and are as at be by for from has have i in is it its me my of on or our that the their this to was were with you your user".split(" "),
);

/**
 * The deterministic embedding of `text`: a bag of words, each lower-case word (runs of letters
 * and digits) not in EMBEDDING_STOPWORDS hashed (FNV-1a) to one of EMBEDDING_DIMS dimensions and
 * counted, the vector then scaled to length 1. Texts sharing words are similar (cosine > 0);
 * texts with no word in common are (nearly: hashes may collide) orthogonal; a text without such
 * words is the zero vector.
 * @param {string} text
 * @returns {number[]}
 */
export function embedVector(text) {
  const v = new Array(EMBEDDING_DIMS).fill(0);
  for (const word of String(text).toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (EMBEDDING_STOPWORDS.has(word)) continue;
    let h = 0x811c9dc5;
    for (const ch of word) {
      h ^= ch.codePointAt(0);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    v[h % EMBEDDING_DIMS] += 1;
  }
  const norm = Math.hypot(...v);
  return norm > 0 ? v.map((x) => x / norm) : v;
}

/** The body of a successful OpenAI embeddings answer for `input` (a string or strings). */
export function embeddings(input, model = "test-embeddings") {
  const texts = Array.isArray(input) ? input : [input];
  return {
    object: "list",
    data: texts.map((t, index) => ({ object: "embedding", index, embedding: embedVector(t) })),
    model,
    usage: { prompt_tokens: texts.length, total_tokens: texts.length },
  };
}

/** The body of a successful chat completion with `content`. */
export function completion(content = DEFAULT_SUMMARY, usage = DEFAULT_USAGE) {
  return {
    id: "chatcmpl-test",
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: "test-model",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { ...usage, total_tokens: (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0) },
  };
}

/** Writes `r` as an OpenAI-compatible event stream (`stream: true` requests). */
async function streamReply(res, r) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
  const chunk = (delta, finish = null) => ({ id: "chatcmpl-test", object: "chat.completion.chunk", model: "test-model",
    choices: [{ index: 0, delta, finish_reason: finish }] });
  const content = r.content ?? (r.toolCalls ? "" : DEFAULT_SUMMARY);
  const pieces = r.pieces ?? (content ? content.split(/(?<= )/) : []);
  const wait = () => new Promise((resolve) => setTimeout(resolve, r.pieceDelayMs ?? 5));
  send(chunk({ role: "assistant", content: "" }));
  for (const p of r.reasoning ? r.reasoning.split(/(?<= )/) : []) {
    if (res.destroyed) return;
    send(chunk({ reasoning_content: p }));
    await wait();
  }
  for (const [i, p] of pieces.entries()) {
    if (res.destroyed) return;
    send(chunk({ content: p }));
    if ((i === 0 && r.hangAfterFirstPiece) || r.hangAfterPieces === i + 1) return; // never ends: the caller goes away
    await wait();
  }
  for (const [i, c] of (r.toolCalls ?? []).entries()) {
    const args = JSON.stringify(c.arguments ?? {});
    const half = Math.floor(args.length / 2);
    send(chunk({ tool_calls: [{ index: i, id: c.id, type: "function", function: { name: c.name, arguments: args.slice(0, half) } }] }));
    send(chunk({ tool_calls: [{ index: i, function: { arguments: args.slice(half) } }] }));
  }
  send(chunk({}, r.toolCalls ? "tool_calls" : "stop"));
  send({ id: "chatcmpl-test", object: "chat.completion.chunk", choices: [], usage: r.usage ?? DEFAULT_USAGE });
  res.write("data: [DONE]\n\n");
  res.end();
}

/**
 * Starts the scripted model on a free port of 127.0.0.1.
 * @param {{activityFile?: string, embeddingsDelayMs?: number}} [o] `embeddingsDelayMs`: every
 *   POST /v1/embeddings answers after this long (a hosted model's round trip; default 0).
 *   `activityFile`: where to keep `{inFlight, lastMs}`
 * @returns {Promise<LlmServer>}
 */
export async function start({ activityFile, embeddingsDelayMs = 0 } = {}) {
  /** @type {RecordedRequest[]} */
  const requests = [];
  /** @type {Reply[]} */
  const queue = [];
  /** @type {EmbeddingRequest[]} */
  const embeddingRequests = [];
  let embeddingsFail = false;
  /** @type {number[]} */
  const cutOff = [];
  const activity = { inFlight: 0, lastMs: 0 };
  const note = (change) => {
    activity.inFlight += change;
    activity.lastMs = Date.now();
    if (activityFile) {
      writeFileSync(`${activityFile}.tmp`, JSON.stringify(activity));
      renameSync(`${activityFile}.tmp`, activityFile);
    }
  };
  const server = http.createServer((req, res) => {
    note(1);
    res.on("close", () => note(-1));
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body = text;
      try { body = JSON.parse(text); } catch { /* keep the text */ }
      if (req.method === "POST" && req.url.split("?")[0] === "/v1/embeddings") {
        if (embeddingsDelayMs) await new Promise((resolve) => setTimeout(resolve, embeddingsDelayMs));
        const failed = embeddingsFail;
        embeddingRequests.push({ method: req.method, url: req.url, headers: req.headers, body, failed });
        const input = body && typeof body === "object" ? body.input : undefined;
        const ok = typeof input === "string" || (Array.isArray(input) && input.every((t) => typeof t === "string"));
        const [status, out] = failed
          ? [500, { error: { message: "scripted embeddings failure", type: "server_error" } }]
          : ok
            ? [200, embeddings(input, body.model)]
            : [400, { error: { message: "input must be a string or an array of strings", type: "invalid_request_error" } }];
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(out));
        return;
      }
      if (req.method !== "POST" || req.url.split("?")[0] !== "/v1/chat/completions") {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
        return;
      }
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      // A caller that closes the connection before the answer ended (a stopped turn).
      res.on("close", () => { if (!res.writableEnded) cutOff.push(Date.now()); });
      const r = queue.shift() ?? {};
      if (r.delayMs) {
        await new Promise((resolve) => setTimeout(resolve, r.delayMs));
        if (res.destroyed || req.socket.destroyed) return; // the caller gave up (its timeout)
      }
      const status = r.status ?? 200;
      if (status === 200 && r.body === undefined && body && body.stream === true) {
        await streamReply(res, r);
        return;
      }
      if (status === 200 && r.body === undefined && r.toolCalls) {
        const calls = r.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments ?? {}) } }));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ...completion(r.content ?? null, r.usage ?? DEFAULT_USAGE),
          choices: [{ index: 0, message: { role: "assistant", content: r.content ?? null, tool_calls: calls }, finish_reason: "tool_calls" }] }));
        return;
      }
      const out = r.body !== undefined
        ? r.body
        : status >= 200 && status < 300
          ? completion(r.content ?? (body?.response_format?.type === "json_object" ? DEFAULT_JSON : DEFAULT_SUMMARY), r.usage ?? DEFAULT_USAGE)
          : { error: { message: "scripted failure", type: "server_error" } };
      const plain = typeof out === "string";
      res.writeHead(status, { "content-type": plain ? "text/plain" : "application/json" });
      res.end(plain ? out : JSON.stringify(out));
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    embeddingRequests,
    cutOff,
    reply(...replies) { queue.push(...replies); },
    failEmbeddings(on = true) { embeddingsFail = on; },
    reset() {
      requests.length = 0; queue.length = 0; embeddingRequests.length = 0; cutOff.length = 0; embeddingsFail = false;
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      });
    },
  };
}
