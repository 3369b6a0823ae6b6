"""Named sets of documents (``set:<name>`` scopes): one SQLite file in the data home
(``collections.sqlite``), shared by the server's replicas and the runs.

A set belongs to who defined it; it can be changed or removed by them or an admin, and
used by anyone as a scope, which only narrows what they may read (``tools.access.scope``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.access.scope import Scope, make_scope, parse_scope
from tools.errors import FieldError, InputError
from tools.kb.documents.catalog import SharedFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS sets (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, description TEXT NOT NULL,
    doc_ids TEXT NOT NULL, updated REAL NOT NULL);
"""
# A letter or digit first, so no name is ".", "..", hidden or read as an option; no ".."
# anywhere: a set's name goes into URLs and may go into file names.
NAME = re.compile(r"^(?!.*\.\.)[^\W_][\w.-]{0,59}$")
NAME_RULE = "1-60 letters, digits, '.', '-', '_', starting with a letter or digit, no '..'"
MAX_MEMBERS = 10_000


def collections_path(home: Path) -> Path:
    return home / "collections.sqlite"


@dataclass(frozen=True)
class DocumentSet:
    name: str
    owner: str
    description: str
    doc_ids: tuple[str, ...]

    def view(self, visible: frozenset[str] | None = None) -> dict[str, Any]:
        """The set as the API shows it (only the members ``visible`` names, when given)."""
        docs = [d for d in self.doc_ids if visible is None or d in visible]
        return {"name": self.name, "owner": self.owner, "description": self.description,
                "doc_ids": docs, "scope": f"set:{self.name}"}  # fmt: skip


def parse_set(owner: str, body: Any) -> DocumentSet:
    if not isinstance(body, dict):
        raise InputError('send a JSON object: {"name", "description", "doc_ids"}')
    name = body.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise FieldError(f"set name {name!r} is not valid: {NAME_RULE}")
    docs = body.get("doc_ids")
    if not isinstance(docs, list) or not docs or not all(isinstance(d, str) for d in docs):
        raise InputError("doc_ids must be a non-empty list of document ids")
    if len(docs) > MAX_MEMBERS:
        raise InputError(f"a set holds at most {MAX_MEMBERS} documents, got {len(docs)}")
    description = body.get("description") or ""
    if not isinstance(description, str):
        raise InputError("description must be a string")
    return DocumentSet(name, owner, description.strip()[:500], tuple(dict.fromkeys(docs)))


_INSERT = "INTO sets (name, owner, description, doc_ids, updated) VALUES (?, ?, ?, ?, ?)"


def _values(item: DocumentSet) -> tuple[str, str, str, str, float]:
    return item.name, item.owner, item.description, json.dumps(item.doc_ids), time.time()


class CollectionStore(SharedFile):
    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA)

    def put(self, item: DocumentSet) -> None:
        with self._tx() as db:
            db.execute(f"INSERT OR REPLACE {_INSERT}", _values(item))

    def create(self, item: DocumentSet) -> bool:
        """Add ``item``; False when a set of its name exists (one statement, so of two
        requests creating one name at once exactly one succeeds)."""
        with self._tx() as db:
            return db.execute(f"INSERT OR IGNORE {_INSERT}", _values(item)).rowcount == 1

    def get(self, name: str) -> DocumentSet | None:
        with self._lock:
            row = self._db.execute(
                "SELECT name, owner, description, doc_ids FROM sets WHERE name = ?", (name,)
            ).fetchone()
        return DocumentSet(row[0], row[1], row[2], tuple(json.loads(row[3]))) if row else None

    def all(self) -> list[DocumentSet]:
        with self._lock:
            rows = self._db.execute(
                "SELECT name, owner, description, doc_ids FROM sets ORDER BY name"
            ).fetchall()
        return [DocumentSet(r[0], r[1], r[2], tuple(json.loads(r[3]))) for r in rows]

    def remove(self, name: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM sets WHERE name = ?", (name,))


_lock = threading.Lock()
_stores: dict[Path, CollectionStore] = {}


def collection_store(home: Path) -> CollectionStore:
    """The data home's store (opened once per process)."""
    path = collections_path(home)
    with _lock:
        if path not in _stores:
            _stores[path] = CollectionStore(path)
        return _stores[path]


def set_members(home: Path, name: str) -> frozenset[str]:
    """The doc_ids of the set ``name`` of ``home``; an unknown set is an ``InputError``
    naming it, never "every document"."""
    found = collection_store(home).get(name) if collections_path(home).is_file() else None
    if found is None:
        raise InputError(f"no document set named {name!r} (scope 'set:{name}')")
    return frozenset(found.doc_ids)


def resolve_scope(text: str, home: Path) -> Scope | None:
    """The scope of a run's ``scope`` field (no file is read now: a set's members are read
    by the first search that needs them, off the event loop)."""
    parsed = parse_scope(text)
    if parsed is None or parsed[0] != "set":
        return make_scope(text)
    name = parsed[1]
    return make_scope(text, loader=lambda: set_members(home, name))
