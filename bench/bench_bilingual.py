"""Retrieval across languages: per-language candidate pools and the rule that merges them.

Stages (each caches its output under ``--out``; later stages re-run in seconds):

``pools``  index each dev set once (a persistent collection under ``--home``; the embedding
           cache there makes a second run free), read every chunk's vector and language,
           embed the judged queries, and store per query the raw cosine and raw BM25 of every
           chunk that either retriever puts in its top ``n`` -- over the whole KB (today's
           single pool) and within each document language (the per-language pools).
``sweep``  nDCG@10 of today's single pool and of the per-language merge for every rule x
           parameter on every set (the xquad dev articles split in two halves, A and B, so
           the bilingual data can be left out too), then leave one set out: choose on the
           others by the largest worst-case gain over today's ranking (ties: the larger mean
           gain), report the set left out; finally the choice on all sets.

``answerability`` the product's evidence and route where the best hit is in another language;
``examples`` the sample KB's questions through the offline state graph; ``latency`` the
product's search per query, per-language pools against one pool; ``flat`` fusion variants
that ignore a flat side (issue 36 item 5).

    .venv/bin/python -m bench.bench_bilingual --home /tmp/bi-home --out /tmp/bi pools sweep

Sets: xquad_bilingual dev (same- and cross-language questions over one mixed KB), CMRC2018
trial, RGB zh, RealTime QA, SciFact train, read from ``--data-dir`` (never copied).
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.bilingual_checks import stage_answerability, stage_examples, stage_flat, stage_latency
from bench.bilingual_pools import (
    REPO,
    fit_gate,
    gate_samples,
    merged,
    ndcg,
    single,
    stage_pools,
    today,
    with_centres,
    with_norms,
)
from tools.kb.search.joiner import Fusion, MergeRule

# -- sweep -----------------------------------------------------------------------------


STEEPNESS = (0.35, 0.5)  # the shift form: each candidate loses steepness x doubt
SCALE = (0.15, 0.25)  # the scale form: each candidate's score times (1 - doubt) ** scale
CUTOFF = (0.01,)  # a language given less than this follows all of the question's
SLOT = (0, 2)  # the other language's best kept at this rank when given >= SLOT_FLOOR
SLOT_FLOOR = 0.05
BIAS = (-1.0, -1.5, -2.0, -2.5, -3.0, -3.5)  # added to the intercept: same-language prior
TOLERANCE = 0.005  # a same-language set may lose this much before it counts as a loss


def sweep_groups(
    loaded: dict[str, Any], args: argparse.Namespace
) -> dict[str, tuple[str, str, list[str]]]:
    """The question groups the sweep scores: each set whole, xquad by half and kind."""
    groups: dict[str, tuple[str, str, list[str]]] = {}  # group -> (set, fold, query ids)
    for name, pools in loaded.items():
        with_norms(name, pools, args)
        if args.centred:
            with_centres(name, pools, args)
        qids = sorted(pools["qrels"])
        if name != "xquad":
            groups[name] = (name, name, qids)
            continue
        articles = sorted({min(pools["qrels"][q]).split("_")[0] for q in qids})
        first = set(articles[: len(articles) // 2])
        for half in ("A", "B"):
            for kind in ("same", "cross"):
                groups[f"xquad-{half}-{kind}"] = (
                    name,
                    f"xquad-{half}",
                    [
                        q
                        for q in qids
                        if (min(pools["qrels"][q]).split("_")[0] in first) == (half == "A")
                        and pools["queries"][q]["kind"] == kind
                    ],
                )
    return groups


def candidates(gate_fit: tuple[float, list[float]]) -> list[MergeRule]:
    """The rules swept around a fitted gate: shifted slots, and scaled intercepts."""
    c, (best, share, peak_other, peak_own) = gate_fit
    gate = MergeRule(c, best, share, peak_other, peak_own)
    shift = [
        replace(
            gate,
            intercept=c + bias,
            scale=0.0,
            steepness=st,
            cutoff=cut,
            slot=slot,
            slot_floor=SLOT_FLOOR,
        )
        for st, cut, slot, bias in itertools.product(STEEPNESS, CUTOFF, SLOT, BIAS)
    ]
    scale = [
        replace(gate, intercept=c + bias, scale=sc) for sc, bias in itertools.product(SCALE, BIAS)
    ]
    return shift + scale


def print_by_kind(loaded: dict[str, Any], best: MergeRule) -> None:
    """Whole sets by question kind: today, each retriever alone, the chosen rule."""
    for name, pools in loaded.items():  # whole sets, by question kind
        for kind in ("same", "cross"):
            qids = sorted(q for q in pools["qrels"] if pools["queries"][q]["kind"] == kind)
            if qids:
                figures = {
                    "today": ndcg(pools, today, qids),
                    "vector": ndcg(pools, single("vector"), qids),
                    "bm25": ndcg(pools, single("bm25"), qids),
                    "merged": ndcg(pools, merged(best), qids),
                    "merged vector": ndcg(pools, merged(best, Fusion(mode="vector")), qids),
                }
                print(
                    f"{name} {kind} ({len(qids)}): "
                    + ", ".join(f"{k} {v:.4f}" for k, v in figures.items())
                )


def sweep_key(got: dict[str, float], base: dict[str, float]) -> tuple[float, float, float]:
    """Largest worst-case gain over today: a same-language set counts only a loss beyond
    the tolerance; then the worst cross-language gain; then the mean."""
    same = [min(0.0, v - base[g] + TOLERANCE) for g, v in got.items() if "cross" not in g]
    cross = [v - base[g] for g, v in got.items() if "cross" in g]
    return (min(same, default=0.0), min(cross, default=0.0), float(np.mean(cross or [0])))


def stage_sweep(args: argparse.Namespace) -> None:
    loaded = {n: pickle.loads((args.out / f"pools-{n}.pkl").read_bytes()) for n in args.sets}
    groups = sweep_groups(loaded, args)
    base = {g: ndcg(loaded[n], today, qids) for g, (n, _, qids) in groups.items()}
    folds = sorted({f for _, f, _ in groups.values()})

    def fitted(train: list[str]) -> tuple[float, list[float]]:
        xs, ys = [], []
        for n, f, qids in groups.values():
            if f in train:
                x, y = gate_samples(loaded[n], qids)
                if len(x):
                    xs.append(x)
                    ys.append(y)
        return fit_gate(np.vstack(xs), np.concatenate(ys))

    def scores(rule: MergeRule, names: list[str]) -> dict[str, float]:
        return {g: ndcg(loaded[groups[g][0]], merged(rule), groups[g][2]) for g in names}

    print("\n## leave one set out: gate fitted and rule chosen on the others")
    print(f"{'left out':<10} {'rule':<44} " + " ".join(f"{g:>15}" for g in groups))
    print(
        f"{'today':<10} {'single pool, adaptive fusion':<44} "
        + " ".join(f"{base[g]:>15.4f}" for g in groups)
    )
    for held in folds:
        train = [f for f in folds if f != held]
        train_groups = [g for g, (_, f, _) in groups.items() if f in train]
        rules = candidates(fitted(train))
        chosen = max(rules, key=lambda r: sweep_key(scores(r, train_groups), base))
        got = scores(chosen, list(groups))
        print(
            f"{held:<10} {chosen.label():<44} "
            + " ".join(
                f"{got[g]:>15.4f}"
                if groups[g][1] == held
                else f"{'(' + format(got[g], '.4f') + ')':>15}"
                for g in groups
            ),
            flush=True,
        )
    rules = candidates(fitted(folds))
    table = {r.label(): scores(r, list(groups)) for r in rules}
    best = max(rules, key=lambda r: sweep_key(table[r.label()], base))
    print("\n## every rule, gate fitted on all sets (today first)")
    for label, got in table.items():
        print(f"{label:<44} " + " ".join(f"{got[g]:>15.4f}" for g in groups))
    print(f"\nall sets -> {best}")
    print_by_kind(loaded, best)
    (args.out / "sweep.json").write_text(
        json.dumps(
            {"today": base, "rules": table, "chosen": best.label(), "rule": best.__dict__}, indent=1
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "stages",
        nargs="+",
        choices=["pools", "sweep", "answerability", "examples", "latency", "flat"],
    )
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--sets",
        type=lambda s: s.split(","),
        default=["xquad", "cmrc", "rgb", "realtimeqa", "scifact"],
    )
    ap.add_argument("--force", action="store_true", help="recompute cached pools")
    ap.add_argument(
        "--raw-cosines",
        action="store_true",
        help="sweep: compare languages by raw cosines (the first version), not centred ones",
    )
    ap.add_argument(
        "--set-home",
        action="append",
        default=[],
        help="NAME=DIR: the data home of one set's index when not --home",
    )
    args = ap.parse_args(argv)
    args.centred = not args.raw_cosines
    args.homes = {k: Path(v) for k, v in (h.split("=", 1) for h in args.set_home)}
    if not args.data_dir.exists():
        print(f"data directory {args.data_dir} not found (pass --data-dir)", file=sys.stderr)
        return 2
    for stage in args.stages:
        stages = {
            "pools": stage_pools,
            "sweep": stage_sweep,
            "answerability": stage_answerability,
            "examples": stage_examples,
            "latency": stage_latency,
            "flat": stage_flat,
        }
        stages[stage](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
