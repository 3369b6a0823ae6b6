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
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
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
from tools.kb.store.protocol import DocRecord, StoredChunk

DEAD_SHARE = 0.25  # rows of changed documents kept masked until this share, then compacted
# Rows appended since the last sort are compared by index (8x a slice's cost per row):
# past this share of the rows the table is compacted (sorted) again.
TAIL_SHARE = 0.1
FORMAT = 3  # of the saved snapshot (3: sorted, texts on disk; older ones are read again)
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

    @property
    def restricted_documents(self) -> int:
        """Active documents with an access list (the rest are public)."""
        codes, acls = self.acl_table
        public = [i for i, a in enumerate(acls) if not a]
        rows = self.table.live & ~np.isin(codes, public)
        return len(np.unique(self.table.doc[rows]))

    @functools.cached_property
    def groups(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(language code, access-list code) -> its rows ``[start, end)`` in the sorted
        part of the table (``ChunkTable.sorted_rows``)."""
        n = self.table.sorted_rows
        if not n:
            return {}
        lang = self.table.lang[:n].astype(np.int64)
        acl = self.acl_table[0][:n].astype(np.int64)
        cuts = np.flatnonzero((np.diff(lang) != 0) | (np.diff(acl) != 0)) + 1
        starts, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])
        return {
            (int(lang[a]), int(acl[a])): (int(a), int(b)) for a, b in zip(starts, ends, strict=True)
        }

    def slices(self, language: str | None, acls: Collection[str] | None) -> list[tuple[int, int]]:
        """The contiguous row ranges (sorted part) holding every chunk in ``language`` (None:
        any) under one of ``acls`` (None: any), merged where adjacent."""
        t = self.table.tables
        langs = None
        if language is not None:
            langs = {i for i, n in enumerate(t.langs.values) if str(n) == language}
            if language == "?":
                langs.add(NONE)
        wanted = None if acls is None else set(acls)
        out: list[tuple[int, int]] = []
        for (lang, acl), (a, b) in sorted(self.groups.items(), key=lambda g: g[1]):
            if (langs is None or lang in langs) and (
                wanted is None or t.acls.values[acl] in wanted
            ):
                if out and out[-1][1] == a:
                    out[-1] = (out[-1][0], b)
                else:
                    out.append((a, b))
        return out

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
    """A snapshot of the chunks of ``read`` that belong to an active version (sorted)."""
    table = compacted(appended(None, _current(active, read)))
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
    tail = table.rows - table.sorted_rows
    if table.rows - len(position) > DEAD_SHARE * max(1, table.rows) or tail > TAIL_SHARE * max(
        1, table.rows
    ):
        snap = compact(snap)
    return snap


def compact(snap: Snapshot) -> Snapshot:
    """The snapshot without its dead rows, sorted (rows renumbered)."""
    if len(snap.position) == snap.table.rows == snap.table.sorted_rows:
        return snap
    again = _indexed(snap.generation, snap.active, snap.seq, compacted(snap.table), snap.changed)
    again.bm25 = snap.bm25
    release_freed_memory()
    return again
