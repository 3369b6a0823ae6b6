"""The dense retriever's vector work: the nearest chunks of a restricted share compared
exactly on the snapshot's vectors (:func:`restricted_nearest`), and its centred mode.

Centring: a multilingual embedding puts every language in its own region of the space: a
raw cosine across languages is low for any text, so a passage in the question's language
wins on language, not content. Subtracting each language's mean chunk vector (the
question's language's mean from the question) removes that offset (xquad_bilingual dev,
vector search within the other language: nDCG@10 0.848 raw, 0.900 centred;
bench/README.md "Retrieval across languages"). The joiner (``tools.kb.search.joiner``)
ranks other-language pools and gates on these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tools.kb.index.snapshot import Snapshot
from tools.kb.search.candidates import CandidatePool
from tools.kb.store.protocol import ChunkStore

CENTRE_SAMPLE = 2000  # chunks per language read to estimate its centre (bounds the read)
# The fewest chunks a language needs for a centre: a centre is its chunks' mean, so the
# one chunk of a language is centred onto the zero vector, cosine 0 to any question
# whatever it says (issue 47). Then every cosine stays raw. Two chunks already carry a
# useful contrast (a small KB's cross-language question, tests/kb/search/test_languages.py).
MIN_CENTRE_CHUNKS = 2
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


def centring_applies(counts: Mapping[str, int]) -> bool:
    """Whether a knowledge base with ``counts`` chunks per language compares languages on
    centred cosines: two languages or more, each with ``MIN_CENTRE_CHUNKS`` chunks."""
    return len(counts) >= 2 and min(counts.values()) >= MIN_CENTRE_CHUNKS


def sample_positions(count: int, k: int = CENTRE_SAMPLE) -> np.ndarray:
    """``min(count, k)`` positions spread evenly over ``range(count)`` (deterministic, so
    a language's centre does not move between two reads of one snapshot)."""
    if count <= k:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, k).round().astype(np.int64))


def language_centres(
    snap: Snapshot, chunks: ChunkStore, languages: Sequence[str]
) -> dict[str, np.ndarray]:
    """Each of ``languages``' mean unit chunk vector, from at most ``CENTRE_SAMPLE``
    chunks per language spread over the snapshot; none when a language has too few
    chunks for its centre to mean anything (:func:`centring_applies`)."""
    centres: dict[str, np.ndarray] = {}
    if not centring_applies({lang: snap.language_counts.get(lang, 0) for lang in languages}):
        return centres
    for lang in languages:
        members = np.flatnonzero(snap.language_mask(lang))
        ids = [snap.ids[i] for i in members[sample_positions(len(members))]]
        rows = [
            _unit(_read(snap, chunks, ids[start : start + 500]))
            for start in range(0, len(ids), 500)
        ]
        rows = [r for r in rows if r.size]
        if rows:
            centres[lang] = np.vstack(rows).mean(axis=0)
    return centres


def _read(snap: Snapshot, chunks: ChunkStore, ids: Sequence[str]) -> np.ndarray:
    """The vectors of ``ids``: the snapshot's when it holds them, else the store's."""
    return snap.vectors_of(ids)[1] if len(snap.vectors) else chunks.vectors(ids)[1]


def centre_cosines(
    query_vector: np.ndarray,
    question_language: str,
    centres: Mapping[str, np.ndarray],
    ids: list[str],
    languages: list[str],
    vectors: np.ndarray,
) -> dict[str, float]:
    """The centred cosine of each chunk (``ids``, their ``languages`` and stored
    ``vectors``) to the question: both unit vectors minus their language's centre
    (the question's language's centre from the question; a language without a centre is
    not moved)."""
    zero = np.zeros(vectors.shape[1] if vectors.ndim == 2 else len(query_vector))
    q = _unit(query_vector[None, :])[0] - centres.get(question_language, zero)
    q = q / (np.linalg.norm(q) or 1.0)
    d = _unit(vectors) - np.stack([centres.get(lang, zero) for lang in languages])
    d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return {cid: float(c) for cid, c in zip(ids, d @ q, strict=True)}


def centred_cosines(
    query_vector: np.ndarray,
    question_language: str,
    centres: Mapping[str, np.ndarray],
    pools: Mapping[str, CandidatePool],
    snap: Snapshot,
) -> dict[str, float] | None:
    """The centred cosine of every candidate of the per-language ``pools`` (None when the
    snapshot holds none of their vectors)."""
    lang_of = {c: lang for lang, p in pools.items() for c in p.ids}
    found, vectors = snap.vectors_of(list(lang_of))  # the snapshot's, not a store read
    if not found:
        return None
    langs = [lang_of[c] for c in found]
    return centre_cosines(query_vector, question_language, centres, found, langs, vectors)


def _unit(mat: np.ndarray) -> np.ndarray:
    if mat.size == 0:
        return mat
    return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)


def restricted_nearest(
    query_vector: np.ndarray,
    wanted: int,
    snap: Snapshot,
    chunks: ChunkStore,
    selection: np.ndarray,
    *,
    language: str | None,
    acls: tuple[str, ...] | None,
    where: dict[str, Any] | None,
) -> list[tuple[str, float]]:
    """The nearest chunks among ``selection`` (see ``EXACT_LIMIT``): of one ``language``
    (None: any), the reader's access lists ``acls`` (None: all) and the documents asked
    for (``where``, the store's clause)."""
    count = int(selection.sum())
    if count == 0:
        return []
    depth = min(len(snap.ids), math.ceil(wanted * PROBE_MARGIN * len(snap.ids) / count))
    if snap.vectors is not None and len(snap.vectors):
        ranges = snap.slices(language, acls)
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
        found = chunks.nearest(query_vector, depth, where)
        kept = [
            (c, s) for c, s in found if (i := snap.position.get(c)) is not None and selection[i]
        ]
        if len(kept) >= wanted or depth >= len(snap.ids):
            return kept
    # A large share too rare to reach by depth: the store filters on the language and
    # the reader's access lists (a few terms, never a list of chunks).
    clauses: list[dict[str, Any]] = [where or {}]
    if language is not None:
        clauses.append({"lang": language})
    if acls is not None:
        clauses.append({"acl": {"$in": list(acls)}})
    stated = [c for c in clauses if c]
    return chunks.nearest(query_vector, wanted, stated[0] if len(stated) == 1 else {"$and": stated})


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
