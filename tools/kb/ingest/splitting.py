"""Cutting text to a token bound: sentences, over-long sentences, tables and lines.

The size rules of :mod:`tools.kb.ingest.chunking` (steps 3 and 5 of its docstring): prose is
split at sentence boundaries, a sentence over the bound at word or character
boundaries, a table between rows with its header repeated, code between lines, and
whatever still exceeds the bound is cut to size. No regex here may backtrack on a long
run of one character (giant inputs, tests/kb/ingest/test_giant_inputs.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.text import CJK_RE, estimate_tokens, split_sentences

_SEPARATOR_CELL_RE = re.compile(r":?-{3,}:?")


def is_table_separator(line: str) -> bool:
    """``|---|:---:|`` (outer pipes optional): the line under a table's header row."""
    cells = line.strip().removeprefix("|").removesuffix("|").split("|")
    return all(_SEPARATOR_CELL_RE.fullmatch(cell.strip()) for cell in cells)


def tail(text: str, budget: int) -> str:
    """Trailing whole sentences of ``text`` within ``budget`` tokens."""
    if budget <= 0:
        return ""
    chosen: list[str] = []
    used = 0
    for sentence in reversed(split_sentences(text.split("\n\n")[-1])):
        cost = estimate_tokens(sentence)
        if used + cost > budget:
            break
        chosen.insert(0, sentence)
        used += cost
    return join_sentences(chosen)


def join_sentences(sentences: list[str]) -> str:
    out = ""
    for s in sentences:
        # No space between Chinese sentences; a space between others.
        glue = "" if not out or (CJK_RE.search(out[-1]) or CJK_RE.search(s[0])) else " "
        if out and out[-1] in "。！？；":
            glue = ""
        out += glue + s
    return out


def split_prose(text: str, max_tokens: int, target_tokens: int) -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    used = 0
    for sentence in split_sentences(text):
        for piece in split_long_sentence(sentence, max_tokens):
            cost = estimate_tokens(piece)
            if buf and used + cost > target_tokens:
                parts.append(join_sentences(buf))
                buf, used = [], 0
            buf.append(piece)
            used += cost
    if buf:
        parts.append(join_sentences(buf))
    return [p for p in parts if p.strip()]


# One unit of an over-long sentence: a CJK character | a run of other non-space
# characters with the spaces after it | spaces. Units meet at whitespace or a CJK
# character, so their estimated tokens (the rule of tools.text.estimate_tokens: one per
# CJK character, ceil(len / 4) per run) add up exactly.
_UNIT_RE = re.compile(
    r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])"
    r"|([^\s\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)\s*"
    r"|\s+"
)


def split_long_sentence(sentence: str, max_tokens: int) -> list[str]:
    if estimate_tokens(sentence) <= max_tokens:
        return [sentence]
    # Cut at spaces in spaced scripts and between any two CJK characters; a running sum
    # of unit costs, not a re-estimate of the buffer per unit (quadratic on a
    # 200,000-character line of short words).
    out: list[str] = []
    buf: list[str] = []
    used = 0
    for unit, cost in _units(sentence, max_tokens):
        if buf and used + cost > max_tokens:
            out.append("".join(buf).strip())
            buf, used = [], 0
        buf.append(unit)
        used += cost
    if "".join(buf).strip():
        out.append("".join(buf).strip())
    return out


def _units(sentence: str, max_tokens: int) -> Iterator[tuple[str, int]]:
    """The units of ``sentence`` with their estimated tokens; an unbroken run longer
    than the bound comes in slices that each fit it."""
    width = max(1, max_tokens * 4)  # estimate_tokens: ceil(len / 4) per run of letters
    for match in _UNIT_RE.finditer(sentence):
        unit, run = match.group(0), match.group(2)
        if match.group(1):
            yield unit, 1
        elif run is None:
            yield unit, 0
        elif len(run) <= width:
            yield unit, max(1, -(-len(run) // 4))
        else:
            for i in range(0, len(unit), width):
                piece = unit[i : i + width]
                yield piece, estimate_tokens(piece)


def within(text: str, max_tokens: int) -> list[str]:
    if estimate_tokens(text) <= max_tokens:
        return [text]
    return [p for p in split_long_sentence(text, max_tokens) if p.strip()]


def split_table(table: str, max_tokens: int) -> list[str]:
    lines = table.split("\n")
    header_len = 2 if len(lines) > 1 and is_table_separator(lines[1]) else 1
    header, rows = lines[:header_len], lines[header_len:]
    header_tokens = estimate_tokens("\n".join(header))
    parts: list[str] = []
    buf: list[str] = []
    used = header_tokens

    def flush() -> None:
        # A row too big to share a part with the header goes alone, still whole if it fits.
        rows_only = "\n".join(buf)
        with_header = "\n".join(header + buf)
        if estimate_tokens(with_header) <= max_tokens or len(buf) > 1:
            parts.append(with_header)
            return
        if not any(p.startswith(header[0]) for p in parts):
            parts.append("\n".join(header))  # the header, once, so no line is lost
        parts.append(rows_only)

    for row in rows:
        cost = estimate_tokens(row)
        if buf and used + cost > max_tokens:
            flush()
            buf, used = [], header_tokens
        buf.append(row)
        used += cost
    if buf:
        flush()
    return parts


def split_lines(text: str, max_tokens: int) -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = estimate_tokens(line)
        if buf and used + cost > max_tokens:
            parts.append("\n".join(buf))
            buf, used = [], 0
        buf.append(line)
        used += cost
    if buf:
        parts.append("\n".join(buf))
    return parts
