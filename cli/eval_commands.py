"""``eval retrieval`` (and, later, the answer-level evaluations)."""

from __future__ import annotations

import argparse
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from cli.common import ProgressBar, add_kb_options, kb_config, print_json
from tools.errors import ConfigError
from tools.evaluation.datasets import evaluate_retrieval, load_beir
from tools.kb.knowledge_base import SEARCH_MODES, SearchMode
from tools.kb.rerank import make_reranker

METRICS = ("ndcg@10", "recall@5", "recall@10", "mrr@10", "hit@5")


def register(subparsers: Any) -> None:
    ev = subparsers.add_parser("eval", help="evaluate retrieval or answers on a dataset")
    ev_sub = ev.add_subparsers(dest="eval_command", required=True, metavar="WHAT")
    ret = ev_sub.add_parser("retrieval", help="nDCG/recall/MRR on BEIR-layout data")
    ret.add_argument(
        "--data", required=True, type=Path, help="BEIR folder (corpus, queries, qrels)"
    )
    ret.add_argument("--split", default=None, help="qrels split (qrels/<split>.tsv)")
    ret.add_argument("--mode", choices=[*SEARCH_MODES, "all"], default="all")
    ret.add_argument(
        "--max-queries", type=int, default=None, help="evaluate only the first N queries"
    )
    ret.add_argument("--json", action="store_true", help="one JSON object keyed by mode")
    ret.add_argument(
        "--rerank", default="none", help="none | lexical | cross-encoder:<model> (default none)"
    )
    add_kb_options(ret)
    ret.set_defaults(func=cmd_retrieval, create_collection=True)

    routing = ev_sub.add_parser("routing", help="route distribution on FreshQA questions")
    routing.add_argument("--freshqa", required=True, type=Path, help="FreshQA JSONL file")
    routing.add_argument("--no-kb-probe", action="store_true", help="route without probing the KB")
    routing.add_argument(
        "--kb-questions",
        type=Path,
        default=None,
        help="BEIR folder whose corpus is the KB: also report how its answerable questions route",
    )
    routing.add_argument("--split", default=None, help="qrels split of --kb-questions")
    routing.add_argument("--json", action="store_true")
    add_kb_options(routing)
    routing.set_defaults(func=cmd_routing)

    cal = ev_sub.add_parser(
        "calibration",
        help="how well the answerability probability is calibrated (AUROC, ECE, PNG)",
    )
    cal.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="DIR[:SPLIT]",
        help="BEIR folder (its corpus becomes a throw-away KB), optionally with its qrels "
        "split, e.g. beir_scifact:train (repeatable)",
    )
    cal.add_argument("--split", default=None, help="qrels split of a --data without one")
    cal.add_argument(
        "--freshqa", type=Path, default=None, help="FreshQA JSONL: unrelated questions (label 0)"
    )
    cal.add_argument(
        "--rgb", type=Path, default=None, help="RGB JSON-lines: per-question 5-passage KBs"
    )
    cal.add_argument("--max-queries", type=int, default=None, help="per data set")
    cal.add_argument("--bins", type=int, default=10)
    cal.add_argument("--plot", type=Path, default=None, help="write the reliability diagram (PNG)")
    cal.add_argument("--json", action="store_true")
    add_kb_options(cal)
    cal.set_defaults(func=cmd_calibration, create_collection=True)

    rgb = ev_sub.add_parser("rgb", help="offline answers on RGB (accuracy, rejection, citations)")
    rgb.add_argument("--data", required=True, type=Path, help="RGB JSON-lines file")
    rgb.add_argument("--negatives-only", action="store_true", help="only negative passages")
    rgb.add_argument("--passages", type=int, default=5, help="passages per question (default 5)")
    rgb.add_argument("--noise", type=float, default=0.4, help="share of negatives (default 0.4)")
    rgb.add_argument("--max-questions", type=int, default=None)
    rgb.add_argument("--embedding", default="local")
    rgb.add_argument("--json", action="store_true")
    rgb.set_defaults(func=cmd_rgb, create_collection=True)


def cmd_routing(args: argparse.Namespace) -> int:
    from cli.eval_answers import evaluate_routing
    from tools.kb.knowledge_base import KnowledgeBase

    kb = None if args.no_kb_probe else KnowledgeBase(kb_config(args))
    try:
        questions = load_beir(args.kb_questions, args.split) if args.kb_questions else None
        result = evaluate_routing(args.freshqa, kb, questions)
    finally:
        if kb is not None:
            kb.close()
    if args.json:
        print_json(result)
        return 0
    print(f"{result['questions']} questions (offline router)")
    for fact_type, routes in result["routes_by_fact_type"].items():
        print(f"  {fact_type:<16} {routes}")
    print(f"  fast-changing routed with web search: {result['fast_changing_with_web']}")
    if "kb_answered_questions" in result:
        print(
            f"  KB-answered questions ({result['kb_answered_questions']}): "
            f"KB only {result['kb_answered_kb_only']}, with the KB {result['kb_answered_with_kb']}"
        )
    return 0


