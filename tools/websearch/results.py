"""From raw provider rows to ranked, deduplicated :class:`WebResult` tuples."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime

from tools.kb.search.fusion import RRF_K

from .dates import iso_now, parse_date
from .providers import RawItem
from .snippets import clean_html, clean_snippet
from .types import WebResult
from .urls import normalize_url, site_of

_KIND_ORDER = {"organic": 0, "top_story": 1, "news": 2}


def normalise_items(
    items: Iterable[RawItem],
    *,
    provider: str,
    fetched_at: datetime,
    snippet_chars: int,
    num: int,
) -> tuple[WebResult, ...]:
    """Clean, date, deduplicate and rank one provider page.

    Organic results come first in provider order, then top stories, then news.
    ``num`` bounds each kind separately: it is the organic page size providers
    understand, and top stories (the freshest rows) must not be crowded out.
    A duplicate URL keeps the better-ranked row but borrows a missing date.
    """
    fetched = iso_now(fetched_at)
    ordered = sorted(items, key=lambda i: (_KIND_ORDER[i.kind], i.position))
    kept: dict[str, WebResult] = {}
    per_kind: dict[str, int] = {}
    for item in ordered:
        url = normalize_url(item.url)
        if not url.startswith(("http://", "https://")):
            continue
        date = parse_date(item.date, fetched_at)
        if url in kept:
            if kept[url].published_at is None and date is not None:
                kept[url] = dataclasses.replace(kept[url], published_at=date)
            continue
        if per_kind.get(item.kind, 0) >= num:
            continue
        per_kind[item.kind] = per_kind.get(item.kind, 0) + 1
        kept[url] = WebResult(
            title=clean_html(item.title) or site_of(url) or url,
            url=url,
            snippet=clean_snippet(item.snippet, snippet_chars),
            published_at=date,
            source=clean_html(item.source) or site_of(url),
            provider=provider,
            rank=len(kept) + 1,
            kind=item.kind,
            fetched_at=fetched,
        )
    return tuple(kept.values())


def merge_ranked(result_lists: Sequence[Sequence[WebResult]], top_k: int) -> tuple[WebResult, ...]:
    """Merge several ranked lists: dedup by URL, re-rank by reciprocal rank fusion.

    A URL found by several queries scores the sum of ``1 / (RRF_K + rank)``, so
    agreement between queries lifts it; the copy with the best rank is kept.
    Ties keep the better original rank, then first-seen order.
    """
    best: dict[str, WebResult] = {}
    score: dict[str, float] = {}
    order: dict[str, int] = {}
    for results in result_lists:
        for r in results:
            score[r.url] = score.get(r.url, 0.0) + 1.0 / (RRF_K + r.rank)
            order.setdefault(r.url, len(order))
            if r.url not in best or r.rank < best[r.url].rank:
                prev = best.get(r.url)
                date = r.published_at or (prev.published_at if prev else None)
                best[r.url] = dataclasses.replace(r, published_at=date)
            elif best[r.url].published_at is None and r.published_at:
                best[r.url] = dataclasses.replace(best[r.url], published_at=r.published_at)
    urls = sorted(best, key=lambda u: (-score[u], best[u].rank, order[u]))[:top_k]
    return tuple(dataclasses.replace(best[u], rank=i) for i, u in enumerate(urls, start=1))
