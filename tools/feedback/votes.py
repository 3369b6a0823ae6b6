"""The feedback store: one SQLite file in the data home (``feedback.sqlite``), shared by
the server's replicas and the CLI as the catalog is (``tools.kb.documents.catalog.SharedFile``).

One row per user and answer: an answer is named by its thread and its text (``answer_key``),
so the page finds a vote again when a thread is reopened, where the run's id is not known;
the run id is kept when the page knew it (it names the LangSmith run). A user reads and
changes only their own rows: every method takes the user.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tools.errors import FieldError, InputError
from tools.kb.documents.catalog import SharedFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    user TEXT NOT NULL, answer_key TEXT NOT NULL, thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL, vote INTEGER NOT NULL, comment TEXT NOT NULL,
    question TEXT NOT NULL, answer TEXT NOT NULL, doc_ids TEXT NOT NULL,
    graph TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (user, answer_key));
CREATE INDEX IF NOT EXISTS feedback_thread ON feedback(user, thread_id);
"""
VOTES = {"up": 1, "down": -1}
MAX_TEXT = 20_000  # characters of a question or an answer kept
MAX_COMMENT = 2_000
MAX_DOCS = 50
MAX_ID = 200
CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def feedback_path(home: Path) -> Path:
    return home / "feedback.sqlite"


def answer_key(thread_id: str, answer: str) -> str:
    """The name of one answer of one thread (the same text in the same thread is one)."""
    return hashlib.sha256(f"{thread_id}\n{answer.strip()}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Feedback:
    """One user's vote on one answer."""

    user: str
    thread_id: str
    vote: int  # +1 up, -1 down
    question: str
    answer: str
    doc_ids: tuple[str, ...] = ()
    comment: str = ""
    run_id: str = ""
    graph: str = ""
    created: float = 0.0
    updated: float = 0.0
    answer_key: str = field(default="")

    def view(self) -> dict[str, Any]:
        """The record as the API answers it."""
        out = asdict(self)
        out["vote"] = "up" if self.vote > 0 else "down"
        out["doc_ids"] = list(self.doc_ids)
        return out


def _text(body: dict[str, Any], name: str, limit: int, required: bool = False) -> str:
    value = body.get(name, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise InputError(f"{name} is missing: send the {name.replace('_', ' ')}")
    if len(value.strip()) > limit:
        raise FieldError(f"{name} is {len(value.strip()):,} characters, over its {limit:,} limit")
    return value.strip()


def _ident(value: str, name: str) -> str:
    """An id (a document's, a thread's, a run's): at most ``MAX_ID`` characters and no
    control character (a tab or a newline would split the export's TSV rows)."""
    if len(value) > MAX_ID:
        raise FieldError(f"{name} is {len(value):,} characters, over its {MAX_ID} limit")
    if CONTROL.search(value):
        raise FieldError(f"{name} {value[:40]!r} holds a control character (tab, newline, ...)")
    return value


def _doc_ids(body: dict[str, Any]) -> tuple[str, ...]:
    docs = body.get("doc_ids") or []
    if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
        raise InputError("doc_ids must be a list of strings (the cited documents' ids)")
    if len(docs) > MAX_DOCS:
        raise FieldError(f"doc_ids has {len(docs)} entries, over its {MAX_DOCS} limit")
    ids = (_ident(d.strip(), f"doc_ids[{i}]") for i, d in enumerate(docs))
    return tuple(dict.fromkeys(d for d in ids if d))


def parse_feedback(user: str, body: Any) -> Feedback:
    """A vote from a request's JSON body, or ``InputError`` naming the problem."""
    if not isinstance(body, dict):
        raise InputError(
            'send a JSON object: {"thread_id", "question", "answer", "vote": "up"|"down", '
            '"comment", "doc_ids", "run_id"}'
        )
    vote = body.get("vote")
    if vote not in VOTES:
        raise InputError(f"vote must be 'up' or 'down', got {vote!r}")
    docs = _doc_ids(body)
    thread = _ident(_text(body, "thread_id", MAX_ID, required=True), "thread_id")
    answer = _text(body, "answer", MAX_TEXT, required=True)
    return Feedback(
        user=user,
        thread_id=thread,
        vote=VOTES[vote],
        question=_text(body, "question", MAX_TEXT),
        answer=answer,
        doc_ids=docs,
        comment=_text(body, "comment", MAX_COMMENT),
        run_id=_ident(_text(body, "run_id", MAX_ID), "run_id"),
        graph=_ident(_text(body, "graph", MAX_ID), "graph"),
        answer_key=answer_key(thread, answer),
    )


_COLUMNS = (
    "user, answer_key, thread_id, run_id, vote, comment, question, answer, doc_ids, graph, "
    "created, updated"
)


def _row(row: tuple[Any, ...]) -> Feedback:
    user, key, thread, run, vote, comment, question, answer, docs, graph, created, updated = row
    return Feedback(
        user, thread, int(vote), question, answer, tuple(json.loads(docs)), comment, run,
        graph, created, updated, key,
    )  # fmt: skip


class FeedbackStore(SharedFile):
    """Every user's feedback (thread-safe; several processes share the file)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA)

    def put(self, item: Feedback) -> Feedback:
        """Record or change ``item.user``'s vote on the answer (its first time is kept;
        a run id already known is kept when the change does not carry one)."""
        now = time.time()
        with self._tx() as db:
            old = db.execute(
                "SELECT created, run_id FROM feedback WHERE user = ? AND answer_key = ?",
                (item.user, item.answer_key),
            ).fetchone()
            created, run = (old[0], item.run_id or old[1]) if old else (now, item.run_id)
            db.execute(
                f"INSERT OR REPLACE INTO feedback ({_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    item.user, item.answer_key, item.thread_id, run, item.vote, item.comment,
                    item.question, item.answer, json.dumps(list(item.doc_ids)), item.graph,
                    created, now,
                ),
            )  # fmt: skip
        found = self.get(item.user, item.answer_key)
        assert found is not None
        return found

    def get(self, user: str, key: str) -> Feedback | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM feedback WHERE user = ? AND answer_key = ?", (user, key)
            ).fetchone()
        return _row(row) if row else None

    def mine(self, user: str, thread_id: str | None = None, limit: int = 500) -> list[Feedback]:
        """``user``'s feedback, newest first (of one thread when named)."""
        query = f"SELECT {_COLUMNS} FROM feedback WHERE user = ?"
        args: tuple[Any, ...] = (user,)
        if thread_id:
            query, args = query + " AND thread_id = ?", (*args, thread_id)
        with self._lock:
            rows = self._db.execute(f"{query} ORDER BY updated DESC LIMIT ?", (*args, limit))
            return [_row(r) for r in rows.fetchall()]

    def remove(self, user: str, key: str) -> bool:
        with self._tx() as db:
            gone = db.execute(
                "DELETE FROM feedback WHERE user = ? AND answer_key = ?", (user, key)
            ).rowcount
        return gone == 1

    def everything(self) -> list[Feedback]:
        """Every user's feedback (for ``stats`` and the export, which run on the server's
        own machine with its data home, never over HTTP)."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM feedback ORDER BY created")
            return [_row(r) for r in rows.fetchall()]


def read_all(home: Path) -> list[Feedback]:
    """Every feedback of a data home ([] when none was ever given)."""
    path = feedback_path(home)
    if not path.is_file():
        return []
    store = FeedbackStore(path)
    try:
        return store.everything()
    finally:
        store.close()
