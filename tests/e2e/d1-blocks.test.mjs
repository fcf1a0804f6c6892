// End-to-end: blocks read from the operator's D1 database (`kind: "d1"`,
// crates/core/src/context/d1.rs, src/d1.rs) in workerd, with Miniflare's local D1 bound as
// CATALOG. The rows of the configured query reach the prompt the model is sent; the model's
// `search_context` finds the rows holding every word, the words bound as parameters (hostile text
// finds nothing and drops nothing); a query D1 refuses leaves the last text with a warning and the
// turn goes on; a binding the Worker lacks is an empty block with a warning; a block added at run
// time cannot be one. Mirrors tests/it/d1_blocks.rs.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { captureOutput, startWorker } from "./harness.mjs";
import { start as startModel } from "./llm-server.mjs";

/** The Worker's log lines (stdout and stderr). */
const log = [];
let w;
let model;
let db;

before(async () => {
  model = await startModel();
  const config = {
    cachedPrompt: false,
    context: [
      { label: "catalog", kind: "d1", binding: "CATALOG", description: "Products",
        query: "SELECT name, price FROM products ORDER BY sku",
        search: { table: "products", columns: ["name", "notes"], key: "sku" } },
      { label: "missing", kind: "d1", binding: "NOT_BOUND", query: "SELECT 1" },
    ],
  };
  w = await startWorker({
    vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "test-model", SESSION_CONFIG: JSON.stringify(config) },
    d1: ["CATALOG"],
    options: captureOutput(log),
  });
  db = await w.mf.getD1Database("CATALOG");
  await db.exec("CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, notes TEXT, price REAL)");
  await db.prepare("INSERT INTO products VALUES (?1, ?2, ?3, ?4), (?5, ?6, ?7, ?8), (?9, ?10, ?11, ?12)")
    .bind("A1", "Blue kettle", "steel, 1.5 l", 39.5, "B2", "Red kettle", "enamel", 45, "C3", "Tea cup", "100% porcelain_white", null)
    .run();
});
after(async () => { await w?.stop(); await model?.close(); });

const call = (method, path, body) => w.json(method, `/agents/alice${path}`, body);
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const content = async (label = "catalog") => {
  const r = await call("GET", `/sessions/s/context/${label}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.content;
};
const search = async (query) => {
  const r = await call("POST", "/sessions/s/tools/search_context", { input: { label: "catalog", query } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.output;
};
const warnings = async (from, label = "catalog") => {
  await new Promise((r) => setTimeout(r, 150)); // the log arrives through a pipe
  return log.slice(from).filter((l) => l.includes(`d1 block "${label}"`));
};
const ROWS = "Blue kettle | 39.5\nRed kettle | 45\nTea cup | ";

test("the query's rows reach the prompt; the model's search_context finds the rows of every word", async () => {
  const b = (await call("GET", "/sessions/s/context/catalog")).body;
  assert.equal(b.content, ROWS);
  assert.equal(b.kind, "d1");
  assert.equal(b.writable, false);
  model.reply(
    { toolCalls: [{ id: "t1", name: "search_context", arguments: { label: "catalog", query: "kettle enamel" } }] },
    { content: "The red one." },
  );
  const before = model.requests.length;
  const r = await call("POST", "/sessions/s/chat", { message: user("u1", "which kettle is enamel?") });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const sent = model.requests.slice(before);
  assert.match(sent[0].body.messages[0].content, /CATALOG \(Products\) \[searchable\]\n═+\nBlue kettle \| 39\.5/);
  const tool = sent[1].body.messages.filter((m) => m.role === "tool").map((m) => m.content);
  assert.deepEqual(tool, ["[B2]\nRed kettle | enamel"]);
  assert.equal(await search("KETTLE"), "[A1]\nBlue kettle | steel, 1.5 l\n\n[B2]\nRed kettle | enamel");
  assert.equal(await search("100%"), "[C3]\nTea cup | 100% porcelain_white");
  assert.equal(await search("_"), "[C3]\nTea cup | 100% porcelain_white");
  assert.equal(await search("kettle porcelain"), "No results found.");
});

test("hostile search text is bound, never run: it finds nothing and drops nothing", async () => {
  for (const q of ["'; DROP TABLE products; --", "\" OR 1=1 --", "kettle') OR ('1'='1", "?1 ?2", "\\ \\% \u0000", "x".repeat(10000)]) {
    assert.equal(await search(q), "No results found.", JSON.stringify(q.slice(0, 40)) + log.slice(-12).join("\n"));
  }
  const { results } = await db.prepare("SELECT count(*) AS n FROM products").all();
  assert.equal(results[0].n, 3);
  assert.equal(await content(), ROWS);
});

test("a query D1 refuses leaves the last text with a warning, and the turn goes on; an unbound one is empty", async () => {
  assert.equal(await content(), ROWS);
  await db.exec("ALTER TABLE products RENAME TO products_old");
  try {
    let mark = log.length;
    assert.equal(await content(), ROWS);
    const warned = await warnings(mark);
    assert.equal(warned.length, 1, log.slice(mark).join("\n"));
    assert.match(warned[0], /d1 block "catalog" get: the block's database could not be read .*; the last text read is shown/);
    assert.equal(await search("kettle"), "Error: the block's database could not be read");
    mark = log.length;
    model.reply({ content: "Still here." });
    const before = model.requests.length;
    const r = await call("POST", "/sessions/s/chat", { message: user("u2", "hello") });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.match(model.requests[before].body.messages[0].content, /Blue kettle \| 39\.5/);
    assert.ok((await warnings(mark)).length >= 1);
  } finally {
    await db.exec("ALTER TABLE products_old RENAME TO products");
  }
  const mark = log.length;
  assert.equal(await content("missing"), "");
  const warned = await warnings(mark, "missing");
  assert.match(warned[0], /no D1 database is bound as NOT_BOUND.*; no text was read yet/);
});

test("a block added at run time cannot read a database", async () => {
  for (const block of [
    { label: "x", kind: "d1", binding: "CATALOG", query: "SELECT * FROM products" },
    { label: "x", kind: "readonly", content: "c", binding: "CATALOG" },
  ]) {
    const r = await call("POST", "/sessions/r/context", block);
    assert.equal(r.status, 400, JSON.stringify(r.body));
  }
});
