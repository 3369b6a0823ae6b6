"""The Redis layer of the search cache against a real ``redis-server`` on loopback.

Each ``SearchCache`` with its own ``RedisSharedCache`` stands for one process (its own
first layer); one test runs real OS processes. The provider is the local HTTP server.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.local_provider import LocalServer, Reply
from tests.redis_server import REDIS_SERVER, RedisServer
from tools.errors import ConfigError
from tools.websearch import SearchCache, WebSearchClient, WebSearchError, WebSearchSettings
from tools.websearch.cache import cache_from_env
from tools.websearch.shared_cache import RedisSharedCache, SharedCacheSettings

pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (.ci/run installs it)"
)
redis = pytest.importorskip("redis", reason="redis-py is not installed (the [redis] extra)")
ROOT = Path(__file__).resolve().parents[2]
PRICE = 0.001
ORGANIC = {"organic": [{"title": "Python 3.14", "link": "https://python.org/", "snippet": "s"}]}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture(autouse=True)
def _empty(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).flushdb()


@pytest.fixture
def provider() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


def settings(provider: LocalServer) -> WebSearchSettings:
    return WebSearchSettings(
        provider="serper", api_keys={"serper": "k-123"}, base_urls={"serper": provider.url},
        prices={"serper": PRICE}, timeout=3.0, max_attempts=2, backoff_base=0.01,
        backoff_max=0.02, time_budget=6.0,
    )  # fmt: skip


def process_cache(url: str, **kw: Any) -> SearchCache:
    """One process's cache: its own first layer, the shared Redis behind it."""
    return SearchCache(shared=RedisSharedCache(SharedCacheSettings(url, **kw)))


async def search(cache: SearchCache, provider: LocalServer, query: str, **kw: Any) -> Any:
    async with WebSearchClient(settings(provider), cache=cache) as client:
        return await client.search(query, hl="en", gl="us", **kw)


def test_a_response_fetched_by_one_process_is_a_hit_for_another(
    redis_url: str, provider: LocalServer
) -> None:
    provider.route("/search", Reply(ORGANIC))
    a, b = process_cache(redis_url), process_cache(redis_url)
    first = asyncio.run(search(a, provider, "python release"))
    second = asyncio.run(search(b, provider, "python release"))
    assert len(provider.hits("/search")) == 1
    assert first.calls == 1 and not first.cache_hit
    assert second.cache_hit and second.calls == 0 and second.cost == 0.0
    assert [r.url for r in second.results] == [r.url for r in first.results]
    assert b.stats().shared_hits == 1 and b.stats().cost_saved == pytest.approx(PRICE)
    shared = asyncio.run(b.shared.stats())  # type: ignore[union-attr]
    assert shared["hits"] == 1 and shared["misses"] == 1


def test_concurrent_identical_searches_in_four_processes_make_one_call(
    redis_url: str, provider: LocalServer
) -> None:
    provider.route("/search", Reply(ORGANIC, delay=0.4))
    caches = [process_cache(redis_url) for _ in range(4)]

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(search(c, provider, "same question") for c in caches))

    responses = asyncio.run(all_at_once())
    assert len(provider.hits("/search")) == 1
    assert sum(r.calls for r in responses) == 1
    assert sum(c.stats().shared_coalesced for c in caches) == 3


def test_real_processes_share_one_upstream_call(
    redis_url: str, provider: LocalServer, tmp_path: Path
) -> None:
    provider.route("/search", Reply(ORGANIC, delay=0.5))
    script = (
        "import asyncio, json\n"
        "from tools.websearch import WebSearchClient, WebSearchSettings\n"
        "from tools.websearch.cache import cache_from_env\n"
        "async def main():\n"
        "    s = WebSearchSettings.from_env(provider='serper')\n"
        "    async with WebSearchClient(s, cache=cache_from_env()) as c:\n"
        "        r = await c.search('shared across processes', hl='en', gl='us')\n"
        "    print(json.dumps({'calls': r.calls, 'hit': r.cache_hit}))\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "HYBRID_RAG_REDIS_URL": redis_url, "SERPER_API_KEY": "k-123",
           "SERPER_BASE_URL": provider.url, "PYTHONPATH": str(ROOT)}  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            cwd=tmp_path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert len(provider.hits("/search")) == 1, results
    assert sum(r["calls"] for r in results) == 1 and sum(r["hit"] for r in results) == 3


def test_failures_are_never_shared(redis_url: str, provider: LocalServer) -> None:
    provider.route("/search", Reply({"message": "boom"}, status=500))
    for cache in (process_cache(redis_url), process_cache(redis_url)):
        with pytest.raises(WebSearchError):
            asyncio.run(search(cache, provider, "failing"))
    assert len(provider.hits("/search")) == 4  # 2 attempts in each process, nothing cached
    client = redis.Redis.from_url(redis_url)
    assert not client.keys("hybrid-rag:search:r:*") and not client.keys("hybrid-rag:search:l:*")


def test_news_is_shared_for_the_shorter_ttl(redis_url: str, provider: LocalServer) -> None:
    provider.route("/news", Reply({"news": [{"title": "n", "link": "https://n.example/"}]}))
    provider.route("/search", Reply(ORGANIC))
    cache = SearchCache(
        news_ttl=7, ttl=600, shared=RedisSharedCache(SharedCacheSettings(redis_url))
    )
    asyncio.run(search(cache, provider, "today", news=True))
    asyncio.run(search(cache, provider, "evergreen"))
    client = redis.Redis.from_url(redis_url)
    ttls = sorted(client.pttl(k) for k in client.keys("hybrid-rag:search:r:*"))
    assert len(ttls) == 2 and 0 < ttls[0] <= 7000 and 7000 < ttls[1] <= 600_000


