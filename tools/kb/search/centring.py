"""Cosines comparable across languages: each language's centre, and cosines centred on it.

A multilingual embedding puts every language in its own region of the space: a raw cosine
across languages is low for any text, so a passage in the question's language wins on
language, not content. Subtracting each language's mean chunk vector (the question's
language's mean from the question) removes that offset (xquad_bilingual dev, vector search
within the other language: nDCG@10 0.848 raw, 0.900 centred; bench/README.md "Retrieval
across languages"). ``tools.kb.search.languages`` ranks other-language pools and gates on these;
:func:`on_question_scale` brings them back to the question language's raw scale for the
evidence model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def on_question_scale(
    own: CandidatePool, centred: Mapping[str, float], found: Mapping[str, float]
) -> dict[str, float] | None:
    """The centred cosines of ``found`` (another language's candidates) mapped to the raw
    cosines of the question's language: the linear map that gives the question language's
    own candidates their raw mean and spread (centred -> raw), so the evidence model,
    fitted on same-language pairs, reads them on the scale it knows. Matching the spread,
    not a least-squares line, keeps a best hit's standing (a line fitted through noisy
    pairs flattens towards the mean exactly the best hits the evidence reads: xquad dev,
    cross-language evidence, AUROC 0.774 / ECE 0.058 with a line, 0.793 / 0.041 matched;
    bench/README.md). None: too few candidates to measure a spread."""
    pairs = [(centred[c], raw) for c, raw in own.vector_found.items() if c in centred]
    if len(pairs) < 5:
        return None
    x, y = np.array(pairs).T
    if float(np.std(x)) < 1e-6:
        return None
    slope = float(np.std(y)) / float(np.std(x))
    intercept = float(np.mean(y)) - slope * float(np.mean(x))
    return {c: intercept + slope * centred[c] for c in found if c in centred}
