"""The knowledge base against a real ``chroma run`` server on 127.0.0.1.

The server is started by the ``chroma_server`` fixture (tests/servers.py: output to a log
file, stopped in its teardown). Skipped when the ``chroma`` executable is not installed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes import hash_model
from tests.servers import ChromaServer, free_port
from tools.errors import InputError, StoreError
from tools.kb.knowledge_base import SEARCH_MODES, KBConfig, KnowledgeBase

HOST = "127.0.0.1"


def _server_kb(home: Path, server: ChromaServer, collection: str) -> KnowledgeBase:
    return KnowledgeBase(
        KBConfig(
            home=home, chroma_host=server.host, chroma_port=server.port, collection=collection
        ),
        embedding_model=hash_model(),
    )


def test_knowledge_base_on_chroma_server(
    chroma_server: ChromaServer, kb_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "server-home"
    with _server_kb(home, chroma_server, "server-it") as kb:
        report = kb.ingest([kb_dir])
        assert sorted(report.added) == [
            "expenses.md",
            "it.txt",
            "leave.md",
            "nianjia.md",
            "robot.md",
        ]
        assert report.skipped == []
        # Nothing embedded locally: the vectors live in the server.
        assert not (home / "chroma").exists()

        stats = kb.stats()
        assert stats["store"] == f"Chroma server at {chroma_server.host}:{chroma_server.port}"
        assert stats["documents"] == 5
        assert stats["chunks"] == report.chunks_written
        assert stats["stale_chunks"] == 0
        assert set(stats["languages"]) == {"en", "zh"}

        for mode in SEARCH_MODES:
            res = kb.search("extension 4455 outage", k=3, mode=mode)
            assert res, mode
            assert res[0].doc_id == "it.txt", mode
            assert all(0.0 <= r.relevance <= 1.0 for r in res), mode
        hybrid = kb.search("how many days of annual leave after five years", k=3)
        assert hybrid[0].doc_id == "leave.md"
        assert hybrid[0].vector_score is not None
        assert kb.search("年假天数", k=2, mode="bm25")[0].doc_id == "nianjia.md"
        only = kb.search("annual leave", k=5, doc_ids=["robot.md"])
        assert {r.doc_id for r in only} <= {"robot.md"}

        # Update one document: the old chunks disappear everywhere.
        (kb_dir / "leave.md").write_text(
            "# Annual leave\n\nEmployees now receive 20 days of annual leave.\n",
            encoding="utf-8",
        )
        report = kb.ingest([kb_dir])
        assert report.updated == ["leave.md"]
        assert len(report.unchanged) == 4
        for mode in SEARCH_MODES:
            texts = [
                r.text
                for r in kb.search("annual leave days", k=10, mode=mode)
                if r.doc_id == "leave.md"
            ]
            assert any("20 days" in t for t in texts), mode
            assert not any("15 days" in t for t in texts), mode

        # Delete one document.
        assert kb.delete("robot.md") >= 1
        for mode in SEARCH_MODES:
            res = kb.search("R2 robot 300 kg", k=10, mode=mode)
            assert all(r.doc_id != "robot.md" for r in res), mode
        with pytest.raises(InputError, match=r"robot\.md"):
            kb.delete("robot.md")

        stats = kb.stats()
        assert stats["documents"] == 4
        assert stats["documents_list"] == ["expenses.md", "it.txt", "leave.md", "nianjia.md"]
        assert stats["stale_chunks"] == 0

    # A second client with an empty local home sees the same server-side state.
    with _server_kb(tmp_path / "other-home", chroma_server, "server-it") as again:
        stats = again.stats()
        assert stats["documents_list"] == ["expenses.md", "it.txt", "leave.md", "nianjia.md"]
        assert again.search("extension 4455", k=1, mode="bm25")[0].doc_id == "it.txt"
        again.drop()


def test_unreachable_server_raises_store_error_naming_host_and_port(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        KnowledgeBase(
            KBConfig(home=tmp_path / "h", chroma_host=HOST, chroma_port=port),
            embedding_model=hash_model(),
        )
    message = str(info.value)
    assert HOST in message
    assert str(port) in message
    assert f"{HOST}:{port}" in message
    assert time.monotonic() - started < 30


def test_cli_ingest_and_ask_both_honour_chroma_host_and_port(
    chroma_server: ChromaServer,
    kb_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Regression: `ask` ignored CHROMA_HOST/CHROMA_PORT and read the embedded store,
    # so a KB ingested into a server was invisible to it.
    import json

    from cli.main import main
    from run import resources

    monkeypatch.setattr(
        "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
    )
    monkeypatch.setenv("CHROMA_HOST", chroma_server.host)
    monkeypatch.setenv("CHROMA_PORT", str(chroma_server.port))
    home = tmp_path / "cli-home"
    common = ["--home", str(home)]
    assert main([*common, "ingest", str(kb_dir), "--collection", "cli-env"]) == 0
    capsys.readouterr()
    try:
        question = "Which extension do I call for an outage?"
        code = main(
            [
                *common,
                "ask",
                question,
                "--json",
                "--set",
                "collection=cli-env",
                "--set",
                "search_provider=none",
            ]
        )
        assert code == 0
        out = json.loads(capsys.readouterr().out)
    finally:
        resources.close_all()
    assert any(c["doc_id"] == "it.txt" for c in out["citations"]), out["answer"]
    assert not (home / "chroma").exists()  # nothing was read from (or written to) disk


def test_the_readers_filter_runs_inside_the_chroma_server(
    chroma_server: ChromaServer, kb_dir: Path, tmp_path: Path
) -> None:
    from tools.access.acl import Reader, parse_acl

    with _server_kb(tmp_path / "acl-home", chroma_server, "server-acl") as kb:
        kb.ingest([kb_dir])
        kb.ingest([kb_dir / "leave.md"], acl=parse_acl("group:hr"), prune=False)
        outsider = Reader.of("bob", ["finance"])
        # The server answers the id-restricted query: n readable candidates, none of HR's.
        pool = kb.pipeline.candidate_pool("annual leave days", mode="vector", reader=outsider, n=3)
        snap = kb.snapshot()
        docs = {snap.metadatas[snap.position[c]]["doc_id"] for c in pool.vector_found}
        assert len(pool.vector_found) == 3 and "leave.md" not in docs
        hr = kb.search("annual leave days", 3, reader=Reader.of("carol", ["hr"]))
        assert hr[0].doc_id == "leave.md"
