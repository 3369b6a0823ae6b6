"""The knowledge base: incremental ingestion into Chroma and hybrid retrieval.

Crash safety of an update (ingest of a changed document ``d``, old version
``v1``, new ``v2``):

1. the chunks of ``v2`` are written beside those of ``v1`` (ids carry the version);
2. commit: one ``upsert`` to the registry sets ``d -> v2`` and a new generation;
3. the chunks of ``d`` whose version is not ``v2`` are deleted.

Readers only use chunks whose version is the registry's active one, so a crash
before 2 leaves ``v1`` fully in force, after 2 leaves ``v2``; never a mix, never
nothing. Leftover chunks of a crashed run are removed by the next ingest of that
document. BM25 is derived from Chroma (only active chunks) and cached in memory
and on disk under the registry's generation, so it cannot drift from the store.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
from cachetools import LRUCache

from tools.errors import ConfigError, InputError, StoreError
from tools.kb.answerability import (
    NO_EVIDENCE,
    AnswerabilityModel,
    EvidenceFeatures,
    measure_evidence,
)
from tools.kb.answerability import load_model as load_answerability
from tools.kb.bm25 import BM25Index
from tools.kb.chunking import ChunkingOptions, chunk_document
from tools.kb.embeddings import (
    DEFAULT_EMBEDDING,
    EmbeddingCache,
    EmbeddingModel,
    embed_with_cache,
    make_embedding_model,
)
from tools.kb.fusion import FUSION_METHODS, FusionMethod, clamp01, cosine_to_relevance, fuse
from tools.kb.loaders import SkippedFile, SourceDocument, discover, load_file
from tools.kb.tokenizers import make_tokenizer
from tools.kb.vectorstore import (
    StoreLocation,
    drop_collections,
    open_client,
    open_collections,
)
from tools.settings import bm25_cache_dir, chroma_path, data_home, embedding_cache_path
from tools.text import detect_language

SearchMode = Literal["hybrid", "bm25", "vector"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "bm25", "vector")
GENERATION_ID = "__generation__"
SNAPSHOT_ATTEMPTS = 3
EVIDENCE_HITS = 5  # answerability looks at the top five hits, whatever k the caller asks
log = logging.getLogger("hybrid_rag.kb")
_PAGE = 2000


@dataclass(frozen=True)
class KBConfig:
    """Where the knowledge base lives and how it indexes and retrieves."""

    home: Path | None = None
    collection: str = "knowledge"
    embedding: str = DEFAULT_EMBEDDING
    embedding_base_url: str | None = None
    chroma_host: str | None = None
    chroma_port: int = 8000
    chinese_tokenizer: str = "jieba"
    # Defaults chosen once across all four dev sets with bench/bench_evidence.py (the
    # largest worst-case gain over the better single retriever, held in leave-one-set-out;
    # README "Retrieval"): per-query min-max normalised raw scores, convex weight 0.45.
    # Light English stemming adds +0.02 nDCG@10 on SciFact and leaves Chinese untouched.
    stem: bool = True
    fusion: str = "minmax"
    vector_weight: float = 0.45
    candidates: int = 50  # per retriever; fusion normalises over their union
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)

    def __post_init__(self) -> None:
        if self.fusion not in FUSION_METHODS:
            raise ConfigError(f"fusion must be one of {FUSION_METHODS}, got {self.fusion!r}")
        if not 0.0 <= self.vector_weight <= 1.0:
            raise ConfigError(f"vector_weight must be in [0, 1], got {self.vector_weight}")
        if not 1 <= self.chroma_port <= 65535:
            raise ConfigError(f"chroma_port must be in 1..65535, got {self.chroma_port}")
        if self.candidates < 1:
            raise ConfigError(f"candidates must be >= 1, got {self.candidates}")


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


@dataclass(frozen=True)
class CandidatePool:
    """What one query's retrievers found; fusion and evidence are computed from it."""

    ids: list[str]  # every candidate, vector side first
    cosine: dict[str, float]  # chunk id -> cosine (all candidates in hybrid mode)
    bm25: dict[str, tuple[float, float]]  # chunk id -> (raw BM25, clamped share)
    vector_found: dict[str, float]  # the vector side's own top n
    bm25_found: dict[str, float]  # the BM25 side's own top n (raw)


