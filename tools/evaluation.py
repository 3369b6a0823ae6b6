"""Retrieval evaluation on BEIR-layout data.

Layout: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and qrels in ``qrels/<split>.tsv`` or ``qrels.tsv``
(``query-id``, ``corpus-id``, ``score``, with a header). Metrics are computed at
document level: the ranked chunks are mapped to their documents, keeping each
document's first (best) position.
"""

from __future__ import annotations

import json
import math
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools.errors import InputError
from tools.knowledge_base import SEARCH_MODES, KBConfig, KnowledgeBase, SearchMode
from tools.loaders import SourceDocument, content_hash
from tools.rerank import Reranker, rerank_chunks


@dataclass(frozen=True)
class BeirData:
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: grade}


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Objects of a JSON-lines file; a missing file or a bad line is an ``InputError``."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{n}: invalid JSON ({exc.msg})") from exc


def find_qrels(data_dir: Path, split: str | None) -> Path:
    candidates = (
        [data_dir / "qrels" / f"{split}.tsv"]
        if split
        else [*sorted((data_dir / "qrels").glob("*.tsv")), data_dir / "qrels.tsv"]
    )
    for c in candidates:
        if c.exists():
            return c
    raise InputError(
        f"no qrels in {data_dir}: expected qrels/{split or '<split>'}.tsv or qrels.tsv"
    )


def load_beir(data_dir: str | Path, split: str | None = None) -> BeirData:
    root = Path(data_dir)
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).exists():
            raise InputError(f"{root / name} does not exist (expected BEIR layout)")
    qrels: dict[str, dict[str, int]] = {}
    with find_qrels(root, split).open(encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0] in ("query-id", "query_id", "qid"):
                continue
            try:
                grade = int(float(parts[2]))
            except ValueError:
                continue
            if grade > 0:
                qrels.setdefault(parts[0], {})[parts[1]] = grade
    corpus = {
        str(r["_id"]): (str(r.get("title") or ""), str(r.get("text") or ""))
        for r in read_jsonl(root / "corpus.jsonl")
    }
    queries = {
        str(r["_id"]): str(r["text"]) for r in read_jsonl(root / "queries.jsonl") if r.get("text")
    }
    qrels = {q: rel for q, rel in qrels.items() if q in queries}
    return BeirData(corpus=corpus, queries=queries, qrels=qrels)


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if d in relevant:
            return 1.0 / (i + 1)
    return 0.0


def hit_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, math.ceil(pct / 100 * len(ordered)) - 1))
    return ordered[idx]


def score_run(
    rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], latencies_ms: Sequence[float]
) -> dict[str, float]:
    n = len(rankings)

    def mean(fn: Callable[[Sequence[str], dict[str, int], int], float], k: int) -> float:
        return sum(fn(rankings[q], qrels[q], k) for q in rankings) / n if n else 0.0

    return {
        "ndcg@10": mean(ndcg_at, 10),
        "recall@5": mean(recall_at, 5),
        "recall@10": mean(recall_at, 10),
        "mrr@10": mean(mrr_at, 10),
        "hit@5": mean(hit_at, 5),
        "queries": float(n),
        "p50_ms": statistics.median(latencies_ms) if latencies_ms else 0.0,
        "p95_ms": percentile(latencies_ms, 95),
    }


def to_documents(data: BeirData) -> list[SourceDocument]:
    docs = []
    for doc_id, (title, text) in data.corpus.items():
        body = f"# {title}\n\n{text}" if title else text
        if body.strip():
            docs.append(
                SourceDocument(
                    doc_id=doc_id,
                    source=f"beir:{doc_id}",
                    text=body,
                    content_hash=content_hash(body),
                    is_markdown=bool(title),
                )
            )
    return docs


def evaluate_retrieval(
    data: BeirData,
    *,
    modes: Sequence[SearchMode] = SEARCH_MODES,
    config: KBConfig | None = None,
    kb: KnowledgeBase | None = None,
    max_queries: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    reranker: Reranker | None = None,
    rerank_top_n: int = 30,
) -> dict[str, dict[str, float]]:
    """Index ``data`` into a throw-away collection and score each mode."""
    if not data.qrels:
        raise InputError("no queries have relevance judgements (qrels)")
    owned = kb is None
    if kb is None:
        # A throw-away collection in the normal data home: the embedding cache there
        # is shared, so a second run of the same corpus does not embed again.
        base = config or KBConfig()
        kb = KnowledgeBase(replace(base, collection=f"eval-{uuid.uuid4().hex[:12]}"))
    try:
        kb.ingest_documents(to_documents(data), progress=progress)
        query_ids = sorted(data.qrels)[: max_queries or None]
        results: dict[str, dict[str, float]] = {}
        for mode in modes:
            rankings: dict[str, list[str]] = {}
            latencies: list[float] = []
            for qid in query_ids:
                started = time.perf_counter()
                hits = kb.search(data.queries[qid], 30, mode=mode)
                if reranker is not None:
                    hits = rerank_chunks(data.queries[qid], hits, reranker, rerank_top_n)
                latencies.append((time.perf_counter() - started) * 1000)
                rankings[qid] = list(dict.fromkeys(h.doc_id for h in hits))
            results[mode] = score_run(rankings, data.qrels, latencies)
        return results
    finally:
        if owned:
            kb.drop()
            kb.close()
