"""Search-result cache with single-flight and optional stale-if-error.

* Storage: ``cachetools.TLRUCache`` (the per-item-TTL sibling of ``TTLCache``)
  so responses holding news or top stories can expire sooner (120 s) than plain
  web results (600 s) inside one size-bounded (5000) store.
* Thread- and asyncio-safe: every cache operation runs under one
  ``threading.Lock``; nothing awaits while holding it.
* Single-flight: the first request for a key becomes the leader and registers
  an ``asyncio.Future``; identical concurrent requests on the same event loop
  await that future instead of calling the provider.
* Failures and partial responses are never stored.
* Stale-if-error: every stored response is also kept in a bounded LRU "stale"
  store; when the provider fails, an expired copy can be served, marked stale.
* Shared layer (optional, ``HYBRID_RAG_REDIS_URL``): a miss here asks Redis before the
  provider, so processes share hits and single-flight (``tools.websearch.shared_cache``).

One :func:`default_cache` instance per process lets the graph and the agent tool
share hits; tests and callers can inject their own :class:`SearchCache`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib.util
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from cachetools import LRUCache, TLRUCache

from tools.errors import ConfigError

from .shared_cache import RedisSharedCache, SharedCacheSettings
from .snippets import normalize_query
from .types import SearchParams, SearchResponse

Timer = Callable[[], float]
Outcome = Literal["hit", "miss", "coalesced"]


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    coalesced: int
    upstream_calls: int
    stale_served: int
    cost_saved: float
    size: int
    shared_hits: int = 0  # answered by another process through the shared layer
    shared_coalesced: int = 0  # joined another process's in-flight search
    shared_unavailable: int = 0  # searches made while the shared layer was down

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses + self.coalesced
        return (self.hits + self.coalesced) / total if total else 0.0


@dataclass(frozen=True, slots=True)
class _Entry:
    response: SearchResponse
    ttl: float
    stored_at: float


def cache_key(provider: str, params: SearchParams) -> str:
    """Stable hash of everything that changes the provider's answer."""
    material = json.dumps(
        [provider, normalize_query(params.query), params.hl.lower(), params.gl.lower(),
         params.page, params.num, params.news],
        ensure_ascii=False,
    )  # fmt: skip
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class SearchCache:
    """Process-wide search cache; see the module docstring."""

    def __init__(
        self,
        *,
        maxsize: int = 5000,
        ttl: float = 600.0,
        news_ttl: float = 120.0,
        timer: Timer = time.monotonic,
        stale_if_error: bool = False,
        stale_maxsize: int = 1000,
        stale_max_age: float = 86400.0,
        shared: RedisSharedCache | None = None,
    ) -> None:
        if maxsize < 1 or ttl <= 0 or news_ttl <= 0:
            raise ValueError("cache maxsize, ttl and news_ttl must be positive")
        self.ttl = ttl
        self.news_ttl = news_ttl
        self.timer = timer
        self.stale_if_error = stale_if_error
        self.stale_max_age = stale_max_age
        self._lock = threading.Lock()
        self._store: TLRUCache[str, _Entry] = TLRUCache(
            maxsize, ttu=lambda _k, v, now: now + v.ttl, timer=timer
        )
        self._stale: LRUCache[str, _Entry] = LRUCache(max(1, stale_maxsize))
        self._inflight: dict[str, asyncio.Future[SearchResponse]] = {}
        self._hits = self._misses = self._coalesced = 0
        self._upstream = self._stale_served = 0
        self._shared_hits = self._shared_coalesced = self._shared_unavailable = 0
        self._cost_saved = 0.0
        self.shared = shared

    # -- plain operations ------------------------------------------------
    def ttl_for(self, response: SearchResponse) -> float:
        fresh = response.params.news or response.has_news
        return self.news_ttl if fresh else self.ttl

    @staticmethod
    def cacheable(response: SearchResponse) -> bool:
        return not (response.partial or response.stale)

    def get(self, key: str) -> SearchResponse | None:
        with self._lock:
            entry = self._store.get(key)
        return None if entry is None else entry.response

    def put(self, key: str, response: SearchResponse) -> bool:
        """Store ``response`` unless it is partial or stale; return whether stored."""
        if not self.cacheable(response):
            return False
        entry = _Entry(response, self.ttl_for(response), self.timer())
        with self._lock:
            self._store[key] = entry
            if self.stale_if_error:
                self._stale[key] = entry
        return True

    def get_stale(self, key: str) -> SearchResponse | None:
        """An expired (or live) copy for stale-if-error, if enabled and young enough."""
        if not self.stale_if_error:
            return None
        with self._lock:
            entry = self._stale.get(key)
            if entry is None or self.timer() - entry.stored_at > self.stale_max_age:
                return None
            self._stale_served += 1
        return dataclasses.replace(entry.response, stale=True, cache_hit=True, calls=0, cost=0.0)

    def record_upstream(self, calls: int = 1) -> None:
        with self._lock:
            self._upstream += calls

    def clear(self) -> None:
        with self._lock:
            self._store.clear()
            self._stale.clear()

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                hits=self._hits,
                misses=self._misses,
                coalesced=self._coalesced,
                upstream_calls=self._upstream,
                stale_served=self._stale_served,
                cost_saved=round(self._cost_saved, 6),
                size=len(self._store),
                shared_hits=self._shared_hits,
                shared_coalesced=self._shared_coalesced,
                shared_unavailable=self._shared_unavailable,
            )

    # -- cache + single-flight ------------------------------------------
    async def get_or_fetch(
        self,
        key: str,
        fetch: Callable[[], Awaitable[SearchResponse]],
        *,
        price: float = 0.0,
    ) -> tuple[SearchResponse, Outcome]:
        """Return a cached response, join an identical in-flight request, or fetch.

        Hits and joined requests are returned with ``calls=0`` and ``cost=0``;
        their price is added to ``cost_saved``. A failing leader propagates its
        exception to the joined requests; nothing is cached.
        """
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                entry = self._store.get(key)
                if entry is not None:
                    self._hits += 1
                    self._cost_saved += price
                    hit = dataclasses.replace(entry.response, cache_hit=True, calls=0, cost=0.0)
                    return hit, "hit"
                future = self._inflight.get(key)
                # Futures belong to one loop: only join a flight on our own loop.
                leader = future is None or future.done() or future.get_loop() is not loop
                if leader:
                    future = loop.create_future()
                    self._inflight[key] = future
                    self._misses += 1
            assert future is not None
            if leader:
                return await self._lead(key, future, self._shared_fetch(key, fetch, price))
            try:
                shared = await asyncio.shield(future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and not (task and task.cancelling()):
                    continue  # the leader was cancelled, not us: try again
                raise
            with self._lock:
                self._coalesced += 1
                self._cost_saved += price
            joined = dataclasses.replace(shared, cache_hit=True, coalesced=True, calls=0, cost=0.0)
            return joined, "coalesced"

    def _shared_fetch(
        self, key: str, fetch: Callable[[], Awaitable[SearchResponse]], price: float
    ) -> Callable[[], Awaitable[tuple[SearchResponse, Outcome]]]:
        """The leader's fetch: through the shared layer when there is one."""

        async def plain() -> tuple[SearchResponse, Outcome]:
            return await fetch(), "miss"

        shared = self.shared
        if shared is None:
            return plain

        async def through_shared() -> tuple[SearchResponse, Outcome]:
            response, outcome, warning = await shared.get_or_fetch(
                key, fetch, ttl_for=self.ttl_for, cacheable=self.cacheable, price=price
            )
            with self._lock:
                if outcome in ("hit", "coalesced"):
                    self._cost_saved += price
                    if outcome == "hit":
                        self._shared_hits += 1
                    else:
                        self._shared_coalesced += 1
                elif outcome == "unavailable":
                    self._shared_unavailable += 1
            if outcome in ("hit", "coalesced"):
                response = dataclasses.replace(
                    response, calls=0, cost=0.0, cache_hit=True, coalesced=outcome == "coalesced"
                )
                return response, outcome
            if warning:
                response = dataclasses.replace(response, warnings=(*response.warnings, warning))
            return response, "miss"

        return through_shared

    async def _lead(
        self,
        key: str,
        future: asyncio.Future[SearchResponse],
        fetch: Callable[[], Awaitable[tuple[SearchResponse, Outcome]]],
    ) -> tuple[SearchResponse, Outcome]:
        try:
            response, outcome = await fetch()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: no "never retrieved" noise without joiners
            raise
        else:
            self.put(key, response)
            future.set_result(response)
            return response, outcome
        finally:
            with self._lock:
                if self._inflight.get(key) is future:
                    del self._inflight[key]


_default_cache: SearchCache | None = None
_default_lock = threading.Lock()


def _env_number(name: str, default: float, low: float, high: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low:g} and {high:g}, got {raw}")
    return value


def shared_from_env() -> RedisSharedCache | None:
    """The Redis layer when ``HYBRID_RAG_REDIS_URL`` is set (``WEBSEARCH_REDIS_TIMEOUT``,
    0.5 s per operation; ``WEBSEARCH_REDIS_LOCK_TTL``, 5 s)."""
    url = os.environ.get("HYBRID_RAG_REDIS_URL", "").strip()
    if not url:
        return None
    if importlib.util.find_spec("redis") is None:
        raise ConfigError(
            "HYBRID_RAG_REDIS_URL is set but redis-py is not installed: "
            "pip install 'hybrid-rag[redis]'"
        )
    return RedisSharedCache(
        SharedCacheSettings(
            url,
            op_timeout=_env_number("WEBSEARCH_REDIS_TIMEOUT", 0.5, 0.01, 30.0),
            lock_ttl=_env_number("WEBSEARCH_REDIS_LOCK_TTL", 5.0, 0.1, 600.0),
        )
    )


def cache_from_env() -> SearchCache:
    """A cache sized by ``WEBSEARCH_CACHE_SIZE`` (5000), ``WEBSEARCH_CACHE_TTL`` (600 s),
    ``WEBSEARCH_CACHE_NEWS_TTL`` (120 s) and ``WEBSEARCH_STALE_IF_ERROR`` (0/1), shared
    through Redis when ``HYBRID_RAG_REDIS_URL`` is set."""
    return SearchCache(
        maxsize=int(_env_number("WEBSEARCH_CACHE_SIZE", 5000, 1, 10_000_000)),
        ttl=_env_number("WEBSEARCH_CACHE_TTL", 600.0, 0.0, 86_400.0 * 30),
        news_ttl=_env_number("WEBSEARCH_CACHE_NEWS_TTL", 120.0, 0.0, 86_400.0 * 30),
        stale_if_error=bool(_env_number("WEBSEARCH_STALE_IF_ERROR", 0, 0, 1)),
        shared=shared_from_env(),
    )


def default_cache() -> SearchCache:
    """The process-wide cache shared by every client that does not inject one.

    Built on first use from the environment (see :func:`cache_from_env`).
    """
    global _default_cache
    with _default_lock:
        if _default_cache is None:
            _default_cache = cache_from_env()
        return _default_cache


def set_default_cache(cache: SearchCache | None) -> None:
    """Replace (or with ``None`` reset) the process-wide cache, e.g. to configure TTLs."""
    global _default_cache
    with _default_lock:
        _default_cache = cache
