"""Real servers for the tests, started on 127.0.0.1 by the tests themselves.

* ``chroma run`` (the ``chromadb`` package's executable, beside the venv's python);
* PostgreSQL from the distribution's packages (``initdb`` + ``postgres``, e.g.
  ``/usr/lib/postgresql/15/bin``): a throw-away cluster in a temporary directory, trust
  authentication on loopback only, its Unix socket inside that directory. ``initdb`` and
  ``postgres`` refuse to run as root, so as root they run as the ``postgres`` user.

Each server writes to a log file (never a pipe that could fill up), can be stopped, killed,
frozen and started again on the same port and data (the fault tests), and is stopped when
its fixture ends. The fixtures skip with the reason when an executable is missing
(``.ci/run`` installs PostgreSQL when it can). The langgraph dev helper is
``tests/langgraph_server.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ports import HOST, free_port, owns_listening_port

__all__ = ["HOST", "ChromaServer", "PostgresServer", "free_port", "stop_process"]

STARTUP_DEADLINE_S = 60.0
STOP_DEADLINE_S = 20.0
POSTGRES_USER = "postgres"  # the OS account the server runs as when the tests run as root


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class _Process:
    """One server process: started with its output in ``log``, stopped gracefully."""

    def __init__(self, name: str, log: Path) -> None:
        self.name = name
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def _spawn(self, cmd: list[str], cwd: Path, **popen: Any) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                **popen,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _owns(self, port: int) -> bool:
        """Our process holds the listening socket (not another suite's server on a port
        that ``free_port`` handed to both); True where the OS cannot tell."""
        return self.process is not None and owns_listening_port(self.process.pid, port) is not False

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.process.returncode}:\n{_tail(self.log)}"
            )

    def send(self, sig: int) -> None:
        """Send ``sig`` (e.g. SIGSTOP to freeze the server, SIGKILL to crash it)."""
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig``, wait; SIGKILL if it does not exit."""
        if self.process is not None:
            stop_process(self.process, sig)
        self.process = None


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (and SIGCONT, in case it was frozen), wait; SIGKILL if it does not exit."""
    if process.poll() is None:
        process.send_signal(sig)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
        try:
            process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_DEADLINE_S)


# --- Chroma ---------------------------------------------------------------------------------


def chroma_executable() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    if beside.is_file():
        return str(beside)
    return shutil.which("chroma")


class ChromaServer(_Process):
    """``chroma run --path DIR --host 127.0.0.1 --port PORT``; restartable on the same data."""

    def __init__(self, exe: str, base: Path) -> None:
        super().__init__("chroma run", base / "chroma.log")
        self.exe = exe
        self.base = base
        self.host = HOST
        self.port = free_port()

    @property
    def command(self) -> list[str]:
        return [self.exe, "run", "--path", str(self.base / "data"), "--host", self.host,
                "--port", str(self.port)]  # fmt: skip

    def start(self) -> ChromaServer:
        self._spawn(self.command, self.base)
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        url = f"http://{self.host}:{self.port}/api/v2/heartbeat"
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    if client.get(url).status_code == 200 and self._owns(self.port):
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise TimeoutError(f"chroma run did not answer {url} in time:\n{_tail(self.log)}")

    def restart(self) -> None:
        self.stop()
        self.start()


# --- PostgreSQL -----------------------------------------------------------------------------


def postgres_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres`` (newest distribution version first)."""
    candidates: list[Path] = []
    if os.environ.get("PG_BIN"):
        candidates.append(Path(os.environ["PG_BIN"]))
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += versions
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for directory in candidates:
        if all(os.access(directory / exe, os.X_OK) for exe in ("initdb", "postgres")):
            return directory
    return None


def postgres_account() -> dict[str, Any]:
    """Popen arguments that run the server as ``postgres`` when the tests run as root."""
    if os.geteuid() != 0:
        return {}
    import pwd

    try:
        account = pwd.getpwnam(POSTGRES_USER)
    except KeyError:
        pytest.skip(f"running as root and there is no {POSTGRES_USER!r} user to run PostgreSQL")
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


