"""Benchmark the web-search cache on a Zipf-distributed replay of real questions.

Questions come from FreshQA (``freshqa/freshqa_dev.jsonl``, field ``question``)
and RealTimeQA (``realtimeqa/gcs/*_qa.jsonl``, field ``question_sentence``).
A local HTTP server plays a Serper-shaped provider with ~150 ms latency; the
real client, cache and single-flight code paths are exercised end to end.

    .venv/bin/python -m bench.bench_websearch_cache [--data-dir DIR] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import parser
from tests.local_provider import LocalServer, Reply
from tools.websearch import (
    SearchCache,
    WebSearchClient,
    WebSearchSettings,
    build_params,
    cache_key,
)


def load_questions(data_dir: Path) -> list[str]:
    files = [data_dir / "freshqa" / "freshqa_dev.jsonl"]
    files += sorted((data_dir / "realtimeqa" / "gcs").glob("*_qa.jsonl"))
    questions: list[str] = []
    for path in files:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                q = row.get("question") or row.get("question_sentence")
                if isinstance(q, str) and q.strip():
                    questions.append(q.strip())
    return list(dict.fromkeys(questions))


def provider(latency: float, jitter: float, seed: int) -> LocalServer:
    """A Serper-shaped search API on loopback (``tests.local_provider``): ten results per
    query after ``latency`` ± ``jitter`` seconds; ``hits("/search")`` counts the calls."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def answer(body: Any) -> dict[str, Any]:
        with lock:
            delay = max(0.0, latency + rng.uniform(-jitter, jitter))
        time.sleep(delay)
        q = str((body or {}).get("q", ""))
        organic = [
            {"title": f"{q} #{i}", "link": f"https://example.org/{abs(hash(q)) % 10**8}/{i}",
             "snippet": f"Result {i} for {q}", "position": i}
            for i in range(1, 11)
        ]  # fmt: skip
        return {"organic": organic}

    server = LocalServer()
    server.route("/search", Reply(respond=answer))
    return server


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def lookup_latencies(cache: SearchCache, workload: list[str]) -> tuple[list[float], list[float]]:
    """Lookup latency of a warm cache in microseconds: the locked get alone, and with the
    key hashed too (the first 500 queries)."""
    keys = [cache_key("serper", build_params(q, hl="en", gl="us")) for q in workload]
    lookups = []
    for key in keys:
        start = time.perf_counter_ns()
        cache.get(key)
        lookups.append((time.perf_counter_ns() - start) / 1000)
    key_and_lookup = []
    for q in workload[:500]:
        start = time.perf_counter_ns()
        cache.get(cache_key("serper", build_params(q, hl="en", gl="us")))
        key_and_lookup.append((time.perf_counter_ns() - start) / 1000)
    return lookups, key_and_lookup


async def run(args: argparse.Namespace, questions: list[str]) -> dict[str, Any]:
    rng = random.Random(args.seed)
    order = questions[:]
    rng.shuffle(order)  # popularity rank independent of file order
    weights = [1.0 / (k**args.zipf_s) for k in range(1, len(order) + 1)]
    workload = rng.choices(order, weights=weights, k=args.requests)

    with provider(args.latency, args.jitter, args.seed) as server:
        settings = WebSearchSettings(
            provider="serper", api_keys={"serper": "bench-key"}, base_urls={"serper": server.url}
        )
        cache = SearchCache()
        sem = asyncio.Semaphore(args.concurrency)
        async with WebSearchClient(settings, cache=cache) as client:

            async def one(q: str) -> None:
                async with sem:
                    await client.search(q, hl="en", gl="us")

            t0 = time.perf_counter()
            await asyncio.gather(*(one(q) for q in workload))
            elapsed = time.perf_counter() - t0
            upstream = len(server.hits("/search"))
            stats = cache.stats()

            lookups, key_and_lookup = lookup_latencies(cache, workload)

            # Single-flight: N concurrent identical uncached requests.
            before = len(server.hits("/search"))
            await asyncio.gather(
                *(client.search("single flight probe", hl="en", gl="us") for _ in range(args.sf))
            )
            sf_calls = len(server.hits("/search")) - before
    return {
        "requests": args.requests,
        "unique_questions": len(questions),
        "distinct_in_workload": len(set(workload)),
        "upstream_calls": upstream,
        "saved_pct": 100.0 * (1 - upstream / args.requests),
        "hit_rate": stats.hit_rate,
        "hits": stats.hits,
        "coalesced": stats.coalesced,
        "cost_saved": stats.cost_saved,
        "elapsed_s": elapsed,
        "lookup_p50_us": statistics.median(lookups),
        "lookup_p95_us": _pct(lookups, 0.95),
        "keyed_lookup_p50_us": statistics.median(key_and_lookup),
        "keyed_lookup_p95_us": _pct(key_and_lookup, 0.95),
        "single_flight_n": args.sf,
        "single_flight_upstream": sf_calls,
    }


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--zipf-s", type=float, default=1.1)
    ap.add_argument("--latency", type=float, default=0.150)
    ap.add_argument("--jitter", type=float, default=0.050)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--sf", type=int, default=100, help="concurrent identical requests")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    questions = load_questions(args.data_dir)
    if not questions:
        print(
            f"no questions found under {args.data_dir} (expected freshqa/freshqa_dev.jsonl "
            "or realtimeqa/gcs/*_qa.jsonl); pass --data-dir",
            file=sys.stderr,
        )
        return 2
    r = asyncio.run(run(args, questions))
    rows = [
        (f"requests (Zipf s={args.zipf_s:.2f})", f"{r['requests']}"),
        ("unique questions / seen", f"{r['unique_questions']} / {r['distinct_in_workload']}"),
        ("upstream calls", f"{r['upstream_calls']}"),
        ("upstream calls saved", f"{r['saved_pct']:.1f} %"),
        ("hit rate (hits + coalesced)", f"{100 * r['hit_rate']:.1f} % "
                                        f"({r['hits']} + {r['coalesced']})"),
        ("estimated cost saved", f"${r['cost_saved']:.3f}"),
        ("wall time", f"{r['elapsed_s']:.2f} s"),
        ("lookup p50 / p95", f"{r['lookup_p50_us']:.1f} / {r['lookup_p95_us']:.1f} µs"),
        ("key+lookup p50 / p95", f"{r['keyed_lookup_p50_us']:.1f} / "
                                 f"{r['keyed_lookup_p95_us']:.1f} µs"),
        (f"single-flight ({r['single_flight_n']} identical)",
         f"{r['single_flight_upstream']} upstream call(s)"),
    ]  # fmt: skip
    width = max(len(k) for k, _ in rows)
    print(f"{'metric':<{width}} | value")
    print(f"{'-' * width}-+-{'-' * 28}")
    for k, v in rows:
        print(f"{k:<{width}} | {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
