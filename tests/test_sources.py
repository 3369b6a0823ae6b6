"""Sources stay in sync (tools/sources): after a second sync the knowledge base holds
exactly the source's current contents, for a folder, an S3 bucket on a real
S3-compatible server (moto's server mode on loopback) and a loopback web site read
through the page reader (robots.txt followed, a 404 or 410 page removed). A sync killed
with ``kill -9`` halfway and run again ends in the same state."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.langgraph_server import server_env
from tests.ports import HOST
from tests.s3_server import CREDENTIALS, S3Server
from tools.access.acl import Reader
from tools.kb.documents.library import Library, catalog_path
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.sources.model import Source, SourceStore
from tools.sources.sync import sync

HYBRID_RAG = Path(sys.executable).parent / "hybrid-rag"


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    with KnowledgeBase(KBConfig(home=tmp_path / "home")) as kb:
        lib = Library(kb)
        yield lib
        lib.close()


def contents(library: Library, source: Source) -> dict[str, str]:
    """path -> the document's text, for the documents of ``source``."""
    out = {}
    for doc in library.documents(Reader.everyone()):
        if doc["source"] == source.origin:
            chunks = library.chunks(doc["doc_id"], Reader.everyone()) or []
            out[doc["path"]] = "\n".join(c["text"] for c in chunks)
    return out


def assert_exactly(library: Library, source: Source, expected: dict[str, str]) -> None:
    held = contents(library, source)
    assert set(held) == set(expected), held
    for path, fact in expected.items():
        assert fact in held[path], (path, held[path])
    stats = library.kb.stats()
    assert stats["stale_chunks"] == 0  # nothing duplicated, no old version left
    assert stats["documents"] == len(library.documents(Reader.everyone()))


def fact(n: int, version: int = 1) -> str:
    return f"The code of item {n} is KEY-{n}-v{version}."


def test_a_folder_source_holds_exactly_the_folder(library: Library, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    for n in (1, 2, 3):
        (folder / "sub" / f"d{n}.md").write_text(f"# Item {n}\n\n{fact(n)}\n")
    (folder / "notes.bin").write_bytes(b"\x00\x01")
    source = Source("docs", "folder", str(folder), ("group:hr",))
    first = sync(library, source)
    assert (first.added, first.skipped, first.failed) == (3, 1, 0)
    (folder / "sub" / "d2.md").write_text(f"# Item 2\n\n{fact(2, 2)}\n")  # edited
    (folder / "sub" / "d3.md").unlink()  # deleted
    (folder / "d4.md").write_text(f"# Item 4\n\n{fact(4)}\n")  # new
    second = sync(library, source)
    assert (second.added, second.updated, second.removed, second.unchanged) == (1, 1, 1, 1)
    assert_exactly(
        library, source, {"sub/d1.md": fact(1), "sub/d2.md": fact(2, 2), "d4.md": fact(4)}
    )
    assert library.document("src:docs:sub/d1.md", Reader.of("bob")) is None  # its ACL holds
    third = sync(library, source)
    assert (third.added, third.updated, third.removed, third.unchanged) == (0, 0, 0, 3)


def test_a_folder_sync_names_the_links_it_left_out(library: Library, tmp_path: Path) -> None:
    """Issue 43: links out of the folder were left out silently ("0 skipped")."""
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "salaries.md").write_text("# Salaries\n\nSECRET-9\n")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(f"# A\n\n{fact(1)}\n")
    (folder / "pay.md").symlink_to(outside / "salaries.md")
    (folder / "private").symlink_to(outside)
    (folder / "gone.md").symlink_to(tmp_path / "nowhere.md")
    (folder / "photo.bin").write_bytes(b"\x00")
    result = sync(library, Source("docs", "folder", str(folder)))
    assert (result.added, result.skipped) == (1, 4)
    named = {line.partition(": ")[0]: line.partition(": ")[2] for line in result.left_out}
    assert set(named) == {"pay.md", "private", "gone.md", "photo.bin"}, result.left_out
    assert "outside the folder: not followed" in named["pay.md"]
    assert "outside the folder: not followed" in named["private"]
    assert "unsupported file type '.bin'" in named["photo.bin"]


