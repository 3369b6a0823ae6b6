"""State-graph benchmarks, offline (run on demand).

(a) ``latency``  — end-to-end ``graph.ainvoke`` latency p50/p95 over a SciFact
    knowledge base (first ``--docs`` documents, or ``--all``, embedded with
    ``--embedding``); questions are SciFact queries whose relevant document is in
    the KB. Offline mode: ``model=offline``, ``search_provider=none``.
(b) ``both``     — the ``both`` route with a local Serper-format provider on
    127.0.0.1 (``tests.local_provider.LocalServer``, every reply delayed
    ``--web-delay`` s). From the ``updates`` stream: wall time of the step in which
    ``retrieve_internal`` and ``search_web`` run, against the slower branch and
    against their sum (the cost of running them one after the other). Target: the
    step within 50 ms of the slower branch. The search cache is reset per question.
(c) ``routing``  — route distribution on FreshQA (``evaluate_routing``), without
    and with the KB probe (the SciFact KB of (a)).
(d) ``rgb``      — offline answers on RGB zh_refine (``evaluate_rgb``), normal
    (noise 0.4) and negatives only: accuracy, rejection rate, citation validity.

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_graph                  # all parts
    .venv/bin/python -m bench.bench_graph --parts latency,both --questions 50
    .venv/bin/python -m bench.bench_graph --parts rgb --rgb-questions 50
    .venv/bin/python -m bench.bench_graph --all --home /tmp/kb-home   # whole SciFact
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import need, parser
from cli.eval_answers import evaluate_rgb, evaluate_routing
from graph import Context, build_graph
from run import resources
from tools.evaluation.datasets import BeirData, load_beir, percentile, to_documents
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

PARTS = ("latency", "both", "routing", "rgb")
COLLECTION = "bench-graph-scifact"
SERPER_BODY = {
    "organic": [
        {
            "title": f"Result {i} about the study",
            "link": f"https://example.org/article-{i}",
            "snippet": f"Snippet {i}: recent findings on the topic, published this week.",
            "position": i,
        }
        for i in range(1, 6)
    ]
}


def pct(values: list[float], p: float) -> float:
    return round(percentile(values, p), 1)


def build_kb(
    data: BeirData, args: argparse.Namespace, home: Path
) -> tuple[KnowledgeBase, set[str]]:
    docs = to_documents(data)
    if not args.all:
        docs = docs[: args.docs]
    kb = KnowledgeBase(KBConfig(home=home, collection=COLLECTION, embedding=args.embedding))
    started = time.perf_counter()
    report = kb.ingest_documents(docs)
    kb.snapshot()
    print(
        f"KB: {len(docs)} SciFact docs, {report.chunks_written} chunks written "
        f"({len(report.unchanged)} unchanged) in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    resources.register_kb(kb)
    return kb, {d.doc_id for d in docs}


def questions_for(data: BeirData, doc_ids: set[str], n: int) -> list[str]:
    """SciFact queries with a relevant document in the KB (then any), sorted by id."""
    inside = [q for q in sorted(data.qrels) if set(data.qrels[q]) & doc_ids]
    rest = [q for q in sorted(data.qrels) if q not in set(inside)]
    return [data.queries[q] for q in [*inside, *rest][:n]]


def context(home: Path, args: argparse.Namespace, provider: str) -> Context:
    return Context(
        data_home=str(home),
        collection=COLLECTION,
        embedding=args.embedding,
        search_provider=provider,
        model="offline",
        fast_model="offline",
    )


def part_latency(questions: list[str], home: Path, args: argparse.Namespace) -> dict[str, Any]:
    graph = build_graph()
    ctx = context(home, args, "none")
    for q in questions[:3]:  # warm-up: model load, BM25 snapshot, jieba
        asyncio.run(graph.ainvoke({"question": q}, context=ctx))
    latencies: list[float] = []
    routes: Counter[str] = Counter()
    node_ms: dict[str, list[float]] = {}
    iterations: list[int] = []
    for q in questions:
        started = time.perf_counter()
        out = asyncio.run(graph.ainvoke({"question": q}, context=ctx))
        latencies.append((time.perf_counter() - started) * 1000)
        routes[str(out.get("route"))] += 1
        iterations.append(int(out.get("iteration") or 0))
        for node, ms in (out.get("timings") or {}).items():
            if isinstance(ms, (int, float)):
                node_ms.setdefault(node, []).append(float(ms))
    return {
        "questions": len(questions),
        "p50_ms": pct(latencies, 50),
        "p95_ms": pct(latencies, 95),
        "mean_ms": round(statistics.fmean(latencies), 1),
        "routes": dict(routes),
        "mean_iteration": round(statistics.fmean(iterations), 2),
        "node_p50_ms": {k: pct(v, 50) for k, v in sorted(node_ms.items())},
    }


async def _both_once(graph: Any, question: str, ctx: Context) -> dict[str, Any]:
    """Timestamps of the updates stream for one run; the first branch updates only."""
    t0 = time.perf_counter()
    seen: dict[str, float] = {}
    branch_ms: dict[str, float] = {}
    route = None
    async for chunk in graph.astream({"question": question}, context=ctx, stream_mode="updates"):
        now = (time.perf_counter() - t0) * 1000
        for node, update in chunk.items():
            if node in seen:
                continue
            seen[node] = now
            if node == "route" and isinstance(update, dict):
                route = update.get("route")
            timings = (update or {}).get("timings") if isinstance(update, dict) else None
            if node in ("retrieve_internal", "search_web") and timings:
                branch_ms[node] = float(timings.get(node, 0.0))
    total = (time.perf_counter() - t0) * 1000
    return {"route": route, "seen": seen, "branch_ms": branch_ms, "total_ms": total}


def part_both(questions: list[str], home: Path, args: argparse.Namespace) -> dict[str, Any]:
    from tests.local_provider import LocalServer, Reply
    from tools.websearch import SearchCache, set_default_cache

    server = LocalServer()
    server.thread.start()
    server.route("/search", Reply(SERPER_BODY, delay=args.web_delay))
    saved = {k: os.environ.get(k) for k in ("SERPER_API_KEY", "SERPER_BASE_URL")}
    os.environ["SERPER_API_KEY"] = "x"
    os.environ["SERPER_BASE_URL"] = server.url
    graph = build_graph()
    ctx = context(home, args, "serper")
    rows: list[dict[str, float]] = []
    routes: Counter[str] = Counter()
    try:
        # Time cue ("latest news") + internal cue ("our company") -> route 'both'.
        phrased = [f"Latest news for our company: {q}" for q in questions]
        for q in phrased[:2]:
            set_default_cache(SearchCache())
            asyncio.run(_both_once(graph, q, ctx))
        for q in phrased:
            set_default_cache(SearchCache())  # every question pays the provider delay
            run = asyncio.run(_both_once(graph, q, ctx))
            routes[str(run["route"])] += 1
            seen, branch = run["seen"], run["branch_ms"]
            if run["route"] != "both" or len(branch) < 2 or "rewrite" not in seen:
                continue
            step = max(seen["retrieve_internal"], seen["search_web"]) - seen["rewrite"]
            slower = max(branch.values())
            rows.append(
                {
                    "step_ms": step,
                    "kb_ms": branch["retrieve_internal"],
                    "web_ms": branch["search_web"],
                    "slower_ms": slower,
                    "sum_ms": sum(branch.values()),
                    "overhead_ms": step - slower,
                    "total_ms": run["total_ms"],
                }
            )
    finally:
        set_default_cache(None)
        server.httpd.shutdown()
        server.httpd.server_close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def col(name: str) -> list[float]:
        return [r[name] for r in rows]

    out: dict[str, Any] = {"runs": len(rows), "routes": dict(routes), "web_delay_s": args.web_delay}
    for name in ("step_ms", "kb_ms", "web_ms", "slower_ms", "sum_ms", "overhead_ms", "total_ms"):
        values = col(name)
        out[name] = {"p50": pct(values, 50), "p95": pct(values, 95)} if values else None
    out["provider_requests"] = len(server.hits("/search"))
    return out


def arguments(argv: list[str] | None) -> argparse.Namespace:
    p = parser(__doc__, data=True)
    p.add_argument("--parts", default=",".join(PARTS), help="comma list of " + ",".join(PARTS))
    p.add_argument("--docs", type=int, default=1000, help="SciFact documents in the KB")
    p.add_argument("--all", action="store_true", help="index all 5,183 SciFact documents")
    p.add_argument("--embedding", default="local")
    p.add_argument("--questions", type=int, default=100, help="questions for (a)")
    p.add_argument("--both-questions", type=int, default=20, help="questions for (b)")
    p.add_argument("--web-delay", type=float, default=0.3, help="provider delay in s for (b)")
    p.add_argument("--rgb-questions", type=int, default=None, help="RGB questions (default all)")
    p.add_argument("--home", type=Path, default=None, help="data home (reuses its embedding cache)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    if any(x not in PARTS for x in parts):
        sys.exit(f"error: --parts must be among {PARTS}")
    scifact = args.data_dir / "beir_scifact"
    freshqa = args.data_dir / "freshqa" / "freshqa_dev.jsonl"
    rgb = args.data_dir / "rgb" / "zh_refine_dev.json"
    for needed, path in (("latency", scifact), ("routing", freshqa), ("rgb", rgb)):
        if needed in parts or (needed == "latency" and "both" in parts):
            need(path)

    home = args.home or Path(tempfile.mkdtemp(prefix="bench-graph-"))
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    kb: KnowledgeBase | None = None
    try:
        if {"latency", "both", "routing"} & set(parts):
            data = load_beir(scifact, "train")
            kb, doc_ids = build_kb(data, args, home)
            questions = questions_for(data, doc_ids, max(args.questions, args.both_questions))
            if "latency" in parts:
                result["latency"] = part_latency(questions[: args.questions], home, args)
                print(f"(a) {result['latency']}", file=sys.stderr)
            if "both" in parts:
                result["both"] = part_both(questions[: args.both_questions], home, args)
                print(f"(b) {result['both']}", file=sys.stderr)
            if "routing" in parts:
                result["routing"] = {
                    "no_probe": evaluate_routing(freshqa, None),
                    "scifact_kb_probe": evaluate_routing(freshqa, kb),
                }
        if "rgb" in parts:
            resources.close_all()
            result["rgb"] = {
                "normal": evaluate_rgb(
                    rgb, max_questions=args.rgb_questions, embedding=args.embedding
                ),
                "negatives_only": evaluate_rgb(
                    rgb,
                    negatives_only=True,
                    max_questions=args.rgb_questions,
                    embedding=args.embedding,
                ),
            }
    finally:
        resources.close_all()
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    print_report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


def print_report(r: dict[str, Any]) -> None:
    if "latency" in r:
        a = r["latency"]
        print(
            f"(a) end-to-end graph.ainvoke, offline, {a['questions']} SciFact questions: "
            f"p50 {a['p50_ms']} ms, p95 {a['p95_ms']} ms, mean {a['mean_ms']} ms; "
            f"routes {a['routes']}; mean iteration {a['mean_iteration']}"
        )
        print(f"    node p50 ms: {a['node_p50_ms']}")
    if "both" in r:
        b = r["both"]
        print(
            f"(b) route 'both', provider delay {b['web_delay_s']} s, {b['runs']} runs "
            f"(routes {b['routes']}):"
        )
        for name in (
            "step_ms",
            "kb_ms",
            "web_ms",
            "slower_ms",
            "sum_ms",
            "overhead_ms",
            "total_ms",
        ):
            v = b[name]
            if v:
                print(f"    {name:<12} p50 {v['p50']:>8.1f}   p95 {v['p95']:>8.1f}")
        if b["overhead_ms"]:
            ok = b["overhead_ms"]["p95"] <= 50
            print(f"    target step within 50 ms of the slower branch: {'met' if ok else 'MISSED'}")
    if "routing" in r:
        for label, res in r["routing"].items():
            print(f"(c) routing FreshQA ({label}): {res['questions']} questions")
            for fact_type, routes in res["routes_by_fact_type"].items():
                print(f"    {fact_type:<16} {routes}")
            print(
                f"    false premise: {res['false_premise_routes']}; fast-changing with web: "
                f"{res['fast_changing_with_web']}"
            )
    if "rgb" in r:
        for label, res in r["rgb"].items():
            print(
                f"(d) RGB zh_refine {label}: {res['questions']} questions, accuracy {res['accuracy']}, "
                f"rejection {res['rejection_rate']}, citation validity {res['citation_validity']}, "
                f"p50 {res['p50_ms']} ms, p95 {res['p95_ms']} ms"
            )


if __name__ == "__main__":
    raise SystemExit(main())
