// `wrangler dev`, as Workers developers run it: the [build] command finds the installed tools
// (the build is skipped here when build/ is fresh), the DO works with local persisted state,
// and a restart on the same --persist-to directory keeps the data.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./harness.mjs";

const freePort = () => new Promise((resolve) => {
  const s = createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

function kill(child, signal) {
  try { process.kill(-child.pid, signal); } catch { /* already gone */ }
}

async function wranglerDev(persist, token) {
  const port = await freePort();
  const inspector = await freePort();
  // wrangler's own entry point, in its own process group, so SIGINT reaches it (npx would not
  // forward it) and nothing outlives the test.
  const child = spawn(process.execPath, [join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector),
    "--persist-to", persist, "--var", `API_TOKEN:${token}`, "--show-interactive-dev-session=false"], {
    cwd: ROOT, env: { ...process.env, SA_SKIP_BUILD_IF_FRESH: "1", WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", CI: "true" },
    stdio: ["ignore", "pipe", "pipe"], detached: true,
  });
  let out = "";
  child.stdout.on("data", (d) => { out += d; });
  child.stderr.on("data", (d) => { out += d; });
  const deadline = Date.now() + 120_000;
  while (!/Ready on/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) { kill(child, "SIGKILL"); throw new Error(`wrangler dev did not start:\n${out}`); }
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    const force = setTimeout(() => kill(child, "SIGKILL"), 15_000);
    child.once("exit", () => { clearTimeout(force); resolve(); });
    kill(child, "SIGINT");
  });
  return { base: `http://127.0.0.1:${port}`, stop, output: () => out };
}

test("wrangler dev serves the worker and keeps state across restarts", { timeout: 300_000 }, async () => {
  const persist = mkdtempSync(join(tmpdir(), "sa-wrangler-"));
  const token = "wrangler-dev-token";
  const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  let dev = await wranglerDev(persist, token);
  try {
    assert.equal(await (await fetch(`${dev.base}/healthz`)).text(), "ok");
    assert.equal((await fetch(`${dev.base}/agents/dev/sessions`)).status, 401);
    const r = await fetch(`${dev.base}/agents/dev/sessions/s1/messages`, { method: "POST", headers: auth,
      body: JSON.stringify({ message: { id: "m1", role: "user", parts: [{ type: "text", text: "kept by wrangler" }] } }) });
    assert.equal(r.status, 201, await r.text());
    // One log line per request: agent, method, route template, status, ms; never the token, an
    // id from the path or a body.
    const deadline = Date.now() + 10_000;
    const lines = () => dev.output().split("\n").map((l) => l.slice(l.indexOf("{"))).filter((l) => l.startsWith('{"agent"'))
      .map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter(Boolean);
    // wrangler forwards workerd's output as it comes: wait for the POST's line itself (counting
    // lines raced with the /healthz line, which also counts).
    const posted = (l) => l.agent === "dev" && l.method === "POST" && l.route === "/sessions/{sid}/messages" && l.status === 201 && typeof l.ms === "number";
    while (!lines().some(posted) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
    const logged = lines();
    assert.ok(logged.some(posted), JSON.stringify(logged));
    assert.ok(logged.some((l) => l.status === 401 && l.route === "/sessions"), JSON.stringify(logged));
    // (wrangler prints its own request lines with paths; ours carry none of these.)
    const ours = JSON.stringify(logged);
    assert.ok(!ours.includes(token) && !ours.includes("kept by wrangler") && !ours.includes("s1") && !ours.includes("m1"), ours);
    await dev.stop();
    dev = await wranglerDev(persist, token);
    const h = await (await fetch(`${dev.base}/agents/dev/sessions/s1/history`, { headers: auth })).json();
    assert.deepEqual(h.messages.map((m) => m.parts[0].text), ["kept by wrangler"]);
  } finally {
    await dev.stop();
    rmSync(persist, { recursive: true, force: true });
  }
});
