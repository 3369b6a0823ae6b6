"""The search snapshot: the active chunks at one registry generation, with their BM25 index.

The snapshot (chunk ids, texts, metadata and vectors, in columns: ``tools.kb.index.chunk_table``)
and the lexical index (``tools.kb.index.lexical``, on disk) are derived from Chroma (active
chunks only), never written beside it, so they cannot drift from the store. A commit (by any process) changes the registry's generation;
the next search then brings both up to date *incrementally*: only the registry records
committed since the snapshot's sequence number are read (``Registry.changes``), and only
the documents whose active version moved are read from Chroma
(``ChunkStore.document_chunks``); their old rows are masked out and the new ones appended,
so a change costs its documents and a few array copies, not a walk over every chunk. A
full read of the store happens once, when no snapshot exists. The snapshot is pickled under the data home after a full read (and after a large change), so a process
that opens the knowledge base later starts from it and applies the changes since.
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
import shutil
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tools.kb.index.chunk_table import (
    NONE,
    ChunkTable,
    Rows,
    appended,
    compacted,
    documents_of,
    killed,
    release_freed_memory,
)
from tools.kb.index.lexical import IndexedChunk, LexicalIndex
from tools.kb.store.chroma import ChunkStore
from tools.kb.store.chroma_pages import StoredChunk
from tools.kb.store.registry import DocRecord, Registry, active_versions

SNAPSHOT_ATTEMPTS = 3
SAVE_CHANGED = 0.1  # pickle again once this share of the documents changed since the file
DEAD_SHARE = 0.25  # rows of changed documents kept masked until this share, then compacted
FORMAT = 2  # of the saved snapshot (2: columns; 1, lists of dicts, is read again)
Tokenizer = Callable[[str], list[str]]
log = logging.getLogger("hybrid_rag.kb")


@dataclass
class Snapshot:
    """Active chunks at one registry generation, with their BM25 index.

    The chunks are the live rows of a :class:`ChunkTable` (``tools.kb.index.chunk_table``):
    ``position`` maps a live chunk id to its row, and ``ids``, ``texts``, ``metadatas``
    and ``vectors`` are indexed by row. ``ids``, ``texts`` and ``metadatas`` are
    read-only views: counted and iterated over the live chunks, each metadata dict
    built on access. Loops over every chunk use the columns (``language_mask``,
    ``acl_table``, ``document_mask``), never the dicts."""

    generation: str  # read with ``seq``: the commit this snapshot follows
    active: dict[str, str]  # doc_id -> version
    table: ChunkTable
    position: dict[str, int]  # live chunk id -> row
    by_document: dict[str, np.ndarray]  # doc_id -> its live rows
    bm25: LexicalIndex  # not pickled: the index is on disk
    changed: int = 0  # documents changed since the snapshot last read in full or saved
    seq: int = 0  # the registry's sequence number this snapshot is read up to
    format: int = FORMAT  # a saved snapshot of another format is read again from the store

    @property
    def ids(self) -> Rows[str]:
        return Rows(self.table, self.table.ids.__getitem__, len(self.position))

    @property
    def texts(self) -> Rows[str]:
        return Rows(self.table, self.table.texts.__getitem__, len(self.position))

    @property
    def metadatas(self) -> Rows[dict[str, Any]]:
        return Rows(self.table, self.table.metadata, len(self.position))

    @property
    def vectors(self) -> np.ndarray:
        """Each row's unit vector (float32): a restricted search's exact comparisons and
        the cosines of the lexical side's candidates are read here, not from the store."""
        return self.table.vectors

    @property
    def live(self) -> np.ndarray:
        """Which rows are current chunks."""
        return self.table.live

    @functools.cached_property
    def language_counts(self) -> dict[str, int]:
        """Live chunks per language (``lang``, stored at ingest; ``?`` where absent)."""
        return self.languages_in(self.table.live)

    def languages_in(self, mask: np.ndarray) -> dict[str, int]:
        """The chunks of the rows ``mask`` selects, per language."""
        codes = self.table.lang[mask]
        names = self.table.tables.langs.values
        counts = np.bincount(codes + 1, minlength=len(names) + 1)
        out: dict[str, int] = {}
        for code, n in enumerate(counts.tolist()):
            if n:
                name = "?" if code == 0 else str(names[code - 1])
                out[name] = out.get(name, 0) + n
        return out

    @functools.cached_property
    def language_names(self) -> tuple[str, ...]:
        """The distinct chunk languages, sorted (once per snapshot: every search asks)."""
        return tuple(sorted(self.language_counts))

    @functools.cached_property
    def acl_table(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """Each row's access list as a code into the distinct access lists (which a
        reader's mask is computed on: a handful of strings, not a million chunks)."""
        t = self.table.tables
        per_doc = np.asarray(t.doc_acl, dtype=np.int32)
        return per_doc[self.table.doc], tuple(t.acls.values)

    def language_mask(self, language: str) -> np.ndarray:
        """Which rows are live chunks in ``language`` (kept per snapshot)."""
        masks: dict[str, np.ndarray] = self.__dict__.setdefault("_language_masks", {})
        if language not in masks:
            names = self.table.tables.langs.values
            wanted = [i for i, n in enumerate(names) if str(n) == language]
            if language == "?":
                wanted.append(NONE)
            masks[language] = np.isin(self.table.lang, wanted) & self.table.live
        return masks[language]

    def document_mask(self, allows: Callable[[str, str], bool]) -> np.ndarray:
        """Which rows are live chunks of documents ``allows(doc_id, source)`` accepts
        (decided once per document)."""
        t = self.table.tables
        # The tables may be growing (an update in another thread): this snapshot's codes
        # are below the length both lists had when it was made.
        n = min(len(t.doc_ids), len(t.doc_source))
        per_doc = np.fromiter(
            (allows(t.doc_ids[i], t.doc_source[i]) for i in range(n)), dtype=bool, count=n
        )
        return per_doc[self.table.doc] & self.table.live

    def cosines(self, ids: Sequence[str], query_vector: np.ndarray) -> dict[str, float]:
        """Cosine similarity of ``query_vector`` to the chunks ``ids`` (those in the snapshot)."""
        rows = [(c, i) for c in ids if (i := self.position.get(c)) is not None]
        if not rows or not len(self.vectors):
            return {}
        q = query_vector / (np.linalg.norm(query_vector) or 1.0)
        sims = self.vectors[[i for _, i in rows]] @ q.astype(np.float32)
        return {c: float(v) for (c, _), v in zip(rows, sims, strict=True)}

    def vectors_of(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The unit vectors of ``ids`` found in the snapshot, with those ids, in order."""
        found = [c for c in ids if c in self.position]
        if not found:
            return [], np.zeros((0, 0), dtype=np.float32)
        return found, self.vectors[[self.position[c] for c in found]]

    def indexed(self, doc_ids: Sequence[str]) -> Iterator[IndexedChunk]:
        """The chunks of some documents as the lexical index takes them."""
        for doc_id in doc_ids:
            for i in self.by_document.get(doc_id, []):
                m = self.table.metadata(i)
                text = f"{m.get('heading', '')}\n{self.table.texts[i]}"
                yield IndexedChunk(self.table.ids[i], doc_id, text, m)


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
            self._save(snap)
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

    def _save(self, snap: Snapshot) -> None:
        # A cache: failing to write it (a race with another writer, a full disk) only
        # means the next process reads the store again.
        target = self._file(snap.generation)
        tmp = target.with_suffix(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            for old in [
                *self._directory.glob(f"{self._prefix}*.pkl"),
                *self._directory.glob(f"{self._prefix}*.tmp-*"),
            ]:
                if old != target:
                    old.unlink(missing_ok=True)
            with tmp.open("wb") as fh:
                # The fields alone (``replace``): the cached masks and subsets are not saved.
                pickle.dump(replace(snap, bm25=None), fh, pickle.HIGHEST_PROTOCOL)  # type: ignore[arg-type]
            tmp.replace(target)  # atomic: a reader sees the old file or the whole new one
        except OSError as exc:
            log.warning("could not save the search snapshot %s: %s", target.name, exc)
            tmp.unlink(missing_ok=True)

    def _load(self) -> Snapshot | None:
        """The saved snapshot, of whatever generation (updated from there)."""
        for path in sorted(self._directory.glob(f"{self._prefix}{self._tokenizer_tag}.*.pkl")):
            try:
                with path.open("rb") as fh:
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


def moved(active: dict[str, str], records: dict[str, DocRecord]) -> dict[str, str]:
    """``active`` (doc id -> version) after the registry's ``records`` (tombstones drop)."""
    out = active.copy()
    for doc_id, record in records.items():
        if record.get("version"):
            out[doc_id] = str(record["version"])
        else:
            out.pop(doc_id, None)
    return out


def _current(active: dict[str, str], read: Iterable[StoredChunk]) -> Iterator[StoredChunk]:
    """The chunks of ``read`` that belong to an active version."""
    for c in read:
        if active.get(str(c.metadata.get("doc_id"))) == c.metadata.get("version"):
            yield c


def built(
    generation: str, active: dict[str, str], seq: int, read: Iterable[StoredChunk]
) -> Snapshot:
    """A snapshot of the chunks of ``read`` that belong to an active version."""
    table = appended(None, _current(active, read))
    snap = _indexed(generation, active, seq, table, 0)
    release_freed_memory()
    return snap


def _indexed(
    generation: str, active: dict[str, str], seq: int, table: ChunkTable, changed: int
) -> Snapshot:
    """A snapshot of ``table``'s rows, all live, with its position and document maps."""
    return Snapshot(
        generation=generation,
        active=active,
        table=table,
        position={cid: i for i, cid in enumerate(table.ids)},
        by_document=documents_of(table, np.arange(table.rows)),
        bm25=None,  # type: ignore[arg-type]  # set by the cache
        changed=changed,
        seq=seq,
    )


def with_changes(
    old: Snapshot,
    generation: str,
    active: dict[str, str],
    seq: int,
    changed: Sequence[str],
    read: Iterable[StoredChunk],
) -> Snapshot:
    """``old`` with the rows of the ``changed`` documents masked out and their active
    chunks (of ``read``) appended: work in the changed documents, plus copies of the
    columns (no walk over every chunk); compacted once the dead rows pass ``DEAD_SHARE``."""
    dead = [old.by_document[d] for d in changed if d in old.by_document]
    rows = np.concatenate(dead) if dead else np.zeros(0, dtype=np.int64)
    table = killed(old.table, rows)
    start = table.rows
    table = appended(table, _current(active, read))
    position = old.position.copy()  # not dict(): after deletions that re-inserts, 5x slower
    for i in rows.tolist():
        position.pop(old.table.ids[i], None)
    position.update(zip(table.ids[start:], range(start, table.rows), strict=True))
    by_document = old.by_document.copy()
    for d in changed:
        by_document.pop(d, None)
    by_document.update(documents_of(table, np.arange(start, table.rows)))
    snap = Snapshot(generation=generation, active=active, table=table, position=position,
                    by_document=by_document, bm25=old.bm25, changed=old.changed + len(changed),
                    seq=seq)  # fmt: skip
    if table.rows - len(position) > DEAD_SHARE * max(1, table.rows):
        snap = compact(snap)
    return snap


def compact(snap: Snapshot) -> Snapshot:
    """The snapshot without its dead rows (rows renumbered)."""
    if len(snap.position) == snap.table.rows:
        return snap
    again = _indexed(snap.generation, snap.active, snap.seq, compacted(snap.table), snap.changed)
    again.bm25 = snap.bm25
    release_freed_memory()
    return again
