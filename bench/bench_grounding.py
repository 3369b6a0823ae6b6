"""Offline grounding on RGB zh dev: accuracy, rejection, and the refusal threshold.

Runs the state graph offline (extractive answers, no web) on RGB zh dev twice, as
``hybrid-rag eval rgb`` does: with 3 positive + 2 negative passages per question
(accuracy: the answer holds the gold answer) and with 5 negatives only (rejection: the
answer says 没找到相关信息). Both runs use ``refusal_threshold`` 0, so each question's
confidence and answer give the whole table: at threshold ``t`` a question whose confidence
is below ``t`` is refused, the others keep their answer. The shipped default's row is
marked; ``--context`` overrides other Context fields (e.g. '{"embed_every_query": true}').

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_grounding --home /work/rgb-home

``--home`` keeps the embedding cache (the passages are embedded once). RGB is read from
``--data-dir`` (default ../shared/data), never copied.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import fields
from pathlib import Path

from bench.harness import need, parser
from cli.eval_answers import evaluate_rgb, refusal_table
from graph import Context

THRESHOLDS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5]


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--embedding", default="local")
    ap.add_argument("--max-questions", type=int, default=None)
    ap.add_argument("--context", type=json.loads, default={})
    args = ap.parse_args(argv)
    path = args.data_dir / "rgb" / "zh_refine_dev.json"
    need(path)
    home = args.home or Path(tempfile.mkdtemp(prefix="bench-grounding-"))
    home.mkdir(parents=True, exist_ok=True)
    context = {**args.context, "refusal_threshold": 0.0}
    runs = {
        label: evaluate_rgb(
            path,
            negatives_only=negatives,
            max_questions=args.max_questions,
            embedding=args.embedding,
            context=context,
            home=home,
        )
        for label, negatives in (("answerable", False), ("negatives", True))
    }
    shipped = next(f.default for f in fields(Context) if f.name == "refusal_threshold")
    thresholds = sorted({*THRESHOLDS, float(shipped)})  # type: ignore[arg-type]
    table = refusal_table(runs["answerable"]["records"], runs["negatives"]["records"], thresholds)
    n = runs["answerable"]["questions"]
    print(f"\n## RGB zh dev, offline extractive answers ({n} questions, {args.embedding})")
    print(f"{'refusal_threshold':>17} {'accuracy':>9} {'rejection':>10}")
    for t, acc, rej in table:
        mark = "  <- default" if t == shipped else ""
        print(f"{t:>17.2f} {acc:>9.3f} {rej:>10.3f}{mark}")
    validity = runs["answerable"]["citation_validity"]
    print(f"\ncitation validity {validity}; p50 {runs['answerable']['p50_ms']} ms per question")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
