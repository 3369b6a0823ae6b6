"""Deterministic strategies used when no model is configured (the offline mode).

They are rules, documented as such, never presented as a model: routing by cue
words plus a probe of the knowledge base, rewriting by keyword extraction,
sufficiency by query-term coverage, and an extractive answer that quotes the
best-matching sentences of the sources with their labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tools.kb.index.tokenizers import CHINESE_MODALS, keywords
from tools.policy.cues import INTERNAL_CUES_EN, INTERNAL_CUES_ZH, TIME_CUES_EN, TIME_CUES_ZH
from tools.policy.ranges import matching_row, naming_row, quantities
from tools.policy.untrusted import quotable_text
from tools.text import CODE_RE, LABEL_RE, detect_language, split_sentences

_YEAR_RE = re.compile(r"(?<!\d)(20\d\d)(?!\d)")
_SAME_SENTENCE = re.compile(r"[\W_]+")

# The KB probe is the calibrated answerability (a probability). At or above STRONG the KB
# "knows" the topic (no cue needed). Chosen on three real KBs together (bench/README.md,
# "Routing"): SciFact (1,000 documents), CMRC2018 and CRUD-RAG news, the largest
# worst-case margin over the targets (KB-only >= 0.85 for questions the KB answers,
# fast-changing FreshQA questions with the web >= 0.95), every KB left out in turn.
KB_PROBE_STRONG = 0.125
KB_PROBE_WEAK = KB_PROBE_STRONG / 2


# The sources a turn consults (the router's verdict); every module names this one.
Route = Literal["knowledge", "search", "both"]
ROUTES: tuple[Route, ...] = ("knowledge", "search", "both")


@dataclass(frozen=True)
class RouteDecision:
    route: Route
    reason: str


def _has_cue(text: str, cues: tuple[str, ...]) -> list[str]:
    low = f" {text.casefold()} "
    return [c for c in cues if c in low]


def offline_route(
    question: str,
    kb_probe: float,
    *,
    now: datetime | None = None,
    strong: float = KB_PROBE_STRONG,
) -> RouteDecision:
    """Route by time-sensitivity cues, internal cues and what the KB holds (``strong``:
    the probe above which the KB alone answers; bench/bench_routing.py sweeps it)."""
    year_now = (now or datetime.now(UTC)).year
    time_cues = _has_cue(question, TIME_CUES_ZH + TIME_CUES_EN)
    years = [int(y) for y in _YEAR_RE.findall(question) if int(y) >= year_now]
    if years:
        time_cues.append(str(years[0]))
    internal_cues = _has_cue(question, INTERNAL_CUES_ZH + INTERNAL_CUES_EN)
    probe = f"KB probe {kb_probe:.2f}"
    if time_cues and (internal_cues or kb_probe >= strong):
        return RouteDecision(
            "both", f"time-sensitive ({', '.join(time_cues[:3])}) and internal ({probe})"
        )
    if time_cues:
        return RouteDecision("search", f"time-sensitive cues: {', '.join(time_cues[:3])}; {probe}")
    if internal_cues or kb_probe >= strong:
        cues = (
            f"internal cues: {', '.join(c.strip() for c in internal_cues[:3])}; "
            if internal_cues
            else ""
        )
        return RouteDecision("knowledge", f"{cues}{probe}")
    if kb_probe >= KB_PROBE_WEAK:
        return RouteDecision("both", f"no cue, the KB matches only partly ({probe})")
    return RouteDecision("both", f"no cue and the KB barely matches ({probe})")


def offline_rewrites(question: str, num_rewrites: int) -> tuple[list[str], list[str]]:
    """KB queries (original first) and web queries, by keyword extraction."""
    words = keywords(question)
    kb: list[str] = [question]
    if words:
        kb.append(" ".join(words))
    if len(words) > 3:
        kb.append(" ".join(words[: max(2, len(words) // 2 + 1)]))
    kb = list(dict.fromkeys(q for q in kb if q.strip()))[: num_rewrites + 1]
    web = list(dict.fromkeys([question, " ".join(words)] if words else [question]))[:3]
    return kb, web


def uncovered_terms(question: str, texts: list[str]) -> list[str]:
    """Question keywords that none of ``texts`` contains; a modal verb ("可以", as "can"
    in English) is never one: searching for it alone finds nothing the question asks."""
    corpus = " ".join(texts).casefold()
    return [w for w in keywords(question) if w.casefold() not in corpus and w not in CHINESE_MODALS]


def text_overlap(question: str, text: str) -> float:
    """Share of the question's keywords present in ``text`` (for unscored web results)."""
    words = keywords(question)
    if not words:
        return 0.0
    low = text.casefold()
    return sum(1 for w in words if w.casefold() in low) / len(words)


