// A session's WebSocket (`GET /agents/{agent}/sessions/{sid}/ws`) with typed frames and
// reconnection with exponential backoff after an unexpected close.
import type { ClientFrame, ServerFrame } from "./types.js";

/** The part of a WebSocket this client uses: the browser's, Workers', or the `ws` package's. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "message" | "close" | "error", listener: (event: any) => void): void;
}

/** A WebSocket class: `globalThis.WebSocket` in browsers, `WebSocket` from `ws` in Node. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ReconnectOptions {
  /** Wait before the first retry (default 500 ms); doubled (`factor`) after each failed one. */
  initialDelayMs?: number;
  /** Longest wait between retries (default 15 s). */
  maxDelayMs?: number;
  /** Growth of the wait per failed retry (default 2). */
  factor?: number;
  /** Give up after this many retries in a row without an open socket (default: never). */
  maxAttempts?: number;
}

export interface OpenInfo {
  /** `false` on the first open, `true` on every reopen after an unexpected close. */
  reconnected: boolean;
  /** How many retries this open took (0 on the first try). */
  attempts: number;
}

export interface CloseInfo {
  /** The close code (`1006`: the connection failed or dropped; `1008`: token expired or revoked). */
  code: number;
  reason: string;
  /** Whether a retry is scheduled (after `delayMs`). */
  reconnecting: boolean;
  delayMs?: number;
}

export interface ConnectOptions {
  /** The WebSocket class; default `globalThis.WebSocket` (Node 20 has none: pass `ws`'s). */
  WebSocket?: WebSocketConstructor;
  /** Every frame the server sends, parsed. */
  onFrame: (frame: ServerFrame) => void;
  /** Each time the socket opens, the first time and after each reconnect (e.g. to send `history`). */
  onOpen?: (info: OpenInfo) => void;
  /** Each time the underlying socket closes, saying whether it will reconnect. */
  onClose?: (info: CloseInfo) => void;
  /** A frame that is not JSON. */
  onError?: (error: Error) => void;
  /** Backoff settings, or `false` to never reconnect. */
  reconnect?: ReconnectOptions | false;
  /** The token for `?token=` (default: the client's). Give browsers a scoped token. */
  token?: string;
}

export type SocketState = "connecting" | "open" | "closing" | "reconnecting" | "closed";

const OPEN = 1;
/** Policy violation: the server closes with it when the socket's token expired or was revoked. */
const POLICY_VIOLATION = 1008;

/**
 * One logical connection to a session: reopens itself after an unexpected close (not after
 * `close()`, nor after a `1008` close, since the same token would be refused again) until
 * `maxAttempts` retries in a row failed. Frames are not queued: `send` needs an open socket.
 */
export class SessionSocket {
  private ws: WebSocketLike | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private attempts = 0;
  private opens = 0;
  private closedByUser = false;
  private waiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private current: SocketState = "connecting";
  private readonly Ctor: WebSocketConstructor;

  constructor(
    private readonly url: string,
    private readonly options: ConnectOptions,
  ) {
    const Ctor = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!Ctor) {
      throw new TypeError("no WebSocket class: pass one as connect({ WebSocket }) (in Node: `import WebSocket from \"ws\"`)");
    }
    this.Ctor = Ctor;
    this.open();
  }

  /**
   * `connecting`, `open`, `closing` (a close handshake runs; what follows depends on its code),
   * `reconnecting` (waiting to retry) or `closed` (for good).
   */
  get state(): SocketState {
    return this.current === "open" && this.ws?.readyState !== OPEN ? "closing" : this.current;
  }

  /** Sends a frame; throws when the socket is not open. */
  send(frame: ClientFrame): void {
    if (this.state !== "open" || !this.ws) throw new Error(`the session socket is not open (${this.state})`);
    this.ws.send(JSON.stringify(frame));
  }

  /** Resolves once the socket is open (at once if it is); rejects if it closes for good first. */
  opened(): Promise<void> {
    if (this.state === "open") return Promise.resolve();
    if (this.current === "closed") return Promise.reject(new Error("the session socket is closed"));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Closes the socket for good: no reconnect. */
  close(code = 1000, reason = ""): void {
    if (this.closedByUser) return;
    this.closedByUser = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.finish();
    try {
      this.ws?.close(code, reason);
    } catch {
      // Already closing.
    }
  }

  private open(): void {
    let ws: WebSocketLike;
    try {
      ws = new this.Ctor(this.url);
    } catch (e) {
      if (this.opens === 0 && this.attempts === 0) throw e; // a bad URL or class: say so at once
      this.ws = undefined;
      this.closed(1006, e instanceof Error ? e.message : String(e));
      return;
    }
    this.ws = ws;
    this.current = this.opens === 0 && this.attempts === 0 ? "connecting" : "reconnecting";
    ws.addEventListener("open", () => {
      if (ws !== this.ws || this.closedByUser) return;
      this.current = "open";
      const info: OpenInfo = { reconnected: this.opens > 0, attempts: this.attempts };
      this.opens++;
      this.attempts = 0;
      for (const w of this.waiters.splice(0)) w.resolve();
      this.options.onOpen?.(info);
    });
    ws.addEventListener("message", (event: { data: unknown }) => {
      if (ws !== this.ws) return;
      const text = typeof event.data === "string" ? event.data : new TextDecoder().decode(event.data as ArrayBuffer);
      let frame: ServerFrame;
      try {
        frame = JSON.parse(text) as ServerFrame;
      } catch {
        this.options.onError?.(new Error(`a frame that is not JSON: ${text.slice(0, 200)}`));
        return;
      }
      this.options.onFrame(frame);
    });
    // Errors are followed by a close event; that is where retries are decided.
    ws.addEventListener("error", () => {});
    ws.addEventListener("close", (event: { code?: number; reason?: string }) => {
      if (ws !== this.ws) return;
      this.closed(event.code ?? 1006, event.reason ?? "");
    });
  }

  /** The underlying socket closed (or could not be made): retry or stop. */
  private closed(code: number, reason: string): void {
    const rc = this.options.reconnect === false ? undefined : this.options.reconnect ?? {};
    const retry = !this.closedByUser && rc !== undefined && code !== POLICY_VIOLATION &&
      this.attempts < (rc.maxAttempts ?? Infinity);
    if (!retry) {
      this.finish();
      this.options.onClose?.({ code, reason, reconnecting: false });
      return;
    }
    const base = Math.min(rc.maxDelayMs ?? 15_000, (rc.initialDelayMs ?? 500) * (rc.factor ?? 2) ** this.attempts);
    const delayMs = Math.round(base / 2 + (Math.random() * base) / 2);
    this.attempts++;
    this.current = "reconnecting";
    this.options.onClose?.({ code, reason, reconnecting: true, delayMs });
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.closedByUser) this.open();
    }, delayMs);
  }

  private finish(): void {
    this.current = "closed";
    for (const w of this.waiters.splice(0)) w.reject(new Error("the session socket is closed"));
  }
}
