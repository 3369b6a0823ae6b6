"""Query embeddings per question: quality and latency of the offline graph both ways.

The offline rewrite adds keyword variants of the question ("dimensional biomaterials
lack inductive properties") and the coverage rule's next round asks for the question's
missing terms ("biomaterials"). Each is a selection of the question's words, so by
default it is searched with the question's vector (``Context.embed_every_query`` False)
instead of being embedded on its own (True): one e5 embedding (~30 ms on two cores)
saved per such query, while its BM25 side is unchanged.

This runs the whole state graph offline on every dev set (SciFact train, RGB zh,
CMRC2018 trial, RealTime QA's frozen results) both ways, each question cold (query
caches dropped), and scores the ranked knowledge-base sources the graph ends with
(``internal_docs``, by document) against the qrels: nDCG@10, Recall@5; also the
embedded texts per question, end-to-end p50 and whether route and rounds agree. Then
leave one data set out: the setting with the better mean nDCG@10 on the other three,
judged on the set left out.

Needs the dev-set collections ``ev-<set>-<embedding>`` under ``--home``, as
``-m bench.bench_evidence ... pools`` writes them (the same ``--home`` and ``--embedding``).

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_queries --home /tmp/ev-home [--per-set 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import parser
from graph import Context, build_graph
from run import resources
from tools.evaluation.datasets import (
    DEV_SETS,
    BeirData,
    ndcg_at,
    score_run,
)
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

SETS = DEV_SETS
SETTINGS = {"question vector": False, "embed every query": True}


def spread(ids: Sequence[str], n: int) -> list[str]:
    """``n`` ids evenly spread over the sorted list (deterministic, no seed)."""
    ids = sorted(ids)
    if len(ids) <= n:
        return ids
    return [ids[i * len(ids) // n] for i in range(n)]


class Counting:
    """Counts the texts a knowledge base's model embeds as queries."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.texts = 0
        many, one = kb.model.embed_queries, kb.model.embed_query

        def embed_queries(texts: Sequence[str]) -> list[list[float]]:
            self.texts += len(texts)
            return many(texts)

        def embed_query(text: str) -> list[float]:
            self.texts += 1
            return one(text)

        kb.model.embed_queries = embed_queries  # type: ignore[method-assign]
        kb.model.embed_query = embed_query  # type: ignore[method-assign]


async def run_graph(graph: Any, question: str, ctx: Context) -> dict[str, Any]:
    """The run's last state values, internal ones (``internal_docs``) included: the
    graph's output schema leaves them out of ``ainvoke``'s result."""
    state: dict[str, Any] = {}
    async for update in graph.astream({"question": question}, context=ctx, stream_mode="updates"):
        for values in update.values():
            state.update(values or {})
    return state


