"""The second cache layer: search responses shared by processes through Redis.

Replicas of the server (and CLI processes) each keep their in-process cache as the first
layer; this layer makes a response fetched by one of them a hit for all, and makes
concurrent identical searches across processes cost one upstream call:

* the same key as the in-process cache (``tools.websearch.cache.cache_key``) under
  ``<prefix>r:<key>``, stored with the same TTL (shorter for news), failures never stored;
* single-flight: the process that wins ``SET <prefix>l:<key> NX PX`` fetches; the lock
  expires after ``lock_ttl`` seconds unless its holder renews it while it is fetching, so
  a crashed holder blocks the others for at most ``lock_ttl``; the others poll for the
  value (bounded by ``wait_max``) and fetch themselves if it never comes;
* Redis down or slow (every operation is time-limited): the search goes on with the
  in-process cache and the response carries one warning; the layer is not asked again
  for ``cooldown`` seconds, so an outage costs one timeout, not one per query.

Hits, joined flights and saved cost are also counted in Redis (``<prefix>stats``), so
``hybrid-rag stats`` reports them across every process that shares the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from tools.errors import ConfigError

from .types import SearchParams, SearchResponse, WebResult

log = logging.getLogger("hybrid_rag.websearch")
SharedOutcome = Literal["hit", "coalesced", "miss", "unavailable"]

# Compare-and-delete / compare-and-extend: only the holder's token may touch its lock.
_RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
_RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
)


class SharedCacheUnavailable(Exception):
    """Redis did not answer in time or refused; the caller continues without it."""


@dataclass(frozen=True, slots=True)
class SharedCacheSettings:
    url: str
    prefix: str = "hybrid-rag:search:"
    op_timeout: float = 0.5  # seconds per Redis operation: a slow Redis must not slow search
    lock_ttl: float = 5.0  # a crashed holder blocks the others at most this long
    wait_max: float = 60.0  # longest wait for another process's fetch (> search time budget)
    poll: float = 0.05
    cooldown: float = 30.0  # after a failure, Redis is not asked again for this long

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("redis", "rediss", "unix") or not (parts.hostname or parts.path):
            raise ConfigError(
                f"HYBRID_RAG_REDIS_URL must look like redis://host:6379/0, got {self.where!r}"
            )

    @property
    def where(self) -> str:
        """The URL without credentials, for messages and logs."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path if parts.scheme == 'unix' else ''}"


def encode(response: SearchResponse) -> str:
    return json.dumps(asdict(response), ensure_ascii=False)


def decode(raw: str | bytes) -> SearchResponse:
    data: dict[str, Any] = json.loads(raw)
    return SearchResponse(
        results=tuple(WebResult(**r) for r in data["results"]),
        provider=data["provider"],
        params=SearchParams(**data["params"]),
        calls=int(data["calls"]),
        cost=float(data["cost"]),
        cache_hit=bool(data["cache_hit"]),
        stale=bool(data["stale"]),
        warnings=tuple(data["warnings"]),
        fetched_at=data["fetched_at"],
        partial=bool(data.get("partial", False)),
        coalesced=bool(data.get("coalesced", False)),
        failed_providers=tuple(data.get("failed_providers", ())),
    )


