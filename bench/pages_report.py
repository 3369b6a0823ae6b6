"""How ``bench/bench_pages.py`` reports: shares with their Wilson intervals, McNemar's test
between the two ways, timings, per-question detail."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from typing import Any

from bench.pages_data import (
    Question,
    contains,
    mcnemar,
    wilson,
)
from tools.evaluation.datasets import percentile


def share(rows: list[dict[str, Any]], key: str) -> str:
    have = [r[key] for r in rows if key in r]
    k, n = sum(have), len(have)
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} [{lo:.0%}, {hi:.0%}]" if n else "-"


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} / {percentile(values, 90):.0f}"


def report(
    name: str, rows: dict[str, list[dict[str, Any]]], questions: list[Question], detail: bool
) -> dict[str, Any]:
    snip, pages = rows["snippets"], rows["pages"]
    keys = [
        k
        for k in ("context_has_gold", "answer_has_gold", "answer_picks_gold")
        if any(k in r for r in snip)
    ]
    print(f"\n## {name}: {len(snip)} questions, snippets vs pages (95 % Wilson interval)\n")
    print("| figure | snippets | pages | right only with pages / only with snippets |")
    print("|---|---|---|---|")
    summary: dict[str, Any] = {"questions": len(snip)}
    for k in keys:
        pairs = [(a[k], b[k]) for a, b in zip(snip, pages, strict=True) if k in a]
        gained = sum(1 for a, b in pairs if b and not a)
        lost = sum(1 for a, b in pairs if a and not b)
        print(
            f"| {k.replace('_', ' ')} | {share(snip, k)} | {share(pages, k)} | {gained} / {lost} (McNemar p = {mcnemar(gained, lost):.2f}) |"
        )
        summary[k] = {"snippets": sum(a for a, _ in pairs), "pages": sum(b for _, b in pairs)}
        summary[k].update(n=len(pairs), pages_only=gained, snippets_only=lost)
    read = sum(r["pages_read"] for r in pages)
    failed = sum(r["pages_failed"] for r in pages)
    print(f"| web pages read / not read | - | {read} / {failed} | |")
    routes = Counter(str(r["route"]) for r in snip)
    with_web = sum(r["web_sources"] > 0 for r in snip)
    print(
        f"\nroutes: {', '.join(f'{k} {v}' for k, v in routes.most_common())}; "
        f"questions answered with web sources: {with_web}/{len(snip)}"
    )
    diff = [b["ms"] - a["ms"] for a, b in zip(snip, pages, strict=True)]
    page_ms = {k: [v for r in pages for v in r["page_ms"][k]] for k in ("fetch", "extract", "rank")}
    print("\n| latency, ms (median / p90) | value |")
    print("|---|---|")
    print(f"| end to end, snippets | {ms([r['ms'] for r in snip])} |")
    print(f"| end to end, pages | {ms([r['ms'] for r in pages])} |")
    print(f"| pages − snippets, same question | {ms(diff)} |")
    print(
        f"| reading the pages (the run's `read_pages` calls) | {ms([r['read_pages_ms'] for r in pages])} |"
    )
    print(f"| per page: fetch from loopback (robots.txt included) | {ms(page_ms['fetch'])} |")
    print(f"| per page: HTML extraction | {ms(page_ms['extract'])} |")
    print(f"| per page: chunking + BM25 + lexical rerank | {ms(page_ms['rank'])} |")
    summary.update(
        pages_read=read,
        pages_failed=failed,
        ms_snippets=[r["ms"] for r in snip],
        ms_pages=[r["ms"] for r in pages],
        read_pages_ms=[r["read_pages_ms"] for r in pages],
        page_ms=page_ms,
        rows=rows,
    )
    if detail:
        print_detail(questions, snip, pages)
    return summary


def print_detail(
    questions: list[Question], snip: list[dict[str, Any]], pages: list[dict[str, Any]]
) -> None:
    """One row per question: its gold answer, found with snippets / with pages."""
    print("\n| question | gold | context has gold (snippets / pages) | answer has gold |")
    print("|---|---|---|---|")
    for q, a, b in zip(questions, snip, pages, strict=True):
        gold = q.gold[0] if len(q.gold[0]) <= 40 else q.gold[0][:37] + "..."
        print(
            f"| {q.text} | {gold} | {a['context_has_gold']:d} / {b['context_has_gold']:d} "
            f"| {a['answer_has_gold']:d} / {b['answer_has_gold']:d} |"
        )


def ceiling(questions: list[Question]) -> str:
    """How many questions have the gold answer (and the evidence sentence, tags removed)
    anywhere in their saved pages: what any reading of them could find."""
    k = sum(any(contains(r.html, g) for r in q.results for g in q.gold) for q in questions)
    empty = sum(not q.results for q in questions)
    line = f"gold answer anywhere in the saved pages: {k}/{len(questions)}; no results: {empty}"
    with_evidence = [q for q in questions if q.evidence]
    if with_evidence:
        found = sum(
            any(contains(r.html, re.sub(r"<[^>]+>", "", q.evidence)) for r in q.results)
            for q in with_evidence
        )
        line += f"; evidence sentence verbatim in them: {found}/{len(with_evidence)}"
    return line
