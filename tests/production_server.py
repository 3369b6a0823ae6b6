"""The production server (Aegra, ``aegra-api``) on 127.0.0.1, as deploy/compose.yaml runs
it: ``uvicorn aegra_api.main:app`` from the project's own ``server/aegra.json``, threads and
assistants in a real PostgreSQL (``tests/servers.py``).

Shared by tests/test_production.py, tests/team_server.py (the page's tests on the
production server) and bench/bench_ui.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.langgraph_server import REPO, server_env

UVICORN = Path(sys.executable).parent / "uvicorn"
CONFIG = REPO / "server" / "aegra.json"
START_DEADLINE_S = 90.0
STOP_DEADLINE_S = 20.0


def production_command(port: int, uvicorn: Path = UVICORN) -> list[str]:
    """The server command of deploy/compose.yaml, on loopback (``uvicorn``: of another
    environment, as .ci/production-install's)."""
    return [str(uvicorn), "aegra_api.main:app", "--host", "127.0.0.1", "--port", str(port)]


def production_env(
    home: Path,
    database_url: str,
    users: Path | None,
    extra: dict[str, str] | None = None,
    config: Path = CONFIG,
) -> dict[str, str]:
    """The scrubbed test environment plus Aegra's database and config (``config``: an
    installed copy's), and the users file (``None``: none, and not open either: the
    server must refuse to start)."""
    env = server_env(home, {"DATABASE_URL": database_url, "AEGRA_CONFIG": str(config)})
    env.pop("HYBRID_RAG_USERS_FILE", None)
    env.pop("HYBRID_RAG_OPEN", None)
    if users is not None:
        env["HYBRID_RAG_USERS_FILE"] = str(users)
    env.update(extra or {})
    return env


@dataclass
class Production:
    url: str
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    uvicorn: Path = UVICORN
    cwd: Path = REPO  # an installed copy's: an empty folder, no checkout to import from

    def start(self) -> Production:
        """Start it and wait (bounded) until ``/health`` answers."""
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> Production:
        """Start the process; no wait."""
        port = int(self.url.rsplit(":", 1)[1])
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                production_command(port, self.uvicorn), cwd=self.cwd, env=self.env, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self

    def wait_ready(self) -> Production:
        """Poll ``/health`` until it answers; stop and raise with the log if it never does."""
        assert self.process is not None, "spawn() first"
        started = time.monotonic()
        while time.monotonic() - started < START_DEADLINE_S:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the server did not start:\n{self.log_tail()}")

    def stop(self) -> None:
        """terminate → wait → kill."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_DEADLINE_S)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]
