"""Cache: TTLs, single-flight, no caching of failures, stale-if-error, multi-query."""

from __future__ import annotations

import asyncio

import pytest

from tools.websearch import (
    SearchCache,
    WebSearchAuthError,
    WebSearchClient,
    WebSearchProviderError,
    default_cache,
)

from .conftest import FakeClock, LocalServer, Reply, load, make_settings


async def test_ttl_expiry_with_injected_clock(
    server: LocalServer, cache: SearchCache, clock: FakeClock
) -> None:
    server.route("/search", Reply(load("searxng.json")))  # has a news row
    server.route("/google/search", Reply(load("serpbase.json")))  # organic only
    settings = make_settings(server, "searxng")
    async with WebSearchClient(settings, cache=cache) as client:
        first = await client.search("Haskell")
        again = await client.search("  haskell  ")  # same normalised query
        assert not first.cache_hit and again.cache_hit
        assert again.calls == 0 and again.cost == 0.0
        assert again.fetched_at == first.fetched_at  # freshness stays visible
        clock.now += 121  # news results expire after 120 s
        assert not (await client.search("haskell")).cache_hit
        organic = await client.search("tokio", provider="serpbase")
        clock.now += 599
        assert (await client.search("tokio", provider="serpbase")).cache_hit
        clock.now += 2
        assert not (await client.search("tokio", provider="serpbase")).cache_hit
    assert not organic.cache_hit
    assert len(server.hits("/search")) == 2
    assert len(server.hits("/google/search")) == 2
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.upstream_calls) == (2, 4, 4)
    assert stats.cost_saved > 0


async def test_key_separates_params(server: LocalServer, cache: SearchCache) -> None:
    server.route("/search", Reply(load("serper.json")))
    async with WebSearchClient(make_settings(server, "serper"), cache=cache) as client:
        await client.search("zig", hl="en", gl="us")
        await client.search("zig", hl="en", gl="gb")
        await client.search("zig", hl="en", gl="us", page=2)
        await client.search("zig", hl="en", gl="us", num=5)
        await client.search("ZIG", hl="en", gl="us")
    assert len(server.hits("/search")) == 4


async def test_single_flight_50_concurrent_identical(server: LocalServer) -> None:
    server.route("/search", Reply(load("serper.json"), delay=0.2))
    cache = SearchCache()
    async with WebSearchClient(make_settings(server, "serper"), cache=cache) as client:
        results = await asyncio.gather(*(client.search("zig language") for _ in range(50)))
    assert len(server.hits("/search")) == 1
    assert sum(r.calls for r in results) == 1
    assert sum(r.coalesced for r in results) == 49
    assert len({r.results for r in results}) == 1
    assert cache.stats().coalesced == 49


async def test_failures_are_not_cached_and_joiners_share_failure(server: LocalServer) -> None:
    server.route("/search", Reply({"message": "Unauthorized."}, status=403, delay=0.1))
    cache = SearchCache()
    async with WebSearchClient(make_settings(server, "serper"), cache=cache) as client:
        outcomes = await asyncio.gather(
            *(client.search("q") for _ in range(5)), return_exceptions=True
        )
        assert all(isinstance(o, WebSearchAuthError) for o in outcomes)
        assert len(server.hits("/search")) == 1
        server.route("/search", Reply(load("serper.json")))
        ok = await client.search("q")
    assert not ok.cache_hit
    assert len(server.hits("/search")) == 2
    assert cache.stats().size == 1


async def test_partial_responses_are_not_cached(server: LocalServer) -> None:
    server.route("/search", Reply(load("searxng_partial.json")))
    cache = SearchCache()
    async with WebSearchClient(make_settings(server, "searxng"), cache=cache) as client:
        await client.search("haskell")
        second = await client.search("haskell")
    assert not second.cache_hit
    assert len(server.hits("/search")) == 2


async def test_stale_if_error(server: LocalServer, clock: FakeClock) -> None:
    cache = SearchCache(timer=clock, stale_if_error=True)
    server.route("/search", Reply(load("serper.json")))
    settings = make_settings(server, "serper", max_attempts=1)
    async with WebSearchClient(settings, cache=cache) as client:
        fresh = await client.search("zig")
        clock.now += 10_000  # long expired
        server.route("/search", Reply("down", status=503))
        stale = await client.search("zig")
    assert stale.stale and stale.cache_hit
    assert stale.results == fresh.results
    assert any("stale result" in w for w in stale.warnings)
    assert stale.failed_providers == ("serper",)
    assert cache.stats().stale_served == 1


async def test_no_stale_without_the_mode(server: LocalServer, clock: FakeClock) -> None:
    cache = SearchCache(timer=clock)
    server.route("/search", Reply(load("serper.json")))
    settings = make_settings(server, "serper", max_attempts=1)
    async with WebSearchClient(settings, cache=cache) as client:
        await client.search("zig")
        clock.now += 10_000
        server.route("/search", Reply("down", status=503))
        with pytest.raises(WebSearchProviderError, match="HTTP 503"):
            await client.search("zig")


async def test_cache_shared_across_clients(server: LocalServer) -> None:
    server.route("/search", Reply(load("serper.json")))
    shared = SearchCache()
    async with WebSearchClient(make_settings(server, "serper"), cache=shared) as a:
        await a.search("zig")
    async with WebSearchClient(make_settings(server, "serper"), cache=shared) as b:
        assert (await b.search("zig")).cache_hit
    assert default_cache() is default_cache()
    assert len(server.hits("/search")) == 1


async def test_search_many_merges_dedups_and_collects_failures(server: LocalServer) -> None:
    serper = load("serper.json")
    other = {"organic": [
        {"title": "Zig home", "link": "https://ziglang.org/#top", "position": 1},
        {"title": "Zig learn", "link": "https://ziglang.org/learn/", "position": 2}]}  # fmt: skip
    server.route("/search", Reply(serper), Reply(other), Reply({"x": 1}, status=400))
    settings = make_settings(server, "serper", max_concurrency=1)
    async with WebSearchClient(settings, cache=SearchCache()) as client:
        multi = await client.search_many(["zig a", "zig b", "zig c", "ZIG  a"], top_k=3)
    assert multi.queries == ("zig a", "zig b", "zig c")
    assert multi.failed_queries == ("zig c",)
    assert any("'zig c' failed" in w for w in multi.warnings)
    assert multi.results[0].url == "https://ziglang.org"  # found by both queries
    assert len(multi.results) == 3 and [r.rank for r in multi.results] == [1, 2, 3]
    assert multi.calls == 3


async def test_search_many_all_fail_raises(server: LocalServer) -> None:
    server.route("/search", Reply({"message": "no"}, status=403))
    async with WebSearchClient(make_settings(server, "serper"), cache=SearchCache()) as client:
        with pytest.raises(WebSearchAuthError):
            await client.search_many(["only one"])


def test_default_cache_is_sized_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.errors import ConfigError
    from tools.websearch.cache import cache_from_env

    monkeypatch.setenv("WEBSEARCH_CACHE_SIZE", "10")
    monkeypatch.setenv("WEBSEARCH_CACHE_TTL", "30")
    cache = cache_from_env()
    assert cache._store.maxsize == 10
    assert cache.ttl == 30.0 and cache.news_ttl == 120.0 and not cache.stale_if_error
    monkeypatch.setenv("WEBSEARCH_CACHE_SIZE", "lots")
    with pytest.raises(ConfigError, match="WEBSEARCH_CACHE_SIZE must be a number"):
        cache_from_env()
