"""The search snapshot's chunks in columns, appended to and masked, never rebuilt per change.

A million chunks held as a million metadata dicts cost ~1.2 KB each (eleven keys, every
key and value its own string); here each chunk is a row of small integer codes into
tables of distinct values: its document's fields (``doc_id``, ``source``, ``version``,
``acl`` ...: one entry per document, not per chunk), its heading, its language and the
rest of its metadata with the keys' order (a handful of shapes). ``ChunkTable.metadata``
builds a chunk's dict on access, equal to the one read from the store.

Rows are only appended: a changed document's old rows are marked dead (``live``) and its
new ones added; the unit vectors go to a growing matrix that the snapshots before share
(their rows never change). ``compacted`` drops the dead rows and sorts the rest by
language, then access list: a restricted search compares one contiguous slice of the
matrix per access list it may read (no copy; ``Snapshot.slices``); rows appended since
(``sorted_rows`` onwards) are compared by index. The texts are a
:class:`~tools.kb.index.text_column.TextColumn` (on disk once the snapshot is saved).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import numpy as np

from tools.kb.index.text_column import TextColumn
from tools.kb.store.protocol import StoredChunk

# The keys a document's chunks share (ingest writes them from the document): kept once
# per document. Any other key is the chunk's own.
DOC_KEYS = ("doc_id", "source", "content_hash", "version", "ingested_at", "acl", "total_chunks")
NONE = -1  # the code of an absent key
T = TypeVar("T", bound=Hashable)


class Interned(Generic[T]):
    """Distinct values, each with a code (its index); only appended, so an older
    snapshot's codes stay valid while a newer one adds values."""

    def __init__(self) -> None:
        self.values: list[T] = []
        self._codes: dict[T, int] = {}

    def code(self, value: T) -> int:
        found = self._codes.get(value)
        if found is None:
            found = self._codes[value] = len(self.values)
            self.values.append(value)
        return found

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Tables:
    """The distinct values the rows' codes point into (shared by successive snapshots)."""

    docs: Interned[tuple[tuple[str, Any], ...]] = field(default_factory=Interned)
    doc_ids: list[str] = field(default_factory=list)  # per document code
    doc_acl: list[int] = field(default_factory=list)  # per document code: its ``acls`` code
    doc_source: list[str] = field(default_factory=list)  # per document code
    acls: Interned[str] = field(default_factory=Interned)  # access lists ("" public)
    headings: Interned[Any] = field(default_factory=Interned)
    langs: Interned[Any] = field(default_factory=Interned)
    rests: Interned[tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]] = field(
        default_factory=Interned
    )

    def doc_code(self, meta: Mapping[str, Any]) -> int:
        before = len(self.docs)
        code = self.docs.code(tuple((k, meta[k]) for k in DOC_KEYS if k in meta))
        if code == before:  # a new document entry
            self.doc_ids.append(str(meta.get("doc_id", "")))
            self.doc_acl.append(self.acls.code(str(meta.get("acl") or "")))
            self.doc_source.append(str(meta.get("source", "")))
        return code


