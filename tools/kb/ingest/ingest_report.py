"""What an ingest reports: the files added, updated, unchanged, deleted and skipped, and
what a reader of the answers should know about an indexed file."""

from __future__ import annotations

from dataclasses import dataclass, field

from tools.kb.ingest.loaders import SkippedFile


@dataclass(frozen=True)
class FileNote:
    """Something a reader of the answers should know about an indexed file."""

    source: str
    note: str


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    notes: list[FileNote] = field(default_factory=list)  # indexed, but partly (rows cut...)
    chunks_written: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        notes = f", {len(self.notes)} notes" if self.notes else ""
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.deleted)} deleted, "
            f"{len(self.skipped)} skipped{notes}; {self.chunks_written} chunks written "
            f"in {self.seconds:.1f} s"
        )
