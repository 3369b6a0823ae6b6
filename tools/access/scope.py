"""A question's collection: the part of the knowledge base a run searches (the run's
``scope`` context field).

* ``folder:<prefix>``: documents whose path starts with the prefix (``hr/``);
* ``source:<id>``: one synced source's documents; ``source:upload`` the uploaded ones,
  ``source:cli`` those ``hybrid-rag ingest`` added;
* ``set:<name>``: a named set of documents an admin or a user defined
  (``tools.kb.documents.collections``), resolved to its doc_ids when the run starts.

A scope is applied by the ``Reader`` (``tools.access.acl``) on top of the access rules,
so it only ever narrows what a user may read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tools.errors import InputError

KINDS = ("folder", "source", "set")
UPLOAD_PREFIX = "upload:"
SOURCE_PREFIX = "src:"
MAX_SCOPE = 300
PATTERN = r"^(?:|(?:folder|source|set):.{1,300})$"
EXPECTED = "'' (no scope), 'folder:<path prefix>', 'source:<id>' or 'set:<name>'"


def doc_path(doc_id: str) -> str:
    """The path people know a document by: its doc_id without the upload or source mark."""
    if doc_id.startswith(UPLOAD_PREFIX):
        return doc_id[len(UPLOAD_PREFIX) :]
    if doc_id.startswith(SOURCE_PREFIX):
        return doc_id.split(":", 2)[-1]
    return doc_id


def origin_of(doc_id: str) -> str:
    """``upload``, a source's id, or ``cli``."""
    if doc_id.startswith(UPLOAD_PREFIX):
        return "upload"
    if doc_id.startswith(SOURCE_PREFIX):
        return doc_id.split(":", 2)[1]
    return "cli"


@dataclass(frozen=True)
class Scope:
    kind: str
    value: str
    members: frozenset[str] = frozenset()  # a set's doc_ids (or, with a loader, found later)
    # A set's members read when first needed: inside the search's worker thread, never on
    # the server's event loop (the sets are a file in the data home).
    loader: Callable[[], frozenset[str]] | None = field(default=None, compare=False)
    loaded: dict[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)

    def doc_ids(self) -> frozenset[str]:
        if self.loader is None:
            return self.members
        if "members" not in self.loaded:
            self.loaded["members"] = self.loader()
        return self.loaded["members"]

    def allows(self, metadata: Mapping[str, Any]) -> bool:
        doc_id = str(metadata.get("doc_id") or "")
        if self.kind == "folder":
            return doc_path(doc_id).startswith(self.value)
        if self.kind == "source":
            return origin_of(doc_id) == self.value
        return doc_id in self.doc_ids()

    def key(self) -> str:
        members = ",".join(sorted(self.doc_ids())) if self.kind == "set" else ""
        return f"{self.kind}:{self.value}|{members}"


def parse_scope(text: str) -> tuple[str, str] | None:
    """``(kind, value)`` of a scope's text, None for no scope; ``InputError`` naming the
    problem otherwise."""
    text = (text or "").strip()
    if not text:
        return None
    kind, sep, value = text.partition(":")
    value = value.strip()
    if not sep or kind not in KINDS or not value or len(text) > MAX_SCOPE:
        raise InputError(f"scope {text!r} is not valid: write {EXPECTED}")
    if kind == "folder":
        value = value.lstrip("/")
    return kind, value


def make_scope(
    text: str,
    members: Iterable[str] = (),
    loader: Callable[[], frozenset[str]] | None = None,
) -> Scope | None:
    """The scope of ``text`` (a set's doc_ids are ``members``, or what ``loader`` reads)."""
    parsed = parse_scope(text)
    if parsed is None:
        return None
    if parsed[0] != "set":
        return Scope(parsed[0], parsed[1])
    return Scope(parsed[0], parsed[1], frozenset(members), loader)
