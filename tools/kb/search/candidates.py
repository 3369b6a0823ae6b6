"""What the components of a search pass down: the candidates and the results.

The retrievers (``tools.kb.search.retrievers``) find a :class:`CandidatePool` per query
(each retriever's top ``n``, with both raw scores for every candidate in hybrid mode);
the joiner (``tools.kb.search.joiner``) gives each candidate one ordering score; the
ranker (``tools.kb.search.ranker``) turns the best into :class:`RetrievedChunk` results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

SearchMode = Literal["hybrid", "bm25", "vector"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "bm25", "vector")


@dataclass(frozen=True)
class RetrievedChunk:
    """One search result. ``relevance`` is in [0, 1], higher is better."""

    chunk_id: str
    doc_id: str
    source: str
    heading: str
    text: str
    chunk_index: int
    total_chunks: int
    relevance: float
    fused_score: float
    vector_score: float | None  # cosine similarity, None when not computed
    bm25_score: float
    vector_relevance: float
    bm25_relevance: float
    metadata: dict[str, Any] = field(default_factory=dict)


class BM25Score(NamedTuple):
    raw: float  # the BM25 score
    share: float  # raw / the query's best attainable score, clamped to [0, 1]


@dataclass(frozen=True)
class CandidatePool:
    """What one query's retrievers found; fusion and evidence are computed from it."""

    ids: list[str]  # every candidate, vector side first
    cosine: dict[str, float]  # chunk id -> cosine (all candidates in hybrid mode)
    bm25: dict[str, BM25Score]  # all candidates in hybrid mode
    vector_found: dict[str, float]  # the vector side's own top n (cosine)
    bm25_found: dict[str, float]  # the BM25 side's own top n (raw)
