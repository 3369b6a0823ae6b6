"""Retrieval across languages: one candidate pool per document language, then one merge.

In a pool that mixes languages, a passage in the question's own language wins on language,
not on content (a multilingual embedding still puts same-language text closer), and BM25
cannot match across scripts at all. So a knowledge base holding more than one language is
searched per language: each chunk's language is stored at ingest (``lang``), each language's
candidates are fused within that language (``tools.kb.fusion``, normalised over that pool),
and :func:`merge_language_pools` decides per query how far to trust each language's best
candidate. A knowledge base in one language never comes here: it ranks as it always did.

The rule (chosen across all dev sets with one left out, ``bench/bench_bilingual.py``):
each language's strength is its best cosine, minus ``offset`` when the language is not the
question's (cross-language cosines run lower for the same content); a candidate's merged
score is its fused score within its language minus ``steepness`` times how far its
language's strength stands below the strongest language's (in cosine points x 10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from tools.kb.answerability import AnswerabilityModel
from tools.kb.fusion import peak
from tools.kb.search import (
    BM25Score,
    CandidatePool,
    Filters,
    SearchMode,
    candidate_pool,
    fused_scores,
)
from tools.kb.snapshot import Snapshot
from tools.kb.store import ChunkStore
from tools.text import detect_language


@dataclass(frozen=True)
class MergeRule:
    """How the per-language pools are merged (see the module docstring)."""

    offset: float = 0.06
    steepness: float = 2.0
    bm25_other: bool = False  # BM25 inside a pool of another language than the question's
    # "cosine": a language's best cosine; "peak": how far its best cosine stands above its
    # own pool, in standard deviations (tools.kb.fusion.peak), free of the language offset.
    signal: str = "cosine"

    def label(self) -> str:
        lex = "bm" if self.bm25_other else "v"
        return f"{self.signal}/off{self.offset:g}/st{self.steepness:g}/{lex}"


DEFAULT_RULE = MergeRule()


@dataclass(frozen=True)
class Fusion:
    """The KB's fusion settings, applied within each language."""

    mode: SearchMode = "hybrid"
    method: str = "adaptive"
    vector_weight: float = 0.5
    similarity_floor: float = 0.0


def strength(cosines: Mapping[str, float], foreign: bool, rule: MergeRule) -> float:
    """How far a language's best candidate is to be trusted (on the scale of 0.1 cosine,
    or of one standard deviation of its pool for the "peak" signal)."""
    if rule.signal == "peak":
        value = peak(cosines.values())
    else:
        value = 10.0 * max(cosines.values(), default=0.0)
    return value - (rule.offset if foreign else 0.0)


def merge_language_pools(
    pools: Mapping[str, CandidatePool],
    question_language: str,
    fusion: Fusion,
    rule: MergeRule = DEFAULT_RULE,
) -> dict[str, float]:
    """The merged ordering score of every candidate of every language pool: its fused
    score within its language, lowered by how far its language's strength stands behind
    the strongest language's."""
    fused: dict[str, dict[str, float]] = {}
    strengths: dict[str, float] = {}
    for lang, pool in pools.items():
        if not pool.ids:
            continue
        # BM25 stays within the question's language unless the rule says otherwise: in
        # another script its few matches (numbers, names) are noise over a good dense pool.
        own = lang == question_language
        scored = pool if own or rule.bm25_other else without_bm25(pool)
        fused[lang] = fused_scores(
            scored,
            mode=fusion.mode,
            fusion=fusion.method,
            vector_weight=fusion.vector_weight,
            similarity_floor=fusion.similarity_floor,
        )
        strengths[lang] = strength(pool.vector_found or pool.cosine, not own, rule)
    if not strengths:
        return {}
    top = max(strengths.values())
    out: dict[str, float] = {}
    for lang, scores in fused.items():
        penalty = rule.steepness * (top - strengths[lang])
        for cid, s in scores.items():
            out[cid] = s - penalty
    return out


def without_bm25(pool: CandidatePool) -> CandidatePool:
    """The pool's dense side alone (its BM25-only candidates dropped)."""
    ids = [c for c in pool.ids if c in pool.vector_found] or list(pool.ids)
    zero = BM25Score(0.0, 0.0)
    return CandidatePool(
        ids=ids,
        cosine={c: pool.cosine[c] for c in ids if c in pool.cosine},
        bm25={c: zero for c in ids},
        vector_found=pool.vector_found,
        bm25_found={},
    )


def document_languages(snap: Snapshot) -> list[str]:
    """The languages of the snapshot's chunks; empty when any chunk has none recorded
    (a collection this project did not write: it is searched as one pool)."""
    found = sorted({str(lang) for lang in np.unique(snap.languages)})
    return [] if "?" in found else found


def language_search(
    query: str,
    query_vector: np.ndarray | None,
    snap: Snapshot,
    chunks: ChunkStore,
    *,
    filters: Filters,
    n: int,
    fusion: Fusion,
    rule: MergeRule = DEFAULT_RULE,
) -> tuple[CandidatePool, dict[str, float]] | None:
    """Per-language pools merged: the candidates and each one's merged score; None when
    one pool is all there is (a KB in one language, BM25 alone, which cannot match
    across scripts, or a search already restricted to one language)."""
    languages = document_languages(snap)
    if len(languages) < 2 or fusion.mode == "bm25" or filters.language is not None:
        return None
    pools = {
        lang: candidate_pool(
            query,
            query_vector,
            snap,
            chunks,
            mode=fusion.mode,
            filters=replace(filters, language=lang),
            n=n,
        )
        for lang in languages
    }
    merged = merge_language_pools(pools, detect_language(query), fusion, rule)
    if not merged:
        return None
    best = min(merged, key=lambda c: (-merged[c], c))
    winner = next(lang for lang, p in pools.items() if best in p.cosine or best in p.bm25)
    return union(pools, keep=merged, evidence=winner), merged


def union(
    pools: Mapping[str, CandidatePool], *, keep: Mapping[str, float], evidence: str
) -> CandidatePool:
    """One pool of the candidates in ``keep`` (the merged scores). Each retriever's own
    top ``n`` (what the evidence features measure) are those of the ``evidence`` language,
    the language of the best candidate: its cosines and BM25 scores compare."""
    cosine: dict[str, float] = {}
    bm25: dict[str, BM25Score] = {}
    for p in pools.values():
        cosine.update(p.cosine)
        bm25.update(p.bm25)
    ids = [c for p in pools.values() for c in p.ids if c in keep]
    own = pools[evidence]
    return CandidatePool(
        list(dict.fromkeys(ids)), cosine, bm25, dict(own.vector_found), dict(own.bm25_found)
    )


def evidence_model(
    query: str,
    best_language: str | None,
    same: AnswerabilityModel,
    cross: AnswerabilityModel | None,
) -> AnswerabilityModel:
    """The answerability model for one search: the cross-language one when the best hit
    is in another language than the query (its words cannot be in the passage, so the
    lexical features say nothing), else the usual one."""
    if cross is None or not best_language or best_language == detect_language(query):
        return same
    return cross
