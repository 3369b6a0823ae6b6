"""Fusion, the joiner's modes (``tools.kb.search.joiner``): a candidate pool in, its
ordering scores out (ordering only).

:func:`fused_scores` is the entry: it applies the search mode (``vector``, ``bm25``) or,
in hybrid mode, one of the fusion methods below to a pool of ``tools.kb.search.candidates``
(the joiner fuses one pool, or each language's pool before it merges them).

Ordering and confidence are two jobs (see ``tools.kb.search.answerability`` for the
second). The order of hybrid results is a *convex combination of per-query
normalised raw scores* (Bruch et al., "An Analysis of Fusion Functions for
Hybrid Retrieval", TOIS 2023): the BM25 raw score and the cosine similarity of
every candidate either retriever returned are normalised over that candidate
pool and mixed as ``w * vector + (1 - w) * bm25``.

* ``adaptive``: ``minmax`` with a per-query weight (the default): the side whose best
  candidate stands further above its pool (a larger peak z-score) is trusted more,
  ``w = base + ADAPTIVE_SLOPE * (share - 0.5)`` with ``share = zv / (zv + zb)``
  (:func:`adaptive_weight`; chosen across all dev sets with leave one data set out,
  bench/README.md "Fusion that adapts per query");
* ``minmax``: ``(s - min) / (max - min)`` over the pool with one weight;
* ``zscore``: ``(s - mean) / std`` over the pool, squashed to (0, 1) by a logistic;
* ``rrf``: weighted reciprocal-rank fusion of the two rankings;
* ``weighted``: the earlier absolute relevances (cosine above the model's floor,
  clamped BM25 share); kept for comparison in ``bench/bench_evidence.py``.

A per-query normalised score carries no absolute meaning (the best hit of a
query with no answer in the corpus also gets 1.0): never use it as confidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, cast

from tools.kb.index.bm25 import clamp01
from tools.kb.search.candidates import CandidatePool, SearchMode

FusionMethod = Literal["adaptive", "minmax", "zscore", "rrf", "weighted"]
FUSION_METHODS: tuple[FusionMethod, ...] = ("adaptive", "minmax", "zscore", "rrf", "weighted")
RRF_K = 60
ADAPTIVE_SLOPE = 1.5


def cosine_to_relevance(cosine: float, floor: float) -> float:
    return clamp01((cosine - floor) / (1.0 - floor)) if floor < 1.0 else 0.0


def cosine_relevances(cosines: Mapping[str, float], floor: float) -> dict[str, float]:
    """:func:`cosine_to_relevance` of every candidate."""
    return {c: cosine_to_relevance(v, floor) for c, v in cosines.items()}


def weighted_relevance(vector: float, bm25: float, vector_weight: float) -> float:
    return clamp01(vector_weight * vector + (1.0 - vector_weight) * bm25)


def minmax(scores: Mapping[str, float]) -> dict[str, float]:
    """Min-max over the pool. A pool whose scores are all equal (one candidate, or ties)
    has no spread: each of them is the pool's best, so each maps to 1 when the score is a
    hit (above 0), to 0 when it is none (a BM25 side that matched nothing). Mapping a
    lone best candidate to 0 ranked the only chunk of a language below every other
    language's candidates (issue 47)."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    span = hi - lo
    if span <= 0:
        flat = 1.0 if hi > 0 else 0.0
        return {k: flat for k in scores}
    return {k: (v - lo) / span for k, v in scores.items()}


def zscore(scores: Mapping[str, float]) -> dict[str, float]:
    """Standard score over the pool, through a logistic so it stays in (0, 1)."""
    if not scores:
        return {}
    values = list(scores.values())
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if std == 0:
        return {k: 0.5 for k in scores}
    return {k: 1.0 / (1.0 + math.exp(-(v - mean) / std)) for k, v in scores.items()}


def peak(scores: Sequence[float] | Iterable[float]) -> float:
    """How far the best score stands above its pool, in standard deviations (0 when flat).

    Scale-free, so a cosine pool and a BM25 pool compare: one candidate far ahead of the
    rest is a retriever that is sure; a best hit inside the crowd is one that is not."""
    values = list(scores)
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return (max(values) - mean) / std if std > 0 else 0.0


