"""A running ``langgraph dev`` on an embedded home answers from the knowledge base as it
is now: a CLI ingest of a new file, an edit and a delete are each answered correctly by
the next question, no restart, no "Error finding id" (tools/kb/knowledge_base.py
``_follow_writers``). Both orders: the CLI wrote before the server opened the store, and
the server opened it (and wrote, through the document API) before the CLI wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.langgraph_server import (
    LocalServer,
    server_env,
    start_server,
    stop_server,
    wait_until_ready,
)

HYBRID_RAG = Path(sys.executable).parent / "hybrid-rag"
FACTS = {
    "alpha": ("What is the alpha launch code?", "The alpha launch code is APPLE-11."),
    "bravo": ("What is the bravo vault code?", "The bravo vault code is BANANA-22."),
    "charlie": ("What is the charlie gate code?", "The charlie gate code is CHERRY-33."),
}


def cli(home: Path, *args: str) -> str:
    r = subprocess.run(
        [str(HYBRID_RAG), "--home", str(home), *args],
        capture_output=True, text=True, timeout=180, env=server_env(home),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def ask(srv: LocalServer, question: str) -> dict[str, Any]:
    r = httpx.post(
        f"{srv.url}/runs/wait",
        json={"assistant_id": "hybrid_rag", "input": {"question": question}},
        timeout=180,
    )
    assert r.status_code == 200, r.text
    state = r.json()
    problems = [w for w in state.get("warnings", []) if "unavailable" in w or "Error" in w]
    assert not problems, problems
    return dict(state)


def write(docs: Path, name: str, text: str) -> None:
    (docs / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n", encoding="utf-8")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LocalServer, Path, Path]]:
    home, docs = tmp_path / "home", tmp_path / "docs"
    home.mkdir()
    docs.mkdir()
    srv = start_server(home, tmp_path / "langgraph-dev.log")
    try:
        yield srv, home, docs
    finally:
        stop_server(srv)


def changes_are_answered_at_once(srv: LocalServer, home: Path, docs: Path) -> None:
    """New file, edited file, deleted file: each answered by the next question."""
    write(docs, "bravo", FACTS["bravo"][1])
    cli(home, "ingest", str(docs))
    assert "BANANA-22" in ask(srv, FACTS["bravo"][0])["answer"]
    write(docs, "alpha", "The alpha launch code is APRICOT-44 since the audit.")
    cli(home, "ingest", str(docs))
    answer = ask(srv, FACTS["alpha"][0])["answer"]
    assert "APRICOT-44" in answer and "APPLE-11" not in answer
    cli(home, "kb", "delete", "bravo.md")
    assert "BANANA-22" not in json.dumps(ask(srv, FACTS["bravo"][0]))


def test_cli_first_then_server(served: tuple[LocalServer, Path, Path]) -> None:
    srv, home, docs = served
    write(docs, "alpha", FACTS["alpha"][1])
    cli(home, "ingest", str(docs))
    wait_until_ready(srv)
    assert "APPLE-11" in ask(srv, FACTS["alpha"][0])["answer"]  # the server opens it here
    changes_are_answered_at_once(srv, home, docs)


def test_server_first_then_cli(served: tuple[LocalServer, Path, Path]) -> None:
    srv, home, docs = served
    wait_until_ready(srv)
    # The server opens the store and writes first (the document API).
    r = httpx.post(
        f"{srv.url}/kb/uploads",
        files=[("file", ("charlie.md", f"# Charlie\n\n{FACTS['charlie'][1]}\n".encode()))],
        timeout=60,
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    for _ in range(300):  # bounded: 90 s
        job = httpx.get(f"{srv.url}/kb/jobs/{job_id}", timeout=30).json()
        if job["state"] == "done":
            break
        subprocess.run(["sleep", "0.3"], check=True)
    assert job["state"] == "done", job
    assert "CHERRY-33" in ask(srv, FACTS["charlie"][0])["answer"]
    write(docs, "alpha", FACTS["alpha"][1])
    cli(home, "ingest", str(docs))
    assert "APPLE-11" in ask(srv, FACTS["alpha"][0])["answer"]
    changes_are_answered_at_once(srv, home, docs)
    # The server writes again after the CLI's writes: through a fresh view of the store.
    r = httpx.delete(f"{srv.url}/kb/documents/upload%3Acharlie.md", timeout=60)
    assert r.status_code == 200, r.text
    assert "CHERRY-33" not in json.dumps(ask(srv, FACTS["charlie"][0]))
    assert "APRICOT-44" in ask(srv, FACTS["alpha"][0])["answer"]
    # The CLI and the API count the same documents and chunks.
    cli_stats = json.loads(cli(home, "kb", "stats", "--json"))
    api_stats = httpx.get(f"{srv.url}/kb/stats", timeout=30).json()
    listed = httpx.get(f"{srv.url}/kb/documents", timeout=30).json()
    assert cli_stats["documents"] == api_stats["documents"] == listed["total"] == 1
    assert cli_stats["chunks"] == api_stats["chunks"]
    assert [d["doc_id"] for d in listed["documents"]] == cli_stats["documents_list"]
