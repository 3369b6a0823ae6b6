"""Memory over many sequential runs in one process (leak check), offline.

Runs the state graph ``--runs`` times (default 1,000) and then the tool-calling agent
``--agent-runs`` times (default 300) in one process, on the sample KB (``examples/kb``,
ingested into a temp data home), with ``model=offline`` and ``search_provider=none``.
Questions rotate through a fixed English/Chinese list. RSS is sampled every ``--every``
runs (default 50) from ``/proc/self/statm`` after ``gc.collect()``; the growth between
run ``--from-run`` (default 200, after warm-up: jieba, the embedding model, the BM25
snapshot) and the last run is checked against ``--bound-mb`` (default 30 MB). At the end
the sizes of the project's in-process caches are printed, to show they are bounded.

Embeddings: ``--embedding local`` (default; the bundled USE model, as a real offline
deployment) or ``--embedding hash`` (the tests' deterministic hash embedder; faster).

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_memory
    .venv/bin/python -m bench.bench_memory --runs 300 --agent-runs 0 --embedding hash

Exit code 1 when a bound does not hold.
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import SAMPLE_KB, parser
from graph import Context, build_graph
from graph.agent.agent_graph import build_agent_graph
from run import models, resources
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.websearch import default_cache

QUESTIONS = (
    "How many days of annual leave does an employee with 6 years of service get?",
    "Can unused annual leave be carried over to next year?",
    "出差住宿费在一线城市的报销标准是多少？",
    "What is the hotel limit in tier-1 cities?",
    "Who approves a purchase above the procurement threshold?",
    "How do I report a severity one incident?",
    "NR200 porter maximum payload and battery runtime",
    "NR500 的额定载重是多少？",
    "What changed in the latest FleetCloud release?",
    "新员工入职第一天需要做什么？",
    "Where are the offices and how do I contact support?",
    "What is the capital of France?",
)
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def open_kb(home: Path, embedding: str) -> KnowledgeBase:
    if embedding == "hash":
        from tests.fakes import hash_model

        kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    else:
        kb = KnowledgeBase(KBConfig(home=home, embedding=embedding))
        if embedding != "local":
            raise SystemExit("--embedding: 'local' or 'hash' (the context resolves 'local')")
    kb.ingest([SAMPLE_KB])
    resources.register_kb(kb)  # the graphs' get_kb(ctx) finds this instance
    return kb


async def run_many(
    label: str, compiled: Any, ctx: Context, runs: int, every: int
) -> list[tuple[int, float]]:
    curve: list[tuple[int, float]] = []
    started = time.perf_counter()
    for n in range(1, runs + 1):
        out = await compiled.ainvoke({"question": QUESTIONS[n % len(QUESTIONS)]}, context=ctx)
        assert out["answer"], out
        if n % every == 0 or n == 1:
            gc.collect()
            curve.append((n, rss_mb()))
            rate = n / (time.perf_counter() - started)
            print(f"  {label} run {n:5d}: RSS {curve[-1][1]:8.1f} MB   ({rate:5.1f} runs/s)")
    return curve


def growth(curve: list[tuple[int, float]], from_run: int) -> tuple[float, int, int]:
    base = min((p for p in curve if p[0] >= from_run), key=lambda p: p[0], default=curve[0])
    last = curve[-1]
    return last[1] - base[1], base[0], last[0]


def cache_sizes(kb: KnowledgeBase) -> dict[str, Any]:
    search = default_cache().stats()
    emb_rows = kb._cache._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
    snap = kb._snapshot
    bm25_files = list((kb.home / "bm25").glob("*.pkl"))
    return {
        "web search cache entries (max 5000, TTL)": search.size,
        "embedding cache rows (SQLite, on disk)": emb_rows,
        "embedding cache hits/misses": f"{kb._cache.hits}/{kb._cache.misses}",
        "open knowledge bases (run.resources)": len(resources._kbs),
        "KB snapshots held in memory": sum(
            k._snapshot is not None for k in resources._kbs.values()
        ),
        "chunks in the held snapshot": len(snap.ids) if snap else 0,
        "BM25 snapshot files on disk": len(bm25_files),
        "registered custom chat models": len(models._custom),
        "built chat models": len(models._built),
        "runs.jsonl lines (on disk)": sum(1 for _ in (kb.home / "runs.jsonl").open())
        if (kb.home / "runs.jsonl").exists()
        else 0,
    }


async def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, default=1000, help="state-graph runs (default 1000)")
    ap.add_argument("--agent-runs", type=int, default=300, help="agent runs (default 300)")
    ap.add_argument("--every", type=int, default=50, help="sample RSS every N runs")
    ap.add_argument("--from-run", type=int, default=200, help="growth measured from this run")
    ap.add_argument("--bound-mb", type=float, default=30.0, help="allowed growth (MB)")
    ap.add_argument("--embedding", default="local", help="'local' (default), 'hash' or a spec")
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    os.environ["HYBRID_RAG_HOME"] = str(home)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LANGSMITH_TRACING", "LANGSMITH_API_KEY"):
        os.environ.pop(name, None)
    ok = True
    try:
        print(f"start: RSS {rss_mb():.1f} MB (python {sys.version.split()[0]}, pid {os.getpid()})")
        kb = open_kb(home, args.embedding)
        print(f"sample KB ingested with {kb.model.model_id}: {kb.stats()['chunks']} chunks")
        print(f"after ingest: RSS {rss_mb():.1f} MB")
        # The KB registered above is the one this context resolves to (same KBConfig).
        ctx = Context(model="offline", search_provider="none", data_home=str(home))
        results: list[tuple[str, float, int, int, float]] = []
        for label, builder, runs in (
            ("graph", build_graph, args.runs),
            ("agent", build_agent_graph, args.agent_runs),
        ):
            if runs <= 0:
                continue
            print(f"\n{label}: {runs} sequential runs")
            started = time.perf_counter()
            curve = await run_many(label, builder(), ctx, runs, args.every)
            secs = time.perf_counter() - started
            from_run = args.from_run if runs > args.from_run else max(1, runs // 5)
            grew, a, b = growth(curve, from_run)
            results.append((label, grew, a, b, secs))
        print("\nsummary")
        for label, grew, a, b, secs in results:
            holds = grew < args.bound_mb
            ok &= holds
            print(
                f"  {label}: RSS growth run {a} → {b}: {grew:+.1f} MB "
                f"(bound < {args.bound_mb:.0f} MB: {'holds' if holds else 'EXCEEDED'}); "
                f"{b / secs:.1f} runs/s"
            )
        print(f"  final RSS {rss_mb():.1f} MB, peak RSS {peak_mb():.1f} MB")
        print("\nin-process caches at the end")
        for key, value in cache_sizes(kb).items():
            print(f"  {key:<45} {value}")
    finally:
        resources.close_all()
        shutil.rmtree(home, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
