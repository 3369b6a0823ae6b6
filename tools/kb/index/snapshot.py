"""The search snapshot: the active chunks at one registry generation, with their BM25 index.

The snapshot (chunk ids, texts, metadata) and the lexical index (``tools.kb.index.lexical``, on
disk) are derived from Chroma (active chunks only), never written beside it, so they
cannot drift from the store. A commit (by any process) changes the registry's generation;
the next search then brings both up to date *incrementally*: only the documents whose
active version moved are read from Chroma (``ChunkStore.document_chunks``), removed and
added. A full read of the store happens once, when no snapshot exists. The snapshot is
pickled under the data home after a full read (and after a large change), so a process
that opens the knowledge base later starts from it and applies the changes since.
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tools.kb.index.lexical import IndexedChunk, LexicalIndex
from tools.kb.store.chroma import ChunkStore
from tools.kb.store.chroma_pages import StoredChunk
from tools.kb.store.registry import Registry, active_versions

SNAPSHOT_ATTEMPTS = 3
SAVE_CHANGED = 0.1  # pickle again once this share of the documents changed since the file
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
    bm25: LexicalIndex  # not pickled: the index is on disk
    changed: int = 0  # documents changed since the snapshot last read in full or saved
    # Each chunk's unit vector (float32, one row per chunk): a restricted search's exact
    # comparisons and the cosines of the lexical side's candidates are read here, not
    # from the store (``tools.kb.search.candidates``).
    vectors: np.ndarray | None = None

    @functools.cached_property
    def languages(self) -> np.ndarray:
        """Each chunk's language (``lang``, stored at ingest; ``?`` where absent)."""
        return np.array([str(m.get("lang", "?")) for m in self.metadatas], dtype=object)

    @functools.cached_property
    def language_names(self) -> tuple[str, ...]:
        """The distinct chunk languages, sorted (once per snapshot: every search asks)."""
        return tuple(sorted({str(m.get("lang", "?")) for m in self.metadatas}))

    @functools.cached_property
    def acl_table(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """Each chunk's access list as a code into the distinct access lists (which a
        reader's mask is computed on: a handful of strings, not a million chunks)."""
        table: dict[str, int] = {}
        codes = [table.setdefault(str(m.get("acl") or ""), len(table)) for m in self.metadatas]
        return np.asarray(codes, dtype=np.int32), tuple(table)

    @functools.cached_property
    def by_document(self) -> dict[str, list[int]]:
        """Each document's chunk positions."""
        out: dict[str, list[int]] = {}
        for i, m in enumerate(self.metadatas):
            out.setdefault(str(m.get("doc_id", "")), []).append(i)
        return out

    def language_mask(self, language: str) -> np.ndarray:
        """Which chunks are in ``language`` (kept per snapshot)."""
        masks: dict[str, np.ndarray] = self.__dict__.setdefault("_language_masks", {})
        if language not in masks:
            masks[language] = self.languages == language
        return masks[language]

    def cosines(self, ids: Sequence[str], query_vector: np.ndarray) -> dict[str, float]:
        """Cosine similarity of ``query_vector`` to the chunks ``ids`` (those in the snapshot)."""
        rows = [(c, i) for c in ids if (i := self.position.get(c)) is not None]
        if not rows or self.vectors is None or not len(self.vectors):
            return {}
        q = query_vector / (np.linalg.norm(query_vector) or 1.0)
        sims = self.vectors[[i for _, i in rows]] @ q.astype(np.float32)
        return {c: float(v) for (c, _), v in zip(rows, sims, strict=True)}

    def vectors_of(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The unit vectors of ``ids`` found in the snapshot, with those ids, in order."""
        found = [c for c in ids if c in self.position]
        if self.vectors is None or not found:
            return [], np.zeros((0, 0), dtype=np.float32)
        return found, self.vectors[[self.position[c] for c in found]]

    def indexed(self, doc_ids: Sequence[str]) -> Iterator[IndexedChunk]:
        """The chunks of some documents as the lexical index takes them."""
        for doc_id in doc_ids:
            for i in self.by_document.get(doc_id, []):
                m = self.metadatas[i]
                text = f"{m.get('heading', '')}\n{self.texts[i]}"
                yield IndexedChunk(self.ids[i], doc_id, text, m)


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
        self._lexical: LexicalIndex | None = None

    @property
    def lexical(self) -> LexicalIndex:
        """The collection's lexical index (opened on first use)."""
        if self._lexical is None:
            folder = self._directory / f"{self._prefix}{self._tokenizer_tag}.tantivy"
            self._lexical = LexicalIndex(folder, self._tokenizer, self._tokenizer_tag)
        return self._lexical

    def current(self, generation: str | None = None) -> Snapshot:
        """The snapshot at the registry's generation (``generation``: just read by the
        caller), brought up to date by the documents that changed (a full read only when
        there is no snapshot at all)."""
        generation = self._registry.generation() if generation is None else generation
        if self._current is not None and self._current.generation == generation:
            return self._current
        base = self._current or self._load()
        snap = self._consistent(generation, base)
        self.lexical.sync(snap.generation, snap.active, snap.indexed)
        snap.bm25 = self.lexical
        if base is None or snap.changed > SAVE_CHANGED * max(1, len(snap.active)):
            self._save(snap)
            snap.changed = 0
        self._current = snap
        return snap

    def forget(self) -> None:
        """Drop the in-memory and on-disk snapshots (the collection was dropped)."""
        for stale in self._directory.glob(f"{self._prefix}*.pkl"):
            stale.unlink(missing_ok=True)
        self._current = None
        if self._lexical is not None:
            shutil.rmtree(self._lexical.directory, ignore_errors=True)
            self._lexical = None

    def _file(self, generation: str) -> Path:
        return self._directory / f"{self._prefix}{self._tokenizer_tag}.{generation}.pkl"

    def _consistent(self, generation: str, base: Snapshot | None) -> Snapshot:
        """Build (or update ``base``) from registry + chunks read at one generation.

        Another process may commit (and delete old chunks) between reading the registry
        and reading the chunks; the generation changes then, and the update is repeated
        (from what was read: only the documents that changed again are read again).
        """
        snap = base
        for _ in range(SNAPSHOT_ATTEMPTS):
            snap = self._build(generation) if snap is None else self._update(snap, generation)
            now = self._registry.generation()
            if now == generation:
                return snap
            generation = now
        # Still moving: serve this one, but mark it so the next query updates it.
        assert snap is not None
        snap.generation = ""
        return snap

    def _build(self, generation: str) -> Snapshot:
        active = active_versions(self._registry.records())
        return _assemble(generation, active, [], self._chunks.scan(), 0)

    def _update(self, old: Snapshot, generation: str) -> Snapshot:
        """``old`` with the documents whose active version changed read again."""
        active = active_versions(self._registry.records())
        changed = {
            d for d in old.active.keys() | active.keys() if old.active.get(d) != active.get(d)
        }
        if not changed:
            return replace(old, generation=generation, active=active)
        kept = [i for i, m in enumerate(old.metadatas) if m.get("doc_id") not in changed]
        keep = [StoredChunk(old.ids[i], old.texts[i], old.metadatas[i]) for i in kept]
        fresh = self._chunks.document_chunks(sorted(d for d in changed if d in active))
        base = old.vectors[kept] if old.vectors is not None and len(kept) else None
        return _assemble(generation, active, keep, fresh, old.changed + len(changed), base)

    def _save(self, snap: Snapshot) -> None:
        # A cache: failing to write it (a race with another writer, a full disk) only
        # means the next process reads the store again.
        target = self._file(snap.generation)
        tmp = target.with_suffix(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        lexical, snap.bm25 = snap.bm25, None  # type: ignore[assignment]
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
            log.warning("could not save the search snapshot %s: %s", target.name, exc)
            tmp.unlink(missing_ok=True)
        finally:
            snap.bm25 = lexical

    def _load(self) -> Snapshot | None:
        """The saved snapshot, of whatever generation (updated from there)."""
        for path in sorted(self._directory.glob(f"{self._prefix}{self._tokenizer_tag}.*.pkl")):
            try:
                with path.open("rb") as fh:
                    snap = pickle.load(fh)  # our own file under the data home
            except Exception as exc:  # truncated, older class layout, ...: read the store
                log.info("ignoring the unreadable search snapshot %s: %s", path.name, exc)
                continue
            if isinstance(snap, Snapshot) and snap.generation and snap.vectors is not None:
                snap.bm25 = self.lexical
                return snap
        return None


def _assemble(
    generation: str,
    active: dict[str, str],
    kept: list[StoredChunk],
    read: Iterable[StoredChunk],
    changed: int,
    kept_vectors: np.ndarray | None = None,
) -> Snapshot:
    """A snapshot of ``kept`` (their unit vectors ``kept_vectors``; None: in the chunks)
    and the chunks of ``read`` that belong to an active version."""
    fresh = [
        c for c in read if active.get(str(c.metadata.get("doc_id"))) == c.metadata.get("version")
    ]
    chunks = [*kept, *fresh]
    ids = [c.chunk_id for c in chunks]
    parts = [] if kept_vectors is None else [kept_vectors]
    parts.append(_unit_rows([c.vector for c in (fresh if kept_vectors is not None else chunks)]))
    parts = [p for p in parts if len(p)]
    return Snapshot(
        generation=generation,
        active=active,
        ids=ids,
        texts=[c.text for c in chunks],
        metadatas=[c.metadata for c in chunks],
        position={cid: i for i, cid in enumerate(ids)},
        bm25=None,  # type: ignore[arg-type]  # set by the cache
        changed=changed,
        vectors=np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32),
    )


def _unit_rows(vectors: Sequence[Any]) -> np.ndarray:
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    mat = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms
