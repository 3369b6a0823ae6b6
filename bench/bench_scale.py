"""Scale benchmark: the knowledge base at 100,000 chunks (run on demand).

The corpus is the CRUD-RAG news sample (``crud_rag_news_sample/news_sample.jsonl``)
plus generated documents (random re-combinations of the news sentences, so the
term statistics stay those of real Chinese news) until ``--chunks`` chunks are
stored. Everything goes through ``KnowledgeBase.ingest_documents`` (chunking,
embedding cache, Chroma, registry commits) with an injected cheap embedder:
deterministic random unit vectors of dimension 384 (``--vectors random``) or
``tests.fakes.hash_model`` (``--vectors hash``). This measures the index, not an
embedding model.

Measured:

* ingestion time of the whole corpus (cheap embedder);
* BM25 index build (first ``snapshot()``: reading the chunks from Chroma, jieba
  tokenisation, ``BM25Index``, pickling) and the reload of that snapshot from disk;
* query latency p50/p95 for ``hybrid``, ``bm25`` and ``vector`` modes, EXCLUDING
  query embedding (the query vectors are precomputed; ``embed_query`` is a dict
  lookup), plus a per-component profile of hybrid queries;
* peak RSS (``resource.getrusage``) after the KB work, before the baseline;
* baseline: ``rank_bm25.BM25Okapi.get_scores`` on the same tokenised corpus,
  against ``BM25Index.search`` (the project's inverted index).

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_scale            # 100k chunks
    .venv/bin/python -m bench.bench_scale --chunks 20000 --queries 100   # quicker
    .venv/bin/python -m bench.bench_scale --json out.json --keep /tmp/scale-home

Target: hybrid p95 <= 50 ms at 100k chunks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from bench.harness import need, parser
from tools.evaluation.datasets import percentile
from tools.kb import snapshot as kb_module
from tools.kb.bm25 import BM25Index
from tools.kb.embeddings import EmbeddingModel
from tools.kb.knowledge_base import KBConfig, KnowledgeBase, SearchMode
from tools.kb.loaders import SourceDocument, content_hash

NEWS = Path("crud_rag_news_sample") / "news_sample.jsonl"
DIM = 384
_SENTENCE_RE = re.compile(r"[^。！？!?\n]+[。！？!?]?")


# ------------------------------------------------------------------------- embedder
def _unit(seed_text: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.blake2b(seed_text.encode("utf-8"), digest_size=8).digest())
    vec = np.random.default_rng(seed).standard_normal(dim)
    return (vec / np.linalg.norm(vec)).tolist()


class RandomEmbeddings(Embeddings):
    """Deterministic random unit vectors per text; queries come from a precomputed table."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.query_vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_unit(t, self.dim) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        vec = self.query_vectors.get(text)
        return vec if vec is not None else _unit("q:" + text, self.dim)


class PrecomputedQueries(Embeddings):
    """Wraps a document embedder; ``embed_query`` is a lookup of precomputed vectors."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.query_vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        vec = self.query_vectors.get(text)
        return vec if vec is not None else self.inner.embed_query(text)


def make_model(kind: str) -> tuple[EmbeddingModel, dict[str, list[float]]]:
    """The cheap embedder and its (mutable) table of precomputed query vectors."""
    if kind == "hash":
        from tests.fakes import HashEmbeddings

        emb = PrecomputedQueries(HashEmbeddings(DIM))
        return EmbeddingModel(emb, f"bench-hash-{DIM}", 0.0, DIM), emb.query_vectors
    remb = RandomEmbeddings(DIM)
    return EmbeddingModel(remb, f"bench-random-{DIM}", 0.0, DIM), remb.query_vectors


# ----------------------------------------------------------------------------- corpus
def load_news(data_dir: Path) -> list[dict[str, Any]]:
    path = data_dir / NEWS
    need(path)
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def news_documents(rows: Sequence[dict[str, Any]]) -> list[SourceDocument]:
    docs = []
    for i, row in enumerate(rows):
        text = str(row.get("text") or "")
        if text.strip():
            docs.append(
                SourceDocument(
                    f"news-{i:05d}", f"news:{row.get('_id')}", text, content_hash(text), False
                )
            )
    return docs


def synthetic_documents(
    sentences: Sequence[str], rng: random.Random, start: int, count: int, chars: int
) -> Iterator[SourceDocument]:
    """Documents of about ``chars`` characters made of random news sentences."""
    for n in range(start, start + count):
        parts: list[str] = []
        size = 0
        while size < chars:
            s = rng.choice(sentences)
            parts.append(s)
            size += len(s)
        paras = ["".join(parts[i : i + 4]) for i in range(0, len(parts), 4)]
        text = "\n\n".join(paras)
        yield SourceDocument(f"gen-{n:06d}", f"generated:{n}", text, content_hash(text), False)


def make_queries(sentences: Sequence[str], rng: random.Random, n: int) -> list[str]:
    """Short Chinese queries: 8-24 character spans of random news sentences."""
    out: list[str] = []
    while len(out) < n:
        s = rng.choice(sentences).strip("。！？!? ")
        if len(s) < 10:
            continue
        length = rng.randint(8, min(24, len(s)))
        begin = rng.randint(0, len(s) - length)
        query = s[begin : begin + length].strip()
        if len(query) >= 4:
            out.append(query)
    return out


# ---------------------------------------------------------------------- instrumentation
class Profile:
    """Per-label durations in milliseconds, collected while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.samples: dict[str, list[float]] = defaultdict(list)
        self._current: dict[str, float] = defaultdict(float)

    def add(self, label: str, ms: float) -> None:
        if self.active:
            self._current[label] += ms

    def end_query(self) -> None:
        for label, ms in self._current.items():
            self.samples[label].append(ms)
        self._current.clear()