def run_set(name: str, data: BeirData, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    collection = f"ev-{name}-{args.embedding.replace(':', '-').replace('/', '-')}"
    kb = KnowledgeBase(
        KBConfig(home=args.home, collection=collection, embedding=args.embedding, create=False)
    )
    resources.register_kb(kb)
    counter = Counting(kb)
    graph = build_graph()
    qids = spread(list(data.qrels), args.per_set)
    contexts = {
        label: Context(
            data_home=str(args.home),
            collection=collection,
            embedding=args.embedding,
            search_provider="none",
            model="offline",
            fast_model="offline",
            embed_every_query=every,
        )
        for label, every in SETTINGS.items()
    }
    runs: dict[str, dict[str, Any]] = {label: {} for label in SETTINGS}
    asyncio.run(
        graph.ainvoke({"question": data.queries[qids[0]]}, context=contexts["question vector"])
    )
    for qid in qids:
        for label, ctx in contexts.items():  # interleaved: load drifts hit both alike
            kb.forget_queries()
            before = counter.texts
            started = time.perf_counter()
            state = asyncio.run(run_graph(graph, data.queries[qid], ctx))
            ms = (time.perf_counter() - started) * 1000
            docs = [str(d.get("doc_id")) for d in state.get("internal_docs") or []]
            runs[label][qid] = {
                "ranking": list(dict.fromkeys(docs)),
                "ms": ms,
                "texts": counter.texts - before,
                "route": state.get("route"),
                "rounds": int(state.get("iteration") or 0),
            }
    resources.close_all()
    return summary(runs, {q: data.qrels[q] for q in qids}, qids)


def summary(
    runs: dict[str, dict[str, Any]], qrels: dict[str, Any], qids: list[str]
) -> dict[str, dict[str, Any]]:
    """Per setting: nDCG@10, recall@5, texts embedded, latency; then how the two agree."""
    out: dict[str, dict[str, Any]] = {}
    for label, per_q in runs.items():
        scores = score_run({q: r["ranking"] for q, r in per_q.items()}, qrels, [])
        out[label] = {
            "ndcg@10": round(scores["ndcg@10"], 4),
            "recall@5": round(scores["recall@5"], 4),
            "texts_per_question": round(statistics.fmean(r["texts"] for r in per_q.values()), 2),
            "p50_ms": round(statistics.median(r["ms"] for r in per_q.values()), 1),
            "questions": len(per_q),
        }
    a, b = (runs[label] for label in SETTINGS)
    out["agreement"] = {
        "route": round(statistics.fmean(a[q]["route"] == b[q]["route"] for q in qids), 3),
        "rounds": round(statistics.fmean(a[q]["rounds"] == b[q]["rounds"] for q in qids), 3),
        # per question nDCG@10, the first setting against the second
        "wins_ties_losses": _wins(
            [
                ndcg_at(a[q]["ranking"], qrels[q], 10) - ndcg_at(b[q]["ranking"], qrels[q], 10)
                for q in qids
            ]
        ),
        "same_top5": round(
            statistics.fmean(a[q]["ranking"][:5] == b[q]["ranking"][:5] for q in qids), 3
        ),
    }
    return out


def _wins(deltas: Sequence[float]) -> str:
    return "/".join(
        str(n)
        for n in (
            sum(d > 1e-9 for d in deltas),
            sum(abs(d) <= 1e-9 for d in deltas),
            sum(d < -1e-9 for d in deltas),
        )
    )


def leave_one_out(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """For each set: the setting with the better mean nDCG@10 on the others, judged on it."""
    out = {}
    for held in results:
        others = [s for s in results if s != held]

        def mean_ndcg(label: str, sets: list[str] = others) -> float:
            return statistics.fmean(results[s][label]["ndcg@10"] for s in sets)

        chosen = max(SETTINGS, key=mean_ndcg)
        other = next(label for label in SETTINGS if label != chosen)
        out[held] = {
            "chosen": chosen,
            "held_out_ndcg@10": results[held][chosen]["ndcg@10"],
            "vs_other": round(
                results[held][chosen]["ndcg@10"] - results[held][other]["ndcg@10"], 4
            ),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--embedding", default="local")
    ap.add_argument("--sets", type=lambda s: s.split(","), default=list(SETS))
    ap.add_argument("--per-set", type=int, default=150, help="questions per data set")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    unknown = [s for s in args.sets if s not in SETS]
    if unknown:
        sys.exit(f"error: unknown --sets {unknown}; choose among {list(SETS)}")
    if args.per_set < 1:
        sys.exit("error: --per-set must be >= 1")
    results = {}
    for name in args.sets:
        results[name] = run_set(name, SETS[name](args.data_dir), args)
        print(f"# {name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    report = {"sets": results, "leave_one_out": leave_one_out(results) if len(results) > 1 else {}}
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


def print_report(report: dict[str, Any]) -> None:
    print(f"{'set':<11} {'setting':<18} {'nDCG@10':>8} {'R@5':>6} {'texts/q':>8} {'p50 ms':>7}")
    for name, res in report["sets"].items():
        for label in SETTINGS:
            r = res[label]
            print(
                f"{name:<11} {label:<18} {r['ndcg@10']:>8.4f} {r['recall@5']:>6.3f} "
                f"{r['texts_per_question']:>8.2f} {r['p50_ms']:>7.1f}"
            )
        print(f"{'':<11} agreement {res['agreement']}")
    for held, r in report["leave_one_out"].items():
        print(
            f"leave out {held:<11} chosen on the others: {r['chosen']:<18} "
            f"held-out nDCG@10 {r['held_out_ndcg@10']:.4f} ({r['vs_other']:+.4f} vs the other)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
