"""Re-reading an unchanged folder reads nothing of the store per document (issue 53,
item 14): each unchanged file listed its chunks through a ``where={"doc_id": ...}`` get,
a scan of the collection, so a second ingest of 40,000 files took 392 s (9.8 ms a file,
3.1 ms at 3,000). A crash's leftovers are found by the pending records instead."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import hash_model
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

N_FILES = 40


class Counted:
    """A Chroma collection whose every call is counted by method name."""

    def __init__(self, inner: Any, calls: Counter[str]) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[name] += 1
            return found(*args, **kwargs)

        return call


def folder(base: Path, n: int = N_FILES) -> Path:
    docs = base / "docs"
    docs.mkdir()
    for i in range(n):
        (docs / f"d{i:03d}.md").write_text(f"# Note {i}\n\nDocument {i} says KEY-{i}.\n")
    return docs


def test_reingesting_an_unchanged_folder_makes_no_per_document_store_read(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    with KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model()) as kb:
        assert len(kb.ingest([docs]).added) == N_FILES
        chunk_calls: Counter[str] = Counter()
        registry_calls: Counter[str] = Counter()
        kb.chunks.collection = Counted(kb.chunks.collection, chunk_calls)  # type: ignore[assignment]
        kb.registry.collection = Counted(kb.registry.collection, registry_calls)  # type: ignore[assignment]
        report = kb.ingest([docs])
        assert len(report.unchanged) == N_FILES and not report.added and not report.updated
        assert sum(chunk_calls.values()) == 0, chunk_calls  # was one get per document
        # The registry is read in pages (the records, the generation), never per document.
        assert sum(registry_calls.values()) < 10, registry_calls


def test_leftovers_of_a_crash_are_found_by_the_pending_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that fails after a new file's chunks were written leaves orphans; the
    next ingest removes them (the file is gone by then: nothing would have read them)."""
    docs = folder(tmp_path, 3)
    with KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model()) as kb:
        kb.ingest([docs])
        (docs / "new.md").write_text("# New\n\nA file whose commit fails.\n")

        def fail(records: Any) -> None:
            raise RuntimeError("simulated crash before the commit")

        monkeypatch.setattr(kb.registry, "commit", fail)
        with pytest.raises(RuntimeError):
            kb.ingest([docs])
        monkeypatch.undo()
        assert kb.stats()["stale_chunks"] > 0
        (docs / "new.md").unlink()
        assert len(kb.ingest([docs]).unchanged) == 3
        assert kb.stats()["stale_chunks"] == 0
