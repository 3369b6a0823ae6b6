"""A scriptable HTTP server on 127.0.0.1 for tests that need a real peer.

Per-path reply queues (the last reply repeats), every request recorded, and optional
misbehaviour per reply: a delay before anything is sent, or a *slow drip* (headers at
once, then the body in small pieces with a pause between them, so no single read waits
long enough to trip a per-read timeout). Never used by the product.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Reply:
    """One scripted answer: a JSON-able body (or raw ``str``/``bytes``), status, headers.

    ``delay``: seconds before anything is sent. ``drip``: seconds between body pieces of
    ``drip_bytes`` bytes (0 = all at once). ``content_type`` defaults to JSON, or
    ``text/html`` for a ``str`` body.
    """

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0
    drip_bytes: int = 8
    content_type: str | None = None
    # A function of the request's JSON body that returns the reply body (a scripted peer
    # that answers what it is asked, e.g. an OpenAI-format model); ``body`` is then unused.
    respond: Callable[[Any], Any] | None = None

    def payload(self, request: Any = None) -> bytes:
        body = self.respond(request) if self.respond else self.body
        if isinstance(body, bytes):
            return body
        if isinstance(body, str):
            return body.encode("utf-8")
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def ctype(self) -> str:
        if self.content_type:
            return self.content_type
        return "text/html" if isinstance(self.body, str) else "application/json"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    at: float = 0.0


def serve(
    handler: type[BaseHTTPRequestHandler],
    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer,
) -> tuple[ThreadingHTTPServer, str]:
    """Start ``handler`` on a free loopback port in a daemon thread; returns the server
    (``stop`` it) and its base URL."""
    httpd = server_class(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def stop(httpd: ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


class LocalServer:
    """Threaded HTTP server on a free port; ``thread.start()`` or use as a context manager."""

    def __init__(self) -> None:
        self.routes: dict[str, list[Reply]] = {}
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                server._record(
                    Recorded(
                        self.command,
                        parts.path,
                        dict(parse_qsl(parts.query, keep_blank_values=True)),
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        time.monotonic(),
                    )
                )
                reply = server._next(parts.path)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.payload(body)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.ctype())
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if not reply.drip:
                        self.wfile.write(payload)
                        return
                    self.wfile.flush()
                    step = max(1, reply.drip_bytes)
                    for i in range(0, len(payload), step):
                        self.wfile.write(payload[i : i + step])
                        self.wfile.flush()
                        time.sleep(reply.drip)
                except (TimeoutError, BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            do_GET = _handle
            do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> LocalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def _next(self, path: str) -> Reply:
        with self._lock:
            queue = self.routes.get(path)
            if not queue:
                return Reply({"error": f"no route for {path}"}, status=404)
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def route(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self.routes[path] = list(replies)

    def hits(self, path: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts connections and never answers: the hung
    endpoint (model, embedding, Chroma, search) of the time-limit tests."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                self._held.append(self.sock.accept()[0])
            except OSError:
                continue

    def __enter__(self) -> BlackHole:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self.sock.close()