def _data_specs(args: argparse.Namespace) -> list[tuple[Path, str | None]]:
    """``DIR`` or ``DIR:SPLIT`` (a path that exists as given is never split)."""
    specs: list[tuple[Path, str | None]] = []
    for raw in args.data:
        path, split = Path(raw), args.split
        if not path.exists() and ":" in raw:
            head, _, tail = raw.rpartition(":")
            path, split = Path(head), tail or args.split
        specs.append((path, split))
    return specs


def cmd_calibration(args: argparse.Namespace) -> int:
    from tools.evaluation.calibration import calibration_report, plot_reliability
    from tools.evaluation.datasets import (
        AnswerabilitySample,
        answerability_samples,
        read_jsonl,
        rgb_answerability_samples,
        to_documents,
        unrelated_samples,
    )
    from tools.kb.knowledge_base import KnowledgeBase

    if not args.data and args.rgb is None:
        raise ConfigError("give at least one --data BEIR folder or --rgb file")
    if args.freshqa is not None and not args.data:
        raise ConfigError("--freshqa needs a --data KB to ask its questions against")
    if args.bins < 2:
        raise ConfigError(f"--bins must be >= 2, got {args.bins}")
    base = kb_config(args)
    # Every data set is read before any is indexed: a wrong path or split fails in a
    # second, not after minutes of indexing.
    sets = [(folder.name, load_beir(folder, split)) for folder, split in _data_specs(args)]
    groups: dict[str, list[AnswerabilitySample]] = {}
    for n, (name, data) in enumerate(sets):
        kb = KnowledgeBase(replace(base, collection=f"calib-{uuid.uuid4().hex[:10]}"))
        try:
            kb.ingest_documents(to_documents(data), progress=ProgressBar(f"index {name}"))
            groups[name] = answerability_samples(kb, data, name, max_queries=args.max_queries)
            if args.freshqa is not None and n == 0:
                questions = [str(r.get("question") or "") for r in read_jsonl(args.freshqa)]
                groups[name] += unrelated_samples(kb, questions[: args.max_queries], name)
        finally:
            kb.drop()
            kb.close()
    if args.rgb is not None:
        groups["rgb"] = rgb_answerability_samples(
            args.rgb,
            lambda n: KnowledgeBase(replace(base, collection=f"calib-{uuid.uuid4().hex[:10]}")),
            max_questions=args.max_queries,
        )
    reports = [
        calibration_report(
            name, [s.label for s in samples], [s.probability for s in samples], bins=args.bins
        )
        for name, samples in groups.items()
    ]
    if args.plot is not None:
        from tools.kb.embeddings import embedding_model_id

        title = f"Answerability ({embedding_model_id(base.embedding)})"
        plot_reliability(reports, args.plot, title=title)
    if args.json:
        print_json({"reports": [r.to_dict() for r in reports], "plot": str(args.plot or "")})
        return 0
    print(f"{'set':<24} {'n':>6} {'answerable':>10} {'AUROC':>7} {'ECE':>7} {'Brier':>7}")
    for r in reports:
        auroc = f"{r.auroc:.3f}" if r.auroc is not None else "-"
        print(f"{r.name:<24} {r.n:>6} {r.positives:>10} {auroc:>7} {r.ece:>7.3f} {r.brier:>7.3f}")
    if args.plot is not None:
        print(f"reliability diagram: {args.plot}")
    return 0


def cmd_rgb(args: argparse.Namespace) -> int:
    from cli.eval_answers import evaluate_rgb

    if not 0.0 <= args.noise <= 1.0:
        raise ConfigError(f"--noise must be in [0, 1], got {args.noise}")
    if args.passages < 1:
        raise ConfigError(f"--passages must be >= 1, got {args.passages}")
    result = evaluate_rgb(
        args.data,
        negatives_only=args.negatives_only,
        passages=args.passages,
        noise=args.noise,
        max_questions=args.max_questions,
        embedding=args.embedding,
    )
    result.pop("records")  # per-question detail, for bench/bench_grounding.py
    if args.json:
        print_json(result)
        return 0
    for key, value in result.items():
        print(f"{key:<20} {value}")
    return 0


def cmd_retrieval(args: argparse.Namespace) -> int:
    data = load_beir(args.data, args.split)
    modes: tuple[SearchMode, ...] = SEARCH_MODES if args.mode == "all" else (args.mode,)
    results = evaluate_retrieval(
        data,
        modes=modes,
        config=kb_config(args),
        max_queries=args.max_queries,
        progress=ProgressBar("index"),
        reranker=None if args.rerank == "none" else make_reranker(args.rerank),
    )
    if args.json:
        print_json({m: {k: round(v, 4) for k, v in r.items()} for m, r in results.items()})
        return 0
    print(f"{args.data}  ({len(data.corpus)} documents)")
    header = (
        f"{'mode':<8}"
        + "".join(f"{m:>11}" for m in METRICS)
        + f"{'queries':>9}{'p50 ms':>9}{'p95 ms':>9}"
    )
    print(header)
    for mode, r in results.items():
        row = f"{mode:<8}" + "".join(f"{r[m]:>11.4f}" for m in METRICS)
        print(row + f"{int(r['queries']):>9}{r['p50_ms']:>9.1f}{r['p95_ms']:>9.1f}")
    return 0
