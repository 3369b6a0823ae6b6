"""LangSmith tracing against a local recording endpoint: node runs, metadata, no secrets.

How tracing is switched in one process (langsmith 0.15, langchain-core 1.x): the standard
variables (``LANGSMITH_TRACING``, ``LANGSMITH_ENDPOINT``, ``LANGSMITH_API_KEY``) are read
through ``langsmith.utils.get_env_var``, which is ``lru_cache``-d, and the first traced run
creates one process-wide ``langsmith.Client`` (``langsmith.run_trees._CLIENT``) that keeps
its endpoint and key. A process that sets the variables before its first run (a server, a
CLI) needs nothing else; a test that changes them mid-process clears both, as the
``langsmith_env`` fixture below does. ``wait_for_all_tracers()`` flushes that client.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableLambda
from langchain_core.tracers.context import tracing_v2_enabled
from langchain_core.tracers.langchain import wait_for_all_tracers
from langsmith import run_trees
from langsmith import utils as ls_utils

from graph import Context, build_graph
from run.tracing import REDACTED, redact_secrets, redacting_client, run_summary
from tests.local_provider import LocalServer, Reply
from tools.websearch import SearchCache, set_default_cache

LS_KEY = "lsv2_pt_SENTINEL_LANGSMITH_KEY_0001"
WEB_KEY = "serper-SENTINEL-WEB-KEY-0002"
KB_QUESTION = "How many days of annual leave after 6 years of service?"
WEB_QUESTION = "What is the latest Python release today?"
SERPER_BODY = {
    "organic": [
        {
            "title": "Python 3.14.2 released",
            "link": "https://www.python.org/downloads/release/python-3142/",
            "snippet": "Python 3.14.2 is the latest stable release of Python.",
            "position": 1,
        }
    ]
}
_PART_NAME = re.compile(rb'name="(post|patch)\.([0-9a-f-]{36})(?:\.(\w+))?"')


@dataclass
class Posted:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """A stand-in LangSmith API on 127.0.0.1 that accepts and records everything."""

    requests: list[Posted] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [r.body for r in self.requests]

    def run_posts(self) -> list[Posted]:
        with self.lock:
            return [r for r in self.requests if r.path.startswith("/runs")]


def _decode(raw: bytes, encoding: str | None) -> bytes:
    if encoding == "zstd":  # langsmith's compressed multipart
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    if encoding == "gzip":
        import gzip

        return gzip.decompress(raw)
    return raw


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = _decode(raw, self.headers.get("content-encoding"))
            with rec.lock:
                rec.requests.append(
                    Posted(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
            payload = b"{}"
            self.send_response(202 if self.command == "POST" else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_PUT = _handle

    rec.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.httpd.daemon_threads = True
    thread = threading.Thread(target=rec.httpd.serve_forever, daemon=True)
    thread.start()
    yield rec
    rec.httpd.shutdown()
    rec.httpd.server_close()


def _reset_langsmith() -> None:
    """Forget cached env lookups and the process-wide client (see the module docstring)."""
    cast(Any, ls_utils.get_env_var).cache_clear()  # lru_cache behind typing overloads
    ls_utils.get_tracer_project.cache_clear()
    run_trees._CLIENT = None


@pytest.fixture
def langsmith_env(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Tracing on through the standard variables, pointed at the recorder."""
    for name in ("LANGCHAIN_TRACING_V2", "LANGCHAIN_ENDPOINT", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", recorder.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", LS_KEY)
    monkeypatch.setenv("LANGSMITH_PROJECT", "hybrid-rag-tests")
    _reset_langsmith()
    yield recorder
    wait_for_all_tracers()
    _reset_langsmith()


@pytest.fixture
def web_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """A Serper-format search provider on 127.0.0.1, with a sentinel key."""
    srv = LocalServer()
    srv.thread.start()
    srv.route("/search", Reply(SERPER_BODY))
    monkeypatch.setenv("SERPER_API_KEY", WEB_KEY)
    monkeypatch.setenv("SERPER_BASE_URL", srv.url)
    set_default_cache(SearchCache())
    yield srv
    set_default_cache(None)
    srv.httpd.shutdown()
    srv.httpd.server_close()


def ask(home: Path, question: str, provider: str) -> dict[str, Any]:
    context = Context(data_home=str(home), search_provider=provider)
    return asyncio.run(build_graph().ainvoke({"question": question}, context=context))


def parse_runs(bodies: list[bytes]) -> dict[str, dict[str, Any]]:
    """Merge the multipart parts (``post.<id>``, ``patch.<id>.extra``…) per run id.

    ``/runs/batch`` and ``/runs`` JSON bodies are accepted too.
    """
    runs: dict[str, dict[str, Any]] = {}

    def merge(run_id: str, part: str, value: Any) -> None:
        run = runs.setdefault(run_id, {"metadata": {}})
        if part == "main" and isinstance(value, dict):
            if value.get("name"):
                run["name"] = value["name"]
            run.update({k: v for k, v in value.items() if k in ("run_type", "parent_run_id")})
            part, value = "extra", value.get("extra") or {}
        if part == "extra" and isinstance(value, dict):
            run["metadata"].update(value.get("metadata") or {})

    for body in bodies:
        if body[:1] in (b"{", b"["):  # /runs/batch or /runs
            data = json.loads(body)
            items = data if isinstance(data, list) else [data]
            for item in items:
                for run in [*(item.get("post") or []), *(item.get("patch") or [])] or [item]:
                    if isinstance(run, dict) and run.get("id"):
                        merge(str(run["id"]), "main", run)
            continue
        for chunk in re.split(rb"\r?\n--[0-9A-Za-z'()+_,./:=?-]+", body):
            match = _PART_NAME.search(chunk[:400])
            if not match:
                continue
            payload = re.split(rb"\r?\n\r?\n", chunk, maxsplit=1)[-1].strip()
            try:
                value = json.loads(payload)
            except ValueError:
                continue
            merge(match.group(2).decode(), (match.group(3) or b"main").decode(), value)
    return runs