class RedisSharedCache:
    """The Redis layer; one instance per process, one connection pool per event loop."""

    def __init__(
        self, settings: SharedCacheSettings, *, timer: Callable[[], float] = time.monotonic
    ):
        self.settings = settings
        self._timer = timer
        self._down_until = 0.0
        # Connections belong to the event loop that opened them (CLI runs, tests and the
        # server each have their own loop).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def available(self) -> bool:
        return self._timer() >= self._down_until

    def _client(self) -> Any:
        import redis.asyncio as aioredis  # optional dependency: pip install 'hybrid-rag[redis]'
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = aioredis.Redis.from_url(
                self.settings.url,
                socket_timeout=self.settings.op_timeout,
                socket_connect_timeout=self.settings.op_timeout,
                retry=Retry(NoBackoff(), 0),  # no hidden retries: the op timeout is the bound
            )
            self._clients[loop] = client
        return client

    async def _op(self, what: str, call: Callable[[Any], Awaitable[Any]]) -> Any:
        import redis.exceptions

        try:
            return await asyncio.wait_for(call(self._client()), self.settings.op_timeout * 2)
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            self._down_until = self._timer() + self.settings.cooldown
            reason = f"{type(exc).__name__}: {exc}".replace(self.settings.url, self.settings.where)
            log.warning(
                "shared search cache at %s unavailable during %s (%s); using the in-process "
                "cache for %.0f s",
                self.settings.where,
                what,
                reason,
                self.settings.cooldown,
            )
            raise SharedCacheUnavailable(
                f"shared search cache at {self.settings.where} unavailable ({type(exc).__name__}); "
                "the in-process cache was used"
            ) from exc

    async def get_or_fetch(
        self,
        key: str,
        fetch: Callable[[], Awaitable[SearchResponse]],
        *,
        ttl_for: Callable[[SearchResponse], float],
        cacheable: Callable[[SearchResponse], bool],
        price: float,
    ) -> tuple[SearchResponse, SharedOutcome, str | None]:
        """``(response, outcome, warning)``: a shared hit, another process's flight, our
        own fetch, or (Redis unavailable) a plain fetch with the warning to report."""
        if not self.available:
            return await fetch(), "unavailable", None  # warned when the outage began
        try:
            value = await self._op("get", lambda r: r.get(self._value_key(key)))
            if value is not None:
                await self._count("hits", price)
                return decode(value), "hit", None
            return await self._single_flight(key, fetch, ttl_for, cacheable, price)
        except SharedCacheUnavailable as exc:
            return await fetch(), "unavailable", str(exc)

    async def _single_flight(
        self,
        key: str,
        fetch: Callable[[], Awaitable[SearchResponse]],
        ttl_for: Callable[[SearchResponse], float],
        cacheable: Callable[[SearchResponse], bool],
        price: float,
    ) -> tuple[SearchResponse, SharedOutcome, str | None]:
        s = self.settings
        lock, token = self._lock_key(key), uuid.uuid4().hex
        deadline = self._timer() + s.wait_max
        while self._timer() < deadline:  # bounded by wait_max
            got = await self._op(
                "lock", lambda r: r.set(lock, token, nx=True, px=int(s.lock_ttl * 1000))
            )
            if got:
                # The previous holder may have stored its value and unlocked between our
                # last look and this lock: look once more before paying for the call.
                value = await self._op("get", lambda r: r.get(self._value_key(key)))
                if value is not None:
                    await self._op("unlock", lambda r: r.eval(_RELEASE, 1, lock, token))
                    await self._count("coalesced", price)
                    return decode(value), "coalesced", None
                return await self._lead(key, lock, token, fetch, ttl_for, cacheable)
            # Another process is fetching: wait for its value or for its lock to go.
            while self._timer() < deadline:
                await asyncio.sleep(s.poll)
                value = await self._op("wait", lambda r: r.get(self._value_key(key)))
                if value is not None:
                    await self._count("coalesced", price)
                    return decode(value), "coalesced", None
                if not await self._op("wait", lambda r: r.exists(lock)):
                    break  # it failed (nothing cached) or crashed: try to lead
        return await fetch(), "miss", None

    async def _lead(
        self,
        key: str,
        lock: str,
        token: str,
        fetch: Callable[[], Awaitable[SearchResponse]],
        ttl_for: Callable[[SearchResponse], float],
        cacheable: Callable[[SearchResponse], bool],
    ) -> tuple[SearchResponse, SharedOutcome, str | None]:
        renew = asyncio.create_task(self._renew(lock, token))
        warning: str | None = None
        try:
            response = await fetch()
            await self._count("misses", 0.0)
            if cacheable(response):
                ttl_ms = max(1, int(ttl_for(response) * 1000))
                try:
                    await self._op(
                        "store", lambda r: r.set(self._value_key(key), encode(response), px=ttl_ms)
                    )
                except SharedCacheUnavailable as exc:
                    warning = str(exc)
            return response, "miss", warning
        finally:
            renew.cancel()
            with contextlib.suppress(asyncio.CancelledError, SharedCacheUnavailable):
                await renew
            with contextlib.suppress(SharedCacheUnavailable):
                await self._op("unlock", lambda r: r.eval(_RELEASE, 1, lock, token))

    async def _renew(self, lock: str, token: str) -> None:
        """Keep our lock alive while we fetch; a crash stops this and the lock expires."""
        ttl_ms = int(self.settings.lock_ttl * 1000)
        while True:
            await asyncio.sleep(self.settings.lock_ttl / 3)
            await self._op("renew", lambda r: r.eval(_RENEW, 1, lock, token, ttl_ms))

    async def _count(self, what: str, price: float) -> None:
        stats = self.settings.prefix + "stats"

        async def write(r: Any) -> None:
            pipe = r.pipeline(transaction=False)
            pipe.hincrby(stats, what, 1)
            if price:
                pipe.hincrbyfloat(stats, "cost_saved", price)
            await pipe.execute()

        with contextlib.suppress(SharedCacheUnavailable):  # counters are best effort
            await self._op("count", write)

    async def stats(self) -> dict[str, float]:
        """Counters of every process sharing this cache (raises when Redis is down)."""
        raw = await self._op("stats", lambda r: r.hgetall(self.settings.prefix + "stats"))
        out = {k.decode() if isinstance(k, bytes) else str(k): float(v) for k, v in raw.items()}
        counts: dict[str, float] = {n: int(out.get(n, 0)) for n in ("hits", "coalesced", "misses")}
        return {**counts, "cost_saved": round(out.get("cost_saved", 0.0), 6)}

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def _value_key(self, key: str) -> str:
        return f"{self.settings.prefix}r:{key}"

    def _lock_key(self, key: str) -> str:
        return f"{self.settings.prefix}l:{key}"