def test_a_source_that_cannot_be_listed_removes_nothing(library: Library, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(f"# A\n\n{fact(1)}\n")
    source = Source("docs", "folder", str(folder))
    sync(library, source)
    folder.rename(tmp_path / "moved")  # e.g. an unmounted share
    result = sync(library, source)
    assert not result.finished and "does not exist" in result.errors[0]
    assert_exactly(library, source, {"a.md": fact(1)})


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    server = S3Server(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def test_an_s3_source_holds_exactly_the_bucket_prefix(library: Library, s3: S3Server) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.url, region_name="us-east-1")
    client.create_bucket(Bucket="team")
    put = lambda key, text: client.put_object(Bucket="team", Key=key, Body=text.encode())  # noqa: E731
    for n in (1, 2, 3):
        put(f"kb/d{n}.md", f"# Item {n}\n\n{fact(n)}\n")
    put("other/x.md", "# Not under the prefix\n\nKEY-OUTSIDE\n")
    source = Source("bucket", "s3", "s3://team/kb/", options={"endpoint_url": s3.url})
    assert sync(library, source).added == 3
    put("kb/d2.md", f"# Item 2\n\n{fact(2, 2)}\n")
    client.delete_object(Bucket="team", Key="kb/d3.md")
    put("kb/deeper/d4.md", f"# Item 4\n\n{fact(4)}\n")
    second = sync(library, source)
    assert (second.added, second.updated, second.removed, second.unchanged) == (1, 1, 1, 1)
    assert_exactly(
        library,
        source,
        {"s3://team/kb/d1.md": fact(1), "s3://team/kb/d2.md": fact(2, 2),
         "s3://team/kb/deeper/d4.md": fact(4)},
    )  # fmt: skip


class Site:
    """A loopback web site whose pages the test changes; it logs every path asked."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str, str]] = {}  # path -> (status, type, body)
        self.asked: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.asked.append(self.path)
                status, ctype, body = site.pages.get(self.path, (404, "text/plain", "no"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, title: str, text: str, status: int = 200) -> None:
        body = f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{text}</p></main></body></html>"
        self.pages[path] = (status, "text/html; charset=utf-8", body)


def test_a_sitemap_source_follows_robots_and_removes_gone_pages(
    library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_PAGES_ALLOW_HOSTS", HOST)
    site = Site()
    try:
        site.pages["/robots.txt"] = (200, "text/plain", "User-agent: *\nDisallow: /private/\n")
        for name, n in (("a", 1), ("b", 2), ("c", 3)):
            site.page(f"/{name}.html", f"Page {name}", fact(n))
        site.page("/private/secret.html", "Secret", "KEY-SECRET")
        locs = "".join(f"<url><loc>{site.url}{p}</loc></url>"
                       for p in ("/a.html", "/b.html", "/c.html", "/private/secret.html"))  # fmt: skip
        site.pages["/sitemap.xml"] = (200, "application/xml", f"<urlset>{locs}</urlset>")
        source = Source("site", "sitemap", f"{site.url}/sitemap.xml")
        assert sync(library, source).added == 3
        assert "/private/secret.html" not in site.asked  # robots.txt followed
        site.pages["/b.html"] = (404, "text/html", "gone")
        site.pages["/c.html"] = (410, "text/html", "gone for good")
        site.page("/a.html", "Page a", fact(1, 2))
        second = sync(library, source)
        assert (second.updated, second.removed) == (1, 2)
        assert_exactly(library, source, {f"{site.url}/a.html": fact(1, 2)})
        site.pages["/a.html"] = (503, "text/html", "down for a moment")
        third = sync(library, source)  # a page that fails this time is kept
        assert third.failed == 1 and third.removed == 0
        assert_exactly(library, source, {f"{site.url}/a.html": fact(1, 2)})
    finally:
        site.server.shutdown()


def test_a_sitemap_sync_holds_a_few_pages_at_a_time(
    library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: every page of a sitemap was fetched and held before the first was
    stored (300 pages of 1.9 MB peaked at 943 MB). Now pages are fetched a window at a
    time as the sync stores them: when a page is stored, at most one window of pages
    has been fetched and not yet stored."""
    from tools.sources.listers import PAGE_CONCURRENCY

    monkeypatch.setenv("HYBRID_RAG_PAGES_ALLOW_HOSTS", HOST)
    site = Site()
    try:
        site.pages["/robots.txt"] = (200, "text/plain", "User-agent: *\n")
        pages = [f"/p{n}.html" for n in range(16)]
        for n, path in enumerate(pages):
            site.page(path, f"Page {n}", fact(n))
        locs = "".join(f"<url><loc>{site.url}{p}</loc></url>" for p in pages)
        site.pages["/sitemap.xml"] = (200, "application/xml", f"<urlset>{locs}</urlset>")
        held: list[int] = []
        put = library.originals.put

        def counting_put(data: bytes, suffix: str) -> tuple[str, str]:
            fetched = sum(1 for p in site.asked if p.startswith("/p"))
            held.append(fetched - len(held))
            return put(data, suffix)

        monkeypatch.setattr(library.originals, "put", counting_put)
        result = sync(library, Source("site", "sitemap", f"{site.url}/sitemap.xml"))
        assert result.added == 16 and len(held) == 16
        assert max(held) <= PAGE_CONCURRENCY, held  # was 16: every page before the first
    finally:
        site.server.shutdown()


def _synced(home: Path) -> int:
    """Documents of the source committed with their catalog row so far."""
    path = catalog_path(home, "knowledge")
    if not path.exists():
        return 0
    with sqlite3.connect(path, timeout=5) as db:
        try:
            return int(db.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def test_a_sync_killed_halfway_and_run_again_ends_in_the_same_state(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "docs"
    folder.mkdir()
    total = 40
    for n in range(total):
        (folder / f"d{n:02d}.md").write_text(f"# Item {n}\n\n{fact(n)}\n")
    env = server_env(home)
    cli = [str(HYBRID_RAG), "--home", str(home), "sources"]
    subprocess.run([*cli, "add", "docs", "folder", str(folder)], check=True, env=env, timeout=120)
    run = subprocess.Popen([*cli, "sync", "docs"], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _synced(home) < 3 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.02)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=30)
    assert 0 < _synced(home) < total, "the sync was not killed halfway"
    subprocess.run([*cli, "sync", "docs"], check=True, env=env, timeout=300)
    with KnowledgeBase(KBConfig(home=home)) as kb:
        lib = Library(kb)
        source = SourceStore(catalog_path(home, "knowledge")).get("docs")
        assert source is not None
        assert_exactly(lib, source, {f"d{n:02d}.md": fact(n) for n in range(total)})
        assert kb.stats()["documents"] == total
        lib.close()
