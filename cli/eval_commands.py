"""``eval retrieval``, ``eval routing``, ``eval calibration`` (and ``--fit``), ``eval rgb``."""

from __future__ import annotations

import argparse
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from cli.common import ProgressBar, add_kb_options, kb_config, print_json
from cli.feedback_commands import register_export
from tools.errors import ConfigError
from tools.evaluation.calibration import CalibrationReport
from tools.evaluation.datasets import (
    AnswerabilitySample,
    answerability_samples,
    evaluate_retrieval,
    load_beir,
    load_dataset,
    read_jsonl,
    rgb_answerability_samples,
    to_documents,
    unrelated_samples,
)
from tools.kb.knowledge_base import SEARCH_MODES, KBConfig, SearchMode
from tools.kb.search.rerankers import make_reranker

METRICS = ("ndcg@10", "recall@5", "recall@10", "mrr@10", "hit@5")


def register(subparsers: Any) -> None:
    ev = subparsers.add_parser("eval", help="evaluate retrieval or answers on a dataset")
    ev_sub = ev.add_subparsers(dest="eval_command", required=True, metavar="WHAT")
    register_retrieval(ev_sub)
    register_routing(ev_sub)
    register_calibration(ev_sub)
    register_rgb(ev_sub)


def register_retrieval(ev_sub: Any) -> None:
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


def register_routing(ev_sub: Any) -> None:
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


def register_calibration(ev_sub: Any) -> None:
    cal = ev_sub.add_parser(
        "calibration",
        help="how well the answerability probability is calibrated (AUROC, ECE, PNG)",
    )
    cal.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="[NAME=]DIR[:SPLIT]",
        help="BEIR folder (its corpus becomes a throw-away KB) or RealTime QA's frozen "
        "results, optionally named and with its qrels split, e.g. scifact=beir_scifact:train "
        "(repeatable; the name defaults to the folder's)",
    )
    cal.add_argument("--split", default=None, help="qrels split of a --data without one")
    cal.add_argument(
        "--freshqa",
        type=Path,
        default=None,
        help="FreshQA JSONL: unrelated questions (label 0), asked of the first --data KB",
    )
    cal.add_argument(
        "--rgb",
        type=Path,
        default=None,
        help="RGB JSON-lines: per-question 5-passage KBs (joins a --data set named rgb)",
    )
    cal.add_argument("--max-queries", type=int, default=None, help="per data set")
    cal.add_argument("--bins", type=int, default=10)
    cal.add_argument("--plot", type=Path, default=None, help="write the reliability diagram (PNG)")
    cal.add_argument("--json", action="store_true")
    cal.add_argument(
        "--fit",
        type=Path,
        default=None,
        metavar="DIR",
        help="also fit the answerability model on these samples and write its parameters "
        "to DIR (<embedder>.json and lexical.json); tools/kb/search/answerability_params is the "
        "shipped copy",
    )
    cal.add_argument("--l2", type=float, default=1.0, help="L2 penalty of the fit (default 1)")
    add_kb_options(cal)
    cal.set_defaults(func=cmd_calibration, create_collection=True)


def register_rgb(ev_sub: Any) -> None:
    rgb = ev_sub.add_parser("rgb", help="offline answers on RGB (accuracy, rejection, citations)")
    rgb.add_argument("--data", required=True, type=Path, help="RGB JSON-lines file")
    rgb.add_argument("--negatives-only", action="store_true", help="only negative passages")
    rgb.add_argument("--passages", type=int, default=5, help="passages per question (default 5)")
    rgb.add_argument("--noise", type=float, default=0.4, help="share of negatives (default 0.4)")
    rgb.add_argument("--max-questions", type=int, default=None)
    rgb.add_argument("--embedding", default="local")
    rgb.add_argument("--json", action="store_true")
    rgb.set_defaults(func=cmd_rgb, create_collection=True)
    register_export(ev_sub)


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


def _data_specs(args: argparse.Namespace) -> list[tuple[str, Path, str | None]]:
    """``[NAME=]DIR[:SPLIT]`` (a path that exists as given is never split)."""
    specs: list[tuple[str, Path, str | None]] = []
    for raw in args.data:
        name, rest = "", raw
        if not Path(raw).exists() and "=" in raw:
            name, _, rest = raw.partition("=")
        path, split = Path(rest), args.split
        if not path.exists() and ":" in rest:
            head, _, tail = rest.rpartition(":")
            path, split = Path(head), tail or args.split
        specs.append((name or path.name, path, split))
    return specs


