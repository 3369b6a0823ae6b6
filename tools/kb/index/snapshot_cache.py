"""The snapshot cache: serves the current search snapshot of one collection.

It follows the registry (``Registry.changes`` since the snapshot's sequence number),
updates the snapshot and the lexical index incrementally (``tools.kb.index.snapshot``),
and saves the snapshot under the data home (a pickle, with its texts beside it:
``tools.kb.index.text_column``) so that a process opening the knowledge base later starts
from it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import uuid
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from tools.kb.index.chunk_table import ChunkTable, release_freed_memory
from tools.kb.index.lexical import LexicalIndex
from tools.kb.index.snapshot import (
    FORMAT,
    Snapshot,
    Tokenizer,
    built,
    compact,
    moved,
    with_changes,
)
from tools.kb.index.text_column import reading_from
from tools.kb.store.protocol import ChunkStore, Registry, active_versions

SNAPSHOT_ATTEMPTS = 3
SAVE_CHANGED = 0.1  # pickle again once this share of the documents changed since the file
log = logging.getLogger("hybrid_rag.kb")


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
        snap = self._consistent(base)
        self.lexical.sync(snap.generation, snap.active, snap.indexed)
        snap.bm25 = self.lexical
        if base is None or snap.changed > SAVE_CHANGED * max(1, len(snap.active)):
            snap = compact(snap)
            snap.changed = 0
            snap = self._save(snap)
            self._current = base = None
            release_freed_memory()  # the texts held as strings until the save
        self._current = snap
        return snap

    def forget(self) -> None:
        """Drop the in-memory and on-disk snapshots (the collection was dropped)."""
        for pattern in ("*.pkl", "*.texts"):
            for stale in self._directory.glob(f"{self._prefix}{pattern}"):
                stale.unlink(missing_ok=True)
        self._current = None
        if self._lexical is not None:
            shutil.rmtree(self._lexical.directory, ignore_errors=True)
            self._lexical = None

    def _file(self, generation: str) -> Path:
        return self._directory / f"{self._prefix}{self._tokenizer_tag}.{generation}.pkl"

    def _consistent(self, base: Snapshot | None) -> Snapshot:
        """Build (or update ``base``) from registry + chunks read at one generation.

        Another process may commit (and delete old chunks) between reading the registry
        and reading the chunks; the generation changes then, and the update is repeated
        (from what was read: only the documents that changed again are read again). Still
        moving after that, the snapshot is served as read: it names the generation read
        with its sequence number, so the next search updates it from there (a changes
        read, never a whole one).
        """
        snap = base
        for _ in range(SNAPSHOT_ATTEMPTS):
            snap = self._build() if snap is None else self._update(snap)
            if self._registry.generation() == snap.generation:
                break
        assert snap is not None
        return snap

    def _build(self) -> Snapshot:
        read = self._registry.changes(None)
        return built(read.generation, active_versions(read.records), read.seq, self._chunks.scan())

    def _update(self, old: Snapshot) -> Snapshot:
        """``old`` with the documents committed since ``old.seq`` read again (the store it
        follows checked; the generation kept is the one read with that seq)."""
        read = self._registry.changes(old.seq, old.generation)
        touched: Collection[str]
        if read.complete:
            active = active_versions(read.records)
            touched = old.active.keys() | active.keys()
        else:
            active, touched = moved(old.active, read.records), read.records.keys()
        changed = sorted(d for d in touched if old.active.get(d) != active.get(d))
        if not changed:
            return replace(old, generation=read.generation, active=active, seq=read.seq)
        fresh = self._chunks.document_chunks([d for d in changed if d in active])
        return with_changes(old, read.generation, active, read.seq, changed, fresh)

    def _save(self, snap: Snapshot) -> Snapshot:
        """``snap`` written under the data home, its texts read from there from now on
        (``TextColumn``); as it was when the files cannot be written."""
        # A cache: failing to write it (a race with another writer, a full disk) only
        # means the next process reads the store again.
        target = self._file(snap.generation)
        texts = target.with_name(f"{target.name.removesuffix('.pkl')}.texts")
        tmp = target.with_suffix(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            for old in [
                *self._directory.glob(f"{self._prefix}*.pkl"),
                *self._directory.glob(f"{self._prefix}*.texts"),
                *self._directory.glob(f"{self._prefix}*.tmp-*"),
            ]:
                if old not in (target, texts):
                    old.unlink(missing_ok=True)
            # The texts first: a pickle on disk always finds its texts file.
            saved = replace(snap, table=replace(snap.table, texts=snap.table.texts.saved(texts)))
            with tmp.open("wb") as fh:
                # The fields alone (``replace``): the cached masks and groups are not saved.
                pickle.dump(replace(saved, bm25=None), fh, pickle.HIGHEST_PROTOCOL)  # type: ignore[arg-type]
            tmp.replace(target)  # atomic: a reader sees the old file or the whole new one
            return saved
        except OSError as exc:
            log.warning("could not save the search snapshot %s: %s", target.name, exc)
            tmp.unlink(missing_ok=True)
            return snap

    def _load(self) -> Snapshot | None:
        """The saved snapshot, of whatever generation (updated from there)."""
        for path in sorted(self._directory.glob(f"{self._prefix}{self._tokenizer_tag}.*.pkl")):
            try:
                with path.open("rb") as fh, reading_from(path.parent):
                    snap = pickle.load(fh)  # our own file under the data home
            except Exception as exc:  # truncated, older class layout, ...: read the store
                log.info("ignoring the unreadable search snapshot %s: %s", path.name, exc)
                continue
            # ``vars``: the class's defaults would answer for an older file's missing fields.
            if (
                isinstance(snap, Snapshot)
                and vars(snap).get("format") == FORMAT
                and isinstance(vars(snap).get("table"), ChunkTable)
                and snap.generation
            ):
                snap.bm25 = self.lexical
                return snap
            log.info("ignoring the search snapshot %s of another format", path.name)
        return None


class LatestSnapshot:
    """The snapshot a search reads: under the knowledge base's ``lock`` (an ingest on its
    instance may be moving the generation), after ``follow`` has followed other
    processes' commits (it returns the generation it read, or None)."""

    def __init__(
        self,
        cache: SnapshotCache,
        lock: contextlib.AbstractContextManager[Any],
        follow: Callable[[], str | None],
    ) -> None:
        self._cache, self._lock, self._follow = cache, lock, follow

    def __call__(self) -> Snapshot:
        with self._lock:
            return self._cache.current(self._follow())
