"""The joiner, one component (:func:`join`): the retrievers' candidates in, one ordering
score per candidate out (fusion, ``tools.kb.search.fusion``, and its modes).

One pool (a knowledge base in one language, BM25 alone, a search restricted to one
language) is fused as it is. Per-language pools are each fused within their language and
then merged: in a pool that mixes languages, a passage in the question's own language
wins on language, not on content (a multilingual embedding still puts same-language text
closer), and BM25 cannot match across scripts at all, so :func:`merge_language_pools`
decides per query how far to trust each language's best candidate.

The rule (``MergeRule``, chosen across the dev sets with one left out,
``bench/bench_bilingual.py``; bench/README.md "Retrieval across languages"): a logistic gate
estimates per query the probability that the answer is in the other language, from how
far that language's best cosine stands above the question language's best, how far each
best stands above its own pool (``fusion.peak``), and how much of the question the best
BM25 hit in its own language covers; each candidate's fused score (within its language)
is then weighed by the chance that its language holds the answer. BM25 stays within the
question's language: in another script its few matches are noise.

Cosines across languages are compared centred (the dense retriever's centred mode,
``tools.kb.search.dense``): the gate compares centred bests, and a pool in another
language than the question's is ranked by its centred cosines, brought back to the
question language's raw scale (:func:`on_question_scale`); within the question's language
the raw cosine ranks better and is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tools.kb.search.candidates import BM25Score, CandidatePool, SearchMode
from tools.kb.search.fusion import fused_each, fused_scores, peaks
from tools.kb.search.retrievers import ONE_POOL, Retrieved


@dataclass(frozen=True)
class MergeRule:
    """How the per-language pools are merged (see the module docstring).

    A logistic gate gives, per query and other language, the probability ``p`` that the
    answer is in that language, from :class:`GateFeatures` (``p = sigmoid(intercept +
    coef . features)``). Each candidate's fused score (within its language) is then
    weighed by the chance that its language holds the answer: times ``(1 - doubt) **
    scale`` (the scale form, ``scale > 0``), or minus ``steepness x doubt`` (the shift
    form), where ``doubt`` is ``1 - p`` for another language and the largest ``p`` for
    the question's. Both forms send a language the gate all but rules out behind the
    question's candidates; the shift form needs ``cutoff`` for that (without it, the
    other language's best keeps ``1 - steepness`` whatever ``p`` is, and on RGB zh, whose
    47 English chunks are never the answer, that cost 0.007 nDCG@10)."""

    # The gate and the form chosen across xquad_bilingual dev (two halves), CMRC and RGB
    # zh, each left out, on centred cosines (bench/README.md "Retrieval across languages").
    intercept: float = -2.0891
    best: float = 1.1064
    share: float = -5.2329
    peak_other: float = 1.0228
    peak_own: float = 0.0316
    scale: float = 0.15
    steepness: float = 0.35
    cutoff: float = 0.0  # shift form: another language given less than this follows all
    bm25_other: bool = False  # BM25 inside a pool of another language than the question's
    # The rank each other language's best candidate is guaranteed (0: none) when the gate
    # gives it at least ``slot_floor``: a misjudged question then costs a few ranks.
    slot: int = 0
    slot_floor: float = 0.0

    def label(self) -> str:
        lex = "bm" if self.bm25_other else "v"
        coef = "/".join(f"{c:.2f}" for c in (self.best, self.share, self.peak_other, self.peak_own))
        form = f"sc{self.scale:g}" if self.scale > 0 else f"st{self.steepness:g}"
        extra = f"/cut{self.cutoff:g}" if self.cutoff else ""
        extra += f"/slot{self.slot}@{self.slot_floor:g}" if self.slot else ""
        return f"gate {self.intercept:+.2f}/{coef} {form}{extra}/{lex}"


DEFAULT_RULE = MergeRule()


@dataclass(frozen=True)
class Fusion:
    """The KB's fusion settings, applied within each language."""

    mode: SearchMode = "hybrid"
    method: str = "adaptive"
    vector_weight: float = 0.5
    similarity_floor: float = 0.0


