"""Which passages an extractive answer may quote: those that mention the question's key
terms.

The extractive answer (``tools.policy.offline.extractive_answer``) quotes the sentences
sharing the most words with the question. A passage on the topic but not on the point
shares some: asked about visitor *badges*, the sample KB's "Visitors receive a vest and
overshoes at the reception desk" matches "visitors" and was quoted as the answer; beside
a relevant web result, a KB note sharing only "price" was quoted too. One rule for every
extractive answer (the state graph's ``generate``, the agent's offline answer and its
bounded answer in model mode), applied to the sources before quoting:

1. the question's key terms are its content words in Latin script (3+ letters, not a
   number, a quantity word like "many" or a routing cue like "today", "latest",
   "policy"), of an English question: the passages'
   wording is compared word for word (stems: "badges" matches "badge"). Chinese word
   boundaries differ between a question and a passage (jieba cuts "天年" from "多少天年假"),
   so a Chinese question is left to the calibrated refusal and this rule does not apply;
2. when a key term is mentioned by no passage in the question's language
   (``uncovered_terms`` of ``tools.policy.offline``, with stems), nothing is quoted: the
   answer is the refusal ("badge" of "What do visitors receive as a badge at
   reception?"). Strict on purpose: a quote that leaves out what was asked about is not
   an answer. Of the 25 sample questions (examples/questions.jsonl) the offline
   answer answered before, it refuses none;
3. otherwise the passages kept are those mentioning more than half as many key terms as
   the best one (:func:`term_coverage`); passages in another language (matched by
   meaning, not words) are kept as they are, and so are the sources when all are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from tools.kb.index.tokenizers import keywords, make_tokenizer
from tools.policy.cues import INTERNAL_CUES_EN, TIME_CUES_EN
from tools.policy.offline import uncovered_terms
from tools.text import detect_language

S = TypeVar("S", bound=Mapping[str, Any])


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Units say in what form the answer comes, not what it is about: "How many kilograms can
# the R2 robot carry?" is answered by "carries 300 kg".
UNITS = _words(
    """kilogram kilograms gram grams tonne tonnes ton tons pound pounds ounce ounces meter
    meters metre metres kilometer kilometers kilometre kilometres centimeter centimeters
    millimeter millimeters mile miles feet foot inch inches liter liters litre litres hour
    hours minute minutes second seconds day days week weeks month months year years percent
    percentage dollar dollars euro euros yuan degree degrees volt volts watt watts"""
)
# How a request is put, not what it is about ("Latest news please", "Can you tell me").
REQUEST_WORDS = _words(
    "please kindly thanks thank tell know explain describe show give find need want help"
)
# Verbs of getting and having that frame a question rather than name its subject ("How
# many days of annual leave does an employee get?" is answered by "... are granted 18
# days"; the sample KB's first demo question was refused over "get").
FRAME_VERBS = _words(
    "get gets got getting receive receives received have has had take takes took make makes"
)
# Words that ask for a quantity, or say when or where to look ("today", "latest",
# "company", "policy": the routing cues), rather than name what is asked about.
NOT_KEY = frozenset(
    {
        "many",
        "much",
        *UNITS,
        *REQUEST_WORDS,
        *FRAME_VERBS,
        *(c.strip() for c in TIME_CUES_EN),
        *(c.strip() for c in INTERNAL_CUES_EN),
    }
)
MIN_LETTERS = 3


@lru_cache(maxsize=1)
def _stem() -> Any:
    return make_tokenizer("jieba", stem=True)


def key_terms(question: str) -> list[str]:
    """The question's key terms (rule 1); none for a Chinese question."""
    if detect_language(question) != "en":
        return []
    return [
        w
        for w in keywords(question)
        if w.isascii() and w.isalpha() and len(w) >= MIN_LETTERS and w.casefold() not in NOT_KEY
    ]


@lru_cache(maxsize=256)
def _stems(text: str) -> frozenset[str]:
    return frozenset(_stem()(text))


def mentions(term: str, text: str) -> bool:
    """Whether ``text`` has ``term`` in it, or a word of the same stem ("badges" and
    "badge", "flies" and "fly")."""
    if term.casefold() in text.casefold():
        return True
    # Snowball leaves a short word as it is ("fly") but stems its plural ("flies": "fli").
    forms = f"{term} {term[:-1]}ies" if term.endswith("y") else term
    return bool(_stems(forms) & _stems(text))


def missing_terms(question: str, texts: Sequence[str]) -> list[str]:
    """The key terms none of ``texts`` mentions (rule 2): ``uncovered_terms`` of the key
    terms, where a stem found counts as the word."""
    terms = key_terms(question)
    uncovered = set(uncovered_terms(question, list(texts)))
    return [t for t in terms if t in uncovered and not any(mentions(t, x) for x in texts)]


def term_coverage(question: str, text: str) -> float:
    """Share of the question's key terms ``text`` mentions (1.0 without key terms)."""
    terms = key_terms(question)
    if not terms:
        return 1.0
    return sum(1 for t in terms if mentions(t, text)) / len(terms)


def passage_text(src: Mapping[str, Any]) -> str:
    return " ".join(str(src.get(k) or "") for k in ("title", "heading", "text", "snippet"))


def quotable_sources(question: str, sources: Sequence[S]) -> tuple[list[S], list[str]]:
    """The sources an extractive answer may quote, and the key terms no passage mentions
    (then no source: the answer refuses). See the module docstring."""
    if not key_terms(question):
        return list(sources), []
    asked = detect_language(question)
    same = {id(s): term_coverage(question, passage_text(s)) for s in sources
            if str(s.get("lang") or asked) == asked}  # fmt: skip
    if not same:  # only passages in another language: matched by meaning, kept
        return list(sources), []
    missing = missing_terms(question, [passage_text(s) for s in sources if id(s) in same])
    if missing:
        return [], missing
    best = max(same.values())
    kept = [s for s in sources if (c := same.get(id(s), best)) > best / 2 or c == best]
    return kept, []
