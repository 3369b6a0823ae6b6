"""A misbehaving search provider on 127.0.0.1 for the fault-matrix tests.

Like ``tests.local_provider.LocalServer`` (per-path reply queues, the last reply repeats,
every request recorded), plus a *slow drip*: the status line and headers are sent at
once, then the body trickles out in small pieces with a pause between them, so no single
read ever waits longer than the pause (a per-read timeout never fires). Never used by
the product.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Hostile:
    """One scripted answer.

    ``body``: JSON-able, or raw ``str``/``bytes``. ``delay``: seconds before anything is
    sent. ``drip``: seconds between body pieces of ``drip_bytes`` bytes (0 = all at once).
    """

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0
    drip_bytes: int = 8
    content_type: str = "application/json"

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")


@dataclass
class Hit:
    """One recorded request."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    at: float


class HostileServer:
    """Threaded HTTP server on a free 127.0.0.1 port; use as a context manager."""

    def __init__(self) -> None:
        self.routes: dict[str, list[Hostile]] = {}
        self.requests: list[Hit] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                owner._record(
                    Hit(
                        self.command,
                        parts.path,
                        dict(parse_qsl(parts.query, keep_blank_values=True)),
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        time.monotonic(),
                    )
                )
                reply = owner._next(parts.path)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.payload()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
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
                    pass  # the client gave up

            do_GET = _handle
            do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _record(self, hit: Hit) -> None:
        with self._lock:
            self.requests.append(hit)

    def _next(self, path: str) -> Hostile:
        with self._lock:
            queue = self.routes.get(path)
            if not queue:
                return Hostile({"error": f"no route for {path}"}, status=404)
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def route(self, path: str, *replies: Hostile) -> None:
        with self._lock:
            self.routes[path] = list(replies)

    def hits(self, path: str | None = None) -> list[Hit]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving() -> Iterator[HostileServer]:
    with HostileServer() as srv:
        yield srv
