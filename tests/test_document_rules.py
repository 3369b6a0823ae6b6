"""Issue 43, the rules under the document API, without a server: a folder source reads
``.acl`` files exactly as ``hybrid-rag ingest`` does (one rule); an upload's file name
keeps its folders and two files of one request never become one document; an upload
names the documents its sender may not change; an original of a type a browser may run
is served as an attachment."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tools.access.acl import Reader, parse_acl
from tools.errors import InputError
from tools.kb.documents.jobs import Upload, clean_path, owned_by_others, plan, run_job
from tools.kb.documents.library import Library
from tools.kb.documents.originals import serving
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.sources.model import Source
from tools.sources.sync import sync


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    with KnowledgeBase(KBConfig(home=tmp_path / "home")) as kb, closing(Library(kb)) as lib:
        yield lib


def acls(library: Library, origin: str) -> dict[str, str]:
    return {d.path: d.acl for d in library.catalog.rows(origin=origin).values()}


def test_a_folder_source_honours_acl_files_as_ingest_does(library: Library, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "hr" / "deep").mkdir(parents=True)
    (src / "hr" / ".acl").write_text("group:hr  # HR only\n")
    (src / "hr" / "pay.md").write_text("# Pay\n\nThe pay review code is WOMBAT-3.\n")
    (src / "hr" / "deep" / "leave.md").write_text("# Leave\n\nLeave code OTTER-8.\n")
    (src / "menu.md").write_text("# Menu\n\nSoup on Fridays.\n")
    source = Source("share", "folder", str(src), parse_acl("group:staff"))
    result = sync(library, source)
    assert result.added == 3 and not result.errors, result
    expected = {"hr/pay.md": "group:hr", "hr/deep/leave.md": "group:hr", "menu.md": "group:staff"}
    assert acls(library, source.origin) == expected
    # The same folder through `hybrid-rag ingest --acl group:staff`: the same access.
    with KnowledgeBase(KBConfig(home=tmp_path / "cli")) as kb:
        kb.ingest([src], acl=parse_acl("group:staff"))
        by_ingest = {Path(d).name: r["acl"] for d, r in kb.registry.records().items()}
    assert by_ingest == {"pay.md": "group:hr", "leave.md": "group:hr", "menu.md": "group:staff"}
    # A staff member finds nothing of HR's.
    staff = Reader.of("sam", ["staff"])
    assert sorted(d["path"] for d in library.documents(staff)) == ["menu.md"]
    # A changed .acl changes the documents' access at the next sync.
    (src / "hr" / ".acl").write_text("group:hr, group:legal\n")
    assert sync(library, source).updated == 2
    assert acls(library, source.origin)["hr/pay.md"] == "group:hr,group:legal"


def test_a_bad_acl_file_stops_the_folder_sync_before_anything_is_added(
    library: Library, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "hr").mkdir(parents=True)
    (src / "hr" / ".acl").write_text("hr people\n")
    (src / "hr" / "pay.md").write_text("# Pay\n\nWOMBAT-3.\n")
    result = sync(library, Source("share", "folder", str(src), parse_acl("group:staff")))
    assert result.added == 0 and not result.finished
    assert ".acl" in result.errors[0]


def test_a_file_name_keeps_its_folders_and_never_leaves_the_upload_folder() -> None:
    assert clean_path("team", "sub/dup.md") == "team/sub/dup.md"
    assert clean_path("", "a\\b.md") == "a/b.md"
    for bad in ("../../etc/passwd.md", "sub/../x.md", "sub/", ""):
        with pytest.raises(InputError, match="file name"):
            clean_path("team", bad)


def test_two_files_of_one_request_never_become_one_document(library: Library) -> None:
    uploads = [Upload("dup.md", b"# One\n\nFirst LYNX-1.\n"), Upload("dup.md", b"# Two\n\nLYNX-2.\n"),
               Upload("sub/dup.md", b"# Three\n\nThird LYNX-3.\n")]  # fmt: skip
    files, items = plan(library, uploads, owner="alice", acl=("user:alice",), folder="f")
    job = library.catalog.new_job("upload", "alice", files)
    run_job(library, job, items)
    view = library.catalog.job(job.job_id).view()
    assert [(f["path"], f["status"]) for f in view["files"]] == [
        ("f/dup.md", "done"), ("f/dup.md", "failed"), ("f/sub/dup.md", "done")]  # fmt: skip
    assert "already a file of this upload ('dup.md')" in view["files"][1]["reason"]
    done = [f for f in view["files"] if f["status"] == "done"]
    documents = library.documents(Reader.everyone())
    assert len(documents) == len(done)  # every "done" is a document of its own


def test_an_upload_names_the_documents_its_sender_may_not_change(library: Library) -> None:
    files, items = plan(library, [Upload("pay.md", b"# Pay\n\nORCA-41.\n")], owner="alice",
                        acl=("group:hr",), folder="hr")  # fmt: skip
    run_job(library, library.catalog.new_job("upload", "alice", files), items)
    mine = [Upload("pay.md", b"x"), Upload("new.md", b"y")]
    assert owned_by_others(library, mine, "hr", lambda owner: owner == "bob") == ["hr/pay.md"]
    assert owned_by_others(library, mine, "hr", lambda owner: owner == "alice") == []
    assert owned_by_others(library, mine, "other", lambda owner: False) == []


def test_two_uploads_of_one_new_name_at_once_never_replace_each_other(library: Library) -> None:
    # Both checked before either ran: the second to run finds the other's document.
    alice = plan(library, [Upload("pay.md", b"# Pay\n\nORCA-41.\n")], owner="alice",
                 acl=("group:hr",), folder="hr")  # fmt: skip
    bob = plan(library, [Upload("pay.md", b"# Pay\n\nSHARK-9.\n")], owner="bob",
               acl=("user:bob",), folder="hr")  # fmt: skip
    again = plan(library, [Upload("pay.md", b"# Pay\n\nORCA-42.\n")], owner="alice",
                 acl=("group:hr",), folder="hr")  # fmt: skip
    for owner, (files, items) in (("alice", alice), ("bob", bob), ("alice", again)):
        run_job(library, library.catalog.new_job("upload", owner, files), items)
    assert bob[0][0].status == "failed" and "meanwhile" in bob[0][0].reason
    assert again[0][0].status == "done"  # her own name, sent twice at once: fine
    row = library.catalog.get("upload:hr/pay.md")
    assert row is not None and row.owner == "alice" and row.acl == "group:hr"
    text = str(library.chunks("upload:hr/pay.md", Reader.everyone()))
    assert "ORCA-42" in text and "SHARK" not in text


def test_originals_a_browser_may_run_are_attachments() -> None:
    for name in ("a.html", "a.htm", "a.svg", "a.xml", "a.xhtml", "a.docx", "a", "a.js"):
        assert serving(name)[1] == "attachment", name
    for name in ("a.pdf", "a.txt", "a.md", "a.csv"):
        assert serving(name)[1] == "inline", name
    assert serving("a.pdf")[0] == "application/pdf"
