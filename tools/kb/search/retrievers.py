"""The retrievers, one component (:class:`Retrievers`, entry :meth:`Retrievers.retrieve`):
a query's candidates over one snapshot, before they are joined.

Dense (cosines: the snapshot's vectors compared exactly, or the store's nearest
neighbours) and lexical (BM25, the snapshot's lexical index) each propose their top
``n``; in hybrid mode every candidate of either gets both raw scores, so the joiner
(``tools.kb.search.joiner``) normalises over one pool instead of half-blind lists. Two
modes of the dense side: a knowledge base in several languages is searched with one pool
per document language (:func:`language_pools`), its cosines also centred on each
language's centre (``tools.kb.search.dense``, read once per generation). Which chunks a
search may return (documents asked for, the reader's access, one language) is
:class:`Filters`; what a reader may read is decided once per reader and generation.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from cachetools import LRUCache

from tools.access.acl import Reader
from tools.kb.index.lexical import LexicalFilter
from tools.kb.index.snapshot import Snapshot
from tools.kb.search.candidates import BM25Score, CandidatePool, SearchMode
from tools.kb.search.dense import centred_cosines, language_centres, restricted_nearest
from tools.kb.store.protocol import ChunkStore
from tools.text import detect_language

ONE_POOL = ""  # the key of the one pool of a search that is not split by language
CENTRES_KEPT = 4  # generations whose language centres are kept
READERS_KEPT = 64  # (generation, reader) pairs whose readable chunks are kept
VECTOR_OVERFETCH = 10  # chunks of inactive versions (a crashed ingest) are dropped


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
class Filters:
    """Which documents a search may return."""

    doc_ids: frozenset[str] | None = None
    sources: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()  # evaluation: "the KB without its answer"
    reader: Reader = field(default_factory=Reader.everyone)  # whose documents (ACL)
    # The chunks the reader may read (``Retrievers.readable``); None: every chunk.
    readable: Readable | None = None
    # One document language (``lang`` of a chunk, :func:`language_pools`); None: all.
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


@dataclass(frozen=True)
class Retrieved:
    """What the retrievers found for one query: a candidate pool per document language,
    with the question's language and the candidates' centred cosines (None: raw
    cosines), or one pool (``pools[ONE_POOL]``, ``question_language`` None)."""

    pools: dict[str, CandidatePool]
    question_language: str | None = None
    centred: dict[str, float] | None = None


def document_languages(snap: Snapshot) -> list[str]:
    """The languages of the snapshot's chunks; empty when any chunk has none recorded
    (a collection this project did not write: it is searched as one pool)."""
    found = list(snap.language_names)
    return [] if "?" in found else found


class Retrievers:
    """The retrievers of one knowledge base, and what they keep per generation (the
    chunks a reader may read, each language's centre), thread-safe."""

    def __init__(self, chunks: ChunkStore) -> None:
        self.chunks = chunks
        self._lock = threading.Lock()  # guards the caches below, never held while searching
        self._readable: LRUCache[tuple[str, str], Readable] = LRUCache(maxsize=READERS_KEPT)
        self._centres: LRUCache[str, dict[str, np.ndarray]] = LRUCache(maxsize=CENTRES_KEPT)

    def retrieve(
        self,
        query: str,
        query_vector: np.ndarray | None,
        snap: Snapshot,
        *,
        mode: SearchMode,
        n: int,
        doc_ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        exclude_doc_ids: Collection[str] = (),
        reader: Reader | None = None,
        one_pool: bool = False,
    ) -> Retrieved:
        """Each retriever's top ``n`` for ``query`` (the dense side compares
        ``query_vector``; None: BM25 alone): a pool per document language when the KB
        holds several (not for BM25 alone, which cannot match across scripts), one pool
        otherwise, when ``one_pool`` is asked, or when no language pool found anything."""
        filters = Filters.of(doc_ids, sources, exclude_doc_ids, reader, self.readable(snap, reader))
        languages = document_languages(snap)
        centres = None if query_vector is None or one_pool else self.centres(snap, languages)
        if not one_pool and len(languages) >= 2 and mode != "bm25":
            pools = language_pools(
                query,
                query_vector,
                snap,
                self.chunks,
                mode=mode,
                filters=filters,
                n=n,
                languages=languages,
            )
            if any(p.ids for p in pools.values()):
                question_language = detect_language(query)
                centred = None
                if centres and query_vector is not None:
                    centred = centred_cosines(query_vector, question_language, centres, pools, snap)
                return Retrieved(pools, question_language, centred)
        pool = candidate_pool(
            query, query_vector, snap, self.chunks, mode=mode, filters=filters, n=n
        )
        return Retrieved({ONE_POOL: pool})

    def centres(
        self, snap: Snapshot, languages: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """Each document language's centre (empty for a KB in one language), read once
        per generation."""
        languages = document_languages(snap) if languages is None else languages
        if len(languages) < 2:
            return {}
        with self._lock:
            known = self._centres.get(snap.generation) if snap.generation else None
        if known is None:
            known = language_centres(snap, self.chunks, languages)
            if snap.generation:
                with self._lock:
                    self._centres[snap.generation] = known
        return known

    def readable(self, snap: Snapshot, reader: Reader | None) -> Readable | None:
        """What ``reader`` may read in the snapshot (None: all), once per reader and
        generation: a mask over the chunks, decided per distinct access list."""
        if reader is None or reader.unrestricted:
            return None
        key = (snap.generation, reader.key())
        with self._lock:
            known = self._readable.get(key) if snap.generation else None
        if known is None:
            known = readable_of(snap, reader)
            if snap.generation:
                with self._lock:
                    self._readable[key] = known
        return known


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
        bm25 = _lexical_candidates(query, n, snap, filters)
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
    """One candidate pool per document language (the joiner merges them)."""
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


def _lexical_candidates(
    query: str, n: int, snap: Snapshot, filters: Filters
) -> dict[str, BM25Score]:
    """The lexical retriever: BM25's top ``n`` on the snapshot's index."""
    bm25: dict[str, BM25Score] = {}
    for hit in snap.bm25.search(query, n, filters.lexical()):
        i = snap.position.get(hit.chunk_id)
        # Checked again on the snapshot: the index may be a commit ahead of it.
        if i is not None and filters.allows(snap.metadatas[i]):
            bm25[hit.chunk_id] = BM25Score(hit.score, hit.relevance)
    return bm25


def _vector_candidates(
    query_vector: np.ndarray, n: int, snap: Snapshot, chunks: ChunkStore, filters: Filters
) -> dict[str, float]:
    wanted = n + 4 * len(filters.excluded) + VECTOR_OVERFETCH
    selection = filters.selection(snap)
    if selection is None:
        found = chunks.nearest(query_vector, min(wanted, max(1, len(snap.ids))), None)
    else:
        found = restricted_nearest(
            query_vector,
            wanted,
            snap,
            chunks,
            selection,
            language=filters.language,
            acls=None if filters.readable is None else filters.readable.acls,
            where=filters.where(),
        )
    active = (
        (cid, cos)
        for cid, cos in found
        if cid in snap.position
        # Checked again on the snapshot's metadata: a chunk the reader may not read never
        # becomes a candidate, whatever the store returned.
        and filters.allows(snap.metadatas[snap.position[cid]])
    )
    return dict(itertools.islice(active, n))
