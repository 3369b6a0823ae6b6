"""The production server's entry points: Aegra (``aegra-api``, an open-source Agent
Protocol server keeping threads, runs and assistants in PostgreSQL), configured by
``aegra.json``, which ``server/aegra_config.py`` derives from ``langgraph.json``.

Aegra calls a graph export that is callable with no argument (langgraph-api passes a
``ServerRuntime``), and mounts a custom app only when it is a FastAPI one; so the graphs
are exported here as such factories of the same compiled graphs, and ``app`` is a FastAPI
app holding the routes of ``server/webapp.py`` and the checks Aegra lacks
(``server/request_guard.py``: what a client may set, runs on another user's thread). Its lifespan refuses to start a server
without a users file unless ``HYBRID_RAG_OPEN=1`` says every caller may read everything.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from server import graphs
from server.credentials import CsrfGuard
from server.request_guard import RequestGuard
from server.webapp import routes
from tools.access.users import USERS_FILE_ENV, read_users
from tools.errors import ConfigError

OPEN_ENV = "HYBRID_RAG_OPEN"
log = logging.getLogger(__name__)


async def hybrid_rag() -> graphs.Compiled:
    """The state graph, as ``server/graphs.py:hybrid_rag`` serves it."""
    return graphs.rag_graph


async def tool_agent() -> graphs.Compiled:
    """The tool-calling agent, as ``server/graphs.py:tool_agent`` serves it."""
    return graphs.agent_graph


def startup_check(env: dict[str, str] | None = None) -> str:
    """What the server will enforce, or ``ConfigError``: no users file and no explicit
    ``HYBRID_RAG_OPEN=1`` (an open server reads every document to every caller), or a
    users file that is missing or broken."""
    env = dict(os.environ) if env is None else env
    path = env.get(USERS_FILE_ENV, "").strip()
    if not path:
        if env.get(OPEN_ENV, "").strip() == "1":
            return "open: no users file, every caller reads every document (HYBRID_RAG_OPEN=1)"
        raise ConfigError(
            f"refusing to start without a users file: set {USERS_FILE_ENV} to one "
            "(hybrid-rag users add NAME --file FILE), or set HYBRID_RAG_OPEN=1 to let every "
            "caller read every document"
        )
    users = read_users(Path(path).expanduser())
    return f"users file {path}: {len(users)} user(s)"


@asynccontextmanager
async def lifespan(_app: Any) -> AsyncIterator[None]:
    log.warning("hybrid-rag: %s", startup_check())
    yield


app = FastAPI(title="hybrid-rag", lifespan=lifespan)
app.router.routes.extend(routes())
# What a client may set, and (unchecked by Aegra 0.6) whose thread a run is on.
app.add_middleware(RequestGuard, check_threads=True)
app.add_middleware(CsrfGuard)  # added last, so it runs first (server/credentials.py)
