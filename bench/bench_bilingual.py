"""Retrieval across languages: per-language candidate pools and the rule that merges them.

Stages (each caches its output under ``--out``; later stages re-run in seconds):

``pools``  index each dev set once (a persistent collection under ``--home``; the embedding
           cache there makes a second run free), read every chunk's vector and language,
           embed the judged queries, and store per query the raw cosine and raw BM25 of every
           chunk that either retriever puts in its top ``n`` -- over the whole KB (today's
           single pool) and within each document language (the per-language pools).
``sweep``  nDCG@10 of today's single pool and of the per-language merge for every rule x
           parameter on every set (the xquad dev articles split in two halves, A and B, so
           the bilingual data can be left out too), then leave one set out: choose on the
           others by the largest worst-case gain over today's ranking (ties: the larger mean
           gain), report the set left out; finally the choice on all sets.

    .venv/bin/python -m bench.bench_bilingual --home /tmp/bi-home --out /tmp/bi pools sweep

Sets: xquad_bilingual dev (same- and cross-language questions over one mixed KB), CMRC2018
trial, RGB zh, RealTime QA, SciFact train, read from ``--data-dir`` (never copied).
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools.evaluation.datasets import DEV_SETS, BeirData, load_beir, score_run, to_documents
from tools.kb.fusion import fuse
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.languages import Fusion, MergeRule, merge_language_pools
from tools.kb.search import BM25Score, CandidatePool
from tools.text import detect_language

REPO = Path(__file__).resolve().parent.parent
N = 50  # candidates per retriever, as KBConfig.candidates
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


# -- pools -----------------------------------------------------------------------------


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
            bm_all = snap.bm25.scores(data.queries[qid])
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


# -- sweep -----------------------------------------------------------------------------

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


def candidate_pool(p: Pool) -> CandidatePool:
    keys = [str(i) for i in p.idx]
    return CandidatePool(
        ids=keys,
        cosine=dict(zip(keys, p.cos.tolist(), strict=True)),
        bm25={k: BM25Score(b, 0.0) for k, b in zip(keys, p.bm25.tolist(), strict=True)},
        vector_found={k: c for k, c, v in zip(keys, p.cos.tolist(), p.in_vec, strict=True) if v},
        bm25_found={k: b for k, b, m in zip(keys, p.bm25.tolist(), p.in_bm25, strict=True) if m},
    )


def merged(rule: MergeRule) -> Order:
    """The product's merge (``tools.kb.languages``) over the cached per-language pools."""

    def order(q: dict[str, Any]) -> list[int]:
        pools = {lang: candidate_pool(p) for lang, p in q["by_lang"].items() if len(p.idx)}
        scores = merge_language_pools(pools, q["lang"], Fusion(), rule)
        return [int(c) for c in sorted(scores, key=lambda c: (-scores[c], int(c)))]

    return order


def ndcg(pools: dict[str, Any], order: Order, qids: list[str]) -> float:
    docs = pools["docs"]
    rankings = {
        q: list(dict.fromkeys(docs[i] for i in order(pools["queries"][q])))[:30] for q in qids
    }
    return float(score_run(rankings, {q: pools["qrels"][q] for q in qids}, [])["ndcg@10"])


def rules() -> list[MergeRule]:
    grid = itertools.product(
        (0.0, 0.02, 0.04, 0.06, 0.08, 0.1),  # language offset of a cross-language cosine
        (0.5, 1.0, 2.0, 4.0, 8.0),  # how steeply trust falls behind the best language
        (True, False),  # BM25 in a pool of another language than the question's
    )
    return [MergeRule(offset=o, steepness=s, bm25_other=b) for o, s, b in grid]


