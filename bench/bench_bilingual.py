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

``answerability`` the product's evidence and route where the best hit is in another language;
``examples`` the sample KB's questions through the offline state graph; ``latency`` the
product's search per query, per-language pools against one pool; ``flat`` fusion variants
that ignore a flat side (issue 36 item 5).

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tools.evaluation.datasets import DEV_SETS, BeirData, load_beir, score_run, to_documents
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.search.answerability import fit_logistic
from tools.kb.search.candidates import BM25Score, CandidatePool
from tools.kb.search.centring import centre_cosines, centring_applies, sample_positions
from tools.kb.search.fusion import fuse
from tools.kb.search.languages import Fusion, MergeRule, gate_features, merge_language_pools
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
    """The product's merge (``tools.kb.search.languages``) over the cached per-language pools."""

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


def _with_norms(name: str, pools: dict[str, Any], args: argparse.Namespace) -> None:
    """Each query's best attainable BM25 score, read from the set's index."""
    data, _ = load_set(name, args.data_dir)
    kb = KnowledgeBase(KBConfig(home=args.homes.get(name, args.home), collection=f"bi-{name}"))
    bm25 = kb.snapshot().bm25
    for qid, q in pools["queries"].items():
        q["norm"] = float(sum(bm25.term_weights(data.queries[qid]).values()))
    kb.close()


