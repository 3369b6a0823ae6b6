"""The data of ``bench/bench_pages.py``: the questions with their frozen results and pages
(RealTime QA, CRAG, FreshQA), and how an answer is scored."""

from __future__ import annotations

import bz2
import html
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prompts.answer import OFFLINE_NOTE_EN
from tools.answer.citations import LABEL_RE
from tools.evaluation.datasets import read_jsonl


@dataclass
class Result:
    """One frozen search result: what the SERP shows and the page behind it."""

    url: str  # the original address (the page is served from loopback)
    title: str
    snippet: str
    html: str
    date: str = ""


@dataclass
class Question:
    qid: str
    text: str
    results: list[Result]
    gold: list[str]  # acceptable answers (RealTimeQA: the gold choice)
    choices: list[str] = field(default_factory=list)
    gold_index: int = -1
    evidence: str = ""


def article_html(title: str, text: str, date: str) -> str:
    """A saved article text as the simple page a news site would serve."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paras)
    stamp = f"<time>{html.escape(date)}</time>" if date else ""
    return (
        f"<html><head><title>{html.escape(title)}</title></head><body>"
        f"<article><h1>{html.escape(title)}</h1>{stamp}\n{body}</article></body></html>"
    )


def load_realtimeqa(root: Path) -> list[Question]:
    folder = root / "realtimeqa" / "gcs"
    weeks = sorted(p.name.removesuffix("_qa.jsonl") for p in folder.glob("*_qa.jsonl"))
    if not weeks:
        raise SystemExit(f"no RealTimeQA weeks in {folder} (expected YYYYMMDD_qa.jsonl)")
    out: list[Question] = []
    for week in weeks:
        searches = {
            row["question_id"]: row.get("search_result") or []
            for row in read_jsonl(folder / f"{week}_gcs.jsonl")
        }
        for row in read_jsonl(folder / f"{week}_qa.jsonl"):
            choices = [str(c).replace("\\'", "'") for c in row["choices"]]
            gold = int(row["answer"][0])
            results = [
                Result(
                    url=str(r.get("url") or ""),
                    title=r.get("title") or "",
                    # The adapter cuts it to snippet_chars; a SERP shows the lead of a news item.
                    snippet=" ".join(str(r.get("text") or "").split())[:1000],
                    html=article_html(r.get("title") or "", r.get("text") or "", ""),
                    date=str(r.get("publish_date") or ""),
                )
                for r in searches.get(row["question_id"], [])
            ]
            out.append(
                Question(
                    row["question_id"],
                    row["question_sentence"],
                    results,
                    [choices[gold]],
                    choices,
                    gold,
                    str(row.get("evidence") or ""),
                )
            )
    return out


def load_crag(root: Path) -> list[Question]:
    path = root / "crag_sample" / "dev_data.jsonl.bz2"
    if not path.exists():
        raise SystemExit(f"{path} does not exist")
    out: list[Question] = []
    with bz2.open(path, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            row = json.loads(line)
            results = [
                Result(
                    r.get("page_url") or "",
                    r.get("page_name") or "",
                    r.get("page_snippet") or "",
                    r.get("page_result") or "",
                    r.get("page_last_modified") or "",
                )
                for r in row["search_results"]
            ]
            out.append(Question(f"crag-{n}", row["query"], results, crag_gold(row)))
    return out


def freshqa_status(root: Path) -> dict[str, Any]:
    """What FreshQA offers for this measurement (it has no saved results or pages)."""
    path = root / "freshqa" / "freshqa_dev.jsonl"
    rows = list(read_jsonl(path))
    keys = sorted({k for r in rows for k in r})
    saved = [k for k in keys if "search" in k or "page" in k or "html" in k or "snippet" in k]
    return {
        "questions": len(rows),
        "fields": keys,
        "with_source_urls": sum(bool(r.get("source")) for r in rows),
        "saved_results_or_pages": saved,
        "measurable": bool(saved),
        "why": "FreshQA rows carry source URLs only (no saved search results, snippets or "
        "pages); fetching them needs the internet, so snippets vs pages cannot be compared "
        "offline without inventing pages.",
    }


def crag_gold(row: dict[str, Any]) -> list[str]:
    """A CRAG row's acceptable answers. ``alternative_answers`` is a JSON list written as a
    string in the public sample ("[]"): unpacked as it was, its characters "[" and "]"
    became answers, and every answer with a citation label was counted right. A missing
    answer ("nan") is none."""
    alternatives = row.get("alternative_answers") or []
    if isinstance(alternatives, str):
        text = alternatives.strip()
        alternatives = json.loads(text) if text.startswith("[") else [text]
    given = [str(row.get("answer") or ""), *(str(a) for a in alternatives)]
    return [a for a in given if a.strip() and a.strip().casefold() != "nan"]


def norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def contains(hay: str, needle: str) -> bool:
    n = norm(needle)
    return bool(n) and f" {n} " in f" {norm(hay)} "


def pick_choice(answer: str, choices: list[str]) -> int | None:
    """The single choice the answer names best (phrase contained, then share of its
    words), or None when nothing matches or two choices tie."""
    words = set(norm(answer).split())

    def score(choice: str) -> tuple[bool, float]:
        tokens = norm(choice).split()
        return contains(answer, choice), sum(t in words for t in tokens) / max(1, len(tokens))

    scores = [score(c) for c in choices]
    best = max(scores)
    if best[1] == 0 or scores.count(best) > 1:
        return None
    return scores.index(best)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar(gained: int, lost: int) -> float:
    """Exact two-sided McNemar p-value of the discordant pairs (binomial, p = 1/2)."""
    n = gained + lost
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def answer_text(answer: str) -> str:
    """The quoted sentences only: no offline note, no labels."""
    return LABEL_RE.sub("", answer.replace(OFFLINE_NOTE_EN, ""))
