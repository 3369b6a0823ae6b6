"""The documents whose chunks a writer was changing: the interrupted-replacement records.

An ingest names a batch's documents here before it writes their chunks and clears them
once the batch's old versions are removed (``tools.kb.ingest.ingester``). A crash in
between leaves them named, so the next ingest finds the leftovers (the new version's
chunks never committed, or the old version's never removed) by this short list, once,
instead of listing every unchanged document's chunks in the store, which scanned the
collection per document (issue 53, item 14: 392 s to re-read 40,000 unchanged files).

One small JSON file beside the writer's lock, written only under that lock, replaced
atomically (a reader sees the old list or the new, never half of one).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

MAX_LISTED = 100_000  # a batch is 32 documents: more means a damaged file, read as empty


class PendingCleanup:
    """The doc_ids whose chunks may hold a crash's leftovers, in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def listed(self) -> list[str]:
        """The doc_ids named; a missing or unreadable file names none."""
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        if not isinstance(found, list) or len(found) > MAX_LISTED:
            return []
        return [str(d) for d in found]

    def mark(self, doc_ids: Iterable[str]) -> None:
        """Name ``doc_ids`` (with those named already) before their chunks are written."""
        self._write(list(dict.fromkeys([*self.listed(), *doc_ids])))

    def clear(self, doc_ids: Iterable[str]) -> None:
        """Forget ``doc_ids``: their chunks hold one version, the registry's."""
        done = set(doc_ids)
        left = [d for d in self.listed() if d not in done]
        if left:
            self._write(left)
        else:
            self.path.unlink(missing_ok=True)

    def _write(self, doc_ids: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as file:
                json.dump(doc_ids, file)
                file.flush()
                os.fsync(file.fileno())  # on disk before the chunks it covers are written
            os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
