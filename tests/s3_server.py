"""A real S3-compatible server on 127.0.0.1 for the S3 source's tests: moto's server
mode (``moto_server``, the ``moto[server]`` dev dependency), started on a free port with
its output in a log file, stopped when the fixture ends. Skips with the reason when the
executable is missing."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.ports import HOST, free_port
from tests.servers import STARTUP_DEADLINE_S, _Process, _tail

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server(_Process):
    """``moto_server -H 127.0.0.1 -p PORT``: buckets live in its memory."""

    def __init__(self, base: Path) -> None:
        super().__init__("moto_server", base / "moto.log")
        self.base = base
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> S3Server:
        exe = Path(sys.executable).parent / "moto_server"
        if not exe.is_file():
            pytest.skip("moto_server is not installed (pip install 'moto[server]')")
        self._spawn([str(exe), "-H", HOST, "-p", str(self.port)], self.base)
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while time.monotonic() < deadline:  # bounded
            self._check_alive()
            try:
                if httpx.get(self.url, timeout=2).status_code < 500 and self._owns(self.port):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"moto_server not ready in {STARTUP_DEADLINE_S} s:\n{_tail(self.log)}")