@dataclass(frozen=True)
class GateFeatures:
    """What the gate reads of one other language's pool against the question's."""

    best: float  # 10 x (its best cosine - the question language's best cosine)
    share: float  # the question language's best BM25 share of the query's terms
    peak_other: float  # how far its best cosine stands above its pool (fusion.peak)
    peak_own: float  # the same in the question's language

    def vector(self) -> list[float]:
        return [self.best, self.share, self.peak_other, self.peak_own]


@dataclass(frozen=True)
class Joined:
    """The joiner's output: the candidates to rank, each one's ordering score, whether
    those were merged across language pools (they may be negative: the ranker min-maxes
    them) and whether the best is in another language than the question's (``across``:
    its evidence is read on the dense side alone,
    ``tools.kb.search.answerability.DENSE_FEATURES``)."""

    pool: CandidatePool
    scores: dict[str, float]
    merged: bool = False
    across: bool = False


def join(found: Retrieved, fusion: Fusion, rule: MergeRule = DEFAULT_RULE) -> Joined:
    """The retrievers' pools joined: one pool fused, or per-language pools merged."""
    if found.question_language is None:
        pool = found.pools[ONE_POOL]
        scores = fused_scores(
            pool,
            mode=fusion.mode,
            fusion=fusion.method,
            vector_weight=fusion.vector_weight,
            similarity_floor=fusion.similarity_floor,
        )
        return Joined(pool, scores)
    pools, question_language, centred = found.pools, found.question_language, found.centred
    merged = merge_language_pools(pools, question_language, fusion, rule, centred)
    best = min(merged, key=lambda c: (-merged[c], c))
    winner = next(lang for lang, p in pools.items() if best in p.cosine or best in p.bm25)
    pool = union(pools, keep=merged, evidence=winner)
    across = winner != question_language and question_language in pools
    if across and centred is not None:
        # The evidence measures read cosines on the question language's scale.
        scaled = on_question_scale(pools[question_language], centred, pool.vector_found)
        if scaled:
            pool = replace(pool, vector_found=scaled)
    return Joined(pool, merged, merged=True, across=across)


def gate_features(
    own: CandidatePool | None,
    other: CandidatePool,
    centred: Mapping[str, float] | None = None,
) -> GateFeatures:
    """The gate's features; ``centred``: the candidates' centred cosines, read in place
    of the raw ones where given (``tools.kb.search.dense.centred_cosines``)."""

    def dense(pool: CandidatePool | None) -> list[float]:
        found = (pool.vector_found or pool.cosine) if pool else {}
        if centred is None:
            return list(found.values())
        return [centred[c] for c in found if c in centred]

    share = max((own.bm25[c].share for c in own.bm25_found), default=0.0) if own else 0.0
    mine, theirs = dense(own), dense(other)
    peak_other, peak_own = peaks(theirs, mine)
    return GateFeatures(
        10.0 * (max(theirs, default=0.0) - max(mine, default=0.0)), share, peak_other, peak_own
    )


def gate(features: GateFeatures, rule: MergeRule) -> float:
    """P(the answer is in the other language) for one query."""
    z = (
        rule.intercept
        + rule.best * features.best
        + rule.share * features.share
        + rule.peak_other * features.peak_other
        + rule.peak_own * features.peak_own
    )
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))


