"""Deterministic strategies used when no model is configured (the offline mode).

They are rules, documented as such, never presented as a model: routing by cue
words plus a probe of the knowledge base, rewriting by keyword extraction,
sufficiency by query-term coverage, and an extractive answer that quotes the
best-matching sentences of the sources with their labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tools.kb.tokenizers import keywords
from tools.policy.untrusted import quotable_text
from tools.text import LABEL_RE, detect_language, split_sentences

TIME_CUES_ZH = (
    "明天",
    "今年",
    "明年",
    "下一",
    "下个",
    "即将",
    "几号",
    "几点",
    "今天",
    "今日",
    "最近",
    "最新",
    "本周",
    "这周",
    "本月",
    "现在",
    "目前",
    "当前",
    "新闻",
    "股价",
    "汇率",
    "天气",
    "实时",
    "刚刚",
    "昨天",
)
TIME_CUES_EN = (
    "next ",
    "upcoming",
    "this year",
    "tomorrow",
    "what day",
    "what month",
    "what time",
    "what year",
    "latest",
    "current",
    "currently",
    "today",
    "tonight",
    "this week",
    "this month",
    "news",
    "price",
    "stock",
    "weather",
    "exchange rate",
    "right now",
    "recent",
    "breaking",
    "yesterday",
    "now",
)
INTERNAL_CUES_ZH = (
    "公司",
    "内部",
    "流程",
    "制度",
    "手册",
    "规定",
    "政策",
    "报销",
    "年假",
    "入职",
    "我们",
    "员工",
    "审批",
    "产品",
)
INTERNAL_CUES_EN = (
    "company",
    "internal",
    "process",
    "policy",
    "policies",
    "handbook",
    "manual",
    "our ",
    "we ",
    "employee",
    "reimburse",
    "expense",
    "leave",
    "onboarding",
    "approval",
    "procedure",
)
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
    """Question keywords that none of ``texts`` contains."""
    corpus = " ".join(texts).casefold()
    return [w for w in keywords(question) if w.casefold() not in corpus]


def text_overlap(question: str, text: str) -> float:
    """Share of the question's keywords present in ``text`` (for unscored web results)."""
    words = keywords(question)
    if not words:
        return 0.0
    low = text.casefold()
    return sum(1 for w in words if w.casefold() in low) / len(words)


def no_information(language: str) -> str:
    return "没找到相关信息。" if language == "zh" else "No relevant information found."


def _units(text: str) -> list[str]:
    """Sentences of prose; a table is one unit ("a / b; c / d"), kept whole so rows keep their header."""
    units: list[str] = []
    prose: list[str] = []
    rows: list[str] = []
    for line in [*text.split("\n"), ""]:
        stripped = line.strip()
        if stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):  # skip the |---| separator
                rows.append(" / ".join(c for c in cells if c))
            continue
        if rows:
            units.append("; ".join(rows))
            rows = []
        prose.append(stripped)
    units.extend(split_sentences(" ".join(p for p in prose if p)))
    return units


def extractive_answer(
    question: str, sources: list[dict[str, Any]], language: str, *, max_sentences: int = 3
) -> str:
    """Quote the source sentences that best match the question, each with its label."""
    words = [w.casefold() for w in keywords(question)]
    scored: list[tuple[float, int, str, str]] = []
    for order, src in enumerate(sources):
        for sentence in _units(str(src.get("text") or "")):
            # Label-shaped text inside a source is data: quoting it would turn it into a
            # citation of some other source.
            # Instructions and markup in it are data too (tools/policy/untrusted.py).
            clean = quotable_text(LABEL_RE.sub("", sentence).strip(" #-*"))
            if clean is None or len(clean) < 4:
                continue
            low = clean.casefold()
            hits = sum(1 for w in words if w in low)
            if hits == 0:
                continue
            # Prefer coverage, then the source's rank, then shorter sentences.
            score = hits / max(1, len(words)) + float(src.get("relevance") or 0) * 0.2
            scored.append((score, order, clean, str(src["label"])))
    if not scored:
        return no_information(language)
    scored.sort(key=lambda s: (-s[0], s[1], len(s[2])))
    chosen: list[str] = []
    seen: set[str] = set()
    for _, _, sentence, lab in scored:
        # The same sentence in two sources (a reposted news item) differs only in spaces
        # and punctuation: quoting it twice would take the place of another sentence.
        key = _SAME_SENTENCE.sub("", sentence.casefold())
        if key in seen:
            continue
        seen.add(key)
        chosen.append(f"{sentence.rstrip()} {lab}")
        if len(chosen) >= max_sentences:
            break
    glue = "" if language == "zh" else " "
    return glue.join(chosen)


def answer_language(question: str, setting: str = "auto") -> str:
    return setting if setting in ("zh", "en") else detect_language(question)
