"""The hybrid-rag command line, run in-process through ``cli.main.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import common
from cli.main import main
from tests.fakes import hash_kb_cli, hash_model
from tools.kb.knowledge_base import KnowledgeBase


@pytest.fixture(autouse=True)
def _hash_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI opens its own KnowledgeBase; give it the fast deterministic embedder."""
    hash_kb_cli(monkeypatch)


def test_ingest_search_stats_delete(
    kb_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "clihome")
    assert main(["--home", home, "ingest", str(kb_dir)]) == 0
    out = capsys.readouterr().out
    assert "5 added, 0 updated, 0 unchanged, 0 deleted, 0 skipped" in out

    assert main(["--home", home, "ingest", str(kb_dir), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["unchanged"]) == 5 and summary["added"] == []

    assert main(["--home", home, "search", "annual leave days", "--json", "-k", "2"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results[0]["doc_id"] == "leave.md"
    assert {"vector_score", "bm25_score", "fused_score", "relevance"} <= set(results[0])

    assert main(["--home", home, "search", "年假", "--mode", "bm25"]) == 0
    assert "nianjia.md" in capsys.readouterr().out

    assert main(["--home", home, "kb", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 5 and stats["stale_chunks"] == 0

    assert main(["--home", home, "kb", "delete", "robot.md"]) == 0
    assert "deleted robot.md" in capsys.readouterr().out


def test_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / "clihome")
    assert main(["--home", home, "ingest", str(tmp_path / "missing")]) == 2
    assert "path does not exist" in capsys.readouterr().err
    assert main(["--home", home, "search", "  "]) == 2
    assert "query is empty" in capsys.readouterr().err
    assert main(["--home", home, "kb", "delete", "nope.md"]) == 2
    assert "no document with doc_id 'nope.md'" in capsys.readouterr().err
    assert main(["--home", home, "ask", "hello", "--set", "top_k_web=99"]) == 2
    assert "top_k_web must be between 1 and 20" in capsys.readouterr().err
    assert main(["--home", home, "ask", "hello", "--set", "bogus=1"]) == 2
    assert "unknown context field(s): bogus" in capsys.readouterr().err


def test_eval_retrieval_on_a_tiny_beir_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "beir"
    (data / "qrels").mkdir(parents=True)
    docs = {
        "d1": ("Annual leave", "Employees get 15 days of annual leave."),
        "d2": ("Expenses", "Hotel limit is 600 CNY per night."),
        "d3": ("Robots", "The R2 robot carries 300 kg."),
        "d4": ("IT", "Call extension 4455 for outages."),
        "d5": ("Onboarding", "New hires get a laptop on day one."),
    }
    (data / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "title": t, "text": x}) for k, (t, x) in docs.items()),
        encoding="utf-8",
    )
    (data / "queries.jsonl").write_text(
        "\n".join(
            json.dumps({"_id": q, "text": t})
            for q, t in [("q1", "annual leave days"), ("q2", "hotel limit per night")]
        ),
        encoding="utf-8",
    )
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n", encoding="utf-8"
    )
    monkeypatch.setattr(
        "tools.evaluation.datasets.KnowledgeBase",
        lambda cfg: KnowledgeBase(cfg, embedding_model=hash_model()),
    )
    code = main(["--home", str(tmp_path / "h"), "eval", "retrieval", "--data", str(data), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"bm25", "vector", "hybrid"}
    assert result["bm25"]["ndcg@10"] == 1.0 and result["bm25"]["queries"] == 2
    assert result["hybrid"]["hit@5"] == 1.0


def test_progress_bar_shows_an_eta(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import itertools

    clock = itertools.chain([100.0], itertools.repeat(130.0))  # start, then 30 s later
    monkeypatch.setattr(common.time, "monotonic", lambda: next(clock))
    bar = common.ProgressBar("index")
    assert bar.eta(250, 1000) == "ETA 1:30"  # 30 s for a quarter: 90 s to go
    bar.tty = False
    bar(500, 1000, "doc")
    assert "index: 500/1000 (50%) ETA 0:30" in capsys.readouterr().err


def test_a_bad_environment_default_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: CHROMA_PORT=abc crashed with a traceback while the parser was built.
    from cli.main import main

    monkeypatch.setenv("CHROMA_PORT", "abc")
    assert main(["kb", "stats"]) == 2
    assert "$CHROMA_PORT must be a number" in capsys.readouterr().err


def test_a_long_file_prints_a_heartbeat_with_what_happens_inside(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:

    now = [100.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: now[0])
    bar = common.ProgressBar("ingest")
    bar.tty = False
    bar(0, 1, "big.md")
    now[0] += 1
    bar(0, 1, "embedded 256/50,000 chunks")  # too soon for another line
    now[0] += common.HEARTBEAT_S
    bar(0, 1, "embedded 512/50,000 chunks")
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["ingest: 0/1 (0%)", "ingest: 0/1 (0%) embedded 512/50,000 chunks"]


# Packages of the dev extra and of the servers, absent from a plain `pip install .` (no extra).
NOT_INSTALLED_BY_DEMO = (
    "starlette", "fastapi", "langgraph_api", "langgraph_cli", "langgraph_runtime_inmem", "mcp",
    "playwright", "moto", "boto3", "botocore", "aegra_api", "uvicorn", "pytest", "reportlab",
    "psycopg", "redis", "matplotlib",
)  # fmt: skip


def test_every_command_loads_without_the_dev_and_server_packages(tmp_path: Path) -> None:
    """A plain install has no extra: a fresh clone's demo failed when `hybrid-rag serve`'s
    module imported the page's Starlette route at load time."""
    import subprocess
    import sys

    blocker = (
        "import importlib.abc, sys\n"
        f"BLOCKED = {NOT_INSTALLED_BY_DEMO!r}\n"
        "class Absent(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "from cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for argv in (["--help"], ["kb", "stats"], ["sources", "list"]):
        done = subprocess.run(
            [sys.executable, "-c", blocker, "--home", str(tmp_path / "home"), *argv],
            capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, (argv, done.stderr)
        assert done.returncode in (0, 2), (argv, done.stderr)


def test_a_warning_the_answer_already_says_is_printed_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The demo printed the web failure twice: in the answer's note and as a warning."""
    from cli.ask_commands import print_answer

    reason = "web search not configured: set one of SERPER_API_KEY, BRAVE_API_KEY"
    print_answer(
        {
            "answer": f"No relevant information found.\n\nLive web results were unavailable: {reason}.",
            "warnings": [f"web search failed: {reason}", "reranker failed: timeout"],
        }
    )
    out = capsys.readouterr().out
    assert out.count(reason) == 1
    assert "warning: reranker failed: timeout" in out  # one the answer does not say
    zh = "未配置网络搜索：请设置 SERPER_API_KEY"  # the Chinese answer and warning
    print_answer({"answer": f"没找到相关信息。\n\n实时网络结果不可用：{zh}。",
                  "warnings": [f"网络搜索失败：{zh}"]})  # fmt: skip
    assert capsys.readouterr().out.count(zh) == 1
