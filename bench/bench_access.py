"""What per-user access control costs a search: quality and latency (run on demand).

Each dev set's corpus is indexed with a synthetic access list: every document gets one
of ``--groups`` groups (a hash of its doc_id), and ``--public`` of them none (readable by
all). Each judged query is searched as a reader of one group, that of its first judged
document (so the answer is readable), three ways:

* ``filtered``: the product (``reader=``): Chroma's query and BM25's candidates skip what
  the reader may not read, before ranking;
* ``post-filter``: the shortcut the filter avoids: search everything, then drop what the
  reader may not read from the top 30;
* ``everyone``: no access control (the reference latency; its quality counts documents
  the reader may not see, so it is not comparable).

Printed per set: nDCG@10, Recall@10 of the judged documents the reader may read, the
share of queries whose filtered top 10 holds a document the reader may not read (must be
0), and p50/p95 search latency with the query already embedded (the filter's own cost;
a first search adds the embedding, ~30 ms with e5 on two cores). Collections ``acl-<set>-<embedding>`` are kept in
``--home`` (the embedding cache there makes a rerun cheap).

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_access --home /work/bench-home
    .venv/bin/python -m bench.bench_access --sets scifact,cmrc --max-queries 100
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench.harness import parser
from tools.access.acl import Reader, acl_metadata
from tools.evaluation.datasets import (
    DEV_SETS,
    BeirData,
    ndcg_at,
    percentile,
    recall_at,
    to_documents,
)
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

POOL = 30  # what the post-filter shortcut searches before dropping


def group_of(doc_id: str, groups: int, public: float) -> str | None:
    """The synthetic group of a document (None: public), stable across runs."""
    h = int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16)
    if (h % 1000) / 1000 < public:
        return None
    return f"g{(h // 1000) % groups}"


def index(data: BeirData, name: str, args: argparse.Namespace) -> KnowledgeBase:
    tag = args.embedding.replace(":", "-")
    kb = KnowledgeBase(
        KBConfig(home=args.home, collection=f"acl-{name}-{tag}", embedding=args.embedding)
    )
    docs = [replace(doc, acl=_acl(doc.doc_id, args)) for doc in to_documents(data)]
    report = kb.ingest_documents(docs)
    print(f"{name}: {report.summary()}", file=sys.stderr)
    return kb


def measure(kb: KnowledgeBase, data: BeirData, args: argparse.Namespace) -> dict[str, float]:
    rows: dict[str, list[float]] = {k: [] for k in ("f_ndcg", "f_rec", "p_ndcg", "p_rec")}
    lat: dict[str, list[float]] = {"filtered": [], "everyone": []}
    leaks = 0
    qids = sorted(data.qrels)[: args.max_queries or None]
    for qid in qids:
        gold = data.qrels[qid]
        group = group_of(sorted(gold)[0], args.groups, args.public) or "g0"
        reader = Reader.of("bench", [group])
        readable = {d: g for d, g in gold.items() if reader.may_read(acl_metadata(_acl(d, args)))}
        query = data.queries[qid]
        kb.forget_queries()
        kb.pipeline.candidate_pool(query, n=1)  # the query's embedding, outside both timings
        timed = {}
        # Alternating order: neither search always runs second (warmer caches).
        for mode in (
            ("filtered", "everyone") if len(lat["filtered"]) % 2 else ("everyone", "filtered")
        ):
            started = time.perf_counter()
            timed[mode] = kb.search(
                query,
                10 if mode == "filtered" else POOL,
                reader=reader if mode == "filtered" else None,
            )
            lat[mode].append((time.perf_counter() - started) * 1000)
        filtered, everything = timed["filtered"], timed["everyone"]
        post = [h for h in everything if reader.may_read(h.metadata)][:10]
        leaks += any(not reader.may_read(h.metadata) for h in filtered)
        f_ids = list(dict.fromkeys(h.doc_id for h in filtered))
        p_ids = list(dict.fromkeys(h.doc_id for h in post))
        rows["f_ndcg"].append(ndcg_at(f_ids, readable, 10))
        rows["f_rec"].append(recall_at(f_ids, readable, 10))
        rows["p_ndcg"].append(ndcg_at(p_ids, readable, 10))
        rows["p_rec"].append(recall_at(p_ids, readable, 10))
    n = len(qids)
    out = {k: sum(v) / n for k, v in rows.items()}
    out |= {"queries": n, "leaks": leaks / n}
    for mode, values in lat.items():
        out[f"{mode}_p50"] = percentile(values, 50)
        out[f"{mode}_p95"] = percentile(values, 95)
    return out


def _acl(doc_id: str, args: argparse.Namespace) -> tuple[str, ...]:
    group = group_of(doc_id, args.groups, args.public)
    return (f"group:{group}",) if group else ()


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data=True)
    p.add_argument("--sets", default=",".join(DEV_SETS), help="comma list of dev sets")
    p.add_argument("--home", type=Path, default=None, help="data home (collections, cache)")
    p.add_argument("--embedding", default="local:e5")
    p.add_argument("--groups", type=int, default=8, help="synthetic groups (default 8)")
    p.add_argument("--public", type=float, default=0.2, help="share of public documents")
    p.add_argument("--max-queries", type=int, default=None)
    args = p.parse_args(argv)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in names if s not in DEV_SETS]
    if unknown:
        p.error(f"unknown set(s) {unknown}; choose from {sorted(DEV_SETS)}")
    if not args.data_dir.exists():
        p.error(f"no data at {args.data_dir} (--data-dir)")
    print(
        f"{args.groups} groups, {args.public:.0%} public; reader = the first judged "
        f"document's group; {args.embedding}"
    )
    header = (
        f"{'set':<11}{'queries':>8}{'nDCG@10 filt':>14}{'post':>7}{'R@10 filt':>11}"
        f"{'post':>7}{'leaks':>7}{'p50 ms filt':>13}{'all':>7}{'p95 filt':>10}{'all':>7}"
    )
    print(header)
    for name in names:
        data = DEV_SETS[name](args.data_dir)
        with index(data, name, args) as kb:
            r = measure(kb, data, args)
        print(
            f"{name:<11}{r['queries']:>8.0f}{r['f_ndcg']:>14.3f}{r['p_ndcg']:>7.3f}"
            f"{r['f_rec']:>11.3f}{r['p_rec']:>7.3f}{r['leaks']:>7.3f}"
            f"{r['filtered_p50']:>13.1f}{r['everyone_p50']:>7.1f}"
            f"{r['filtered_p95']:>10.1f}{r['everyone_p95']:>7.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
