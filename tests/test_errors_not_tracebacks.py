"""What a user gets wrong, or what breaks around them, is one error line naming the
problem (or a warning and the run going on), never a traceback, and nothing is lost."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

import pytest

from cli.main import main
from tests.fakes import hash_kb_cli
from tools.evaluation.run_stats import load_runs, record_run
from tools.kb.embed.embedding_cache import EmbeddingCache

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
    hash_kb_cli(monkeypatch)


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
    assert code == 2 and "'openai:emb'" in line and "OPENAI_API_KEY is not set" in line


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
    assert "cannot connect" in line and "never-shown" not in err


def test_a_patched_cli_kb_is_undone_for_the_next_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two in-process CLI calls in sequence: one with the tests' hash KB, then a real one.
    The patch once imported cli.kb_commands with the fake bound (its first import), so
    monkeypatch "restored" the fake and the second call ingested with it, ignoring
    --embedding; its error line never came."""
    import sys

    import cli
    import cli.common
    import cli.kb_commands

    real_open_kb = cli.common.open_kb
    # as in a fresh process: the patch is the first to import cli.kb_commands
    monkeypatch.delitem(sys.modules, "cli.kb_commands")
    monkeypatch.delattr(cli, "kb_commands")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text("Employees get 15 days of annual leave.\n")
    with pytest.MonkeyPatch.context() as patched:
        hash_kb_cli(patched)
        code, out, _ = run(capsys, "--home", str(tmp_path / "a"), "ingest", str(tmp_path / "docs"))
        assert code == 0 and "1 added" in out
    assert sys.modules["cli.kb_commands"].open_kb is real_open_kb
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run(
        capsys, "--home", str(tmp_path / "b"), "ingest", str(SAMPLE), "--embedding", "openai:emb"
    )
    line = one_error(err)
    assert code == 2 and "OPENAI_API_KEY is not set" in line


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


@pytest.mark.parametrize(
    ("port", "says"), [("abc", "a number"), ("0", "between 1 and"), ("70000", "between 1 and")]
)
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
    from tools.kb.store.chroma.chroma_store import StoreLocation, knowledge_bases, open_client

    client = open_client(StoreLocation(path=Path(home) / "chroma"))
    assert knowledge_bases(client) == ["handbook"]  # nothing was created by the reads


def test_data_home_whose_chroma_folder_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chroma").write_text("in the way")
    code, _, err = run(capsys, "--home", str(tmp_path), "kb", "stats")
    line = one_error(err)
    assert code == 2 and str(tmp_path / "chroma") in line and "a file is in the way" in line
    assert (tmp_path / "chroma").read_text() == "in the way"


def test_run_log_that_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.jsonl").mkdir()
    code, _, err = run(capsys, "--home", str(tmp_path), "stats")
    line = one_error(err)
    assert code == 2 and str(tmp_path / "runs.jsonl") in line and "Is a directory" in line


def _filled_cache(path: Path) -> None:
    cache = EmbeddingCache(path)
    texts = [f"text {i} " * 20 for i in range(300)]
    cache.put_many("m", texts, [[float(i)] * 64 for i in range(300)])
    cache.close()


def test_truncated_caches_are_moved_aside_without_overwriting_each_other(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "embedding_cache.sqlite3"
    truncated: list[bytes] = []
    for _ in range(2):  # twice within one second: two files kept, not one overwritten
        _filled_cache(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        truncated.append(path.read_bytes())
        with caplog.at_level("WARNING"):
            cache = EmbeddingCache(path)
        assert not cache.broken and cache.get_many("m", ["text 1 " * 20]) == [None]
        cache.close()
    aside = sorted(p for p in tmp_path.iterdir() if ".corrupt-" in p.name)
    assert len(aside) == 2 and sorted(p.read_bytes() for p in aside) == sorted(truncated)
    assert all(str(p) in caplog.text for p in aside)


def test_a_locked_cache_is_used_by_another_process_so_it_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "embedding_cache.sqlite3"
    _filled_cache(path)
    holder = sqlite3.connect(path)  # another process mid-write, holding the file
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO embeddings VALUES ('x', 'y', x'00')")
    try:
        with caplog.at_level("WARNING"):
            cache = EmbeddingCache(path)  # waits sqlite's busy timeout, then goes on
        assert cache.broken and cache.get_many("m", ["text 1 " * 20]) == [None]
        cache.put_many("m", ["a"], [[1.0]])
        cache.close()
    finally:
        holder.rollback()
        holder.close()
    assert "database is locked" in caplog.text and "going on without it" in caplog.text
    assert [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name] == []
    reopened = EmbeddingCache(path)  # the healthy cache is intact
    assert reopened.get_many("m", ["text 1 " * 20]) == [[1.0] * 64]
    reopened.close()


def test_a_folder_in_place_of_the_cache_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "embedding_cache.sqlite3"
    path.mkdir()
    with caplog.at_level("WARNING"):
        cache = EmbeddingCache(path)
    assert cache.broken and cache.get_many("m", ["a"]) == [None]
    cache.close()
    assert path.is_dir() and "unable to open database file" in caplog.text


def test_search_with_a_corrupt_cache_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hash_cli: None
) -> None:
    home = tmp_path / "home"
    assert main(["--home", str(home), "ingest", str(SAMPLE)]) == 0
    cache = home / "embedding_cache.sqlite3"
    cache.write_bytes(cache.read_bytes()[:5000])  # truncated
    capsys.readouterr()
    code, out, err = run(capsys, "--home", str(home), "search", "annual leave")
    assert code == 0 and "annual-leave.md" in out and "Traceback" not in err
    assert len(list(home.glob("embedding_cache.sqlite3.corrupt-*"))) == 1


def test_the_run_log_skips_deep_nesting_and_keeps_line_separators(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text("[" * 100_000 + "\n")  # json's recursion limit, not a crash
    record_run(path, {"route": "knowledge", "note": "a\u2028b\u2029c\x85d"})
    runs, unreadable = load_runs(path)
    assert unreadable == 1 and [r["note"] for r in runs] == ["a\u2028b\u2029c\x85d"]


@pytest.mark.parametrize("agent", [False, True])
def test_a_run_on_an_empty_home_answers_and_creates_nothing(
    agent: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], hash_cli: None
) -> None:
    # A newcomer asks (or runs `langgraph dev`) before ingesting: an answer with a warning;
    # no empty collection is created, so it cannot pin the embedding model the first
    # ingest then uses (here the hash embedder, not the graph's default model).
    home = str(tmp_path / "home")
    argv = ["ask", "How many days of annual leave?", "--set", "model=offline"]
    code, out, err = run(
        capsys, "--home", home, *argv, "--set", "search_provider=none", *(["--agent"] * agent)
    )
    assert code == 0 and "Traceback" not in err
    assert "no knowledge base (collection) 'knowledge'" in out and "nothing ingested yet" in out
    from tools.kb.store.chroma.chroma_store import StoreLocation, knowledge_bases, open_client

    client = open_client(StoreLocation(path=Path(home) / "chroma"))
    assert knowledge_bases(client) == []
    assert main(["--home", home, "ingest", str(SAMPLE)]) == 0
