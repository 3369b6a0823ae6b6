"""The knowledge base: one object that opens the store and ingests and searches it.

``KnowledgeBase`` composes the parts of this package (``store.opened_store``,
``ingest.kb_writer``, ``embed``, ``index.snapshot_cache``, ``search.pipeline``:
ARCHITECTURE.md draws them) and owns their resources (the Chroma client, the embedding
cache) and the lock that serialises writers and snapshot rebuilds within a process. Each
of its methods is one call to the component that does the work.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.access.acl import ACL, Reader
from tools.errors import ConfigError
from tools.kb.embed.embedding_cache import EmbeddingCache
from tools.kb.embed.embeddings import DEFAULT_EMBEDDING, EmbeddingModel, make_embedding_model
from tools.kb.index.kb_stats import kb_stats
from tools.kb.index.snapshot import Snapshot
from tools.kb.index.snapshot_cache import LatestSnapshot, SnapshotCache
from tools.kb.index.tokenizers import make_tokenizer
from tools.kb.ingest.chunking import ChunkingOptions
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.ingest_report import IngestReport
from tools.kb.ingest.ingester import ProgressFn
from tools.kb.ingest.kb_writer import KbWriter
from tools.kb.ingest.loaders import FileBytes, SourceDocument
from tools.kb.search.candidates import (
    SEARCH_MODES,
    CandidatePool,
    RetrievedChunk,
    SearchMode,
)
from tools.kb.search.fusion import FUSION_METHODS
from tools.kb.search.pipeline import Ranking, Retrieval, SearchPipeline
from tools.kb.store.backends import checked_database
from tools.kb.store.chroma.chroma_store import StoreLocation, never_written
from tools.kb.store.opened_store import OpenedStore
from tools.kb.store.protocol import no_collection
from tools.settings import (
    bm25_cache_dir,
    chroma_path,
    data_home,
    embedding_cache_path,
    write_lock_dir,
)

__all__ = [
    "SEARCH_MODES",
    "CandidatePool",
    "IngestReport",
    "KBConfig",
    "KnowledgeBase",
    "ProgressFn",
    "Retrieval",
    "RetrievedChunk",
    "SearchMode",
]


@dataclass(frozen=True)
class KBConfig:
    """Where the knowledge base lives and how it indexes and retrieves."""

    home: Path | None = None
    collection: str = "knowledge"
    embedding: str = DEFAULT_EMBEDDING
    embedding_base_url: str | None = None
    chroma_host: str | None = None
    chroma_port: int = 8000
    # PostgreSQL with pgvector instead of Chroma (the primary; empty: Chroma), and its
    # streaming replicas that serve reads (empty: the primary serves them too).
    database_url: str = ""
    read_urls: tuple[str, ...] = ()
    chinese_tokenizer: str = "jieba"
    # Defaults chosen across all four dev sets with bench/bench_evidence.py (the largest
    # worst-case gain over the better single retriever, chosen again with each set left
    # out; bench/README.md "Fusion that adapts per query"): per-query min-max normalised
    # raw scores, convex weight 0.5 moved per query towards the surer retriever.
    # Snowball English stemming adds +0.03 nDCG@10 on SciFact over none (+0.011 over the
    # earlier suffix rules) and leaves Chinese untouched.
    stem: bool = True
    fusion: str = "adaptive"
    vector_weight: float = 0.5  # the base weight with "adaptive" fusion
    candidates: int = 50  # per retriever; fusion normalises over their union
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)
    # False for readers that must not create a missing collection (the CLI's search,
    # stats, delete, the graphs): opening one is then an InputError naming the existing
    # ones. Not part of equality: a reader shares the instance a writer opened.
    create: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        if self.fusion not in FUSION_METHODS:
            raise ConfigError(f"fusion must be one of {FUSION_METHODS}, got {self.fusion!r}")
        if not 0.0 <= self.vector_weight <= 1.0:
            raise ConfigError(f"vector_weight must be in [0, 1], got {self.vector_weight}")
        if not 1 <= self.chroma_port <= 65535:
            raise ConfigError(f"chroma_port must be in 1..65535, got {self.chroma_port}")
        if self.candidates < 1:
            raise ConfigError(f"candidates must be >= 1, got {self.candidates}")
        replicas = checked_database(self.database_url, self.read_urls, self.chroma_host)
        object.__setattr__(self, "read_urls", replicas)  # a tuple, each URL checked


class KnowledgeBase:
    """A knowledge base: open it once, use it from several threads. A facade: the store
    (``store.opened_store``), the writer (``ingest.kb_writer``), the snapshot
    (``index.snapshot_cache``), the search pipeline (``search.pipeline``) and the
    statistics (``index.kb_stats``) do the work."""

    def __init__(
        self, config: KBConfig | None = None, *, embedding_model: EmbeddingModel | None = None
    ) -> None:
        self.config = config or KBConfig()
        self.home = data_home(self.config.home, create=self.config.create)
        self.location = StoreLocation(
            path=chroma_path(self.home), host=self.config.chroma_host, port=self.config.chroma_port
        )
        no_store = not self.config.database_url and never_written(self.location)
        if not self.config.create and no_store:  # a read creates nothing
            raise no_collection(self.config.collection, self.location.describe())
        self.model = embedding_model or make_embedding_model(
            self.config.embedding, base_url=self.config.embedding_base_url
        )
        self.tokenizer = make_tokenizer(self.config.chinese_tokenizer, stem=self.config.stem)
        # One lock for writers and snapshot rebuilds: a search never sees half an ingest
        # made by this instance, and two threads never rebuild the same snapshot.
        self._lock = threading.RLock()
        self.store = OpenedStore(self.home, self.location, self.config, self.model, self._lock)
        self.chunks, self.registry = self.store.chunks, self.store.registry
        self._cache = EmbeddingCache(embedding_cache_path(self.home))
        # Every write, and the writer's lock it takes (tools.kb.ingest.kb_writer).
        self.writer = KbWriter(
            store=self.store,
            model=self.model,
            cache=self._cache,
            lock=self._lock,
            lock_dir=write_lock_dir(self.home),
            chunking=self.config.chunking,
            collection=self.config.collection,
        )
        self.ingester = self.writer.ingester  # the document API embeds ahead with it (warm)
        self._snapshots = SnapshotCache(
            registry=self.registry,
            chunks=self.chunks,
            tokenizer=self.tokenizer,
            tokenizer_tag=f"{self.config.chinese_tokenizer}{'-snowball' if self.config.stem else ''}",
            directory=bm25_cache_dir(self.home),
            prefix=f"{self.config.collection}.",
        )
        self._latest = LatestSnapshot(self._snapshots, self._lock, self.store.follow_writers)
        # The search side, with its own caches and their lock (tools.kb.search.pipeline).
        self.pipeline = SearchPipeline(
            snapshot=self._latest,
            model=self.model,
            chunks=self.chunks,
            tokenizer=self.tokenizer,
            ranking=Ranking(self.config.candidates, self.config.fusion, self.config.vector_weight),
        )
        self.store.on_reopen = self.pipeline.forget_queries
        self.store.follow_from_now()  # other processes' commits (the CLI beside a server)

    def describe_store(self) -> str:
        """Where the knowledge base lives, as messages name it (no password)."""
        return self.store.describe()

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        self._cache.close()
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop(self) -> None:
        """Delete both collections (used by throw-away evaluation indexes)."""
        self.writer.drop(forget=self._snapshots.forget)

    # -- ingestion (``ingest.kb_writer``) -----------------------------------------------

    def ingest(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        prune: bool = True,
        progress: ProgressFn | None = None,
        limits: LoadLimits | None = None,
        follow_links: bool = False,
        acl: ACL = (),
    ) -> IngestReport:
        """Add new documents, replace changed ones, skip unchanged ones.

        Each file keeps one doc_id whichever route reaches it, and two files never share
        one (``tools.kb.ingest.identity``). With ``prune``, documents previously ingested from a
        named directory whose files are gone (or can no longer be read) are deleted;
        documents of other folders are never touched. ``limits`` bound what one file may
        cost (default ``LoadLimits.from_env()``); a file beyond them, or one that cannot
        be read, is skipped with the reason and the rest go on. Symbolic links out of a
        named folder are followed only with ``follow_links``. ``acl``
        (``tools.access.acl.parse_acl``) says who may read the files; a folder's ``.acl``
        overrides it below that folder. A changed ACL rewrites the chunks (no re-embedding).
        """
        return self.writer.ingest(
            paths, prune=prune, progress=progress, limits=limits, follow_links=follow_links, acl=acl
        )

    def ingest_documents(
        self,
        docs: Sequence[SourceDocument | FileBytes],
        *,
        progress: ProgressFn | None = None,
        expected: Mapping[str, str] | None = None,
    ) -> IngestReport:
        """Ingest documents that do not come from the named files (evaluation corpora, the
        document API's originals: a ``FileBytes`` is parsed only when its version changed).
        ``expected``: the versions seen before they were embedded (``Ingester.ingest``)."""
        return self.writer.ingest_documents(docs, progress=progress, expected=expected)

    def delete(self, doc_id: str) -> int:
        """Remove a document from the vector and BM25 indexes; returns chunks removed."""
        return self.writer.delete(doc_id)

    # -- retrieval -----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The active chunks and BM25 index, rebuilt only when the registry changed."""
        return self._latest()

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
        """Top ``k`` chunks for ``query`` (``SearchPipeline.search``)."""
        return self.pipeline.search(
            query, k, mode=mode, doc_ids=doc_ids, sources=sources, reader=reader
        )

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
        """Top ``k`` chunks and the calibrated probability that they answer ``query``
        (``SearchPipeline.retrieve``)."""
        return self.pipeline.retrieve(
            query,
            k,
            mode=mode,
            doc_ids=doc_ids,
            sources=sources,
            exclude_doc_ids=exclude_doc_ids,
            vector_text=vector_text,
            reader=reader,
        )

    def retrieve_many(
        self,
        queries: Sequence[str],
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        anchor: str | None = None,
        reader: Reader | None = None,
    ) -> list[Retrieval]:
        """``retrieve`` for each query, their embeddings in one batch
        (``SearchPipeline.retrieve_many``: ``anchor``)."""
        return self.pipeline.retrieve_many(queries, k, mode=mode, anchor=anchor, reader=reader)

    def probe(self, query: str, *, reader: Reader | None = None) -> float:
        """'Does the KB answer this?' (``SearchPipeline.probe``)."""
        return self.pipeline.probe(query, reader=reader)

    def forget_queries(self) -> None:
        """Drop the query vectors and searches kept for a run's next node."""
        self.pipeline.forget_queries()

    # -- statistics ----------------------------------------------------------------------

    def languages(self) -> dict[str, int]:
        """Active chunks per detected language (``zh``/``en``), the KB's language mix."""
        return dict(self.snapshot().language_counts)

    def stats(self) -> dict[str, Any]:
        """What ``kb stats`` shows (``index.kb_stats``)."""
        return kb_stats(
            self.snapshot(),
            collection=self.config.collection,
            store=self.store,
            model=self.model,
            cache=self._cache,
        )
