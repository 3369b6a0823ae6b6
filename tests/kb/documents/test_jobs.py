"""Uploads checked before any work (tools/kb/documents/jobs.py), jobs a stopped process left
behind (tools/kb/documents/catalog.py), sources' schedules (tools/sources/model.py) and the users
file's admin flag (tools/access/users.py). No server, no model."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import hash_model
from tools.access.users import hash_token, read_users
from tools.errors import ConfigError, InputError
from tools.kb.documents.catalog import Catalog, JobFile
from tools.kb.documents.jobs import JobRunner, Upload, clean_path, plan, resume_unfinished, run_job
from tools.kb.documents.library import Library
from tools.kb.ingest.formats import LoadLimits
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.sources.model import interval_s


def test_each_bad_file_fails_alone_with_its_reason(tmp_path: Path) -> None:
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=hash_model()) as kb:
        library = Library(kb)
        uploads = [
            Upload("notes.md", b"# Notes\n\nThe notes say KIWI-5.\n"),
            Upload("old.doc", b"\xd0\xcf\x11\xe0 legacy word"),
            Upload("big.txt", b"x" * 3_000_000),
            Upload("empty.txt", b"  \n"),
            Upload("../../etc/passwd.md", b"# P\n\nsafe name\n"),
        ]
        files, items = plan(library, uploads, owner="alice", acl=(), folder="team",
                            limits=LoadLimits(max_file_mb=2))  # fmt: skip
        reasons = {f.name: (f.status, f.reason) for f in files}
        assert reasons["notes.md"] == ("queued", "")
        assert reasons["old.doc"][0] == "failed" and ".doc" in reasons["old.doc"][1]
        assert reasons["big.txt"][0] == "failed" and "2 MB limit" in reasons["big.txt"][1]
        assert reasons["empty.txt"] == ("failed", "empty file")
        # A name never leads out of the folder: '..' parts are refused, saying so.
        assert reasons["../../etc/passwd.md"][0] == "failed"
        assert "'..'" in reasons["../../etc/passwd.md"][1]
        job = library.catalog.new_job("upload", "alice", files)
        run_job(library, job, items)
        saved = library.catalog.job(job.job_id).view()
        assert saved["state"] == "done" and saved["progress"] == 1.0
        assert [f["status"] for f in saved["files"]] == [
            "done",
            "failed",
            "failed",
            "failed",
            "failed",
        ]
        assert saved["files"][0]["chunks"] == 1
        library.close()


def test_a_folder_of_dots_is_refused() -> None:
    with pytest.raises(InputError, match="folder"):
        clean_path("../x", "a.md")


def test_a_job_left_by_a_stopped_process_is_reported_interrupted(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    catalog = Catalog(tmp_path / "c.sqlite")
    job = catalog.new_job("upload", "alice", [JobFile("a.md", "a.md", "upload:a.md", "done"),
                                              JobFile("b.md", "b.md", "upload:b.md")])  # fmt: skip
    job.state = "running"
    catalog.save_job(job)
    catalog._db.execute("UPDATE jobs SET pid = ?, instance = 'stopped' WHERE job_id = ?",
                        (int(dead.stdout), job.job_id))  # fmt: skip
    claimed = catalog.claim_unfinished()
    for left in claimed:
        catalog.interrupt(left)
    assert [j.job_id for j in claimed] == [job.job_id]
    view = catalog.job(job.job_id).view()
    assert view["state"] == "interrupted"
    assert [f["status"] for f in view["files"]] == ["done", "failed"]
    assert "restart" in view["files"][1]["reason"]
    catalog.close()


def test_schedules() -> None:
    assert interval_s("every 1h") == 3600 and interval_s("30m") == 1800 and interval_s("") is None
    for bad in ("hourly", "every 5s"):
        with pytest.raises(InputError):
            interval_s(bad)


def test_the_users_file_admin_flag(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    entry = {"identity": "carol", "groups": [], "token_sha256": hash_token("t"), "admin": True}
    path.write_text(json.dumps({"users": [entry]}))
    assert read_users(path)[hash_token("t")].admin is True
    path.write_text(json.dumps({"users": [{**entry, "admin": "yes"}]}))
    with pytest.raises(ConfigError, match="admin"):
        read_users(path)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def wait_for_end(catalog: Catalog, job_id: str, bound_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        view = catalog.job(job_id).view()
        if view["state"] in ("done", "failed", "interrupted"):
            return view
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end within {bound_s} s")


def test_a_job_left_by_a_stopped_process_is_finished_from_its_originals(tmp_path: Path) -> None:
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=hash_model()) as kb:
        library = Library(kb)
        uploads = [Upload("a.md", b"# A\n\nAlpha says MANGO-3.\n"),
                   Upload("b.md", b"# B\n\nBeta says PAPAYA-8.\n")]  # fmt: skip
        files, items = plan(library, uploads, owner="alice", acl=("user:alice",))
        job = library.catalog.new_job("upload", "alice", files)
        run_job(library, job, [items[0], None])  # the process stopped after the first file
        job.files[1].status, job.state = "embedding", "running"
        library.catalog.save_job(job)
        sync = library.catalog.new_job("sync", "alice", [JobFile("s.md", "s.md", "s:s.md")])
        sync.state = "running"
        library.catalog.save_job(sync)
        dead = _dead_pid()
        library.catalog._db.execute("UPDATE jobs SET pid = ?, instance = 'stopped'", (dead,))

        runner = JobRunner(library)
        assert resume_unfinished(library, runner) == [job.job_id]
        view = wait_for_end(library.catalog, job.job_id)
        assert view["state"] == "done" and [f["status"] for f in view["files"]] == ["done"] * 2
        assert not {"blob", "sha256", "size", "acl"} & set(view["files"][0])  # never shown
        row = library.catalog.get("upload:b.md")
        assert row is not None and row.acl == "user:alice"  # its access list, as uploaded
        assert "PAPAYA-8" in kb.search("PAPAYA-8", 1)[0].text
        # A sync is not resumed (the next sync does its work): it is reported interrupted.
        assert library.catalog.job(sync.job_id).view()["state"] == "interrupted"
        runner.close()
        library.close()


def test_an_unfinished_job_has_one_claimant_while_it_lives(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    job = catalog.new_job("upload", "alice", [JobFile("a.md", "a.md", "upload:a.md")])
    catalog._db.execute("UPDATE jobs SET pid = ?", (_dead_pid(),))
    claimant = subprocess.Popen(
        [sys.executable, "-c", CLAIM_AND_WAIT, str(tmp_path / "c.sqlite")],
        stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert claimant.stdout is not None and claimant.stdout.readline().split() == [job.job_id]
        assert catalog.claim_unfinished() == []  # another replica has it, and is alive
    finally:
        claimant.communicate("", timeout=30)  # it ends on end of input
    assert [j.job_id for j in catalog.claim_unfinished()] == [job.job_id]  # its claimant died
    catalog.close()


CLAIM_AND_WAIT = """
import sys
from pathlib import Path
from tools.kb.documents.catalog import Catalog
catalog = Catalog(Path(sys.argv[1]))
print(" ".join(j.job_id for j in catalog.claim_unfinished()), flush=True)
sys.stdin.read()
"""


def test_the_document_list_reads_the_registry_once_per_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's page lists documents often: the registry (tens of thousands of records at
    scale) is read again only after a commit or a catalog change, never per request."""
    from tools.access.acl import Reader

    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=hash_model()) as kb:
        library = Library(kb)
        _files, items = plan(library, [Upload("a.md", b"# A\n\nAlpha.\n")], owner="alice",
                            acl=(), folder="team", limits=LoadLimits())  # fmt: skip
        library.ingest_many(items)
        reads: list[int] = []
        pages = kb.registry.pages
        monkeypatch.setattr(kb.registry, "pages", lambda *a: (reads.append(1), pages(*a))[1])
        everyone = Reader.everyone()

        def listed() -> tuple[list[str], int]:
            before = len(reads)
            paths = [d["path"] for d in library.documents(everyone)]
            return paths, len(reads) - before

        assert listed() == (["team/a.md"], 1)
        assert listed() == (["team/a.md"], 0)  # unchanged: not read again
        _files, items = plan(library, [Upload("b.md", b"# B\n\nBeta.\n")], owner="bob",
                            acl=(), folder="team", limits=LoadLimits())  # fmt: skip
        library.ingest_many(items)
        assert listed() == (["team/a.md", "team/b.md"], 1)
        library.catalog.forget(items[0].doc_id)  # a catalog change alone is seen too
        assert listed()[1] == 1
        assert library.documents(everyone)[1]["owner"] == ""
        library.close()
