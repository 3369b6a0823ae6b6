"""The source record shared by both graphs: one dict per KB chunk or web hit.

Plain dicts (not objects) so checkpoints, the server and traces serialise them.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from tools.kb.knowledge_base import RetrievedChunk
from tools.websearch import WebResult


class Source(TypedDict, total=False):
    """One KB chunk (``kind`` "internal") or web hit (``kind`` "web"), as the graphs pass
    it around; ``label``/``number`` are set when the answer's sources are chosen."""

    id: str
    kind: str
    title: str
    text: str
    source: str | None
    relevance: float
    answerability: float
    label: str
    number: int
    grade: str  # the model grader's verdict, when a model graded the source
    # knowledge-base chunks
    heading: str
    doc_id: str
    chunk_id: str
    vector_score: float | None
    bm25_score: float
    ingested_at: Any
    lang: Any
    # web results
    url: str
    published_at: str | None
    provider: str
    rank: int
    result_kind: str
    fetched_at: Any


def chunk_to_source(hit: RetrievedChunk, answerability: float = 0.0) -> Source:
    """``answerability``: the calibrated probability of the search that found the chunk."""
    return {
        "id": hit.chunk_id,
        "kind": "internal",
        "title": hit.heading.split(" > ")[0] if hit.heading else hit.doc_id,
        "heading": hit.heading,
        "text": hit.text,
        "doc_id": hit.doc_id,
        "chunk_id": hit.chunk_id,
        "source": hit.source,
        "relevance": round(hit.relevance, 4),
        "answerability": round(answerability, 4),
        "vector_score": hit.vector_score,
        "bm25_score": round(hit.bm25_score, 4),
        "ingested_at": hit.metadata.get("ingested_at"),
        "lang": hit.metadata.get("lang"),
    }


def web_to_source(result: WebResult) -> Source:
    return {
        "id": result.url,
        "kind": "web",
        "title": result.title,
        "text": result.snippet,
        "url": result.url,
        "published_at": result.published_at,
        "source": result.source,
        "provider": result.provider,
        "rank": result.rank,
        "result_kind": result.kind,
        "fetched_at": result.fetched_at,
    }
