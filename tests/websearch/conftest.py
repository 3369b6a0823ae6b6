"""Fixtures: a scriptable local HTTP server on 127.0.0.1 and settings pointing at it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.local_provider import LocalServer, Recorded, Reply
from tools.websearch import SearchCache, WebSearchSettings

__all__ = ["LocalServer", "Recorded", "Reply"]

FIXTURES = Path(__file__).parent / "fixtures"
SENTINEL = "sk-SENTINEL-123"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


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
