"""A real ``redis-server`` on loopback for tests and benchmarks (Debian's package).

Started in a temporary directory on a free port with persistence off, stopped (or
killed, for fault tests) by the caller. ``.ci/run`` installs the package when missing;
without it the tests that need Redis skip with that reason.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from tests.ports import free_port, owns_listening_port

REDIS_SERVER = shutil.which("redis-server")
START_TIMEOUT_S = 10.0


class RedisServer:
    """``with RedisServer(tmp) as r: r.url`` — a throw-away Redis."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory), "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    mine = owns_listening_port(self.process.pid, self.port) is not False
                    if s.recv(16).startswith(b"+PONG") and mine:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        """Stop it the hard way (the fault tests' "Redis died")."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
