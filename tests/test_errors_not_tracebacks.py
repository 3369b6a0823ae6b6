"""What a user gets wrong, or what breaks around them, is one error line naming the
problem (or a warning and the run going on), never a traceback, and nothing is lost."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from cli import common
from cli.main import main
from tests.fakes import hash_model
from tools.evaluation.run_stats import load_runs, record_run
from tools.kb.embeddings import EmbeddingCache
from tools.kb.knowledge_base import KnowledgeBase

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kb"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("hybrid-rag: error: "), err
    return lines[0]


@pytest.fixture
def hash_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    def open_kb(args: Any) -> KnowledgeBase:
        return KnowledgeBase(common.kb_config(args), embedding_model=hash_model())

    monkeypatch.setattr("cli.kb_commands.open_kb", open_kb)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_openai_embedding_without_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run(
        capsys, "--home", str(tmp_path), "ingest", str(SAMPLE), "--embedding", "openai:emb"
    )
    line = one_error(err)
    assert code == 2 and "'openai:emb'" in line and "OPENAI_API_KEY" in line


def test_openai_embedding_at_a_refused_base_url_needs_no_download(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A secret in the URL must not reach the message; tiktoken must not be fetched
    # (no network here: a download attempt would be a traceback).
    port = _closed_port()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-shown")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:pw-never-shown@127.0.0.1:{port}/v1")
    code, _, err = run(
        capsys, "--home", str(tmp_path), "ingest", str(SAMPLE), "--embedding", "openai:emb"
    )
    line = one_error(err)
    assert code != 0 and f"127.0.0.1:{port}" in line and "openai:emb" in line
    assert "never-shown" not in err


def test_data_home_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("HYBRID_RAG_HOME", str(home))
    for argv in (["kb", "stats"], ["ask", "What is the leave policy?"], ["stats"]):
        code, _, err = run(capsys, *argv)
        line = one_error(err)
        assert code == 2 and "$HYBRID_RAG_HOME" in line and "is a file" in line, argv
    assert home.read_text() == "not a folder"  # nothing lost


@pytest.mark.parametrize(("port", "says"), [("abc", "a number"), ("70000", "between 1 and")])
def test_chroma_port_not_a_port(
    port: str, says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CHROMA_PORT", port)
    code, _, err = run(capsys, "kb", "stats")
    line = one_error(err)
    assert code == 2 and "CHROMA_PORT" in line and says in line


def test_a_corrupt_embedding_cache_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "embedding_cache.sqlite3"
    path.write_bytes(b"garbage, not SQLite " * 100)
    with caplog.at_level("WARNING"):
        cache = EmbeddingCache(path)
    try:
        cache.put_many("m", ["a"], [[1.0, 2.0]])
        assert cache.get_many("m", ["a"]) == [[1.0, 2.0]]
    finally:
        cache.close()
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(f"{path.name}.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"garbage")  # kept
    assert str(path) in caplog.text and str(aside[0]) in caplog.text


def test_a_cache_that_fails_mid_run_is_a_warning_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    cache._conn.close()  # what a disk error does to the connection
    with caplog.at_level("WARNING"):
        assert cache.get_many("m", ["a", "b"]) == [None, None]
        cache.put_many("m", ["a"], [[1.0]])
    assert cache.broken and "going on without it" in caplog.text


def test_the_run_log_survives_torn_and_foreign_lines(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    record_run(path, {"route": "knowledge", "strategy": "vector"})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('[1, 2]\n"just a string"\n{"route": "search", "strat')  # torn: no newline
    record_run(path, {"route": "search", "strategy": "search"})
    runs, unreadable = load_runs(path)
    assert [r["route"] for r in runs] == ["knowledge", "search"]  # the new run is not lost
    assert unreadable == 3
    path.write_bytes(path.read_bytes() + b"\xff\xfe broken bytes\n")
    assert load_runs(path)[1] == 4


def test_stats_reports_unreadable_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.jsonl").write_text('{"route": "knowledge"}\n[1]\n{"torn')
    code, out, err = run(capsys, "--home", str(tmp_path), "stats", "--json")
    assert code == 0 and "Traceback" not in err
    summary = json.loads(out)
    assert summary["runs"] == 1 and summary["unreadable_lines"] == 2


def test_read_commands_never_create_a_collection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hash_cli: None
) -> None:
    home = str(tmp_path / "home")
    assert main(["--home", home, "ingest", str(SAMPLE), "--collection", "handbook"]) == 0
    capsys.readouterr()
    for argv in (
        ["search", "annual leave", "--collection", "handbok"],
        ["kb", "stats", "--collection", "handbok"],
        ["kb", "delete", "x.md", "--collection", "handbok"],
        ["ask", "annual leave?", "--set", "collection=handbok"],
    ):
        code, _, err = run(capsys, "--home", home, *argv)
        line = one_error(err)
        assert code == 2 and "'handbok'" in line and "existing: handbook" in line, argv
    from tools.kb.store import StoreLocation, knowledge_bases, open_client

    client = open_client(StoreLocation(path=Path(home) / "chroma"))
    assert knowledge_bases(client) == ["handbook"]  # nothing was created by the reads
