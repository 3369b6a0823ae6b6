"""Work one file or one request may cost is bounded (issue 43, items 8-12): parsing in a
child process under a memory and a time limit, jobs shared fairly between users,
uploads streamed to disk under per-file and per-request limits, sitemap pages streamed,
a dead server's job taken over by a live replica, leftovers removed. No model, no key."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import hash_model
from tests.hostile_files import line_drawing_pdf, shared_stream_pdf
from tests.kb.documents.test_jobs import wait_for_end
from tools.access.acl import Reader
from tools.kb.documents.catalog import Catalog, JobFile
from tools.kb.documents.jobs import JobRunner, Upload, plan
from tools.kb.documents.library import Library
from tools.kb.documents.originals import Originals
from tools.kb.documents.scheduler import FairPool
from tools.kb.ingest.formats import LoadLimits
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

REPO = Path(__file__).resolve().parent.parent
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
    from tools.kb.ingest.formats.isolated import parse

    with pytest.raises(Exception, match=r"the 64 MB parse memory limit"):
        parse("pdf", line_drawing_pdf(0.5), LoadLimits(parse_memory_mb=64, parse_seconds=60))
    # A good file still parses (and the worker that failed is not reused broken).
    good = b"a,b\n1,2\n"
    assert "| a | b |" in parse("csv", good, LoadLimits()).text


def test_parsing_works_in_a_process_with_over_1024_open_files() -> None:
    """select() refuses a descriptor over 1023 ("filedescriptor out of range"): a server or
    a long test run that holds that many files open could parse nothing."""
    import os
    import resource

    from tools.kb.ingest.formats.isolated import parse

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert "| a | b |" in parse("csv", b"a,b\n1,2\n", LoadLimits()).text
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


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


# -- uploads: streamed, bounded per file and per request ---------------------------------


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Library]]:
    """The document API's routes on a hash-model knowledge base, as the local admin (no
    users file), through Starlette's test client (no server process)."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from server import documents_api

    with KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model()) as kb:
        library = Library(kb)
        runner = JobRunner(library, workers=2)
        monkeypatch.setattr(documents_api, "services", lambda: (library, runner))
        with TestClient(Starlette(routes=documents_api.routes())) as client:
            yield client, library
        runner.close()
        library.close()


def leftovers(library: Library) -> list[str]:
    """Files under originals/ that are not stored originals (parts, temporary files)."""
    root = library.originals.directory
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and (p.name.startswith(".") or p.parent.name.startswith(".")))  # fmt: skip


def test_101_files_are_refused_as_json_naming_the_limit(api: tuple[Any, Library]) -> None:
    client, library = api
    files = [("file", (f"f{n}.md", b"# F\n\nx\n")) for n in range(101)]
    r = client.post("/kb/uploads", files=files)
    assert (
        r.status_code == 400 and "too many files: at most 100" in r.json()["error"]
    )  # was {"detail"}
    assert leftovers(library) == []