def _with_centres(name: str, pools: dict[str, Any], args: argparse.Namespace) -> None:
    """Each query's centred cosines to its candidates, as ``tools.kb.search.languages`` computes
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


def _gate_samples(pools: dict[str, Any], qids: list[str]) -> tuple[np.ndarray, np.ndarray]:
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


STEEPNESS = (0.35, 0.5)  # the shift form: each candidate loses steepness x doubt
SCALE = (0.15, 0.25)  # the scale form: each candidate's score times (1 - doubt) ** scale
CUTOFF = (0.01,)  # a language given less than this follows all of the question's
SLOT = (0, 2)  # the other language's best kept at this rank when given >= SLOT_FLOOR
SLOT_FLOOR = 0.05
BIAS = (-1.0, -1.5, -2.0, -2.5, -3.0, -3.5)  # added to the intercept: same-language prior
TOLERANCE = 0.005  # a same-language set may lose this much before it counts as a loss


def sweep_groups(
    loaded: dict[str, Any], args: argparse.Namespace
) -> dict[str, tuple[str, str, list[str]]]:
    """The question groups the sweep scores: each set whole, xquad by half and kind."""
    groups: dict[str, tuple[str, str, list[str]]] = {}  # group -> (set, fold, query ids)
    for name, pools in loaded.items():
        _with_norms(name, pools, args)
        if args.centred:
            _with_centres(name, pools, args)
        qids = sorted(pools["qrels"])
        if name != "xquad":
            groups[name] = (name, name, qids)
            continue
        articles = sorted({min(pools["qrels"][q]).split("_")[0] for q in qids})
        first = set(articles[: len(articles) // 2])
        for half in ("A", "B"):
            for kind in ("same", "cross"):
                groups[f"xquad-{half}-{kind}"] = (
                    name,
                    f"xquad-{half}",
                    [
                        q
                        for q in qids
                        if (min(pools["qrels"][q]).split("_")[0] in first) == (half == "A")
                        and pools["queries"][q]["kind"] == kind
                    ],
                )
    return groups


def candidates(gate_fit: tuple[float, list[float]]) -> list[MergeRule]:
    """The rules swept around a fitted gate: shifted slots, and scaled intercepts."""
    c, (best, share, peak_other, peak_own) = gate_fit
    gate = MergeRule(c, best, share, peak_other, peak_own)
    shift = [
        replace(
            gate,
            intercept=c + bias,
            scale=0.0,
            steepness=st,
            cutoff=cut,
            slot=slot,
            slot_floor=SLOT_FLOOR,
        )
        for st, cut, slot, bias in itertools.product(STEEPNESS, CUTOFF, SLOT, BIAS)
    ]
    scale = [
        replace(gate, intercept=c + bias, scale=sc) for sc, bias in itertools.product(SCALE, BIAS)
    ]
    return shift + scale


def print_by_kind(loaded: dict[str, Any], best: MergeRule) -> None:
    """Whole sets by question kind: today, each retriever alone, the chosen rule."""
    for name, pools in loaded.items():  # whole sets, by question kind
        for kind in ("same", "cross"):
            qids = sorted(q for q in pools["qrels"] if pools["queries"][q]["kind"] == kind)
            if qids:
                figures = {
                    "today": ndcg(pools, today, qids),
                    "vector": ndcg(pools, single("vector"), qids),
                    "bm25": ndcg(pools, single("bm25"), qids),
                    "merged": ndcg(pools, merged(best), qids),
                    "merged vector": ndcg(pools, merged(best, Fusion(mode="vector")), qids),
                }
                print(
                    f"{name} {kind} ({len(qids)}): "
                    + ", ".join(f"{k} {v:.4f}" for k, v in figures.items())
                )


def sweep_key(got: dict[str, float], base: dict[str, float]) -> tuple[float, float, float]:
    """Largest worst-case gain over today: a same-language set counts only a loss beyond
    the tolerance; then the worst cross-language gain; then the mean."""
    same = [min(0.0, v - base[g] + TOLERANCE) for g, v in got.items() if "cross" not in g]
    cross = [v - base[g] for g, v in got.items() if "cross" in g]
    return (min(same, default=0.0), min(cross, default=0.0), float(np.mean(cross or [0])))


def stage_sweep(args: argparse.Namespace) -> None:
    loaded = {n: pickle.loads((args.out / f"pools-{n}.pkl").read_bytes()) for n in args.sets}
    groups = sweep_groups(loaded, args)
    base = {g: ndcg(loaded[n], today, qids) for g, (n, _, qids) in groups.items()}
    folds = sorted({f for _, f, _ in groups.values()})

    def fitted(train: list[str]) -> tuple[float, list[float]]:
        xs, ys = [], []
        for n, f, qids in groups.values():
            if f in train:
                x, y = _gate_samples(loaded[n], qids)
                if len(x):
                    xs.append(x)
                    ys.append(y)
        return fit_gate(np.vstack(xs), np.concatenate(ys))

    def scores(rule: MergeRule, names: list[str]) -> dict[str, float]:
        return {g: ndcg(loaded[groups[g][0]], merged(rule), groups[g][2]) for g in names}

    print("\n## leave one set out: gate fitted and rule chosen on the others")
    print(f"{'left out':<10} {'rule':<44} " + " ".join(f"{g:>15}" for g in groups))
    print(
        f"{'today':<10} {'single pool, adaptive fusion':<44} "
        + " ".join(f"{base[g]:>15.4f}" for g in groups)
    )
    for held in folds:
        train = [f for f in folds if f != held]
        train_groups = [g for g, (_, f, _) in groups.items() if f in train]
        rules = candidates(fitted(train))
        chosen = max(rules, key=lambda r: sweep_key(scores(r, train_groups), base))
        got = scores(chosen, list(groups))
        print(
            f"{held:<10} {chosen.label():<44} "
            + " ".join(
                f"{got[g]:>15.4f}"
                if groups[g][1] == held
                else f"{'(' + format(got[g], '.4f') + ')':>15}"
                for g in groups
            ),
            flush=True,
        )
    rules = candidates(fitted(folds))
    table = {r.label(): scores(r, list(groups)) for r in rules}
    best = max(rules, key=lambda r: sweep_key(table[r.label()], base))
    print("\n## every rule, gate fitted on all sets (today first)")
    for label, got in table.items():
        print(f"{label:<44} " + " ".join(f"{got[g]:>15.4f}" for g in groups))
    print(f"\nall sets -> {best}")
    print_by_kind(loaded, best)
    (args.out / "sweep.json").write_text(
        json.dumps(
            {"today": base, "rules": table, "chosen": best.label(), "rule": best.__dict__}, indent=1
        )
    )


# -- answerability ------------------------------------------------------------------------


def article_of(doc: str) -> int:
    """The XQuAD article of a paragraph id (XQ000..XQ239): 48 articles of 5 paragraphs,
    in file order (../shared/data/xquad_bilingual/SOURCE.md)."""
    return int(doc[2:]) // 5


def _hides(hidden: str | None, doc: str) -> bool:
    if hidden is None:
        return False
    if hidden.startswith("article:"):
        return article_of(doc) == int(hidden.split(":", 1)[1])
    return doc == hidden


def stage_answerability(args: argparse.Namespace) -> None:
    """The product's evidence on xquad dev (``KnowledgeBase.retrieve``): every question as
    asked, with its judged paragraph hidden (an in-topic negative) and with its whole
    article hidden (an off-topic negative). Where the best hit is in another language
    than the question's, the product reads it with the dense-only model on cosines
    brought to the question language's scale (``tools.kb.search.centring.on_question_scale``);
    this stage reports that model's AUROC and ECE on those searches next to the full
    model on the raw evidence, and the offline router's route for the answerable ones."""
    from graph import Context
    from tools.policy.offline import offline_route

    pools = pickle.loads((args.out / "pools-xquad.pkl").read_bytes())
    data, kind = load_xquad(args.data_dir)
    kb = KnowledgeBase(KBConfig(home=args.homes.get("xquad", args.home), collection="bi-xquad"))
    retriever = kb.retriever
    threshold = Context().confidence_threshold
    by_article: dict[int, list[str]] = {}
    for doc in data.corpus:
        by_article.setdefault(article_of(doc), []).append(doc)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for qid in sorted(pools["qrels"]):
        judged = min(pools["qrels"][qid])
        text = data.queries[qid]
        for hidden in ((), (judged,), tuple(by_article[article_of(judged)])):
            got = kb.retrieve(text, 5, exclude_doc_ids=hidden or ("-",))
            if not got.hits:
                continue
            across = got.hits[0].metadata.get("lang") != detect_language(text)
            rows.append(
                {
                    "kind": kind[qid],
                    "hidden": len(hidden),
                    "across": across,
                    "label": int(any(h.doc_id in pools["qrels"][qid] for h in got.hits)),
                    "shipped": got.answerability,
                    "full": retriever.answerability_model.probability(got.evidence),
                    "route": offline_route(text, got.answerability).route,
                    # No web search at all: routed to the KB alone and confident enough
                    # not to fall back (tools.policy.decisions.needs_web_fallback).
                    "kb_only": offline_route(text, got.answerability).route == "knowledge"
                    and got.answerability >= threshold,
                }
            )
    print(f"# {len(rows)} searches in {time.perf_counter() - started:.0f} s")
    print_answerability(rows, threshold)
    kb.close()


