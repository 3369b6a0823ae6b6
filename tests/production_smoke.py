"""The end-to-end smoke of .ci/production-install: the production server (Aegra) started on
loopback from another virtual environment (exactly the extras deploy/Dockerfile installs,
no dev extra), with a real PostgreSQL and a users file, then what a team's first hour
does: sign in, upload a file, its job done, a question answered citing it, the page and
every module it imports loading under its security headers.

``python -m tests.production_smoke --venv .prod-venv`` (from the dev environment: the
PostgreSQL helpers and the HTTP client are the tests'); exits 1 naming the failed step.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.ports import free_port
from tests.production_server import Production, production_env
from tests.servers import postgres_bin_dir, running_postgres
from tools.access.users import add_user

JOB_DEADLINE_S = 180.0
FACT = "The smoke test's badge colour for visitors is TEAL-53."
QUESTION = "What is the badge colour for visitors?"
IMPORT = re.compile(r"""(?:import|from)\s*["'](\./[\w.-]+\.js)["']""")


class SmokeFailure(Exception):
    """A step of the smoke failed (its message names the step)."""


def check(ok: bool, step: str, detail: object = "") -> None:
    if not ok:
        raise SmokeFailure(f"{step}: {detail}")


def wait_job(c: httpx.Client, job_id: str) -> dict[str, object]:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while time.monotonic() < deadline:
        job = c.get(f"/kb/jobs/{job_id}").json()
        if job["state"] in ("done", "failed", "interrupted"):
            return dict(job)
        time.sleep(0.5)
    raise SmokeFailure(f"upload job {job_id} not finished in {JOB_DEADLINE_S:g} s")


def page_modules(url: str) -> list[str]:
    """Load /ui/ and every module it imports, transitively; returns their names."""
    page = httpx.get(f"{url}/ui/", timeout=30)
    check(page.status_code == 200, "the page", page.status_code)
    check("script-src 'self'" in page.headers.get("content-security-policy", ""),
          "the page's CSP", page.headers)  # fmt: skip
    todo = re.findall(r'<script type="module" src="([\w.-]+\.js)"', page.text)
    seen: list[str] = []
    while todo and len(seen) < 100:  # bounded: the page has a dozen modules
        name = todo.pop().removeprefix("./")
        if name in seen:
            continue
        r = httpx.get(f"{url}/ui/{name}", timeout=30)
        check(r.status_code == 200 and "javascript" in r.headers.get("content-type", ""),
              f"module {name}", r.status_code)  # fmt: skip
        seen.append(name)
        todo += IMPORT.findall(r.text)
    check("app.js" in seen and len(seen) > 3, "the page's modules", seen)
    return seen


def smoke(url: str, token: str) -> list[str]:
    """The steps against a started server; returns what each proved."""
    done = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
        r = c.post("/threads/search", json={"limit": 1})  # the page's sign-in call
        check(r.status_code == 200, "sign in", r.text)
        check(httpx.post(f"{url}/threads/search", json={}).status_code == 401, "no token refused")
        done.append("signed in (and refused without a token)")
        r = c.post("/kb/uploads", files=[("file", ("visitors.md", f"# Visitors\n\n{FACT}\n"))])
        check(r.status_code == 202, "upload", r.text)
        job = wait_job(c, r.json()["job_id"])
        check(job["state"] == "done", "upload job", job)
        done.append("uploaded visitors.md: job done")
        thread = c.post("/threads", json={}).json()["thread_id"]
        run = c.post(f"/threads/{thread}/runs/wait",
                     json={"assistant_id": "hybrid_rag", "input": {"question": QUESTION}})  # fmt: skip
        check(run.status_code == 200, "question", run.text)
        state = run.json()
        cited = [x.get("path") for x in state.get("citations", [])]
        check("TEAL-53" in state.get("answer", "") and "visitors.md" in cited,
              "answer citing the upload", state.get("answer"))  # fmt: skip
        done.append(f"answered citing {cited}")
    done.append(f"page modules loaded: {', '.join(page_modules(url))}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, required=True, help="the production environment")
    args = parser.parse_args(argv)
    uvicorn = args.venv.resolve() / "bin" / "uvicorn"
    bin_dir = postgres_bin_dir()
    if not uvicorn.exists() or bin_dir is None:
        print(f"production smoke: error: needs {uvicorn} and PostgreSQL", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="prod-smoke-") as tmp, running_postgres(bin_dir) as pg:
        base = Path(tmp)
        users = base / "users.json"
        token = add_user(users, "alice", ["staff"])
        (base / "home").mkdir()
        env = production_env(base / "home", pg.create_database("smoke"), users)
        server = Production(f"http://127.0.0.1:{free_port()}", env, base / "aegra.log",
                            uvicorn=uvicorn)  # fmt: skip
        started = time.monotonic()
        try:
            server.start()
            for line in smoke(server.url, token):
                print(f"production smoke: {line}")
        except (SmokeFailure, RuntimeError, httpx.HTTPError) as exc:
            print(f"production smoke: FAILED: {exc}\n{server.log_tail()}", file=sys.stderr)
            return 1
        finally:
            server.stop()
        print(f"production smoke: passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
