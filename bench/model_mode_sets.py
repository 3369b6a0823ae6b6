"""RGB and CRAG dev questions for ``bench.bench_model_mode --sets``: per question a
throw-away knowledge base of its passages, answered by both graphs in model mode and
offline, side by side. The data sets stay in ``--data-dir`` (read-only, non-commercial
licences: never copied into the repository).

* RGB ``zh_refine_dev.json``: the first ``n`` questions with 5 passages, 40 % noise
  (accuracy), and the same questions over negatives only (rejection: a right answer is a
  refusal);
* CRAG ``crag_sample/dev_data.jsonl.bz2``: the first ``n`` questions, their saved search
  results' snippets as the knowledge base (no web: the graphs read them as passages).
"""

from __future__ import annotations

import bz2
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.model_runs import run_question
from bench.pages_data import crag_gold
from cli.eval_answers import rgb_documents
from graph import Context, build_agent_graph, build_graph
from run import resources
from tools.evaluation.datasets import SourceDocument, content_hash
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.policy.refusal import is_refusal

Case = tuple[str, str, list[SourceDocument], list[str]]  # id, question, passages, gold


def _gold(answer: Any) -> list[str]:
    """RGB's answer: a list of parts, a part a string or alternatives; the first part's
    alternatives stand for it (a small bench, a simple check)."""
    parts = answer if isinstance(answer, list) else [answer]
    first = parts[0] if parts else ""
    return [str(a) for a in (first if isinstance(first, list) else [first])]


def rgb_cases(root: Path, n: int) -> Iterator[tuple[str, Case]]:
    with (root / "rgb" / "zh_refine_dev.json").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()][:n]
    for row in rows:
        rid, q, gold = f"rgb-{row.get('id')}", str(row["query"]), _gold(row.get("answer"))
        yield "rgb", (rid, q, rgb_documents(row, 5, 0.4, False), gold)
        yield "rgb-negatives", (rid, q, rgb_documents(row, 5, 0.4, True), [])


def crag_cases(root: Path, n: int) -> Iterator[tuple[str, Case]]:
    with bz2.open(root / "crag_sample" / "dev_data.jsonl.bz2", "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i >= n:
                break
            row = json.loads(line)
            docs = [
                SourceDocument(f"s{j}", f"crag:{i}:{j}", text, content_hash(text), False)
                for j, r in enumerate(row["search_results"])
                if (text := " ".join(str(r.get("page_snippet") or "").split()))
            ]
            gold = crag_gold(row)
            if gold:  # a question without an answer is no negative: not asked
                yield "crag", (f"crag-{i}", str(row["query"]), docs, gold)


def run_case(
    case: Case, home: Path, contexts: dict[str, dict[str, Any]], embedding: Callable[[], Any]
) -> list[dict[str, Any]]:
    """One question over its own KB, through both graphs under each context; ``embedding``
    makes the KB's embedding model (None: the product's default)."""
    cid, question, docs, gold = case
    kb = KnowledgeBase(KBConfig(home=home, collection="bench-mm"), embedding_model=embedding())
    rows: list[dict[str, Any]] = []
    try:
        kb.ingest_documents(docs)
        resources.register_kb(kb)
        for mode, values in contexts.items():
            ctx = Context(data_home=str(home), collection="bench-mm", **values)
            for name, builder in (("state", build_graph), ("agent", build_agent_graph)):
                row = run_question(builder(), question, ctx, gold or None)
                if not gold:  # a negative: right is a refusal
                    row["right"] = is_refusal(row["answer"])
                rows.append({"id": cid, "mode": mode, "graph": name, **row})
    finally:
        kb.drop()
        resources.close_all()
    return rows


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per set, mode and graph: accuracy (or rejection on negatives), validity, calls,
    tokens, seconds."""
    out = []
    keys = sorted({(r["set"], r["mode"], r["graph"]) for r in rows})
    for key in keys:
        mine = [r for r in rows if (r["set"], r["mode"], r["graph"]) == key]
        n = len(mine)
        graded = [r for r in mine if r["right"] is not None]  # a long expected sentence: read it
        right = sum(bool(r["right"]) for r in graded) / max(1, len(graded))
        valid = sum(float(r["citation_validity"] or 0) for r in mine) / n
        # Without the sufficiency check: its refusals undone (a negative then answered, a
        # positive's draft right or not as written).
        undone = [r for r in mine if r.get("check_refused")]
        if key[0].endswith("negatives"):
            unchecked = right - len(undone) / n
        else:
            unchecked = right + sum(bool(r.get("draft_right")) for r in undone) / max(
                1, len(graded)
            )
        out.append(
            f"{key[0]:<14} {key[1]:<8} {key[2]:<6} n={n} graded={len(graded)} "
            f"{'rejection' if key[0].endswith('negatives') else 'accuracy'}={right:.2f} "
            f"(without the check {unchecked:.2f}, {len(undone)} refused by it) "
            f"validity={valid:.2f} calls={sum(r['model_calls'] for r in mine) / n:.1f} "
            f"tokens={sum(r['tokens_in'] + r['tokens_out'] for r in mine) / n:.0f} "
            f"s={sum(r['wall_s'] for r in mine) / n:.1f}"
        )
    return out