def instrument(kb: KnowledgeBase, prof: Profile) -> None:
    """Time the store calls and retrieval stages of ``kb`` (instance attributes only)."""
    store = kb.chunks
    guard = store._guard  # every Chroma call of the chunk store goes through it

    def timed_guard(what: str, fn: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return guard(what, fn)
        finally:
            label = what.split(" ", 1)[0] if what else "call"
            prof.add(f"chroma: {label}", (time.perf_counter() - started) * 1000)

    store._guard = timed_guard  # type: ignore[assignment]

    for name in ("candidate_pool", "snapshot"):
        original = getattr(kb.retriever, name)  # AttributeError: the stages were renamed

        def wrapper(*a: Any, _orig: Any = original, _name: str = name, **kw: Any) -> Any:
            started = time.perf_counter()
            try:
                return _orig(*a, **kw)
            finally:
                prof.add(f"kb.{_name}", (time.perf_counter() - started) * 1000)

        setattr(kb.retriever, name, wrapper)


def instrument_bm25(index: BM25Index, prof: Profile) -> None:
    for name in ("search", "score_indices"):
        original = getattr(index, name)

        def wrapper(*a: Any, _orig: Any = original, _name: str = name, **kw: Any) -> Any:
            started = time.perf_counter()
            try:
                return _orig(*a, **kw)
            finally:
                prof.add(f"bm25.{_name}", (time.perf_counter() - started) * 1000)

        setattr(index, name, wrapper)


class TimedBM25Index(BM25Index):
    """``BM25Index`` that records its build time and, optionally, the tokenised corpus.

    Module level so that the knowledge base can pickle its snapshot.
    """

    record_to: Path | None = None
    stats: dict[str, float] = {}  # noqa: RUF012 - shared on purpose

    def __init__(self, texts: Sequence[str], tokenizer: Callable[[str], list[str]]) -> None:
        fh = self.record_to.open("w", encoding="utf-8") if self.record_to else None
        write_s = 0.0

        def recording(text: str) -> list[str]:
            nonlocal write_s
            toks = tokenizer(text)
            if fh is not None:
                t0 = time.perf_counter()
                fh.write("\x1f".join(toks).replace("\n", " ") + "\n")
                write_s += time.perf_counter() - t0
            return toks

        started = time.perf_counter()
        try:
            super().__init__(texts, recording)
        finally:
            if fh is not None:
                fh.close()
        self.stats["bm25_index_s"] = time.perf_counter() - started - write_s
        self.stats["token_recording_s"] = write_s
        self.tokenizer = tokenizer


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summarise(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values), 2) if values else 0.0,
        "p95_ms": round(percentile(values, 95), 2),
        "mean_ms": round(statistics.fmean(values), 2) if values else 0.0,
    }


