"""Retrieval across languages, the product's side (``bench/bench_bilingual.py``): the stages
``answerability``, ``examples``, ``flat`` and ``latency``."""

from __future__ import annotations

import argparse
import json
import pickle
import time
from typing import Any

import numpy as np

from bench.bilingual_pools import REPO, Order, Pool, load_set, load_xquad, ndcg, single, today
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.text import detect_language


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
    brought to the question language's scale (``tools.kb.search.joiner.on_question_scale``);
    this stage reports that model's AUROC and ECE on those searches next to the full
    model on the raw evidence, and the offline router's route for the answerable ones."""
    from graph import Context
    from tools.policy.offline import offline_route

    pools = pickle.loads((args.out / "pools-xquad.pkl").read_bytes())
    data, kind = load_xquad(args.data_dir)
    kb = KnowledgeBase(KBConfig(home=args.homes.get("xquad", args.home), collection="bi-xquad"))
    pipeline = kb.pipeline
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
                    "full": pipeline.answerability_model.probability(got.evidence),
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
        kb.pipeline.query_vector(q)

    def single() -> contextlib.AbstractContextManager[Any]:
        return mock.patch("tools.kb.search.retrievers.document_languages", return_value=[])

    def raw() -> contextlib.AbstractContextManager[Any]:
        retrievers = type(kb.pipeline.retrievers)
        return mock.patch.object(retrievers, "centres", lambda self, snap, languages=None: {})

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
