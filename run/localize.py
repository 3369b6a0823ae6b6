"""Warnings and reasons in the answer's language (the table is ``prompts.notices``)."""

from __future__ import annotations

import re
from functools import cache

from prompts.notices import ZH_NOTICES

MAX_DEPTH = 3  # a reason inside a reason inside a reason: enough, and a bound


@cache
def _compiled() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(rf"^(?:{p})$", re.DOTALL), zh) for p, zh in ZH_NOTICES)


def localize(text: str, language: str, _depth: int = 0) -> str:
    """``text`` as the user should read it: unchanged for English (or an unknown notice),
    the Chinese wording of a known notice for ``language == "zh"``."""
    if language != "zh" or _depth >= MAX_DEPTH:
        return text
    for pattern, template in _compiled():
        match = pattern.match(text.strip())
        if match:
            parts = [localize(g or "", language, _depth + 1) for g in match.groups()]
            return template.format(*parts)
    return text


def localize_all(texts: list[str], language: str) -> list[str]:
    return [localize(t, language) for t in texts]
