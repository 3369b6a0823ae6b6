"""Async web-search client: providers, retries, failover, cache and multi-query.

One ``httpx.AsyncClient`` is opened in ``__aenter__`` and closed in
``__aexit__``; every request gets its own timeout, bounded by the remaining
time budget of the provider attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import httpx

from tools.errors import InputError

from .adapters import ddgs_search
from .cache import SearchCache, cache_key, default_cache
from .dates import iso_now
from .providers import HTTP_PROVIDERS, ParsedPage, Provider, RequestSpec
from .results import merge_ranked, normalise_items
from .snippets import build_params, normalize_query
from .transport import LOG_FILTER, http_once, install_log_filter
from .types import MultiSearchResponse, SearchParams, SearchResponse
from .web_errors import (
    WebSearchError,
    WebSearchFailoverError,
    WebSearchNotConfiguredError,
    WebSearchTimeoutError,
)
from .web_settings import WebSearchSettings

logger = logging.getLogger(__name__)
USER_AGENT = "hybrid-rag-websearch/0.1"

Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]


def all_failed(failures: list[tuple[str, WebSearchError]]) -> Exception:
    """What a search of several queries that all failed raises: the first failure."""
    first = failures[0][1]
    if (
        len(failures) > 1
        and isinstance(first, WebSearchError)
        and not isinstance(first, WebSearchNotConfiguredError)
    ):
        # Several queries failing is not a provider failover: report the first
        # failure once (its own type and provider), with the count.
        first.reason = f"all {len(failures)} queries failed; first: {first.reason}"
        first.redact(())  # re-render the message from the new reason
    return first


def _distinct_queries(queries: Sequence[str], top_k: int) -> list[str]:
    """The queries to search, each once (normalised), or an :class:`InputError`."""
    if isinstance(queries, str):
        raise InputError("search_many() expects a list of queries, not one string")
    unique: dict[str, str] = {}
    for q in queries:
        if isinstance(q, str) and q.strip():
            unique.setdefault(normalize_query(q), " ".join(q.split()))
    if not unique:
        raise InputError("search_many() got no non-empty query")
    if top_k < 1:
        raise InputError(f"invalid top_k {top_k!r}: expected an integer >= 1")
    return list(unique.values())


class WebSearchClient:
    """Search the web through the configured provider(s).

    Use as ``async with WebSearchClient(settings) as client: ...``. ``cache``
    defaults to the process-wide :func:`default_cache`. ``transport``, ``now``,
    ``sleep`` and ``rng`` exist for tests and benchmarks.
    """

    def __init__(
        self,
        settings: WebSearchSettings | None = None,
        *,
        cache: SearchCache | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        now: Clock | None = None,
        sleep: Sleep | None = None,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else WebSearchSettings.from_env()
        self.cache = cache if cache is not None else default_cache()
        self._transport = transport
        self._now: Clock = now or (lambda: datetime.now(UTC))
        self._sleep: Sleep = sleep or asyncio.sleep
        self._rng = rng or random.random
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> WebSearchClient:
        install_log_filter()
        LOG_FILTER.secrets.update(s for s in self.settings.secrets() if s and len(s) >= 4)
        self._http = httpx.AsyncClient(
            transport=self._transport,
            timeout=self.settings.timeout,
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # -- public API ------------------------------------------------------
    async def search(
        self,
        query: str,
        *,
        hl: str | None = None,
        gl: str | None = None,
        page: int = 1,
        num: int = 10,
        news: bool = False,
        provider: str | None = None,
    ) -> SearchResponse:
        """Search one query; fail over along the provider list; use the cache.

        Raises :class:`InputError` for a bad query or parameters,
        :class:`WebSearchNotConfiguredError` when no provider is usable, and a
        :class:`WebSearchError` subclass when every provider failed (unless a
        stale cached answer can be served in stale-if-error mode).
        """
        params = build_params(query, hl=hl, gl=gl, page=page, num=num, news=news)
        settings = self.settings
        if provider is not None and provider != settings.provider:
            settings = dataclasses.replace(settings, provider=provider)
        chain = settings.chain()
        if not chain:
            raise WebSearchNotConfiguredError(settings.provider, settings.missing_message())
        warnings = [
            f"{n}: not configured ({settings.missing_message()})" for n in settings.skipped()
        ]
        errors: list[WebSearchError] = []
        for name in chain:
            key = cache_key(name, params)
            try:
                response, _ = await self.cache.get_or_fetch(
                    key, functools.partial(self._fetch, name, params), price=settings.price(name)
                )
            except WebSearchError as exc:
                exc.redact(self.settings.secrets())
                errors.append(exc)
                logger.warning("web search provider failed: %s", exc)
                continue
            failed = [f"{e.provider} failed: {type(e).__name__}: {e.reason}" for e in errors]
            return dataclasses.replace(
                response,
                calls=response.calls + sum(e.calls for e in errors),
                warnings=(*warnings, *failed, *response.warnings),
                failed_providers=tuple(e.provider for e in errors),
            )
        for name in chain:
            stale = self.cache.get_stale(cache_key(name, params))
            if stale is not None:
                failed = [f"{e.provider} failed: {type(e).__name__}: {e.reason}" for e in errors]
                logger.warning("serving a stale cached result from %s after failures", name)
                return dataclasses.replace(
                    stale,
                    calls=sum(e.calls for e in errors),
                    warnings=(*warnings, *failed, f"stale result from cache ({name})"),
                    failed_providers=tuple(e.provider for e in errors),
                )
        raise errors[0] if len(errors) == 1 else WebSearchFailoverError(errors)

    async def search_many(
        self,
        queries: Sequence[str],
        *,
        hl: str | None = None,
        gl: str | None = None,
        num: int = 10,
        top_k: int = 10,
        news: bool = False,
        provider: str | None = None,
        max_concurrency: int | None = None,
    ) -> MultiSearchResponse:
        """Search several queries concurrently, merge, dedup by URL, re-rank, cut to ``top_k``.

        Per-query failures become warnings; if every query fails the first
        error is raised (all errors are in its ``errors`` when there are several).
        """
        texts = _distinct_queries(queries, top_k)
        semaphore = asyncio.Semaphore(max_concurrency or self.settings.max_concurrency)

        async def one(q: str) -> SearchResponse:
            async with semaphore:
                return await self.search(q, hl=hl, gl=gl, num=num, news=news, provider=provider)

        outcomes = await asyncio.gather(*(one(q) for q in texts), return_exceptions=True)
        responses: list[SearchResponse] = []
        failures: list[tuple[str, WebSearchError]] = []
        for q, outcome in zip(texts, outcomes, strict=True):
            if isinstance(outcome, WebSearchError | InputError):
                failures.append((q, outcome))  # type: ignore[arg-type]
            elif isinstance(outcome, BaseException):
                raise outcome  # a bug, not a provider failure
            else:
                responses.append(outcome)
        if not responses:
            raise all_failed(failures)
        warnings = [f"query {q!r} failed: {e}" for q, e in failures]
        for r in responses:
            warnings.extend(f"query {r.params.query!r}: {w}" for w in r.warnings)
        return MultiSearchResponse(
            results=merge_ranked([r.results for r in responses], top_k),
            queries=tuple(texts),
            responses=tuple(responses),
            calls=sum(r.calls for r in responses)
            + sum(e.calls for _, e in failures if isinstance(e, WebSearchError)),
            cost=round(sum(r.cost for r in responses), 6),
            warnings=tuple(warnings),
            failed_queries=tuple(q for q, _ in failures),
            fetched_at=iso_now(self._now()),
        )

    # -- one provider ----------------------------------------------------
    async def _fetch(self, name: str, params: SearchParams) -> SearchResponse:
        fetched_at = self._now()
        if name == "ddgs":
            timeout = self.settings.timeout

            async def attempt(remaining: float) -> ParsedPage:
                wait = min(timeout, remaining)
                try:
                    return await asyncio.wait_for(
                        asyncio.to_thread(ddgs_search, params, wait), wait
                    )
                except TimeoutError:
                    raise WebSearchTimeoutError(
                        "ddgs", f"no answer within {wait:.1f}s", retryable=True
                    ) from None

            page, calls = await self._with_retries(name, attempt)
        else:
            provider = HTTP_PROVIDERS[name]
            spec = provider.build(
                params, self.settings.api_keys.get(name), self.settings.base_url(name)
            )
            page, calls = await self._with_retries(
                name, lambda remaining: self._http_once(provider, spec, params, remaining)
            )
        results = normalise_items(
            page.items,
            provider=name,
            fetched_at=fetched_at,
            snippet_chars=self.settings.snippet_chars,
            num=params.num,
        )
        return SearchResponse(
            results=results,
            provider=name,
            params=params,
            calls=calls,
            # Providers bill answered requests; failed attempts are counted in
            # ``calls`` but assumed free.
            cost=self.settings.price(name),
            cache_hit=False,
            stale=False,
            warnings=tuple(page.warnings),
            fetched_at=iso_now(fetched_at),
            partial=page.partial,
        )

    async def _with_retries(
        self, name: str, attempt_fn: Callable[[float], Awaitable[ParsedPage]]
    ) -> tuple[ParsedPage, int]:
        """Run ``attempt_fn`` with exponential backoff + jitter within the time budget."""
        s = self.settings
        deadline = time.monotonic() + s.time_budget
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            self.cache.record_upstream(1)
            try:
                if remaining <= 0:
                    raise WebSearchTimeoutError(name, f"time budget of {s.time_budget:g}s spent")
                return await attempt_fn(remaining), attempt
            except WebSearchError as exc:
                exc.calls = attempt
                exc.redact(s.secrets())
                if not exc.retryable or attempt >= s.max_attempts:
                    if exc.retryable:
                        exc.reason += f" (gave up after {attempt} attempts)"
                        exc.redact(())
                    raise
                if exc.retry_after is not None:
                    delay = min(exc.retry_after, s.retry_after_cap)
                else:
                    step = min(s.backoff_max, s.backoff_base * 2 ** (attempt - 1))
                    delay = step / 2 + self._rng() * step / 2  # "equal jitter"
                if time.monotonic() + delay >= deadline:
                    exc.reason += f" (retry in {delay:.1f}s would exceed the time budget)"
                    exc.redact(())
                    raise
                logger.info(
                    "web search %s attempt %d failed (%s); retrying in %.2fs",
                    name, attempt, exc.reason, delay,
                )  # fmt: skip
                await self._sleep(delay)

    async def _http_once(
        self, provider: Provider, spec: RequestSpec, params: SearchParams, remaining: float
    ) -> ParsedPage:
        if self._http is None:
            raise RuntimeError("WebSearchClient is not open: use 'async with WebSearchClient(...)'")
        return await http_once(
            self._http,
            provider,
            spec,
            params,
            timeout=min(self.settings.timeout, remaining),
            secrets=self.settings.secrets(),
            now=self._now,
        )


def _run_sync(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "search_sync() cannot run inside an event loop; await WebSearchClient.search()"
        )

    async def main() -> Any:
        return await coro_fn()

    return asyncio.run(main())


def search_sync(
    query: str,
    *,
    settings: WebSearchSettings | None = None,
    cache: SearchCache | None = None,
    hl: str | None = None,
    gl: str | None = None,
    page: int = 1,
    num: int = 10,
    news: bool = False,
    provider: str | None = None,
) -> SearchResponse:
    """Blocking :meth:`WebSearchClient.search` for synchronous callers (CLI, scripts)."""

    async def run() -> SearchResponse:
        async with WebSearchClient(settings, cache=cache) as client:
            return await client.search(
                query, hl=hl, gl=gl, page=page, num=num, news=news, provider=provider
            )

    result: SearchResponse = _run_sync(run)
    return result
