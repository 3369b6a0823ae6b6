"""The end-to-end smoke of .ci/production-install: the production server (Aegra) started on
loopback from another virtual environment holding the project's wheel (deploy/build-wheel,
the image's artifact, with exactly the extras deploy/Dockerfile installs, no dev extra),
run as the image runs it: ``uvicorn aegra_api.main:app`` in an empty folder, no checkout
on ``sys.path``, ``AEGRA_CONFIG`` the installed package's config. With a real PostgreSQL
and a users file, then what a team's first hour does: sign in, upload a file, its job
done, a question answered citing it, the page and every module it imports loading under
its security headers, and the same in Chromium (tests/production_page.py: the original
opened too). A non-admin's run asking to be nobody (``langgraph_auth_user: null`` in
its config) must not read another group's document.

``python -m tests.production_smoke --venv VENV --cwd EMPTY_DIR`` (from the dev
environment: the PostgreSQL helpers, the HTTP client and Playwright are the tests');
exits 1 naming the failed step.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.ports import free_port
from tests.production_page import PageFailure, page_flow
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


def no_other_groups_document(url: str, token: str) -> str:
    """A non-admin's run whose config names no user (``langgraph_auth_user: null``) is
    still the caller's: refused, or answered without the other group's upload."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
        thread = c.post("/threads", json={}).json()["thread_id"]
        run = c.post(f"/threads/{thread}/runs/wait", json={
            "assistant_id": "hybrid_rag", "input": {"question": QUESTION},
            "config": {"configurable": {"langgraph_auth_user": None}},
        })  # fmt: skip
    if run.status_code in (400, 403, 422):
        return f"a run with langgraph_auth_user null refused ({run.status_code})"
    check(run.status_code == 200, "a run with langgraph_auth_user null", run.text)
    body = run.text
    check("TEAL-53" not in body and "visitors.md" not in body,
          "a run with langgraph_auth_user null read another group's document", body[:500])  # fmt: skip
    return "a run with langgraph_auth_user null read no other group's document"


def smoke(url: str, token: str) -> list[str]:
    """The steps against a started server; returns what each proved."""
    done = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
        r = c.post("/threads/search", json={"limit": 1})  # the page's sign-in call
        check(r.status_code == 200, "sign in", r.text)
        check(httpx.post(f"{url}/threads/search", json={}).status_code == 401, "no token refused")
        done.append("signed in (and refused without a token)")
        r = c.post("/kb/uploads", data={"acl": "group:staff"},
                   files=[("file", ("visitors.md", f"# Visitors\n\n{FACT}\n"))])  # fmt: skip
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


def installed_config(venv: Path, cwd: Path, env: dict[str, str]) -> Path:
    """The installed package's Aegra config, as the installed copy names it from ``cwd``;
    it must lie in ``venv``: a copy importing the checkout would prove nothing."""
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-m", "server.aegra_config", "--path"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    check(done.returncode == 0, "the installed config", done.stderr)
    config = Path(done.stdout.strip())
    check(config.is_file() and config.is_relative_to(venv), "the installed config's place",
          f"{config} is not inside {venv}")  # fmt: skip
    return config


def run(venv: Path, cwd: Path, base: Path, database_url: str) -> list[str]:
    """Start the installed server in ``cwd`` and run every step; returns what each proved."""
    users = base / "users.json"
    alice = add_user(users, "alice", ["staff"])
    bob = add_user(users, "bob", ["sales"])
    (base / "home").mkdir()
    env = production_env(base / "home", database_url, users)
    env.pop("PYTHONPATH", None)  # nothing of the checkout: the wheel alone
    env["AEGRA_CONFIG"] = str(installed_config(venv, cwd, env))
    server = Production(f"http://127.0.0.1:{free_port()}", env, base / "aegra.log",
                        uvicorn=venv / "bin" / "uvicorn", cwd=cwd)  # fmt: skip
    try:
        server.start()
        done = [f"started from {env['AEGRA_CONFIG']} in {cwd}", *smoke(server.url, alice)]
        (base / "page").mkdir()
        done += page_flow(server.url, alice, base / "page")
        for line in done:  # shown before the last step, which may fail
            print(f"production smoke: {line}", flush=True)
        return [no_other_groups_document(server.url, bob)]
    except (SmokeFailure, PageFailure, RuntimeError, httpx.HTTPError) as exc:
        raise SmokeFailure(f"{exc}\n{server.log_tail()}") from exc
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, required=True, help="the production environment")
    parser.add_argument("--cwd", type=Path, required=True,
                        help="an empty folder to run the server in (not the checkout)")  # fmt: skip
    args = parser.parse_args(argv)
    venv, cwd = args.venv.resolve(), args.cwd.resolve()
    bin_dir = postgres_bin_dir()
    if not (venv / "bin" / "uvicorn").exists() or bin_dir is None:
        print(f"production smoke: error: needs {venv}/bin/uvicorn and PostgreSQL", file=sys.stderr)
        return 1
    if not cwd.is_dir() or any(cwd.iterdir()):
        print(f"production smoke: error: {cwd} is not an empty folder", file=sys.stderr)
        return 1
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="prod-smoke-") as tmp, running_postgres(bin_dir) as pg:
        try:
            for line in run(venv, cwd, Path(tmp), pg.create_database("smoke")):
                print(f"production smoke: {line}")
        except SmokeFailure as exc:
            print(f"production smoke: FAILED: {exc}", file=sys.stderr)
            return 1
    print(f"production smoke: passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