# -------------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    rows = load_news(args.data_dir)
    sentences = [
        s.strip()
        for row in rows
        for s in _SENTENCE_RE.findall(str(row.get("text") or ""))
        if len(s.strip()) >= 6
    ]
    home = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    if args.keep and home.exists():
        shutil.rmtree(home)
    result: dict[str, Any] = {"target_chunks": args.chunks, "vectors": args.vectors}
    model, query_vectors = make_model(args.vectors)

    # Record the BM25 build time and the tokenised corpus (for the rank_bm25 baseline)
    # by substituting a timing subclass in the knowledge-base module's namespace.
    tokens_file = home.parent / f"{home.name}-tokens.txt"
    TimedBM25Index.record_to = tokens_file if args.baseline else None
    build = TimedBM25Index.stats
    kb_module.BM25Index = TimedBM25Index  # type: ignore[misc]
    try:
        kb = KnowledgeBase(
            KBConfig(home=home, collection="scale", chinese_tokenizer=args.tokenizer),
            embedding_model=model,
        )
        kb.batch_documents = args.batch_documents  # type: ignore[misc]
        result["ingest"] = ingest_corpus(kb, rows, sentences, rng, args)

        snap, result["bm25_build"] = build_snapshot(kb, home, model, args, build)

        queries = make_queries(sentences, rng, args.queries + args.warmup)
        for q in queries:
            query_vectors[q] = _unit("query:" + q, DIM)
        for q in queries[: args.warmup]:
            for mode in ("hybrid", "bm25", "vector"):
                kb.search(q, 10, mode=mode)
        measured = queries[args.warmup :]

        bm_times = measure_latency(kb, snap, measured, args, result)
        kb.close()
    finally:
        kb_module.BM25Index = BM25Index  # type: ignore[misc]

    if args.baseline and tokens_file.exists():
        result["rank_bm25_baseline"] = rank_bm25_baseline(
            tokens_file, snap, measured, bm_times, args
        )
    result["peak_rss_mb_end"] = round(peak_rss_mb(), 0)
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return result


def build_snapshot(
    kb: KnowledgeBase, home: Path, model: Any, args: argparse.Namespace, build: dict[str, float]
) -> tuple[Any, dict[str, Any]]:
    """The first snapshot (BM25 index built), then its reload from disk by a new instance."""
    t0 = time.perf_counter()
    snap = kb.snapshot()
    snapshot_s = time.perf_counter() - t0
    figures = {
        "first_snapshot_s": round(snapshot_s - build.get("token_recording_s", 0.0), 1),
        "bm25_index_s": round(build.get("bm25_index_s", 0.0), 1),
        "token_recording_overhead_s": round(build.get("token_recording_s", 0.0), 2),
        "chunks_indexed": len(snap.ids),
    }
    print(f"snapshot built in {snapshot_s:.0f} s", file=sys.stderr)

    kb2 = KnowledgeBase(
        KBConfig(home=home, collection="scale", chinese_tokenizer=args.tokenizer),
        embedding_model=model,
    )
    t0 = time.perf_counter()
    kb2.snapshot()
    figures["reload_from_disk_s"] = round(time.perf_counter() - t0, 2)
    kb2.close()
    del kb2
    return snap, figures


