"""The HTTP side of a web search: one request and its typed errors, ``Retry-After``,
and the log filter that keeps credentials out of httpx's request lines."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from .providers import ParsedPage, Provider, RequestSpec, error_text
from .types import SearchParams
from .web_errors import (
    WebSearchAuthError,
    WebSearchError,
    WebSearchNetworkError,
    WebSearchProviderError,
    WebSearchRateLimitError,
    WebSearchTimeoutError,
    scrub,
)


class RedactingFilter(logging.Filter):
    """Scrubs credentials from httpx/httpcore log lines.

    httpx logs every request URL at INFO, and SerpApi carries its key in the URL.
    """

    def __init__(self) -> None:
        super().__init__()
        # Every configured secret seen by an open client (a handful of keys per process).
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message, self.secrets)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


LOG_FILTER = RedactingFilter()


def install_log_filter() -> None:
    for name in ("httpx", "httpcore"):
        log = logging.getLogger(name)
        if LOG_FILTER not in log.filters:
            log.addFilter(LOG_FILTER)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


async def http_once(
    http: httpx.AsyncClient,
    provider: Provider,
    spec: RequestSpec,
    params: SearchParams,
    *,
    timeout: float,
    secrets: Sequence[str],
    now: Callable[[], datetime],
) -> ParsedPage:
    """One request to ``provider``, its answer parsed; every failure a typed, redacted
    :class:`WebSearchError` (retryable when a retry could help)."""
    name = provider.name
    try:
        # httpx applies ``timeout`` to each read; a provider dripping its body byte by
        # byte would never trip it. asyncio.timeout bounds the whole exchange.
        async with asyncio.timeout(timeout):
            resp = await http.request(
                spec.method,
                spec.url,
                headers=spec.headers,
                params=spec.params,
                json=spec.json,
                timeout=timeout,
            )
    except (httpx.TimeoutException, TimeoutError):
        raise WebSearchTimeoutError(
            name, f"no answer within {timeout:.1f}s", retryable=True
        ) from None
    except httpx.TransportError as exc:
        # ``from None``: the httpx exception may carry the URL (and a key).
        raise WebSearchNetworkError(
            name, f"{type(exc).__name__}: {exc}", secrets=secrets, retryable=True
        ) from None
    except httpx.HTTPError as exc:
        raise WebSearchProviderError(
            name, f"{type(exc).__name__}: {exc}", secrets=secrets
        ) from None
    status = resp.status_code
    if status >= 400:
        raise status_error(name, resp, secrets, now())
    try:
        body: Any = resp.json()
    except ValueError:
        ctype = resp.headers.get("content-type", "?")
        raise WebSearchProviderError(
            name, f"invalid JSON in HTTP {status} response (content-type {ctype})"
        ) from None
    if not isinstance(body, dict):
        raise WebSearchProviderError(name, f"unexpected JSON {type(body).__name__} body")
    return provider.parse(body, params)


def status_error(
    name: str, resp: httpx.Response, secrets: Sequence[str], now: datetime
) -> WebSearchError:
    """The typed error of an HTTP error status (auth, rate limit, provider failure)."""
    status = resp.status_code
    try:
        detail = error_text(resp.json(), secrets=secrets)
    except ValueError:
        detail = error_text(resp.text, secrets=secrets)
    reason = f"HTTP {status}" + (f": {detail}" if detail else "")
    retry_after = parse_retry_after(resp.headers.get("retry-after"), now)
    if status in (401, 403, 407, 422):
        if name == "searxng" and status == 403:
            reason += " (enable 'json' in search.formats of the SearXNG settings.yml)"
        return WebSearchAuthError(name, reason, secrets=secrets)
    if status == 429:
        return WebSearchRateLimitError(
            name, reason, secrets=secrets, retryable=True, retry_after=retry_after
        )
    if status in (402, 432):  # out of credits / plan limit: retrying will not help
        return WebSearchRateLimitError(name, reason, secrets=secrets)
    if status >= 500 or status == 408:
        return WebSearchProviderError(
            name, reason, secrets=secrets, retryable=True, retry_after=retry_after
        )
    return WebSearchProviderError(name, reason, secrets=secrets)
