"""Concurrent runs spread over several replicas that share one Chroma server.

The topology of docs/DEPLOYMENT.md on one machine, offline (no model, no web search):
one ``chroma run`` server holds the knowledge base (the sample KB, ingested through the
``hybrid-rag`` CLI with ``CHROMA_HOST``/``CHROMA_PORT``), and ``--replicas`` ``langgraph dev``
servers, each with its own empty data home, read it through the same two variables. Each
replica is warmed with one run (opens the KB, loads the embedding model); then ``--runs``
runs start at once, run ``i`` on replica ``i mod N``, each on a new thread (``runs.wait``).
Every run must answer with an internal citation and no knowledge-base warning, or the
script exits 1. Prints p50/p95 overall and per replica, and the throughput.

    .venv/bin/python -m bench.bench_replicas [--runs 50] [--replicas 2] [--jobs 10] \\
        [--omp-threads 1] [--home DIR] [--json FILE]

``--jobs`` is each replica's ``--n-jobs-per-worker``. ``--omp-threads`` is each replica's
``OMP_NUM_THREADS`` (the embedding engine's threads): 1 so that two replicas on two cores
do not fight over them. ``--home DIR`` keeps the CLI's embedding cache between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

from bench.harness import parser
from tests.langgraph_server import (
    SAMPLE_KB,
    LocalServer,
    server_env,
    start_server,
    stop_server,
    wait_until_ready,
)
from tests.servers import ChromaServer, chroma_executable

CLI = Path(sys.executable).parent / "hybrid-rag"
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


def summary(latencies: list[float]) -> dict[str, float]:
    return {
        "p50_s": round(percentile(latencies, 0.5), 2),
        "p95_s": round(percentile(latencies, 0.95), 2),
        "mean_s": round(statistics.mean(latencies), 2),
        "max_s": round(max(latencies), 2),
    }


def problem(out: Any) -> str | None:
    """Why a run's output is not a success, or None."""
    if not isinstance(out, dict) or out.get("error") or not out.get("answer"):
        return str(out)[:300]
    if not any(c.get("type") == "internal" for c in out.get("citations") or []):
        return f"no internal citation: {out.get('answer', '')[:200]}"
    bad = [w for w in out.get("warnings") or [] if "knowledge base unavailable" in w]
    return f"warnings: {bad}" if bad else None


async def one_run(url: str, question: str) -> tuple[float, Any]:
    client = get_client(url=url, timeout=900)
    started = time.perf_counter()
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"], "hybrid_rag", input={"question": question}, context=CONTEXT
    )
    return time.perf_counter() - started, out


async def load(replicas: list[LocalServer], runs: int) -> dict[str, Any]:
    for i, replica in enumerate(replicas):
        warm_s, warm = await one_run(replica.url, QUESTIONS[0])
        if problem(warm):
            raise RuntimeError(f"warm-up run on replica {i} failed: {problem(warm)}")
        print(f"replica {i} ({replica.url}) warm-up run: {warm_s:.2f} s")
    started = time.perf_counter()
    targets = [i % len(replicas) for i in range(runs)]
    results = await asyncio.gather(
        *(one_run(replicas[t].url, QUESTIONS[i % len(QUESTIONS)]) for i, t in enumerate(targets)),
        return_exceptions=True,
    )
    wall = time.perf_counter() - started
    per_replica: list[list[float]] = [[] for _ in replicas]
    failures: list[str] = []
    for target, result in zip(targets, results, strict=True):
        if isinstance(result, BaseException):
            failures.append(f"replica {target}: {type(result).__name__}: {result}")
            continue
        seconds, out = result
        why = problem(out)
        if why:
            failures.append(f"replica {target}: {why}")
        else:
            per_replica[target].append(seconds)
    latencies = [s for values in per_replica for s in values]
    figures: dict[str, Any] = {
        "runs": runs,
        "replicas": len(replicas),
        "succeeded": len(latencies),
        "failed": len(failures),
        "wall_s": round(wall, 2),
        "throughput_runs_per_s": round(len(latencies) / wall, 2),
        "failures": failures[:5],
    }
    if latencies:
        figures["overall"] = summary(latencies)
        figures["per_replica"] = [summary(v) | {"runs": len(v)} for v in per_replica if v]
    return figures


def report(figures: dict[str, Any]) -> None:
    print(
        f"runs={figures['runs']} replicas={figures['replicas']} "
        f"succeeded={figures['succeeded']} failed={figures['failed']}"
    )
    if "overall" in figures:
        rows = [("all", figures["overall"] | {"runs": figures["succeeded"]})]
        rows += [(f"replica {i}", r) for i, r in enumerate(figures["per_replica"])]
        print("| | runs | p50 | p95 | mean | max |")
        print("|---|---|---|---|---|---|")
        for name, r in rows:
            print(
                f"| {name} | {r['runs']} | {r['p50_s']:.2f} s | {r['p95_s']:.2f} s "
                f"| {r['mean_s']:.2f} s | {r['max_s']:.2f} s |"
            )
        print(
            f"wall={figures['wall_s']:.2f} s  throughput={figures['throughput_runs_per_s']} runs/s"
        )
    for failure in figures["failures"]:
        print(f"FAILED: {failure}")


def arguments() -> argparse.Namespace:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=10, help="--n-jobs-per-worker per replica")
    ap.add_argument("--omp-threads", type=int, default=1, help="OMP_NUM_THREADS per replica")
    ap.add_argument("--home", type=Path, default=None, help="the CLI's data home (cache)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    return ap.parse_args()


def main() -> int:
    args = arguments()
    exe = chroma_executable()
    if exe is None or not CLI.exists():
        print("needs the chroma executable and the hybrid-rag CLI: make install-dev")
        return 2
    with tempfile.TemporaryDirectory(prefix="hybrid-rag-replicas-") as tmp:
        base = Path(tmp)
        chroma = ChromaServer(exe, base / "chroma")
        (base / "chroma").mkdir()
        replicas: list[LocalServer] = []
        try:
            chroma.start()
            print(f"chroma run at {chroma.host}:{chroma.port}")
            env = {
                "CHROMA_HOST": chroma.host,
                "CHROMA_PORT": str(chroma.port),
                "OMP_NUM_THREADS": str(args.omp_threads),
            }
            for i in range(args.replicas):
                home = base / f"home-{i}"
                home.mkdir()
                replicas.append(
                    start_server(home, base / f"replica-{i}.log", jobs=args.jobs, env=env)
                )
            cli_home = args.home or base / "cli-home"
            started = time.perf_counter()
            ingest = subprocess.run(
                [str(CLI), "--home", str(cli_home), "ingest", str(SAMPLE_KB)],
                env=server_env(cli_home, {k: v for k, v in env.items() if k != "OMP_NUM_THREADS"}),
                capture_output=True,
                text=True,
                check=True,
            )
            done = [line for line in ingest.stdout.splitlines() if " added, " in line]
            print(
                f"CLI ingest into the Chroma server: {done[-1].strip() if done else '?'} "
                f"({time.perf_counter() - started:.1f} s)"
            )
            for replica in replicas:
                wait_until_ready(replica)
            figures = asyncio.run(load(replicas, args.runs))
        except Exception:
            for i, replica in enumerate(replicas):
                print(f"--- replica {i} log ---\n{replica.log_tail()}")
            raise
        finally:
            for replica in replicas:
                stop_server(replica)
            chroma.stop()
    figures |= {"jobs_per_replica": args.jobs, "omp_threads_per_replica": args.omp_threads}
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["failed"] == 0 and figures["succeeded"] == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
