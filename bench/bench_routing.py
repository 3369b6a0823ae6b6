"""Routing with real knowledge bases: the KB probe's threshold, chosen on several KBs.

The offline router sends a question to the knowledge base alone when it has no
time-sensitivity cue and the KB probe (the calibrated answerability of a hybrid search,
``KnowledgeBase.probe``) reaches ``KB_PROBE_STRONG``. Too low a threshold and fast-changing
questions miss the web; too high and questions the KB answers also pay for a web search.

Knowledge bases (each a collection under ``--home``; the embedding cache makes a rerun
cheap):

* ``scifact``  the first ``--docs`` (1,000) SciFact documents; KB questions: SciFact train
               queries whose judged document is in the KB and in the top five hits;
* ``cmrc``     the CMRC2018 trial corpus (1,104 Wikipedia paragraphs); KB questions: its
               trial queries found in the top five;
* ``crud``     the first ``--docs`` CRUD-RAG news articles (Chinese, 2023); it has no
               questions, so it only measures the web side.

Web questions: FreshQA dev's fast-changing questions (English) against every KB, and RGB zh
dev's news questions (Chinese, answered by 2022-23 news) against SciFact and CMRC (not
against CRUD: its news may hold them). For each threshold the table gives, per KB, the
share of KB questions routed to the KB alone and of web questions whose route includes the
web; the rule picks the threshold with the largest worst-case margin over the targets
(KB-only 0.85, web 0.95) across KBs, and leave one KB out shows what the others choose.

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_routing --home /work/bench-home

Data sets are read from ``--data-dir`` (default ../shared/data), never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import parser
from tools.evaluation.datasets import BeirData, load_beir, read_jsonl, to_documents
from tools.kb.ingest.loaders import SourceDocument, content_hash
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.policy.offline import KB_PROBE_STRONG, offline_route

THRESHOLDS = [round(0.025 * i, 3) for i in range(1, 25)]
TARGET_KB_ONLY, TARGET_WEB = 0.85, 0.95


def crud_documents(path: Path, n: int) -> list[SourceDocument]:
    docs = []
    for row in list(read_jsonl(path))[:n]:
        text = str(row.get("text") or "")
        if text.strip():
            doc_id = f"crud:{row['_id']}"
            docs.append(SourceDocument(doc_id, doc_id, text, content_hash(text), False))
    return docs


def kb_questions(kb: KnowledgeBase, data: BeirData, doc_ids: set[str]) -> list[tuple[str, float]]:
    """(question, probe) of the questions the KB answers (a judged document in the top five)."""
    pairs = []
    for qid in sorted(data.qrels):
        if not set(data.qrels[qid]) & doc_ids:
            continue
        found = kb.retrieve(data.queries[qid], 5)
        if any(h.doc_id in data.qrels[qid] for h in found.hits):
            pairs.append((data.queries[qid], found.answerability))
    return pairs


def collect(args: argparse.Namespace) -> dict[str, Any]:
    d = args.data_dir
    fresh = [
        str(r["question"])
        for r in read_jsonl(d / "freshqa" / "freshqa_dev.jsonl")
        if r.get("fact_type") == "fast-changing"
    ]
    rgb = [str(r["query"]) for r in read_jsonl(d / "rgb" / "zh_refine_dev.json")]
    out: dict[str, Any] = {}
    for name in args.kbs:
        kb = KnowledgeBase(
            KBConfig(home=args.home, collection=f"route-{name}-e5", embedding=args.embedding)
        )
        started = time.perf_counter()
        if name == "scifact":
            data = load_beir(d / "beir_scifact", "train")
            docs = to_documents(data)[: args.docs]
        elif name == "cmrc":
            data = load_beir(d / "cmrc2018_retrieval", "trial")
            docs = to_documents(data)
        else:
            data, docs = (
                None,
                crud_documents(d / "crud_rag_news_sample" / "news_sample.jsonl", args.docs),
            )
        report = kb.ingest_documents(docs)
        print(
            f"# {name}: {report.summary()} ({time.perf_counter() - started:.0f} s)", file=sys.stderr
        )
        ids = {x.doc_id for x in docs}
        out[name] = {
            "docs": len(docs),
            "kb": kb_questions(kb, data, ids) if data else [],
            "web": [(q, kb.probe(q)) for q in fresh],
            "news": [(q, kb.probe(q)) for q in rgb] if name != "crud" else [],
        }
        kb.close()
    return out


def web_share(pairs: list[tuple[str, float]], t: float) -> float | None:
    routes = [offline_route(q, p, strong=t).route for q, p in pairs]
    return sum(r in ("search", "both") for r in routes) / len(routes) if routes else None


def shares(entry: dict[str, Any], t: float) -> tuple[float | None, float]:
    kb_only = None
    if entry["kb"]:
        routes = [offline_route(q, p, strong=t).route for q, p in entry["kb"]]
        kb_only = routes.count("knowledge") / len(routes)
    return kb_only, web_share(entry["web"], t) or 0.0


def gaps(
    table: dict[str, dict[float, tuple[float | None, float]]], kbs: list[str], t: float
) -> list[float]:
    """Each KB's distance to the targets at ``t`` (negative: a target missed)."""
    out = []
    for k in kbs:
        kb_only, web = table[k][t]
        out.append(web - TARGET_WEB)
        if kb_only is not None:
            out.append(kb_only - TARGET_KB_ONLY)
    return out


