"""Either graph with a persistent checkpointer, for the Python API.

The LangGraph server supplies its own checkpointer (``graph.rag_graph.graph`` is compiled
without one). In-process applications get conversation memory that survives a restart::

    async with open_graph() as graph:                      # async: ainvoke / astream
        config = run_config("user-42")
        out = await graph.ainvoke({"question": "..."}, config, context=Context())

    with open_sync_graph() as graph:                       # sync: invoke / stream
        out = graph.invoke({"question": "..."}, run_config("user-42"))

Where the threads live (the ``checkpoints`` argument, else ``$HYBRID_RAG_CHECKPOINT_URL``):

* a ``postgresql://user:pass@host:5432/dbname`` URL: one Postgres database that several
  processes share (``langgraph-checkpoint-postgres``, the ``postgres`` extra; see
  ``graph/postgres_checkpoints.py`` for time-limited connects and restarts);
* otherwise a SQLite file (``langgraph-checkpoint-sqlite``), by default
  ``<data home>/checkpoints.sqlite`` ($HYBRID_RAG_HOME): the embedded default.

The nodes are ``async`` only, so LangGraph's own sync ``invoke`` cannot run them; the
sync variant drives the async graph (and its async checkpointer) on one private event
loop thread and exposes blocking ``invoke`` / ``stream`` / ``get_state``.
Every run config carries an explicit ``recursion_limit`` (the graph's backstop).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from graph import rag_graph
from graph.agent import agent_graph
from graph.thread_guard import OneWriterPerThread, file_lock
from tools.errors import ConfigError
from tools.settings import data_home

GraphName = Literal["hybrid_rag", "tool_agent"]
CHECKPOINT_FILE = "checkpoints.sqlite"
CHECKPOINT_URL_ENV = "HYBRID_RAG_CHECKPOINT_URL"
T = TypeVar("T")
_POSTGRES_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
_ANY_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

_BUILDERS: dict[str, Callable[..., CompiledStateGraph[Any, Any, Any, Any]]] = {
    "hybrid_rag": rag_graph.build_graph,
    "tool_agent": agent_graph.build_agent_graph,
}
_LIMITS: dict[str, int] = {
    "hybrid_rag": rag_graph.RECURSION_LIMIT,
    "tool_agent": agent_graph.RECURSION_LIMIT,
}


def checkpoint_path(path: str | Path | None = None, *, home: str | Path | None = None) -> Path:
    """The SQLite file: ``path`` if given, else ``checkpoints.sqlite`` in the data home."""
    if path is not None:
        target = Path(path).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        return target
    return data_home(home) / CHECKPOINT_FILE


def checkpoint_location(
    checkpoints: str | Path | None = None, *, home: str | Path | None = None
) -> str | Path:
    """Where the threads live: a Postgres URL (``str``) or the SQLite file (``Path``).

    ``checkpoints`` if given, else ``$HYBRID_RAG_CHECKPOINT_URL``, else
    ``checkpoints.sqlite`` in the data home (``home``, else $HYBRID_RAG_HOME or the
    default). A URL of another scheme is a ``ConfigError``.
    """
    source = "the checkpoints argument"
    if checkpoints is None or checkpoints == "":
        checkpoints = os.environ.get("HYBRID_RAG_CHECKPOINT_URL", "").strip() or None
        source = f"${CHECKPOINT_URL_ENV}"
    if isinstance(checkpoints, str):
        if _POSTGRES_URL.match(checkpoints.strip()):
            return checkpoints.strip()
        scheme = _ANY_URL.match(checkpoints.strip())
        if scheme:
            raise ConfigError(
                f"{source} has the unsupported scheme {scheme.group(1)!r}: use "
                "postgresql://user:password@host:5432/dbname, or a SQLite file path"
            )
    return checkpoint_path(checkpoints, home=home)


def run_config(
    thread_id: str,
    *,
    graph: GraphName = "hybrid_rag",
    recursion_limit: int | None = None,
    **configurable: Any,
) -> RunnableConfig:
    """A run config naming the thread, with an explicit ``recursion_limit``.

    ``recursion_limit`` defaults to the graph's own backstop (60 for ``hybrid_rag``,
    110 for ``tool_agent``), far below LangGraph's default.
    """
    if not thread_id:
        raise ValueError("thread_id must be a non-empty string")
    limit = _LIMITS[graph] if recursion_limit is None else recursion_limit
    if limit < 1:
        raise ValueError(f"recursion_limit must be positive, got {limit}")
    return {"configurable": {**configurable, "thread_id": thread_id}, "recursion_limit": limit}


def build_with_checkpointer(
    graph: GraphName, checkpointer: Any
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile ``hybrid_rag`` or ``tool_agent`` with the given checkpointer."""
    if graph not in _BUILDERS:
        raise ValueError(f"unknown graph {graph!r}; choose one of {', '.join(_BUILDERS)}")
    return _BUILDERS[graph](checkpointer=checkpointer)


