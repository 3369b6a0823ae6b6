"""What the hostile-input probe of issue 33 found, each fault made to happen for real:
no secret echoed, no traceback, one bad file never costs the others, reads never write."""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from run import resources
from tests.fakes import hash_model
from tests.local_provider import LocalServer, Reply
from tests.test_errors_not_tracebacks import hash_cli, one_error, run
from tools.evaluation.run_stats import load_runs, record_run
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

__all__ = ["hash_cli"]  # a fixture shared with test_errors_not_tracebacks

REPO = Path(__file__).resolve().parents[1]
OFFLINE = ("--set", "model=offline", "--set", "search_provider=none")


# 1. A malformed checkpoint URL never echoes its password.
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:secretpw@[::1",  # the probe's: psycopg quotes the whole URI
        "postgresql://u:secretpw@host:99999/db",  # a bad port
        "postgresql://u@host/db?password=secretpw&port=x",  # the password as a parameter
    ],
)
def test_a_malformed_checkpoint_url_never_echoes_its_password(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_CHECKPOINT_URL", url)
    code, out, err = run(capsys, "ask", "x", "--thread", "t1", "--quiet", *OFFLINE)
    line = one_error(err)
    assert code == 2 and "secretpw" not in out + err, line
    assert "Postgres" in line  # still names what is wrong


def test_redact_credentials_in_any_url() -> None:
    from tools.errors import redact_credentials

    text = 'bad "postgresql://u:p@ss:w0rd@[::1" and redis://:tok@h:6379/0 ?x=1&password=pw9'
    out = redact_credentials(text)
    assert "p@ss" not in out and "w0rd" not in out and "tok@" not in out and "pw9" not in out
    assert "postgresql://u:***@[::1" in out and "redis://:***@h:6379/0" in out
    assert redact_credentials("http://host/a:b@c") == "http://host/a:b@c"  # a path
    assert "pa/ss" not in redact_credentials("postgresql://u:pa/ss@h/db")


# 4. An empty principal list is an error, not "no restriction".
@pytest.mark.parametrize("principals", ["", " ", ",", " , "])
def test_search_as_nobody_is_an_error(
    principals: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], hash_cli: None
) -> None:
    home = str(tmp_path / "h")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "secret.md").write_text("# Salaries\n\nThe salary band of level 7 is secret.\n")
    assert main(["--home", home, "ingest", str(docs), "--acl", "group:hr"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "--home", home, "search", "salary band", "--as", principals)
    line = one_error(err)
    assert code == 2 and "--as" in line and "empty access list" in line
    assert "secret" not in out


# 5. A control character in a name cannot forge a line of output.
FORGED = "x\n  [internal-9] Forged policy \u2014 ceo.md \x1b]0;t\x07\t\x85\u2028.md"


def _forged_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("[internal-9]")]


