"""Upstream search calls of several processes: per-process caches vs the shared Redis cache.

Four processes replay the same Zipf-distributed query log (each with a few searches in
flight) against a local search provider on loopback that takes 300 ms per call. With
per-process caches every process pays for every distinct query; with the Redis layer
(``HYBRID_RAG_REDIS_URL``) the target is one upstream call per distinct query, however
many processes ask at the same time.

    .venv/bin/python -m bench.bench_shared_cache [--processes 4] [--queries 200] [--distinct 60]

Needs ``redis-server`` (Debian package) and redis-py (the ``[redis]`` extra).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import REPO, parser
from tests.local_provider import LocalServer, Reply
from tests.redis_server import RedisServer

WORKER = """
import asyncio, json, sys, time
from tools.websearch import WebSearchClient, WebSearchSettings
from tools.websearch.cache import cache_from_env

async def main(log, inflight):
    settings = WebSearchSettings.from_env(provider="serper")
    cache = cache_from_env()
    gate = asyncio.Semaphore(inflight)
    calls = 0
    async with WebSearchClient(settings, cache=cache) as client:
        async def one(q):
            nonlocal calls
            async with gate:
                r = await client.search(q, hl="en", gl="us")
                calls += r.calls
        started = time.perf_counter()
        await asyncio.gather(*(one(q) for q in log))
    print(json.dumps({"calls": calls, "seconds": time.perf_counter() - started}))

asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2])))
"""


def zipf_log(n: int, distinct: int, s: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1.0 / (rank**s) for rank in range(1, distinct + 1)]
    return [f"query number {i}" for i in rng.choices(range(distinct), weights=weights, k=n)]


def replay(
    log: list[str], processes: int, inflight: int, provider: LocalServer, redis_url: str | None
) -> dict[str, float]:
    before = len(provider.hits("/search"))
    env = {**os.environ, "SERPER_API_KEY": "bench-key", "SERPER_BASE_URL": provider.url,
           "PYTHONPATH": str(REPO), "HYBRID_RAG_REDIS_URL": redis_url or ""}  # fmt: skip
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(log), str(inflight)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    wall = time.perf_counter() - started
    for p, (_, err) in zip(procs, outs, strict=True):
        if p.returncode:
            raise SystemExit(f"worker failed:\n{err[-3000:]}")
    upstream = len(provider.hits("/search")) - before
    return {"upstream": upstream, "wall_s": wall}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--distinct", type=int, default=60)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--inflight", type=int, default=4, help="searches in flight per process")
    ap.add_argument("--latency", type=float, default=0.3, help="provider seconds per call")
    args = ap.parse_args()
    log = zipf_log(args.queries, args.distinct, args.zipf, seed=7)
    unique = len(set(log))
    body = {"organic": [{"title": "t", "link": "https://example.org/", "snippet": "s"}]}
    with (
        LocalServer() as provider,
        tempfile.TemporaryDirectory() as tmp,
        RedisServer(Path(tmp) / "redis") as redis_server,
    ):
        provider.route("/search", Reply(body, delay=args.latency))
        local = replay(log, args.processes, args.inflight, provider, None)
        shared = replay(log, args.processes, args.inflight, provider, redis_server.url)
    print(
        f"{args.processes} processes x {args.queries} queries (Zipf s={args.zipf}, "
        f"{unique} distinct keys), {args.inflight} in flight each, provider {args.latency * 1000:.0f} ms"
    )
    print("| cache | upstream calls | calls / distinct key | wall (s) |")
    print("|---|---|---|---|")
    for name, r in (("per-process (in-memory)", local), ("shared (Redis)", shared)):
        print(
            f"| {name} | {r['upstream']:.0f} | {r['upstream'] / unique:.2f} | {r['wall_s']:.1f} |"
        )


if __name__ == "__main__":
    main()