@asynccontextmanager
async def open_checkpointer(
    checkpoints: str | Path | None = None,
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The async checkpointer for ``checkpoints`` (see :func:`checkpoint_location`)."""
    location = await asyncio.to_thread(checkpoint_location, checkpoints)
    if isinstance(location, str):
        try:  # the optional extra, imported only when a Postgres URL is used
            from graph.postgres_checkpoints import open_postgres_saver
        except ImportError as exc:
            raise ConfigError(
                "Postgres checkpoints need the postgres extra: "
                f"pip install 'hybrid-rag[postgres]' ({exc.name} is missing)"
            ) from exc
        async with open_postgres_saver(location) as saver:
            yield saver
        return
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError as exc:
        raise ConfigError(
            "SQLite checkpoints need langgraph-checkpoint-sqlite: "
            "pip install langgraph-checkpoint-sqlite (or 'hybrid-rag[dev]')"
        ) from exc

    class OneWriterSqliteSaver(OneWriterPerThread, AsyncSqliteSaver):
        """Saves only onto a thread's latest checkpoint (``graph.thread_guard``); the lock
        is a file beside the database, shared by every process on this machine."""

        def thread_lock(self, thread_id: str) -> AbstractAsyncContextManager[None]:
            return file_lock(Path(f"{location}.lock"))

    async with OneWriterSqliteSaver.from_conn_string(str(location)) as sqlite_saver:
        yield sqlite_saver


@asynccontextmanager
async def open_graph(
    checkpoints: str | Path | None = None, *, graph: GraphName = "hybrid_rag"
) -> AsyncIterator[CompiledStateGraph[Any, Any, Any, Any]]:
    """The graph compiled with a persistent checkpointer (closed on exit).

    ``checkpoints``: a ``postgresql://`` URL or a SQLite file; default
    ``$HYBRID_RAG_CHECKPOINT_URL``, else ``<data home>/checkpoints.sqlite``.
    """
    async with open_checkpointer(checkpoints) as saver:
        yield build_with_checkpointer(graph, saver)


class SyncGraph:
    """Blocking ``invoke`` / ``stream`` / ``get_state`` over the async persistent graph.

    One daemon thread runs an event loop that owns the checkpointer's connections; calls
    from any thread are submitted to it. Use :func:`open_sync_graph` to create and close one.
    """

    def __init__(
        self, checkpoints: str | Path | None = None, *, graph: GraphName = "hybrid_rag"
    ) -> None:
        self.location = checkpoint_location(checkpoints)
        self.name = graph
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="hybrid-rag-graph", daemon=True
        )
        self._thread.start()
        self._saver_cm = open_checkpointer(self.location)
        try:
            saver = self._call(self._saver_cm.__aenter__())
        except BaseException:
            self._stop_loop()
            raise
        self.graph = build_with_checkpointer(graph, saver)

    def _call(self, aw: Awaitable[T]) -> T:
        async def run() -> T:
            return await aw

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def invoke(self, input: Any, config: RunnableConfig, **kwargs: Any) -> Any:
        """``graph.ainvoke`` run to completion (``context=``, ``stream_mode=``… as usual)."""
        return self._call(self.graph.ainvoke(input, config, **kwargs))

    def stream(self, input: Any, config: RunnableConfig, **kwargs: Any) -> Iterator[Any]:
        """``graph.astream`` as a blocking iterator (the run advances as you iterate)."""
        agen = self.graph.astream(input, config, **kwargs).__aiter__()
        try:
            while True:
                try:
                    yield self._call(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._call(agen.aclose())  # type: ignore[attr-defined]

    def get_state(self, config: RunnableConfig) -> StateSnapshot:
        return self._call(self.graph.aget_state(config))

    def get_state_history(self, config: RunnableConfig) -> list[StateSnapshot]:
        async def collect() -> list[StateSnapshot]:
            return [s async for s in self.graph.aget_state_history(config)]

        return self._call(collect())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._saver_cm.__aexit__(None, None, None))
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@contextmanager
def open_sync_graph(
    checkpoints: str | Path | None = None, *, graph: GraphName = "hybrid_rag"
) -> Iterator[SyncGraph]:
    """A :class:`SyncGraph` on ``checkpoints``, as :func:`open_graph` (closed on exit)."""
    sync_graph = SyncGraph(checkpoints, graph=graph)
    try:
        yield sync_graph
    finally:
        sync_graph.close()
