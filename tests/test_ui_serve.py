"""The page's files and ``hybrid-rag serve`` (issue 35, item 1)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from server.ui import static_dir
from server.webapp import app
from tests.langgraph_server import server_env
from tests.ports import free_port

SERVE_DEADLINE_S = 180.0


def test_the_page_is_served_at_ui_without_a_token() -> None:
    assert (static_dir() / "index.html").is_file()
    client = TestClient(app)
    moved = client.get("/ui", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "/ui/"
    page = client.get("/ui/")
    assert page.status_code == 200 and '<script type="module" src="app.js">' in page.text
    script = client.get("/ui/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert client.get("/ui/missing.js").status_code == 404


def test_every_module_the_page_imports_is_there() -> None:
    web = static_dir()
    for module in web.glob("*.js"):
        for name in re.findall(r'from "\./([\w.-]+)"', module.read_text(encoding="utf-8")):
            assert (web / name).is_file(), f"{module.name} imports missing {name}"


@pytest.mark.slow
def test_serve_starts_the_server_and_prints_the_pages_address(tmp_path: Path) -> None:
    port = free_port()
    cli = Path(sys.executable).parent / "hybrid-rag"
    env = server_env(tmp_path / "home")
    process = subprocess.Popen(
        [str(cli), "--home", str(tmp_path / "home"), "serve", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        started, url = time.monotonic(), ""
        while time.monotonic() - started < SERVE_DEADLINE_S:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            if line.startswith("The page: "):
                url = line.split(": ", 1)[1].strip()
                break
        assert url == f"http://127.0.0.1:{port}/ui/", url
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200 and "app.js" in page.text
        assert httpx.get(f"http://127.0.0.1:{port}/ok", timeout=10).status_code == 200
        assert (tmp_path / "home" / "server" / "langgraph.json").is_file()
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_serve_on_a_busy_port_refuses_naming_the_port_and_its_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 53: langgraph dev moved to another port while serve polled, and printed, the
    # busy one (answered by whatever held it).
    import os
    import socket

    from cli.main import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["--home", str(tmp_path), "serve", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"port {port} on 127.0.0.1 is in use" in err, err
    assert f"pid {os.getpid()}" in err and "--port" in err
    assert not (tmp_path / "server" / "langgraph.json").exists()  # nothing was started
    # An address this machine does not have is not called "in use".
    assert main(["--home", str(tmp_path), "serve", "--host", "192.0.2.1", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "cannot listen on 192.0.2.1:1" in err and "in use" not in err, err
