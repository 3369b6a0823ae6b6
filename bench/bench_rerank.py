"""Reranking with/without on the dev data, and the cross-lingual check (run on demand).

Part 1 indexes SciFact (train), RGB zh and CMRC (trial) once each and scores the
first-stage hybrid ranking against the same ranking reranked by ``lexical`` (and by
``cross-encoder:<model>`` when ``--cross-encoder`` names a locally available model).

Part 2 is the cross-lingual check on the bundled sample KB: the questions of
``examples/questions.jsonl`` marked ``crosslingual`` (English questions whose answer is
only in a Chinese document, and the reverse), offline (no translation): hit@1/hit@5 of
the expected document for bm25, vector and hybrid.

    .venv/bin/python -m bench.bench_rerank --home /tmp/bench/home-cli
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path

from bench.harness import SAMPLE_KB, SAMPLE_QUESTIONS, parser
from tools.evaluation.datasets import load_beir, score_run, to_documents
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.search.rerankers import make_reranker, rerank_chunks

DATASETS = {
    "scifact": ("beir_scifact", "train"),
    "rgb": ("rgb/derived_retrieval/zh_refine", None),
    "cmrc": ("cmrc2018_retrieval", "trial"),
}


def dev_data(args: argparse.Namespace) -> None:
    rerankers = ["lexical"] + (
        [f"cross-encoder:{args.cross_encoder}"] if args.cross_encoder else []
    )
    print(f"{'dataset':<8} {'ranking':<28} {'nDCG@10':>8} {'R@10':>7} {'MRR@10':>7}")
    for name in args.datasets.split(","):
        folder, split = DATASETS[name]
        data = load_beir(args.data_dir / folder, split)
        # --reuse names the collections bench_evidence.py built (same default embedder),
        # so nothing is indexed again; otherwise a throwaway collection.
        collection = args.reuse.format(set=name) if args.reuse else f"rerank-{uuid.uuid4().hex[:8]}"
        kb = KnowledgeBase(KBConfig(home=args.home, collection=collection))
        try:
            kb.ingest_documents(to_documents(data))
            queries = sorted(data.qrels)
            first = {q: kb.search(data.queries[q], 30) for q in queries}
            runs = {"hybrid (first stage)": {q: first[q] for q in queries}}
            for spec in rerankers:
                rr = make_reranker(spec)
                runs[f"hybrid + {spec}"] = {
                    q: rerank_chunks(data.queries[q], first[q], rr, 30) for q in queries
                }
            for label, hits in runs.items():
                rankings = {q: list(dict.fromkeys(h.doc_id for h in hits[q])) for q in queries}
                r = score_run(rankings, data.qrels, [])
                print(
                    f"{name:<8} {label:<28} {r['ndcg@10']:>8.4f} {r['recall@10']:>7.4f} {r['mrr@10']:>7.4f}",
                    flush=True,
                )
        finally:
            if not args.reuse:
                kb.drop()
            kb.close()


def crosslingual() -> None:
    rows = [json.loads(line) for line in (SAMPLE_QUESTIONS).open(encoding="utf-8")]
    cross = [r for r in rows if r.get("crosslingual")]
    with tempfile.TemporaryDirectory() as home, KnowledgeBase(KBConfig(home=Path(home))) as kb:
        kb.ingest([SAMPLE_KB])
        print(f"\ncross-lingual check: {len(cross)} questions, offline (no translation)")
        print(f"{'mode':<8} {'hit@1':>6} {'hit@5':>6}")
        for mode in ("bm25", "vector", "hybrid"):
            hit1 = hit5 = 0
            for r in cross:
                docs = list(
                    dict.fromkeys(h.doc_id for h in kb.search(r["question"], 20, mode=mode))
                )  # type: ignore[arg-type]
                hit1 += docs[:1] == [r["doc"]]
                hit5 += r["doc"] in docs[:5]
            print(f"{mode:<8} {hit1 / len(cross):>6.2f} {hit5 / len(cross):>6.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True)
    ap.add_argument(
        "--home", type=Path, required=True, help="data home (its embedding cache is reused)"
    )
    ap.add_argument("--datasets", default="scifact,rgb,cmrc")
    ap.add_argument("--cross-encoder", default=None, help="a locally available cross-encoder model")
    ap.add_argument("--skip-dev", action="store_true")
    ap.add_argument(
        "--reuse",
        default=None,
        metavar="TEMPLATE",
        help="reuse collections under --home, e.g. 'pre-{set}-local-e5' (bench_evidence.py's)",
    )
    args = ap.parse_args(argv)
    if not args.skip_dev:
        if not args.data_dir.exists():
            print(f"data directory {args.data_dir} not found (pass --data-dir)", file=sys.stderr)
            return 2
        dev_data(args)
    crosslingual()
    return 0


if __name__ == "__main__":
    sys.exit(main())
