"""The run's deadline over Chroma server requests.

The knowledge base and its HTTP client are shared by the runs of a process, each with its
own deadline (``Context.run_timeout_s``), and a run's searches go to worker threads that
cancelling the run cannot stop (the process also waits for them at exit). So the deadline
travels with the call: ``store_deadline`` sets it in a ContextVar (``asyncio.to_thread``
copies the context into the thread) and the client's transport cuts every request's
timeouts to what is left of it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar

import httpx

from tools.errors import StoreError

# The deadline (epoch seconds) of the run a store call serves: a request to a Chroma server
# then ends by it, whatever HYBRID_RAG_STORE_TIMEOUT allows. A ContextVar: the worker
# threads a run's searches go to (asyncio.to_thread copies the context) carry it.
_DEADLINE: ContextVar[float | None] = ContextVar("store_deadline", default=None)


@contextlib.contextmanager
def store_deadline(deadline: float | None) -> Iterator[None]:
    """Every Chroma server request made in this block (and the threads it starts with
    ``asyncio.to_thread``) ends by ``deadline`` (epoch seconds; None: no deadline)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def bounded_timeout(timeout: float) -> float:
    """``timeout`` cut to what is left of the current deadline; a ``StoreError`` when
    nothing is left (the request would outlive the run it serves)."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.time()
    if left <= 0:
        raise StoreError("the run deadline was reached before the knowledge base answered")
    return min(timeout, left)


class DeadlineTransport(httpx.BaseTransport):
    """Cuts each request's connect/read/write/pool timeouts to the deadline's remainder."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        left = bounded_timeout(math.inf)
        if left != math.inf:
            given = request.extensions.get("timeout") or {}
            request.extensions["timeout"] = {
                k: left if given.get(k) is None else min(given[k], left)
                for k in ("connect", "read", "write", "pool")
            }
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()