def _calibration_samples(
    args: argparse.Namespace, base: KBConfig
) -> dict[str, list[AnswerabilitySample]]:
    """The labelled samples per data set; ``--freshqa`` joins the first ``--data`` set and
    ``--rgb`` the set named ``rgb`` (or a group of its own)."""
    from tools.kb.knowledge_base import KnowledgeBase

    def throwaway(_: str = "") -> KnowledgeBase:
        return KnowledgeBase(replace(base, collection=f"calib-{uuid.uuid4().hex[:10]}"))

    # Every data set is read before any is indexed: a wrong path or split fails in a
    # second, not after minutes of indexing.
    sets = [(name, load_dataset(path, split)) for name, path, split in _data_specs(args)]
    groups: dict[str, list[AnswerabilitySample]] = {}
    for n, (name, data) in enumerate(sets):
        kb = throwaway()
        try:
            kb.ingest_documents(to_documents(data), progress=ProgressBar(f"index {name}"))
            group = groups.setdefault(name, [])
            group += answerability_samples(kb, data, name, max_queries=args.max_queries)
            if args.freshqa is not None and n == 0:
                questions = [str(r.get("question") or "") for r in read_jsonl(args.freshqa)]
                group += unrelated_samples(kb, questions[: args.max_queries], name)
        finally:
            kb.drop()
            kb.close()
    if args.rgb is not None:
        groups.setdefault("rgb", []).extend(
            rgb_answerability_samples(args.rgb, throwaway, max_questions=args.max_queries)
        )
    return groups


def cmd_calibration(args: argparse.Namespace) -> int:
    from tools.evaluation.calibration import calibration_report, plot_reliability
    from tools.kb.embed.embeddings import embedding_model_id

    if not args.data and args.rgb is None:
        raise ConfigError("give at least one --data BEIR folder or --rgb file")
    if args.freshqa is not None and not args.data:
        raise ConfigError("--freshqa needs a --data KB to ask its questions against")
    if args.bins < 2:
        raise ConfigError(f"--bins must be >= 2, got {args.bins}")
    if args.l2 < 0:
        raise ConfigError(f"--l2 must be >= 0, got {args.l2}")
    base = kb_config(args)
    groups = _calibration_samples(args, base)
    reports = [
        calibration_report(
            name, [s.label for s in samples], [s.probability for s in samples], bins=args.bins
        )
        for name, samples in groups.items()
    ]
    model_id = embedding_model_id(base.embedding)
    if args.plot is not None:
        plot_reliability(reports, args.plot, title=f"Answerability ({model_id})")
    written, lodo = _fit(args, groups, model_id) if args.fit is not None else ([], [])
    if args.json:
        fit = {"written": [str(p) for p in written], "held_out": [r.to_dict() for r in lodo]}
        print_json(
            {"reports": [r.to_dict() for r in reports], "plot": str(args.plot or "")}
            | ({"fit": fit} if args.fit is not None else {})
        )
        return 0
    _print_reports(reports, "shipped parameters")
    if lodo:
        _print_reports(lodo, "held out: fitted without it")
    for path in written:
        print(f"parameters written: {path}")
    if args.plot is not None:
        print(f"reliability diagram: {args.plot}")
    return 0


def _fit(
    args: argparse.Namespace, groups: dict[str, list[AnswerabilitySample]], model_id: str
) -> tuple[list[Path], list[CalibrationReport]]:
    """``--fit``: the parameter files written to ``args.fit`` and, with two sets or more,
    each set's calibration under the model fitted without it."""
    from tools.evaluation.calibration import calibration_report
    from tools.evaluation.fitting import fit_params, held_out, write_params
    from tools.kb.search.answerability import FEATURES

    samples = [s for group in groups.values() for s in group]
    written = write_params(fit_params(samples, model_id, l2=args.l2), args.fit)
    lodo = held_out(samples, FEATURES, l2=args.l2) if len(groups) > 1 else {}
    return written, [
        calibration_report(name, labels, probs, bins=args.bins)
        for name, (labels, probs) in lodo.items()
    ]


def _print_reports(reports: list[CalibrationReport], title: str) -> None:
    head = f"set ({title})"
    print(f"{head:<36} {'n':>6} {'answerable':>10} {'AUROC':>7} {'ECE':>7} {'Brier':>7}")
    for r in reports:
        auroc = f"{r.auroc:.3f}" if r.auroc is not None else "-"
        print(f"{r.name:<36} {r.n:>6} {r.positives:>10} {auroc:>7} {r.ece:>7.3f} {r.brier:>7.3f}")


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