class Matrix:
    """Unit vectors, one row per chunk row, grown in place as rows are added, with a
    sixteenth spare (a copy of the matrix per that many new rows, not per change)."""

    def __init__(self, dim: int) -> None:
        self.data = np.zeros((0, dim), dtype=np.float32)
        self.size = 0

    def extended(self, base: np.ndarray, batches: list[np.ndarray]) -> np.ndarray:
        """``base`` (a prefix of this matrix) and the rows of ``batches`` after it
        (emptied as they are copied): written in place when ``base`` is the whole used
        part, else (an older snapshot's) into a new matrix."""
        n, k = len(base), sum(len(b) for b in batches)
        # ``base`` is this matrix's used part when it starts where the matrix does: its
        # ``.base`` says nothing after a load (a pickled array's base is its buffer), and
        # such a snapshot copied every vector at every change (2 s at 200k chunks).
        if n != self.size or (n and _address(base) != _address(self.data)):
            return np.concatenate([base, *batches]) if n else np.concatenate(batches)
        if n + k > len(self.data):
            grown = np.empty((n + k + (n + k) // 16 + 1024, self.data.shape[1]), np.float32)
            grown[:n] = self.data[:n]
            self.data = grown
        at = n
        while batches:
            rows = batches.pop(0)
            self.data[at : at + len(rows)] = rows
            at += len(rows)
        self.size = at
        return self.data[: self.size]


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@dataclass(frozen=True)
class ChunkTable:
    """Every row ever added since the last compaction; ``live`` marks the current ones."""

    ids: list[str]
    texts: TextColumn
    doc: np.ndarray  # int32 document code per row
    heading: np.ndarray  # int32, NONE: no heading key
    lang: np.ndarray  # int32, NONE: no ``lang`` key
    rest: np.ndarray  # int32: the other keys and the keys' order
    live: np.ndarray  # bool
    vectors: np.ndarray  # float32 unit rows
    tables: Tables
    matrix: Matrix
    odd: dict[int, dict[str, Any]] = field(default_factory=dict)  # rows not encodable
    sorted_rows: int = 0  # rows [0, sorted_rows) are sorted by language, then access list

    def __getstate__(self) -> dict[str, Any]:
        # Saved with the matrix's spare rows when the vectors are its whole used part: the
        # first change after a load then writes in place instead of copying every vector
        # (2 s at 200k chunks).
        state = {k: v for k, v in vars(self).items() if k != "matrix"}
        data, n = self.matrix.data, len(self.vectors)
        if n and self.matrix.size == n and np.shares_memory(data[:1], self.vectors[:1]):
            state["vectors"], state["used"] = data, n
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        data = state.pop("vectors")
        used = int(state.pop("used", len(data)))
        matrix = Matrix(data.shape[1])
        matrix.data, matrix.size = data, used
        for k, v in {**state, "vectors": data[:used], "matrix": matrix}.items():
            object.__setattr__(self, k, v)

    @property
    def rows(self) -> int:
        return len(self.ids)

    def metadata(self, row: int) -> dict[str, Any]:
        """Row ``row``'s metadata as read from the store (a new dict each time)."""
        row = int(row)
        if row in self.odd:
            return dict(self.odd[row])
        t = self.tables
        doc = dict(t.docs.values[self.doc[row]])
        keys, items = t.rests.values[self.rest[row]]
        own = dict(items)
        h, lang = int(self.heading[row]), int(self.lang[row])
        if h != NONE:
            own["heading"] = t.headings.values[h]
        if lang != NONE:
            own["lang"] = t.langs.values[lang]
        return {k: doc[k] if k in doc else own[k] for k in keys}


def _encode(tables: Tables, meta: Mapping[str, Any]) -> tuple[int, int, int, int]:
    doc = tables.doc_code(meta)
    heading = tables.headings.code(meta["heading"]) if "heading" in meta else NONE
    lang = tables.langs.code(meta["lang"]) if "lang" in meta else NONE
    skip = {*DOC_KEYS, "heading", "lang"}
    items = tuple((k, v) for k, v in meta.items() if k not in skip)
    return doc, heading, lang, tables.rests.code((tuple(meta), items))


def unit_rows(vectors: Sequence[Any], dim: int = 0) -> np.ndarray:
    """The vectors as float32 rows of norm 1 (a zero row stays zero)."""
    if not vectors:
        return np.zeros((0, dim), dtype=np.float32)
    mat = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms


def appended(table: ChunkTable | None, chunks: Iterable[StoredChunk]) -> ChunkTable:
    """``table`` (None: an empty one) with ``chunks`` added as live rows (their vectors
    written in batches, so a full read never holds them twice)."""
    tables = table.tables if table is not None else Tables()
    start = table.rows if table is not None else 0
    grow = Growth(table)
    ids: list[str] = []
    texts: list[str] = []
    codes: list[tuple[int, int, int, int]] = []
    odd: dict[int, dict[str, Any]] = {}
    for c in chunks:
        try:
            codes.append(_encode(tables, c.metadata))
        except TypeError:  # an unhashable value (not written by this project): kept whole
            odd[start + len(ids)] = dict(c.metadata)
            named: dict[str, Any] = {
                k: str(c.metadata[k]) for k in ("doc_id", "source", "acl") if k in c.metadata
            }
            codes.append((tables.doc_code(named), NONE, NONE, 0))
        ids.append(c.chunk_id)
        texts.append(c.text)
        grow.add(c.vector)
    if table is not None and not ids:
        return table
    matrix, vectors = grow.done()
    doc, heading, lang, rest = (np.asarray([c[k] for c in codes], dtype=np.int32) for k in range(4))
    if table is None:
        live = np.ones(len(ids), dtype=bool)
        return ChunkTable(
            ids, TextColumn.of(texts), doc, heading, lang, rest, live, vectors, tables, matrix, odd
        )

    def grown(old: np.ndarray, new: np.ndarray) -> np.ndarray:
        return np.concatenate([old, new])

    return ChunkTable(
        [*table.ids, *ids],
        table.texts.appended(texts),
        grown(table.doc, doc),
        grown(table.heading, heading),
        grown(table.lang, lang),
        grown(table.rest, rest),
        grown(table.live, np.ones(len(ids), dtype=bool)),
        vectors,
        tables,
        matrix,
        {**table.odd, **odd},
        table.sorted_rows,
    )


class Growth:
    """The vectors of rows being appended, kept in batches of unit rows until the
    matrix takes them all at once (a full read never holds each vector as an object)."""

    BATCH = 4096

    def __init__(self, table: ChunkTable | None) -> None:
        self.table = table
        self.batches: list[np.ndarray] = []
        self.pending: list[Any] = []

    def add(self, vector: Any) -> None:
        self.pending.append(vector)
        if len(self.pending) >= self.BATCH:
            self.batches.append(unit_rows(self.pending))
            self.pending = []

    def done(self) -> tuple[Matrix, np.ndarray]:
        if self.pending or not self.batches:
            self.batches.append(unit_rows(self.pending))
        dim = self.batches[0].shape[1]
        t = self.table
        if t is None or (not len(t.vectors) and t.vectors.shape[1] != dim):
            matrix = Matrix(dim)
            return matrix, matrix.extended(matrix.data, self.batches)
        return t.matrix, t.matrix.extended(t.vectors, self.batches)


def killed(table: ChunkTable, rows: np.ndarray) -> ChunkTable:
    """``table`` with ``rows`` no longer live."""
    if not len(rows):
        return table
    live = table.live.copy()
    live[rows] = False
    return replace(table, live=live)


def compacted(table: ChunkTable) -> ChunkTable:
    """The live rows alone, sorted by language then access list (stable: a document's
    chunks stay in order), re-coded on the documents still live."""
    keep = np.flatnonzero(table.live)
    old = table.tables
    acl = np.asarray(old.doc_acl, dtype=np.int64)[table.doc[keep]]
    keep = keep[np.lexsort((acl, table.lang[keep]))]
    codes, inverse = np.unique(table.doc[keep], return_inverse=True)
    tables = Tables(headings=old.headings, langs=old.langs, rests=old.rests, acls=old.acls)
    for c in codes:
        tables.docs.code(old.docs.values[c])
        tables.doc_ids.append(old.doc_ids[c])
        tables.doc_acl.append(old.doc_acl[c])
        tables.doc_source.append(old.doc_source[c])
    matrix = Matrix(table.vectors.shape[1])
    where = {int(r): i for i, r in enumerate(keep)} if table.odd else {}
    return ChunkTable(
        [table.ids[i] for i in keep],
        table.texts.taken(keep),
        inverse.astype(np.int32).reshape(-1),
        table.heading[keep],
        table.lang[keep],
        table.rest[keep],
        np.ones(len(keep), dtype=bool),
        matrix.extended(matrix.data, [table.vectors[keep]]),
        tables,
        matrix,
        {where[r]: m for r, m in table.odd.items() if r in where},
        len(keep),
    )


def documents_of(table: ChunkTable, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The rows ``rows`` grouped by document id (each group in row order)."""
    if not len(rows):
        return {}
    codes = table.doc[rows]
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    out: dict[str, np.ndarray] = {}
    for group in np.split(rows[order], cuts):
        doc_id = table.tables.doc_ids[int(table.doc[group[0]])]
        out[doc_id] = np.sort(np.concatenate([out[doc_id], group])) if doc_id in out else group
    return out


E = TypeVar("E")


class Rows(Sequence[E]):
    """A read-only view of one column: indexed by row (``Snapshot.position``), iterated
    and counted over the live rows only."""

    def __init__(self, table: ChunkTable, get: Any, count: int) -> None:
        self._table = table
        self._get = get
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self._get(int(i)) for i in np.flatnonzero(self._table.live)[row]]
        return self._get(int(row))

    def __iter__(self) -> Iterator[E]:
        for i in np.flatnonzero(self._table.live):
            yield self._get(int(i))


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere). A full read frees about as much as it keeps (the store's pages, each
    chunk's vector and metadata dict), interleaved with what it keeps, and the process
    would hold those pages: a quarter of the snapshot's RSS at 100k chunks."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
