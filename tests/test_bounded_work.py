"""Work one file or one request may cost is bounded (issue 43, items 8-12): parsing in a
child process under a memory and a time limit, jobs shared fairly between users,
uploads streamed to disk under per-file and per-request limits, sitemap pages streamed,
a dead server's job taken over by a live replica, leftovers removed. No model, no key."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.fakes import hash_model
from tests.hostile_files import line_drawing_pdf, shared_stream_pdf
from tests.test_kb_jobs import wait_for_end
from tools.kb.formats import LoadLimits
from tools.kb.jobs import JobRunner, Upload, plan
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.library import Library
from tools.kb.scheduler import FairPool

HOSTILE_LIMITS = LoadLimits(parse_memory_mb=512, parse_seconds=8)


@pytest.mark.slow
def test_hostile_pdfs_fail_within_their_bounds_while_another_users_upload_completes(
    tmp_path: Path,
) -> None:
    """A 38 KB PDF of 6 MB of line drawings and a 72 KB PDF of 400 pages sharing one
    content stream (each once took the server to gigabytes or minutes, and held every
    other upload behind it): each fails alone, naming the limit it went over, and bob's
    small file, sent after them, is done while alice's job still runs."""
    lines, shared = line_drawing_pdf(), shared_stream_pdf()
    assert len(lines) < 64_000 and len(shared) < 96_000
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=hash_model()) as kb:
        library = Library(kb)
        runner = JobRunner(library, HOSTILE_LIMITS, workers=2)
        big_files, big_items = plan(library, [Upload("plan.pdf", lines), Upload("book.pdf", shared)],
                                    owner="alice", acl=("user:alice",))  # fmt: skip
        big = library.catalog.new_job("upload", "alice", big_files)
        runner.submit(big, big_items)
        time.sleep(0.5)  # alice's job has started parsing
        small_files, small_items = plan(library, [Upload("note.md", b"# Note\n\nBob's KIWI-7.\n")],
                                        owner="bob", acl=("user:bob",))  # fmt: skip
        small = library.catalog.new_job("upload", "bob", small_files)
        runner.submit(small, small_items)
        done = wait_for_end(library.catalog, small.job_id)
        assert done["state"] == "done" and done["files"][0]["status"] == "done"
        assert library.catalog.job(big.job_id).view()["state"] == "running"  # passed it
        ended = wait_for_end(library.catalog, big.job_id)
        assert ended["state"] == "failed"
        for f in ended["files"]:
            assert f["status"] == "failed"
            assert "parse_seconds" in f["reason"] or "parse memory limit" in f["reason"], f
        assert "KIWI-7" in kb.search("KIWI-7", 1)[0].text
        runner.close()
        library.close()


def test_a_file_over_the_parse_memory_limit_is_named(tmp_path: Path) -> None:
    from tools.kb.formats.isolated import parse

    with pytest.raises(Exception, match=r"over the 64 MB parse memory limit"):
        parse("pdf", line_drawing_pdf(0.5), LoadLimits(parse_memory_mb=64, parse_seconds=60))
    # A good file still parses (and the worker that failed is not reused broken).
    good = b"a,b\n1,2\n"
    assert "| a | b |" in parse("csv", good, LoadLimits()).text


def test_one_owner_never_holds_every_worker() -> None:
    pool = FairPool(2, name="test-fair")
    release = threading.Event()
    order: list[str] = []

    def slow(tag: str) -> None:
        order.append(tag)
        release.wait(30)

    first = pool.submit("alice", lambda: slow("alice-1"))
    second = pool.submit("alice", lambda: slow("alice-2"))  # waits: alice holds her share
    bob = pool.submit("bob", lambda: order.append("bob"))
    bob.result(timeout=30)
    assert order == ["alice-1", "bob"] and not second.done()
    release.set()
    first.result(timeout=30)
    second.result(timeout=30)
    assert order == ["alice-1", "bob", "alice-2"]
    pool.close()
