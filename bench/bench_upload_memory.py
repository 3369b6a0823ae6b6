"""Peak memory of the document API while it receives one upload request (issue 43, 9).

Starts the /kb routes (``server.documents_api``) under uvicorn in a child process, on a
hash-model knowledge base in a temporary data home, then sends one ``POST /kb/uploads``
of ``--files`` parts of ``--mb`` MB each (streamed by the client from one file on disk).
The parts are named ``.bin``, a type no loader reads, so every file fails its check and
no job parses anything: what is measured is receiving the request alone. The server's
peak resident memory (``VmHWM`` of ``/proc/<pid>/status``) is read before and after.

``--code DIR`` runs the server from another copy of the code, e.g. the commit before
the change (``git archive <commit> graph tools nodes prompts tests cli | tar -x -C DIR``).

Usage::

    .venv/bin/python -m bench.bench_upload_memory --files 8 --mb 95
    .venv/bin/python -m bench.bench_upload_memory --files 8 --mb 95 --code /tmp/old
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.ports import free_port

REPO = Path(__file__).resolve().parent.parent
SERVER = """
import sys
from pathlib import Path
import uvicorn
from starlette.applications import Starlette
from server import documents_api
from tests.fakes import hash_model
from tools.kb.documents.jobs import JobRunner
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.kb.documents.library import Library
kb = KnowledgeBase(KBConfig(home=Path(sys.argv[1])), embedding_model=hash_model())
library = Library(kb)
runner = JobRunner(library)
documents_api.services = lambda: (library, runner)
app = Starlette(routes=documents_api.routes())
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""
START_S = 60.0


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--mb", type=float, default=95.0)
    ap.add_argument("--code", type=Path, default=REPO, help="run the server from this tree")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "part.bin"
        with part.open("wb") as out:
            for _ in range(int(args.mb)):
                out.write(b"x" * 1024 * 1024)
        port = free_port()
        env_home = Path(tmp) / "home"
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(env_home), str(port)], cwd=args.code
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
                deadline = time.monotonic() + START_S
                while True:
                    with contextlib.suppress(httpx.TransportError):
                        if client.get("/kb/stats").status_code == 200:
                            break
                    if time.monotonic() > deadline:
                        raise SystemExit("the server did not start")
                    time.sleep(0.3)
                before = peak_mb(server.pid)
                handles = [part.open("rb") for _ in range(args.files)]
                try:
                    files = [("file", (f"f{n}.bin", h)) for n, h in enumerate(handles)]
                    started = time.perf_counter()
                    r = client.post("/kb/uploads", files=files)
                    took = time.perf_counter() - started
                finally:
                    for h in handles:
                        h.close()
                after = peak_mb(server.pid)
        finally:
            server.terminate()
            server.wait(30)
    print(f"code: {args.code}")
    print(f"request: {args.files} files x {args.mb:g} MB; answer {r.status_code} in {took:.1f} s")
    print(
        f"server peak RSS: {before:.0f} MB before, {after:.0f} MB after (+{after - before:.0f} MB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
