"""Retrieval quality and latency per dataset and mode (run on demand).

Datasets (BEIR layout under ``--data-dir``, default ``<repo>/../shared/data``):

* ``scifact`` — ``beir_scifact``, qrels/train.tsv (English, 5,183 abstracts)
* ``rgb``     — ``rgb/derived_retrieval/zh_refine``, qrels.tsv (Chinese news passages)
* ``cmrc``    — ``cmrc2018_retrieval``, qrels/trial.tsv (Chinese Wikipedia paragraphs)

Each dataset is indexed into a throw-away collection by
``tools.evaluation.datasets.evaluate_retrieval`` and scored for ``bm25``, ``vector`` and
``hybrid`` (nDCG@10, Recall@5, Recall@10, MRR@10, hit@5, p50/p95 search latency,
which includes the query embedding). The embedding cache lives in ``--home``
(a temporary directory unless given), so passing the home of an earlier run
skips re-embedding identical chunks.

Two design questions, answered with BM25 only (in memory: the same chunking and
``BM25Index`` as the knowledge base, without Chroma; ``--compare-via-kb`` runs them
through ``evaluate_retrieval`` with a cheap hash embedder instead):

* ``--compare-tokenizers``: jieba vs character bigrams on the two Chinese sets;
* ``--compare-stem``: English light stemming on/off on SciFact.

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_retrieval
    .venv/bin/python -m bench.bench_retrieval --datasets rgb,cmrc --max-queries 100
    .venv/bin/python -m bench.bench_retrieval --compare-tokenizers --compare-stem
    .venv/bin/python -m bench.bench_retrieval --fusion minmax --vector-weight 0.45 --no-stem
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import need, parser
from tools.evaluation.datasets import (
    BeirData,
    evaluate_retrieval,
    load_beir,
    score_run,
    to_documents,
)
from tools.kb.index.bm25 import BM25Index
from tools.kb.index.tokenizers import make_tokenizer
from tools.kb.ingest.chunking import ChunkingOptions, chunk_document
from tools.kb.knowledge_base import SEARCH_MODES, KBConfig, KnowledgeBase, SearchMode
from tools.kb.search.fusion import FUSION_METHODS

METRICS = ("ndcg@10", "recall@5", "recall@10", "mrr@10", "hit@5")


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str
    split: str | None
    language: str


DATASETS = {
    "scifact": Dataset("scifact", "beir_scifact", "train", "en"),
    "rgb": Dataset("rgb", "rgb/derived_retrieval/zh_refine", None, "zh"),
    "cmrc": Dataset("cmrc", "cmrc2018_retrieval", "trial", "zh"),
}


def load(data_dir: Path, name: str) -> BeirData:
    ds = DATASETS[name]
    root = data_dir / ds.path
    need(root)
    return load_beir(root, ds.split)


def run_modes(
    data: BeirData,
    modes: tuple[SearchMode, ...],
    config: KBConfig,
    max_queries: int | None,
    cheap_embedder: bool = False,
) -> tuple[dict[str, dict[str, float]], float]:
    """Score ``modes``; returns the results and the wall time (index + queries) in s."""
    started = time.perf_counter()
    if cheap_embedder:
        from tests.fakes import hash_model

        kb = KnowledgeBase(
            KBConfig(
                home=config.home,
                collection=f"bench-{uuid.uuid4().hex[:10]}",
                chinese_tokenizer=config.chinese_tokenizer,
                stem=config.stem,
            ),
            embedding_model=hash_model(64),
        )
        try:
            results = evaluate_retrieval(data, modes=modes, kb=kb, max_queries=max_queries)
        finally:
            kb.drop()
            kb.close()
    else:
        results = evaluate_retrieval(data, modes=modes, config=config, max_queries=max_queries)
    return results, time.perf_counter() - started


def bm25_in_memory(
    data: BeirData, tokenizer: str, stem: bool, max_queries: int | None
) -> tuple[dict[str, float], float]:
    """BM25-only scores without Chroma: the knowledge base's chunking and ``BM25Index``.

    Same chunks, index texts (heading + body), ``BM25Index.search`` and document-level
    scoring as ``evaluate_retrieval(mode="bm25")``, minus the Chroma round trip, so a
    tokeniser comparison costs seconds instead of two full ingests.
    """
    started = time.perf_counter()
    options = ChunkingOptions()
    texts: list[str] = []
    owners: list[str] = []
    for doc in to_documents(data):
        for c in chunk_document(doc.text, markdown=doc.is_markdown, options=options):
            texts.append(f"{c.heading}\n{c.text}")
            owners.append(doc.doc_id)
    index = BM25Index(texts, make_tokenizer(tokenizer, stem=stem))
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid in sorted(data.qrels)[: max_queries or None]:
        t0 = time.perf_counter()
        hits = index.search(data.queries[qid], 30)
        latencies.append((time.perf_counter() - t0) * 1000)
        rankings[qid] = list(dict.fromkeys(owners[h.index] for h in hits))
    return score_run(rankings, data.qrels, latencies), time.perf_counter() - started


def print_table(title: str, rows: list[tuple[str, str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    header = (
        f"{'dataset':<9}{'variant':<16}"
        + "".join(f"{m:>10}" for m in METRICS)
        + f"{'queries':>8}{'p50 ms':>8}{'p95 ms':>8}"
    )
    print(header)
    print("-" * len(header))
    for dataset, variant, r in rows:
        print(
            f"{dataset:<9}{variant:<16}"
            + "".join(f"{r[m]:>10.4f}" for m in METRICS)
            + f"{int(r['queries']):>8}{r['p50_ms']:>8.1f}{r['p95_ms']:>8.1f}"
        )


def main_table(
    args: argparse.Namespace,
    names: list[str],
    modes: tuple[str, ...],
    home: Path,
    out: dict[str, Any],
) -> None:
    """Each data set in each search mode, with the knowledge base's shipped settings."""
    config = KBConfig(
        home=home,
        embedding=args.embedding,
        chinese_tokenizer=args.tokenizer,
        stem=args.stem,
        fusion=args.fusion,
        vector_weight=args.vector_weight,
    )
    rows: list[tuple[str, str, dict[str, float]]] = []
    for name in names:
        data = load(args.data_dir, name)
        print(
            f"{name}: {len(data.corpus)} documents, {len(data.qrels)} judged queries",
            file=sys.stderr,
        )
        results, seconds = run_modes(data, modes, config, args.max_queries)  # type: ignore[arg-type]
        out.setdefault("retrieval", {})[name] = {"seconds": round(seconds, 1), **results}
        rows.extend((name, mode, r) for mode, r in results.items())
        print(f"{name}: done in {seconds:.0f} s", file=sys.stderr)
    print_table(
        f"retrieval (embedding={args.embedding}, tokenizer={args.tokenizer}, "
        f"stem={args.stem}, fusion={args.fusion}); latency includes query embedding",
        rows,
    )


