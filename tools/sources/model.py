"""A source: where documents come from and stay in sync with (a server folder, a list of
URLs, a sitemap, an S3 bucket prefix), with the ACL its documents get and a schedule.

Sources are rows of the knowledge base's catalog file (``tools.kb.documents.library.catalog_path``),
so the server, the worker and the CLI see the same ones.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tools.access.acl import ACL
from tools.errors import InputError
from tools.kb.documents.catalog import SharedFile

KINDS = ("folder", "urls", "sitemap", "s3")
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_EVERY = re.compile(r"^(?:every\s+)?(\d+)\s*([smhd])$")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_INTERVAL_S = 60
SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, location TEXT NOT NULL, acl TEXT NOT NULL,
    schedule TEXT NOT NULL, options TEXT NOT NULL, last_sync TEXT NOT NULL);
"""


@dataclass
class LastSync:
    """What a sync did: the counts, the errors (one line each), when and how long."""

    at: str = ""
    added: int = 0
    updated: int = 0
    removed: int = 0
    failed: int = 0
    unchanged: int = 0
    skipped: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # "name: reason" of each skipped item
    finished: bool = True  # False: the listing failed, nothing was removed

    def summary(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.removed} removed, "
            f"{self.unchanged} unchanged, {self.failed} failed, {self.skipped} skipped "
            f"in {self.seconds:.1f} s"
        )


@dataclass
class Source:
    id: str
    kind: str
    location: str  # a folder path, URLs (one per line), a sitemap URL, s3://bucket/prefix
    acl: ACL = ()
    schedule: str = ""  # "every 1h", "30m", "1d"; "" = only when asked
    options: dict[str, str] = field(default_factory=dict)  # s3: endpoint_url, region
    last_sync: LastSync | None = None

    def view(self) -> dict[str, Any]:
        """The source as the API shows it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "location": self.location,
            "acl": ",".join(self.acl) or "public",
            "schedule": self.schedule,
            "options": self.options,
            "last_sync": asdict(self.last_sync) if self.last_sync else None,
        }

    @property
    def doc_prefix(self) -> str:
        """Every doc_id of this source starts with it."""
        return f"src:{self.id}:"

    @property
    def origin(self) -> str:
        return f"source:{self.id}"


def check_id(source_id: str) -> str:
    if not _ID.match(source_id):
        raise InputError(
            f"source id {source_id!r} is not valid: 1-40 lower-case letters, digits, '-' or "
            "'_', starting with a letter or digit"
        )
    return source_id


def interval_s(schedule: str) -> float | None:
    """Seconds between syncs of ``schedule`` ("every 1h", "30m"), None for "" (manual)."""
    text = schedule.strip().lower()
    if not text:
        return None
    match = _EVERY.match(text)
    if not match:
        raise InputError(f"schedule {schedule!r} is not valid: write e.g. 'every 1h', '30m', '1d'")
    seconds = int(match.group(1)) * UNIT_S[match.group(2)]
    if seconds < MIN_INTERVAL_S:
        raise InputError(
            f"schedule {schedule!r} is too frequent: at least every {MIN_INTERVAL_S} s"
        )
    return float(seconds)


class SourceStore(SharedFile):
    """The sources of one knowledge base (thread-safe; processes share the file)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA)

    def add(self, source: Source) -> Source:
        check_id(source.id)
        if source.kind not in KINDS:
            raise InputError(f"source kind must be one of {', '.join(KINDS)}, got {source.kind!r}")
        interval_s(source.schedule)
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (source.id, source.kind, source.location, ",".join(source.acl),
                     source.schedule, json.dumps(source.options), ""),
                )  # fmt: skip
            except sqlite3.IntegrityError:
                raise InputError(f"a source named {source.id!r} exists already") from None
        return source

    def get(self, source_id: str) -> Source | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM sources WHERE id = ?", (source_id,)).fetchone()
        return _source(row) if row else None

    def all(self) -> list[Source]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM sources ORDER BY id").fetchall()
        return [_source(r) for r in rows]

    def remove(self, source_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM sources WHERE id = ?", (source_id,))

    def record(self, source_id: str, result: LastSync) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE sources SET last_sync = ? WHERE id = ?",
                (json.dumps(asdict(result)), source_id),
            )

    def due(self, now: float | None = None) -> list[Source]:
        """Sources whose schedule says a sync is due."""
        now = time.time() if now is None else now
        out = []
        for source in self.all():
            every = interval_s(source.schedule)
            last = source.last_sync
            stamp = _epoch(last.at) if last and last.at else 0.0
            if every is not None and now - stamp >= every:
                out.append(source)
        return out


def _source(row: tuple[Any, ...]) -> Source:
    last = json.loads(row[6]) if row[6] else None
    return Source(
        id=row[0],
        kind=row[1],
        location=row[2],
        acl=tuple(p for p in row[3].split(",") if p),
        schedule=row[4],
        options=json.loads(row[5]),
        last_sync=LastSync(**last) if last else None,
    )


def _epoch(iso: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0
