"""Conversations shared read-only with named colleagues or groups.

The owner of a thread shares it with principals (``user:bob``, ``group:hr``); the list is
the server's, kept in ``thread_shares.sqlite`` in the data home, never in the thread's
metadata a client could set. With it the store keeps the conversation as it was when
shared (each question, answer and the answer's citations), refreshed whenever its owner
shares it again (the page does after each answer in a shared thread): a reader gets that
copy, never the thread itself, so nothing of the run's state (passages, graded chunks)
reaches them. What a reader sees of a citation is decided at each read
(``visible_turns``): a document they may not read is "a source you cannot open" (its
label only, ``withheld``), whatever it was when shared.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.access.acl import ACL

FILE_NAME = "thread_shares.sqlite"
MAX_LISTED = 500  # threads listed as shared with one reader
MAX_SCANNED = 20000  # the newest shares looked through for them
_SCHEMA = """CREATE TABLE IF NOT EXISTS shares (thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL,
principals TEXT NOT NULL, title TEXT NOT NULL, turns TEXT NOT NULL, updated REAL NOT NULL)"""
Turn = dict[str, Any]  # {"question", "answer", "citations": [...]}


@dataclass(frozen=True)
class SharedThread:
    thread_id: str
    owner: str
    principals: ACL
    title: str
    turns: list[Turn]
    updated: float

    def summary(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "owner": self.owner, "title": self.title,
                "updated": self.updated}  # fmt: skip


def may_read_thread(identity: str, principals: Collection[str], share: SharedThread) -> bool:
    """Whether the caller (``identity``, their ``principals``: ``user:`` and ``group:``)
    may read the shared copy: its owner, or a principal it is shared with. No one else,
    admins included: a conversation is shared by name."""
    return identity == share.owner or any(p in principals for p in share.principals)


def withheld(citation: Mapping[str, Any]) -> dict[str, Any]:
    """A citation of a document the reader may not open: its label only."""
    return {"label": citation.get("label"), "type": "internal", "withheld": True}


def visible_turns(turns: Iterable[Turn], may_read_doc: Callable[[str], bool]) -> list[Turn]:
    """The turns as a reader sees them: a web citation as it is; a document's only when
    ``may_read_doc`` allows its doc_id, else ``withheld`` (no title, text or snippet)."""
    out = []
    for turn in turns:
        cites = [
            dict(c)
            if c.get("type") == "web" or (c.get("doc_id") and may_read_doc(str(c["doc_id"])))
            else withheld(c)
            for c in turn.get("citations", [])
            if isinstance(c, Mapping)
        ]
        out.append({**turn, "citations": cites})
    return out


class ThreadShares:
    """The shares of one data home (thread-safe; several processes share the file)."""

    def __init__(self, home: Path) -> None:
        self.path = home / FILE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._db() as db:
            db.execute(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 10000")
        return db

    def put(self, share: SharedThread) -> None:
        row = (share.thread_id, share.owner, ",".join(share.principals), share.title,
               json.dumps(share.turns), share.updated)  # fmt: skip
        with self._lock, closing(self._db()) as db:
            db.execute("INSERT OR REPLACE INTO shares VALUES (?, ?, ?, ?, ?, ?)", row)

    def remove(self, thread_id: str) -> None:
        with self._lock, closing(self._db()) as db:
            db.execute("DELETE FROM shares WHERE thread_id = ?", (thread_id,))

    def get(self, thread_id: str) -> SharedThread | None:
        with self._lock, closing(self._db()) as db:
            row = db.execute("SELECT * FROM shares WHERE thread_id = ?", (thread_id,)).fetchone()
        return None if row is None else _share(row)

    def shared_with(self, identity: str, principals: Collection[str]) -> list[SharedThread]:
        """The threads shared with the caller (not their own), newest first."""
        with self._lock, closing(self._db()) as db:
            rows = db.execute("SELECT * FROM shares WHERE owner != ? ORDER BY updated DESC LIMIT ?",
                              (identity, MAX_SCANNED)).fetchall()  # fmt: skip
        found = [s for s in map(_share, rows) if may_read_thread(identity, principals, s)]
        return found[:MAX_LISTED]


def _share(row: tuple[Any, ...]) -> SharedThread:
    thread_id, owner, principals, title, turns, updated = row
    acl = tuple(p for p in str(principals).split(",") if p)
    return SharedThread(str(thread_id), str(owner), acl, str(title), json.loads(turns), updated)


def now() -> float:
    return time.time()