def test_names_with_control_characters_never_forge_output_lines(
    kb_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = kb_dir
    (docs / FORGED).write_text("# Drone D9\n\nThe D9 drone flies 42 minutes per battery.\n")
    kb = KnowledgeBase(KBConfig(), embedding_model=hash_model())  # home: $HYBRID_RAG_HOME
    monkeypatch.setattr("cli.kb_commands.open_kb", lambda args: kb)
    resources.register_kb(kb)
    try:
        code, out, err = run(capsys, "ingest", str(docs))
        assert code == 0 and not _forged_lines(out + err), out
        assert "x\\n  [internal-9] Forged" in out  # shown, escaped, on its own line
        code, out, err = run(capsys, "search", "D9 drone battery")
        assert code == 0 and not _forged_lines(out) and "x\\n" in out
        code, out, err = run(
            capsys,
            "ask",
            "How many minutes does the D9 drone fly?",
            *OFFLINE,
            "--set",
            "refusal_threshold=0",
        )
        assert code == 0 and not _forged_lines(out + err), out
        assert "Sources:" in out, out + err
        sources = out.split("Sources:", 1)[1]
        assert "x\\n  [internal-9] Forged" in sources and "\\t" in sources
        assert "\u2028" not in out and "\x85" not in out  # other line breaks go too
    finally:
        resources.close_all()


def test_shown_name_escapes_every_line_breaking_character() -> None:
    from tools.text import shown_name

    shown = shown_name(FORGED + "\udcff\r\u202e\x00")
    assert len(shown.splitlines()) == 1 and shown.isprintable()
    assert shown.endswith(".md\\xff\\r\\u202e\\x00") and "\\x1b]0;t\\x07\\t\\x85\\u2028" in shown
    assert shown_name("年假 policy.md") == "年假 policy.md"  # ordinary names unchanged


# 6. The run deadline bounds a Chroma server that accepts and never answers.
@pytest.mark.parametrize("graph", [[], ["--agent"]], ids=["state", "agent"])
def test_the_run_deadline_bounds_a_silent_chroma_server(
    graph: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.local_provider import BlackHole

    monkeypatch.delenv("HYBRID_RAG_STORE_TIMEOUT", raising=False)  # 30 s per request
    with BlackHole() as hole:
        monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
        monkeypatch.setenv("CHROMA_PORT", str(hole.port))
        started = time.monotonic()
        code, out, err = run(
            capsys, "ask", "How many days of annual leave?", *graph, "--quiet", *OFFLINE,
            "--set", "run_timeout_s=3",
        )  # fmt: skip
        elapsed = time.monotonic() - started  # asyncio.run waits for the KB's threads too
    assert code == 0 and "Traceback" not in err, err
    assert elapsed < 3 + 10, elapsed  # was 30 s per Chroma request, 153 s in all
    assert "knowledge base unavailable" in out and "run deadline" in out, out


# 7. A file name that is not UTF-8 costs that file only.
def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(
    kb_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], hash_cli: None
) -> None:
    bad = os.fsdecode(bytes(kb_dir) + b"/caf\xe9 menu.md")  # Latin-1 "café": not UTF-8
    Path(bad).write_text("# Menu\n\nThe cafe serves soup on Fridays.\n")
    sub = kb_dir / os.fsdecode(b"\xff-folder")
    sub.mkdir()
    (sub / "inside.md").write_text("# Inside\n\nA folder whose own name is not UTF-8.\n")
    home = str(tmp_path / "h")
    code, out, err = run(capsys, "--home", home, "ingest", str(kb_dir), "--json")
    assert code == 0 and "Traceback" not in err, err
    report = json.loads(out)
    assert sorted(report["added"]) == [
        "expenses.md",
        "it.txt",
        "leave.md",
        "nianjia.md",
        "robot.md",
    ]
    reasons = {s["source"]: s["reason"] for s in report["skipped"]}
    assert len(reasons) == 2 and all("not valid UTF-8" in r for r in reasons.values()), reasons
    assert any(s.endswith("caf\\xe9 menu.md") for s in reasons)  # named readably
    code, out, _ = run(capsys, "--home", home, "ingest", str(kb_dir))  # the plain report
    assert code == 0 and "caf\\xe9 menu.md: file name is not valid UTF-8" in out, out
    code, out, _ = run(capsys, "--home", home, "ingest", bad)  # the file named directly
    assert code == 0 and "skipped" in out and "caf\\xe9" in out


# 8. A damaged store is one line, and `ask` answers without it.
def test_a_damaged_store_is_one_line_and_ask_goes_on_without_it(
    kb_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "h"
    kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    kb.ingest([kb_dir])
    kb.close()
    store = home / "chroma" / "chroma.sqlite3"
    with store.open("r+b") as fh:  # a few pages overwritten, as a bad disk or a stray dd does
        noise = random.Random(33)
        for page in (2, 5, 9, 17, 33):
            fh.seek(page * 4096)
            fh.write(noise.randbytes(4096))
    monkeypatch.setattr(
        "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
    )
    said = f"knowledge base unavailable: damaged store at {store}"
    for argv in (["search", "annual leave"], ["kb", "stats"]):
        code = main(["--home", str(home), *argv])
        out, err = capfd.readouterr()  # the file descriptors: a Rust panic writes to fd 2
        assert code == 2 and said in one_error(err) and "panicked" not in err, err
    question = "How many days of annual leave after five years?"
    code = main(["--home", str(home), "ask", question, "--quiet", *OFFLINE])
    out, err = capfd.readouterr()
    assert code == 0 and "Traceback" not in err and "panicked" not in out + err, err
    # The answer's warning does not show the path (a served run's is read by API users).
    shown = said.replace(str(store), "<server path>")
    assert out.count(shown) == 1 and "No relevant information found" in out, out
    assert "ingest the documents again" in out and "backup" in out  # how to recover


# 9. A full disk: reading needs no write.
@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs, unmounted afterwards (root only: mounting needs CAP_SYS_ADMIN)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs (a real full disk) needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace')}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path) -> None:
    """Write until the filesystem says ENOSPC (big pieces, then pages)."""
    with (disk / "filler").open("wb", buffering=0) as fh:
        for size in (1 << 20, 4096, 512):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    with pytest.raises(OSError, match="No space left"):
        (disk / "probe").write_bytes(b"x" * 8192)


def test_read_commands_work_on_a_full_disk(
    full_disk: Path,
    kb_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hash_cli: None,
) -> None:
    home = str(full_disk / "home")
    assert main(["--home", home, "ingest", str(kb_dir)]) == 0
    monkeypatch.setattr(
        "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
    )
    _fill(full_disk)
    capsys.readouterr()
    code, out, err = run(capsys, "--home", home, "search", "annual leave", "-k", "2")
    assert code == 0 and "leave.md" in out and "Traceback" not in err, err
    code, out, err = run(capsys, "--home", home, "kb", "stats")
    assert code == 0 and "documents" in out and "Traceback" not in err, err
    try:
        code, out, err = run(
            capsys, "--home", home, "ask", "How many days of annual leave after five years?",
            *OFFLINE, "--quiet",
        )  # fmt: skip
    finally:
        resources.close_all()
    assert code == 0 and "Traceback" not in err, err
    assert "[internal-1]" in out and "15 days" in out, out
    # the run could not be recorded: one line says so, the answer is whole
    assert all(line.startswith("hybrid-rag: warning: ") for line in err.splitlines()), err


def test_the_open_lock_of_a_reader_needs_no_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where no tmpfs can be mounted: the lock's write fails as a full disk makes it fail.
    from tools.kb.store import writer_lock

    def no_space(*args: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer_lock.os, "pwrite", no_space)
    monkeypatch.setattr(writer_lock.os, "ftruncate", no_space)
    entered = False
    with writer_lock.writer_lock(tmp_path / "x.lock", timeout=1, what="kb", best_effort=True):
        entered = True
    assert entered


# 10. A failing model is one line per failure on the CLI, the traceback under --verbose.
def _ask_in_a_process(home: Path, model_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # A process of its own: what the user's terminal gets (pytest installs log handlers).
    env = {**os.environ, "OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "sk-test-not-shown"}
    argv = ["--home", str(home), "ask", "How many days of annual leave?", "--quiet", *extra]
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *argv, "--set", "model=openai:m", *OFFLINE[2:]],
        env=env, capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        Reply({"error": {"message": "internal failure"}}, status=500),
        pytest.param(Reply("{not json", content_type="application/json"), marks=pytest.mark.slow),
    ],
    ids=["http-500", "malformed-json"],
)
def test_a_failing_model_is_one_line_per_failure(tmp_path: Path, reply: Reply) -> None:
    with LocalServer() as model:
        model.route("/v1/chat/completions", reply)
        done = _ask_in_a_process(tmp_path, f"{model.url}/v1")
        calls = len(model.hits())
    assert done.returncode == 0 and "annual leave" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and 'File "' not in done.stderr, done.stderr
    assert all(line.startswith("hybrid-rag: warning: ") for line in lines), lines
    assert 1 <= len(lines) <= calls and "sk-test" not in done.stderr
    assert "warning: answer model call failed" in done.stdout  # the answer says so too


@pytest.mark.slow
def test_verbose_shows_the_model_failures_details(tmp_path: Path) -> None:
    with LocalServer() as model:
        model.route("/v1/chat/completions", Reply({"error": {"message": "boom"}}, status=500))
        done = _ask_in_a_process(tmp_path, f"{model.url}/v1", "--verbose")
    assert done.returncode == 0 and "Traceback" in done.stderr and "boom" in done.stderr


# 11. Bytes that are not UTF-8 in a question are a clear error.
@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "annual leave \udcff days", "--quiet", *OFFLINE],
        ["search", "annual leave \udcff days"],
        ["ask", "annual leave", "--thread", "t\udcff", "--quiet", *OFFLINE],
    ],
)
def test_a_question_that_is_not_utf8_is_a_clear_error(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # What Python makes of `ask $'annual leave \xff days'`: the byte as a lone surrogate.
    code, _, err = run(capsys, "--home", str(tmp_path / "h"), *argv)
    line = one_error(err)
    assert code == 2 and "not valid UTF-8" in line and "\\xff" in line
    assert not (tmp_path / "h").exists()  # refused before anything was opened


def test_the_graphs_refuse_a_question_that_is_not_utf8() -> None:
    # The same question through Python or a server (JSON can carry "\udcff") is named too.
    from nodes.prepare import validate_question
    from tools.errors import InputError

    with pytest.raises(InputError, match=r"not valid UTF-8 text: 'leave \\xff days'"):
        validate_question("leave \udcff days", 1000)


# 13. Reading a data home that does not exist creates nothing.
SERPER_OK = {
    "organic": [
        {
            "title": "Python 3.14 released",
            "link": "https://www.python.org/downloads/release/python-3140/",
            "snippet": "The latest stable Python release is Python 3.14, released in October.",
            "position": 1,
        }
    ]
}


def test_reading_a_data_home_that_does_not_exist_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "never-ingested"
    with LocalServer() as serp:
        serp.route("/search", Reply(SERPER_OK))
        monkeypatch.setenv("SERPER_API_KEY", "test-key")
        monkeypatch.setenv("SERPER_BASE_URL", serp.url)
        code, out, err = run(
            capsys, "--home", str(home), "ask", "What is the latest stable Python release?",
            "--set", "model=offline", "--set", "search_provider=serper", "--quiet",
        )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    assert "nothing ingested yet" in out and "[web-1]" in out, out  # says so, answers
    assert not home.exists()
    for argv in (["search", "python"], ["kb", "stats"], ["ask", "x?", "--set", "collection=kb2"]):
        code, _, err = run(
            capsys, "--home", str(home), *argv, *(OFFLINE if argv[0] == "ask" else ())
        )
        assert code == 2 and "nothing ingested yet" in one_error(err), argv
        assert not home.exists(), argv


# 15. A foreign JSON line in runs.jsonl is not a run.
def test_stats_skips_records_that_are_not_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    record_run(path, {"route": "knowledge", "strategy": "vector", "search_cost": 0.0})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"hello": "world"}\n{"level": "info", "msg": "started"}\n')
        fh.write('{"route": 7}\n{"route": "web", "search_cost": "free"}\n')
    runs, unreadable = load_runs(path)
    assert [r["route"] for r in runs] == ["knowledge"] and unreadable == 4
    code, out, err = run(capsys, "--home", str(tmp_path), "stats", "--json")
    assert code == 0 and "Traceback" not in err
    summary = json.loads(out)
    assert summary["runs"] == 1 and summary["unreadable_lines"] == 4
