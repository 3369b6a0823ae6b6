"""The offline answers on ``examples/questions.jsonl``, written or compared: behaviour unchanged.

Both graphs (the state graph and the tool agent) answer every question of the sample set
offline (``model=offline``, no web search) over the sample knowledge base, and what a
user sees of each answer (route, answer text, citations, warnings, confidence) is written
as JSON lines. Run it before a change (``--write``) and after it (``--compare``): the
refactor left behaviour alone when nothing differs.

    .venv/bin/python -m bench.check_offline_answers --write /tmp/before.jsonl
    .venv/bin/python -m bench.check_offline_answers --compare /tmp/before.jsonl

``--embedding hash`` uses deterministic hash embeddings instead of the bundled local model
(faster, no model load; compare like with like).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import SAMPLE_KB, SAMPLE_QUESTIONS, parser
from graph import Context, build_agent_graph, build_graph
from run import resources
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

SHOWN = ("route", "answer", "citations", "warnings", "confidence", "kb_confidence")
VOLATILE = ("ingested_at",)  # when this run ingested the sample KB
WEB_KEYS = ("SERPER_API_KEY", "TAVILY_API_KEY", "BRAVE_API_KEY", "OPENAI_API_KEY")


def shown(out: dict[str, Any]) -> dict[str, Any]:
    """What a user sees of one answer, rounded where floats would add noise."""
    row: dict[str, Any] = {}
    for key in SHOWN:
        value = out.get(key)
        row[key] = round(value, 6) if isinstance(value, float) else value
    row["citations"] = [
        {k: v for k, v in c.items() if k not in VOLATILE} for c in row["citations"] or []
    ]
    return json.loads(json.dumps(row, default=str, ensure_ascii=False))


async def answers(embedding: str) -> list[dict[str, Any]]:
    """Every question through both graphs, offline, over a fresh sample knowledge base."""
    for key in WEB_KEYS:
        os.environ.pop(key, None)
    home = Path(tempfile.mkdtemp(prefix="check-offline-")) / "home"
    if embedding == "hash":
        from tests.fakes import hash_model

        kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
        kb.ingest([SAMPLE_KB])
        resources.register_kb(kb)
    else:
        KnowledgeBase(KBConfig(home=home)).ingest([SAMPLE_KB])
    context = Context(
        model="offline", fast_model="offline", search_provider="none", data_home=str(home)
    )
    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.open(encoding="utf-8")]
    found: list[dict[str, Any]] = []
    for name, graph in (("state", build_graph()), ("agent", build_agent_graph())):
        for q in rows:
            out = await graph.ainvoke({"question": q["question"]}, context=context)
            found.append({"id": q["id"], "graph": name, **shown(out)})
    resources.close_all()
    return found


def compare(found: list[dict[str, Any]], path: Path) -> int:
    """Print each answer that differs from ``path``'s; the number of differences."""
    before = [json.loads(line) for line in path.open(encoding="utf-8")]
    differ = 0
    for old, new in zip(before, found, strict=False):
        if old != new:
            differ += 1
            print(f"differs: {old['graph']} {old['id']}\n  before {old}\n  after  {new}")
    if len(before) != len(found):
        differ += 1
        print(f"differs: {len(before)} answers before, {len(found)} now")
    return differ


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--embedding", choices=("local", "hash"), default="local")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the answers (JSON lines) here")
    group.add_argument("--compare", type=Path, help="compare the answers with this file")
    args = ap.parse_args()
    found = asyncio.run(answers(args.embedding))
    if args.write:
        lines = (json.dumps(row, ensure_ascii=False, sort_keys=True) for row in found)
        args.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{len(found)} answers written to {args.write}")
        return
    differ = compare(found, args.compare)
    print(f"{len(found)} answers, {differ} differ from {args.compare}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
