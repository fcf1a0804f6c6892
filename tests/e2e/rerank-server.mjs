// A stand-in re-ranker for end-to-end tests: a real HTTP server on 127.0.0.1 (a free port) in the
// common Cohere / Jina shape that the Worker calls with RERANK_PROVIDER=http,
// RERANK_BASE_URL=<baseUrl>. POST /v1/rerank `{model, query, documents, top_n}` is recorded and
// answered `{results: [{index, relevance_score}]}`: by default with scores that put the documents
// in the reverse of their order (the last first), so a test sees the re-ordering without a real
// model. `answer(...)` queues other answers for the next calls: an HTTP status and body, a delay,
// a connection that never answers, a body of so many bytes.
// It scores nothing by meaning: the quality of a real re-ranker cannot be measured with it, only
// the plumbing around one.
import http from "node:http";

/**
 * @typedef {object} RerankAnswer one scripted answer (every key optional; none: the reversed order)
 * @property {number} [status] the HTTP status (default 200)
 * @property {any} [body] the body (a string as it is, anything else as JSON)
 * @property {number} [delayMs] wait this long before answering
 * @property {boolean} [hang] send the headers, then nothing more, never ending the body
 * @property {number} [hugeBytes] answer 200 with a JSON body of about this many bytes, sent in
 *   64 KiB pieces (it stops when the caller goes away)
 */
/**
 * @typedef {object} RerankServer
 * @property {string} baseUrl `http://127.0.0.1:PORT/v1`, the value for RERANK_BASE_URL
 * @property {{headers: import("node:http").IncomingHttpHeaders, body: any}[]} requests every
 *   POST /v1/rerank received, oldest first (`body` parsed)
 * @property {(...answers: RerankAnswer[]) => void} answer queues answers for the next calls
 * @property {() => void} reset forgets the requests and the queued answers
 * @property {() => Promise<void>} close stops the server (open connections too)
 */

/** The answer that orders `documents` last first, as a re-ranker would list it (best first). */
export function reversedScores(documents) {
  const n = documents.length;
  return { results: documents.map((_, i) => ({ index: n - 1 - i, relevance_score: (n - i) / n })) };
}

/** @returns {Promise<RerankServer>} */
export async function start() {
  const requests = [];
  const queue = [];
  const server = http.createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    if (req.method !== "POST" || req.url !== "/v1/rerank") {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
      return;
    }
    let body = raw;
    try { body = JSON.parse(raw); } catch { /* kept as text */ }
    requests.push({ headers: req.headers, body });
    const a = queue.shift() ?? {};
    if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
    if (a.hang) {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"results": [');
      return; // never ends: the caller gives up
    }
    if (a.hugeBytes) {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"results": [], "pad": "');
      const piece = "x".repeat(64 * 1024);
      for (let sent = 0; sent < a.hugeBytes && !res.destroyed; sent += piece.length) {
        if (!res.write(piece)) {
          await new Promise((r) => {
            const go = () => { res.off("drain", go); res.off("close", go); r(); };
            res.on("drain", go).on("close", go);
          });
        }
      }
      if (!res.destroyed) res.end('"}');
      return;
    }
    const out = "body" in a ? a.body : reversedScores(Array.isArray(body?.documents) ? body.documents : []);
    res.writeHead(a.status ?? 200, { "content-type": "application/json" });
    res.end(typeof out === "string" ? out : JSON.stringify(out));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    answer(...answers) { queue.push(...answers); },
    reset() { requests.length = 0; queue.length = 0; },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
