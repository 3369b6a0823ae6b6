"""Answer-level evaluations: routing on FreshQA, offline answers on RGB.

Both run the real graph code (router rules, retrieval, extractive answer, citation
checking) offline, so their figures describe exactly what a keyless user gets.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from graph import Context, build_graph
from run import resources
from tools.evaluation.datasets import BeirData, percentile, read_jsonl
from tools.kb.ingest.loaders import SourceDocument, content_hash
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.policy.offline import offline_route

NO_INFO = ("没找到相关信息", "No relevant information found")


def evaluate_routing(
    path: Path, kb: KnowledgeBase | None, kb_questions: BeirData | None = None
) -> dict[str, Any]:
    """Route distribution per FreshQA ``fact_type`` with the offline router.

    With ``kb_questions`` (a BEIR set whose corpus is the KB), also: of the questions
    the KB answers (a judged document in the top five hits), the share routed to the
    KB alone (no paid search) and the share whose route includes the KB.
    """
    per_type: dict[str, Counter[str]] = {}
    false_premise: Counter[str] = Counter()
    for row in read_jsonl(path):
        question = str(row.get("question") or "")
        if not question.strip():
            continue
        probe = kb.probe(question) if kb is not None else 0.0
        decision = offline_route(question, probe)
        per_type.setdefault(str(row.get("fact_type")), Counter())[decision.route] += 1
        if row.get("false_premise"):
            false_premise[decision.route] += 1
    fast = per_type.get("fast-changing", Counter())
    fast_total = sum(fast.values())
    with_web = fast["search"] + fast["both"]
    answered: Counter[str] = Counter()
    if kb is not None and kb_questions is not None:
        for qid in sorted(kb_questions.qrels):
            question = kb_questions.queries[qid]
            found = kb.retrieve(question, 5)
            if any(h.doc_id in kb_questions.qrels[qid] for h in found.hits):
                answered[offline_route(question, found.answerability).route] += 1
    kb_total = sum(answered.values())
    extra: dict[str, Any] = {}
    if kb_total:
        extra = {
            "kb_answered_questions": kb_total,
            "kb_answered_routes": dict(answered),
            "kb_answered_kb_only": round(answered["knowledge"] / kb_total, 4),
            "kb_answered_with_kb": round((answered["knowledge"] + answered["both"]) / kb_total, 4),
        }
    return {
        **extra,
        "questions": sum(sum(c.values()) for c in per_type.values()),
        "routes_by_fact_type": {t: dict(c) for t, c in sorted(per_type.items())},
        "false_premise_routes": dict(false_premise),
        "fast_changing_with_web": round(with_web / fast_total, 4) if fast_total else None,
    }


def _gold_found(answer: str, gold: Any) -> bool:
    """RGB answers: a list of parts; a part is a string or a list of alternatives."""
    parts = gold if isinstance(gold, list) else [gold]
    low = answer.casefold()
    for part in parts:
        options = part if isinstance(part, list) else [part]
        if not any(str(o).casefold() in low for o in options):
            return False
    return True


def evaluate_rgb(
    path: Path,
    *,
    negatives_only: bool = False,
    passages: int = 5,
    noise: float = 0.4,
    max_questions: int | None = None,
    embedding: str = "local",
    kb_factory: Any = None,
    context: dict[str, Any] | None = None,
    home: Path | None = None,
) -> dict[str, Any]:
    """Per question: a throw-away KB from its passages, an offline answer, no web.

    ``context`` overrides Context fields; ``home`` keeps the embedding cache between runs
    (a temporary directory otherwise). ``records`` has each question's confidence and
    outcome, so a table of refusal thresholds needs one run at ``refusal_threshold`` 0."""
    rows = list(read_jsonl(path))[: max_questions or None]
    graph = build_graph()
    correct = rejected = 0
    validity: list[float] = []
    latencies: list[float] = []
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hybrid-rag-rgb-", dir=home) as tmp:
        for i, row in enumerate(rows):
            docs = rgb_documents(row, passages, noise, negatives_only)
            config = KBConfig(
                home=home or Path(tmp), collection=f"rgb-{i:04d}", embedding=embedding
            )
            overrides = {**(context or {}), "data_home": str(home or tmp)}
            out, ms = answer_over(graph, str(row["query"]), docs, config, kb_factory, overrides)
            latencies.append(ms)
            answer = str(out.get("answer") or "")
            refused = any(marker in answer for marker in NO_INFO)
            right = not refused and _gold_found(answer, row.get("answer"))
            rejected += refused
            correct += right
            validity.append(float(out.get("citation_validity", 1.0)))
            records.append(
                {
                    "confidence": float(out.get("confidence") or 0),
                    "refused": refused,
                    "correct": right,
                }
            )
    return rgb_summary(
        len(rows),
        correct,
        rejected,
        validity,
        latencies,
        records,
        negatives_only=negatives_only,
        passages=passages,
        noise=noise,
    )


def answer_over(
    graph: Any,
    question: str,
    docs: list[SourceDocument],
    config: KBConfig,
    kb_factory: Any,
    overrides: dict[str, Any],
) -> tuple[dict[str, Any], float]:
    """The offline answer to ``question`` over a throw-away KB of ``docs``, and its
    latency in ms; the KB is dropped afterwards."""
    kb = kb_factory(config) if kb_factory else KnowledgeBase(config)
    try:
        kb.ingest_documents(docs)
        resources.register_kb(kb)
        ctx = Context(
            **{
                "search_provider": "none",
                "model": "offline",
                "fast_model": "offline",
                **overrides,
                "collection": config.collection,
                "embedding": config.embedding,
            }
        )
        started = time.perf_counter()
        out = asyncio.run(graph.ainvoke({"question": question}, context=ctx))
        return out, (time.perf_counter() - started) * 1000
    finally:
        kb.drop()
        resources.close_all()


def rgb_documents(
    row: dict[str, Any], passages: int, noise: float, negatives_only: bool
) -> list[SourceDocument]:
    """One RGB question's passages as documents: ``noise`` of them negatives (all with
    ``negatives_only``), the rest positives."""
    n_neg = passages if negatives_only else round(passages * noise)
    chosen = list(row.get("negative") or [])[:n_neg]
    if not negatives_only:
        chosen = list(row.get("positive") or [])[: passages - len(chosen)] + chosen
    return [
        SourceDocument(f"p{j}", f"rgb:{row.get('id')}:{j}", t, content_hash(t), False)
        for j, t in enumerate(chosen)
        if str(t).strip()
    ]


def rgb_summary(
    n: int,
    correct: int,
    rejected: int,
    validity: list[float],
    latencies: list[float],
    records: list[dict[str, Any]],
    *,
    negatives_only: bool,
    passages: int,
    noise: float,
) -> dict[str, Any]:
    """The figures of ``evaluate_rgb``."""
    return {
        "questions": n,
        "negatives_only": negatives_only,
        "passages": passages,
        "noise": 1.0 if negatives_only else noise,
        "accuracy": round(correct / n, 4) if n else 0.0,
        "rejection_rate": round(rejected / n, 4) if n else 0.0,
        "citation_validity": round(sum(validity) / len(validity), 4) if validity else 1.0,
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "records": records,
    }


def refusal_table(
    answered: list[dict[str, Any]], negatives: list[dict[str, Any]], thresholds: list[float]
) -> list[tuple[float, float, float]]:
    """(threshold, accuracy, rejection rate) from ``records`` of runs that never refused
    (``refusal_threshold`` 0): at ``t`` a question whose confidence is below ``t`` is
    refused, the others keep their answer (the refusal is the answer's last rule)."""
    rows = []
    for t in thresholds:
        acc = sum(r["correct"] and r["confidence"] >= t for r in answered) / max(1, len(answered))
        rej = sum(r["refused"] or r["confidence"] < t for r in negatives) / max(1, len(negatives))
        rows.append((t, round(acc, 4), round(rej, 4)))
    return rows
