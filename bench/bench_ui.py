"""Time from pressing Enter in the page to the first visible progress, in the browser.

Starts the team's server as the browser tests do (``tests/team_server.py``: offline on the
sample KB, a users file), either ``langgraph dev`` (``dev``) or the production server
(``production``: Aegra from ``server/aegra.json`` with a throw-away PostgreSQL, as
tests/test_production.py starts it; ``tests/production_server.py``), opens ``/ui`` in
Debian's headless chromium, signs in, and for each question (English and Chinese, a new
conversation each) presses Enter in the question box. In the page, a capture-phase keydown listener stamps
``performance.now()`` at Enter, and a MutationObserver stamps:

* ``status``: the answer bubble's own "Sending your question…" line (the page's
  acknowledgement, before any network reply);
* ``accepted``: the stream's first event (``metadata``, shown as "Question received,
  starting…"): langgraph-api sends it when a worker starts the run;
* ``graph``: the first progress line of the graph's own events (``custom`` stream:
  "Reading the question", "Choosing where to look"…), i.e. the server really working;
* ``answer``: the answer with its pills.

    .venv/bin/python -m bench.bench_ui [--rounds 10] [--server dev|production]
    .venv/bin/python -m bench.bench_ui --url URL --token TOKEN

Without ``--server`` it measures both. ``--url``/``--token`` measure a server already
running (e.g. ``hybrid-rag serve``). Target (issue 35): first visible progress ≤ 300 ms
offline. Under ``langgraph dev`` the server's first event cannot come sooner than its
in-memory run queue starts the run: the queue polls every 0.5 s for runs created before
the poll (``langgraph_runtime_inmem`` ``Runs.next``), so ``accepted``/``graph`` include
0.5–1 s of queue wait (the server log's ``run_queue_ms``); the page's own line bridges that
wait. Aegra starts a run as a task when it is created (no poll).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.browser import DESKTOP, chromium, sign_in_with_token, unavailable
from tests.servers import postgres_bin_dir, running_postgres
from tests.team_server import TeamServer, team_server

QUESTIONS = (
    "How many days of annual leave after 6 years of service?",
    "满3年不满5年的员工有多少天年假？",
    "What is the rated payload of the Porter robot?",
    "出差住宿费在一线城市的报销标准是多少？",
    "What is the response target for a P1 critical incident?",
)
WAIT_MS = 120_000
KEYS = ("status", "accepted", "graph", "answer")
TARGET_MS = 300.0
SERVERS = ("dev", "production")

PROBE = """
() => {
  window.__marks = {};
  const marks = window.__marks;
  document.getElementById('question').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { window.__marks = {enter: performance.now()}; }
  }, {capture: true});
  new MutationObserver(() => {
    const m = window.__marks;
    if (m.enter === undefined) return;
    const turn = [...document.querySelectorAll('article.turn.assistant')].pop();
    if (!turn) return;
    const now = performance.now();
    if (m.status === undefined && turn.querySelector('.status')?.textContent) m.status = now;
    if (m.accepted === undefined && turn.querySelector('.status[data-phase=accepted]')) m.accepted = now;
    if (m.graph === undefined && turn.querySelector('.progress li')) m.graph = now;
    if (m.answer === undefined && turn.querySelector('.facts .meta')) m.answer = now;
  }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
}
"""


def measure(url: str, token: str, rounds: int) -> list[dict[str, float]]:
    results: list[dict[str, float]] = []
    with chromium() as browser:
        page = browser.new_context(viewport=DESKTOP).new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{url}/ui/")
        if token:
            sign_in_with_token(page, token)
        page.wait_for_selector("#question", state="visible")
        page.evaluate(PROBE)
        for n in range(rounds + 1):  # the first round warms the server (models, KB)
            page.click("#new-thread")
            page.fill("#question", QUESTIONS[n % len(QUESTIONS)])
            page.press("#question", "Enter")
            page.wait_for_function("() => window.__marks.answer !== undefined")
            marks = page.evaluate("() => window.__marks")
            if n:
                results.append({k: marks[k] - marks["enter"] for k in KEYS})
    return results


def report(results: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": len(results)}
    for key in KEYS:
        values = sorted(r[key] for r in results)
        out[key] = {
            "median_ms": round(statistics.median(values), 1),
            "p90_ms": round(values[min(len(values) - 1, int(0.9 * len(values)))], 1),
            "max_ms": round(values[-1], 1),
        }
    first, server = out["status"]["p90_ms"], out["graph"]["p90_ms"]
    verdict = "met" if first <= TARGET_MS else "MISSED"
    out["target"] = (
        f"first visible progress (the page's own line) p90 {first} ms <= {TARGET_MS:g} ms: "
        f"{verdict}; the server's first progress event p90 {server} ms"
    )
    return out


@contextmanager
def started(kind: str, base: Path) -> Iterator[TeamServer]:
    """The team's server of ``kind`` (``dev`` or ``production``), stopped on exit."""
    if kind == "dev":
        with team_server(base) as team:
            yield team
        return
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise SystemExit("bench_ui: the production server needs PostgreSQL (initdb, postgres)")
    with (
        running_postgres(bin_dir) as postgres,
        team_server(base, database=postgres.create_database("aegra")) as team,
    ):
        yield team


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--server", choices=SERVERS, help="which server to start (default: both)")
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--token", default="", help="a user's token for --url")
    args = parser.parse_args()
    why = unavailable()
    if why:
        print(f"bench_ui: cannot run: {why}")
        return 2
    out: dict[str, Any] = {"load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}
    if args.url:
        out["url"] = report(measure(args.url.rstrip("/"), args.token, args.rounds))
    for kind in [args.server] if args.server else [] if args.url else SERVERS:
        with tempfile.TemporaryDirectory() as tmp, started(kind, Path(tmp)) as team:
            out[kind] = report(measure(team.url, team.tokens["alice"], args.rounds))
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
