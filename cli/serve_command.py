"""``hybrid-rag serve``: the LangGraph server with both graphs, the document API and the
page at ``/ui``, on this machine; prints the page's address.

It runs ``langgraph dev`` (the LangGraph CLI: the ``serve`` extra, which ``make demo``
installs) with a configuration written to ``<data home>/server/langgraph.json`` whose paths point at
this installation, so it works from any directory and from an installed copy. The
server keeps its threads in that folder too. Offline on the demo knowledge base
(``hybrid-rag demo``) it needs no key.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

import server
from tools.access.users import USERS_FILE_ENV
from tools.errors import ConfigError
from tools.settings import data_home

READY_DEADLINE_S = 120.0  # the first start imports the graphs and the embedding model
POLL_S = 0.5
STOP_DEADLINE_S = 20.0


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser(
        "serve", help="start the server with the page at /ui and print its address"
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=2024, help="port (default: 2024)")
    serve.add_argument(
        "--jobs", type=int, default=4, help="runs served at once per worker (default: 4)"
    )
    serve.set_defaults(func=cmd_serve)


def server_config(folder: Path) -> Path:
    """``langgraph.json`` in ``folder``, its paths pointing at this installation."""
    root = Path(server.__file__).resolve().parent.parent  # where server/, graph/, web/ live
    graphs = root / "server" / "graphs.py"
    config = {
        "dependencies": [str(root)],
        "graphs": {"hybrid_rag": f"{graphs}:hybrid_rag", "tool_agent": f"{graphs}:tool_agent"},
        "auth": {"path": f"{root / 'server' / 'auth.py'}:auth", "disable_studio_auth": True},
        "http": {"app": f"{root / 'server' / 'webapp.py'}:app"},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def langgraph_cli() -> str:
    found = Path(sys.executable).parent / "langgraph"
    if found.exists():
        return str(found)
    on_path = shutil.which("langgraph")
    if on_path:
        return on_path
    raise ConfigError(
        "hybrid-rag serve needs the LangGraph CLI: run 'make demo' (or 'make install') in "
        "the project's folder, or pip install -e '.[serve]'"
    )


def server_environment(environ: Mapping[str, str], home: Path) -> dict[str, str]:
    """The server's environment: this one, with the data home, and a relative users file
    made absolute against this command's working directory (the server runs in
    ``<home>/server``, where the same relative path names nothing)."""
    env = {**environ, "HYBRID_RAG_HOME": str(home)}
    users = env.get(USERS_FILE_ENV, "").strip()
    if users and not Path(users).expanduser().is_absolute():
        env[USERS_FILE_ENV] = str(Path(users).absolute())
    return env


def port_owner(port: int) -> str:
    """Who listens on ``port``, e.g. " (pid 123: langgraph)", or "" when not known
    (psutil is optional; another user's process may be hidden)."""
    try:
        import psutil
    except ImportError:
        return ""
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
                if conn.pid is None:
                    return ""
                return f" (pid {conn.pid}: {psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return ""


def require_free_port(host: str, port: int) -> None:
    """``ConfigError`` when ``host:port`` is taken: ``langgraph dev`` would then move to
    another port while this command polled, and reported, the busy one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the server binds: a port left in TIME_WAIT is free, a listening one is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:  # e.g. an address not on this machine
                raise ConfigError(
                    f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host, --port)"
                ) from None
            raise ConfigError(
                f"port {port} on {host} is in use{port_owner(port)}: stop that server or "
                "choose another port with --port"
            ) from None


def wait_ready(process: subprocess.Popen[bytes], url: str) -> bool:
    """Poll ``/ok`` until the server answers, exits, or the deadline passes."""
    started = time.monotonic()
    while time.monotonic() - started < READY_DEADLINE_S:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(POLL_S)
    return False


def cmd_serve(args: argparse.Namespace) -> int:
    home = data_home(Path(args.home) if args.home else None)
    folder = home / "server"
    require_free_port(args.host, args.port)
    cmd = [langgraph_cli(), "dev", "--no-browser", "--no-reload", "--host", args.host,
           "--port", str(args.port), "--n-jobs-per-worker", str(args.jobs),
           "--config", str(server_config(folder))]  # fmt: skip
    env = server_environment(os.environ, home)
    process = subprocess.Popen(cmd, cwd=folder, env=env)
    url = f"http://{args.host}:{args.port}"
    # A SIGTERM to this command stops the server too (no orphaned langgraph dev).
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if not wait_ready(process, url):
            print(f"hybrid-rag: error: the server did not start on {url} (see its log above)",
                  file=sys.stderr)  # fmt: skip
            return 1
        from server.ui import UI_PATH  # starlette: installed with the server, not the CLI

        print(f"\nThe page: {url}{UI_PATH}/\nThe API:  {url}  (Ctrl-C stops the server)")
        print(f"Answers come from the knowledge base in {home} (fill it with 'hybrid-rag demo' "
              "or 'hybrid-rag ingest PATH').")  # fmt: skip
        sys.stdout.flush()
        return process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop(process)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop(process: subprocess.Popen[bytes]) -> None:
    """terminate → wait (bounded) → kill."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_DEADLINE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_DEADLINE_S)
