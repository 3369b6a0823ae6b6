"""Second-stage reranking of retrieved candidates, with scores kept in [0, 1].

Rerankers, by name (``Context.reranker``):

* ``none`` — keep the first-stage order and relevance.
* ``lexical`` — no model: ``0.6 * first-stage relevance + 0.3 * coverage + 0.1 * proximity``,
  where coverage is the share of the query's keywords the passage contains and proximity
  is how tightly the found keywords cluster (1 = adjacent). All three are in [0, 1].
* ``cross-encoder:<model>`` — a sentence-transformers ``CrossEncoder`` loaded only from a
  local path or the local Hugging Face cache (never downloaded mid-run); its logits go
  through a sigmoid, which is exactly the [0, 1] relevance these models are trained for
  (``bge-reranker-v2-m3`` is the documented default). Needs ``pip install 'hybrid-rag[rerank]'``.
* ``llm`` — listwise ordering by the fast model (in ``nodes/``, as it needs a model); the
  new order keeps each candidate's own relevance, so the grader's threshold keeps meaning.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from tools.errors import ConfigError
from tools.kb.index.bm25 import clamp01
from tools.kb.index.tokenizers import keywords
from tools.kb.search.candidates import RetrievedChunk

DEFAULT_CROSS_ENCODER = "BAAI/bge-reranker-v2-m3"


@dataclass(frozen=True)
class Candidate:
    """Anything rerankable: an id, its text, and a first-stage relevance in [0, 1]."""

    id: str
    text: str
    relevance: float
    payload: Any = None


class Reranker(Protocol):
    name: str

    def rerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> list[Candidate]: ...


class NoReranker:
    name = "none"

    def rerank(self, query: str, candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
        return list(candidates)[:top_n]


def _proximity(text: str, words: list[str]) -> float:
    """1 when the found keywords sit next to each other, falling with the span they cover."""
    positions = [text.find(w) for w in words]
    found = [p for p in positions if p >= 0]
    if len(found) < 2:
        return 1.0 if found else 0.0
    span = max(found) - min(found)
    return 1.0 / (1.0 + span / 80.0)


class LexicalReranker:
    name = "lexical"

    def rerank(self, query: str, candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
        words = [w.casefold() for w in keywords(query)]
        scored: list[Candidate] = []
        for c in candidates:
            low = c.text.casefold()
            coverage = sum(1 for w in words if w in low) / len(words) if words else 0.0
            score = 0.6 * c.relevance + 0.3 * coverage + 0.1 * _proximity(low, words)
            scored.append(replace(c, relevance=clamp01(score)))
        scored.sort(key=lambda c: -c.relevance)
        return scored[:top_n]


class ScoringReranker:
    """Rerank with any ``score(query, texts) -> [0,1] scores`` function (cross-encoders, tests)."""

    def __init__(self, name: str, score: Callable[[str, list[str]], list[float]]) -> None:
        self.name = name
        self._score = score

    def rerank(self, query: str, candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
        if not candidates:
            return []
        scores = self._score(query, [c.text for c in candidates])
        if len(scores) != len(candidates):
            raise ValueError(
                f"reranker {self.name} returned {len(scores)} scores for {len(candidates)}"
            )
        out = [
            replace(c, relevance=clamp01(float(s))) for c, s in zip(candidates, scores, strict=True)
        ]
        out.sort(key=lambda c: -c.relevance)
        return out[:top_n]


def reorder(candidates: Sequence[Candidate], order: Sequence[str], top_n: int) -> list[Candidate]:
    """Apply an ordering of ids (from a listwise model); unknown ids are ignored and
    candidates the order leaves out follow in their first-stage order."""
    by_id = {c.id: c for c in candidates}
    seen: list[Candidate] = []
    for cid in order:
        c = by_id.pop(cid, None)
        if c is not None:
            seen.append(c)
    rest = [c for c in candidates if c.id in by_id]
    return [*seen, *rest][:top_n]


_cross_lock = threading.Lock()
_cross_cache: dict[str, ScoringReranker] = {}


def _cross_encoder(model: str) -> ScoringReranker:
    """Load a local cross-encoder once; clear errors instead of downloads."""
    with _cross_lock:
        if model in _cross_cache:
            return _cross_cache[model]
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise ConfigError(
                f"reranker 'cross-encoder:{model}' needs sentence-transformers: "
                "pip install 'hybrid-rag[rerank]'"
            ) from exc
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download in the middle of a run
        try:
            encoder = CrossEncoder(model, local_files_only=True)
        except Exception as exc:
            raise ConfigError(
                f"cross-encoder model {model!r} is not available locally "
                f"({type(exc).__name__}); download it once (e.g. huggingface-cli download {model}) "
                "or give a local directory"
            ) from exc

        def score(query: str, texts: list[str]) -> list[float]:
            logits = encoder.predict([(query, t) for t in texts])
            return [1.0 / (1.0 + math.exp(-float(x))) for x in logits]

        reranker = ScoringReranker(f"cross-encoder:{model}", score)
        _cross_cache[model] = reranker
        return reranker


def check_reranker(spec: str) -> None:
    """Validate a reranker spec without loading anything (configuration checks have no
    side effects): a cross-encoder needs sentence-transformers; its model is loaded, and
    its local availability checked, by :func:`make_reranker` when a run starts."""
    spec = (spec or "none").strip()
    cross = spec == "cross-encoder" or spec.startswith("cross-encoder:")
    if cross and importlib.util.find_spec("sentence_transformers") is None:
        raise ConfigError(
            f"reranker {spec!r} needs sentence-transformers: pip install 'hybrid-rag[rerank]'"
        )


def make_reranker(spec: str) -> Reranker:
    """``none`` | ``lexical`` | ``cross-encoder[:<model>]`` (``llm`` lives in ``nodes/``)."""
    spec = (spec or "none").strip()
    if spec == "none":
        return NoReranker()
    if spec == "lexical":
        return LexicalReranker()
    if spec == "cross-encoder" or spec.startswith("cross-encoder:"):
        return _cross_encoder(spec.partition(":")[2] or DEFAULT_CROSS_ENCODER)
    raise ConfigError(f"unknown reranker {spec!r}: use none, lexical, cross-encoder:<model> or llm")


def rerank_chunks(
    query: str, hits: Sequence[RetrievedChunk], reranker: Reranker, top_n: int
) -> list[RetrievedChunk]:
    """Rerank knowledge-base hits; each keeps its scores, ``relevance`` becomes the new one."""
    cands = [Candidate(h.chunk_id, f"{h.heading}\n{h.text}", h.relevance, payload=h) for h in hits]
    return [replace(c.payload, relevance=c.relevance) for c in reranker.rerank(query, cands, top_n)]