def print_answerability(rows: list[dict[str, Any]], threshold: float) -> None:
    """AUROC and ECE of both models, by where the best hit's language lies; then what
    the offline router and the web fallback do with the answerable questions."""
    from tools.evaluation.calibration import auroc, expected_calibration_error

    for across in (False, True):
        part = [r for r in rows if r["across"] == across]
        if not part:
            continue
        y = [r["label"] for r in part]
        label = "best hit in another language" if across else "best hit in the question's"
        print(f"\n## {label}: {len(part)} searches, {sum(y)} answerable")
        for name in ("full", "shipped"):
            p = [r[name] for r in part]
            auc = auroc(y, p) if 0 < sum(y) < len(y) else float("nan")
            print(
                f"{name:<8} AUROC {auc:.3f}  ECE {expected_calibration_error(y, p):.3f}  "
                f"mean p answerable {np.mean([v for v, t in zip(p, y, strict=True) if t]):.3f}"
                f" / not {np.mean([v for v, t in zip(p, y, strict=True) if not t]):.3f}"
            )
    print(
        "\n## the offline router (KB alone: probe >= 0.125) and the web fallback "
        f"(confidence < {threshold}): questions that reach no web search"
    )
    for k in ("same", "cross"):
        asked = [r for r in rows if r["kind"] == k and r["hidden"] == 0]
        found = [r for r in asked if r["label"]]
        routed = sum(r["route"] == "knowledge" for r in found)
        kept = sum(r["kb_only"] for r in found)
        print(
            f"{k}: {len(found)} of {len(asked)} with the answer in the top five; routed to "
            f"the KB alone {routed} ({routed / max(1, len(found)):.3f}), of which answered "
            f"with no web search {kept} ({kept / max(1, len(found)):.3f})"
        )
    for k in ("same", "cross"):
        off = [r for r in rows if r["hidden"] > 1 and r["kind"] == k]
        print(
            f"{k}, its article hidden (off-topic, {len(off)}): routed to the KB alone "
            f"{sum(r['route'] == 'knowledge' for r in off)}, answered with no web search "
            f"{sum(r['kb_only'] for r in off)}"
        )


# -- examples --------------------------------------------------------------------------


def stage_examples(args: argparse.Namespace) -> None:
    """The sample KB's own questions through the offline state graph: the route, the
    documents cited, whether the answer holds the expected string."""
    import asyncio

    from graph import Context, build_graph
    from run import resources

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


