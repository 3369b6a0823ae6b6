"""The servers the tests start are ready only when they hold their own port: a port
``free_port`` handed out can be taken by another process (a second test suite) first."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ports import HOST, free_port, owns_listening_port
from tests.servers import ChromaServer, chroma_executable

pytestmark = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="needs Linux /proc to tell who listens"
)


def test_owns_listening_port_tells_whose_socket_listens() -> None:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
        assert owns_listening_port(os.getpid(), port) is False  # bound, not listening
        s.listen()
        assert owns_listening_port(os.getpid(), port) is True
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert owns_listening_port(other.pid, port) is False
        finally:
            other.kill()
            other.wait()
    assert owns_listening_port(os.getpid(), free_port()) is False


def test_a_chroma_server_whose_port_another_server_holds_is_not_ready(tmp_path: Path) -> None:
    # Regression: the readiness probe was answered by the process that held the port, so
    # a test ran against another suite's Chroma ("no knowledge base ... nothing ingested").
    exe = chroma_executable()
    if exe is None:
        pytest.skip("the chroma executable is not installed")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = ChromaServer(exe, tmp_path / "a").start()
    try:
        second = ChromaServer(exe, tmp_path / "b")
        second.port = first.port
        with pytest.raises(RuntimeError, match="exited"):
            second.start()
    finally:
        first.stop()
