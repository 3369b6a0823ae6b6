"""Two users and a knowledge base with a document each (and a shared one), for the
per-user access tests against a real server (tests/test_access_server.py under
``langgraph dev``, tests/test_production.py under the production server)."""

from __future__ import annotations

from pathlib import Path

from tools.access.acl import parse_acl
from tools.access.users import add_user

ALICE_FACT = "The salary band review code for HR is ZEBRA-17."
BOB_FACT = "The quarterly budget unlock code for finance is QUOKKA-42."
ASK_BOB_FACT = "What is the quarterly budget unlock code for finance?"
ASK_ALICE_FACT = "What is the salary band review code for HR?"


def team_kb(base: Path) -> tuple[Path, Path, dict[str, str]]:
    """(data home, users file, tokens): alice (group hr) reads hr/pay.md, bob (no group)
    finance/budget.md, both the handbook."""
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    docs = base / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "hr" / ".acl").write_text("group:hr\n")
    (docs / "hr" / "pay.md").write_text(f"# Pay review\n\n{ALICE_FACT}\n")
    (docs / "finance").mkdir()
    (docs / "finance" / "budget.md").write_text(f"# Budget\n\n{BOB_FACT}\n")
    (docs / "handbook.md").write_text("# Handbook\n\nThe office opens at nine.\n")
    users = base / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob", [])}
    home = base / "home"
    home.mkdir()
    with KnowledgeBase(KBConfig(home=home)) as kb:
        kb.ingest([docs], acl=())
        kb.ingest([docs / "finance"], acl=parse_acl("user:bob"))
    return home, users, tokens
