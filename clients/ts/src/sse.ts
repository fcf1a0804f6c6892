// A small server-sent events reader: the `data` of each event of a response body.

/**
 * Yields the data of each event (its `data:` lines joined by "\n") as the body streams in.
 * Comments and other fields are skipped; an event cut off by the end of the body is dropped.
 * Leaving the loop early cancels the body.
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buffer);
        if (!m) break;
        // A "\r" at the end may be the first half of "\r\n": wait for the next chunk.
        if (m[0] === "\r" && m.index === buffer.length - 1 && !done) break;
        const line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === "") {
          if (data.length > 0) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
        // ":comment", "event:", "id:", "retry:": nothing the API uses.
      }
      if (done) {
        finished = true;
        return;
      }
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
