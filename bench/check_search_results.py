"""The knowledge base's search results on dev sets, written or compared: ranking unchanged.

Two knowledge bases in two languages (xquad_bilingual cross and same: the per-language
pools, the gate, centring) and one mostly Chinese (RGB zh, with its few English chunks)
are ingested with the deterministic hash embedder; every question (RGB: the first
``--rgb-queries``) is searched in each mode (``retrieve``: chunk ids, fused scores,
relevances, raw scores, the calibrated answerability) and with a keyword half of it
(``retrieve_many`` with the question as anchor). Run it before a change (``--write``) and
after (``--compare``): a refactor left the search alone when nothing differs.

    .venv/bin/python -m bench.check_search_results --write /tmp/search-before.jsonl
    .venv/bin/python -m bench.check_search_results --compare /tmp/search-before.jsonl
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import need, parser
from tools.evaluation.datasets import load_beir, to_documents
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

SETS = (
    ("xquad_cross", "xquad_bilingual/xquad_bilingual_cross"),
    ("xquad_same", "xquad_bilingual/xquad_bilingual_same"),
    ("rgb", "rgb/derived_retrieval/zh_refine"),
)
MODES = ("hybrid", "vector", "bm25")


def searched(kb: KnowledgeBase, name: str, qid: str, q: str) -> list[list[Any]]:
    """One question's rows: each mode's hits and answerability, then ``retrieve_many``."""
    rows: list[list[Any]] = []
    for mode in MODES:
        r = kb.retrieve(q, 10, mode=mode)
        hits = [
            [
                h.chunk_id,
                round(h.fused_score, 12),
                round(h.relevance, 12),
                None if h.vector_score is None else round(h.vector_score, 9),
                round(h.bm25_score, 9),
            ]
            for h in r.hits
        ]
        rows.append([name, qid, mode, round(r.answerability, 12), hits])
    many = kb.retrieve_many([q, q[: max(1, len(q) // 2)]], 5, anchor=q)
    scores = [round(x.answerability, 12) for x in many]
    rows.append([name, qid, "many", scores, [[h.chunk_id for h in x.hits] for x in many]])
    return rows


def results(data_dir: Path, rgb_queries: int) -> list[list[Any]]:
    from tests.fakes import hash_model

    rows: list[list[Any]] = []
    for name, folder in SETS:
        data = load_beir(need(data_dir / folder))
        home = Path(tempfile.mkdtemp(prefix="check-search-")) / "home"
        with KnowledgeBase(
            KBConfig(home=home, collection=name), embedding_model=hash_model()
        ) as kb:
            kb.ingest_documents(to_documents(data))
            qids = sorted(data.queries)[: rgb_queries if name == "rgb" else None]
            for qid in qids:
                rows += searched(kb, name, qid, data.queries[qid])
        print(f"{name}: {len(qids)} questions", file=sys.stderr)
    return rows


def main() -> None:
    ap = parser(__doc__, data=True)
    ap.add_argument("--rgb-queries", type=int, default=150)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the results (JSON lines) here")
    group.add_argument("--compare", type=Path, help="compare the results with this file")
    args = ap.parse_args()
    found = [
        json.dumps(row, ensure_ascii=False) for row in results(args.data_dir, args.rgb_queries)
    ]
    if args.write:
        args.write.write_text("\n".join(found) + "\n", encoding="utf-8")
        print(f"{len(found)} searches written to {args.write}")
        return
    before = args.compare.read_text(encoding="utf-8").splitlines()
    differ = sum(a != b for a, b in zip(before, found, strict=False)) + abs(
        len(before) - len(found)
    )
    print(f"{len(found)} searches, {differ} differ from {args.compare}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
