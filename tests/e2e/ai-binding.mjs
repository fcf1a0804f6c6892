// The test's side of the `AI` binding's stand-in (ai-binding-worker.mjs, which workerd runs as
// the Worker's `AI` binding): what the model answers, scripted per test, and every run it got,
// recorded so a test can assert on the request (the tools sent, the tool results given back).
// Use: `const ai = aiBinding(); const w = await startWorker({ai, vars: {LLM_PROVIDER:
// "workers-ai", LLM_MODEL: ...}}); ai.reply({response: "Hi."}); ... ai.runs`.
import { join } from "node:path";
import { ROOT } from "./harness.mjs";

/** The stand-in Worker's name (the wrapped binding's `scriptName`). */
export const AI_BINDING_WORKER = "ai-binding";

/**
 * @typedef {object} AiScript one scripted chat answer (every key optional):
 * @property {string} [response] the text (default "ok")
 * @property {string[]} [pieces] when streamed: the text as these pieces (default: split after spaces)
 * @property {{name: string, arguments: object}[]} [toolCalls] tool calls, in the documented shape
 * @property {{prompt_tokens: number, completion_tokens: number}} [usage]
 * @property {string} [error] the run fails with this message
 */
/**
 * @typedef {object} AiRun
 * @property {string} model
 * @property {any} inputs what `env.AI.run` was given
 */
/**
 * @typedef {object} AiBinding
 * @property {object} worker the stand-in's Miniflare worker options (startWorker's `ai` adds it)
 * @property {AiRun[]} runs every chat run (inputs with `messages`), oldest first
 * @property {AiRun[]} embeddingRuns every embeddings run (inputs with `text`), oldest first
 * @property {AiRun[]} rerankRuns every re-ranker run (inputs with `contexts`), oldest first
 * @property {(...scripts: {answer?: any, error?: string}[]) => void} rerank queues answers for
 *   the next re-ranker runs (`answer` as it is, or the run fails with `error`); with none queued
 *   the contexts are scored in the reverse of their order
 * @property {(...scripts: AiScript[]) => void} reply queues answers for the next chat runs;
 *   with none queued a run answers "ok"
 */

/** @returns {AiBinding} */
export function aiBinding() {
  const runs = [];
  const embeddingRuns = [];
  const rerankRuns = [];
  const queue = [];
  const rerankQueue = [];
  return {
    runs,
    embeddingRuns,
    rerankRuns,
    reply(...scripts) {
      queue.push(...scripts);
    },
    rerank(...scripts) {
      rerankQueue.push(...scripts);
    },
    worker: {
      name: AI_BINDING_WORKER,
      modules: true,
      scriptPath: join(ROOT, "tests", "e2e", "ai-binding-worker.mjs"),
      serviceBindings: {
        async CONTROL(request) {
          const run = await request.json();
          if (Array.isArray(run.inputs?.text)) {
            embeddingRuns.push(run);
            return Response.json({});
          }
          if (Array.isArray(run.inputs?.contexts)) {
            rerankRuns.push(run);
            return Response.json(rerankQueue.shift() ?? {});
          }
          runs.push(run);
          return Response.json(queue.shift() ?? { response: "ok" });
        },
      },
    },
  };
}
