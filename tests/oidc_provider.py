"""A real OpenID Connect provider on loopback: npm's ``oidc-provider`` (tests/oidc, installed
with ``npm ci`` there), started by ``node tests/oidc/provider.mjs`` with two accounts,
hana (groups ["hr"]) and omar (none), and one client. Shared by tests/test_oidc.py."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent / "oidc"
READY_S = 30.0
CLIENT_ID, CLIENT_SECRET = "hybrid-rag", "a test client secret"


def unavailable() -> str | None:
    """Why the provider cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (apt-get install nodejs npm; .ci/run does)"
    if not (HERE / "node_modules" / "oidc-provider").is_dir():
        return "oidc-provider is not installed: run 'npm ci' in tests/oidc (.ci/run does)"
    return None


@contextmanager
def oidc_provider(port: int, redirect_uri: str, log: Path) -> Iterator[str]:
    """The provider on ``127.0.0.1:port`` (its issuer URL), stopped on exit."""
    issuer = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["node", "provider.mjs", str(port), CLIENT_ID, CLIENT_SECRET, redirect_uri],
            cwd=HERE, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + READY_S
            while True:
                try:
                    if httpx.get(f"{issuer}/.well-known/openid-configuration").is_success:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the OpenID provider did not start: {log.read_text()}")
                time.sleep(0.2)
            yield issuer
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
