"""The ranker, the first stage's last component (:func:`rank`): the joined candidates
ordered by their score into results, each with the relevance users see.

``relevance`` is relative to the query's best hit (the cosine above the model's floor in
vector mode, the BM25 share in BM25 mode); the second stage, optional, is
``tools.kb.search.rerankers``.
"""

from __future__ import annotations

from collections.abc import Mapping

from tools.kb.index.bm25 import clamp01
from tools.kb.index.snapshot import Snapshot
from tools.kb.search.candidates import BM25Score, CandidatePool, RetrievedChunk, SearchMode
from tools.kb.search.fusion import cosine_relevances
from tools.kb.search.joiner import Joined


def rank(
    joined: Joined, snap: Snapshot, *, mode: SearchMode, similarity_floor: float, top: int
) -> list[RetrievedChunk]:
    """The ``top`` candidates of the joined pool by their ordering score, as results."""
    pool = joined.pool
    vrel = cosine_relevances(pool.cosine, similarity_floor)
    fused = dict(joined.scores)
    order = sorted(pool.ids, key=lambda c: (-fused.get(c, 0.0), c))
    best = max(fused.values(), default=0.0)
    top_score = fused[order[0]] if order else 0.0
    low = min(fused.values(), default=0.0)

    def relevance(cid: str) -> float:
        """Shown to users and used by rerankers: relative to this query's best hit."""
        if mode == "vector":
            return vrel.get(cid, 0.0)
        if mode == "bm25":
            return pool.bm25[cid].share
        if joined.merged:  # merged scores may be negative: min-max over the pool
            span = top_score - low
            return (fused[cid] - low) / span if span > 0 else 0.0
        return fused[cid] / best if best > 0 else 0.0

    return [result(cid, snap, pool, fused[cid], relevance(cid), vrel) for cid in order[:top]]


def result(
    cid: str,
    snap: Snapshot,
    pool: CandidatePool,
    fused: float,
    relevance: float,
    vrel: Mapping[str, float],
) -> RetrievedChunk:
    """One ranked candidate as a search result."""
    i = snap.position[cid]
    m = snap.metadatas[i]
    bm25 = pool.bm25.get(cid, BM25Score(0.0, 0.0))
    return RetrievedChunk(
        chunk_id=cid,
        doc_id=str(m.get("doc_id", "")),
        source=str(m.get("source", "")),
        heading=str(m.get("heading", "")),
        text=snap.texts[i],
        chunk_index=int(m.get("chunk_index", 0)),
        total_chunks=int(m.get("total_chunks", 1)),
        relevance=clamp01(relevance),
        fused_score=float(fused),
        vector_score=pool.cosine.get(cid),
        bm25_score=bm25.raw,
        vector_relevance=vrel.get(cid, 0.0),
        bm25_relevance=bm25.share,
        metadata=m,
    )
