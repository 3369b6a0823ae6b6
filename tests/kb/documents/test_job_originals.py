"""Upload jobs and what other owners and other jobs hold (issue 53 items 7 and 17): a job
resumed after its server died checks the name's owner as a fresh one does, and a failed
file removes its stored original only when nothing else uses it. No server, no model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes import hash_model
from tests.kb.documents.test_jobs import wait_for_end
from tools.kb.documents.jobs import JobRunner, Upload, plan, resume_unfinished, run_job
from tools.kb.documents.library import Library
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

BOB = b"# Shared\n\nBob's text says HIJACK-7.\n"
ALICE = b"# Shared\n\nAlice's text says ORIGINAL-1.\n"


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_a_resumed_job_never_replaces_a_document_another_owner_took_meanwhile(
    tmp_path: Path,
) -> None:
    """Bob's upload of a new name is left by a killed server; alice uploads that name
    to the replica; the replica resumes bob's job: his file fails naming the conflict,
    alice's document, its owner, access and original stay hers (bob's text was indexed
    as hers and her original deleted)."""
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=hash_model()) as kb:
        library = Library(kb)
        files, _ = plan(library, [Upload("atk2.md", BOB)], owner="bob", acl=("user:bob",),
                        folder="shared")  # fmt: skip
        left = library.catalog.new_job("upload", "bob", files)
        library.catalog._db.execute(
            "UPDATE jobs SET pid = ?, instance = 'stopped', state = 'running'", (_dead_pid(),)
        )
        files, items = plan(library, [Upload("atk2.md", ALICE)], owner="alice",
                            acl=("user:alice",), folder="shared")  # fmt: skip
        run_job(library, library.catalog.new_job("upload", "alice", files), items)
        before = library.catalog.get("upload:shared/atk2.md")
        assert before is not None and before.owner == "alice"

        runner = JobRunner(library)
        assert resume_unfinished(library, runner) == [left.job_id]
        view = wait_for_end(library.catalog, left.job_id)
        runner.close()
        assert view["state"] == "failed"
        reason = view["files"][0]["reason"]
        assert view["files"][0]["status"] == "failed" and "shared/atk2.md" in reason
        assert "another user's document" in reason
        assert library.catalog.get("upload:shared/atk2.md") == before
        assert library.originals.path(before.blob).read_bytes() == ALICE
        assert "ORIGINAL-1" in kb.search("ORIGINAL-1", 1)[0].text
        assert not [r for r in kb.search("HIJACK-7", 5) if "HIJACK-7" in r.text]
        library.close()


def test_a_failed_file_keeps_an_original_a_queued_job_uses(tmp_path: Path) -> None:
    """Two queued jobs of the same bytes share one stored original: the first failing
    (its name taken by another owner meanwhile) left the second nothing to read."""
    same = b"# Minutes\n\nThe minutes say LYCHEE-4.\n"
    with KnowledgeBase(KBConfig(home=tmp_path), embedding_model=hash_model()) as kb:
        library = Library(kb)
        first_files, first_items = plan(library, [Upload("a.md", same)], owner="alice", acl=())
        first = library.catalog.new_job("upload", "alice", first_files)
        second_files, second_items = plan(library, [Upload("b.md", same)], owner="carol",
                                          acl=())  # fmt: skip
        second = library.catalog.new_job("upload", "carol", second_files)
        blob = first_files[0].blob
        assert second_files[0].blob == blob  # content-addressed: one file
        files, items = plan(library, [Upload("a.md", BOB)], owner="bob", acl=())
        run_job(library, library.catalog.new_job("upload", "bob", files), items)

        run_job(library, first, first_items)  # a.md is bob's now: it fails
        assert library.catalog.job(first.job_id).view()["files"][0]["status"] == "failed"
        assert library.originals.path(blob).is_file(), "the queued job's original was deleted"
        run_job(library, second, second_items)
        assert library.catalog.job(second.job_id).view()["files"][0]["status"] == "done"
        row = library.catalog.get("upload:b.md")
        assert row is not None and library.originals.path(row.blob).read_bytes() == same

        # An original nothing else uses is still removed when its file fails.
        files, items = plan(library, [Upload("d.md", b"# Other\n\nunused\n")], owner="dave",
                            acl=())  # fmt: skip
        dave = library.catalog.new_job("upload", "dave", files)
        taken, taken_items = plan(library, [Upload("d.md", BOB)], owner="bob", acl=())
        run_job(library, library.catalog.new_job("upload", "bob", taken), taken_items)
        run_job(library, dave, items)
        assert library.catalog.job(dave.job_id).view()["files"][0]["status"] == "failed"
        assert not library.originals.path(files[0].blob).exists()
        library.close()