def test_a_file_over_the_limit_names_its_real_size_and_nothing_of_it_stays(
    api: tuple[Any, Library], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, library = api
    monkeypatch.setenv("HYBRID_RAG_MAX_FILE_MB", "1")
    big = b"# Big\n\n" + b"word " * 700_000  # 3.3 MB
    r = client.post("/kb/uploads", files=[("file", ("big.md", big)),
                                          ("file", ("ok.md", b"# Ok\n\nPLUM-4 is fine.\n"))])  # fmt: skip
    assert r.status_code == 202, r.text
    view = wait_for_end(library.catalog, r.json()["job_id"])
    big_file, ok_file = view["files"]
    assert big_file["status"] == "failed"
    assert big_file["reason"].startswith("file is 3.3 MB, over the 1 MB limit"), big_file
    assert ok_file["status"] == "done"
    stored = [p for p in library.originals.directory.rglob("*") if p.is_file()]
    assert len(stored) == 1 and stored[0].read_bytes().startswith(b"# Ok")
    assert leftovers(library) == []


def test_a_request_over_the_request_limit_is_refused_before_it_is_read(
    api: tuple[Any, Library], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, library = api
    monkeypatch.setenv("HYBRID_RAG_MAX_UPLOAD_MB", "2")
    files = [("file", (f"part{n}.md", b"# P\n\n" + b"x" * 900_000)) for n in range(3)]
    r = client.post("/kb/uploads", files=files)
    assert r.status_code == 413
    assert r.json()["error"].startswith(
        "the request is 2.6 MB, over the 2 MB limit per upload request"
    )
    assert leftovers(library) == [] and library.catalog.rows() == {}


def test_a_full_disk_during_an_upload_or_a_replace_is_507_naming_it(
    api: tuple[Any, Library], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, library = api
    r = client.post("/kb/uploads", files=[("file", ("a.md", b"# A\n\nFIG-2.\n"))])
    wait_for_end(library.catalog, r.json()["job_id"])
    full = tmp_path / "full"
    monkeypatch.setattr(library.originals, "part_path", lambda: full)
    for method, url in (("POST", "/kb/uploads"), ("PUT", "/kb/documents/upload%3Aa.md")):
        full.symlink_to("/dev/full")  # every write: ENOSPC (the link, not the device, is removed)
        r = client.request(method, url, files=[("file", ("a.md", b"# A\n\n" + b"y" * 200_000))])
        assert r.status_code == 507, (method, r.text)
        assert "disk is full" in r.json()["error"]
        assert not full.exists()  # the part's file removed
    assert Path("/dev/full").exists()
    monkeypatch.delattr(library.originals, "part_path")  # parts are stored again; now the
    # catalog's SQLite is full

    def full_catalog(*_: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(library.catalog, "new_job", full_catalog)
    r = client.post("/kb/uploads", files=[("file", ("b.md", b"# B\n\nFIG-3.\n"))])
    assert r.status_code == 507 and "disk is full" in r.json()["error"]
    assert leftovers(library) == []
    assert "FIG-2" in library.chunks("upload:a.md", Reader.everyone())[0]["text"]  # unchanged


def test_what_a_killed_process_was_writing_is_removed_at_the_next_start(tmp_path: Path) -> None:
    """``kill -9`` during an upload left a 44 MB part under originals/; the next server
    start removes it (and a half-stored original), never a live process's."""
    store = tmp_path / "originals"
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from tools.kb.documents.originals import Originals\n"
        f"o = Originals(Path({str(store)!r}))\n"
        "part = o.part_path(); part.write_bytes(b'x' * 2_000_000)\n"
        "tmp = o.directory / 'ab' / ('.ab' + 'c' * 62 + '.md.' + part.name[:-5] + '.tmp')\n"
        "tmp.parent.mkdir(); tmp.write_bytes(b'half')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL
    originals = Originals(store)
    mine = originals.part_path()
    mine.write_bytes(b"arriving")  # this (live) process's upload
    left = sorted(p.name for p in store.rglob("*") if p.is_file())
    assert len(left) == 3
    removed = originals.sweep()
    assert len(removed) == 2 and {p.suffix for p in removed} == {".part", ".tmp"}
    assert [p for p in store.rglob("*") if p.is_file()] == [mine]


# -- a dead server's job is taken over by a live replica ----------------------------------

SERVER_A = """
import sys, time
from pathlib import Path
from tests.fakes import hash_model
from tests.hostile_files import shared_stream_pdf
from tools.kb.ingest.formats import LoadLimits
from tools.kb.documents.jobs import JobRunner, Upload, plan
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.documents.library import Library
kb = KnowledgeBase(KBConfig(home=Path(sys.argv[1])), embedding_model=hash_model())
library = Library(kb)
runner = JobRunner(library, LoadLimits(parse_seconds=600), workers=1)
runner.watch(0.3)
uploads = [Upload("slow.pdf", shared_stream_pdf()), Upload("notes.md", b"# N\\n\\nLIME-6 here.\\n")]
files, items = plan(library, uploads, owner="alice", acl=("user:alice",))
job = library.catalog.new_job("upload", "alice", files)
runner.submit(job, items)
print(job.job_id, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_live_replica_takes_over_the_job_of_a_server_killed_mid_job(tmp_path: Path) -> None:
    """Two processes on one data home: server A is parsing an upload when it is killed
    with ``kill -9``; server B, already running, finishes the job (it once waited for
    the next server started on that data home, forever if none was)."""
    home = tmp_path / "home"
    a = subprocess.Popen([sys.executable, "-c", SERVER_A, str(home)], cwd=REPO,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert a.stdout is not None
        job_id = a.stdout.readline().strip()
        with KnowledgeBase(KBConfig(home=home), embedding_model=hash_model()) as kb:
            library = Library(kb)
            runner = JobRunner(library, LoadLimits(parse_seconds=2), workers=2)
            runner.watch(0.3)
            deadline = time.monotonic() + 60
            while library.catalog.job(job_id).files[0].status != "parsing":
                assert time.monotonic() < deadline, "server A never started parsing"
                time.sleep(0.1)
            time.sleep(1.5)  # several rounds of B's watch: A is alive and keeps its lease
            assert library.catalog.job(job_id).files[0].status == "parsing"
            a.kill()  # kill -9
            a.wait(30)
            view = wait_for_end(library.catalog, job_id, 120)
            slow, notes = view["files"]
            assert view["state"] == "done" and notes["status"] == "done"
            assert slow["status"] == "failed" and "parse_seconds" in slow["reason"]  # B's limit
            assert "LIME-6" in kb.search("LIME-6", 1)[0].text
            runner.close()
            library.close()
    finally:
        a.kill()
        a.wait(30)


def test_a_job_whose_lease_expired_on_another_host_is_taken_over(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "c.sqlite", lease_s=60)
    job = catalog.new_job("upload", "alice", [JobFile("a.md", "a.md", "upload:a.md")])
    catalog._db.execute(
        "UPDATE jobs SET host = 'elsewhere', instance = 'theirs', pid = 1, lease = ?",
        (time.time() + 1.0,),
    )
    assert catalog.claim_unfinished() == []  # its lease holds: pid 1 there is not ours to judge
    time.sleep(1.2)
    assert [j.job_id for j in catalog.claim_unfinished()] == [job.job_id]
    assert catalog.claim_unfinished() == []  # now ours: claimed once
    catalog.close()
