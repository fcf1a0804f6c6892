// The open session's WebSocket: the typed client's SessionSocket (it reopens itself after a drop,
// backoff 250 ms doubling to 5 s; not after a 1008 close, a token expired or revoked) with a
// ping every 30 s, and what its frames do: stored writes and deletes read the tree again, a
// reply another client is streaming is drawn as it comes (a "ghost"), status frames show the
// branch's estimate and compactions, context and memory frames redraw their panel.
// `body[data-ws]` says where it is: connecting, open, closed.

/**
 * `status(text, err)`; `current()`: the OpenSession on screen or null; `tree`: {refresh,
 * scheduleRefresh}; `view`: {scheduleRender, head}; `panels`: {render, update}.
 */
export function createSocket({ status, current, tree, view, panels }) {
  const wsState = (v) => { document.body.dataset.ws = v; };

  /** Opens the socket of `s` (kept as `s.socket`). */
  function connect(s) {
    wsState("connecting");
    s.socket = s.api.connect({
      reconnect: { initialDelayMs: 250, maxDelayMs: 5000 },
      onOpen: ({ attempts }) => {
        if (current() !== s) return;
        wsState("open");
        clearInterval(s.pingTimer);
        s.pingTimer = setInterval(() => { if (s.socket?.state === "open") s.socket.send({ type: "ping" }); }, 30000);
        if (attempts > 0) { status("Reconnected to " + s.sid); tree.refresh(s); panels.render(); } // writes may have come meanwhile
      },
      onFrame: (f) => { if (current() === s) onFrame(s, f); },
      onClose: ({ code, reconnecting, delayMs }) => {
        clearInterval(s.pingTimer);
        if (current() !== s) return;
        wsState("closed");
        if (reconnecting) status("Disconnected; reconnecting in " + (delayMs / 1000).toFixed(1) + " s…", true);
        else status("Disconnected" + (code === 1008 ? ": the token expired or was revoked (paste a new one)" : "") + ".", true);
      },
    });
  }

  /** Closes the socket of `s` (if any) for good. */
  function close(s) {
    wsState("closed");
    if (!s?.socket) return;
    clearInterval(s.pingTimer);
    const ws = s.socket;
    s.socket = null;
    ws.close();
  }

  function onFrame(s, f) {
    if (f.sessionId && f.sessionId !== s.sid) return;
    switch (f.type) {
      case "message":
        if (!f.pending) tree.scheduleRefresh(s);
        break;
      case "deleted": case "cleared":
        tree.scheduleRefresh(s);
        break;
      case "delta": case "tool": case "reasoning": {
        if (s.busy || s.own.has(f.messageId) || s.tree.has(f.messageId)) break; // our own turn: the chat client shows it
        const g = s.ghost && s.ghost.id === f.messageId ? s.ghost : (s.ghost = { id: f.messageId, text: "", tools: new Map(), reasoning: "" });
        // A turn that fails sends no message frame: its ghost goes once the frames stop.
        clearTimeout(g.timer);
        g.timer = setTimeout(() => { if (s.ghost === g) { s.ghost = null; view.scheduleRender(); } }, 8000);
        if (f.type === "delta") g.text += f.text || "";
        else if (f.type === "reasoning") g.reasoning += f.text || "";
        else g.tools.set(f.toolCallId, f);
        view.scheduleRender();
        break;
      }
      case "status":
        s.estimate = f;
        if (f.phase === "compacting") status("Compacting…");
        else if (f.compacted || f.error) { status(f.error ? "Compaction failed: " + f.error.message : "Compacted (" + f.compacted.tokensBefore + " tokens before)", !!f.error); tree.scheduleRefresh(s); }
        if (s.ghost && !s.busy) tree.scheduleRefresh(s);
        view.head();
        break;
      case "context":
        panels.update("context");
        break;
      case "memory":
        panels.update("memories");
        break;
      case "error":
        status("Socket error " + f.code + ": " + f.message, true);
        break;
    }
  }

  return { connect, close };
}
