"""The document registry in Chroma: the ``<collection>-docs`` collection
(``tools.kb.store.protocol`` states the crash-safety protocol it keeps).

A document's registry record and the generation are written by one ``upsert`` call,
which Chroma applies as one write: the commit point of an ingest. A deletion first
commits a *tombstone* (a record with an empty version), then removes the chunks and the
record; the next ingest finishes an interrupted one.

Every commit also numbers itself: the generation record's ``seq`` grows by one and each
record it writes carries that ``seq``, so :meth:`Registry.changes` reads only the records
committed after a sequence number a reader has seen (commits are serialised by the
knowledge base's writer lock, so the numbers never repeat). A record removed by
:meth:`Registry.forget` cannot be read that way: each removal takes the next number too and
is logged (the newest ``FORGOTTEN_KEPT``, in one record), so a reader that missed the
tombstone still learns the document is gone; a reader further behind than the log reads
the whole registry. A reader keeping the active set in step reads what changed, not every
document.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from chromadb.api.models.Collection import Collection

from tools.kb.store.chroma.chroma_store import StoreGuard
from tools.kb.store.protocol import (
    HISTORY_KEPT,
    RECORD_PAGE,
    DocRecord,
    Registry,
    RegistryChanges,
)

GENERATION_ID = "__generation__"
FORGOTTEN_ID = "__forgotten__"  # the log of removed records: [[seq, doc_id], ...]
FORGOTTEN_KEPT = 5000
_OPTIONAL_EMPTY = {"via": "", "acl": "", "title": ""}  # optional keys, as written when absent


class ChromaRegistry(Registry):
    """The ``<collection>-docs`` collection, read and committed as one unit."""

    def __init__(self, collection: Collection, guard: StoreGuard) -> None:
        self.collection = collection
        self._guard = guard
        self.written = ""  # the generation this object committed last

    def pages(self, where: dict[str, Any] | None = None) -> Iterator[tuple[str, DocRecord]]:
        """Every document's record (``where``: those it selects), ``RECORD_PAGE`` at a
        time: no read is unbounded."""
        offset = 0
        while True:
            got = self._guard(
                "reading the registry",
                lambda offset=offset: self.collection.get(  # type: ignore[misc]
                    where=where, include=["metadatas"], limit=RECORD_PAGE, offset=offset
                ),
            )
            for doc_id, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
                if doc_id not in (GENERATION_ID, FORGOTTEN_ID):
                    yield doc_id, cast(DocRecord, dict(meta or {}))
            if len(got["ids"]) < RECORD_PAGE:
                return
            offset += RECORD_PAGE

    def changes(self, after: int | None, generation: str | None = None) -> RegistryChanges:
        """The records committed after sequence number ``after`` (tombstones included,
        a removed record as a tombstone; None: every record), and the sequence number
        this read brings the reader to (read first: a commit racing the read is read
        again next time, never missed). Records written before ``seq`` existed count as
        committed at 0. With ``generation`` (what the reader saw at ``after``), a store
        that is not the one the reader followed (restored from a backup, or replaced) is
        read whole: its commit at ``after`` had another generation, or it is behind."""
        head = self._generation_record()
        seq, now = int(head.get("seq") or 0), str(head.get("generation", ""))
        if after is None or after > seq or not descends(history_of(head), after, generation):
            return RegistryChanges(seq, self.records(), True, now)
        if after >= seq:
            return RegistryChanges(seq, {}, False, now)
        log = self._forgotten()
        if len(log) >= FORGOTTEN_KEPT and log[0][0] > after + 1:  # the log lost some
            return RegistryChanges(seq, self.records(), True, now)
        found: dict[str, DocRecord] = {d: {"version": ""} for n, d in log if after < n <= seq}
        found.update(self.pages({"seq": {"$gt": after}}))
        return RegistryChanges(seq, found, False, now)

    def _forgotten(self) -> list[tuple[int, str]]:
        got = self._guard(
            "reading the registry's removals",
            lambda: self.collection.get(ids=[FORGOTTEN_ID], include=["metadatas"]),
        )
        metas = got["metadatas"] or []
        text = str(metas[0].get("log", "[]")) if metas and metas[0] else "[]"
        return [(int(n), str(d)) for n, d in json.loads(text)]

    def records_of(self, doc_ids: Sequence[str]) -> dict[str, DocRecord]:
        """The records of ``doc_ids`` (those ingested; tombstones included), read by id
        ``RECORD_PAGE`` at a time: an ingest of a few documents reads a few records, not
        the registry."""
        out: dict[str, DocRecord] = {}
        wanted = [d for d in dict.fromkeys(doc_ids) if d not in (GENERATION_ID, FORGOTTEN_ID)]
        for start in range(0, len(wanted), RECORD_PAGE):
            page = wanted[start : start + RECORD_PAGE]
            got = self._guard(
                "reading the registry",
                lambda page=page: self.collection.get(ids=page, include=["metadatas"]),  # type: ignore[misc]
            )
            for doc_id, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
                out[doc_id] = cast(DocRecord, dict(meta or {}))
        return out

    def tombstones(self) -> list[str]:
        """The documents whose deletion a crash interrupted (a record without a version)."""
        return [d for d, r in self.pages({"version": ""}) if not r.get("version")]

    def record(self, doc_id: str) -> DocRecord | None:
        """One document's record (None: never ingested), without reading the others."""
        got = self._guard(
            f"reading the registry entry of {doc_id}",
            lambda: self.collection.get(ids=[doc_id], include=["metadatas"]),
        )
        metas = got["metadatas"] or []
        return (
            cast(DocRecord, dict(metas[0] or {}))
            if got["ids"] and doc_id not in (GENERATION_ID, FORGOTTEN_ID)
            else None
        )

    def generation(self) -> str:
        return str(self._generation_record().get("generation", ""))

    def _generation_record(self) -> dict[str, Any]:
        got = self._guard(
            "reading the generation",
            lambda: self.collection.get(ids=[GENERATION_ID], include=["metadatas"]),
        )
        metas = got["metadatas"] or []
        return dict(metas[0]) if metas and metas[0] else {}

    def commit(self, records: Mapping[str, DocRecord]) -> None:
        """Point documents at versions and change the generation, in one write.

        Each record replaces the stored one whole: Chroma's upsert keeps a metadata key it
        is not given, so an optional key a record lacks is written empty (else a file
        reached directly kept the link route it once had, and the link's removal pruned
        it)."""
        ids = [*records, GENERATION_ID]
        head = self._generation_record()
        seq, generation = int(head.get("seq") or 0) + 1, uuid.uuid4().hex
        history = [*history_of(head), (seq, generation)][-HISTORY_KEPT:]
        metas: list[dict[str, Any]] = [
            *({**_OPTIONAL_EMPTY, **r, "seq": seq} for r in records.values()),
            {"generation": generation, "seq": seq, "history": json.dumps(history)},
        ]
        names = ", ".join(list(records)[:3]) + ("…" if len(records) > 3 else "")
        self._guard(
            f"committing {names}",
            lambda: self.collection.upsert(
                ids=ids,
                embeddings=[[1.0]] * len(ids),  # type: ignore[arg-type]
                metadatas=metas,  # type: ignore[arg-type]
            ),
        )
        self.written = generation

    def forget(self, doc_id: str) -> None:
        """Remove a document's record (after its chunks are gone), logged under the next
        sequence number (see the module docstring); the generation does not change (the
        tombstone's commit changed it)."""
        self._guard(
            f"deleting registry entry of {doc_id}", lambda: self.collection.delete(ids=[doc_id])
        )
        head = self._generation_record()
        seq = int(head.get("seq") or 0) + 1
        log = [*self._forgotten(), (seq, doc_id)][-FORGOTTEN_KEPT:]
        self._guard(
            f"logging the removal of {doc_id}",
            lambda: self.collection.upsert(
                ids=[GENERATION_ID, FORGOTTEN_ID],
                embeddings=[[1.0], [1.0]],  # type: ignore[arg-type]
                metadatas=[{**head, "seq": seq}, {"log": json.dumps(log)}],
            ),
        )


def history_of(head: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The newest commits' ``(seq, generation)`` a generation record keeps."""
    return [(int(n), str(g)) for n, g in json.loads(str(head.get("history") or "[]"))]


def descends(history: list[tuple[int, str]], after: int, generation: str | None) -> bool:
    """Whether a reader that saw ``generation`` at sequence number ``after`` follows this
    store: its newest commit at or before ``after`` had that generation (a removal takes
    a number without a commit). None: not checked."""
    if generation is None:
        return True
    before = [g for n, g in history if n <= after]
    return bool(before) and before[-1] == generation
