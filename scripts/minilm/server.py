"""An OpenAI-compatible embeddings server for all-MiniLM-L6-v2 (scripts/minilm/model.py), for the
end-to-end tests and the bench: standard library only besides the model.

    $SA_MINILM_DIR/bin/python scripts/minilm/server.py [PORT]     (PORT 0 or none: a free one)

Listens on 127.0.0.1 once the model is loaded (about 1.5 s) and then prints one line,
`listening 127.0.0.1:PORT`, on stdout. Routes:
  POST /v1/embeddings (and /embeddings)  {"model", "input": string | [string], "encoding_format"?,
        "dimensions"?} -> {"object": "list", "data": [{"object": "embedding", "index": i,
        "embedding": [384 floats]}], "model", "usage": {"prompt_tokens", "total_tokens"}}
        `model` is all-MiniLM-L6-v2 (any case, "sentence-transformers/" in front or not), or
        minilm-static-average (model.py's embed_static: the wheel's word-piece vectors averaged, a
        second model whose similarities sit far higher, for tests of what follows the model);
        anything else is 404 model_not_found; `encoding_format` "float" (default) or "base64"
        (little-endian float32); `dimensions` 384 if given; at most 2,048 inputs. Tokens count
        [CLS] and [SEP]; a text longer than 256 tokens is cut there (as sentence-transformers
        does). Errors are OpenAI error objects: {"error": {"message", "type", "code"}}.
  GET /health  -> {"status": "ok", "model", "dims"}
  POST /control {"fail": N, "status"?: 500}  the next N embeddings requests answer that status
        (an OpenAI server_error object) without computing anything: for tests of a failing
        embeddings endpoint. -> {"fail": N, "status"}
For the tests, every embeddings request is also written to stdout, as one JSON line
{"request": <its JSON body>, "status": <the status answered>}, before the answer is sent.
Requests are served on threads; the model computes one batch at a time. The server exits when its
parent process is gone (a test runner that died leaves no server behind), and on SIGTERM/SIGINT.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model as minilm  # noqa: E402  (first: it sets up numpy's BLAS threads)
import numpy as np  # noqa: E402

MAX_INPUTS = 2048  # OpenAI's limit
MAX_BODY = 32 * 1024 * 1024
NAMES = {minilm.NAME.lower(), f"sentence-transformers/{minilm.NAME}".lower()}


class State:
    """What /control changes, shared by the request threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fail = 0
        self.fail_status = 500
        self.out = threading.Lock()  # one stdout line at a time

    def take_failure(self) -> int | None:
        with self.lock:
            if self.fail > 0:
                self.fail -= 1
                return self.fail_status
            return None


def error(status: int, message: str, type_: str, code: str | None = None) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


def make_handler(model: minilm.MiniLM, state: State):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "minilm-server"

        def log_message(self, format, *args):  # noqa: A002  (quiet: stdout is for the request log)
            pass

        def send_json(self, status: int, body: dict) -> None:
            data = json.dumps(body, separators=(",", ":")).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def read_json(self):
            """(body, None) or (None, (status, error)): the request's JSON body."""
            try:
                length = int(self.headers.get("content-length", ""))
            except ValueError:
                return None, error(411, "a content-length is needed", "invalid_request_error")
            if length > MAX_BODY:
                self.close_connection = True
                return None, error(413, f"the body passes {MAX_BODY} bytes", "invalid_request_error")
            raw = self.rfile.read(length)
            try:
                return json.loads(raw), None
            except (ValueError, UnicodeDecodeError):
                return raw.decode("utf-8", "replace"), error(400, "the body is not JSON", "invalid_request_error")

        def do_GET(self):  # noqa: N802
            if self.path.split("?")[0] == "/health":
                self.send_json(200, {"status": "ok", "model": minilm.NAME, "dims": minilm.DIMS})
            else:
                self.send_json(*error(404, f"no route GET {self.path}", "invalid_request_error"))

        def do_POST(self):  # noqa: N802
            path = self.path.split("?")[0]
            if path == "/control":
                body, err = self.read_json()
                if err is None:
                    n, status = (body.get("fail"), body.get("status", 500)) if isinstance(body, dict) else (None, None)
                    if (not isinstance(n, int) or isinstance(n, bool) or n < 0
                            or not isinstance(status, int) or not 400 <= status <= 599):
                        err = error(400, 'expected {"fail": N >= 0, "status"?: 400-599}', "invalid_request_error")
                    else:
                        with state.lock:
                            state.fail, state.fail_status = n, status
                        err = (200, {"fail": n, "status": status})
                self.send_json(*err)
                return
            if path not in ("/v1/embeddings", "/embeddings"):
                self.send_json(*error(404, f"no route POST {self.path}", "invalid_request_error"))
                return
            body, err = self.read_json()
            status, answer = err if err else self.embeddings(body)
            with state.out:
                sys.stdout.write(json.dumps({"request": body, "status": status}) + "\n")
                sys.stdout.flush()
            self.send_json(status, answer)

        def embeddings(self, body) -> tuple[int, dict]:
            failure = state.take_failure()
            if failure is not None:
                return error(failure, "injected failure (POST /control)", "server_error")
            if not isinstance(body, dict):
                return error(400, "the body must be a JSON object", "invalid_request_error")
            name = body.get("model")
            if not isinstance(name, str):
                return error(400, "model is required", "invalid_request_error")
            static = name.lower() == minilm.STATIC_NAME
            if name.lower() not in NAMES and not static:
                return error(404, f"the model {name!r} does not exist; this server has {minilm.NAME}",
                             "invalid_request_error", "model_not_found")
            texts = body.get("input")
            if isinstance(texts, str):
                texts = [texts]
            if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
                return error(400, "input must be a string or a non-empty array of strings", "invalid_request_error")
            if len(texts) > MAX_INPUTS:
                return error(400, f"at most {MAX_INPUTS} inputs", "invalid_request_error")
            fmt = body.get("encoding_format", "float")
            if fmt not in ("float", "base64"):
                return error(400, 'encoding_format must be "float" or "base64"', "invalid_request_error")
            if body.get("dimensions", minilm.DIMS) != minilm.DIMS:
                return error(400, f"this model has {minilm.DIMS} dimensions only", "invalid_request_error")
            vectors, tokens = model.embed_static(texts) if static else model.embed_counted(texts)
            if fmt == "base64":
                coded = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
            else:
                coded = [[float(x) for x in v] for v in vectors]
            return 200, {
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(coded)],
                "model": minilm.STATIC_NAME if static else minilm.NAME,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }

    return Handler


def exit_with_parent() -> None:
    parent = os.getppid()
    while True:
        time.sleep(1)
        if os.getppid() != parent:
            os._exit(0)


def main() -> int:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    model = minilm.MiniLM()
    np.asarray(model.embed(["warm up"]))  # the first call allocates; keep it out of a test's time
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(model, State()))
    server.daemon_threads = True
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os._exit(0))
    threading.Thread(target=exit_with_parent, daemon=True).start()
    host, bound = server.server_address[:2]
    print(f"listening {host}:{bound}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
