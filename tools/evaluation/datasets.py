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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools.errors import InputError
from tools.kb.ingest.loaders import SourceDocument, content_hash
from tools.kb.knowledge_base import SEARCH_MODES, KBConfig, KnowledgeBase, Retrieval, SearchMode
from tools.kb.search.answerability import EvidenceFeatures
from tools.kb.search.rerankers import Reranker, rerank_chunks


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


REALTIMEQA_DOC_CHARS = 1500


def load_realtimeqa(data_dir: str | Path, *, doc_chars: int = REALTIMEQA_DOC_CHARS) -> BeirData:
    """RealTime QA's frozen search results (``gcs/*_qa.jsonl`` + ``*_gcs.jsonl``) as a
    retrieval set: every search result is a document (its first ``doc_chars``
    characters: news pages are long), each question a query, and a result is relevant
    when it contains the correct choice. Questions no result answers are left out.
    """
    root = Path(data_dir)
    folder = root / "gcs" if (root / "gcs").is_dir() else root
    qa_files = sorted(folder.glob("*_qa.jsonl"))
    if not qa_files:
        raise InputError(f"no *_qa.jsonl files in {folder} (expected RealTime QA's gcs folder)")
    corpus: dict[str, tuple[str, str]] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for qa_file in qa_files:
        results = {
            str(r["question_id"]): list(r.get("search_result") or [])
            for r in read_jsonl(qa_file.with_name(qa_file.name.replace("_qa.", "_gcs.")))
        }
        for row in read_jsonl(qa_file):
            qid = str(row["question_id"])
            choices = list(row.get("choices") or [])
            try:
                answers = [str(choices[int(a)]).casefold() for a in row.get("answer") or []]
            except (ValueError, IndexError):
                continue
            for n, res in enumerate(results.get(qid, [])):
                doc_id = f"{qid}:{n}"
                text = str(res.get("text") or "")[:doc_chars]
                corpus[doc_id] = (str(res.get("title") or ""), text)
                body = f"{res.get('title') or ''} {text}".casefold()
                if answers and any(a and a in body for a in answers):
                    qrels.setdefault(qid, {})[doc_id] = 1
            if qid in qrels:
                queries[qid] = str(row.get("question_sentence") or "")
    return BeirData(corpus=corpus, queries=queries, qrels=qrels)


def load_dataset(data_dir: str | Path, split: str | None = None) -> BeirData:
    """A BEIR folder, or RealTime QA's frozen results (``load_realtimeqa``) when the
    folder has ``*_qa.jsonl`` files (in it or in ``gcs/``) and no ``corpus.jsonl``."""
    root = Path(data_dir)
    folder = root / "gcs" if (root / "gcs").is_dir() else root
    if not (root / "corpus.jsonl").exists() and any(folder.glob("*_qa.jsonl")):
        return load_realtimeqa(root)
    return load_beir(root, split)


# The four retrieval dev sets every evidence benchmark reads (SciFact train, RGB zh's
# derived retrieval set, CMRC2018 trial, RealTime QA's frozen results), by name.
DEV_SETS: dict[str, Callable[[Path], BeirData]] = {
    "scifact": lambda d: load_beir(d / "beir_scifact", "train"),
    "rgb": lambda d: load_beir(d / "rgb" / "derived_retrieval" / "zh_refine"),
    "cmrc": lambda d: load_beir(d / "cmrc2018_retrieval", "trial"),
    "realtimeqa": lambda d: load_realtimeqa(d / "realtimeqa"),
}


@dataclass(frozen=True)
class AnswerabilitySample:
    """One labelled retrieval: does the evidence hold the answer (1) or not (0)?"""

    group: str
    label: int
    probability: float
    evidence: EvidenceFeatures


def _sample(group: str, label: int, found: Retrieval) -> AnswerabilitySample:
    return AnswerabilitySample(group, label, found.answerability, found.evidence)


def answerability_samples(
    kb: KnowledgeBase, data: BeirData, group: str, *, max_queries: int | None = None
) -> list[AnswerabilitySample]:
    """Two samples per judged query of a KB holding ``data``'s corpus: as it is (label 1
    when a judged document is in the top five hits) and with the judged documents
    hidden (label 0: "the KB without its answer")."""
    out: list[AnswerabilitySample] = []
    for qid in sorted(data.qrels)[: max_queries or None]:
        question, gold = data.queries[qid], set(data.qrels[qid])
        full = kb.retrieve(question, 5)
        out.append(_sample(group, int(any(h.doc_id in gold for h in full.hits)), full))
        out.append(_sample(group, 0, kb.retrieve(question, 5, exclude_doc_ids=gold)))
    return out


def unrelated_samples(
    kb: KnowledgeBase, questions: Iterable[str], group: str
) -> list[AnswerabilitySample]:
    """Label-0 samples: questions the KB's corpus has nothing to do with (e.g. FreshQA)."""
    return [_sample(group, 0, kb.retrieve(q, 5)) for q in questions if q.strip()]


def rgb_answerability_samples(
    path: Path,
    make_kb: Callable[[str], KnowledgeBase],
    *,
    max_questions: int | None = None,
    group: str = "rgb",
) -> list[AnswerabilitySample]:
    """RGB as ``eval rgb`` builds it: per question a 5-passage KB of 3 positive and 2
    negative passages (label 1) and one of 5 negatives (label 0). ``make_kb(name)``
    opens an empty throw-away KB; it is dropped afterwards."""
    out: list[AnswerabilitySample] = []
    for i, row in enumerate(read_jsonl(path)):
        if max_questions is not None and i >= max_questions:
            break
        positives, negatives = list(row.get("positive") or []), list(row.get("negative") or [])
        for label, chosen in ((1, positives[:3] + negatives[:2]), (0, negatives[:5])):
            docs = [
                SourceDocument(f"p{j}", f"rgb:{row.get('id')}:{j}", t, content_hash(t), False)
                for j, t in enumerate(chosen)
                if str(t).strip()
            ]
            kb = make_kb(f"rgbq-{i:04d}-{label}")
            try:
                kb.ingest_documents(docs)
                out.append(_sample(group, label, kb.retrieve(str(row["query"]), 5)))
            finally:
                kb.drop()
                kb.close()
    return out


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
