"""The dev sets with negatives for ``bench_refusal --offline`` (issue 56): RGB zh dev as
it is, and an English set arranged like it in memory from XQuAD's English questions.
Read in place from ``--data-dir``; nothing is written into the repository."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli.eval_answers import evaluate_rgb
from tools.evaluation.datasets import read_jsonl
from tools.policy import relevance
from tools.text import detect_language, split_sentences

NEGATIVES = 5  # passages of a negatives-only set, as RGB's
FALSE_REFUSAL_COST = 2.0  # a right answer refused weighs two negatives answered
GRID = [0.3, 0.4, 0.5, 0.6, 0.67, 0.75, 0.8, 0.9, 1.0]


def rgb_rows(data_dir: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(data_dir / "rgb" / "zh_refine_dev.json"))


def xquad_rows(data_dir: Path) -> list[dict[str, Any]]:
    """XQuAD's English questions (same-language split) as RGB rows: ``positive`` its own
    paragraph, ``negative`` the nearest other English paragraphs in corpus order (the
    same article's first) that do not hold any of its answers."""
    base = data_dir / "xquad_bilingual" / "xquad_bilingual_same"
    corpus = list(read_jsonl(base / "corpus.jsonl"))
    english = [i for i, d in enumerate(corpus) if (d.get("metadata") or {}).get("lang") == "en"]
    position = {str(d["_id"]): i for i, d in enumerate(corpus)}
    own: dict[str, str] = {}
    for line in (base / "qrels" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        own[qid] = doc
    rows = []
    for q in read_jsonl(base / "queries.jsonl"):
        meta = q.get("metadata") or {}
        if meta.get("doc_lang") != "en" or str(q["_id"]) not in own:
            continue
        at = position[own[str(q["_id"])]]
        answers = [str(a) for a in meta.get("answers") or []]
        near = sorted((i for i in english if i != at), key=lambda i: (abs(i - at), i))
        negatives = [
            str(corpus[i]["text"])
            for i in near
            if not any(a.casefold() in str(corpus[i]["text"]).casefold() for a in answers)
        ][:NEGATIVES]
        rows.append(
            {
                "id": q["_id"],
                "query": q["text"],
                "answer": [answers],  # one part, its alternatives
                "positive": [str(corpus[at]["text"])],
                "negative": negatives,
            }
        )
    return rows


def dev_sets(data_dir: Path, max_questions: int | None) -> dict[str, list[dict[str, Any]]]:
    """Each set's rows; ``max_questions`` evenly spread over a set."""
    sets = {"rgb-zh": rgb_rows(data_dir), "xquad-en": xquad_rows(data_dir)}
    if max_questions:
        for name, rows in sets.items():
            step = max(1, len(rows) // max_questions)
            sets[name] = rows[::step][:max_questions]
    return sets


@contextmanager
def coverage(value: float) -> Iterator[None]:
    saved = relevance.MIN_PASSAGE_COVERAGE
    relevance.MIN_PASSAGE_COVERAGE = value
    try:
        yield
    finally:
        relevance.MIN_PASSAGE_COVERAGE = saved


def _flagged(question: str, passages: list[str]) -> bool:
    lang = detect_language(question)
    # Answerability 1.0: the coverage rule alone (rule 3). The absent-word rule reads the
    # searches' calibrated answerability, which only a search gives: offline_figures.
    sources = [
        {"text": t, "lang": detect_language(t) or lang, "answerability": 1.0}
        for t in passages
        if t.strip()
    ]
    return bool(relevance.not_found(question, sources)) if sources else True


def rates(rows: list[dict[str, Any]], value: float) -> tuple[float, float]:
    """(negative sets called not found, answerable sets called not found) at ``value``,
    the rule over all the passages of a set (a 5-passage KB returns them all)."""
    with coverage(value):
        neg = [_flagged(r["query"], list(r["negative"])[:NEGATIVES]) for r in rows]
        pos = [
            _flagged(r["query"], [*list(r["positive"])[:3], *list(r["negative"])[:2]]) for r in rows
        ]
    return sum(neg) / len(neg), sum(pos) / len(pos)


def choose(table: dict[str, dict[float, tuple[float, float]]], names: list[str]) -> float:
    """The value with the best sum over ``names`` of negatives rejected minus
    ``FALSE_REFUSAL_COST`` times answerable sets refused (a refusal that hides a right
    answer costs more than a wrong quote); ties go to the lower value."""
    return max(
        GRID,
        key=lambda v: (
            sum(table[n][v][0] - FALSE_REFUSAL_COST * table[n][v][1] for n in names),
            -v,
        ),
    )


def sweep(data_dir: Path, max_questions: int | None) -> dict[str, float]:
    """Print the rule's sweep per set, the value chosen on all sets together and the one
    each set gets when chosen on the others (leave one set out)."""
    sets = dev_sets(data_dir, max_questions)
    table = {name: {v: rates(rows, v) for v in GRID} for name, rows in sets.items()}
    print("\n## the evidence rule alone: not found on negatives / on answerable sets")
    print(f"{'MIN_PASSAGE_COVERAGE':>20} " + " ".join(f"{n:>17}" for n in table))
    for v in GRID:
        cells = " ".join(f"{table[n][v][0]:>8.3f}/{table[n][v][1]:<8.3f}" for n in table)
        print(f"{v:>20.2f} {cells}")
    chosen = {"all": choose(table, list(table))}
    print(f"chosen on all sets: {chosen['all']:.2f} (shipped {relevance.MIN_PASSAGE_COVERAGE})")
    for held in table:
        chosen[held] = choose(table, [n for n in table if n != held])
        print(f"left out {held}: chosen on the others {chosen[held]:.2f}")
    return chosen


def best_sentence_coverage(question: str, passages: list[str]) -> float:
    """The largest share of the question's key terms one sentence of ``passages`` holds."""
    return max(
        (relevance.term_coverage(question, s) for p in passages for s in split_sentences(p)),
        default=0.0,
    )


def word_rule_ceiling(data_dir: Path, max_questions: int | None) -> dict[str, tuple[float, float]]:
    """Per set: the share of negative sets with a sentence holding every key term of the
    question, and of answerable sets without one. A rule that reads which key terms the
    passages hold cannot refuse the first without refusing the answerable sets that look
    the same (their answer sentence holds every key term too), so one minus it bounds
    such a rule's rejection; refusing every set without such a sentence costs the second
    in answerable sets refused."""
    out: dict[str, tuple[float, float]] = {}
    print("\n## ceiling of word rules: negatives with a sentence holding every key term")
    for name, rows in dev_sets(data_dir, max_questions).items():
        full_neg = [
            best_sentence_coverage(r["query"], list(r["negative"])[:NEGATIVES]) >= 1.0 for r in rows
        ]
        pos = [[*list(r["positive"])[:3], *list(r["negative"])[:2]] for r in rows]
        short_pos = [
            best_sentence_coverage(r["query"], p) < 1.0 for r, p in zip(rows, pos, strict=True)
        ]
        out[name] = (sum(full_neg) / len(rows), sum(short_pos) / len(rows))
        print(
            f"{name:<10} n={len(rows):<4} negatives with such a sentence {out[name][0]:.3f} "
            f"(rejection <= {1 - out[name][0]:.3f}); answerable sets without one {out[name][1]:.3f}"
        )
    return out


def offline_figures(
    data_dir: Path, max_questions: int | None, embedding: str, home: Path | None
) -> dict[str, Any]:
    """Accuracy (3 positive + 2 negative passages) and rejection (5 negatives) of the
    offline state graph per set, at the shipped defaults."""
    home = home or Path(tempfile.mkdtemp(prefix="bench-not-found-"))
    home.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    print("\n## offline answers: accuracy / rejection (state graph, shipped defaults)")
    for name, rows in dev_sets(data_dir, max_questions).items():
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        path = Path(f.name)
        try:
            runs = {
                neg: evaluate_rgb(path, negatives_only=neg, embedding=embedding, home=home)
                for neg in (False, True)
            }
        finally:
            path.unlink()
        acc, rej = runs[False]["accuracy"], runs[True]["rejection_rate"]
        out[name] = {"questions": len(rows), "accuracy": acc, "rejection": rej}
        print(f"{name:<10} n={len(rows):<4} accuracy {acc:.3f}  rejection {rej:.3f}")
    return out