def by_name(runs: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for run in runs.values():
        out.setdefault(str(run.get("name")), []).append(run)
    return out


def test_every_node_is_a_named_run_with_metadata_and_no_secret(
    langsmith_env: Recorder, web_provider: LocalServer, sample_home: Path
) -> None:
    kb_out = ask(sample_home, KB_QUESTION, "serper")
    web_out = ask(sample_home, WEB_QUESTION, "serper")
    again = ask(sample_home, WEB_QUESTION, "serper")  # served from the search cache
    wait_for_all_tracers()
    assert kb_out["route"] == "knowledge" and web_out["route"] == "search"
    assert web_out["citations"] and again["citations"]
    assert len(web_provider.hits("/search")) >= 1

    posts = langsmith_env.run_posts()
    assert posts, "nothing was posted to the LangSmith endpoint"
    assert {p.path.split("?")[0] for p in posts} <= {"/runs/multipart", "/runs/batch", "/runs"}
    assert all(p.headers.get("x-api-key") == LS_KEY for p in posts)  # the key: headers only

    runs = by_name(parse_runs([p.body for p in posts]))
    expected = {"prepare", "route", "rewrite", "retrieve_internal", "search_web", "grade"}
    expected |= {"reflect", "generate", "cite", "finalize"}
    assert expected <= set(runs), sorted(runs)
    assert len(runs["hybrid_rag"]) == 3  # one root run per invocation

    def meta(name: str) -> list[dict[str, Any]]:
        return [r["metadata"] for r in runs[name]]

    assert all(m.get("langgraph_node") == "route" for m in meta("route"))
    assert {m.get("hybrid_rag.route") for m in meta("route")} == {"knowledge", "search"}
    assert all(m.get("hybrid_rag.step") for m in meta("grade"))
    assert {m.get("hybrid_rag.strategy") for m in meta("grade")} == {"vector", "search"}
    assert all(isinstance(m.get("hybrid_rag.confidence"), float) for m in meta("grade"))
    assert all(m.get("hybrid_rag.mode") == "offline" for m in meta("prepare"))
    assert all(m.get("hybrid_rag.internal_results", 0) > 0 for m in meta("retrieve_internal"))
    web_meta = meta("search_web")
    assert all(m.get("hybrid_rag.web_provider") == "serper" for m in web_meta)
    hits = [int(m["hybrid_rag.cache_hits"]) for m in web_meta]
    assert min(hits) == 0 and max(hits) >= 1  # the repeated question hit the search cache
    assert all(m.get("hybrid_rag.citation_validity") == 1.0 for m in meta("cite"))

    for body in langsmith_env.bodies():
        assert LS_KEY.encode() not in body
        assert WEB_KEY.encode() not in body
    # The web key did reach the provider (so it really was in use during the runs).
    assert web_provider.hits("/search")[0].headers.get("x-api-key") == WEB_KEY


def test_tracing_off_sends_nothing(
    recorder: Recorder,
    web_provider: LocalServer,
    sample_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.delenv("LANGCHAIN_TRACING_V2", raising=False)
    monkeypatch.setenv("LANGSMITH_ENDPOINT", recorder.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", LS_KEY)
    _reset_langsmith()
    try:
        out = ask(sample_home, WEB_QUESTION, "serper")
        wait_for_all_tracers()
    finally:
        _reset_langsmith()
    assert out["citations"]
    assert recorder.requests == []


def test_redacting_client_scrubs_secret_values(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: even a value that did carry a key is redacted before sending."""
    monkeypatch.setenv("SERPER_API_KEY", WEB_KEY)
    monkeypatch.delenv("LANGSMITH_TRACING", raising=False)
    _reset_langsmith()
    client = redacting_client(api_url=recorder.url, api_key=LS_KEY)
    leaky: Any = RunnableLambda(lambda x: {"echo": f"key={x['key']}"}).with_config(run_name="leaky")
    with tracing_v2_enabled(project_name="hybrid-rag-tests", client=client):
        assert leaky.invoke({"key": WEB_KEY}) == {"echo": f"key={WEB_KEY}"}
    client.flush()
    bodies = recorder.bodies()
    assert any(b"leaky" in b for b in bodies)
    assert all(WEB_KEY.encode() not in b for b in bodies)
    assert any(REDACTED.encode() in b for b in bodies)
    _reset_langsmith()


def test_redact_secrets_and_run_summary_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-0123456789")
    monkeypatch.setenv("BRAVE_API_KEY", "short")  # too short to scrub safely
    data = {"a": ["x tvly-0123456789 y", 3], "b": {"c": "short"}}
    assert redact_secrets(data) == {"a": [f"x {REDACTED} y", 3], "b": {"c": "short"}}
    summary = run_summary(
        {"route": "both", "confidence": 0.5, "web_docs": [{"provider": "tavily"}], "web_error": "x"}
    )
    assert summary == {
        "route": "both",
        "confidence": 0.5,
        "web_results": 1,
        "web_error": True,
        "web_provider": "tavily",
    }
    assert run_summary({"route": "both", "mode": "offline"}, "prepare") == {"mode": "offline"}
