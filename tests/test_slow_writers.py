"""One slow file, or many waiting deletions, hold no one else (issue 53, item 10).

docs/API.md promises "a slow file never holds up another user's upload": bob's 4 KB
upload failed after 600 s behind carol's 590 KB file, whose embedding ran inside the
knowledge base's writer lock; and six DELETEs waiting on that lock held every thread of
the event loop's default executor, so every /kb route timed out with them."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from run import resources
from server.documents_api import routes
from tests.fakes import HashEmbeddings, hash_model
from tests.kb.documents.test_jobs import wait_for_end
from tools.kb.documents.jobs import JobRunner, Upload, plan
from tools.kb.documents.library import Library
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

BOUND_S = 20.0  # each wait of these tests; the slow parts are held by events, not time
SLOW = "SLOWMARK"


class HeldEmbeddings(HashEmbeddings):
    """Embeds a text carrying ``SLOW`` only once ``release`` is set (at most 60 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.slow_started = threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any(SLOW in t for t in texts):
            self.slow_started.set()
            self.release.wait(60)
        return super().embed_documents(texts)


def test_a_small_upload_commits_while_a_large_one_embeds(tmp_path: Path) -> None:
    embeddings = HeldEmbeddings()
    model = hash_model()
    model.embeddings = embeddings
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=model) as kb:
        library = Library(kb)
        runner = JobRunner(library, workers=2)
        big = "# Large\n\n" + "\n\n".join(
            f"{SLOW} paragraph {i} of the big file." for i in range(400)
        )
        files, items = plan(library, [Upload("large.md", big.encode())],
                            owner="carol", acl=("user:carol",))  # fmt: skip
        large = library.catalog.new_job("upload", "carol", files)
        runner.submit(large, items)
        try:
            assert embeddings.slow_started.wait(BOUND_S)  # carol's file is embedding
            files, items = plan(library, [Upload("note.md", b"# Note\n\nBob's KIWI-7.\n")],
                                owner="bob", acl=("user:bob",))  # fmt: skip
            small = library.catalog.new_job("upload", "bob", files)
            runner.submit(small, items)
            done = wait_for_end(library.catalog, small.job_id, BOUND_S)
            assert done["state"] == "done" and done["files"][0]["status"] == "done", done
            assert library.catalog.job(large.job_id).view()["state"] == "running"
        finally:
            embeddings.release.set()
        ended = wait_for_end(library.catalog, large.job_id, BOUND_S)
        assert ended["state"] == "done" and ended["files"][0]["chunks"] > 0, ended
        assert "KIWI-7" in kb.search("KIWI-7", 1)[0].text
        runner.close()
        library.close()


def test_a_document_changed_while_another_version_embedded_is_not_overwritten(
    tmp_path: Path,
) -> None:
    """The version is checked again under the writer's lock: a deletion committed while
    a new version embedded wins, and the upload fails saying so."""
    embeddings = HeldEmbeddings()
    model = hash_model()
    model.embeddings = embeddings
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=model) as kb:
        library = Library(kb)
        _files, items = plan(library, [Upload("a.md", b"# A\n\nFirst version.\n")],
                            owner="carol", acl=("user:carol",))  # fmt: skip
        assert library.ingest(items[0]).status == "done"  # type: ignore[arg-type]
        _, items = plan(library, [Upload("a.md", f"# A\n\n{SLOW} second.\n".encode())],
                            owner="carol", acl=("user:carol",))  # fmt: skip
        outcome: list[object] = []
        worker = threading.Thread(target=lambda: outcome.append(library.ingest(items[0])))  # type: ignore[arg-type]
        worker.start()
        try:
            assert embeddings.slow_started.wait(BOUND_S)
            library.delete("upload:a.md")  # commits while the new version embeds
        finally:
            embeddings.release.set()
        worker.join(BOUND_S)
        assert not worker.is_alive()
        assert outcome[0].status == "failed" and "changed by another writer" in outcome[0].reason  # type: ignore[attr-defined]
        assert kb.registry.record("upload:a.md") is None
        library.close()


@pytest.fixture
def served_kb(tmp_path: Path, kb_dir: Path) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    kb.ingest([kb_dir])
    resources.register_kb(kb)
    yield kb
    resources.close_all()


def test_a_kb_route_answers_while_deletions_wait_on_the_writer(served_kb: KnowledgeBase) -> None:
    """More DELETEs than the default executor has threads, all waiting on the writer
    (held here): GET /kb/documents still answers at once. No users file: an admin."""
    deletes = min(32, (os.cpu_count() or 1) + 4) + 2  # the default executor's size, and more
    answers: list[int] = []
    with TestClient(Starlette(routes=routes())) as client:
        assert client.get("/kb/documents").status_code == 200  # services opened
        served_kb._lock.acquire()  # the writer is busy: every deletion waits for it
        try:
            waiting = [
                threading.Thread(target=lambda: answers.append(client.delete("/kb/documents/leave.md").status_code))
                for _ in range(deletes)
            ]  # fmt: skip
            for thread in waiting:
                thread.start()
            time.sleep(1.0)  # they have reached the writer's lock
            got: list[int] = []
            reader = threading.Thread(
                target=lambda: got.append(client.get("/kb/documents").status_code)
            )
            reader.start()
            reader.join(BOUND_S)
            assert got == [200], "GET /kb/documents waited behind the deletions"
        finally:
            served_kb._lock.release()
        for thread in waiting:
            thread.join(BOUND_S)
    # One deleted it; the others found it gone, once the writer was free.
    assert len(answers) == deletes and sorted(answers)[0] == 200
    assert set(sorted(answers)[1:]) <= {400, 404}, answers
