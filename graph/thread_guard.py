"""One run writes to a conversation thread at a time (``open_graph`` / ``open_sync_graph``).

Two processes continuing one thread at once (two ``hybrid-rag ask --thread t1``, two
workers) each read the thread, then each save their turn on top of what they read: the
thread then holds one of the two turns and the other is dropped without a word.

Each checkpoint a run saves names its parent (the checkpoint the run read or saved
last). :class:`OneWriterPerThread` saves it only while the parent is still the thread's
latest checkpoint, checked and saved under a lock per thread shared by every process
(a Postgres advisory lock; a file lock beside a SQLite file). A run that finds the thread
moved on fails with :class:`~tools.errors.ConcurrentTurnError` at that save, before its
turn is written: the other turn stays, and asking again continues from it.

The LangGraph server does not use these savers: it runs one run per thread at a time
itself (``multitask_strategy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from tools.errors import ConcurrentTurnError

try:  # POSIX; elsewhere SQLite threads are guarded within one process only
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]


def thread_key(thread_id: str) -> int:
    """A signed 64-bit key of the thread (Postgres advisory locks take a bigint)."""
    digest = hashlib.sha256(f"hybrid-rag-thread:{thread_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class OneWriterPerThread:
    """Mixin for a LangGraph async checkpointer: ``aput`` only onto the thread's latest
    checkpoint. Subclasses give :meth:`thread_lock`."""

    def thread_lock(self, thread_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config.get("configurable") or {}
        thread_id = str(conf.get("thread_id") or "")
        parent = conf.get("checkpoint_id")
        ns = conf.get("checkpoint_ns", "")
        saver: Any = super()
        async with self.thread_lock(thread_id):
            latest = await self.aget_tuple(  # type: ignore[attr-defined]
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
            )
            head = latest.config["configurable"].get("checkpoint_id") if latest else None
            if head != parent:
                raise ConcurrentTurnError(
                    f"conversation thread {thread_id!r} changed while this run was in "
                    "progress (another run wrote to it); this run's turn was not saved and "
                    "the other one was kept: ask again to continue from it"
                )
            result: RunnableConfig = await saver.aput(config, checkpoint, metadata, new_versions)
            return result


@contextlib.asynccontextmanager
async def file_lock(path: Path) -> AsyncIterator[None]:
    """An exclusive ``fcntl`` lock on ``path`` (waited for off the event loop)."""
    if fcntl is None:  # pragma: no cover - not on Linux/macOS
        yield
        return
    handle = await asyncio.to_thread(path.open, "a+b")
    try:
        await asyncio.to_thread(fcntl.flock, handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()