def no_information(language: str) -> str:
    return "没找到相关信息。" if language == "zh" else "No relevant information found."


LANGUAGE_NAMES = {"zh": ("Chinese", "中文"), "en": ("English", "英文")}
# Semantic similarity of the question to each text (the KB's embedding model); used only
# for sources in another language than the question, where no word can match.
Similarity = Callable[[str, list[str]], list[float]]


@dataclass(frozen=True)
class _Unit:
    quoted: str  # what the answer quotes
    matched: str  # what the question's words are looked for in
    table: int = -1  # the table a row belongs to (-1: prose)
    whole: bool = False  # the whole table, rows joined


def _units(text: str) -> list[_Unit]:
    """Sentences of prose, each table row ("cell / cell", matched together with its
    table's header row) and each whole table ("row; row"): the answer quotes the one row
    that matches ("爬坡能力 / 3%"), or the table when no row stands out (see ``_tables``)."""
    units: list[_Unit] = []
    prose: list[str] = []
    header: str | None = None
    rows: list[str] = []
    for line in [*text.split("\n"), ""]:
        stripped = line.strip()
        if not stripped.startswith("|"):
            if rows:
                table = len({u.table for u in units if u.table >= 0})
                joined = "; ".join(rows)
                units.append(_Unit(joined, joined, table, whole=True))
                units.extend(_Unit(r, f"{header} {r}", table) for r in rows[1:])
            header, rows = None, []
            prose.append(stripped)
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if not all(set(c) <= set("-: ") for c in cells):  # skip the |---| separator
            rows.append(" / ".join(c for c in cells if c))
            header = header or rows[0]
    sentences = split_sentences(" ".join(p for p in prose if p))
    return [*units, *(_Unit(t, t) for t in sentences)]


def _tables(
    scored: list[tuple[float, _Unit]],
    words: list[str],
    asked: list[tuple[float, str]],
    named: list[str],
) -> list[tuple[float, _Unit]]:
    """Per table, its one best row when that row stands strictly above the table's other
    rows (with any other row naming a question word itself, such as a code "F-37"); when
    the rows tie on the header's words, the one row naming a code of the question
    (``named``: "AGV-200"), else the one whose key range holds a quantity of the question
    ("6 years": "5 to less than 10 years / 18 days", ``tools.policy.ranges``); else the
    whole table."""
    keep: list[tuple[float, _Unit]] = [(sc, u) for sc, u in scored if u.table < 0]
    for table in sorted({u.table for _, u in scored if u.table >= 0}):
        rows = sorted(
            (x for x in scored if x[1].table == table and not x[1].whole), key=lambda x: -x[0]
        )
        whole = [x for x in scored if x[1].table == table and x[1].whole]
        if rows and (len(rows) == 1 or rows[0][0] > rows[1][0]):
            keep.append(rows[0])
            codes = [c.casefold() for c in CODE_RE.findall(" ".join(words))] or [
                w for w in words if len(w) >= 2 and any(ch.isdigit() for ch in w)
            ]
            keep.extend(x for x in rows[1:] if any(c in x[1].quoted.casefold() for c in codes))
        elif (i := naming_row([u.quoted for _, u in rows], named)) is not None or (
            i := matching_row([(u.quoted, u.matched) for _, u in rows], asked)
        ) is not None:
            keep.append(rows[i])
        elif whole:
            keep.append(whole[0])
    return keep


def _quotable(sentence: str) -> str | None:
    # Label-shaped text inside a source is data: quoting it would turn it into a
    # citation of some other source. Instructions and markup in it are data too
    # (tools/policy/untrusted.py).
    clean = quotable_text(LABEL_RE.sub("", sentence).strip(" #-*"))
    return clean if clean is not None and len(clean) >= 4 else None


def _foreign_scores(
    question: str, units: list[str], relevance: float, similarity: Similarity | None
) -> list[float]:
    """Scores of a source's units when the source is in another language: only its one
    unit closest in meaning to the question counts, weighted by the source's rank."""
    if similarity is None or not units:
        return [0.0] * len(units)
    sims = similarity(question, units)
    best = max(range(len(units)), key=lambda i: sims[i])
    return [relevance if i == best else 0.0 for i in range(len(units))]


