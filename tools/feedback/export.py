"""``hybrid-rag eval export-feedback``: the feedback as a data set in the BEIR layout that
``hybrid-rag eval retrieval`` and ``eval calibration`` read.

* ``corpus.jsonl``: the knowledge base's documents (their chunks joined, in order), so the
  evaluation indexes what the users' questions were asked of;
* ``queries.jsonl``: one query per answer people voted on (``_id`` ``fb-<key>``), with the
  vote, the comment and the answer as extra fields;
* ``qrels/feedback.tsv``: for an up-voted answer its cited documents are relevant (grade
  1); for a down-voted one they are the documents that should *not* have been cited
  (grade 0, which the evaluation reads as not relevant); documents a reviewer names in
  ``expected.tsv`` (``query-id``, ``doc-id``), if the folder already has one, are added
  with grade 1: those are the documents a down-voted answer should have cited;
* ``feedback.jsonl``: every vote as stored, for reading.

The TSV is opened in spreadsheets too: a document id with a control character (a tab or a
newline would add rows; rows stored before votes refused them) is left out, and a cell
starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``
so a spreadsheet shows it as text instead of running it as a formula.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.feedback.votes import CONTROL, Feedback

SPLIT = "feedback"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(text: str) -> str:
    """``text`` safe as a TSV/CSV cell a spreadsheet opens (formula injection)."""
    return "'" + text if text.startswith(FORMULA_START) else text


@dataclass(frozen=True)
class ExportResult:
    folder: Path
    queries: int
    down: int
    documents: int
    qrels: int
    refused: int = 0  # cited ids left out: they hold control characters


def corpus_of(
    texts: Iterable[str], metadatas: Iterable[dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """Documents (``_id``, ``title``, ``text``) from a snapshot's chunks."""
    parts: dict[str, list[tuple[int, str]]] = {}
    titles: dict[str, str] = {}
    for text, meta in zip(texts, metadatas, strict=True):
        doc_id = str(meta.get("doc_id") or "")
        if not doc_id:
            continue
        parts.setdefault(doc_id, []).append((int(meta.get("chunk_index", 0) or 0), text))
        titles.setdefault(doc_id, str(meta.get("title") or ""))
    return {
        d: {"_id": d, "title": titles[d], "text": "\n\n".join(t for _, t in sorted(chunks))}
        for d, chunks in sorted(parts.items())
    }


def _expected(folder: Path) -> dict[str, set[str]]:
    path = folder / "expected.tsv"
    found: dict[str, set[str]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            cells = line.split("\t")
            if len(cells) >= 2 and cells[0] not in ("query-id", "query_id"):
                found.setdefault(cells[0].strip(), set()).add(cells[1].strip())
    return found


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def export_feedback(
    items: list[Feedback], corpus: dict[str, dict[str, str]], folder: Path
) -> ExportResult:
    """Write the data set into ``folder`` (created; its files replaced)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    expected = _expected(folder)
    queries: dict[str, dict[str, Any]] = {}
    grades: dict[tuple[str, str], int] = {}
    refused = 0
    for f in items:
        if not f.question.strip():
            continue
        qid = f"fb-{f.answer_key[:16]}"
        vote = "up" if f.vote > 0 else "down"
        queries[qid] = {"_id": qid, "text": f.question, "vote": vote, "comment": f.comment,
                        "answer": f.answer, "cited": list(f.doc_ids)}  # fmt: skip
        for doc in f.doc_ids:
            if CONTROL.search(doc):
                refused += 1
                continue
            grades[(qid, doc)] = 1 if f.vote > 0 else 0
        for doc in expected.get(qid, ()):
            grades[(qid, doc)] = 1
    _write_jsonl(folder / "corpus.jsonl", corpus.values())
    _write_jsonl(folder / "queries.jsonl", queries.values())
    _write_jsonl(folder / "feedback.jsonl", (f.view() for f in items))
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{cell(q)}\t{cell(d)}\t{g}" for (q, d), g in sorted(grades.items())]
    (folder / "qrels" / f"{SPLIT}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    down = sum(1 for q in queries.values() if q["vote"] == "down")
    return ExportResult(folder, len(queries), down, len(corpus), len(grades), refused)
