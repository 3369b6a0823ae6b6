"""Failed sign-ins counted per key (an identity, an address), in bounded memory.

Each key may fail ``max_failures`` times within ``window_s``; then it waits until its
oldest failure leaves the window. At most ``max_keys`` keys are tracked: the least recently
failed is forgotten first, so a flood of names cannot grow the process.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable


class FailureLimiter:
    def __init__(
        self,
        max_failures: int,
        window_s: float,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._failures.get(key) or deque()
        while times and now - times[0] >= self.window_s:
            times.popleft()
        return times

    def retry_after(self, key: str) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        with self._lock:
            now = self._clock()
            times = self._recent(key, now)
            if len(times) < self.max_failures:
                return 0.0
            return max(1.0, self.window_s - (now - times[0]))

    def failed(self, key: str) -> None:
        with self._lock:
            now = self._clock()
            times = self._recent(key, now)
            times.append(now)
            while len(times) > self.max_failures:
                times.popleft()
            self._failures[key] = times
            self._failures.move_to_end(key)
            while len(self._failures) > self.max_keys:
                self._failures.popitem(last=False)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)
