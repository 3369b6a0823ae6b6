"""``eval export-feedback``: the users' votes as an evaluation data set
(``tools.feedback.export``), and the feedback lines of ``stats``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.common import add_kb_options, open_kb, print_json
from tools.feedback.export import SPLIT, corpus_of, export_feedback
from tools.feedback.report import feedback_report, report_lines
from tools.feedback.votes import read_all
from tools.settings import data_home


def register_export(ev_sub: Any) -> None:
    """Add ``export-feedback`` to ``eval``'s sub-commands."""
    exp = ev_sub.add_parser(
        "export-feedback",
        help="write the users' thumbs up/down as a BEIR-layout data set for 'eval retrieval'",
    )
    exp.add_argument("--out", required=True, type=Path, help="folder to write (created)")
    exp.add_argument("--json", action="store_true")
    add_kb_options(exp)
    exp.set_defaults(func=cmd_export_feedback)


def feedback_summary(home: str | None, runs: int) -> dict[str, Any]:
    """The feedback part of ``stats`` (zero votes when none was ever given)."""
    return feedback_report(read_all(data_home(home, create=False)), runs)


def print_feedback(summary: dict[str, Any]) -> None:
    for line in report_lines(summary):
        print(line)


def cmd_export_feedback(args: argparse.Namespace) -> int:
    items = read_all(data_home(args.home, create=False))
    kb = open_kb(args)
    snap = kb.snapshot()
    result = export_feedback(items, corpus_of(snap.texts, snap.metadatas), args.out)
    if args.json:
        print_json({"folder": str(result.folder), "queries": result.queries,
                    "down": result.down, "documents": result.documents,
                    "qrels": result.qrels, "refused": result.refused})  # fmt: skip
        return 0
    print(
        f"{result.queries} question(s) ({result.down} down-voted), {result.documents} "
        f"document(s), {result.qrels} judgement(s) in {result.folder}"
    )
    if result.refused:
        print(f"{result.refused} cited id(s) left out: they hold control characters")
    print(f"evaluate with: hybrid-rag eval retrieval --data {result.folder} --split {SPLIT}")
    return 0
