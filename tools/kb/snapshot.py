"""The search snapshot: the active chunks at one registry generation, with their BM25 index.

BM25 is derived from Chroma (active chunks only), never written beside it, so it cannot
drift from the store. A snapshot is kept in memory and pickled under the data home,
keyed by the registry generation: a process that opens the knowledge base after an
ingest loads it instead of re-reading every chunk, and any commit (by any process)
makes it stale by changing the generation.
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools.kb.bm25 import BM25Index
from tools.kb.registry import Registry, active_versions
from tools.kb.store import ChunkStore

SNAPSHOT_ATTEMPTS = 3
Tokenizer = Callable[[str], list[str]]
log = logging.getLogger("hybrid_rag.kb")


@dataclass
class Snapshot:
    """Active chunks at one registry generation, with their BM25 index."""

    generation: str  # "" when built while the store kept moving: rebuild on next use
    active: dict[str, str]  # doc_id -> version
    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    position: dict[str, int]  # chunk id -> index into ids/texts/metadatas
    bm25: BM25Index

    @functools.cached_property
    def languages(self) -> np.ndarray:
        """Each chunk's language (``lang``, stored at ingest; ``?`` where absent)."""
        return np.array([str(m.get("lang", "?")) for m in self.metadatas], dtype=object)

    @functools.cached_property
    def language_names(self) -> tuple[str, ...]:
        """The distinct chunk languages, sorted (once per snapshot: every search asks)."""
        return tuple(sorted({str(m.get("lang", "?")) for m in self.metadatas}))


class SnapshotCache:
    """Serves the current snapshot; callers serialise access (the KB's lock)."""

    def __init__(
        self,
        *,
        registry: Registry,
        chunks: ChunkStore,
        tokenizer: Tokenizer,
        tokenizer_tag: str,
        directory: Path,
        prefix: str,
    ) -> None:
        self._registry = registry
        self._chunks = chunks
        self._tokenizer = tokenizer
        self._directory = directory
        self._prefix = prefix  # "<collection>." — every file of this collection
        self._tokenizer_tag = tokenizer_tag  # files of another tokenizer never match
        self._current: Snapshot | None = None

    def current(self) -> Snapshot:
        """The snapshot at the registry's generation, rebuilt only when it changed."""
        generation = self._registry.generation()
        if self._current is not None and self._current.generation == generation:
            return self._current
        self._current = self._load(generation) or self._consistent(generation)
        return self._current

    def forget(self) -> None:
        """Drop the in-memory and on-disk snapshots (the collection was dropped)."""
        for stale in self._directory.glob(f"{self._prefix}*.pkl"):
            stale.unlink(missing_ok=True)
        self._current = None

    def _file(self, generation: str) -> Path:
        return self._directory / f"{self._prefix}{self._tokenizer_tag}.{generation}.pkl"

    def _consistent(self, generation: str) -> Snapshot:
        """Build from registry + chunks read at one generation.

        Another process may commit (and delete old chunks) between reading the registry
        and reading the chunks; the generation changes then, and the read is repeated.
        """
        for _ in range(SNAPSHOT_ATTEMPTS):
            snap = self._build(generation)
            now = self._registry.generation()
            if now == generation:
                self._save(snap)
                return snap
            generation = now
        # Still moving: serve this build, but mark it so the next query rebuilds it.
        snap.generation = ""
        return snap

    def _build(self, generation: str) -> Snapshot:
        active = active_versions(self._registry.records())
        ids: list[str] = []
        texts: list[str] = []
        metas: list[dict[str, Any]] = []
        for chunk in self._chunks.scan():
            if active.get(str(chunk.metadata.get("doc_id"))) == chunk.metadata.get("version"):
                ids.append(chunk.chunk_id)
                texts.append(chunk.text)
                metas.append(chunk.metadata)
        index_texts = [f"{m.get('heading', '')}\n{t}" for t, m in zip(texts, metas, strict=True)]
        return Snapshot(
            generation=generation,
            active=active,
            ids=ids,
            texts=texts,
            metadatas=metas,
            position={cid: i for i, cid in enumerate(ids)},
            bm25=BM25Index(index_texts, self._tokenizer),
        )

    def _save(self, snap: Snapshot) -> None:
        # A cache: failing to write it (a race with another writer, a full disk) only
        # means the next process rebuilds from Chroma.
        target = self._file(snap.generation)
        tmp = target.with_suffix(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        tokenizer, snap.bm25.tokenizer = snap.bm25.tokenizer, None  # type: ignore[assignment]
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            for old in [
                *self._directory.glob(f"{self._prefix}*.pkl"),
                *self._directory.glob(f"{self._prefix}*.tmp-*"),
            ]:
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

    def _load(self, generation: str) -> Snapshot | None:
        path = self._file(generation)
        if not generation or not path.exists():
            return None
        try:
            with path.open("rb") as fh:
                snap = pickle.load(fh)  # our own file under the data home
        except Exception as exc:  # truncated, older class layout, ...: rebuild from Chroma
            log.info("ignoring the unreadable BM25 cache %s: %s", path.name, exc)
            return None
        if not isinstance(snap, Snapshot) or snap.generation != generation:
            return None
        snap.bm25.tokenizer = self._tokenizer
        return snap
