"""Choose the hybrid fusion defaults: RRF vs weighted, vector weight, English stemming.

Indexes each dataset once (a throw-away collection; the embedding cache under
``--home`` makes repeated runs cheap), then scores every variant on the same index.

    .venv/bin/python bench/bench_fusion.py --home /tmp/bench/home-cli [--datasets scifact,rgb,cmrc]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import uuid
from pathlib import Path

from tools.evaluation.datasets import load_beir, score_run, to_documents
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

REPO = Path(__file__).resolve().parent.parent
DATASETS = {
    "scifact": ("beir_scifact", "train"),
    "rgb": ("rgb/derived_retrieval/zh_refine", None),
    "cmrc": ("cmrc2018_retrieval", "trial"),
}
VARIANTS: list[tuple[str, str, dict[str, object]]] = [
    ("bm25", "bm25", {}),
    ("bm25 + stem", "bm25", {"stem": True}),
    ("rrf w=0.5", "hybrid", {"fusion": "rrf", "vector_weight": 0.5}),
    ("rrf w=0.3", "hybrid", {"fusion": "rrf", "vector_weight": 0.3}),
    ("rrf w=0.3 + stem", "hybrid", {"fusion": "rrf", "vector_weight": 0.3, "stem": True}),
    ("rrf w=0.2", "hybrid", {"fusion": "rrf", "vector_weight": 0.2}),
    ("weighted w=0.3", "hybrid", {"fusion": "weighted", "vector_weight": 0.3}),
    ("weighted w=0.5", "hybrid", {"fusion": "weighted", "vector_weight": 0.5}),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--datasets", default="scifact,rgb,cmrc")
    ap.add_argument("--embedding", default="local")
    args = ap.parse_args(argv)
    if not args.data_dir.exists():
        print(f"data directory {args.data_dir} not found (pass --data-dir)", file=sys.stderr)
        return 2
    print(f"{'dataset':<8} {'variant':<18} {'nDCG@10':>8} {'R@10':>7} {'MRR@10':>7}")
    for name in args.datasets.split(","):
        folder, split = DATASETS[name]
        data = load_beir(args.data_dir / folder, split)
        base = KBConfig(
            home=args.home, collection=f"fusion-{uuid.uuid4().hex[:8]}", embedding=args.embedding
        )
        kb = KnowledgeBase(base)
        started = time.perf_counter()
        kb.ingest_documents(to_documents(data))
        print(
            f"# {name}: indexed {len(data.corpus)} docs in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        try:
            for label, mode, overrides in VARIANTS:
                kb.config = dataclasses.replace(base, **overrides)  # type: ignore[arg-type]
                kb.tokenizer = __import__("tools.kb.tokenizers", fromlist=["x"]).make_tokenizer(
                    kb.config.chinese_tokenizer, stem=kb.config.stem
                )
                kb._snapshot = None  # the BM25 side depends on the tokenizer
                rankings = {
                    q: list(
                        dict.fromkeys(h.doc_id for h in kb.search(data.queries[q], 30, mode=mode))
                    )  # type: ignore[arg-type]
                    for q in sorted(data.qrels)
                }
                r = score_run(rankings, data.qrels, [])
                print(
                    f"{name:<8} {label:<18} {r['ndcg@10']:>8.4f} {r['recall@10']:>7.4f} {r['mrr@10']:>7.4f}",
                    flush=True,
                )
        finally:
            kb.drop()
            kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
