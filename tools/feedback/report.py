"""The feedback part of ``hybrid-rag stats``: how often people vote, how many answers they
turn down, and which documents and questions they turn down most."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tools.feedback.votes import Feedback

TOP = 5  # documents and questions listed


def _question(text: str) -> str:
    return " ".join(text.split())


def feedback_report(items: list[Feedback], runs: int, top: int = TOP) -> dict[str, Any]:
    """Votes, their rate per answered run (``runs``: the run log's count), and the most
    down-voted documents (by cited doc_id) and questions (same words, any user)."""
    down = [f for f in items if f.vote < 0]
    docs = Counter(d for f in down for d in f.doc_ids)
    questions = Counter(_question(f.question) for f in down if f.question.strip())
    return {
        "votes": len(items),
        "up": len(items) - len(down),
        "down": len(down),
        "with_comment": sum(1 for f in items if f.comment),
        "feedback_rate": round(len(items) / runs, 4) if runs else None,
        "down_share": round(len(down) / len(items), 4) if items else None,
        "most_down_voted_documents": [{"doc_id": d, "down": n} for d, n in docs.most_common(top)],
        "most_down_voted_questions": [
            {"question": q, "down": n} for q, n in questions.most_common(top)
        ],
    }


def report_lines(summary: dict[str, Any]) -> list[str]:
    """The report as ``stats`` prints it."""
    rate = summary["feedback_rate"]
    lines = [
        f"{'feedback':<20} {summary['votes']} vote(s): {summary['up']} up, "
        f"{summary['down']} down, {summary['with_comment']} with a comment"
        + (f"; {rate:.1%} of runs" if rate is not None else "")
    ]
    for d in summary["most_down_voted_documents"]:
        lines.append(f"  down-voted document  {d['down']:>3}  {d['doc_id']}")
    for q in summary["most_down_voted_questions"]:
        lines.append(f"  down-voted question  {q['down']:>3}  {q['question'][:100]}")
    return lines
