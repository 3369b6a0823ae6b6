"""A query's candidates over one snapshot: what each retriever proposes, before fusion.

Each retriever proposes its top ``n``; in hybrid mode every candidate of either gets
both raw scores (cosine from the stored vector, BM25 from the snapshot), so fusion
(``tools.kb.search.fusion``, the next stage) normalises over one pool instead of
half-blind lists. A KB in several languages gets one pool per language
(:func:`language_pools`, merged by ``tools.kb.search.languages``). Which chunks a search
may return (documents asked for, the reader's access, one language) is :class:`Filters`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

import numpy as np

from tools.access.acl import Reader
from tools.kb.index.lexical import LexicalFilter
from tools.kb.index.snapshot import Snapshot
from tools.kb.store.protocol import ChunkStore

SearchMode = Literal["hybrid", "bm25", "vector"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "bm25", "vector")
VECTOR_OVERFETCH = 10  # chunks of inactive versions (a crashed ingest) are dropped
# The vector side of a restricted search (one language, the chunks a reader may read) is
# compared exactly on the snapshot's vectors: on the contiguous slices of the reader's
# access lists in that language (``Snapshot.slices``, no copy), or row by row (rows
# appended since the last sort, a few documents asked for: ``ROW_COST`` times a slice
# row's cost, measured). A share above EXACT_LIMIT whose exact cost passes EXACT_BUDGET
# rows, or that one unrestricted nearest-neighbour query reaches at a depth below
# PROBE_DEPTH (a large share: an admin's language), is found by that probe instead, deep
# enough that the share holds the n asked for (``PROBE_MARGIN``), filtered on the masks.
EXACT_LIMIT = 10_000
EXACT_BUDGET = 400_000  # rows compared per pool (~35 ms on one busy core)
ROW_COST = 8
PROBE_DEPTH = 200
PROBE_MARGIN = 1.5
PROBE_LIMIT = 20_000  # deeper than this, the store's own filter (on principals) is used


@dataclass(frozen=True)
class Readable:
    """What one reader may read in one snapshot: a mask over its chunks and the distinct
    access lists allowed (the lexical index's filter terms)."""

    mask: np.ndarray
    acls: tuple[str, ...]


def readable_of(snap: Snapshot, reader: Reader) -> Readable:
    """The chunks ``reader`` may read: its access lists decided once per distinct list, then
    narrowed by its scope (a collection: folder, source or set) decided once per document.
    A scope is about documents, not access lists, so it never enters the per-list test."""
    codes, acls = snap.acl_table
    by_acl = replace(reader, scope=None)
    allowed = np.array([by_acl.may_read({"acl": a}) for a in acls], dtype=bool)
    mask = (allowed[codes] if len(codes) else np.zeros(0, dtype=bool)) & snap.live
    if reader.scope is not None:
        scope = reader.scope
        mask = mask & snap.document_mask(lambda d, _: scope.allows({"doc_id": d}))
    return Readable(mask, tuple(a for a, ok in zip(acls, allowed, strict=True) if ok))


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


class BM25Score(NamedTuple):
    raw: float  # the BM25 score
    share: float  # raw / the query's best attainable score, clamped to [0, 1]


@dataclass(frozen=True)
class CandidatePool:
    """What one query's retrievers found; fusion and evidence are computed from it."""

    ids: list[str]  # every candidate, vector side first
    cosine: dict[str, float]  # chunk id -> cosine (all candidates in hybrid mode)
    bm25: dict[str, BM25Score]  # all candidates in hybrid mode
    vector_found: dict[str, float]  # the vector side's own top n (cosine)
    bm25_found: dict[str, float]  # the BM25 side's own top n (raw)


@dataclass(frozen=True)
class Filters:
    """Which documents a search may return."""

    doc_ids: frozenset[str] | None = None
    sources: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()  # evaluation: "the KB without its answer"
    reader: Reader = field(default_factory=Reader.everyone)  # whose documents (ACL)
    # The chunks the reader may read (``Retriever.readable``); None: every chunk.
    readable: Readable | None = None
    # One document language (``lang`` of a chunk, ``tools.kb.search.languages``); None: all.
    language: str | None = None

    @classmethod
    def of(
        cls,
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
        reader: Reader | None = None,
        readable: Readable | None = None,
    ) -> Filters:
        return cls(
            frozenset(doc_ids) if doc_ids else None,
            frozenset(sources) if sources else None,
            frozenset(exclude_doc_ids),
            reader or Reader.everyone(),
            readable,
        )

    def allows(self, meta: dict[str, Any]) -> bool:
        return (
            (self.doc_ids is None or meta.get("doc_id") in self.doc_ids)
            and (self.sources is None or meta.get("source") in self.sources)
            and meta.get("doc_id") not in self.excluded
            and self.reader.may_read(meta)
            and (self.language is None or meta.get("lang") == self.language)
        )

    def where(self) -> dict[str, Any] | None:
        """The Chroma ``where`` clause of the documents asked for (language and access
        are masks on the snapshot, never the store's filter on the query path)."""
        clauses: list[dict[str, Any]] = []
        if self.doc_ids:
            clauses.append({"doc_id": {"$in": sorted(self.doc_ids)}})
        if self.sources:
            clauses.append({"source": {"$in": sorted(self.sources)}})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def lexical(self) -> LexicalFilter:
        """The same restrictions as the lexical index's filter."""
        return LexicalFilter(
            language=self.language,
            acls=self.readable.acls if self.readable is not None else None,
            doc_ids=self.doc_ids,
            sources=self.sources,
            excluded=self.excluded,
        )

    def selection(self, snap: Snapshot) -> np.ndarray | None:
        """Which of the snapshot's chunks the search may return (None: all): the reader's
        mask, the language's, and the documents asked for."""
        masks = [] if self.readable is None else [self.readable.mask]
        if self.language is not None:
            masks.append(snap.language_mask(self.language))
        if self.doc_ids or self.sources:
            masks.append(snap.document_mask(
                lambda d, s: (self.doc_ids is None or d in self.doc_ids)
                and (self.sources is None or s in self.sources)
            ))  # fmt: skip
        if not masks:
            return None
        out = masks[0].copy()
        for m in masks[1:]:
            out &= m
        return out


def candidate_pool(
    query: str,
    query_vector: np.ndarray | None,
    snap: Snapshot,
    chunks: ChunkStore,
    *,
    mode: SearchMode,
    filters: Filters,
    n: int,
) -> CandidatePool:
    """Each retriever's top ``n``; in hybrid mode both raw scores for every candidate."""
    cosine: dict[str, float] = {}
    if query_vector is not None and mode in ("hybrid", "vector"):
        cosine = _vector_candidates(query_vector, n, snap, chunks, filters)
    bm25: dict[str, BM25Score] = {}
    if mode in ("hybrid", "bm25"):
        for hit in snap.bm25.search(query, n, filters.lexical()):
            i = snap.position.get(hit.chunk_id)
            # Checked again on the snapshot: the index may be a commit ahead of it.
            if i is not None and filters.allows(snap.metadatas[i]):
                bm25[hit.chunk_id] = BM25Score(hit.score, hit.relevance)
    vector_found = dict(cosine)
    bm25_found = {c: s.raw for c, s in bm25.items()}
    ids = list(dict.fromkeys([*cosine, *bm25]))
    if mode == "hybrid":
        # Give every candidate both scores, so its relevance is not half-blind.
        missing_bm25 = [c for c in ids if c not in bm25]
        if missing_bm25:
            scored = snap.bm25.score_ids(query, missing_bm25)
            for c in missing_bm25:
                scored_hit = scored.get(c)
                bm25[c] = (
                    BM25Score(scored_hit.score, scored_hit.relevance)
                    if scored_hit
                    else BM25Score(0.0, 0.0)
                )
        missing_vector = [c for c in ids if c not in cosine]
        if missing_vector and query_vector is not None:
            cosine.update(snap.cosines(missing_vector, query_vector))
    return CandidatePool(ids, cosine, bm25, vector_found, bm25_found)


def language_pools(
    query: str,
    query_vector: np.ndarray | None,
    snap: Snapshot,
    chunks: ChunkStore,
    *,
    mode: SearchMode,
    filters: Filters,
    n: int,
    languages: Sequence[str],
) -> dict[str, CandidatePool]:
    """One candidate pool per document language (``tools.kb.search.languages`` merges them)."""
    return {
        lang: candidate_pool(
            query,
            query_vector,
            snap,
            chunks,
            mode=mode,
            filters=replace(filters, language=lang),
            n=n,
        )
        for lang in languages
    }


def _vector_candidates(
    query_vector: np.ndarray, n: int, snap: Snapshot, chunks: ChunkStore, filters: Filters
) -> dict[str, float]:
    wanted = n + 4 * len(filters.excluded) + VECTOR_OVERFETCH
    selection = filters.selection(snap)
    if selection is None:
        found = chunks.nearest(query_vector, min(wanted, max(1, len(snap.ids))), None)
    else:
        found = _restricted_nearest(query_vector, wanted, snap, chunks, filters, selection)
    active = (
        (cid, cos)
        for cid, cos in found
        if cid in snap.position
        # Checked again on the snapshot's metadata: a chunk the reader may not read never
        # becomes a candidate, whatever the store returned.
        and filters.allows(snap.metadatas[snap.position[cid]])
    )
    return dict(itertools.islice(active, n))


def _restricted_nearest(
    query_vector: np.ndarray,
    wanted: int,
    snap: Snapshot,
    chunks: ChunkStore,
    filters: Filters,
    selection: np.ndarray,
) -> list[tuple[str, float]]:
    """The nearest chunks among ``selection`` (see ``EXACT_LIMIT``)."""
    count = int(selection.sum())
    if count == 0:
        return []
    depth = min(len(snap.ids), math.ceil(wanted * PROBE_MARGIN * len(snap.ids) / count))
    if snap.vectors is not None and len(snap.vectors):
        acls = None if filters.readable is None else filters.readable.acls
        ranges = snap.slices(filters.language, acls)
        cut = snap.table.sorted_rows
        tail = cut + np.flatnonzero(selection[cut:])
        by_slices = sum(b - a for a, b in ranges) + ROW_COST * len(tail)
        cost = min(by_slices, ROW_COST * count)
        if count <= EXACT_LIMIT or (cost <= EXACT_BUDGET and depth >= PROBE_DEPTH):
            q = (query_vector / (np.linalg.norm(query_vector) or 1.0)).astype(np.float32)
            if by_slices <= ROW_COST * count:
                rows, sims = _compared(snap.vectors, q, selection, ranges, tail)
            else:
                rows = np.flatnonzero(selection)
                sims = np.einsum("ij,j->i", snap.vectors[rows], q)
            top = np.argpartition(-sims, wanted - 1)[:wanted] if len(sims) > wanted else None
            picked = np.arange(len(sims)) if top is None else top
            order = picked[np.argsort(-sims[picked], kind="stable")]
            return [(snap.ids[rows[j]], float(sims[j])) for j in order]
    if depth <= PROBE_LIMIT:
        found = chunks.nearest(query_vector, depth, filters.where())
        kept = [
            (c, s) for c, s in found if (i := snap.position.get(c)) is not None and selection[i]
        ]
        if len(kept) >= wanted or depth >= len(snap.ids):
            return kept
    # A large share too rare to reach by depth: the store filters on the language and
    # the reader's access lists (a few terms, never a list of chunks).
    clauses: list[dict[str, Any]] = [filters.where() or {}]
    if filters.language is not None:
        clauses.append({"lang": filters.language})
    if filters.readable is not None:
        clauses.append({"acl": {"$in": list(filters.readable.acls)}})
    where = [c for c in clauses if c]
    return chunks.nearest(query_vector, wanted, where[0] if len(where) == 1 else {"$and": where})


def _compared(
    vectors: np.ndarray,
    q: np.ndarray,
    selection: np.ndarray,
    ranges: Sequence[tuple[int, int]],
    tail: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The selected rows of ``ranges`` (contiguous slices of ``vectors``, no copy) and of
    ``tail`` (rows by index), with their cosines to ``q``."""
    rows: list[np.ndarray] = []
    sims: list[np.ndarray] = []
    for a, b in ranges:
        picked = np.flatnonzero(selection[a:b])
        if len(picked):
            # einsum, not BLAS: one thread, no spinning pool on busy cores (3x faster here).
            found = np.einsum("ij,j->i", vectors[a:b], q)
            rows.append(picked + a)
            sims.append(found if len(picked) == b - a else found[picked])
    if len(tail):
        rows.append(tail)
        sims.append(np.einsum("ij,j->i", vectors[tail], q))
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    return np.concatenate(rows), np.concatenate(sims)
