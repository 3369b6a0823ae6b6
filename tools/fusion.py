"""Score normalisation and rank fusion for hybrid retrieval.

Every relevance here is in [0, 1], higher is better, so the confidence grader
can compare it with one threshold whatever produced it:

* vector: cosine similarity mapped through the embedding model's *similarity
  floor* (the typical similarity of unrelated texts for that model):
  ``clamp((cos - floor) / (1 - floor), 0, 1)``. Raw distances never leave the store.
* BM25: the raw score divided by the sum of the query terms' idf, clamped to 1 —
  the idf-weighted share of the question's terms a chunk covers (see ``tools.bm25``).
* hybrid: ``w * vector + (1 - w) * bm25``. The *order* is by this weighted score
  (``weighted``) or by reciprocal-rank fusion of the two rankings (``rrf``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

FusionMethod = Literal["rrf", "weighted"]
FUSION_METHODS: tuple[FusionMethod, ...] = ("rrf", "weighted")
RRF_K = 60


def clamp01(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else float(value)


def cosine_to_relevance(cosine: float, floor: float) -> float:
    return clamp01((cosine - floor) / (1.0 - floor)) if floor < 1.0 else 0.0


def weighted_relevance(vector: float, bm25: float, vector_weight: float) -> float:
    return clamp01(vector_weight * vector + (1.0 - vector_weight) * bm25)


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