def ingest_corpus(
    kb: KnowledgeBase,
    rows: list[dict[str, Any]],
    sentences: list[str],
    rng: random.Random,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The news, then generated documents until ``args.chunks`` chunks are stored."""
    t0 = time.perf_counter()
    chunks = kb.ingest_documents(news_documents(rows)).chunks_written
    news_chunks = chunks
    generated = 0
    while chunks < args.chunks:
        # Each generated document is ~args.doc_chars characters (~9 chunks); ingest
        # in rounds sized from the chunks still missing.
        missing = args.chunks - chunks
        count = max(1, min(2000, int(missing / args.chunks_per_doc) + 1))
        batch = list(synthetic_documents(sentences, rng, generated, count, args.doc_chars))
        report = kb.ingest_documents(batch)
        generated += count
        chunks += report.chunks_written
        print(f"  ingested {chunks} chunks ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    ingest_s = time.perf_counter() - t0
    figures = {
        "news_documents": len(rows),
        "news_chunks": news_chunks,
        "generated_documents": generated,
        "chunks": chunks,
        "seconds": round(ingest_s, 1),
        "chunks_per_s": round(chunks / ingest_s, 1),
    }
    print(f"ingested {chunks} chunks in {ingest_s:.0f} s", file=sys.stderr)
    return figures


def measure_latency(
    kb: KnowledgeBase,
    snap: Any,
    measured: list[str],
    args: argparse.Namespace,
    result: dict[str, Any],
) -> list[float]:
    """Search latency per mode, profiled, then the inverted index alone (into ``result``);
    the index's own times, for the baseline."""
    prof = Profile()
    instrument(kb, prof)
    instrument_bm25(snap.bm25, prof)
    latency: dict[str, dict[str, float]] = {}
    profiles: dict[str, dict[str, dict[str, float]]] = {}
    for mode in ("hybrid", "bm25", "vector"):
        mode_t: SearchMode = mode  # type: ignore[assignment]
        times: list[float] = []
        prof.samples.clear()
        prof.active = True
        for q in measured:
            started = time.perf_counter()
            kb.search(q, args.k, mode=mode_t)
            times.append((time.perf_counter() - started) * 1000)
            prof.end_query()
        prof.active = False
        latency[mode] = summarise(times)
        profiles[mode] = {label: summarise(v) for label, v in sorted(prof.samples.items())}
    result["latency_excluding_query_embedding"] = latency
    result["profile"] = profiles
    result["queries"] = len(measured)
    result["k"] = args.k
    result["peak_rss_mb_after_kb"] = round(peak_rss_mb(), 0)

    # The project's inverted index alone, for the baseline comparison.
    bm_times = []
    for q in measured:
        started = time.perf_counter()
        snap.bm25.search(q, 40)
        bm_times.append((time.perf_counter() - started) * 1000)
    result["bm25index_search"] = summarise(bm_times)
    return bm_times


def rank_bm25_baseline(
    tokens_file: Path,
    snap: Any,
    measured: list[str],
    bm_times: list[float],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """rank-bm25's ``get_scores`` on the same tokenised corpus and queries."""
    from rank_bm25 import BM25Okapi

    tokenizer = snap.bm25.tokenizer
    with tokens_file.open(encoding="utf-8") as fh:
        corpus = [line.rstrip("\n").split("\x1f") for line in fh]
    t0 = time.perf_counter()
    okapi = BM25Okapi([c or ["\x00empty"] for c in corpus])
    build_s = time.perf_counter() - t0
    del corpus
    n = min(args.baseline_queries, len(measured))
    base_times = []
    for q in measured[:n]:
        toks = tokenizer(q)
        started = time.perf_counter()
        scores = okapi.get_scores(toks)
        np.argsort(-scores)[:40]
        base_times.append((time.perf_counter() - started) * 1000)
    figures = {
        "build_s": round(build_s, 1),
        "queries": n,
        **summarise(base_times),
        "speedup_p50_vs_bm25index": round(
            statistics.median(base_times) / max(1e-6, statistics.median(bm_times[:n])), 1
        ),
    }
    tokens_file.unlink(missing_ok=True)
    return figures


def print_report(r: dict[str, Any]) -> None:
    ing = r["ingest"]
    print(
        f"corpus: {ing['chunks']} chunks ({ing['news_documents']} news articles -> "
        f"{ing['news_chunks']} chunks, {ing['generated_documents']} generated documents); "
        f"vectors: {r['vectors']} dim {DIM}"
    )
    print(
        f"ingest: {ing['seconds']} s ({ing['chunks_per_s']} chunks/s, cheap embedder)   "
        f"peak RSS after KB work: {r['peak_rss_mb_after_kb']:.0f} MB"
    )
    b = r["bm25_build"]
    print(
        f"BM25 build: first snapshot {b['first_snapshot_s']} s (BM25Index {b['bm25_index_s']} s), "
        f"reload from disk {b['reload_from_disk_s']} s"
    )
    print(f"\nquery latency, k={r['k']}, {r['queries']} queries, excluding query embedding")
    print(f"{'mode':<8}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}")
    for mode, s in r["latency_excluding_query_embedding"].items():
        print(f"{mode:<8}{s['p50_ms']:>9.1f}{s['p95_ms']:>9.1f}{s['mean_ms']:>9.1f}")
    print("\nprofile of hybrid queries (per query, ms)")
    for label, s in r["profile"]["hybrid"].items():
        print(f"  {label:<36}{s['p50_ms']:>9.1f}{s['p95_ms']:>9.1f}{s['mean_ms']:>9.1f}")
    s = r["bm25index_search"]
    print(
        f"\nBM25Index.search (inverted index): p50 {s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms"
    )
    if "rank_bm25_baseline" in r:
        base = r["rank_bm25_baseline"]
        print(
            f"rank_bm25 BM25Okapi.get_scores: p50 {base['p50_ms']:.1f} ms, p95 {base['p95_ms']:.1f} ms "
            f"({base['queries']} queries; build {base['build_s']} s) -> "
            f"{base['speedup_p50_vs_bm25index']}x slower at p50"
        )
    print(f"peak RSS at the end: {r['peak_rss_mb_end']:.0f} MB")
    p95 = r["latency_excluding_query_embedding"]["hybrid"]["p95_ms"]
    verdict = "met" if p95 <= 50 else "MISSED"
    print(f"target hybrid p95 <= 50 ms: {verdict} ({p95:.1f} ms)")


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data=True)
    p.add_argument("--chunks", type=int, default=100_000, help="chunks to store (default 100k)")
    p.add_argument("--vectors", choices=("random", "hash"), default="random")
    p.add_argument("--tokenizer", choices=("jieba", "bigram"), default="jieba")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("-k", type=int, default=10, help="results per query (default 10)")
    p.add_argument("--doc-chars", type=int, default=2400, help="size of a generated document")
    p.add_argument("--chunks-per-doc", type=float, default=9.0, help="estimate, sizes the rounds")
    p.add_argument("--batch-documents", type=int, default=64)
    p.add_argument("--no-baseline", dest="baseline", action="store_false")
    p.add_argument("--baseline-queries", type=int, default=50)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--keep", default=None, help="data home to use and keep (default: temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = p.parse_args(argv)
    need(args.data_dir)
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    print_report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