def extractive_answer(
    question: str,
    sources: list[dict[str, Any]],
    language: str,
    *,
    max_sentences: int = 3,
    similarity: Similarity | None = None,
) -> str:
    """Quote the source sentences (or table rows) that best match the question, each with
    its label. A source in another language than the question's shares no words with it:
    with ``similarity`` its closest unit is quoted as written, and the answer says, in
    the question's language, that the source is in the other language."""
    words = [w.casefold() for w in keywords(question)]
    codes = [c.casefold() for c in CODE_RE.findall(question)]
    asked = detect_language(question)
    scored: list[tuple[float, int, str, str, str]] = []
    for order, src in enumerate(sources):
        lang = str(src.get("lang") or asked)
        for score, u in _source_units(question, words, codes, src, lang != asked, similarity):
            scored.append((score, order, u.quoted, str(src["label"]), lang))
    if not scored:
        return no_information(language)
    scored.sort(key=lambda s: (-s[0], s[1], len(s[2])))
    chosen: list[str] = []
    seen: set[str] = set()
    quoted_languages: set[str] = set()
    for _, _, sentence, lab, lang in scored:
        if lang != asked and asked in quoted_languages:
            continue  # chosen by meaning alone, below a passage that matches by words
        # The same sentence in two sources (a reposted news item) differs only in spaces
        # and punctuation: quoting it twice would take the place of another sentence.
        key = _SAME_SENTENCE.sub("", sentence.casefold())
        if key in seen:
            continue
        seen.add(key)
        chosen.append(f"{sentence.rstrip()} {lab}")
        quoted_languages.add(lang)
        if len(chosen) >= max_sentences:
            break
    glue = "" if language == "zh" else " "
    note = source_language_note(quoted_languages - {language}, language)
    return f"{note}{glue}{glue.join(chosen)}" if note else glue.join(chosen)


def _source_units(
    question: str,
    words: list[str],
    codes: list[str],
    src: dict[str, Any],
    foreign: bool,
    similarity: Similarity | None,
) -> list[tuple[float, _Unit]]:
    """One source's quotable units with their scores (``foreign``: the source is in
    another language than the question, so ``similarity`` picks its closest unit)."""
    units = [
        _Unit(clean, u.matched, u.table, u.whole)
        for u in _units(str(src.get("text") or ""))
        if (clean := _quotable(u.quoted))
    ]
    relevance = float(src.get("relevance") or 0)
    near_scores = (
        _foreign_scores(question, [u.matched for u in units if not u.whole], relevance, similarity)
        if foreign
        else []
    )
    semantic = iter(near_scores)
    candidates: list[tuple[float, _Unit]] = []
    for u in units:
        near = next(semantic, 0.0) if near_scores and not u.whole else 0.0
        if near_scores and any(c in u.quoted.casefold() for c in codes):
            # A code of the question ("F-37") named in the other language's text: above
            # the closest unit in meaning, so its table row stands out.
            near = max(near, relevance + 0.01)
        hits = sum(1 for w in words if w in u.matched.casefold())
        if hits == 0 and near <= 0:
            continue
        # Prefer coverage, then the source's rank, then shorter sentences.
        candidates.append((max(hits / max(1, len(words)), near) + relevance * 0.2, u))
    return _tables(candidates, words, quantities(question), CODE_RE.findall(question))


def source_language_note(languages: set[str], language: str) -> str:
    """Said in the answer's language when quoted sources are in another language (an
    extractive answer quotes them as written: nothing is translated). No "offline" in it:
    a model-mode run answers extractively too (the agent's bounded answer, a failed model,
    the deadline)."""
    known = sorted(lang for lang in languages if lang in LANGUAGE_NAMES)
    if not known:
        return ""
    if language == "zh":
        names = "、".join(LANGUAGE_NAMES[lang][1] for lang in known)
        return f"（以下来源为{names}原文，未经翻译。）"
    names = " and ".join(LANGUAGE_NAMES[lang][0] for lang in known)
    return f"(The source below is in {names}, quoted as written, not translated.)"


def answer_language(question: str, setting: str = "auto") -> str:
    return setting if setting in ("zh", "en") else detect_language(question)
