"""Normalised web-search data types shared by every provider."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ResultKind = Literal["organic", "news", "top_story"]


@dataclass(frozen=True, slots=True)
class WebResult:
    """One search hit, identical in shape whatever the provider.

    ``url`` is normalised (see :func:`tools.websearch.urls.normalize_url`) so it
    doubles as the deduplication / citation key. Dates are aware ISO-8601 (UTC).
    """

    title: str
    url: str
    snippet: str
    published_at: str | None
    source: str
    provider: str
    rank: int
    kind: ResultKind
    fetched_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SearchParams:
    """Validated request parameters (see :func:`tools.websearch.snippets.build_params`)."""

    query: str
    hl: str
    gl: str
    page: int = 1
    num: int = 10
    news: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SearchResponse:
    """Results of one query plus how they were obtained and what they cost.

    ``calls`` counts upstream HTTP requests made for this response (retries and
    failed failover providers included); ``cost`` is the estimated spend in USD
    (cache hits and coalesced requests are free). ``stale`` marks an expired
    cache entry served because the provider failed. ``partial`` marks a response
    where the provider reported a partial outage; such responses are not cached.
    """

    results: tuple[WebResult, ...]
    provider: str
    params: SearchParams
    calls: int
    cost: float
    cache_hit: bool
    stale: bool
    warnings: tuple[str, ...]
    fetched_at: str
    partial: bool = False
    coalesced: bool = False
    failed_providers: tuple[str, ...] = field(default=())

    @property
    def has_news(self) -> bool:
        return any(r.kind != "organic" for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class MultiSearchResponse:
    """Merged, deduplicated and re-ranked results of several queries."""

    results: tuple[WebResult, ...]
    queries: tuple[str, ...]
    responses: tuple[SearchResponse, ...]
    calls: int
    cost: float
    warnings: tuple[str, ...]
    failed_queries: tuple[str, ...]
    fetched_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
