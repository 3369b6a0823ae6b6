"""Whether the passages found hold what a question asks about, and which of them an
extractive answer may quote: one rule from the evidence, for both graphs and both modes.

The extractive answer (``tools.policy.offline.extractive_answer``) quotes the sentences
sharing the most words with the question. A passage on the topic but not on the point
shares some: asked about visitor *badges*, the sample KB's "Visitors receive a vest and
overshoes at the reception desk" matches "visitors" and was quoted as the answer; asked
for the NR-900's speed, the NR-200's specification table was quoted (issue 56); asked how
stock options vest (公司的股票期权怎么归属？), the expense rules were. One rule for every
answer of both graphs (the state graph's ``generate``, the agent's offline answer and
its bounded answer, and a model's answer, which the same :func:`quotable_sources` tells
what the evidence holds), applied to the sources before answering:

1. the question's key terms (``tools.policy.key_terms``): its codes ("NR-900"), years
   and content words in English or Chinese, never question words, generic nouns naming
   the kind of answer ("period", "amount", 多久, 期限), units or routing cues;
2. a code or year that no passage mentions, in any language, is not found: nothing is
   quoted, the answer is the refusal. So is a word no passage in the question's language
   mentions (``missing_terms``), unless passages in another language stand beside them
   and at most ``MAX_SAID_ELSEWHERE`` of the words are missing (they match by meaning, not
   words; only passages in another language: the calibrated refusal alone judges them);
3. a passage set only topically near is not found either: no single passage in the
   question's language mentions at least ``MIN_PASSAGE_COVERAGE`` of the key terms
   (the terms spread over several passages, none on the point);
4. otherwise the passages kept are those mentioning more than half as many key terms as
   the best one (:func:`term_coverage`); passages in another language are kept as they
   are, and so are the sources when all are.

Strict on purpose: a quote that leaves out what was asked about is not an answer.
``bench/bench_refusal.py --offline`` measures both error kinds on the dev sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from tools.policy.key_terms import CODE_RE, YEAR_RE, is_chinese, key_terms, mentions
from tools.text import detect_language

S = TypeVar("S", bound=Mapping[str, Any])


# A passage must mention this share of the key terms (rule 3). Chosen across the dev
# sets together (bench/bench_refusal.py --offline, leave one set out); 1.0: every key
# term in one passage.
MIN_PASSAGE_COVERAGE = 1.0
# Beside passages in another language, at most this share of the question's words may be
# missing from the passages in its language (rule 2): the sample KB's "NR-200 机器人单台的
# 标价是多少？" is answered by an English price list (标价 in no Chinese passage); "公司的
# 股票期权怎么归属？" beside one English passage was quoted from the expense rules.
MAX_SAID_ELSEWHERE = 0.5


def bound(term: str, language: str) -> bool:
    """A word of the question's own language: a passage in another language says it in
    other words. Codes, years and Latin words in a Chinese question are found as they are
    in a passage of any language."""
    if CODE_RE.fullmatch(term) or YEAR_RE.fullmatch(term):
        return False
    return is_chinese(term) == (language == "zh")


def missing_terms(question: str, texts: Sequence[str], others: Sequence[str] = ()) -> list[str]:
    """The key terms no passage mentions (rule 2): a word of the question's language
    looked for in ``texts`` (the passages in that language), any other term in ``others``
    too."""
    asked = detect_language(question)
    return [
        t
        for t in key_terms(question)
        if not any(mentions(t, x, question) for x in texts)
        and (bound(t, asked) or not any(mentions(t, x, question) for x in others))
    ]


def lacking(question: str, text: str) -> list[str]:
    """The key terms ``text`` does not mention."""
    return [t for t in key_terms(question) if not mentions(t, text, question)]


def term_coverage(question: str, text: str) -> float:
    """Share of the question's key terms ``text`` mentions (1.0 without key terms)."""
    terms = key_terms(question)
    if not terms:
        return 1.0
    return 1.0 - len(lacking(question, text)) / len(terms)


def word_coverage(question: str, text: str) -> float:
    """Share of an English question's words (codes and years aside) ``text`` mentions:
    the share rule 4 keeps passages by."""
    words = [t for t in key_terms(question) if bound(t, "en")]
    if not words:
        return 1.0
    return sum(1 for t in words if mentions(t, text, question)) / len(words)


def passage_text(src: Mapping[str, Any]) -> str:
    return " ".join(str(src.get(k) or "") for k in ("title", "heading", "text", "snippet"))


def not_found(question: str, sources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The key terms the evidence lacks (rules 2 and 3), [] when it may answer."""
    asked = detect_language(question)
    texts = [passage_text(s) for s in sources]
    same = [t for s, t in zip(sources, texts, strict=True) if str(s.get("lang") or asked) == asked]
    foreign = len(same) < len(texts)
    words = [t for t in key_terms(question) if bound(t, asked)]
    missing = missing_terms(question, same, texts)
    if not same:  # matched by meaning alone: only the codes, years and Latin words count
        return [t for t in missing if t not in words]
    absent = [t for t in missing if t in words]
    if len(absent) < len(missing):  # a code, year or Latin word no passage mentions
        return [t for t in missing if t not in words]
    # A passage in another language may say in its words what the question asks: a few
    # of its words (at most half: the passages in the question's language hold the rest).
    if absent and (not foreign or len(absent) > len(words) * MAX_SAID_ELSEWHERE):
        return absent
    coverage = [term_coverage(question, t) for t in same]
    if not foreign and max(coverage) < MIN_PASSAGE_COVERAGE:  # rule 3: no passage on the point
        return lacking(question, same[coverage.index(max(coverage))])
    return []


def quotable_sources(question: str, sources: Sequence[S]) -> tuple[list[S], list[str]]:
    """The sources an answer may use, and the key terms the evidence lacks (then no
    source: the answer is "not found"). See the module docstring; both graphs and both
    modes decide here."""
    if not key_terms(question) or not sources:
        return list(sources), []
    missing = not_found(question, sources)
    if missing:
        return [], missing
    asked = detect_language(question)
    if asked != "en":  # rule 4 compares English words only
        return list(sources), []
    same = {id(s): word_coverage(question, passage_text(s)) for s in sources
            if str(s.get("lang") or asked) == asked}  # fmt: skip
    if not same:
        return list(sources), []
    best = max(same.values())
    kept = [s for s in sources if (c := same.get(id(s), best)) > best / 2 or c == best]
    return kept, []
