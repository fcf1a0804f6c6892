// Runs one statement on a Durable Object's SqlStorage and packs every row into one byte buffer,
// so a result crosses into the wasm as a single copy (read by `unpack` in do_sql.rs) instead
// of a call per value. Strings especially: wasm-bindgen copies a JS string into the wasm one
// character at a time in JavaScript, while TextEncoder.encodeInto writes UTF-8 natively.
//
// Layout, little-endian: per row a u32 count of values, then per value a tag byte and its body:
//   0 NULL | 1 integer, f64 | 2 float, f64 | 3 text, u32 length + UTF-8 | 4 blob, u32 length + bytes
// and last, the statement's rowsWritten as an f64.
const encoder = new TextEncoder();
let buf = new Uint8Array(1 << 16);
let view = new DataView(buf.buffer);

function room(at, need) {
  if (at + need <= buf.length) return;
  let size = buf.length * 2;
  while (size < at + need) size *= 2;
  const bigger = new Uint8Array(size);
  bigger.set(buf.subarray(0, at));
  buf = bigger;
  view = new DataView(buf.buffer);
}

export function packedRows(sql, query, bindings) {
  // A big result's buffer is not kept for the life of the isolate.
  if (buf.length > 1 << 22) {
    buf = new Uint8Array(1 << 16);
    view = new DataView(buf.buffer);
  }
  let at = 0;
  const cursor = sql.exec(query, ...bindings);
  for (const row of cursor.raw()) {
    room(at, 4);
    view.setUint32(at, row.length, true);
    at += 4;
    for (const v of row) {
      if (v === null || v === undefined) {
        room(at, 1);
        buf[at++] = 0;
      } else if (typeof v === "number" || typeof v === "boolean") {
        const n = Number(v);
        room(at, 9);
        buf[at] = Number.isSafeInteger(n) ? 1 : 2;
        view.setFloat64(at + 1, n, true);
        at += 9;
      } else if (typeof v === "string") {
        // At most three bytes of UTF-8 per UTF-16 unit.
        room(at, 5 + v.length * 3);
        buf[at] = 3;
        const { written } = encoder.encodeInto(v, buf.subarray(at + 5));
        view.setUint32(at + 1, written, true);
        at += 5 + written;
      } else {
        const bytes = new Uint8Array(v);
        room(at, 5 + bytes.length);
        buf[at] = 4;
        view.setUint32(at + 1, bytes.length, true);
        buf.set(bytes, at + 5);
        at += 5 + bytes.length;
      }
    }
  }
  room(at, 8);
  view.setFloat64(at, cursor.rowsWritten, true);
  return buf.subarray(0, at + 8);
}