def test_a_crashed_holder_blocks_the_others_only_until_its_lock_expires(
    redis_url: str, provider: LocalServer
) -> None:
    from tools.websearch.cache import cache_key
    from tools.websearch.snippets import build_params

    provider.route("/search", Reply(ORGANIC))
    key = cache_key("serper", build_params("orphaned", hl="en", gl="us", num=10))
    # A holder that took the lock and died: nobody renews it, it expires in 0.8 s.
    redis.Redis.from_url(redis_url).set(f"hybrid-rag:search:l:{key}", "dead", px=800)
    started = time.monotonic()
    response = asyncio.run(search(process_cache(redis_url), provider, "orphaned"))
    elapsed = time.monotonic() - started
    assert response.calls == 1 and len(provider.hits("/search")) == 1
    assert 0.6 <= elapsed < 5.0, elapsed


def test_a_long_fetch_keeps_its_lock_alive(redis_url: str, provider: LocalServer) -> None:
    # The holder renews its 0.3 s lock while the provider takes 1.2 s: the others wait for
    # its answer instead of calling the provider again.
    provider.route("/search", Reply(ORGANIC, delay=1.2))
    caches = [process_cache(redis_url, lock_ttl=0.3) for _ in range(3)]

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(search(c, provider, "slow provider") for c in caches))

    asyncio.run(all_at_once())
    assert len(provider.hits("/search")) == 1


def test_redis_killed_mid_session_degrades_to_the_process_cache_with_one_warning(
    provider: LocalServer, tmp_path: Path
) -> None:
    provider.route("/search", Reply(ORGANIC))
    server = RedisServer(tmp_path / "redis").start()
    cache = process_cache(server.url)
    try:
        assert not asyncio.run(search(cache, provider, "before")).warnings
        server.kill()
        started = time.monotonic()
        degraded = asyncio.run(search(cache, provider, "after"))
        again = asyncio.run(search(cache, provider, "after, another query"))
        repeat = asyncio.run(search(cache, provider, "after"))
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    notes = [w for w in degraded.warnings if "shared search cache" in w]
    assert len(notes) == 1 and server.url.split("/0")[0].split("//")[1] in notes[0], notes
    assert "in-process cache" in notes[0]
    assert not [w for w in again.warnings if "shared search cache" in w]  # warned once
    assert repeat.cache_hit and repeat.calls == 0  # the first layer still works
    # One upstream call per key: before, after, after-another; the repeat was a hit.
    assert len(provider.hits("/search")) == 3
    assert elapsed < 5.0, elapsed
    assert cache.stats().shared_unavailable == 2


def test_a_redis_that_never_answers_costs_one_short_timeout(provider: LocalServer) -> None:
    provider.route("/search", Reply(ORGANIC))
    with socket.socket() as hole:  # accepts connections, never replies
        hole.bind(("127.0.0.1", 0))
        hole.listen(8)
        stop = threading.Event()
        conns: list[socket.socket] = []

        def accept() -> None:
            hole.settimeout(0.2)
            while not stop.is_set():
                try:
                    conns.append(hole.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        url = f"redis://127.0.0.1:{hole.getsockname()[1]}/0"
        cache = process_cache(url, op_timeout=0.3)
        started = time.monotonic()
        response = asyncio.run(search(cache, provider, "black hole"))
        elapsed = time.monotonic() - started
        stop.set()
        thread.join(timeout=5)
        for c in conns:
            c.close()
    assert response.calls == 1 and any("shared search cache" in w for w in response.warnings)
    assert elapsed < 3.0, elapsed


def test_redis_url_is_checked_and_its_password_never_shown(
    monkeypatch: pytest.MonkeyPatch, provider: LocalServer
) -> None:
    monkeypatch.setenv("HYBRID_RAG_REDIS_URL", "http://127.0.0.1:6379")
    with pytest.raises(ConfigError, match="HYBRID_RAG_REDIS_URL must look like redis://"):
        cache_from_env()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connection refused
    monkeypatch.setenv("HYBRID_RAG_REDIS_URL", f"redis://user:s3cret-pw@127.0.0.1:{port}/0")
    provider.route("/search", Reply(ORGANIC))
    response = asyncio.run(search(cache_from_env(), provider, "refused"))
    notes = [w for w in response.warnings if "shared search cache" in w]
    assert notes and all("s3cret-pw" not in n and "user" not in n for n in notes), notes


def test_a_graph_run_with_redis_gone_answers_and_says_so(
    provider: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph import Context, build_graph
    from tools.websearch import set_default_cache

    provider.route("/search", Reply(ORGANIC))
    monkeypatch.setenv("SERPER_API_KEY", "k-123")
    monkeypatch.setenv("SERPER_BASE_URL", provider.url)
    server = RedisServer(tmp_path / "redis").start()
    set_default_cache(process_cache(server.url))
    server.kill()  # Redis dies before the run reaches its web search
    try:
        out = asyncio.run(
            build_graph().ainvoke(
                {"question": "What is the latest Python release? Latest news today."},
                context=Context(data_home=str(tmp_path / "home"), search_provider="serper"),
            )
        )
    finally:
        set_default_cache(None)
    assert out["answer"] and out["search_calls"] >= 1
    assert any("shared search cache" in w for w in out["warnings"]), out["warnings"]
