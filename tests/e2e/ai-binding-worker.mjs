// The stand-in of Workers AI's `AI` binding, run inside workerd as a Miniflare wrapped binding
// (the real binding cannot run locally): `env.AI.run(model, inputs)` answers in the documented
// formats. Its inner binding CONTROL (a function in the test's Node process, ai-binding.mjs)
// records every run and says what the model answers; this module only speaks the formats:
//  - an embedding model's input `{text: [...]}`: `{shape: [n, 8], data: [[...], ...]}`, a
//    deterministic vector per text (from its words);
//  - a re-ranker's input `{query, contexts: [{text}], top_k}`: `{response: [{id, score}]}`, best
//    first, scores that put the contexts in the reverse of their order (or the script's
//    `answer` as it is);
//  - a chat input without `stream`: `{response, tool_calls?, usage}`, tool calls as
//    `{name, arguments}` (arguments an object);
//  - with `stream: true`: a ReadableStream of server-sent events, one `data: {"response": piece}`
//    per piece (each its own chunk), the tool calls in an event of their own, the usage in the
//    last event, then `data: [DONE]`;
//  - a script with `error`: the run rejects, as the binding does when a model fails.
// The class is named `Ai`: the Worker's Rust side checks the binding's constructor name.

const encoder = new TextEncoder();

/** A vector of 8 numbers from the words of `text`, the same for the same words. */
function vector(text) {
  const v = new Array(8).fill(0);
  for (const word of String(text).toLowerCase().split(/[^a-z0-9]+/).filter(Boolean)) {
    let h = 0;
    for (const c of word) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    v[h % 8] += 1;
  }
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

class Ai {
  constructor(env) {
    this.env = env;
  }

  async run(model, inputs) {
    const r = await this.env.CONTROL.fetch("http://ai-binding/run", {
      method: "POST",
      body: JSON.stringify({ model, inputs }),
    });
    const script = await r.json();
    if (Array.isArray(inputs?.text)) {
      return { shape: [inputs.text.length, 8], data: inputs.text.map(vector) };
    }
    if (script.error) throw new Error(script.error);
    if (Array.isArray(inputs?.contexts)) {
      const n = inputs.contexts.length;
      return script.answer ?? { response: inputs.contexts.map((_, i) => ({ id: n - 1 - i, score: (n - i) / n })) };
    }
    const text = script.response ?? "";
    const toolCalls = script.toolCalls ?? [];
    const usage = script.usage ?? { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    if (!inputs?.stream) {
      return { response: text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}), usage };
    }
    const pieces = script.pieces ?? (text ? text.split(/(?<= )/) : []);
    const events = pieces.map((response) => ({ response, p: "abcdef" }));
    if (toolCalls.length) events.push({ response: "", tool_calls: toolCalls });
    events.push({ response: "", usage });
    const chunks = [...events.map((e) => `data: ${JSON.stringify(e)}\n\n`), "data: [DONE]\n\n"];
    return new ReadableStream({
      async pull(controller) {
        const next = chunks.shift();
        if (next === undefined) {
          controller.close();
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
        controller.enqueue(encoder.encode(next));
      },
    });
  }
}

export default function (env) {
  return new Ai(env);
}