def stage_sweep(args: argparse.Namespace) -> None:
    # "Sets" for leave-one-out: the xquad dev articles in two halves (by article order).
    loaded = {
        name: pickle.loads((args.out / f"pools-{name}.pkl").read_bytes()) for name in args.sets
    }
    groups: dict[str, tuple[str, list[str]]] = {}
    for name, pools in loaded.items():
        qids = sorted(pools["qrels"])
        if name == "xquad":
            articles = sorted({min(pools["qrels"][q]).split("_")[0] for q in qids})
            half = set(articles[: len(articles) // 2])
            groups["xquad-A"] = (
                name,
                [q for q in qids if min(pools["qrels"][q]).split("_")[0] in half],
            )
            groups["xquad-B"] = (
                name,
                [q for q in qids if min(pools["qrels"][q]).split("_")[0] not in half],
            )
        else:
            groups[name] = (name, qids)
    candidates = rules()
    table: dict[str, dict[str, float]] = {}
    for g, (name, qids) in groups.items():
        pools = loaded[name]
        row = {"today": ndcg(pools, today, qids)}
        for rule in candidates:
            row[rule.label()] = ndcg(pools, merged(rule), qids)
        table[g] = row
        print(f"# {g}: today {row['today']:.4f}", flush=True)
    (args.out / "sweep.json").write_text(json.dumps(table, indent=1))
    labels = [r.label() for r in candidates]

    def choose(sets: list[str]) -> str:
        def key(label: str) -> tuple[float, float]:
            gains = [table[s][label] - table[s]["today"] for s in sets]
            return (round(min(gains), 6), float(np.mean(gains)))

        return max(labels, key=key)

    print("\n## leave one set out (largest worst-case gain over today; ties: mean gain)")
    for held in table:
        chosen = choose([s for s in table if s != held])
        print(
            f"{held:<10} {chosen:<28} today {table[held]['today']:.4f} -> {table[held][chosen]:.4f}"
        )
    overall = choose(list(table))
    print(f"\nall sets -> {overall}: " + ", ".join(f"{s} {table[s][overall]:.4f}" for s in table))


# -- answerability ------------------------------------------------------------------------


def _evidence(
    q: dict[str, Any], pools: dict[str, Any], kb: KnowledgeBase, text: str, hidden: str | None
) -> tuple[list[int], str, Any]:
    """The merged top five (without the chunks of ``hidden``) and its evidence features,
    measured as the knowledge base measures them (tools.kb.retrieval)."""
    from tools.kb.answerability import measure_evidence

    snap = kb.snapshot()
    docs = pools["docs"]
    by_lang: dict[str, CandidatePool] = {}
    for lang, p in q["by_lang"].items():
        keep = np.array([hidden is None or docs[i] != hidden for i in p.idx], dtype=bool)
        kept = Pool(p.idx[keep], p.cos[keep], p.bm25[keep], p.in_vec[keep], p.in_bm25[keep])
        if len(kept.idx):
            by_lang[lang] = candidate_pool(kept)
    scores = merge_language_pools(by_lang, q["lang"], Fusion())
    top = [int(c) for c in sorted(scores, key=lambda c: (-scores[c], int(c)))[:5]]
    winner = pools["langs"][top[0]]
    own = by_lang[winner]
    evidence = measure_evidence(
        [(str(i), snap.texts[i]) for i in top],
        vector_pool=own.vector_found,
        bm25_pool=own.bm25_found,
        term_weights=snap.bm25.term_weights(text),
        tokenizer=kb.tokenizer,
        similarity_floor=kb.model.similarity_floor,
    )
    return top, winner, evidence


def stage_answerability(args: argparse.Namespace) -> None:
    """Cross-language evidence (best hit in another language than the question) from the
    xquad dev questions, as found and with the judged paragraph hidden; the usual model's
    probability on it, a dense-only logistic fit (leave one half of the articles out),
    and the router's KB-only share of the answerable ones."""
    from tools.evaluation.calibration import auroc, expected_calibration_error
    from tools.kb.answerability import (
        CROSSLINGUAL_FEATURES,
        PARAMS_DIR,
        AnswerabilityModel,
        crosslingual_name,
        fit_logistic,
        load_model,
    )
    from tools.policy.offline import KB_PROBE_STRONG

    pools = pickle.loads((args.out / "pools-xquad.pkl").read_bytes())
    data, _ = load_xquad(args.data_dir)
    kb = KnowledgeBase(KBConfig(home=args.home, collection="bi-xquad"))
    same_model = load_model(kb.model.model_id)
    rows: list[tuple[str, str, int, Any]] = []  # half, kind, label, evidence
    articles = sorted({min(r).split("_")[0] for r in pools["qrels"].values()})
    first_half = set(articles[: len(articles) // 2])
    for qid in sorted(pools["qrels"]):
        q = pools["queries"][qid]
        judged = min(pools["qrels"][qid])
        half = "A" if judged.split("_")[0] in first_half else "B"
        for hidden in (None, judged):
            top, winner, ev = _evidence(q, pools, kb, data.queries[qid], hidden)
            if winner == q["lang"]:
                continue  # same-language evidence: the usual model's job
            label = int(any(pools["docs"][i] in pools["qrels"][qid] for i in top))
            rows.append((half, q["kind"], label, ev))
    y = np.array([r[2] for r in rows])
    x = np.array([r[3].vector(CROSSLINGUAL_FEATURES) for r in rows])
    old = np.array([same_model.probability(r[3]) for r in rows])
    print(f"\n## cross-language evidence: {len(rows)} samples, {int(y.sum())} answerable")
    yl, ol = y.tolist(), old.tolist()
    print(f"usual model: AUROC {auroc(yl, ol):.3f}, ECE {expected_calibration_error(yl, ol):.3f}")

    def model_of(mask: np.ndarray, name: str) -> AnswerabilityModel:
        mean, scale, coef, intercept = fit_logistic(x[mask], y[mask])
        return AnswerabilityModel(
            name=name,
            features=CROSSLINGUAL_FEATURES,
            mean=tuple(map(float, mean)),
            scale=tuple(map(float, scale)),
            coef=tuple(map(float, coef)),
            intercept=intercept,
            meta={
                "fitted_on": "xquad_bilingual dev, best hit in the other language",
                "samples": int(mask.sum()),
                "bench": "bench/bench_bilingual.py answerability",
            },
        )

    halves = np.array([r[0] for r in rows])
    for held in ("A", "B"):
        m = model_of(halves != held, "loo")
        test = halves == held
        p = [m.probability(r[3]) for r, t in zip(rows, test, strict=True) if t]
        print(
            f"left out {held}: AUROC {auroc(y[test].tolist(), p):.3f} ECE "
            f"{expected_calibration_error(y[test].tolist(), p):.3f}  (usual model AUROC "
            f"{auroc(y[test].tolist(), old[test].tolist()):.3f})"
        )
    final = model_of(np.ones(len(rows), dtype=bool), crosslingual_name(kb.model.model_id))
    new = np.array([final.probability(r[3]) for r in rows])
    answerable = y == 1
    print(
        f"router KB probe >= {KB_PROBE_STRONG} on answerable cross-language evidence: "
        f"usual {np.mean(old[answerable] >= KB_PROBE_STRONG):.3f}, "
        f"cross-language model {np.mean(new[answerable] >= KB_PROBE_STRONG):.3f}; "
        f"on unanswerable: usual {np.mean(old[~answerable] >= KB_PROBE_STRONG):.3f}, "
        f"cross {np.mean(new[~answerable] >= KB_PROBE_STRONG):.3f}"
    )
    if args.write_params:
        path = PARAMS_DIR / f"{final.name}.json"
        path.write_text(json.dumps(final.to_json(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    kb.close()


# -- examples --------------------------------------------------------------------------


def stage_examples(args: argparse.Namespace) -> None:
    """The sample KB's own questions through the offline state graph: the route, the
    documents cited, whether the answer holds the expected string."""
    import asyncio

    from graph import Context, build_graph
    from nodes import resources

    home = args.out / "examples-home"
    kb = KnowledgeBase(KBConfig(home=home))
    kb.ingest([REPO / "examples" / "kb"])
    resources.register_kb(kb)
    rows = [json.loads(line) for line in (REPO / "examples" / "questions.jsonl").open()]
    graph = build_graph()
    context = Context(data_home=str(home), model="offline", search_provider="none")
    tally: dict[str, list[int]] = {"same": [0, 0, 0, 0], "cross": [0, 0, 0, 0]}
    for q in (r for r in rows if r["kind"] == "kb"):
        out = asyncio.run(graph.ainvoke({"question": q["question"]}, context=context))
        cited = [c.get("doc_id") for c in out.get("citations") or []]
        ok = q["doc"] in cited
        has = q["answer"].casefold() in str(out.get("answer") or "").casefold()
        kind = "cross" if q["crosslingual"] else "same"
        kb_route = out.get("route") == "knowledge"
        t = tally[kind]
        t[0], t[1], t[2], t[3] = t[0] + 1, t[1] + ok, t[2] + has, t[3] + kb_route
        print(
            f"{q['id']} {kind:<5} route={out.get('route'):<9} cites={'yes' if ok else 'NO ':<3} "
            f"answer={'yes' if has else 'no '} {q['question']}",
            flush=True,
        )
        if kind == "cross":
            print("      " + str(out.get("answer") or "").replace("\n", " ")[:300])
    for kind, (n, cites, holds, routed) in tally.items():
        print(
            f"{kind}: cites its document {cites}/{n}, answer string {holds}/{n}, "
            f"KB route {routed}/{n}"
        )
    resources.close_all()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("stages", nargs="+", choices=["pools", "sweep", "answerability", "examples"])
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--sets",
        type=lambda s: s.split(","),
        default=["xquad", "cmrc", "rgb", "realtimeqa", "scifact"],
    )
    ap.add_argument("--force", action="store_true", help="recompute cached pools")
    ap.add_argument(
        "--write-params", action="store_true", help="store the cross-language answerability fit"
    )
    args = ap.parse_args(argv)
    if not args.data_dir.exists():
        print(f"data directory {args.data_dir} not found (pass --data-dir)", file=sys.stderr)
        return 2
    for stage in args.stages:
        stages = {
            "pools": stage_pools,
            "sweep": stage_sweep,
            "answerability": stage_answerability,
            "examples": stage_examples,
        }
        stages[stage](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