@dataclass(frozen=True)
class Retrieval:
    """One search: the hits, the evidence measured on them and its calibrated probability."""

    hits: list[RetrievedChunk]
    evidence: EvidenceFeatures
    answerability: float  # P(the top hits answer the query), see tools.kb.answerability


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    chunks_written: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.deleted)} deleted, "
            f"{len(self.skipped)} skipped; {self.chunks_written} chunks written "
            f"in {self.seconds:.1f} s"
        )


@dataclass
class _Snapshot:
    """Active chunks at one registry generation, with their BM25 index."""

    generation: str
    active: dict[str, str]  # doc_id -> version
    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    position: dict[str, int]
    bm25: BM25Index


ProgressFn = Callable[[int, int, str], None]


class KnowledgeBase:
    """A knowledge base in Chroma; open it once, use it from several threads."""

    def __init__(
        self, config: KBConfig | None = None, *, embedding_model: EmbeddingModel | None = None
    ) -> None:
        self.config = config or KBConfig()
        self.home = data_home(self.config.home)
        self.location = StoreLocation(
            path=chroma_path(self.home), host=self.config.chroma_host, port=self.config.chroma_port
        )
        self.model = embedding_model or make_embedding_model(
            self.config.embedding, base_url=self.config.embedding_base_url
        )
        self.tokenizer = make_tokenizer(self.config.chinese_tokenizer, stem=self.config.stem)
        self._client = open_client(self.location)
        self._chunks, self._registry = open_collections(
            self._client,
            self.config.collection,
            model_id=self.model.model_id,
            dimension=self.model.dimension,
        )
        self._cache = EmbeddingCache(embedding_cache_path(self.home))
        self._lock = threading.RLock()
        self._snapshot: _Snapshot | None = None
        # The router's probe and the retrieval step embed the same question: embed once.
        self._query_vectors: LRUCache[str, np.ndarray] = LRUCache(maxsize=256)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        self._cache.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop(self) -> None:
        """Delete both collections (used by throw-away evaluation indexes)."""
        drop_collections(self._client, self.config.collection)
        for stale in bm25_cache_dir(self.home).glob(f"{self.config.collection}.*.pkl"):
            stale.unlink(missing_ok=True)
        self._snapshot = None

    # -- registry ------------------------------------------------------------------------

    def _store_call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            raise StoreError(
                f"{self.location.describe()} failed during {what}: {type(exc).__name__}: {exc}"
            ) from exc

    def _registry_records(self) -> dict[str, dict[str, Any]]:
        got = self._store_call(
            "reading the registry", lambda: self._registry.get(include=["metadatas"])
        )
        return {i: dict(m or {}) for i, m in zip(got["ids"], got["metadatas"] or [], strict=True)}

    def _generation(self) -> str:
        got = self._store_call(
            "reading the generation",
            lambda: self._registry.get(ids=[GENERATION_ID], include=["metadatas"]),
        )
        metas = got["metadatas"] or []
        return str(metas[0].get("generation", "")) if metas and metas[0] else ""

    def _commit(self, records: dict[str, dict[str, Any]]) -> None:
        """Point documents at versions and change the generation, in one write."""
        ids = [*records, GENERATION_ID]
        metas = [*records.values(), {"generation": uuid.uuid4().hex}]
        self._store_call(
            f"committing {', '.join(list(records)[:3])}{'…' if len(records) > 3 else ''}",
            lambda: self._registry.upsert(
                ids=ids,
                embeddings=[[1.0]] * len(ids),  # type: ignore[arg-type]
                metadatas=metas,  # type: ignore[arg-type]
            ),
        )

    # -- ingestion -----------------------------------------------------------------------

    def ingest(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        prune: bool = True,
        progress: ProgressFn | None = None,
    ) -> IngestReport:
        """Add new documents, replace changed ones, skip unchanged ones.

        With ``prune``, documents previously ingested from a named directory whose
        files are gone are deleted.
        """
        started = time.perf_counter()
        report = IngestReport()
        path_list = [Path(p) for p in paths]
        files = list(discover(path_list))  # raises InputError for a missing path first
        docs: list[SourceDocument] = []
        for file, doc_id in files:
            loaded = load_file(file, doc_id)
            if isinstance(loaded, SkippedFile):
                report.skipped.append(loaded)
            else:
                docs.append(loaded)
        with self._lock:
            self._ingest_documents(docs, report, progress)
            if prune:
                seen = {d.doc_id for d in docs}
                roots = [str(p.resolve()) + os.sep for p in path_list if p.is_dir()]
                for doc_id, meta in self._registry_records().items():
                    src = str(meta.get("source", ""))
                    if (
                        doc_id != GENERATION_ID
                        and meta.get("version")
                        and doc_id not in seen
                        and any(src.startswith(r) for r in roots)
                    ):
                        self.delete(doc_id)
                        report.deleted.append(doc_id)
        report.seconds = time.perf_counter() - started
        return report

    def ingest_documents(
        self, docs: Sequence[SourceDocument], *, progress: ProgressFn | None = None
    ) -> IngestReport:
        """Ingest documents that do not come from files (evaluation corpora, APIs)."""
        started = time.perf_counter()
        report = IngestReport()
        with self._lock:
            self._ingest_documents(docs, report, progress)
        report.seconds = time.perf_counter() - started
        return report

    def _ingest_documents(
        self,
        docs: Sequence[SourceDocument],
        report: IngestReport,
        progress: ProgressFn | None,
    ) -> None:
        registry = self._registry_records()
        self._finish_deletions(registry)
        pending: list[SourceDocument] = []
        for n, doc in enumerate(docs):
            if progress:
                progress(n, len(docs), doc.doc_id)
            current = registry.get(doc.doc_id)
            if current and current.get("version") == doc.content_hash[:16]:
                self._remove_stale_chunks(doc.doc_id, str(current["version"]))
                report.unchanged.append(doc.doc_id)
                continue
            pending.append(doc)
            if len(pending) >= self.batch_documents:
                self._ingest_batch(pending, registry, report)
                pending = []
        if pending:
            self._ingest_batch(pending, registry, report)
        if progress:
            progress(len(docs), len(docs), "")

    # Documents embedded and committed together: one registry write makes a whole
    # batch active, so a batch is the unit of crash safety as well as of embedding.
    batch_documents = 32

    def _ingest_batch(
        self,
        docs: Sequence[SourceDocument],
        registry: dict[str, dict[str, Any]],
        report: IngestReport,
    ) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        ids: list[str] = []
        bodies: list[str] = []
        index_texts: list[str] = []
        metadatas: list[dict[str, Any]] = []
        commits: dict[str, dict[str, Any]] = {}
        for doc in docs:
            version = doc.content_hash[:16]
            chunks = chunk_document(
                doc.text, markdown=doc.is_markdown, options=self.config.chunking
            )
            if not chunks:
                report.skipped.append(SkippedFile(doc.source, "no text after chunking"))
                continue
            for c in chunks:
                ids.append(f"{doc.doc_id}#{version}#{c.chunk_index:05d}")
                bodies.append(c.text)
                index_texts.append(c.index_text())
                metadatas.append(
                    {
                        "doc_id": doc.doc_id,
                        "source": doc.source,
                        "heading": c.heading,
                        "chunk_index": c.chunk_index,
                        "total_chunks": c.total_chunks,
                        "content_hash": doc.content_hash,
                        "version": version,
                        "ingested_at": now,
                        "is_table": c.is_table,
                        "lang": detect_language(c.text),
                    }
                )
            commits[doc.doc_id] = {
                "version": version,
                "content_hash": doc.content_hash,
                "source": doc.source,
                "chunks": len(chunks),
                "ingested_at": now,
            }
        if not commits:
            return
        vectors = embed_with_cache(self.model, index_texts, self._cache)
        for start in range(0, len(ids), 1000):
            sl = slice(start, start + 1000)
            self._store_call(
                "writing chunks",
                lambda sl=sl: self._chunks.upsert(  # type: ignore[misc]
                    ids=ids[sl],
                    embeddings=vectors[sl],
                    documents=bodies[sl],
                    metadatas=metadatas[sl],
                ),
            )
        self._commit(commits)
        for doc_id, meta in commits.items():
            previous = registry.get(doc_id)
            if previous and previous.get("version"):
                self._remove_stale_chunks(doc_id, str(meta["version"]))
                report.updated.append(doc_id)
            else:
                report.added.append(doc_id)
            registry[doc_id] = meta
            report.chunks_written += int(meta["chunks"])

    def _remove_stale_chunks(self, doc_id: str, version: str) -> None:
        self._store_call(
            f"removing old chunks of {doc_id}",
            lambda: self._chunks.delete(
                where={"$and": [{"doc_id": doc_id}, {"version": {"$ne": version}}]}  # type: ignore[dict-item]
            ),
        )

    def _finish_deletions(self, registry: dict[str, dict[str, Any]]) -> None:
        """Complete deletions a crash interrupted (tombstone written, chunks still there)."""
        for doc_id in [
            d for d, m in registry.items() if d != GENERATION_ID and not m.get("version")
        ]:
            self._store_call(
                f"deleting chunks of {doc_id}",
                functools.partial(self._chunks.delete, where={"doc_id": doc_id}),
            )
            self._store_call(
                f"deleting registry entry of {doc_id}",
                functools.partial(self._registry.delete, ids=[doc_id]),
            )
            del registry[doc_id]

    def delete(self, doc_id: str) -> int:
        """Remove a document from the vector and BM25 indexes; returns chunks removed."""
        with self._lock:
            registry = self._registry_records()
            meta = registry.get(doc_id)
            if not meta or not meta.get("version") or doc_id == GENERATION_ID:
                raise InputError(
                    f"no document with doc_id {doc_id!r} in collection {self.config.collection!r}"
                )
            # Tombstone first (one write): from here on readers see no version.
            self._commit({doc_id: {**meta, "version": ""}})
            removed = int(meta.get("chunks", 0))
            self._store_call(
                f"deleting chunks of {doc_id}",
                lambda: self._chunks.delete(where={"doc_id": doc_id}),
            )
            self._store_call(
                f"deleting registry entry of {doc_id}", lambda: self._registry.delete(ids=[doc_id])
            )
            return removed

    # -- snapshot (active chunks + BM25) ---------------------------------------------------

    def _bm25_file(self, generation: str) -> Path:
        tok = f"{self.config.chinese_tokenizer}{'-stem' if self.config.stem else ''}"
        return bm25_cache_dir(self.home) / f"{self.config.collection}.{tok}.{generation}.pkl"

    def snapshot(self) -> _Snapshot:
        """The active chunks and BM25 index, rebuilt only when the registry changed."""
        with self._lock:  # the generation too: an ingest on this instance may be moving it
            generation = self._generation()
            if self._snapshot is not None and self._snapshot.generation == generation:
                return self._snapshot
            cached = self._load_bm25_snapshot(generation)
            self._snapshot = cached or self._consistent_snapshot(generation)
            return self._snapshot

    def _consistent_snapshot(self, generation: str) -> _Snapshot:
        """Build from registry + chunks read at one generation.

        Another process may commit (and delete old chunks) between reading the registry
        and reading the chunks; the generation changes then, and the read is repeated.
        """
        for _ in range(SNAPSHOT_ATTEMPTS):
            snap = self._build_snapshot(generation)
            now = self._generation()
            if now == generation:
                self._save_bm25_snapshot(snap)
                return snap
            generation = now
        # Still moving: serve this build, but mark it so the next query rebuilds it.
        snap.generation = ""
        return snap

    def _build_snapshot(self, generation: str) -> _Snapshot:
        active = {
            d: str(m["version"])
            for d, m in self._registry_records().items()
            if d != GENERATION_ID and m.get("version")
        }
        ids: list[str] = []
        texts: list[str] = []
        metas: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = self._store_call(
                "reading chunks",
                lambda offset=offset: self._chunks.get(  # type: ignore[misc]
                    include=["documents", "metadatas"], limit=_PAGE, offset=offset
                ),
            )
            for cid, text, meta in zip(
                page["ids"], page["documents"] or [], page["metadatas"] or [], strict=True
            ):
                m = dict(meta or {})
                if active.get(str(m.get("doc_id"))) == m.get("version"):
                    ids.append(cid)
                    texts.append(text or "")
                    metas.append(m)
            if len(page["ids"]) < _PAGE:
                break
            offset += _PAGE
        index_texts = [f"{m.get('heading', '')}\n{t}" for t, m in zip(texts, metas, strict=True)]
        snap = _Snapshot(
            generation=generation,
            active=active,
            ids=ids,
            texts=texts,
            metadatas=metas,
            position={cid: i for i, cid in enumerate(ids)},
            bm25=BM25Index(index_texts, self.tokenizer),
        )
        return snap

    def _save_bm25_snapshot(self, snap: _Snapshot) -> None:
        if not snap.generation:
            return
        # A cache: failing to write it (a race with another writer, a full disk) only
        # means the next process rebuilds from Chroma.
        directory = bm25_cache_dir(self.home)
        target = self._bm25_file(snap.generation)
        tmp = target.with_suffix(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        tokenizer, snap.bm25.tokenizer = snap.bm25.tokenizer, None  # type: ignore[assignment]
        try:
            directory.mkdir(parents=True, exist_ok=True)
            prefix = f"{self.config.collection}."
            for old in [*directory.glob(f"{prefix}*.pkl"), *directory.glob(f"{prefix}*.tmp-*")]:
                if old != target:
                    old.unlink(missing_ok=True)
            with tmp.open("wb") as fh:
                pickle.dump(snap, fh, protocol=pickle.HIGHEST_PROTOCOL)
            tmp.replace(target)  # atomic: a reader sees the old file or the whole new one
        except OSError as exc:
            log.warning("could not save the BM25 cache %s: %s", target.name, exc)
            tmp.unlink(missing_ok=True)
        finally:
            snap.bm25.tokenizer = tokenizer

    def _load_bm25_snapshot(self, generation: str) -> _Snapshot | None:
        path = self._bm25_file(generation)
        if not generation or not path.exists():
            return None
        try:
            with path.open("rb") as fh:
                snap = pickle.load(fh)  # our own file under the data home
        except Exception:
            return None  # unreadable cache: rebuild from Chroma
        if not isinstance(snap, _Snapshot) or snap.generation != generation:
            return None
        snap.bm25.tokenizer = self.tokenizer
        return snap

    # -- retrieval -----------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
    ) -> list[RetrievedChunk]:
        """Top ``k`` chunks for ``query``; filters restrict to doc ids and/or sources."""
        return self.retrieve(query, k, mode=mode, doc_ids=doc_ids, sources=sources).hits

    def retrieve(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
    ) -> Retrieval:
        """Top ``k`` chunks and the calibrated probability that they answer ``query``.

        ``exclude_doc_ids`` hides documents (evaluation: "the KB without its answer").
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("query is empty: give a non-empty search query")
        if mode not in SEARCH_MODES:
            raise ConfigError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}")
        snap = self.snapshot()
        if not snap.ids:
            return Retrieval([], NO_EVIDENCE, 0.0)
        pool = self.candidate_pool(
            query,
            mode=mode,
            doc_ids=doc_ids,
            sources=sources,
            exclude_doc_ids=exclude_doc_ids,
            n=max(self.config.candidates, k),
            snap=snap,
        )
        vector_hits, bm25_hits = pool.cosine, pool.bm25
        vector_pool, bm25_pool = pool.vector_found, pool.bm25_found
        candidates = pool.ids
        floor = self.model.similarity_floor
        vrel = {c: cosine_to_relevance(v, floor) for c, v in vector_hits.items()}
        if mode == "vector":
            fused = dict(vector_hits)
        elif mode == "bm25":
            fused = dict(bm25_pool)  # raw score: the clamped share saturates at 1.0
        elif self.config.fusion == "weighted":
            brel = {c: v[1] for c, v in bm25_hits.items()}
            fused = fuse(vrel, brel, method="weighted", vector_weight=self.config.vector_weight)
        else:
            fused = fuse(
                vector_hits,
                {c: v[0] for c, v in bm25_hits.items()},
                method=cast(FusionMethod, self.config.fusion),
                vector_weight=self.config.vector_weight,
            )
        order = sorted(candidates, key=lambda c: (-fused.get(c, 0.0), c))
        best = max(fused.values(), default=0.0)

        def relevance(cid: str) -> float:
            """Shown to users and used by rerankers: relative to this query's best hit."""
            if mode == "vector":
                return vrel.get(cid, 0.0)
            if mode == "bm25":
                return bm25_hits[cid][1]
            return fused[cid] / best if best > 0 else 0.0

        top = max(k, EVIDENCE_HITS)
        out: list[RetrievedChunk] = []
        for cid in order[:top]:
            i = snap.position[cid]
            m = snap.metadatas[i]
            cos = vector_hits.get(cid)
            bscore, brel_c = bm25_hits.get(cid, (0.0, 0.0))
            out.append(
                RetrievedChunk(
                    chunk_id=cid,
                    doc_id=str(m.get("doc_id", "")),
                    source=str(m.get("source", "")),
                    heading=str(m.get("heading", "")),
                    text=snap.texts[i],
                    chunk_index=int(m.get("chunk_index", 0)),
                    total_chunks=int(m.get("total_chunks", 1)),
                    relevance=clamp01(relevance(cid)),
                    fused_score=float(fused[cid]),
                    vector_score=cos,
                    bm25_score=bscore,
                    vector_relevance=vrel.get(cid, 0.0),
                    bm25_relevance=brel_c,
                    metadata=m,
                )
            )
        evidence = measure_evidence(
            [(h.chunk_id, h.text) for h in out[:EVIDENCE_HITS]],
            vector_pool=vector_pool,
            bm25_pool=bm25_pool,
            term_weights=snap.bm25.term_weights(query),
            tokenizer=self.tokenizer,
            similarity_floor=floor,
        )
        probability = self.answerability_model.probability(evidence)
        return Retrieval(out[:k], evidence, probability)

    def candidate_pool(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
        n: int | None = None,
        snap: _Snapshot | None = None,
    ) -> CandidatePool:
        """Each retriever's top ``n`` (default ``candidates``) and, in hybrid mode, both
        raw scores for every candidate of either: what fusion normalises over."""
        snap = snap or self.snapshot()
        n = n or self.config.candidates
        doc_filter = set(doc_ids) if doc_ids else None
        source_filter = set(sources) if sources else None
        excluded = set(exclude_doc_ids)

        def allowed_meta(m: dict[str, Any]) -> bool:
            return (
                (doc_filter is None or m.get("doc_id") in doc_filter)
                and (source_filter is None or m.get("source") in source_filter)
                and m.get("doc_id") not in excluded
            )

        vector_hits: dict[str, float] = {}  # chunk id -> cosine
        query_vector: np.ndarray | None = None
        if mode in ("hybrid", "vector"):
            query_vector = self._query_vector(query)
            found = self._vector_candidates(
                query_vector, n + 4 * len(excluded), snap, doc_filter, source_filter
            )
            vector_hits = dict(
                itertools.islice(
                    (
                        (c, v)
                        for c, v in found.items()
                        if snap.metadatas[snap.position[c]].get("doc_id") not in excluded
                    ),
                    n,
                )
            )
        bm25_hits: dict[str, tuple[float, float]] = {}  # chunk id -> (raw score, share)
        if mode in ("hybrid", "bm25"):
            for hit in snap.bm25.search(
                query, n, allowed=lambda i: allowed_meta(snap.metadatas[i])
            ):
                bm25_hits[snap.ids[hit.index]] = (hit.score, hit.relevance)
        vector_found = dict(vector_hits)
        bm25_found = {c: v[0] for c, v in bm25_hits.items()}
        ids = list(dict.fromkeys([*vector_hits, *bm25_hits]))
        if mode == "hybrid":
            self._complete_scores(query, query_vector, ids, vector_hits, bm25_hits, snap)
        return CandidatePool(ids, vector_hits, bm25_hits, vector_found, bm25_found)

    @functools.cached_property
    def answerability_model(self) -> AnswerabilityModel:
        """Calibration parameters of this KB's embedding model (or the lexical fallback)."""
        return load_answerability(self.model.model_id)

    def _query_vector(self, query: str) -> np.ndarray:
        with self._lock:
            cached = self._query_vectors.get(query)
        if cached is not None:
            return cached
        vector = np.asarray(self.model.embed_query(query), dtype=np.float32)
        with self._lock:
            self._query_vectors[query] = vector
        return vector

    def _vector_candidates(
        self,
        query_vector: np.ndarray,
        n: int,
        snap: _Snapshot,
        doc_filter: set[str] | None,
        source_filter: set[str] | None,
    ) -> dict[str, float]:
        clauses: list[dict[str, Any]] = []
        if doc_filter:
            clauses.append({"doc_id": {"$in": sorted(doc_filter)}})
        if source_filter:
            clauses.append({"source": {"$in": sorted(source_filter)}})
        where: dict[str, Any] | None = (
            None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
        )
        # Over-fetch a little: chunks of inactive versions (a crashed ingest) are dropped.
        n_results = min(n + 10, max(1, len(snap.ids) + 10))
        res = self._store_call(
            "vector search",
            lambda: self._chunks.query(
                query_embeddings=[query_vector.tolist()],
                n_results=n_results,
                where=where,
                include=["distances"],
            ),
        )
        hits: dict[str, float] = {}
        for cid, dist in zip(res["ids"][0], (res["distances"] or [[]])[0], strict=True):
            if cid in snap.position:
                hits[cid] = 1.0 - float(dist)  # cosine space: distance = 1 - cosine similarity
            if len(hits) >= n:
                break
        return hits

    def _complete_scores(
        self,
        query: str,
        query_vector: np.ndarray | None,
        candidates: list[str],
        vector_hits: dict[str, float],
        bm25_hits: dict[str, tuple[float, float]],
        snap: _Snapshot,
    ) -> None:
        """Give every candidate both scores, so its relevance is not half-blind."""
        missing_bm25 = [c for c in candidates if c not in bm25_hits]
        if missing_bm25:
            scored = snap.bm25.score_indices(query, [snap.position[c] for c in missing_bm25])
            for c in missing_bm25:
                hit = scored.get(snap.position[c])
                bm25_hits[c] = (hit.score, hit.relevance) if hit else (0.0, 0.0)
        missing_vec = [c for c in candidates if c not in vector_hits]
        if missing_vec and query_vector is not None:
            got = self._store_call(
                "reading vectors",
                lambda: self._chunks.get(ids=missing_vec, include=["embeddings"]),
            )
            embs = got["embeddings"]
            # Chunks deleted since this snapshot was built come back without vectors.
            if embs is not None and len(got["ids"]) > 0:
                mat = np.asarray(embs, dtype=np.float32)
                q = query_vector / (np.linalg.norm(query_vector) or 1.0)
                norms = np.linalg.norm(mat, axis=1)
                norms[norms == 0] = 1.0
                for cid, cos in zip(got["ids"], (mat @ q) / norms, strict=True):
                    vector_hits[cid] = float(cos)

    def probe(self, query: str) -> float:
        """'Does the KB answer this?': the calibrated answerability of a hybrid search.

        Hybrid evidence, not BM25 alone: a short generic question ("what month is it?")
        is fully covered by some chunk's words, while its meaning matches nothing.
        """
        if not query.strip():
            return 0.0
        return self.retrieve(query, EVIDENCE_HITS, mode="hybrid").answerability

    # -- statistics ----------------------------------------------------------------------

    def languages(self) -> dict[str, int]:
        """Active chunks per detected language (``zh``/``en``), the KB's language mix."""
        snap = self.snapshot()
        langs: dict[str, int] = {}
        for m in snap.metadatas:
            lang = str(m.get("lang", "?"))
            langs[lang] = langs.get(lang, 0) + 1
        return langs

    def stats(self) -> dict[str, Any]:
        snap = self.snapshot()
        langs = self.languages()
        stored = int(self._store_call("counting chunks", self._chunks.count))
        return {
            "collection": self.config.collection,
            "store": self.location.describe(),
            "embedding_model": self.model.model_id,
            "embedding_dimension": self.model.dimension,
            "documents": len(snap.active),
            "chunks": len(snap.ids),
            "stale_chunks": stored - len(snap.ids),
            "languages": langs,
            "documents_list": sorted(snap.active),
            "embedding_cache": {"hits": self._cache.hits, "misses": self._cache.misses},
        }
