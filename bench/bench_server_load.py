"""Load on a local ``langgraph dev`` server: N concurrent runs through langgraph-sdk.

Starts the server exactly as ``tests/test_server.py`` does (offline: no model or search
keys, ``HYBRID_RAG_HOME`` in a temp dir holding the ingested sample KB, local embeddings),
warms it with one run, then fires ``--runs`` runs at once (each on its own new thread,
``runs.wait``) and reports client-side latency percentiles and throughput. Every run
must succeed (an answer with citations and no error), or the script exits 1.

    .venv/bin/python -m bench.bench_server_load [--runs 50] [--jobs 10] [--graph hybrid_rag]

``--jobs`` is ``langgraph dev --n-jobs-per-worker`` (runs executed concurrently by the
server; its default is 1, which serialises everything).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

from bench.harness import parser
from tests.langgraph_server import (
    ingest_sample_kb,
    start_server,
    stop_server,
    wait_until_ready,
)

QUESTIONS = (
    "How many days of annual leave after 6 years of service?",
    "What is the rated payload of the Porter robot?",
    "满3年不满5年的员工有多少天年假？",
    "出差住宿费在一线城市的报销标准是多少？",
    "What is the response target for a P1 critical incident?",
)
CONTEXT = {"search_provider": "none"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def one_run(client: Any, graph: str, question: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"], graph, input={"question": question}, context=CONTEXT
    )
    return time.perf_counter() - started, out if isinstance(out, dict) else {"error": out}


async def load(url: str, graph: str, runs: int) -> int:
    client = get_client(url=url, timeout=600)
    warm_s, warm = await one_run(client, graph, QUESTIONS[0])  # opens the KB, loads the model
    if not warm.get("answer"):
        print(f"warm-up run failed: {warm}")
        return 1
    print(f"warm-up run: {warm_s:.2f} s")
    started = time.perf_counter()
    results = await asyncio.gather(
        *(one_run(client, graph, QUESTIONS[i % len(QUESTIONS)]) for i in range(runs)),
        return_exceptions=True,
    )
    wall = time.perf_counter() - started
    latencies: list[float] = []
    failures: list[str] = []
    for result in results:
        if isinstance(result, BaseException):
            failures.append(f"{type(result).__name__}: {result}")
            continue
        seconds, out = result
        if out.get("error") or not out.get("answer") or not out.get("citations"):
            failures.append(str(out)[:300])
        else:
            latencies.append(seconds)
    print(f"graph={graph} runs={runs} succeeded={len(latencies)} failed={len(failures)}")
    if latencies:
        print(
            f"latency p50={percentile(latencies, 0.5):.2f} s  p95={percentile(latencies, 0.95):.2f} s"
            f"  mean={statistics.mean(latencies):.2f} s  max={max(latencies):.2f} s"
        )
        print(f"wall={wall:.2f} s  throughput={len(latencies) / wall:.2f} runs/s")
    for failure in failures[:5]:
        print(f"FAILED: {failure}")
    return 0 if not failures else 1


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=10, help="--n-jobs-per-worker")
    ap.add_argument("--graph", default="hybrid_rag", choices=["hybrid_rag", "tool_agent"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hybrid-rag-load-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        server = start_server(home, Path(tmp) / "langgraph-dev.log", jobs=args.jobs)
        try:
            print(f"ingest: {ingest_sample_kb(home)}")
            print(f"server ready in {wait_until_ready(server):.1f} s at {server.url}")
            return asyncio.run(load(server.url, args.graph, args.runs))
        except Exception:
            print(server.log_tail())
            raise
        finally:
            stop_server(server)


if __name__ == "__main__":
    raise SystemExit(main())