def margin(
    table: dict[str, dict[float, tuple[float | None, float]]], kbs: list[str], t: float
) -> float:
    return min(gaps(table, kbs, t))


def choose(table: dict[str, dict[float, tuple[float | None, float]]], kbs: list[str]) -> float:
    """The largest worst-case margin over the targets; ties go to the larger mean margin."""

    def key(t: float) -> tuple[float, float]:
        g = gaps(table, kbs, t)
        return round(min(g), 6), sum(g) / len(g)

    return max(THRESHOLDS, key=key)


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--embedding", default="local:e5")
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--kbs", type=lambda s: s.split(","), default=["scifact", "cmrc", "crud"])
    ap.add_argument("--cache", type=Path, default=None, help="probes JSON (reused when present)")
    args = ap.parse_args(argv)
    if args.cache and args.cache.exists():
        probes = json.loads(args.cache.read_text(encoding="utf-8"))
    else:
        probes = collect(args)
        if args.cache:
            args.cache.write_text(json.dumps(probes, ensure_ascii=False), encoding="utf-8")
    print(f"\n## routes by KB probe threshold (shipped: {KB_PROBE_STRONG})")
    print("kb-only = share of the questions the KB answers routed to the KB alone;")
    print("fast = share of FreshQA dev fast-changing questions whose route includes the web;")
    print("(news = RGB zh news questions with the web, reported, not a target)")
    header = " ".join(
        f"{k + ' kb-only':>15} {k + ' fast':>10}"
        + (f" {k + ' news':>10}" if probes[k]["news"] else "")
        for k in probes
    )
    print(f"{'t':>5} {header} {'margin':>7}")
    table: dict[str, dict[float, tuple[float | None, float]]] = {}
    for k, entry in probes.items():
        table[k] = {t: shares(entry, t) for t in THRESHOLDS}
    names = list(probes)
    for t in THRESHOLDS:
        cells = []
        for k in names:
            kb_only, web = table[k][t]
            cell = f"{'-' if kb_only is None else f'{kb_only:.3f}':>15} {web:>10.3f}"
            news = web_share(probes[k]["news"], t)
            cells.append(cell + (f" {news:>10.3f}" if news is not None else ""))
        print(f"{t:>5.3f} {' '.join(cells)} {margin(table, names, t):>+7.3f}")
    best = choose(table, names)
    print(f"\nlargest worst-case margin (ties: larger mean margin): t = {best}")
    print("\n## leave one KB out (choose on the others, judged on the one left out)")
    for held in names:
        others = [k for k in names if k != held]
        t = choose(table, others)
        kb_only, web = table[held][t]
        shown = "-" if kb_only is None else f"{kb_only:.3f}"
        print(f"{held:<8} chosen t = {t:.3f}: kb-only {shown}, fast {web:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
