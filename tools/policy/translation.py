"""Whether a model's translation of the question is usable as a knowledge-base query.

A weak model "translates" a Chinese question into "," or "knnweld", or writes on until
its token limit; such text searched as a query only brings noise into the fusion. One
rule for both graphs (``tools.answer.crosslingual``: the planner's translations and the
translate call): a translation is kept only when

1. it is not empty and not the question itself;
2. it is written in the target language's script (``zh``: Chinese characters make the
   language, as ``tools.text.detect_language`` reads it; ``en``: Latin letters, no
   Chinese character);
3. it has about the question's length: at least 2 words (``en``) or 2 characters
   (``zh``), and at least a quarter of what the question's length suggests (a Chinese
   character is about one English word), at most 4 times that plus 40 characters;
4. it keeps the question's numbers and codes ("F-37", "2025"): those are not
   translated.

:func:`translation_problem` says why one is not usable ('' when it is).
"""

from __future__ import annotations

import math
import re

from tools.text import CJK_RE, CODE_RE, count_cjk, detect_language

_WORD_RE = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")
_NUMBER_RE = re.compile(r"\d+")
# Each Chinese character stands for about one English word (and one word for one
# character): the length a translation is expected to have is the question's units.
MIN_SHARE = 0.25
MIN_UNITS = 2
SLACK_CHARS = 40


def units(text: str) -> int:
    """Length in words and Chinese characters (what a translation keeps roughly)."""
    return count_cjk(text) + len(_WORD_RE.findall(CJK_RE.sub(" ", text)))


def translation_problem(question: str, text: str, target: str) -> str:
    """Why ``text`` is not a usable translation of ``question`` into ``target`` (``zh`` or
    ``en``), '' when it is (see the module docstring for the rule)."""
    text = text.strip()
    if not text:
        return "empty"
    if " ".join(text.split()).casefold() == " ".join(question.split()).casefold():
        return "the question unchanged"
    if len(text) > 4 * len(question) + SLACK_CHARS:
        return "much longer than the question"
    if target == "zh" and (detect_language(text) != "zh" or count_cjk(text) < MIN_UNITS):
        return "not written in Chinese"
    if target != "zh" and (count_cjk(text) > 0 or len(_WORD_RE.findall(text)) < MIN_UNITS):
        return "not written in English"
    if units(text) < max(MIN_UNITS, math.ceil(MIN_SHARE * units(question))):
        return "much shorter than the question"
    kept = text.casefold()
    for token in [*CODE_RE.findall(question), *_NUMBER_RE.findall(question)]:
        if token.casefold() not in kept:
            return f"{token!r} of the question is missing"
    return ""
