"""Time limits on every outbound call: a server that accepts and never answers.

Chat model, embedding endpoint and Chroma server each get a small limit through the
environment; the call fails (or the run falls back) within a bound, naming the endpoint.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graph import Context, build_graph
from tests.local_provider import BlackHole
from tools.errors import EmbeddingError, StoreError
from tools.kb.embed.embeddings import make_embedding_model
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

ROOT = Path(__file__).resolve().parents[1]
SLACK_S = 15.0  # a loaded 2-core machine


def test_a_chroma_server_that_never_answers_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_STORE_TIMEOUT", "1")
    with BlackHole() as hole:
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"127\.0\.0\.1:\d+ did not answer within 1 s"):
            KnowledgeBase(KBConfig(home=tmp_path, chroma_host="127.0.0.1", chroma_port=hole.port))
        assert time.monotonic() - started < 1 + SLACK_S


def test_kb_stats_against_a_hung_chroma_server_ends_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "HYBRID_RAG_HOME": str(tmp_path), "HYBRID_RAG_STORE_TIMEOUT": "1"}
    with BlackHole() as hole:
        env.update(CHROMA_HOST="127.0.0.1", CHROMA_PORT=str(hole.port))
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "cli.main", "kb", "stats"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "did not answer within 1 s" in done.stderr
    assert elapsed < 1 + 2 * SLACK_S, elapsed


def test_a_hung_embedding_endpoint_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_RAG_MODEL_TIMEOUT", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    with BlackHole() as hole:
        model = make_embedding_model("openai:emb-probe", base_url=f"{hole.url}/v1")
        started = time.monotonic()
        with pytest.raises(EmbeddingError, match=rf"127\.0\.0\.1:{hole.port}.*openai:emb-probe"):
            model.embed_query("hello")
        # one retry: at most two limits, plus client overhead
        assert time.monotonic() - started < 2 + SLACK_S


def test_a_hung_chat_model_still_gets_an_answer_within_a_bound(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_RAG_MODEL_TIMEOUT", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with BlackHole() as hole:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{hole.url}/v1")
        started = time.monotonic()
        out = asyncio.run(
            build_graph().ainvoke(
                {"question": "How many days of annual leave after 6 years of service?"},
                context=Context(
                    data_home=str(sample_home),
                    model="openai:hung",
                    search_provider="none",
                    crosslingual=False,
                ),
            )
        )
        elapsed = time.monotonic() - started
    # Plan, grade and answer each time out (1 s, one retry) and fall back to their rules.
    assert "18 days" in out["answer"] and out["citations"]
    assert any("planner output unusable" in w for w in out["warnings"]), out["warnings"]
    assert elapsed < 3 * 2 * 1 + SLACK_S, elapsed
