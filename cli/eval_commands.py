"""``eval retrieval`` (and, later, the answer-level evaluations)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.common import ProgressBar, add_kb_options, kb_config, print_json
from tools.evaluation import evaluate_retrieval, load_beir
from tools.knowledge_base import SEARCH_MODES, SearchMode

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
    add_kb_options(ret)
    ret.set_defaults(func=cmd_retrieval)


def cmd_retrieval(args: argparse.Namespace) -> int:
    data = load_beir(args.data, args.split)
    modes: tuple[SearchMode, ...] = SEARCH_MODES if args.mode == "all" else (args.mode,)
    results = evaluate_retrieval(
        data,
        modes=modes,
        config=kb_config(args),
        max_queries=args.max_queries,
        progress=ProgressBar("index"),
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
