"""Loopback ports for the servers the tests start.

``free_port`` asks the OS for a free port and releases it, so another process (a second
test suite on the same machine) can take it before our server binds it; the server then
fails to start while a readiness probe is answered by the *other* server. The
``owns_listening_port`` check closes that gap: a server is ready only when its own
process holds the listening socket.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

HOST = "127.0.0.1"
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16) if len(fields) > 9 else -1
            if local_port == port and fields[3] == _LISTEN:
                inodes.add(fields[9])
    return inodes


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (a server may bind in a child process)."""
    out, todo = [], [pid]
    while todo and len(out) < 256:  # bounded: a process tree, not a loop
        current = todo.pop()
        out.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in children.read_text().split())
            except (OSError, ValueError):
                continue
    return out


def owns_listening_port(pid: int, port: int) -> bool | None:
    """True when ``pid`` or a descendant listens on ``port``, False when another process
    does or none does, None where /proc cannot tell (not Linux)."""
    if not Path("/proc/net/tcp").exists():
        return None
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    for member in _family(pid):
        try:
            fds = list(Path(f"/proc/{member}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False
