"""Retrieval across languages, the data of ``bench/bench_bilingual.py``: the dev sets, each
query's candidate pools (stage ``pools``) and the orderings compared on them."""

from __future__ import annotations

import argparse
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools.evaluation.datasets import DEV_SETS, BeirData, load_beir, score_run, to_documents
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.search.answerability import fit_logistic
from tools.kb.search.candidates import BM25Score, CandidatePool
from tools.kb.search.dense import centre_cosines, centring_applies, sample_positions
from tools.kb.search.fusion import fuse
from tools.kb.search.joiner import Fusion, MergeRule, gate_features, merge_language_pools
from tools.text import detect_language

REPO = Path(__file__).resolve().parent.parent


N = 50  # candidates per retriever, as KBConfig.candidates


HYBRID = Fusion()  # the shipped fusion settings


XQUAD = "xquad_bilingual"


def load_xquad(data_dir: Path) -> tuple[BeirData, dict[str, str]]:
    """Both question folders over the one mixed corpus; query id -> "same" | "cross"."""
    same = load_beir(data_dir / XQUAD / "xquad_bilingual_same", "dev")
    cross = load_beir(data_dir / XQUAD / "xquad_bilingual_cross", "dev")
    kind = {q: "same" for q in same.qrels} | {q: "cross" for q in cross.qrels}
    data = BeirData(
        corpus=same.corpus,
        queries={**same.queries, **cross.queries},
        qrels={**same.qrels, **cross.qrels},
    )
    return data, kind


def load_set(name: str, data_dir: Path) -> tuple[BeirData, dict[str, str]]:
    if name == "xquad":
        return load_xquad(data_dir)
    data = DEV_SETS[name](data_dir)
    return data, {q: "same" for q in data.qrels}


@dataclass
class Pool:
    """One query's candidates in one pool (indices into the set's chunk arrays)."""

    idx: np.ndarray
    cos: np.ndarray
    bm25: np.ndarray
    in_vec: np.ndarray
    in_bm25: np.ndarray


def _pool(cos_all: np.ndarray, bm_all: np.ndarray, members: np.ndarray) -> Pool:
    top_v = members[np.argsort(-cos_all[members], kind="stable")[:N]]
    positive = members[bm_all[members] > 0]
    top_b = positive[np.argsort(-bm_all[positive], kind="stable")[:N]]
    idx = np.array(list(dict.fromkeys([*top_v.tolist(), *top_b.tolist()])), dtype=np.int64)
    return Pool(
        idx,
        cos_all[idx].astype(np.float64),
        bm_all[idx],
        np.isin(idx, top_v),
        np.isin(idx, top_b),
    )


def _vectors(kb: KnowledgeBase, ids: list[str]) -> np.ndarray:
    rows: dict[str, np.ndarray] = {}
    for start in range(0, len(ids), 500):
        got = kb.chunks.collection.get(ids=ids[start : start + 500], include=["embeddings"])
        for cid, emb in zip(got["ids"], got["embeddings"], strict=True):  # type: ignore[arg-type]
            rows[cid] = np.asarray(emb, dtype=np.float32)
    mat = np.stack([rows[c] for c in ids])
    return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)


def stage_pools(args: argparse.Namespace) -> None:
    for name in args.sets:
        out = args.out / f"pools-{name}.pkl"
        if out.exists() and not args.force:
            print(f"# {name}: pools cached in {out}")
            continue
        data, kind = load_set(name, args.data_dir)
        kb = KnowledgeBase(KBConfig(home=args.home, collection=f"bi-{name}"))
        started = time.perf_counter()
        report = kb.ingest_documents(to_documents(data))
        print(f"# {name}: {report.summary()} ({time.perf_counter() - started:.0f} s)", flush=True)
        snap = kb.snapshot()
        docs = [str(m["doc_id"]) for m in snap.metadatas]
        langs = np.array([str(m.get("lang", "?")) for m in snap.metadatas])
        mat = _vectors(kb, snap.ids)
        qids = sorted(data.qrels)
        started = time.perf_counter()
        qvecs = np.asarray(kb.model.embed_queries([data.queries[q] for q in qids]), np.float32)
        qvecs /= np.maximum(np.linalg.norm(qvecs, axis=1, keepdims=True), 1e-12)
        print(f"# {name}: {len(qids)} queries embedded ({time.perf_counter() - started:.0f} s)")
        # The vectors too: later signals (centred cosines) are computed from them, not
        # by embedding again.
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez(args.out / f"vectors-{name}.npz", chunks=mat, queries=qvecs, qids=np.array(qids))
        everything = np.arange(len(snap.ids))
        by_lang = {lang: np.flatnonzero(langs == lang) for lang in sorted(set(langs.tolist()))}
        queries: dict[str, Any] = {}
        for qid, qv in zip(qids, qvecs, strict=True):
            cos_all = mat @ qv
            bm_all = _bm25_all(snap, data.queries[qid])
            queries[qid] = {
                "lang": detect_language(data.queries[qid]),
                "kind": kind[qid],
                "all": _pool(cos_all, bm_all, everything),
                "by_lang": {lang: _pool(cos_all, bm_all, m) for lang, m in by_lang.items()},
            }
        args.out.mkdir(parents=True, exist_ok=True)
        with out.open("wb") as fh:
            pickle.dump(
                {
                    "qrels": data.qrels,
                    "docs": docs,
                    "langs": langs.tolist(),
                    "mix": {lang: len(m) for lang, m in by_lang.items()},
                    "queries": queries,
                },
                fh,
            )
        print(f"# {name}: languages {dict((k, len(v)) for k, v in by_lang.items())}", flush=True)
        kb.close()


