"""Fixtures: a scriptable local HTTP server on 127.0.0.1 and settings pointing at it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from tools.websearch import SearchCache, WebSearchSettings

FIXTURES = Path(__file__).parent / "fixtures"
SENTINEL = "sk-SENTINEL-123"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@dataclass
class Reply:
    """One scripted answer: a JSON-able body (or raw str/bytes), status, headers, delay."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class LocalServer:
    """Threaded HTTP server; per-path reply queues (the last reply repeats)."""

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
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                server._record(
                    Recorded(
                        self.command,
                        parts.path,
                        dict(parse_qsl(parts.query, keep_blank_values=True)),
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
                reply = server._next(parts.path)
                if reply.delay:
                    time.sleep(reply.delay)
                if isinstance(reply.body, bytes):
                    payload = reply.body
                elif isinstance(reply.body, str):
                    payload = reply.body.encode("utf-8")
                else:
                    payload = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
                try:
                    self.send_response(reply.status)
                    ctype = "application/json" if not isinstance(reply.body, str) else "text/html"
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            do_GET = _handle
            do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

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

    def hits(self, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == path]


@pytest.fixture
def server() -> Iterator[LocalServer]:
    srv = LocalServer()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def make_settings(server: LocalServer, provider: str, **overrides: Any) -> WebSearchSettings:
    """Every provider keyed with the sentinel and pointed at the local server; fast retries."""
    names = ("serpbase", "serper", "serpapi", "scavio", "tavily", "brave", "searxng")
    values: dict[str, Any] = {
        "provider": provider,
        "api_keys": {n: SENTINEL for n in names if n != "searxng"},
        "base_urls": dict.fromkeys(names, server.url),
        "timeout": 2.0,
        "max_attempts": 3,
        "backoff_base": 0.01,
        "backoff_max": 0.05,
        "retry_after_cap": 0.2,
        "time_budget": 5.0,
    }
    values.update(overrides)
    return WebSearchSettings(**values)


class FakeClock:
    """Monotonic clock for cache TTL tests."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> SearchCache:
    return SearchCache(timer=clock)
