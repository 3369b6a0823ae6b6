"""Numeric ranges in a table's key column: which row a quantity of the question falls in.

"How many days after 6 years of service?" shares no word with "5 to less than 10 years /
18 days" that it does not share with every other row of the leave table; the number
decides. A row's first cell is read as a range ("Less than 1 year", "1 to less than 3
years", "10 years or more", "Up to 2,000", "不满1年", "满1年不满3年", "满10年及以上",
"4至10个工作日"); a quantity is a number of the question with the word after it, when
any (its unit: "6 years", "6年"). Codes such as "NR-500" or "F-37" are names, not
quantities.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tools.text import CODE_RE

_NUMBER = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
# A number not inside a date, a time or a version ("2025-12-31", "21:00", "v3.2.1"),
# with the word, Chinese character or percent sign after it.
_QUANTITY = re.compile(
    r"(?<![\d.:/-])" + _NUMBER + r"(?!\d|[.:/-]\d)\s*([A-Za-z]+|[\u4e00-\u9fff%])?"
)
_YEAR = re.compile(r"^(19|20)\d\d$")
_GAP = r"[^\d]{0,24}?"  # the unit between two numbers: " years ", "年", "个工作日"

_TWO = r"(?:至|到|~|～|-|–|—|to)"  # "4 to 10", "4至10"
_BELOW = r"(?:less than|under|below|fewer than|不满|不足|未满|少于|低于)"
_AT_MOST = r"(?:up to|at most|no more than|not more than)"
_ABOVE = r"(?:more than|over|above|greater than|超过|多于|高于)"
_OR_MORE = r"(?:及以上|或以上|以上|or more|or above|or over|and above|and over|or longer|\+)"
# (pattern, low side closed, high side closed); a pattern with one number names its side
# by the group it fills (``lo`` or ``hi``). Two-number forms come first.
_FORMS: list[tuple[re.Pattern[str], bool, bool]] = [
    (re.compile(pattern), low_closed, high_closed)
    for pattern, low_closed, high_closed in [
        (rf"^满?{_NUMBER}{_GAP}(?:不满|不足|未满|less than|under)\s*{_NUMBER}", True, False),
        (rf"^(?:from\s+)?{_NUMBER}{_GAP}{_TWO}\s*{_NUMBER}", True, True),
        (rf"^{_BELOW}\s*(?P<hi>{_NUMBER})", True, False),
        (rf"^{_AT_MOST}\s*(?P<hi>{_NUMBER})", True, True),
        (rf"^(?P<hi>{_NUMBER}){_GAP}(?:以下|以内)", True, True),
        (rf"^{_ABOVE}\s*(?P<lo>{_NUMBER})", False, True),
        (rf"^at least\s*(?P<lo>{_NUMBER})", True, True),
        (rf"^满?(?P<lo>{_NUMBER}){_GAP}{_OR_MORE}", True, True),
    ]
]


@dataclass(frozen=True)
class Range:
    """An interval of numbers, each side open or closed."""

    low: float = -math.inf
    high: float = math.inf
    low_closed: bool = True
    high_closed: bool = True

    def __contains__(self, value: float) -> bool:
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def key_range(row: str) -> Range | None:
    """The range a table row's first cell names ("5 to less than 10 years / 18 days"),
    or None when it names none."""
    cell = row.split(" / ", 1)[0].strip().casefold()
    for pattern, low_closed, high_closed in _FORMS:
        m = pattern.search(cell)
        if m is None:
            continue
        named = m.groupdict()
        if named.get("hi"):
            return Range(high=_number(named["hi"]), high_closed=high_closed)
        if named.get("lo"):
            return Range(low=_number(named["lo"]), low_closed=low_closed)
        return Range(_number(m.group(1)), _number(m.group(2)), low_closed, high_closed)
    return None


def quantities(question: str) -> list[tuple[float, str]]:
    """The question's numbers with the word after each (its unit, or ""); codes, dates,
    times and versions left out."""
    text = CODE_RE.sub(" ", question)
    found = [(m.group(1), (m.group(2) or "").casefold()) for m in _QUANTITY.finditer(text)]
    # "in 2025" is a date, not a quantity (a year with a unit, "2025年", is kept).
    return [(_number(n), unit) for n, unit in found if unit or not _YEAR.match(n)]


def _unit_matches(unit: str, text: str) -> bool:
    # "years" in the question, "year" in a row: compare a stem; a Chinese unit is one char.
    stem = unit if not unit.isascii() else unit[: max(3, len(unit) - 1)]
    return not unit or stem in text


def matching_row(rows: list[tuple[str, str]], asked: list[tuple[float, str]]) -> int | None:
    """The index of the one row (``(quoted, matched with its header)``) whose key range
    holds a quantity of the question in that row's unit; None when no row or several do,
    or when the table's key column is not a set of ranges (fewer than two rows parse)."""
    ranges = [key_range(quoted) for quoted, _ in rows]
    if not asked or sum(r is not None for r in ranges) < 2:
        return None
    hits = {
        i
        for i, (r, (_, matched)) in enumerate(zip(ranges, rows, strict=True))
        if r is not None and any(v in r and _unit_matches(u, matched.casefold()) for v, u in asked)
    }
    return hits.pop() if len(hits) == 1 else None


def naming_row(rows: list[str], codes: list[str]) -> int | None:
    """The one row of ``rows`` naming a code of the question as a whole ("AGV-200": its
    row, not the "AGV-2000" one nor a row whose load is "1200 kg"); None when no row or
    several do."""
    wanted = {c.casefold() for c in codes}
    named = [
        i for i, row in enumerate(rows) if wanted & {c.casefold() for c in CODE_RE.findall(row)}
    ]
    return named[0] if len(named) == 1 else None
