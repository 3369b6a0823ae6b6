"""One sync of a source: the knowledge base ends holding exactly what the source holds.

New entries are added, changed ones re-ingested (by content hash: the bytes are read and
hashed, and only a changed hash is parsed and embedded), and documents whose entry
disappeared (or now answers 404/410) are removed. An entry that cannot be read this time
keeps its document as it was; a source that cannot be listed at all removes nothing.

Each document is committed whole or not at all (``tools.kb.store.chroma.chroma_registry``), and its catalog
row is written after the commit, so a sync killed at any point (``kill -9``) leaves every
document as before or after it, and the next sync finishes the job: a committed document
without its row is found unchanged in the registry and gets its row, a deletion whose
row outlived it is completed. One sync per source at a time (a lock under the data
home); a second is refused, naming the holder.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tools.errors import InputError, StoreError
from tools.kb.documents.catalog import DocumentRow
from tools.kb.documents.library import Item, Library, Outcome
from tools.kb.ingest.formats import LoadLimits
from tools.kb.store.writer_lock import writer_lock
from tools.settings import write_lock_dir
from tools.sources.listers import Entry, FetchError, Gone, SourceError, list_source
from tools.sources.model import LastSync, Source

MAX_ERRORS = 50  # error lines kept per sync
BATCH = 16  # changed entries embedded and committed together
ItemFn = Callable[[str, str, str, str, int], None]  # (name, doc_id, status, reason, chunks)


def sync(
    library: Library,
    source: Source,
    *,
    limits: LoadLimits | None = None,
    on_item: ItemFn | None = None,
) -> LastSync:
    """Bring the knowledge base in line with ``source``; returns what changed."""
    lock = write_lock_dir(library.kb.home) / f"source-{source.id}.lock"
    try:
        with writer_lock(lock, timeout=0.0, what=f"source {source.id!r}"):
            return _sync(library, source, limits or LoadLimits.from_env(), on_item)
    except StoreError as exc:
        if "waited" in str(exc):
            raise InputError(f"source {source.id!r} is already being synced: {exc}") from None
        raise


def _sync(library: Library, source: Source, limits: LoadLimits, on_item: ItemFn | None) -> LastSync:
    started = time.perf_counter()
    result = LastSync(at=datetime.now(UTC).isoformat(timespec="seconds"))
    try:
        entries, left_out = list_source(source, limits)
    except SourceError as exc:
        result.errors.append(str(exc))
        result.finished = False
        result.seconds = time.perf_counter() - started
        return result
    result.skipped, result.left_out = len(left_out), left_out[:MAX_ERRORS]
    rows = library.catalog.rows(origin=source.origin)
    active = {
        d for d, r in library.kb.registry.records().items()
        if r.get("version") and d.startswith(source.doc_prefix)
    }  # fmt: skip
    keep: set[str] = set()
    pending: list[tuple[Item, bool]] = []  # (item, already active)

    def report(name: str, doc_id: str, status: str, reason: str, chunks: int = 0) -> None:
        _count(result, status, reason)
        if on_item:
            on_item(name, doc_id, status, reason, chunks)

    for entry in entries:
        doc_id = source.doc_prefix + entry.key
        status, reason, item = _read(library, source, entry, doc_id, rows, active)
        if status != "gone":
            keep.add(doc_id)
        if item is not None:
            pending.append((item, doc_id in active))
            if len(pending) >= BATCH:
                _flush(library, pending, limits, report)
        elif status != "gone":
            report(entry.name, doc_id, status, reason)
    _flush(library, pending, limits, report)
    for doc_id in sorted((set(rows) | active) - keep):
        try:
            library.delete(doc_id)
        except InputError:
            continue  # already gone
        result.removed += 1
        if on_item:
            on_item(rows[doc_id].path if doc_id in rows else doc_id, doc_id, "removed", "", 0)
    result.seconds = time.perf_counter() - started
    return result


def _read(
    library: Library,
    source: Source,
    entry: Entry,
    doc_id: str,
    rows: dict[str, DocumentRow],
    active: set[str],
) -> tuple[str, str, Item | None]:
    """Fetch and hash one entry: ("unchanged" | "failed" | "gone", reason, None), or
    ("changed", "", the item to ingest) with its original stored."""
    try:
        data = entry.fetch()
    except Gone:
        return "gone", "", None
    except FetchError as exc:
        return "failed", str(exc), None
    sha = hashlib.sha256(data).hexdigest()
    row = rows.get(doc_id)
    acl = source.acl if entry.acl is None else entry.acl
    if row is not None and row.sha256 == sha and row.acl == ",".join(acl) and doc_id in active:
        return "unchanged", "", None
    _, blob = library.originals.put(data, entry.suffix)
    return "changed", "", Item(doc_id, entry.name, blob, sha, len(data), acl, source.origin)


def _flush(
    library: Library,
    pending: list[tuple[Item, bool]],
    limits: LoadLimits,
    report: Callable[..., None],
) -> None:
    """Ingest the changed items read so far, in one batch; empties ``pending``."""
    if not pending:
        return
    items = [item for item, _ in pending]
    try:
        outcomes = library.ingest_many(items, limits)
    except (InputError, StoreError) as exc:
        outcomes = [Outcome("failed", str(exc))] * len(items)
    for (item, was_active), outcome in zip(pending, outcomes, strict=True):
        if outcome.status != "done":
            library.discard(item.blob)
            report(item.path, item.doc_id, "failed", f"{item.path}: {outcome.reason}")
        else:
            status = "updated" if was_active else "added"
            report(item.path, item.doc_id, status, "", outcome.chunks)
    pending.clear()


def _count(result: LastSync, status: str, reason: str) -> None:
    if status in ("added", "updated", "unchanged", "failed"):
        setattr(result, status, getattr(result, status) + 1)
    if reason and len(result.errors) < MAX_ERRORS:
        result.errors.append(reason)


def remove_documents(library: Library, source: Source) -> int:
    """Remove every document ``source`` brought (its source is being forgotten)."""
    rows = library.catalog.rows(origin=source.origin)
    records = library.kb.registry.records()
    active = {d for d, r in records.items() if r.get("version") and d.startswith(source.doc_prefix)}
    removed = 0
    for doc_id in sorted(set(rows) | active):
        try:
            library.delete(doc_id)
        except InputError:
            continue
        removed += 1
    return removed