class PostgresServer(_Process):
    """A throw-away PostgreSQL cluster on 127.0.0.1:PORT, restartable on the same data."""

    def __init__(self, bin_dir: Path) -> None:
        # Not under pytest's tmp_path: as root that is private to root, and the server
        # runs as ``postgres``.
        self.base = Path(tempfile.mkdtemp(prefix="hybrid-rag-pg-"))
        super().__init__("postgres", self.base / "postgres.log")
        self.bin_dir = bin_dir
        self.account = postgres_account()
        if self.account:
            os.chown(self.base, self.account["user"], self.account["group"])
        self.data = self.base / "data"
        self.host = HOST
        self.port = free_port()
        self.user = "postgres"
        self.dbname = "postgres"

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}"

    def url_for(self, dbname: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    @property
    def command(self) -> list[str]:
        # fsync=off: a process crash still loses nothing (WAL is written at commit); only an
        # OS crash could, and the tests do not simulate one.
        return [str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-k", str(self.base), "-c", f"listen_addresses={self.host}", "-c", "fsync=off"]  # fmt: skip

    def init(self) -> None:
        """``initdb``: superuser ``postgres``, trust authentication (loopback only)."""
        cmd = [str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", self.user,
               "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]  # fmt: skip
        self.run_tool(cmd, "initdb")

    def run_tool(self, cmd: list[str], what: str, timeout: float = STARTUP_DEADLINE_S) -> None:
        """One of PostgreSQL's programs (initdb, pg_basebackup) as the server's account, its
        output in the log; a failure or a timeout names it, with the log's tail."""
        with self.log.open("ab") as out:
            try:
                done = subprocess.run(
                    cmd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.base,
                    check=False,
                    timeout=timeout,
                    **self.account,
                )
            except subprocess.TimeoutExpired:
                raise TimeoutError(
                    f"{what} did not finish in {timeout:.0f} s:\n{_tail(self.log)}"
                ) from None
        if done.returncode != 0:
            raise RuntimeError(f"{what} failed ({done.returncode}):\n{_tail(self.log)}")

    def start(self) -> PostgresServer:
        self._spawn(self.command, self.base, **self.account)
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        ready = [str(self.bin_dir / "pg_isready"), "-h", self.host, "-p", str(self.port),
                 "-U", self.user, "-d", self.dbname, "-t", "1"]  # fmt: skip
        while time.monotonic() < deadline:
            self._check_alive()
            ok = subprocess.run(ready, capture_output=True, check=False).returncode == 0
            if ok and self._owns(self.port):
                return
            time.sleep(0.1)
        raise TimeoutError(f"postgres did not accept connections in time:\n{_tail(self.log)}")

    def stop(self, sig: int = signal.SIGINT) -> None:
        """SIGINT: fast shutdown (default); SIGQUIT: immediate, crash recovery at next start."""
        super().stop(sig)

    def restart(self, sig: int = signal.SIGINT) -> None:
        self.stop(sig)
        self.start()

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


# --- fixtures (imported by tests/conftest.py) -----------------------------------------------


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """A ``chroma run`` server for the module (skipped when chroma is not installed)."""
    exe = chroma_executable()
    if exe is None:
        pytest.skip("the chroma executable is not installed")
    server = ChromaServer(exe, tmp_path_factory.mktemp("chroma-server"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the module (skipped when PostgreSQL is not installed)."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, postgres) not found: install the "
            "distribution's postgresql package (.ci/run does) or set PG_BIN"
        )
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    with running_postgres(bin_dir) as server:
        yield server


@contextlib.contextmanager
def running_postgres(bin_dir: Path) -> Iterator[PostgresServer]:
    """A fresh cluster, started; stopped and removed on exit (the fixture's, and the
    benches' that run outside pytest)."""
    server = PostgresServer(bin_dir)
    try:
        server.init()
        yield server.start()
    finally:
        server.cleanup()
