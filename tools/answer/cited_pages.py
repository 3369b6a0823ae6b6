"""The page of a cited sentence: a chunk over two PDF pages is cited by the page of the
sentence its label vouches for ("p. 2"), not by its span ("pp. 1–2", whose link opened
page 1: issue 56). The chunk records where each page begins in its text
(``page_starts``, written at ingest: ``tools.kb.ingest.chunking``); a chunk ingested
before that keeps its span.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tools.text import LABEL_RE, split_sentences

_WORD_RE = re.compile(r"[A-Za-z0-9]+|[\u3400-\u9fff]")


def page_starts(src: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(offset, page)`` pairs of a chunk over pages, or [] (unknown or one page)."""
    raw = src.get("page_starts")
    if not isinstance(raw, str) or not raw:
        return []
    out: list[tuple[int, int]] = []
    for part in raw.split(","):
        offset, _, page = part.partition(":")
        if offset.isdigit() and page.isdigit():
            out.append((int(offset), int(page)))
    return sorted(out)


def sentence_before(answer: str, end: int) -> str:
    """The sentence a label at ``end`` of ``answer`` vouches for: the last one before it,
    labels left out."""
    before = LABEL_RE.sub(" ", answer[:end]).strip()
    sentences = split_sentences(before)
    return sentences[-1] if sentences else ""


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD_RE.findall(text)}


def _offset_of(sentence: str, text: str) -> int | None:
    """Where ``sentence`` stands in ``text``: verbatim (an extractive quote), else the
    passage's sentence sharing most of its words (a model's paraphrase)."""
    at = text.find(sentence.strip())
    if at >= 0 and sentence.strip():
        return at
    wanted = _words(sentence)
    best, where, cursor = 0, None, 0
    for part in split_sentences(text):
        found = text.find(part, cursor)
        if found < 0:
            continue
        cursor = found + len(part)
        shared = len(wanted & _words(part))
        if shared > best:
            best, where = shared, found
    return where


def page_at(starts: Sequence[tuple[int, int]], offset: int) -> int:
    return max((p for o, p in starts if o <= offset), default=starts[0][1])


def cited_page(src: Mapping[str, Any], sentences: Sequence[str]) -> int | None:
    """The page of the first of the ``sentences`` citing ``src`` (an answer leads with
    the sentence on the point; the link opens one page), or None when the chunk lies on
    one page, has no page starts, or no sentence is found in it."""
    starts = page_starts(src)
    if len(starts) < 2:
        return None
    text = str(src.get("text") or "")
    for sentence in sentences:
        offset = _offset_of(sentence, text)
        if offset is not None:
            return page_at(starts, offset)
    return None