def _bm25_all(snap: Any, query: str) -> np.ndarray:
    """The BM25 score of every chunk of the snapshot (0 where a chunk has no query word)."""
    out = np.zeros(len(snap.ids), dtype=np.float64)
    for hit in snap.bm25.search(query, len(snap.ids)):
        out[snap.position[hit.chunk_id]] = hit.score
    return out


Order = Callable[[dict[str, Any]], list[int]]


def today(q: dict[str, Any]) -> list[int]:
    """Today's ranking: adaptive fusion over the single pool (the shipped default)."""
    p: Pool = q["all"]
    keys = [str(i) for i in p.idx]
    fused = fuse(
        dict(zip(keys, p.cos.tolist(), strict=True)),
        dict(zip(keys, p.bm25.tolist(), strict=True)),
        method="adaptive",
        vector_weight=0.5,
    )
    return sorted(p.idx.tolist(), key=lambda i: (-fused[str(i)], i))


def single(side: str) -> Order:
    def order(q: dict[str, Any]) -> list[int]:
        p: Pool = q["all"]
        member, score = (p.in_vec, p.cos) if side == "vector" else (p.in_bm25, p.bm25)
        keep = np.flatnonzero(member)
        return p.idx[keep[np.argsort(-score[keep], kind="stable")]].tolist()

    return order


def candidate_pool(p: Pool, norm: float = 0.0) -> CandidatePool:
    """A cached pool as the knowledge base's ``CandidatePool`` (``norm``: the query's
    best attainable BM25 score, for the BM25 share)."""
    keys = [str(i) for i in p.idx]
    return CandidatePool(
        ids=keys,
        cosine=dict(zip(keys, p.cos.tolist(), strict=True)),
        bm25={
            k: BM25Score(b, min(1.0, b / norm) if norm > 0 else 0.0)
            for k, b in zip(keys, p.bm25.tolist(), strict=True)
        },
        vector_found={k: c for k, c, v in zip(keys, p.cos.tolist(), p.in_vec, strict=True) if v},
        bm25_found={k: b for k, b, m in zip(keys, p.bm25.tolist(), p.in_bm25, strict=True) if m},
    )


def language_pools(q: dict[str, Any]) -> dict[str, CandidatePool]:
    return {
        lang: candidate_pool(p, q.get("norm", 0.0))
        for lang, p in q["by_lang"].items()
        if len(p.idx)
    }


def merged(rule: MergeRule, fusion: Fusion = HYBRID) -> Order:
    """The product's merge (``tools.kb.search.joiner``) over the cached per-language pools."""

    def order(q: dict[str, Any]) -> list[int]:
        pools = language_pools(q)
        scores = merge_language_pools(pools, q["lang"], fusion, rule, q.get("centred"))
        return [int(c) for c in sorted(scores, key=lambda c: (-scores[c], int(c)))]

    return order


def ndcg(pools: dict[str, Any], order: Order, qids: list[str]) -> float:
    docs = pools["docs"]
    rankings = {
        q: list(dict.fromkeys(docs[i] for i in order(pools["queries"][q])))[:30] for q in qids
    }
    return float(score_run(rankings, {q: pools["qrels"][q] for q in qids}, [])["ndcg@10"])


def with_norms(name: str, pools: dict[str, Any], args: argparse.Namespace) -> None:
    """Each query's best attainable BM25 score, read from the set's index."""
    data, _ = load_set(name, args.data_dir)
    kb = KnowledgeBase(KBConfig(home=args.homes.get(name, args.home), collection=f"bi-{name}"))
    bm25 = kb.snapshot().bm25
    for qid, q in pools["queries"].items():
        q["norm"] = float(sum(bm25.term_weights(data.queries[qid]).values()))
    kb.close()


def with_centres(name: str, pools: dict[str, Any], args: argparse.Namespace) -> None:
    """Each query's centred cosines to its candidates, as ``tools.kb.search.joiner`` computes
    them (each language's centre from the same sample of its chunks)."""
    saved = np.load(args.out / f"vectors-{name}.npz")
    chunks, qvecs = saved["chunks"], saved["queries"]
    langs = np.array(pools["langs"])
    if not centring_applies(
        {lang: int(np.count_nonzero(langs == lang)) for lang in set(langs.tolist())}
    ):
        return
    centres = {}
    for lang in sorted(set(langs.tolist())):
        members = np.flatnonzero(langs == lang)
        centres[lang] = chunks[members[sample_positions(len(members))]].mean(axis=0)
    for qid, qv in zip([str(x) for x in saved["qids"]], qvecs, strict=True):
        q = pools["queries"][qid]
        idx = sorted({int(i) for p in q["by_lang"].values() for i in p.idx})
        q["centred"] = centre_cosines(
            qv, q["lang"], centres, [str(i) for i in idx], [langs[i] for i in idx], chunks[idx]
        )


def gate_samples(pools: dict[str, Any], qids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Gate features of each query (its first other language) and whether it is asked in
    another language than its answer's."""
    x, y = [], []
    for qid in qids:
        q = pools["queries"][qid]
        lp = language_pools(q)
        others = [lang for lang in sorted(lp) if lang != q["lang"]]
        if not others:
            continue
        f = gate_features(lp.get(q["lang"]), lp[others[0]], q.get("centred"))
        x.append(f.vector())
        y.append(int(q["kind"] == "cross"))
    return np.array(x), np.array(y)


def fit_gate(x: np.ndarray, y: np.ndarray) -> tuple[float, list[float]]:
    """The gate's logistic fit, unstandardised: (intercept, coefficients)."""
    mean, scale, coef, intercept = fit_logistic(x, y)
    raw = coef / scale
    return float(intercept - float(raw @ mean)), [float(c) for c in raw]
