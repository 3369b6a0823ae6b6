"""Worker threads shared fairly between the people whose work they run.

Jobs are queued per owner; a free worker takes the oldest job of the owner with the
fewest jobs running, and one owner never holds more than ``workers - 1`` workers, so
one user's slow upload (a hostile PDF parsing up to its time limit) never stalls another
user's small one: it runs on the worker that is always left. The knowledge base still
has one writer (its lock orders the commits); what runs side by side is the parsing,
which is where a file's time goes.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

WAIT_S = 1.0  # an idle worker looks at the queue at least this often
MAX_WORKERS = 16


@dataclass(order=True)
class _Task:
    seq: int
    owner: str = field(compare=False)
    work: Callable[[], Any] = field(compare=False)
    future: Future[Any] = field(compare=False)


class FairPool:
    """``workers`` threads running submitted work fairly between owners."""

    def __init__(self, workers: int, name: str = "kb-jobs") -> None:
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"workers must be in 1..{MAX_WORKERS}, got {workers}")
        self.workers = workers
        self._cond = threading.Condition()
        self._waiting: list[_Task] = []
        self._running: dict[str, int] = {}
        self._seq = itertools.count()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, owner: str, work: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the job pool is closed")
            self._waiting.append(_Task(next(self._seq), owner, work, future))
            self._cond.notify()
        return future

    def running(self) -> dict[str, int]:
        """Jobs running per owner (for tests and diagnostics)."""
        with self._cond:
            return {k: v for k, v in self._running.items() if v}

    def _take(self) -> _Task | None:
        """The next task to run (under the lock), or None when every waiting task's
        owner already holds its share of the workers."""
        share = max(1, self.workers - 1)
        ready = [t for t in self._waiting if self._running.get(t.owner, 0) < share]
        if not ready:
            return None
        task = min(ready, key=lambda t: (self._running.get(t.owner, 0), t.seq))
        self._waiting.remove(task)
        self._running[task.owner] = self._running.get(task.owner, 0) + 1
        return task

    def _work(self) -> None:
        while True:
            with self._cond:
                task = self._take()
                while task is None and not self._closed:
                    self._cond.wait(WAIT_S)
                    task = self._take()
                if task is None:
                    return
            try:
                if task.future.set_running_or_notify_cancel():
                    try:
                        task.future.set_result(task.work())
                    except BaseException as exc:  # the caller's future carries it
                        task.future.set_exception(exc)
            finally:
                with self._cond:
                    self._running[task.owner] -= 1
                    self._cond.notify_all()

    def close(self) -> None:
        """Stop taking work; waiting work is cancelled, running work finishes."""
        with self._cond:
            self._closed = True
            for task in self._waiting:
                task.future.cancel()
            self._waiting.clear()
            self._cond.notify_all()
