"""The model-mode refusal rule on RGB zh dev, with scripted answers (no model, no KB).

For every RGB zh dev question the sources are labelled as the answer prompt shows them
([内部-1] ...), and four scripted answers go through ``tools.policy.refusal.check_answer``
(the rule ``cite`` applies to every model-written answer of both graphs):

* negatives only (5 passages, none holds the answer):
  - ``memory``: the gold answer stated as a fact, citing [内部-1] (a model answering from
    what it knows): should become 没找到相关信息;
  - ``reworded``: a refusal in other words ("资料中没有提到…"): should become the canonical one;
  - ``on-topic``: the negatives' best-matching sentence quoted with its label (a model
    mistaking same-event news for the answer): the rule cannot tell this from a right
    answer by the words, and the table says how often it lets it through;
* 3 positive + 2 negative passages:
  - ``faithful``: the positive sentence holding the gold answer, with its label: kept;
  - ``short``: "答案是<gold> [内部-k]": kept.

    .venv/bin/python -m bench.bench_refusal [--max-questions N]

``--offline`` measures instead the offline answers' "not found" (issue 56) on every dev
set with negatives, as ``hybrid-rag eval rgb`` does (a throw-away KB per question, the
state graph offline, no web): RGB zh dev (3 positive + 2 negative passages: accuracy; 5
negatives: rejection) and an English set arranged the same way in memory from XQuAD's
English questions (its own paragraph + the nearest other English paragraphs of the
corpus, which are mostly of the same article: topically near, without the answer).
``--sweep`` first prints, per set, the share of negative and answerable passage sets the
coverage rule (``tools.policy.relevance.not_found`` over strong evidence: rule 3 alone)
calls not found at each ``MIN_PASSAGE_COVERAGE``, the value chosen on all sets together
and the value each set gets when chosen on the others (leave one set out; no graph run),
then the ceiling of any rule that reads words: the negatives with one sentence holding
every key term of the question (same-event news), which no such rule can tell from an
answer:

    .venv/bin/python -m bench.bench_refusal --offline --sweep --data-dir D --home H
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness import need, parser
from bench.not_found_sets import offline_figures, sweep, word_rule_ceiling
from tools.evaluation.datasets import read_jsonl
from tools.policy.offline import extractive_answer
from tools.policy.refusal import check_answer
from tools.text import split_sentences


def gold_texts(gold: Any) -> list[str]:
    parts = gold if isinstance(gold, list) else [gold]
    return [str(p[0] if isinstance(p, list) else p) for p in parts]


def labelled(passages: list[str]) -> list[dict[str, Any]]:
    return [
        {"label": f"[内部-{i}]", "kind": "internal", "number": i, "text": t, "relevance": 1.0}
        for i, t in enumerate(passages, 1)
    ]


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True, home=True)
    ap.add_argument("--max-questions", type=int, default=None)
    ap.add_argument("--offline", action="store_true", help="the offline answers' not found")
    ap.add_argument("--sweep", action="store_true", help="with --offline: the rule's sweep")
    ap.add_argument("--embedding", default="local")
    args = ap.parse_args(argv)
    path = args.data_dir / "rgb" / "zh_refine_dev.json"
    need(path)
    if args.offline:
        if args.sweep:
            sweep(args.data_dir, args.max_questions)
            word_rule_ceiling(args.data_dir, args.max_questions)
        offline_figures(args.data_dir, args.max_questions, args.embedding, args.home)
        return 0
    return scripted(path, args.max_questions)


def scripted(path: Path, max_questions: int | None) -> int:
    """The model-mode refusal rule on scripted answers (the module docstring)."""
    refused = {"memory": 0, "reworded": 0, "on-topic": 0, "faithful": 0, "short": 0}
    counts = dict.fromkeys(refused, 0)
    for row in list(read_jsonl(path))[: max_questions or None]:
        q, golds = str(row["query"]), gold_texts(row.get("answer"))
        neg = labelled([str(t) for t in (row.get("negative") or [])[:5] if str(t).strip()])
        mixed = labelled(
            [str(t) for t in [*(row.get("positive") or [])[:3], *(row.get("negative") or [])[:2]]]
        )
        cases: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        if neg and not any(g in s["text"] for g in golds for s in neg):
            cases["memory"] = (f"{'、'.join(golds)}。[内部-1]", neg)
            cases["reworded"] = ("资料中没有提到这个问题的答案。", neg)
            quoted = extractive_answer(q, neg, "zh", max_sentences=1)
            if "[内部-" in quoted:
                cases["on-topic"] = (quoted, neg)
        for src in mixed[:3]:
            hits = [s for s in split_sentences(src["text"]) if golds[0] in s]
            if hits:
                cases["faithful"] = (f"{hits[0]} {src['label']}", mixed)
                cases["short"] = (f"答案是{golds[0]} {src['label']}", mixed)
                break
        for name, (answer, given) in cases.items():
            cited = [s for s in given if s["label"] in answer]
            counts[name] += 1
            refused[name] += check_answer(answer, q, cited, "zh", given=given).refused
    print("\n## model-mode refusal rule on RGB zh dev (scripted answers)")
    print(f"{'answer':<10} {'questions':>9} {'refused':>8}  wanted")
    wanted = {"memory": "refused", "reworded": "refused", "on-topic": "refused (hard)"}
    for name in refused:
        share = refused[name] / counts[name] if counts[name] else 0.0
        print(f"{name:<10} {counts[name]:>9} {share:>8.3f}  {wanted.get(name, 'kept')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
