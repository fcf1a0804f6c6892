// Tools of remote MCP servers (SESSION_CONFIG.tools.mcp), measured against the built Worker in
// workerd, the scripted model (tests/e2e/llm-server.mjs, answering at once) and a local MCP
// server on the official SDK (tests/e2e/mcp-server.mjs): what one remote tool call adds to a
// turn. Each run is a pair of JSON turns of two model calls each, in turn order alternated: the
// model calls `crm__echo` (one `tools/call` to the server), or a tool nobody has (the turn's
// tool step with nothing run: the floor). Also the first turn of a new object (its `initialize`
// and `tools/list`) beside a later one that lists nothing. Asserts nothing.
//
//   BENCH_MCP=0        (read by bench/bench.mjs) skip it
//   BENCH_MCP_RUNS     pairs measured (default 100)
import { startWorker } from "../tests/e2e/harness.mjs";
import { start as startModel } from "../tests/e2e/llm-server.mjs";
import { start as startMcp } from "../tests/e2e/mcp-server.mjs";
import { pct, ms, log, timed, progress as progressFor } from "./lib.mjs";

const progress = progressFor("bench mcp");
const RUNS = Number(process.env.BENCH_MCP_RUNS ?? 100);
const auth = { authorization: "Bearer bench", "content-type": "application/json" };
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });

const model = await startModel();
const crm = await startMcp();
const config = { tools: { mcp: [{ name: "crm", url: crm.url, secret: "CRM_MCP_TOKEN", allow: ["echo"] }] } };
const w = await startWorker({
  apiToken: "bench",
  vars: { LLM_PROVIDER: "openai", LLM_BASE_URL: model.baseUrl, LLM_MODEL: "bench-model", SESSION_CONFIG: JSON.stringify(config), CRM_MCP_TOKEN: "bench-secret" },
});

/** One JSON turn of agent `agent` whose model first calls `tool`; its wall time (ms). */
async function turn(agent, i, tool) {
  model.reply({ toolCalls: [{ id: `c${i}`, name: tool, arguments: { text: `hello ${i}` } }] }, { content: "Done." });
  const [t, r] = await timed(() => fetch(new URL(`/agents/${agent}/sessions/s/chat`, w.url), {
    method: "POST", headers: auth, body: JSON.stringify({ message: user(`u${i}`, "go") }),
  }));
  const body = await r.json();
  if (r.status !== 201) throw new Error(`turn ${i}: ${r.status} ${JSON.stringify(body)}`);
  const part = body.messages[0].parts[0];
  if (tool.startsWith("crm__") && part.output !== `hello ${i}`) throw new Error(`turn ${i}: ${JSON.stringify(part)}`);
  return t;
}

try {
  // A new object lists the server's tools on its first turn; the next turns use the kept list.
  const cold = [];
  const warm = [];
  for (let a = 0; a < 10; a++) {
    crm.reset();
    cold.push(await turn(`bench-mcp-cold-${a}`, 0, "nobody_has_it"));
    const listed = crm.requests.filter((q) => q.rpc === "tools/list").length;
    if (listed !== 1) throw new Error(`a first turn listed ${listed} times`);
    warm.push(await turn(`bench-mcp-cold-${a}`, 1, "nobody_has_it"));
  }
  const remote = [];
  const floor = [];
  for (let i = 0; i < RUNS; i++) {
    if (i % 20 === 0) progress(`pairs ${i}/${RUNS}`);
    const pair = [["crm__echo", remote], ["nobody_has_it", floor]];
    if (i % 2) pair.reverse();
    for (const [tool, into] of pair) into.push(await turn("bench-mcp", 2 * i + (into === floor ? 1 : 0) + 10, tool));
  }
  const row = (name, xs) => log(`| ${name} | ${ms(pct(xs, 50))} | ${ms(pct(xs, 99))} |`);
  log("\n### Tools of remote MCP servers (local SDK server, scripted model answering at once)\n");
  log(`${RUNS} pairs of turns with two model calls each; the remote call is one \`tools/call\` (echo).\n`);
  log("| turn | p50 | p99 |");
  log("|---|---|---|");
  row("the model calls a remote tool", remote);
  row("the model calls a tool nobody has (floor)", floor);
  const added = remote.map((x, i) => x - floor[i]);
  row("added by the remote call (pairwise)", added);
  row("first turn of a new object (its start, initialize, tools/list)", cold);
  row("its second turn (list kept)", warm);
} finally {
  await w.stop();
  await crm.close();
  await model.close();
}