def peaks(*pools: Iterable[float]) -> list[float]:
    """:func:`peak` of each pool of scores."""
    return [peak(scores) for scores in pools]


def adaptive_weight(
    vector: Mapping[str, float],
    bm25: Mapping[str, float],
    *,
    base: float,
    slope: float = ADAPTIVE_SLOPE,
) -> float:
    """The vector weight for one query: ``base`` moved towards the surer retriever.

    Chinese news questions with same-event negatives favour the dense side, English
    claims and lexically matched Wikipedia questions BM25; which one is surer shows in
    each query's own pool, so no language or collection rule is needed."""
    zv, zb = peak(vector.values()), peak(bm25.values())
    if zv + zb <= 0:
        return base
    return clamp01(base + slope * (zv / (zv + zb) - 0.5))


def rrf_scores(
    rankings: Sequence[Sequence[str]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Reciprocal-rank fusion: ``sum(w / (k + rank))`` over the rankings an id appears in
    (weights default to 1 each)."""
    scores: dict[str, float] = {}
    for n, ranking in enumerate(rankings):
        w = 1.0 if weights is None else float(weights[n])
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores


def fuse(
    vector: Mapping[str, float],
    bm25: Mapping[str, float],
    *,
    method: FusionMethod,
    vector_weight: float,
    adaptive_slope: float = ADAPTIVE_SLOPE,
) -> dict[str, float]:
    """Fused ordering score of every id in ``vector`` or ``bm25`` (raw cosine / raw BM25;
    absolute relevances for ``weighted``).

    Both maps should cover the same pool (the knowledge base completes the missing
    side); an id missing from one side scores that side's pool minimum.
    """
    pool = list(dict.fromkeys([*vector, *bm25]))
    if not pool:
        return {}
    w = vector_weight
    if method == "rrf":
        vec_rank = sorted((c for c in pool if c in vector), key=lambda c: -vector[c])
        bm_rank = sorted((c for c in pool if c in bm25 and bm25[c] > 0), key=lambda c: -bm25[c])
        fused = rrf_scores([vec_rank, bm_rank], weights=[2 * w, 2 * (1 - w)])
        return {c: fused.get(c, 0.0) for c in pool}
    if method == "weighted":  # callers pass absolute relevances in [0, 1]
        return {c: weighted_relevance(vector.get(c, 0.0), bm25.get(c, 0.0), w) for c in pool}
    vmin = min(vector.values()) if vector else 0.0
    bmin = min(bm25.values()) if bm25 else 0.0
    v_full = {c: float(vector.get(c, vmin)) for c in pool}
    b_full = {c: float(bm25.get(c, bmin)) for c in pool}
    if method == "adaptive":
        w = adaptive_weight(v_full, b_full, base=w, slope=adaptive_slope)
    norm = zscore if method == "zscore" else minmax
    vn, bn = norm(v_full), norm(b_full)
    return {c: w * vn[c] + (1.0 - w) * bn[c] for c in pool}


def fused_scores(
    pool: CandidatePool,
    *,
    mode: SearchMode,
    fusion: str,
    vector_weight: float,
    similarity_floor: float,
) -> dict[str, float]:
    """The ordering score of every candidate of ``pool``."""
    if mode == "vector":
        return dict(pool.cosine)
    if mode == "bm25":
        return dict(pool.bm25_found)  # raw score: the clamped share saturates at 1.0
    if fusion == "weighted":
        vrel = cosine_relevances(pool.cosine, similarity_floor)
        brel = {c: s.share for c, s in pool.bm25.items()}
        return fuse(vrel, brel, method="weighted", vector_weight=vector_weight)
    raw = {c: s.raw for c, s in pool.bm25.items()}
    return fuse(pool.cosine, raw, method=cast(FusionMethod, fusion), vector_weight=vector_weight)


def fused_each(
    pools: Mapping[str, CandidatePool],
    *,
    mode: SearchMode,
    fusion: str,
    vector_weight: float,
    similarity_floor: float,
) -> dict[str, dict[str, float]]:
    """:func:`fused_scores` of each pool (the joiner's language pools, each fused within
    its language)."""
    return {
        key: fused_scores(
            pool,
            mode=mode,
            fusion=fusion,
            vector_weight=vector_weight,
            similarity_floor=similarity_floor,
        )
        for key, pool in pools.items()
    }
