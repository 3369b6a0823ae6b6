"""Shared by the PostgreSQL knowledge-base tests (test_pg_store.py, test_pg_replicas.py):
a corpus with a folder only ``group:a`` may read, in English and Chinese."""

from __future__ import annotations

from pathlib import Path

from tools.access.acl import Reader, parse_acl
from tools.kb.knowledge_base import KnowledgeBase

GROUP_A = Reader(frozenset({"group:a"}))
OUTSIDER = Reader(frozenset({"group:b"}))
SECRET_DOCS = {"budget.md", "yusuan.md"}


def secret_folder(tmp_path: Path) -> Path:
    """Two documents, English and Chinese, for ``group:a`` only."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "budget.md").write_text(
        "# Budget plan\n\nThe 2027 budget plan cuts travel by 10 percent.\n", encoding="utf-8"
    )
    (secret / "yusuan.md").write_text(
        "# 预算\n\n明年预算计划减少差旅百分之十。\n", encoding="utf-8"
    )
    return secret


def ingest_corpus(kb: KnowledgeBase, corpus: tuple[Path, Path]) -> None:
    """The shared folder for everyone, the secret one for ``group:a``."""
    kb.ingest([corpus[0]])
    kb.ingest([corpus[1]], acl=parse_acl("group:a"))
