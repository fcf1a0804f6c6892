// End-to-end: context blocks configured by SESSION_CONFIG (a wrangler var), skills and a soul
// text in local R2, the frozen prompt and skill load state across a restart of workerd.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";

const SEP = "═".repeat(46);
const CONFIG = {
  context: [
    { label: "soul", kind: "readonly", description: "Identity", r2Key: "soul.md" },
    { label: "memory", kind: "writable", description: "Learned facts", maxTokens: 50 },
    { label: "skills", kind: "skills", description: "Playbooks" },
    { label: "library", kind: "skills", prefix: "library/", scope: "shared" },
  ],
  searchableHistory: "history",
};
let w;
let bucket;

before(async () => {
  w = await startWorker({ vars: { SESSION_CONFIG: JSON.stringify(CONFIG) } });
  bucket = await w.mf.getR2Bucket("SKILLS_BUCKET");
  await bucket.put("soul.md", "You are a careful assistant.");
  await bucket.put("skills/ada/style-guide", "Write short sentences.", { customMetadata: { description: "House style" } });
  await bucket.put("skills/bob/private", "bob only", { customMetadata: { description: "Bob's" } });
  await bucket.put("library/deploy", "1. test 2. ship", { customMetadata: { description: "Deploy checklist" } });
});
after(async () => { await w?.stop(); });

async function call(method, path, body, agent = "ada") {
  const init = { method, headers: {} };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["content-type"] = "application/json"; }
  const r = await w.fetch(`/agents/${agent}${path}`, init);
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}
const tool = async (sid, name, input, agent = "ada") => {
  const r = await call("POST", `/sessions/${sid}/tools/${name}`, { input }, agent);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.output;
};

test("SESSION_CONFIG drives the blocks; R2 texts and skills render in the prompt", async () => {
  const r = await call("GET", "/sessions/s1/context");
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.blocks.map((b) => [b.label, b.kind, b.writable]), [
    ["soul", "readonly", false], ["memory", "writable", true], ["skills", "skills", true],
    ["library", "skills", false], ["history", "search", false],
  ]);
  const p = (await call("GET", "/sessions/s1/prompt")).body;
  assert.equal(p.frozen, true);
  assert.equal(p.prompt, [
    `${SEP}\nSOUL (Identity) [readonly]\n${SEP}\nYou are a careful assistant.`,
    `${SEP}\nMEMORY (Learned facts) [0% — 0/50 tokens] [writable]\n${SEP}\n`,
    `${SEP}\nSKILLS (Playbooks) [loadable]\n${SEP}\n- style-guide: House style`,
    `${SEP}\nLIBRARY [loadable]\n${SEP}\n- deploy: Deploy checklist`,
    `${SEP}\nHISTORY (Cross-session conversation history) [searchable]\n${SEP}\n`,
  ].join("\n\n"));
  // Another agent sees its own skills, never ada's.
  const bob = await call("GET", "/sessions/s1/context/skills", undefined, "bob");
  assert.equal(bob.body.content, "- private: Bob's");
  assert.equal((await call("GET", "/sessions/s1")).status, 404, "reads register nothing");
});

test("the model writes its own skills to R2, never the shared library", async () => {
  const out = await tool("s1", "set_context", { label: "skills", content: "Talk like a pirate.", metadata: { title: "Pirate style", description: "Voice" } });
  assert.equal(out, 'Indexed "pirate-style" in skills.');
  const obj = await bucket.get("skills/ada/pirate-style");
  assert.equal(await obj.text(), "Talk like a pirate.");
  assert.equal(obj.customMetadata.description, "Voice");
  assert.equal(await tool("s1", "set_context", { label: "library", content: "x" }), 'Error: Block "library" does not support writes');
  assert.equal((await bucket.list({ prefix: "library/" })).objects.length, 1);
  assert.equal((await call("GET", "/sessions/s1/context/skills", undefined, "bob")).body.content, "- private: Bob's");
});

test("budgets: 422 over maxTokens, nothing changes", async () => {
  assert.equal((await call("PUT", "/sessions/s1/context/memory", { content: "likes tea" })).status, 200);
  const r = await call("PUT", "/sessions/s1/context/memory", { content: "x".repeat(204) });
  assert.equal(r.status, 422);
  assert.equal(r.body.error.code, "over_budget");
  assert.equal(r.body.error.message, 'Block "memory" exceeds maxTokens: 51 > 50');
  assert.equal((await call("GET", "/sessions/s1/context/memory")).body.content, "likes tea");
  assert.equal((await call("PUT", "/sessions/s1/context/soul", { content: "x" })).status, 409);
});

test("skills load, unload and rewrite history; prompt and state survive a restart", async () => {
  const frozen = (await call("GET", "/sessions/s2/prompt")).body.prompt;
  assert.equal(await tool("s2", "load_context", { label: "skills", key: "style-guide" }), "Write short sentences.");
  await call("POST", "/sessions/s2/messages", { message: { id: "a1", role: "assistant", parts: [
    { type: "dynamic-tool", toolName: "load_context", toolCallId: "c1", state: "output-available",
      input: { label: "skills", key: "style-guide" }, output: "Write short sentences." },
    { type: "text", text: "Loaded the style guide." }] } });
  await call("PUT", "/sessions/s2/context/memory", { content: "changed after freezing" });
  const tools = (await call("GET", "/sessions/s2/tools")).body.tools;
  assert.deepEqual(tools.map((t) => t.name), ["set_context", "load_context", "unload_context", "search_context", "session_search"]);
  assert.match(tools[2].description, / Currently loaded: skills:style-guide\.$/);

  await w.restart(); // workerd stops; the DO comes back from its SQLite file

  assert.equal((await call("GET", "/sessions/s2/prompt")).body.prompt, frozen, "the frozen prompt survives and ignores block writes");
  assert.equal(await tool("s2", "unload_context", { label: "skills", key: "style-guide" }), 'Unloaded "style-guide" from skills. Context reclaimed.');
  const a1 = (await call("GET", "/sessions/s2/messages/a1")).body;
  assert.equal(a1.parts[0].output, "[skill unloaded: style-guide]");
  assert.equal(a1.parts[1].text, "Loaded the style guide.");
  assert.equal(await tool("s2", "unload_context", { label: "skills", key: "style-guide" }), 'Skill "style-guide" is not currently loaded in "skills".');
  const refreshed = (await call("POST", "/sessions/s2/prompt/refresh")).body.prompt;
  assert.match(refreshed, /\nchanged after freezing\n/);
  assert.match(refreshed, /- pirate-style: Voice/);
});

test("history search over sessions and an invalid SESSION_CONFIG answers 503", async () => {
  await call("POST", "/sessions/s3/messages", { message: { id: "u1", role: "user", parts: [{ type: "text", text: "the launch is on friday" }] } });
  assert.equal(await tool("s3", "session_search", { query: "launch friday" }), "[user] the launch is on friday");
  assert.equal(await tool("s3", "search_context", { label: "history", query: "launch" }), "[user] the launch is on friday");
  const bad = await startWorker({ vars: { SESSION_CONFIG: '{"context": [{"label": "m", "kind": "writable", "maxToken": 5}]}' } });
  try {
    const r = await bad.fetch("/agents/x/sessions");
    assert.equal(r.status, 503);
    const body = await r.json();
    assert.equal(body.error.code, "not_configured");
    assert.match(body.error.message, /SESSION_CONFIG: .*maxToken/);
  } finally {
    await bad.stop();
  }
});
