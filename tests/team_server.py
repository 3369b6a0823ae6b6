"""A team's server on 127.0.0.1 for the page and chat-client tests: ``langgraph dev`` (or,
given a PostgreSQL database, the production server Aegra: tests/production_server.py) over
the sample KB with a users file (alice in group hr, bob) and web search configured
against a local Serper-shaped provider (``tests.local_provider``), so an approval
request has a provider and a price, and what was searched is in the provider's log.

Shared by tests/test_chat_ui_protocol.py, tests/test_ui_browser.py and bench/bench_ui.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.langgraph_server import SAMPLE_KB, start_server, stop_server, wait_until_ready
from tests.local_provider import LocalServer as Provider
from tests.local_provider import Reply
from tests.ports import free_port
from tests.production_server import Production, production_env
from tools.access.users import add_user
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.store.protocol import DocRecord

# Serper's answer to every search (two organic results, one dated).
SERPER_BODY = {
    "organic": [
        {
            "title": "Python 3.14.2 released",
            "link": "https://www.python.org/downloads/release/python-3142/",
            "snippet": "Python 3.14.2 is the latest stable release of Python, released on Dec 1.",
            "date": "Dec 1, 2025",
            "position": 1,
        },
        {
            "title": "Python release schedule",
            "link": "https://peps.python.org/pep-0745/",
            "snippet": "The release schedule lists every planned Python 3.14 release.",
            "position": 2,
        },
    ]
}
WEB_QUESTION = "What is the latest stable Python release today?"


@dataclass
class TeamServer:
    url: str
    provider: Provider
    tokens: dict[str, str]  # identity -> bearer token
    documents: dict[str, DocRecord]  # the sample KB's registry: doc_id -> record
    home: Path | None = None  # the server's data home
    users: Path | None = None  # its users file (root is an admin)

    def searched(self) -> list[str]:
        return [str(r.body["q"]) for r in self.provider.hits("/search")]


@contextmanager
def team_server(
    base: Path, env: dict[str, str] | None = None, database: str | None = None
) -> Iterator[TeamServer]:
    """Start it (ingesting the sample KB while the server boots); stop it on exit.
    ``env`` adds server variables (e.g. ``OPENAI_BASE_URL`` of a scripted model);
    ``database`` (a PostgreSQL URL) makes it the production server instead of langgraph dev."""
    users = base / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob", []),
              "root": add_user(users, "root", [], admin=True)}  # fmt: skip
    home = base / "home"
    home.mkdir()
    with Provider() as provider:
        provider.route("/search", Reply(SERPER_BODY))
        variables = {
            "HYBRID_RAG_USERS_FILE": str(users),
            "SERPER_API_KEY": "test-key",
            "SERPER_BASE_URL": provider.url,
            **(env or {}),
        }
        if database is None:
            srv = start_server(home, base / "langgraph-dev.log", env=variables)
            url, ready, stop = srv.url, lambda: wait_until_ready(srv), lambda: stop_server(srv)
        else:
            prod = Production(
                f"http://127.0.0.1:{free_port()}",
                production_env(home, database, users, variables),
                base / "aegra.log",
            ).spawn()
            url, ready, stop = prod.url, prod.wait_ready, prod.stop
        try:
            # Ingested while the server boots (it opens the KB on its first run).
            with KnowledgeBase(KBConfig(home=home)) as kb:
                kb.ingest([SAMPLE_KB])
                documents = {k: v for k, v in kb.registry.records().items() if v.get("version")}
            ready()
            yield TeamServer(url, provider, tokens, documents, home, users)
        finally:
            stop()
