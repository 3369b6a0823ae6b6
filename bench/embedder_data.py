"""The data of ``bench/bench_embedders.py``: seeded subsets of the dev sets and nDCG@10."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


# ----------------------------------------------------------------------------- data
@dataclass
class Subset:
    name: str
    queries: dict[str, str]
    corpus: dict[str, str]
    qrels: dict[str, dict[str, int]]


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) >= 3 and int(parts[2]) > 0:
                out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return out


def load_subset(
    name: str,
    root: Path,
    qrels_file: str,
    n_queries: int,
    corpus_size: int,
    max_chars: int,
    seed: int,
) -> Subset:
    docs = read_jsonl(root / "corpus.jsonl")
    text = {
        d["_id"]: ((d.get("title") or "").strip() + " " + d["text"]).strip()[:max_chars]
        for d in docs
    }
    queries = {q["_id"]: q["text"] for q in read_jsonl(root / "queries.jsonl")}
    qrels = {
        q: {d: s for d, s in rel.items() if d in text}
        for q, rel in _read_qrels(root / qrels_file).items()
        if q in queries
    }
    qrels = {q: r for q, r in qrels.items() if r}
    rng = random.Random(seed)
    qids = sorted(qrels)
    rng.shuffle(qids)
    qids = sorted(qids[:n_queries])
    chosen = {d for q in qids for d in qrels[q]}
    others = sorted(set(text) - chosen)
    rng.shuffle(others)
    chosen |= set(others[: max(0, corpus_size - len(chosen))])
    return Subset(
        name,
        {q: queries[q] for q in qids},
        {d: text[d] for d in sorted(chosen)},
        {q: qrels[q] for q in qids},
    )


SETS = {
    "en": ("beir_scifact", "qrels/train.tsv"),
    "zh": ("rgb/derived_retrieval/zh_refine", "qrels.tsv"),
    "cmrc": ("cmrc2018_retrieval", "qrels/trial.tsv"),
}


# -------------------------------------------------------------------------- metrics
def ndcg_at_k(ranked: Sequence[str], rel: dict[str, int], k: int = 10) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0