def merge_language_pools(
    pools: Mapping[str, CandidatePool],
    question_language: str,
    fusion: Fusion,
    rule: MergeRule = DEFAULT_RULE,
    centred: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The merged ordering score of every candidate of every language pool: its fused
    score within its language, weighed by the gate's probability that the answer is in
    another language (``MergeRule``). ``centred``: the candidates' centred cosines
    (:func:`centre_cosines`; None: raw cosines throughout)."""
    present = {lang: p for lang, p in pools.items() if p.ids}
    own = present.get(question_language)
    elsewhere = {
        lang: gate(gate_features(own, p, centred), rule)
        for lang, p in present.items()
        if lang != question_language
    }
    out: dict[str, float] = {}
    dense: dict[str, float] = {}  # each candidate's cosine as the merge compares them
    scored: dict[str, CandidatePool] = {}  # each pool as it is fused within its language
    for lang, pool in present.items():
        # BM25 stays within the question's language unless the rule says otherwise: in
        # another script its few matches (numbers, names) are noise over a good dense pool.
        mine = lang == question_language
        scored[lang] = pool if mine or rule.bm25_other else without_bm25(pool)
        if not mine and centred is not None:
            # Ranked on centred cosines, brought to the question language's raw scale:
            # fusion normalises within the pool, but vector mode compares raw scores.
            scale = on_question_scale(own, centred, scored[lang].cosine) if own else None
            scored[lang] = with_cosines(scored[lang], scale or centred)
        dense.update(scored[lang].cosine)
    fused_by_language = fused_each(
        scored,
        mode=fusion.mode,
        fusion=fusion.method,
        vector_weight=fusion.vector_weight,
        similarity_floor=fusion.similarity_floor,
    )
    for lang, fused in fused_by_language.items():
        mine = lang == question_language
        doubt = max(elsewhere.values(), default=0.0) if mine else 1.0 - elsewhere[lang]
        if own is None:
            doubt = 0.0  # no pool in the question's language: the others compete as equals
        ruled_out = own is not None and not mine and elsewhere[lang] < rule.cutoff
        for cid, score in fused.items():
            out[cid] = weighed(score, doubt, ruled_out, rule)
    if rule.slot > 0 and own is not None:
        doubtful = {lang for lang, p in elsewhere.items() if p >= rule.slot_floor}
        guarantee_slot(out, present, question_language, rule.slot, doubtful)
    lexical = {c: p.bm25[c].raw for p in present.values() for c in p.ids if c in p.bm25}
    # The best cosine both raw (what ranks within a language) and centred (what compares
    # languages, as the gate reads them): on raw alone xquad dev cross lost 0.004 nDCG@10.
    legs = [dense] if centred is None else [dense, centred]
    lead_both_legs(out, legs, lexical)
    return out


def lead_both_legs(
    scores: dict[str, float], dense: Sequence[Mapping[str, float]], lexical: Mapping[str, float]
) -> None:
    """Put first a candidate that is first on both legs: the best cosine (on each of the
    ``dense`` views: raw and, where languages are centred, centred) and the best BM25 hit
    (in place).

    Each language is fused within its own pool and weighed by the gate, so a chunk that
    beats every other candidate on meaning and on the question's words could still lose
    to another language's best (a pool of one or two chunks, a gate misled by a peaked
    pool): no evidence is better than both legs agreeing (issue 47). Without a BM25 hit
    the dense leg alone decides nothing here: that is the gate's job."""
    best_lexical = max((lexical.get(c, 0.0) for c in scores), default=0.0)
    if best_lexical <= 0:
        return
    leaders = [c for c in scores if lexical.get(c, 0.0) >= best_lexical]
    for view in dense:
        best = max(view.get(c, float("-inf")) for c in scores)
        leaders = [c for c in leaders if view.get(c, float("-inf")) >= best]
    top = max(scores.values())
    for c in leaders:
        scores[c] = max(scores[c], top + 1e-9)


def weighed(score: float, doubt: float, ruled_out: bool, rule: MergeRule) -> float:
    """One candidate's merged score: its fused score within its language, weighed by
    the doubt that its language holds the answer (``MergeRule``)."""
    if ruled_out:
        return score - 1.0 - rule.steepness
    if rule.scale > 0:
        return score * max(1e-9, 1.0 - doubt) ** rule.scale
    return score - rule.steepness * doubt


def guarantee_slot(
    scores: dict[str, float],
    pools: Mapping[str, CandidatePool],
    question_language: str,
    slot: int,
    languages: set[str],
) -> None:
    """Raise the best candidate of each of ``languages`` to rank ``slot`` among the
    question language's candidates when the merge put it lower (in place)."""
    mine = sorted((scores[c] for c in pools[question_language].ids if c in scores), reverse=True)
    if len(mine) < slot:
        return
    floor = mine[slot - 1] + 1e-9
    for lang, pool in pools.items():
        if lang == question_language or lang not in languages:
            continue
        theirs = [c for c in pool.ids if c in scores]
        if theirs:
            best = max(theirs, key=lambda c: (scores[c], c))
            scores[best] = max(scores[best], floor)


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


def with_cosines(pool: CandidatePool, cosines: Mapping[str, float]) -> CandidatePool:
    """The pool with ``cosines`` as its dense scores (candidates absent keep theirs)."""

    def swap(scores: Mapping[str, float]) -> dict[str, float]:
        return {c: cosines.get(c, s) for c, s in scores.items()}

    return replace(pool, cosine=swap(pool.cosine), vector_found=swap(pool.vector_found))


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
