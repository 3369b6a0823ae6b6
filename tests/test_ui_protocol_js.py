"""The page's protocol is in one place (issue 42, item 5): web/api.js builds every URL the
page asks and reads every interrupt; no other module of the page does either."""

from __future__ import annotations

import re
from pathlib import Path

WEB = Path(__file__).resolve().parent.parent / "web"
PROTOCOL = "api.js"
# What building a request looks like: a path of the server's API in a string or template,
# a query string built by hand, or a request made directly.
URL_BUILDING = re.compile(
    r"""["'`]/(?:threads|runs|kb|assistants|store|mcp|info|ok|feedback|admin)\b"""
    r"""|\bfetch\s*\(|\bnew\s+(?:URLSearchParams|EventSource|XMLHttpRequest|WebSocket)\b"""
    r"""|\bnavigator\.sendBeacon\b"""
)
INTERRUPT_READING = re.compile(r"\.interrupts\b|__interrupt__|action_requests")


def page_modules() -> list[Path]:
    """The page's own modules (the vendored libraries are not the page's protocol)."""
    return sorted(p for p in WEB.glob("*.js") if p.name != PROTOCOL)


def offenders(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in page_modules():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"web/{path.name}:{n}: {line.strip()}")
    return found


def test_only_api_js_builds_urls() -> None:
    assert page_modules(), "no page modules found"
    assert offenders(URL_BUILDING) == [], "URLs built outside web/api.js"


def test_only_api_js_reads_interrupts() -> None:
    assert offenders(INTERRUPT_READING) == [], "interrupts read outside web/api.js"


def test_api_js_names_its_functions() -> None:
    """Threads, runs and streams, interrupts, documents, jobs, sources, feedback,
    collections and the admin's routes each have a
    named function, and the old generic request helpers are not exported."""
    text = (WEB / PROTOCOL).read_text(encoding="utf-8")
    exported = set(re.findall(r"export (?:async )?(?:function\*? |const )(\w+)", text))
    wanted = {
        "searchThreads", "createThread", "getThread", "threadState", "updateThread",
        "deleteThread", "threadHistory", "streamRun", "cancelRun", "pendingInterrupt",
        "listDocuments", "deleteDocument", "fetchOriginal", "uploadFiles", "jobEvents",
        "listSources", "whoAmI", "listFeedback", "saveFeedback", "listCollections",
        "saveCollection", "deleteCollection", "adminMe", "listUsers", "createUser", "userAction",
        "deleteUser", "listJobs", "createSource", "syncSource", "deleteSource", "originalUrl",
    }  # fmt: skip
    assert wanted <= exported, sorted(wanted - exported)
    assert not {"api", "stream"} & exported


def test_the_check_sees_url_building() -> None:
    """The pattern catches what it is for (a regression of the check itself)."""
    for line in ('api(`/threads/${id}/state`)', 'fetch(path)', 'x = "/kb/sources"',
                 "new URLSearchParams({})"):  # fmt: skip
        assert URL_BUILDING.search(line), line
    for line in ('import { api } from "./api.js";', "el('a', { href: originalHref(id) })"):
        assert not URL_BUILDING.search(line), line