def flat_side(tau: float | None, slope: float = 1.5) -> Order:
    """Adaptive fusion over the single pool, ignoring a side whose best stands less than
    ``tau`` standard deviations above its pool while the other side's stands higher
    (``tau`` None: only the slope of the adaptive weight changes)."""
    from tools.kb.search.fusion import clamp01, minmax, peak

    def order(q: dict[str, Any]) -> list[int]:
        p: Pool = q["all"]
        keys = [str(i) for i in p.idx]
        vec = dict(zip(keys, p.cos.tolist(), strict=True))
        lex = dict(zip(keys, p.bm25.tolist(), strict=True))
        zv, zb = peak(vec.values()), peak(lex.values())
        w = 0.5 if zv + zb <= 0 else clamp01(0.5 + slope * (zv / (zv + zb) - 0.5))
        if tau is not None and zb < tau <= zv:
            w = 1.0
        elif tau is not None and zv < tau <= zb:
            w = 0.0
        vn, bn = minmax(vec), minmax(lex)
        fused = {c: w * vn[c] + (1 - w) * bn[c] for c in keys}
        return sorted(p.idx.tolist(), key=lambda i: (-fused[str(i)], i))

    return order


def stage_flat(args: argparse.Namespace) -> None:
    """Issue 36 item 5: adaptive fusion against variants that fall back to one side
    when the other is flat, on each set's single pool (same-language questions)."""
    variants: list[tuple[str, Order]] = [
        ("adaptive", today),
        ("vector", single("vector")),
        ("bm25", single("bm25")),
        *((f"flat<{t:g}", flat_side(t)) for t in (1.5, 2.0, 2.5, 3.0)),
        *((f"slope{s:g}", flat_side(None, s)) for s in (2.0, 3.0)),
    ]
    for name in args.sets:
        pools = pickle.loads((args.out / f"pools-{name}.pkl").read_bytes())
        qids = sorted(q for q in pools["qrels"] if pools["queries"][q]["kind"] == "same")
        row = " ".join(f"{label} {ndcg(pools, order, qids):.4f}" for label, order in variants)
        print(f"{name} ({len(qids)}): {row}", flush=True)


def stage_latency(args: argparse.Namespace) -> None:
    """The product's search (``KnowledgeBase.retrieve``, hybrid, k=5) per query on the
    xquad KB: per-language pools (the default for a KB in two languages) against the
    single pool (the per-language path switched off) and against per-language pools on
    raw cosines (no centring: no read of the candidates' vectors), each question's vector embedded
    beforehand so only the search is timed."""
    import contextlib
    import statistics
    from unittest import mock

    data, _ = load_set("xquad", args.data_dir)
    kb = KnowledgeBase(KBConfig(home=args.homes.get("xquad", args.home), collection="bi-xquad"))
    questions = [data.queries[q] for q in sorted(data.qrels)][:300]
    for q in questions:
        kb.retriever.query_vector(q)

    def single() -> contextlib.AbstractContextManager[Any]:
        return mock.patch("tools.kb.search.retriever.language_search", return_value=None)

    def raw() -> contextlib.AbstractContextManager[Any]:
        return mock.patch.object(type(kb.retriever), "centres", lambda self, snap: {})

    # Twice each, in turn, so warm-up falls on none; the second rounds are printed.
    rounds = [
        ("single pool", single),
        ("per-language, raw", raw),
        ("per-language pools", contextlib.nullcontext),
    ] * 2
    for n, (label, patch) in enumerate(rounds):
        with patch():
            times = []
            for q in questions:
                started = time.perf_counter()
                kb.retrieve(q, 5, exclude_doc_ids=("-",))  # a filter: never a cached search
                times.append((time.perf_counter() - started) * 1000)
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        if n < len(rounds) // 2:
            continue
        print(f"{label:<20} p50 {statistics.median(times):6.1f} ms  p95 {p95:6.1f} ms", flush=True)
    kb.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "stages",
        nargs="+",
        choices=["pools", "sweep", "answerability", "examples", "latency", "flat"],
    )
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
        "--raw-cosines",
        action="store_true",
        help="sweep: compare languages by raw cosines (the first version), not centred ones",
    )
    ap.add_argument(
        "--set-home",
        action="append",
        default=[],
        help="NAME=DIR: the data home of one set's index when not --home",
    )
    args = ap.parse_args(argv)
    args.centred = not args.raw_cosines
    args.homes = {k: Path(v) for k, v in (h.split("=", 1) for h in args.set_home)}
    if not args.data_dir.exists():
        print(f"data directory {args.data_dir} not found (pass --data-dir)", file=sys.stderr)
        return 2
    for stage in args.stages:
        stages = {
            "pools": stage_pools,
            "sweep": stage_sweep,
            "answerability": stage_answerability,
            "examples": stage_examples,
            "latency": stage_latency,
            "flat": stage_flat,
        }
        stages[stage](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
