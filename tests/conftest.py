from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from run import resources
from run.models import register_chat_model, unregister_chat_model
from tests.fakes import ScriptedChatModel, hash_model
from tests.servers import chroma_server, postgres_server  # noqa: F401  (shared fixtures)
from tests.team_server import TeamServer, team_server
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

REPO = Path(__file__).resolve().parent.parent
SAMPLE_KB = REPO / "examples" / "kb"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the user's data directory, checkpoint database or Chroma server."""
    monkeypatch.setenv("HYBRID_RAG_HOME", str(tmp_path / "home"))
    for name in (
        "HYBRID_RAG_CHECKPOINT_URL",
        "CHROMA_HOST",
        "CHROMA_PORT",
        "HYBRID_RAG_KB_DATABASE_URL",
        "HYBRID_RAG_KB_READ_URLS",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    """A small editable bilingual corpus (at least 5 documents, so BM25 idf is meaningful)."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "leave.md").write_text(
        "# Annual leave\n\nEmployees receive 15 days of annual leave after five years of service.\n\n"
        "## Carry-over\n\nUp to 5 unused days carry over to the next year.\n",
        encoding="utf-8",
    )
    (d / "nianjia.md").write_text(
        "# 年假制度\n\n员工工作满一年后享有5天带薪年假。工作满十年享有10天年假。\n\n"
        "| 工龄 | 年假天数 |\n|---|---|\n| 1-10年 | 5天 |\n| 10年以上 | 10天 |\n",
        encoding="utf-8",
    )
    (d / "expenses.md").write_text(
        "# Expense rules\n\nTaxi receipts above 200 CNY need manager approval. "
        "Hotel limit is 600 CNY per night in tier-one cities.\n",
        encoding="utf-8",
    )
    (d / "it.txt").write_text(
        "IT incident process. Call extension 4455 for severity one outages.\n", encoding="utf-8"
    )
    (d / "robot.md").write_text(
        "# Robot R2 manual\n\nThe R2 warehouse robot carries 300 kg and runs 8 hours per charge.\n",
        encoding="utf-8",
    )
    return d


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase(KBConfig(home=tmp_path / "kbhome"), embedding_model=hash_model())
    yield base
    base.close()


@pytest.fixture
def sample_kb(tmp_path: Path, sample_kb_copy: Path) -> Iterator[KnowledgeBase]:
    """The sample KB ingested with the hash embedder and registered for the graphs."""
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    kb.ingest([sample_kb_copy])
    resources.register_kb(kb)
    yield kb
    resources.close_all()


@pytest.fixture
def sample_home(sample_kb: KnowledgeBase) -> Path:
    """The data home of ``sample_kb`` (for Context(data_home=...))."""
    return sample_kb.home


@pytest.fixture
def local_operator() -> Iterator[None]:
    """Nodes and tools called outside a graph run as the in-process graphs do: as the local
    operator (run/reader.py fails closed without a caller in the run's config)."""
    from langchain_core.runnables.config import var_child_runnable_config

    from run.reader import local_operator_config

    token = var_child_runnable_config.set(local_operator_config())  # type: ignore[arg-type]
    yield
    var_child_runnable_config.reset(token)


@pytest.fixture
def scripted() -> Iterator[ScriptedChatModel]:
    """A scripted chat model registered as ``custom:scripted``."""
    model = ScriptedChatModel()
    register_chat_model("scripted", model)
    yield model
    unregister_chat_model("scripted")


@pytest.fixture
def sample_kb_copy(tmp_path: Path) -> Path:
    if not SAMPLE_KB.exists():
        pytest.skip("examples/kb is missing")
    target = tmp_path / "sample_kb"
    shutil.copytree(SAMPLE_KB, target)
    return target


@pytest.fixture(scope="session")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamServer]:
    """One team server (tests/team_server.py) for the page's and chat clients' tests."""
    with team_server(tmp_path_factory.mktemp("team")) as srv:
        yield srv
