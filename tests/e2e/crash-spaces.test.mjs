// Crash tests of memory spaces (tests/e2e/crash-rig.mjs): workerd killed while two agents
// append to a shared block of their space, and while the space stores a batch of memories;
// after the restart every committed append is whole (the block's version counts exactly the
// lines it holds), nothing is torn, and a batch is all there or absent. Agents are
// `crash:a` and `crash:b` of the space `crash` (SESSION_CONFIG.memory.space's rule).
import { test } from "node:test";
import assert from "node:assert/strict";
import { useRig, state, sleep, count, tally, startKillable, TOKEN } from "./crash-rig.mjs";

useRig();

const CONFIG = {
  memory: { space: true, extract: false },
  context: [{ label: "board", kind: "writable", scope: "space" }],
};

async function req(method, path, body) {
  // A request caught by a kill fails; one queued behind it must not wait forever either.
  const init = { method, headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(10_000) };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["content-type"] = "application/json"; }
  const r = await fetch(new URL(path, state.rt.url), init);
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

async function restartWith(vars) {
  await state.rt.kill();
  state.vars = { ...state.vars, ...vars };
  state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
}

test("killed during concurrent appends from two agents: every committed append is whole", { timeout: 300_000 }, async () => {
  await restartWith({ SESSION_CONFIG: JSON.stringify(CONFIG) });
  let sent = 0;
  for (const ms of [5, 20, 60, 120, 250]) {
    const writes = [];
    for (let i = 0; i < 30; i++, sent++) {
      const agent = i % 2 ? "crash:b" : "crash:a";
      writes.push(req("POST", `/agents/${agent}/sessions/s/context/board/append`, { content: `line ${sent} ${"x".repeat(40)}` }).catch(() => null));
    }
    await sleep(ms);
    await state.rt.kill();
    const answers = await Promise.all(writes);
    state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
    const block = (await req("GET", "/spaces/crash/blocks/board")).body;
    const lines = block.content === "" ? [] : block.content.split("\n");
    assert.equal(lines.length, block.version, `after a kill at ${ms} ms: ${block.version} writes, ${lines.length} lines`);
    for (const l of lines) assert.match(l, /^line \d+ x{40}$/, "no torn line");
    assert.equal(new Set(lines).size, lines.length, "no line twice");
    const told = answers.filter((r) => r?.status === 200).length;
    assert.ok(block.version >= told, "every append the client was told of is there");
    count("shared-block append", block.version > 0);
  }
  // The agents still write after all that.
  assert.equal((await req("POST", "/agents/crash:a/sessions/s/context/board/append", { content: "after" })).status, 200);
});

test("killed while the space stores a batch of memories: all of it or none", { timeout: 300_000 }, async () => {
  const size = 500;
  for (const [i, ms] of [10, 40, 120, 400].entries()) {
    const memories = Array.from({ length: size }, (_, k) => ({ content: `Space fact ${i}-${k} about the user's garden.`, tags: [`b${i}`] }));
    const seen = req("POST", "/spaces/crash/memories/batch", { memories }).catch(() => null);
    await sleep(ms);
    await state.rt.kill();
    const answer = await seen;
    state.rt = await startKillable({ persistDir: state.dir, apiToken: TOKEN, vars: state.vars });
    const n = (await req("GET", `/spaces/crash/memories?tag=b${i}&limit=100`)).body.memories.length;
    assert.ok(n === 0 || n === 100, `after a kill at ${ms} ms: ${n} memories of the batch on the first page`);
    if (answer?.status === 201) assert.equal(n, 100, "a batch the client was told is stored, is stored");
    count("space memory batch", n > 0);
  }
  assert.ok(tally["space memory batch"].kills === 4);
});
