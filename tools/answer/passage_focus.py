"""The part of a knowledge-base passage a model reads: the lines that match the question,
whole, and what surrounds them, within a character budget.

A chunk is often longer than what a prompt can show of each source. Cutting it at its
first ``snippet_chars`` hid the fact (issue 56: "18 days" sat at character 435 of its
chunk; the model, shown 280 characters, answered "5 days" from another row). The offline
answer quotes the sentence or table row that matches the question; the model is shown the
same: the best-matching line in full (a table row with its table's header, so the columns
keep their names), then the lines around it while the budget lasts. One rule for the
answer prompt and the agent's tool results.
"""

from __future__ import annotations

import itertools
import math
import re

from tools.kb.index.tokenizers import keywords
from tools.websearch.snippets import cut

_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
GAP = "…"


def _lines(text: str) -> list[str]:
    """Non-empty lines, each with its inner whitespace collapsed; prose paragraphs are
    split into sentences so one long paragraph is not one unbreakable line."""
    out: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        if line.startswith("|") or len(line) <= 200:
            out.append(line)
            continue
        out.extend(s for s in re.split(r"(?<=[.!?。！？；;])\s*", line) if s)
    return out


def _weights(lines: list[str], terms: list[str]) -> dict[str, float]:
    """Each term's weight by how few lines hold it (a term on every line, such as 年假 in
    the leave policy, says little about which line answers)."""
    folded = [line.casefold() for line in lines]
    weights: dict[str, float] = {}
    for t in terms:
        holding = sum(1 for line in folded if t in line)
        weights[t] = math.log(1 + len(lines) / holding) if holding else 0.0
    return weights


def _phrases(terms: list[str]) -> list[str]:
    """Neighbouring question terms as they would be written together ("满10年", "10 years"):
    a line holding the question's phrase beats one holding its words apart."""
    out = []
    for a, b in itertools.pairwise(terms):
        out.append(f"{a} {b}" if a.isascii() and b.isascii() else f"{a}{b}")
    return out


def _score(line: str, weights: dict[str, float], phrases: list[str], numbers: set[str]) -> float:
    folded = line.casefold()
    words = sum(w for t, w in weights.items() if t in folded)
    # A phrase with a number ("满10年", "6 years") names the case asked about.
    said = sum(4.0 if any(c.isdigit() for c in p) else 1.0 for p in phrases if p in folded)
    score = words + said + sum(1.0 for n in numbers if n in line)
    # Per length: a long paragraph collects stray hits of common words.
    return score / math.sqrt(1 + len(line) / 100)


def _table_header(lines: list[str], row: int) -> list[int]:
    """The header line (and its ``|---|`` rule) of the Markdown table ``row`` is in."""
    if not lines[row].startswith("|"):
        return []
    first = row
    while first > 0 and lines[first - 1].startswith("|"):
        first -= 1
    return [i for i in (first, first + 1) if i < row and lines[i].startswith("|")]


def _around(best: int, n: int) -> list[int]:
    """Line indexes near ``best``: two after, one before, and so on outwards."""
    after = list(range(best + 1, n))
    before = list(range(best - 1, -1, -1))
    order: list[int] = []
    while after or before:
        order.extend(after[:2])
        order.extend(before[:1])
        after, before = after[2:], before[1:]
    return order


def focus_passage(text: str, question: str, limit: int) -> str:
    """``text`` within ``limit`` characters, centred on the lines that match ``question``
    (all of it when it fits; its head when nothing matches)."""
    lines = _lines(text)
    whole = "\n".join(lines)
    if len(whole) <= limit:
        return whole
    terms = [t.casefold() for t in keywords(question)]
    weights, phrases = _weights(lines, terms), _phrases(terms)
    numbers = set(_NUMBER_RE.findall(question))
    scores = [_score(line, weights, phrases, numbers) for line in lines]
    best = max(range(len(lines)), key=lambda i: (scores[i], -i)) if lines else 0
    if not lines or scores[best] == 0:
        return cut(" ".join(lines), limit)
    chosen = {best, *_table_header(lines, best)}
    used = sum(len(lines[i]) + 1 for i in chosen)
    if used > limit:  # one huge line: cut around its start (it matched as a whole)
        return cut(lines[best], limit)
    # Two lines after for each line before: a matched heading, label or table header is
    # followed by its content (the table's rows).
    order = _around(best, len(lines))
    for i in order:
        if i not in chosen and used + len(lines[i]) + 1 <= limit:
            chosen.add(i)
            used += len(lines[i]) + 1
    out: list[str] = []
    previous = -1
    for i in sorted(chosen):
        if i != previous + 1:
            out.append(GAP)
        out.append(lines[i])
        previous = i
    if previous != len(lines) - 1:
        out.append(GAP)
    return "\n".join(out)
