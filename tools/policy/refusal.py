"""Refusal: when a model-written answer must become "No relevant information found".

The answer prompt tells the model to reply exactly 没找到相关信息。 / "No relevant
information found." when no source supports an answer. Models do not always obey: they
paraphrase the refusal ("the sources do not mention ..."), or answer anyway from a passage
that is on the topic but does not hold the fact (RGB's negatives: same event, other
figures). :func:`check_answer` is the one rule both graphs apply after the citation check:

1. a refusal in any wording, with no valid citation, becomes the canonical sentence (so
   clients, evaluations and the run record see one refusal);
2. an answer with no valid citation at all is unsupported (prompt rule 1: every factual
   sentence cites its source) and becomes the refusal;
3. an answer whose new content (its words that are not the question's) mostly occurs in
   none of the passages the model was given is unsupported too. Content is compared as
   the knowledge base's BM25 terms (jieba words, Snowball stems), so a paraphrase that
   keeps the facts' words passes; the share is ``support`` and ``MIN_SUPPORT`` its floor.
   An answer with fewer than ``MIN_TERMS`` new terms is too short to judge this way.
   An answer citing only passages in another language (an English question answered
   from a Chinese table) is judged on the terms a passage can hold across languages:
   its numbers, and words some passage has too.

Before these, an answer that copies the prompt's source markup (``<internal_sources>``,
``<source label=…>``: SmolLM2-135M echoed its prompt so, citing a valid label) is no
answer and becomes the refusal.

The offline extractive answer never reaches rule 3's risk (it quotes the passages), and
it already refuses by the calibrated confidence (``refuses``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tools.kb.index.tokenizers import make_tokenizer
from tools.text import LABEL_RE, detect_language

NO_INFORMATION = {"zh": "没找到相关信息。", "en": "No relevant information found."}

# Below this share of its new terms found in the passages, an answer is unsupported: more
# than 70 % of what it adds to the question is in no passage. Conservative on
# purpose (a false refusal hides a right answer); bench/bench_refusal.py measures both
# error kinds on RGB's passages.
MIN_SUPPORT = 0.3
# An answer with fewer new terms is judged by rules 1-2 only: too little to measure
# ("Six years give 18 days" of a table row "5 to 10 years | 18 days" adds two words).
MIN_TERMS = 3

# Verdict words carry no fact of their own ("Yes [web-1]." on a claim).
_VERDICT_WORDS = frozenset(
    [
        "yes",
        "no",
        "true",
        "fals",
        "correct",
        "incorrect",
        "是",
        "否",
        "对",
        "不",
        "不是",
        "正确",
        "错误",
    ]
)

_REFUSAL_RE = re.compile(
    "|".join(
        [
            r"没(?:有)?找到相关(?:的)?信息",
            r"(?:来源|资料|材料|文档|上下文)(?:中|里)?(?:并)?(?:没有|未|无)(?:提到|提及|包含|涉及|说明|给出|相关)",
            r"(?:无法|不能)(?:根据|从)(?:所给|给出|提供)?的?(?:来源|资料|材料|信息)",
            r"(?:无法|不能)回答",
            r"no relevant information",
            r"(?:the )?(?:sources?|context|passages?|documents?) (?:provided )?(?:do(?:es)? not|don't|doesn't) "
            r"(?:contain|mention|provide|include|say|state|specify|give)",
            r"(?:is|are) not (?:mentioned|given|stated|provided|specified) in the (?:sources?|context|passages?)",
            r"(?:cannot|can't|unable to) (?:answer|determine|find)",
            r"(?:do not|don't) have (?:enough|sufficient) information",
            r"there is no (?:relevant )?information",
        ]
    ),
    re.IGNORECASE,
)


# The answer prompt's fences (tools/answer/context_builder.py): never part of an answer.
_PROMPT_MARKUP_RE = re.compile(r"<\s*/?\s*(?:internal_sources|web_sources|source)\b[^>]*>", re.I)


@dataclass(frozen=True)
class AnswerCheck:
    """What the refusal rule made of an answer."""

    answer: str  # the answer as it stands, or the canonical refusal
    refused: bool  # the answer is (now) a refusal
    reason: str  # why it was replaced, '' when kept as written
    support: float  # share of the answer's new terms found in its cited passages


def refusal_text(language: str) -> str:
    return NO_INFORMATION["zh" if language == "zh" else "en"]


def is_refusal(answer: str) -> bool:
    """Whether ``answer`` says, in any common wording, that the sources lack the answer."""
    return bool(_REFUSAL_RE.search(answer))


@lru_cache(maxsize=1)
def _terms() -> Any:
    return make_tokenizer("jieba", stem=True)


def support(
    answer: str, question: str, passages: Sequence[str], *, across: bool = False
) -> tuple[float, int]:
    """Share of the answer's terms that are not the question's and occur in ``passages``,
    and how many such terms there are. ``across``: the answer cites only passages in
    another language, which say in their words what it says in its own ("the daily meal
    allowance … is 120 yuan" of "二类城市 | 500元 | 120元"): only its terms some passage
    holds and its numbers can be checked, so only they count."""
    tokenize = _terms()
    asked = set(tokenize(question))
    new = {t for t in tokenize(LABEL_RE.sub(" ", answer)) if t not in asked} - _VERDICT_WORDS
    found: set[str] = set()
    for text in passages:
        found.update(tokenize(text))
    if across:
        new = {t for t in new if t in found or any(c.isdigit() for c in t)}
    if not new:
        return 1.0, 0
    return len(new & found) / len(new), len(new)


def cites_across(answer: str, cited: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``answer`` is a sentence in one language citing only sources in another.
    A bare term ("Permacrisis", "7.52‰") is in no language: a passage holds it as written."""
    text = LABEL_RE.sub(" ", answer)
    words = [t for t in _terms()(text) if not any(c.isdigit() for c in t)]
    language = detect_language(text)
    return (
        len(words) >= MIN_TERMS
        and bool(cited)
        and all(str(s.get("lang") or detect_language(source_text(s))) != language for s in cited)
    )


def source_text(src: Mapping[str, Any]) -> str:
    return " ".join(str(src.get(k) or "") for k in ("title", "heading", "text"))


def check_answer(
    answer: str,
    question: str,
    cited: Sequence[Mapping[str, Any]],
    language: str,
    *,
    given: Sequence[Mapping[str, Any]] = (),
) -> AnswerCheck:
    """The refusal rule of a model-written answer (see the module docstring).

    ``cited`` are the sources whose labels the answer uses and that exist (the citation
    check's output); ``given`` all sources the model was shown (``cited`` when empty).
    """
    canonical = refusal_text(language)
    if not answer.strip():
        return AnswerCheck(canonical, True, "the model gave no answer", 0.0)
    if _PROMPT_MARKUP_RE.search(answer):
        return AnswerCheck(canonical, True, "the answer copies the prompt's source markup", 0.0)
    if not cited:
        if is_refusal(answer):
            reason = "" if answer.strip() in NO_INFORMATION.values() else "refusal reworded"
            return AnswerCheck(canonical, True, reason, 0.0)
        return AnswerCheck(canonical, True, "the answer cites no source", 0.0)
    passages = [source_text(s) for s in (given or cited)]
    share, n = support(answer, question, passages, across=cites_across(answer, cited))
    if (n >= MIN_TERMS and share < MIN_SUPPORT) or (n > 0 and share == 0.0):
        return AnswerCheck(
            canonical,
            True,
            f"only {share:.0%} of the answer's terms occur in the sources it cites",
            share,
        )
    return AnswerCheck(answer, False, "", share)
