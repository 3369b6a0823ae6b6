"""The search pipeline: one query flows down the components once, and what they share.

:class:`SearchPipeline` composes the components of ``tools.kb.search``, each entered once
per query: the retrievers (``retrievers.Retrievers.retrieve``: dense, per document
language and centred where the KB has several; lexical) → the joiner (``joiner.join``:
fusion and its modes) → the ranker (``ranker.rank``) → the answerability judge
(``answerability.measure_evidence`` and the calibrated model). It owns the caches its
searches share, with their lock: one query embedding per text and a finished search per
(generation, mode, query, vector text, reader), so the router's probe and the retrieval
step search once. ``KnowledgeBase`` (``tools.kb.knowledge_base``) opens the store and
gives the pipeline what it reads: the snapshot, the embedding model, the chunk store, the
tokenizer and the ranking settings; the rerankers (``rerankers``) are the optional
second stage, run by the caller.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from cachetools import LRUCache

from tools.access.acl import Reader
from tools.errors import ConfigError, InputError
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.index.snapshot import Snapshot
from tools.kb.index.tokenizers import words_of
from tools.kb.search.answerability import (
    NO_EVIDENCE,
    AnswerabilityModel,
    EvidenceFeatures,
    measure_evidence,
)
from tools.kb.search.answerability import load_model as load_answerability
from tools.kb.search.candidates import SEARCH_MODES, CandidatePool, RetrievedChunk, SearchMode
from tools.kb.search.joiner import Fusion, Joined, join
from tools.kb.search.ranker import rank
from tools.kb.search.retrievers import ONE_POOL, Retrievers
from tools.kb.store.protocol import ChunkStore

if TYPE_CHECKING:
    from collections.abc import Callable

EVIDENCE_HITS = 5  # answerability looks at the top five hits, whatever k the caller asks


@dataclass(frozen=True)
class Retrieval:
    """One search: the hits, the evidence measured on them and its calibrated probability."""

    hits: list[RetrievedChunk]
    evidence: EvidenceFeatures
    answerability: float  # P(the top hits answer the query), see tools.kb.search.answerability


@dataclass(frozen=True)
class Ranking:
    """How a search ranks: candidates per retriever, the fusion method and its weight
    (``KBConfig``'s fields of the same names)."""

    candidates: int
    fusion: str
    vector_weight: float


@dataclass(frozen=True)
class _Searched:
    """A finished search, kept per (generation, mode, query, vector text) for the run's next node."""

    hits: list[RetrievedChunk]
    evidence: EvidenceFeatures
    answerability: float
    asked: int  # the depth ranked (``top``)


def _check_search(query: str, mode: str, k: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InputError("query is empty: give a non-empty search query")
    if mode not in SEARCH_MODES:
        raise ConfigError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")


class SearchPipeline:
    """The searches of one knowledge base, and the caches they share (thread-safe)."""

    def __init__(
        self,
        *,
        snapshot: Callable[[], Snapshot],
        model: EmbeddingModel,
        chunks: ChunkStore,
        tokenizer: Callable[[str], list[str]],
        ranking: Ranking,
    ) -> None:
        self.snapshot = snapshot  # the current snapshot (the knowledge base rebuilds it)
        self.model = model
        self.retrievers = Retrievers(chunks)
        self.tokenizer = tokenizer
        self.ranking = ranking
        self._lock = threading.Lock()  # guards the caches below, never held while searching
        # The router's probe and the retrieval step embed the same question: embed once.
        self._query_vectors: LRUCache[str, np.ndarray] = LRUCache(maxsize=256)
        self._retrievals: LRUCache[tuple[str, str, str, str, str], _Searched] = LRUCache(
            maxsize=256
        )

    def forget_queries(self) -> None:
        """Drop the query vectors and searches kept for a run's next node (benchmarks
        measure each question cold)."""
        with self._lock:
            self._query_vectors.clear()
            self._retrievals.clear()

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        reader: Reader | None = None,
    ) -> list[RetrievedChunk]:
        """Top ``k`` chunks for ``query``; filters restrict to doc ids and/or sources, and
        to the documents ``reader`` may read (default: all)."""
        return self.retrieve(
            query, k, mode=mode, doc_ids=doc_ids, sources=sources, reader=reader
        ).hits

    def retrieve(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
        vector_text: str | None = None,
        reader: Reader | None = None,
    ) -> Retrieval:
        """Top ``k`` chunks and the calibrated probability that they answer ``query``.

        ``reader`` (``tools.access.acl``) limits both retrievers to the documents it may
        read before anything is ranked; None is local use (every document).
        ``exclude_doc_ids`` hides documents (evaluation: "the KB without its answer").
        ``vector_text`` is embedded for the dense side instead of ``query`` (see
        :meth:`retrieve_many`); BM25 and the evidence measures still use ``query``.
        """
        _check_search(query, mode, k)
        snap = self.snapshot()
        if not snap.ids:
            return Retrieval([], NO_EVIDENCE, 0.0)
        top = max(k, EVIDENCE_HITS)
        # The router's probe and the retrieval step search the same question at the same
        # generation: the second is served from here (searches without document filters;
        # the reader is part of the key, so one reader never gets another's hits).
        reader = reader or Reader.everyone()
        vector_text = vector_text if vector_text and vector_text.strip() else query
        cached = snap.generation and not (doc_ids or sources or exclude_doc_ids)
        key = (snap.generation, mode, query, vector_text, reader.key()) if cached else None
        with self._lock:
            done = self._retrievals.get(key) if key else None
        # Served when it ranked at least as deep, or found fewer than it asked (all there is).
        if done is not None and (done.asked >= top or len(done.hits) < done.asked):
            return Retrieval(done.hits[:k], done.evidence, done.answerability)
        joined = self.joined(
            query,
            mode=mode,
            vector_text=vector_text,
            n=max(self.ranking.candidates, k),
            snap=snap,
            doc_ids=doc_ids,
            sources=sources,
            exclude_doc_ids=exclude_doc_ids,
            reader=reader,
        )
        searched = self._judged(query, joined, snap, mode, top)
        if key:
            with self._lock:
                self._retrievals[key] = searched
        return Retrieval(searched.hits[:k], searched.evidence, searched.answerability)

    def joined(
        self,
        query: str,
        *,
        mode: SearchMode,
        vector_text: str,
        n: int,
        snap: Snapshot,
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
        reader: Reader | None = None,
    ) -> Joined:
        """The query down the retrievers (the dense side embeds ``vector_text``) and the
        joiner: the candidates to rank and each one's ordering score."""
        vector = self.query_vector(vector_text) if mode in ("hybrid", "vector") else None
        found = self.retrievers.retrieve(
            query,
            vector,
            snap,
            mode=mode,
            n=n,
            doc_ids=doc_ids,
            sources=sources,
            exclude_doc_ids=exclude_doc_ids,
            reader=reader,
        )
        fusion = Fusion(
            mode, self.ranking.fusion, self.ranking.vector_weight, self.model.similarity_floor
        )
        return join(found, fusion)

    def _judged(
        self, query: str, joined: Joined, snap: Snapshot, mode: SearchMode, top: int
    ) -> _Searched:
        """The joined pool's top ``top`` (the ranker) and the calibrated evidence of the
        best of them (the answerability judge; ``across``: the best is in another language
        than the question's, read by the dense-only model)."""
        hits = rank(joined, snap, mode=mode, similarity_floor=self.model.similarity_floor, top=top)
        evidence = measure_evidence(
            [(h.chunk_id, h.text) for h in hits[:EVIDENCE_HITS]],
            vector_pool=joined.pool.vector_found,
            bm25_pool=joined.pool.bm25_found,
            term_weights=snap.bm25.term_weights(query),
            tokenizer=self.tokenizer,
            similarity_floor=self.model.similarity_floor,
        )
        model = self.across_model if joined.across else self.answerability_model
        return _Searched(hits, evidence, model.probability(evidence), top)

    def retrieve_many(
        self,
        queries: Sequence[str],
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        anchor: str | None = None,
        reader: Reader | None = None,
    ) -> list[Retrieval]:
        """``retrieve`` for each query; the texts not embedded yet are embedded in one
        batch first (a step's rewrites cost one model call, not one each).

        With an ``anchor`` (the question), a query made only of the anchor's words (see
        :func:`words_of`) is searched with the anchor's vector: dropping words from a
        sentence adds no meaning its own embedding lacks, while the query's BM25 side
        still changes. On two cores an e5 query embedding is ~30 ms, most of an offline
        answer's time (bench/bench_queries.py measures the quality of both ways).
        """
        vector_of = {
            q: anchor if anchor and q != anchor and words_of(q, anchor) else q for q in queries
        }
        if mode in ("hybrid", "vector"):
            with self._lock:
                missing = [
                    t
                    for t in dict.fromkeys(vector_of.values())
                    if t.strip() and t not in self._query_vectors
                ]
            if missing:
                vectors = self.model.embed_queries(missing)
                with self._lock:
                    for t, v in zip(missing, vectors, strict=True):
                        self._query_vectors[t] = np.asarray(v, dtype=np.float32)
        return [
            self.retrieve(q, k, mode=mode, vector_text=vector_of[q], reader=reader) for q in queries
        ]

    def candidate_pool(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        vector_text: str | None = None,
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
        reader: Reader | None = None,
        n: int | None = None,
        snap: Snapshot | None = None,
    ) -> CandidatePool:
        """Each retriever's top ``n`` (default ``candidates``) and, in hybrid mode, both
        raw scores for every candidate of either: what fusion normalises over. The dense
        side embeds ``vector_text`` (default: ``query``)."""
        vector = self.query_vector(vector_text or query) if mode in ("hybrid", "vector") else None
        found = self.retrievers.retrieve(
            query,
            vector,
            snap or self.snapshot(),
            mode=mode,
            n=n or self.ranking.candidates,
            doc_ids=doc_ids,
            sources=sources,
            exclude_doc_ids=exclude_doc_ids,
            reader=reader,
            one_pool=True,
        )
        return found.pools[ONE_POOL]

    @functools.cached_property
    def answerability_model(self) -> AnswerabilityModel:
        """Calibration parameters of this KB's embedding model (or the lexical fallback)."""
        return load_answerability(self.model.model_id)

    @functools.cached_property
    def across_model(self) -> AnswerabilityModel:
        """The dense-only model, for evidence in another language than the question's."""
        return load_answerability(self.model.model_id, across=True)

    def query_vector(self, query: str) -> np.ndarray:
        """The query's embedding, computed once per text."""
        with self._lock:
            cached = self._query_vectors.get(query)
        if cached is not None:
            return cached
        vector = np.asarray(self.model.embed_query(query), dtype=np.float32)
        with self._lock:
            self._query_vectors[query] = vector
        return vector

    def probe(self, query: str, *, reader: Reader | None = None) -> float:
        """'Does the KB answer this?': the calibrated answerability of a hybrid search.

        Hybrid evidence, not BM25 alone: a short generic question ("what month is it?")
        is fully covered by some chunk's words, while its meaning matches nothing.
        """
        if not query.strip():
            return 0.0
        return self.retrieve(query, EVIDENCE_HITS, mode="hybrid", reader=reader).answerability