def compare_tokenizers(args: argparse.Namespace, home: Path, out: dict[str, Any]) -> None:
    """BM25 on the Chinese sets, jieba words against character bigrams."""
    rows = []
    for name in ("rgb", "cmrc"):
        data = load(args.data_dir, name)
        for tok in ("jieba", "bigram"):
            if args.compare_via_kb:
                config = KBConfig(home=home, chinese_tokenizer=tok)
                results, seconds = run_modes(
                    data, ("bm25",), config, args.max_queries, cheap_embedder=True
                )
                scores = results["bm25"]
            else:
                scores, seconds = bm25_in_memory(data, tok, False, args.max_queries)
            out.setdefault("tokenizers", {}).setdefault(name, {})[tok] = scores
            rows.append((name, f"bm25 {tok}", scores))
            print(f"{name} {tok}: {seconds:.0f} s", file=sys.stderr)
    print_table("Chinese tokenisation, BM25 only", rows)


def compare_stem(args: argparse.Namespace, home: Path, out: dict[str, Any]) -> None:
    """BM25 on SciFact with and without Snowball English stemming."""
    rows = []
    data = load(args.data_dir, "scifact")
    for stem in (False, True):
        if args.compare_via_kb:
            config = KBConfig(home=home, stem=stem)
            results, seconds = run_modes(
                data, ("bm25",), config, args.max_queries, cheap_embedder=True
            )
            scores = results["bm25"]
        else:
            scores, seconds = bm25_in_memory(data, "jieba", stem, args.max_queries)
        label = "stem" if stem else "no-stem"
        out.setdefault("stemming", {})[label] = scores
        rows.append(("scifact", f"bm25 {label}", scores))
        print(f"scifact {label}: {seconds:.0f} s", file=sys.stderr)
    print_table("English stemming, BM25 only", rows)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    p = parser(__doc__, data=True)
    p.add_argument(
        "--datasets", default="scifact,rgb,cmrc", help="comma list of " + ",".join(DATASETS)
    )
    p.add_argument("--modes", default="bm25,vector,hybrid", help="comma list of search modes")
    p.add_argument("--embedding", default="local", help="'local', 'local:e5' or 'openai:<model>'")
    p.add_argument("--tokenizer", choices=("jieba", "bigram"), default="jieba")
    # The knowledge base's own defaults, so the main table measures what ships.
    p.add_argument("--stem", action=argparse.BooleanOptionalAction, default=KBConfig.stem,
                   help="Snowball English stemming for BM25 (default on, as shipped)")  # fmt: skip
    p.add_argument("--fusion", choices=FUSION_METHODS, default=KBConfig.fusion)
    p.add_argument("--vector-weight", type=float, default=KBConfig.vector_weight)
    p.add_argument("--max-queries", type=int, default=None)
    p.add_argument("--home", type=Path, default=None, help="data home (embedding cache)")
    p.add_argument("--compare-tokenizers", action="store_true", help="BM25: jieba vs bigram (zh)")
    p.add_argument("--compare-stem", action="store_true", help="BM25: stemming on/off (SciFact)")
    p.add_argument("--only-compare", action="store_true", help="skip the main table")
    p.add_argument(
        "--compare-via-kb",
        action="store_true",
        help="run the comparisons through evaluate_retrieval/Chroma (slow) instead of in memory",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    need(args.data_dir)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        sys.exit(f"error: unknown dataset(s) {unknown}; choose from {list(DATASETS)}")
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if any(m not in SEARCH_MODES for m in modes):
        sys.exit(f"error: modes must be among {SEARCH_MODES}")

    home = args.home or Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "embedding": args.embedding,
        "tokenizer": args.tokenizer,
        "stem": args.stem,
        "fusion": args.fusion,
        "max_queries": args.max_queries,
    }
    try:
        if not args.only_compare:
            main_table(args, names, modes, home, out)
        if args.compare_tokenizers:
            compare_tokenizers(args, home, out)
        if args.compare_stem:
            compare_stem(args, home, out)
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
