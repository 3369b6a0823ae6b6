"""Ingestion throughput on SciFact documents (run on demand).

Three runs through ``KnowledgeBase.ingest_documents`` (chunking, embedding cache,
Chroma upserts, registry commits), each into a fresh collection:

* ``embedding (cold)`` — the embedding model (``--embedding``, default ``local``)
  with an empty embedding cache in a temporary data home;
* ``embedding (warm)`` — the same model and home again: every chunk is a cache hit;
* ``no embedding``     — ``tests.fakes.hash_model`` (hashed bag of words, no model):
  what chunking + Chroma + registry cost on their own.

Time inside ``embed_documents`` is reported separately, and the first
``snapshot()`` (reading chunks back + BM25 build) after each ingest.

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_ingest          # first 1,000 docs
    .venv/bin/python -m bench.bench_ingest --docs 300
    .venv/bin/python -m bench.bench_ingest --all                      # all 5,183 docs
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import need, parser
from tools.evaluation.datasets import load_beir, to_documents
from tools.kb.embed.embeddings import EmbeddingModel, make_embedding_model
from tools.kb.ingest.loaders import SourceDocument
from tools.kb.knowledge_base import KBConfig, KnowledgeBase


def timed_model(model: EmbeddingModel, sink: dict[str, float]) -> EmbeddingModel:
    """Accumulate seconds and texts spent in ``embed_documents`` into ``sink``."""
    original = model.embed_documents

    def embed_documents(texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        try:
            return original(texts)
        finally:
            sink["embed_s"] = sink.get("embed_s", 0.0) + time.perf_counter() - started
            sink["embedded"] = sink.get("embedded", 0) + len(texts)

    model.embed_documents = embed_documents  # type: ignore[method-assign]
    return model


def one_run(
    label: str, docs: Sequence[SourceDocument], home: Path, model: EmbeddingModel, collection: str
) -> dict[str, Any]:
    sink: dict[str, float] = {}
    timed_model(model, sink)
    kb = KnowledgeBase(KBConfig(home=home, collection=collection), embedding_model=model)
    try:
        started = time.perf_counter()
        report = kb.ingest_documents(docs)
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        snap = kb.snapshot()
        snapshot_s = time.perf_counter() - started
    finally:
        kb.close()
    del model.embed_documents  # back to the class method
    embed_s = sink.get("embed_s", 0.0)
    return {
        "run": label,
        "documents": len(report.added),
        "chunks": report.chunks_written,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(report.chunks_written / seconds, 1) if seconds else 0.0,
        "embed_s": round(embed_s, 2),
        "texts_embedded": int(sink.get("embedded", 0)),
        "other_s": round(seconds - embed_s, 2),
        "snapshot_s": round(snapshot_s, 2),
        "chunks_in_snapshot": len(snap.ids),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data=True)
    p.add_argument("--docs", type=int, default=1000, help="first N SciFact documents")
    p.add_argument("--all", action="store_true", help="all 5,183 documents")
    p.add_argument("--embedding", default="local", help="model of the embedding runs")
    p.add_argument("--skip-embedding", action="store_true", help="only the no-embedding run")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = p.parse_args(argv)
    root = args.data_dir / "beir_scifact"
    need(root)
    docs = to_documents(load_beir(root, "train"))
    if not args.all:
        docs = docs[: args.docs]
    from tests.fakes import hash_model

    runs: list[dict[str, Any]] = []
    home = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        if not args.skip_embedding:
            model = make_embedding_model(args.embedding)
            model.embed_query("warm up")  # load the model outside the timed part
            runs.append(one_run("embedding (cold)", docs, home, model, "ingest-cold"))
            print(f"cold: {runs[-1]}", file=sys.stderr)
            runs.append(one_run("embedding (warm)", docs, home, model, "ingest-warm"))
        cheap_home = Path(tempfile.mkdtemp(prefix="bench-ingest-hash-"))
        try:
            runs.append(one_run("no embedding", docs, cheap_home, hash_model(384), "ingest-hash"))
        finally:
            shutil.rmtree(cheap_home, ignore_errors=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)

    print(f"SciFact, {len(docs)} documents, embedding model {args.embedding!r}")
    header = (
        f"{'run':<18}{'chunks':>7}{'seconds':>9}{'chunks/s':>10}{'embed s':>9}"
        f"{'other s':>9}{'BM25 snapshot s':>17}"
    )
    print(header)
    print("-" * len(header))
    for r in runs:
        print(
            f"{r['run']:<18}{r['chunks']:>7}{r['seconds']:>9.1f}{r['chunks_per_s']:>10.1f}"
            f"{r['embed_s']:>9.1f}{r['other_s']:>9.1f}{r['snapshot_s']:>17.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
