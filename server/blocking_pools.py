"""Threads for the custom routes' blocking work: a bounded pool per route group.

``asyncio.to_thread`` runs on the event loop's default executor, ``min(32, cores + 4)``
threads (6 on a 2-core server) shared by every route of the process, langgraph-api's own
included. Six DELETEs waiting on the knowledge base's writer lock held all six, and every
``/kb`` route, ``/feedback`` and ``/threads/search`` timed out for every user for ~10
minutes (issue 53, item 10). Here each group has its own threads: work that waits holds
its group's share and nothing else; more work than a group's threads waits its turn in
that group's queue, holding no thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Threads per group. "writes" may wait on the writer's lock (a deletion: up to
# HYBRID_RAG_WRITE_LOCK_TIMEOUT), so it is kept apart from the reads it must not hold up.
GROUPS = {"kb": 8, "writes": 4, "callers": 4, "uploads": 4, "feedback": 4, "admin": 2}

_lock = threading.Lock()
_pools: dict[str, ThreadPoolExecutor] = {}


def pool(group: str) -> ThreadPoolExecutor:
    """The executor of ``group`` (made on first use; an unknown group is a bug: KeyError)."""
    size = GROUPS[group]
    with _lock:
        if group not in _pools:
            _pools[group] = ThreadPoolExecutor(size, thread_name_prefix=f"routes-{group}")
        return _pools[group]


async def run_blocking(group: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on ``group``'s threads, with the caller's context variables (as
    ``asyncio.to_thread`` passes them)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(pool(group), call)
