"""Evidence quality: fusion defaults and calibrated answerability, chosen across all dev sets.

Stages (each caches its output under ``--out``, so later stages re-run in seconds):

``pools``     index each dev set (an incremental, persistent collection under ``--home``;
              the embedding cache makes a second embedder run cheap) and store every
              judged query's candidate pool: raw cosine and raw BM25 of each candidate.
``fusion``    nDCG@10 of BM25, vector and every fusion method x weight on every set, then
              leave-one-dataset-out: choose method and weight on the other sets (largest
              worst-case gain over the better single retriever), report the set left out.
``features``  evidence features with the shipped fusion defaults, labelled: a query whose
              top five hits hold a judged document (1), the same query with its judged
              documents hidden (0), FreshQA dev questions against the SciFact KB (0), and
              RGB zh dev as ``eval rgb`` builds it (a 5-passage KB per question: 3 positive
              + 2 negative passages vs 5 negatives).
``calibrate`` logistic answerability, fitted as the product fits it
              (``tools.evaluation.fitting``): leave one data set out (AUROC, ECE) and the
              decision threshold on held-out probabilities. It writes nothing: the shipped
              parameters come from ``hybrid-rag eval calibration --fit`` (bench/README.md).

    .venv/bin/python -m bench.bench_evidence --home /tmp/ev-home --out /tmp/ev \\
        --embedding local:e5 pools fusion features calibrate

Data sets: SciFact train, RGB zh (derived retrieval set), CMRC2018 trial and RealTime QA's
frozen search results as a retrieval set (``tools.evaluation.datasets.load_realtimeqa``), all read
from ``--data-dir`` (default ../shared/data), never copied.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import need, parser
from tools.evaluation.calibration import calibration_report
from tools.evaluation.datasets import (
    DEV_SETS,
    AnswerabilitySample,
    answerability_samples,
    read_jsonl,
    rgb_answerability_samples,
    score_run,
    unrelated_samples,
)
from tools.evaluation.datasets import to_documents as beir_documents
from tools.evaluation.fitting import held_out
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.search.answerability import FEATURES, LEXICAL_FEATURES, EvidenceFeatures
from tools.kb.search.fusion import FusionMethod, fuse

SETS = DEV_SETS
METHODS: tuple[FusionMethod, ...] = ("minmax", "zscore", "rrf")
WEIGHTS = [round(0.05 * i, 2) for i in range(21)]
# The per-query weight of ``adaptive`` fusion: base weight x slope (tools.kb.search.fusion).
SLOPES = [0.5, 1.0, 1.5, 2.0, 3.0]


def slug(embedding: str) -> str:
    return embedding.replace(":", "-").replace("/", "-")


def open_kb(args: argparse.Namespace, name: str, **overrides: Any) -> KnowledgeBase:
    collection = f"{args.prefix}-{name}-{slug(args.embedding)}"
    return KnowledgeBase(
        KBConfig(home=args.home, collection=collection, embedding=args.embedding, **overrides)
    )


# -- pools -----------------------------------------------------------------------------


def stage_pools(args: argparse.Namespace) -> None:
    for name in args.sets:
        out = args.out / f"pools-{name}-{slug(args.embedding)}.json"
        if out.exists() and not args.force:
            print(f"# {name}: pools cached in {out}")
            continue
        data = SETS[name](args.data_dir)
        kb = open_kb(args, name)
        started = time.perf_counter()
        report = kb.ingest_documents(beir_documents(data))
        print(f"# {name}: {report.summary()} ({time.perf_counter() - started:.0f} s)", flush=True)
        snap = kb.snapshot()
        pools: dict[str, Any] = {}
        for qid in sorted(data.qrels):
            pool = kb.pipeline.candidate_pool(data.queries[qid])
            pools[qid] = {
                "doc": [snap.metadatas[snap.position[c]]["doc_id"] for c in pool.ids],
                "cos": [pool.cosine.get(c, 0.0) for c in pool.ids],
                "bm25": [pool.bm25[c].raw if c in pool.bm25 else 0.0 for c in pool.ids],
                "in_vec": [c in pool.vector_found for c in pool.ids],
                "in_bm25": [c in pool.bm25_found for c in pool.ids],
            }
        args.out.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"qrels": data.qrels, "pools": pools}), encoding="utf-8")
        kb.close()


def _load_pools(args: argparse.Namespace, name: str) -> dict[str, Any]:
    path = args.out / f"pools-{name}-{slug(args.embedding)}.json"
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _ndcg(pools: dict[str, Any], order_fn: Callable[[dict[str, Any]], list[int]]) -> float:
    rankings = {}
    for qid, p in pools["pools"].items():
        rankings[qid] = list(dict.fromkeys(p["doc"][i] for i in order_fn(p)))[:30]
    return float(score_run(rankings, pools["qrels"], [])["ndcg@10"])


def _order_single(side: str) -> Callable[[dict[str, Any]], list[int]]:
    key, member = ("cos", "in_vec") if side == "vector" else ("bm25", "in_bm25")

    def order(p: dict[str, Any]) -> list[int]:
        idx = [i for i in range(len(p["doc"])) if p[member][i]]
        return sorted(idx, key=lambda i: -p[key][i])

    return order


def _order_fused(
    method: FusionMethod, w: float, slope: float = 0.0
) -> Callable[[dict[str, Any]], list[int]]:
    def order(p: dict[str, Any]) -> list[int]:
        keys = [str(i) for i in range(len(p["doc"]))]
        vec = {k: p["cos"][i] for i, k in enumerate(keys)}
        bm = {k: p["bm25"][i] for i, k in enumerate(keys)}
        fused = fuse(vec, bm, method=method, vector_weight=w, adaptive_slope=slope)
        return sorted(range(len(keys)), key=lambda i: (-fused[keys[i]], i))

    return order


def stage_fusion(args: argparse.Namespace) -> None:
    table: dict[str, dict[str, float]] = {}
    for name in args.sets:
        pools = _load_pools(args, name)
        row = {
            "bm25": _ndcg(pools, _order_single("bm25")),
            "vector": _ndcg(pools, _order_single("vector")),
        }
        for method in METHODS:
            for w in WEIGHTS:
                row[f"{method}@{w}"] = _ndcg(pools, _order_fused(method, w))
        for slope in SLOPES:
            for w in WEIGHTS:
                row[f"adaptive@{w}/{slope}"] = _ndcg(pools, _order_fused("adaptive", w, slope))
        table[name] = row
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"fusion-{slug(args.embedding)}.json").write_text(json.dumps(table, indent=1))
    print_fusion(table, args.embedding)


def print_fusion(table: dict[str, dict[str, float]], embedding: str) -> None:
    """Best weight per set and method, then the default chosen with each set left out."""
    names = list(table)
    print(f"\n## nDCG@10 ({embedding}); best weight per set and method")
    print(
        f"{'set':<11} {'bm25':>6} {'vector':>6} " + " ".join(f"{m + ' (w)':>15}" for m in METHODS)
    )
    for name in names:
        row = table[name]
        best = []
        for m in METHODS:
            w = max(WEIGHTS, key=lambda w: row[f"{m}@{w}"])
            best.append(f"{row[f'{m}@{w}']:.4f} ({w:.2f})")
        print(
            f"{name:<11} {row['bm25']:>6.4f} {row['vector']:>6.4f} "
            + " ".join(f"{b:>15}" for b in best)
        )

    def gain(name: str, key: str) -> float:
        row = table[name]
        return row[key] - max(row["bm25"], row["vector"])

    configs = [f"{m}@{w}" for m in METHODS for w in WEIGHTS]
    configs += [f"adaptive@{w}/{s}" for s in SLOPES for w in WEIGHTS]

    # The rule that picks the shipped default: the largest *worst-case* gain over the
    # better single retriever (a mean can hide a set the hybrid loses on).
    def choose(sets: list[str]) -> str:
        return max(configs, key=lambda c: (min(gain(n, c) for n in sets), c))

    print("\n## leave one data set out (choose on the others: largest worst-case gain)")
    print(
        f"{'left out':<11} {'chosen':<18} {'hybrid':>7} {'bm25':>7} {'vector':>7} {'margin':>7}"
        f"   {'static chosen':<14} {'margin':>7}"
    )
    static = [c for c in configs if not c.startswith("adaptive")]
    for held in names:
        others = [n for n in names if n != held]
        chosen = choose(others)
        plain = max(static, key=lambda c: (min(gain(n, c) for n in others), c))
        row = table[held]
        print(
            f"{held:<11} {chosen:<18} {row[chosen]:>7.4f} {row['bm25']:>7.4f} "
            f"{row['vector']:>7.4f} {gain(held, chosen):>+7.4f}   {plain:<14} {gain(held, plain):>+7.4f}"
        )
    overall = choose(names)
    print(
        f"\nall sets -> default {overall} "
        f"({', '.join(f'{n} {table[n][overall]:.4f} ({gain(n, overall):+.4f})' for n in names)})"
    )


# -- features and calibration ----------------------------------------------------------


def _row(sample: AnswerabilitySample) -> dict[str, Any]:
    ev = sample.evidence
    return {"group": sample.group, "label": sample.label, **{f: getattr(ev, f) for f in FEATURES}}


def stage_features(args: argparse.Namespace) -> None:
    out = args.out / f"features-{slug(args.embedding)}.jsonl"
    samples: list[AnswerabilitySample] = []
    for name in args.sets:
        data = SETS[name](args.data_dir)
        kb = open_kb(args, name)
        kb.ingest_documents(beir_documents(data))
        samples.extend(answerability_samples(kb, data, name))
        if name == "scifact":  # FreshQA dev against an unrelated (scientific) KB
            fresh = read_jsonl(args.data_dir / "freshqa" / "freshqa_dev.jsonl")
            samples.extend(
                unrelated_samples(kb, (str(r.get("question") or "") for r in fresh), name)
            )
        kb.close()
        print(f"# {name}: {len(samples)} samples so far", flush=True)
    if "rgb" in args.sets:
        samples.extend(
            rgb_answerability_samples(
                args.data_dir / "rgb" / "zh_refine_dev.json", lambda n: open_kb(args, n)
            )
        )
    args.out.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for sample in samples:
            fh.write(json.dumps(_row(sample)) + "\n")
    print(f"# {len(samples)} samples -> {out}")


def _samples(rows: list[dict[str, Any]]) -> list[AnswerabilitySample]:
    return [
        AnswerabilitySample(
            r["group"], r["label"], 0.0, EvidenceFeatures(**{f: r[f] for f in FEATURES})
        )
        for r in rows
    ]


def stage_calibrate(args: argparse.Namespace) -> None:
    """Leave one data set out with the product's fit (``tools.evaluation.fitting``), then
    the threshold table. Writes nothing: the shipped parameters are
    ``hybrid-rag eval calibration --fit`` (bench/README.md)."""
    path = args.out / f"features-{slug(args.embedding)}.jsonl"
    samples = _samples([json.loads(line) for line in path.open(encoding="utf-8")])
    for feature_set, label in ((FEATURES, "all features"), (LEXICAL_FEATURES, "lexical only")):
        print(f"\n## leave one data set out ({label}, {args.embedding})")
        print(f"{'left out':<11} {'n':>5} {'pos':>5} {'AUROC':>6} {'ECE':>6} {'Brier':>6}")
        lodo = held_out(samples, feature_set, l2=args.l2)
        for held, (labels, probs) in lodo.items():
            rep = calibration_report(held, labels, probs)
            print(
                f"{held:<11} {rep.n:>5} {rep.positives:>5} {rep.auroc or 0:>6.3f} {rep.ece:>6.3f} {rep.brier:>6.3f}"
            )
        if feature_set == FEATURES:
            _threshold_table(lodo)


def _threshold_table(held_out: dict[str, tuple[list[int], list[float]]]) -> None:
    """The decision threshold (``confidence_threshold``) on held-out probabilities: per
    set, the share of answerable queries kept (>= t) and of unanswerable ones refused
    (< t); the default is the threshold with the best mean balanced accuracy over the
    sets (the worst set is shown too: it sits near 0.5 for every t, so it cannot choose)."""
    grid = [round(0.05 * i, 2) for i in range(1, 20)]

    def cell(g: str, t: float) -> str:
        keep, refuse = rates(*held_out[g], t)
        return f"{keep:.3f} / {refuse:.3f}"

    def rates(labels: list[int], probs: list[float], t: float) -> tuple[float, float]:
        pos = [p for y, p in zip(labels, probs, strict=True) if y]
        neg = [p for y, p in zip(labels, probs, strict=True) if not y]
        keep = sum(p >= t for p in pos) / len(pos) if pos else float("nan")
        refuse = sum(p < t for p in neg) / len(neg) if neg else float("nan")
        return keep, refuse

    def worst(t: float) -> float:
        return min(balanced(t))

    def mean(t: float) -> float:
        vals = balanced(t)
        return sum(vals) / len(vals)

    def balanced(t: float) -> list[float]:
        vals = []
        for labels, probs in held_out.values():
            keep, refuse = rates(labels, probs, t)
            parts = [v for v in (keep, refuse) if v == v]  # drop NaN (one-class set)
            vals.append(sum(parts) / len(parts))
        return vals

    print("\n## threshold on held-out probabilities: kept answerable / refused unanswerable")
    print(
        f"{'t':>5} "
        + " ".join(f"{g:>17}" for g in held_out)
        + f" {'mean bal.':>10} {'worst bal.':>10}"
    )
    for t in grid:
        cells = " ".join(f"{cell(g, t):>17}" for g in held_out)
        print(f"{t:>5.2f} {cells} {mean(t):>10.3f} {worst(t):>10.3f}")
    best = max(grid, key=lambda t: (round(mean(t), 3), -abs(t - 0.5)))
    print(f"best mean balanced accuracy at t = {best:.2f} ({mean(best):.3f})")


STAGES = {
    "pools": stage_pools,
    "fusion": stage_fusion,
    "features": stage_features,
    "calibrate": stage_calibrate,
}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True, raw=True)
    ap.add_argument("stages", nargs="+", choices=list(STAGES))
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--embedding", default="local")
    ap.add_argument("--sets", type=lambda s: s.split(","), default=list(SETS))
    ap.add_argument("--prefix", default="ev", help="collection name prefix under --home")
    ap.add_argument("--force", action="store_true", help="recompute cached pools")
    ap.add_argument("--l2", type=float, default=1.0)
    args = ap.parse_args(argv)
    need(args.data_dir)
    for stage in args.stages:
        STAGES[stage](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
