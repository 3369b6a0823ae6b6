"""What a trial found on the page (issue 55 items 8-13), in a real headless Chromium against
the team's ``langgraph dev`` (tests/team_server.py: alice in group hr, bob, root an admin):
no view scrolls sideways at phone width with a long title, a refused action's message says
why and goes with the next action, the add-source form checks its id and takes a schedule,
an edited first question retitles its thread, votes on a reopened thread name their run,
an exported conversation's links open the page's viewer, and Word and Excel originals show
as text and tables with their own titles. Screenshots go to $UI_SHOTS (else the test's
temporary folder)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser import DESKTOP, PHONE, sign_in_with_token, unavailable
from tests.docgen import write_docx, write_xlsx
from tests.team_server import TeamServer
from tests.test_document_security import uploaded
from tests.test_ui_browser import EN_FOLLOW_UP, EN_QUESTION, Page, browser  # noqa: F401

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
LONG_TITLE = "Annual-leave-carry-over-rules-for-staff-who-joined-mid-year-" * 3
LONG_FOLDER = "annual-leave-carry-over-rules-for-staff-who-joined-mid-year/approved-by-the-head"
HOSTILE = '<script>window.__ran=1</script><img src=x onerror="window.__ran=2">'


class Tab(Page):
    """A signed-in tab that records console errors and warnings and page errors."""

    def __init__(self, browser: Any, team: TeamServer, user: str, **kw: Any) -> None:  # noqa: F811
        super().__init__(browser, team, None, **kw)
        self.console: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.console.append(str(e)))
        self.sign_in(user)

    def _console(self, message: Any) -> None:
        # A refused request is logged by the browser itself ("Failed to load resource"):
        # what the page says of it is checked by each test.
        if message.type in ("error", "warning") and "Failed to load" not in message.text:
            self.console.append(message.text)

    def width(self) -> int:
        return int(self.page.evaluate("document.documentElement.scrollWidth"))

    def snap(self, name: str, shots: Path) -> None:
        self.page.screenshot(path=str(shots / name))


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("UI_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def client(team: TeamServer, user: str) -> httpx.Client:
    auth = {"Authorization": f"Bearer {team.tokens[user]}"}
    return httpx.Client(base_url=team.url, headers=auth, timeout=60)


@pytest.fixture(scope="module")
def office(team: TeamServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """alice's Word and Excel uploads (group hr), with a table and a hostile string."""
    base = tmp_path_factory.mktemp("office")
    docx = write_docx(base / "travel-v3.docx", [
        ("h1", "Travel Policy"), ("p", f"Book trains early. {HOSTILE}"),
        ("table", [["City", "Per day"], ["Shanghai", "500"], [HOSTILE, "1"]]),
    ])  # fmt: skip
    xlsx = write_xlsx(base / "rates.xlsx", {"Rates": [["City", "Per day"], ["Beijing", 450]]})
    with client(team, "alice") as alice:
        job = uploaded(alice, [("travel-v3.docx", docx.read_bytes()),
                               ("rates.xlsx", xlsx.read_bytes())], acl="group:hr")  # fmt: skip
    assert [f["status"] for f in job["files"]] == ["done", "done"], job
    return {"docx": "upload:travel-v3.docx", "xlsx": "upload:rates.xlsx"}


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_no_view_scrolls_sideways_at_phone_width_with_a_long_title(
    browser: Any,  # noqa: F811
    team: TeamServer,
    office: dict[str, str],
    shots: Path,
    locale: str,
) -> None:
    # A folder with a long name: the collection picker lists it (a select is as wide as
    # its widest option).
    with client(team, "root") as root:
        job = uploaded(root, [("carry-over.md", b"# Carry-over\n\nFive days carry over.\n")],
                       folder=LONG_FOLDER)  # fmt: skip
        assert job["state"] == "done", job
    tab = Tab(browser, team, "root", locale=locale, viewport=PHONE)
    page = tab.page
    lang = locale[:2]
    try:
        page.wait_for_selector(f"#scope option[value='folder:{LONG_FOLDER}/']", state="attached")
        # The thread is titled by its first question, a long one without a space.
        tab.ask(LONG_TITLE)
        page.wait_for_selector("#thread-list li.current .open")
        assert tab.width() <= PHONE["width"], f"chat: {tab.width()} px"
        # Found by a search of the conversations, its title in the hits (no-wrap).
        page.fill("#thread-q", "carry over joined")
        page.press("#thread-q", "Enter")
        page.wait_for_selector("#thread-hits li button strong")
        assert tab.width() <= PHONE["width"], f"the conversations found: {tab.width()} px"
        turn = tab.ask(EN_QUESTION)
        assert tab.width() <= PHONE["width"], f"the chat with an answer: {tab.width()} px"
        turn.scroll_into_view_if_needed()
        tab.snap(f"trial-chat-phone-{lang}.png", shots)
        turn.locator("button.pill").first.click()
        assert tab.width() <= PHONE["width"], f"the source card: {tab.width()} px"
        page.keyboard.press("Escape")
        page.click("#tab-docs")
        page.wait_for_selector("#doc-rows tr a.doc-link")
        assert tab.width() <= PHONE["width"], f"documents: {tab.width()} px"
        page.locator("#upload-form").scroll_into_view_if_needed()
        tab.snap(f"trial-upload-phone-{lang}.png", shots)
        page.locator("#sets-section").scroll_into_view_if_needed()
        assert tab.width() <= PHONE["width"], f"collections: {tab.width()} px"
        page.locator("#doc-rows tr", has_text="Travel Policy").locator("a.doc-link").click()
        page.wait_for_selector("#original-viewer .viewer-html table")
        assert tab.width() <= PHONE["width"], f"viewer: {tab.width()} px"
        tab.snap(f"trial-viewer-phone-{lang}.png", shots)
        page.keyboard.press("Escape")
        page.click("#tab-admin")
        page.wait_for_selector("#admin-users tr[data-user=alice]")
        assert tab.width() <= PHONE["width"], f"admin: {tab.width()} px"
        assert "[object" not in page.locator("#admin-view").inner_text()
        tab.snap(f"trial-admin-phone-{lang}.png", shots)
        assert tab.console == [], tab.console
    finally:
        tab.close()


def test_a_refused_upload_says_why_and_its_message_goes_with_the_next_action(
    browser: Any,  # noqa: F811
    team: TeamServer,
    tmp_path: Path,
    shots: Path,
) -> None:
    tab = Tab(browser, team, "alice")
    page = tab.page
    try:
        page.click("#tab-docs")
        note = tmp_path / "offsite.md"
        note.write_text("# Offsite\n\nThe offsite is in Hangzhou.\n", encoding="utf-8")
        page.set_input_files("#upload-input", str(note))
        assert page.locator("#acl-public").is_hidden()  # "Everyone": offered to admins only
        page.check("#acl-restricted")  # a group alice is not in needs an admin: 403
        page.fill("#acl-list", "group:finance")
        page.click("#upload-form button[type=submit]")
        banner = page.locator("#error")
        banner.wait_for()
        said = banner.inner_text()
        assert "Upload" in said and "Refused (403)" in said and "finance" in said, said
        assert "had a problem" not in said
        assert page.locator("#error-retry").is_hidden()  # asking again would be refused again
        assert "[object" not in page.locator("#docs-view").inner_text()  # every string a string
        banner.scroll_into_view_if_needed()
        tab.snap("trial-refused-desktop-en.png", shots)
        # Another action: the message goes, and the answer comes without it.
        page.click("#tab-chat")
        tab.ask(EN_QUESTION)
        assert banner.is_hidden()
        # The upload itself, allowed now, into a folder.
        page.click("#tab-docs")
        page.set_input_files("#upload-input", str(note))
        page.check("#acl-private")
        page.fill("#upload-folder", "notes")
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector(".upload-file[data-status=done]")
        page.wait_for_function(
            "() => document.querySelector('#doc-rows').innerText.includes('notes/offsite.md')"
        )
        assert banner.is_hidden()
        assert tab.console == [], tab.console
    finally:
        tab.close()


def test_the_add_source_form_checks_its_id_and_takes_a_schedule(
    browser: Any,  # noqa: F811
    team: TeamServer,
    tmp_path: Path,
) -> None:
    folder = tmp_path / "wiki"
    folder.mkdir()
    (folder / "parking.md").write_text("# Parking\n\nVisitors park on level B2.\n")
    tab = Tab(browser, team, "root")
    page = tab.page
    try:
        page.click("#tab-admin")
        page.wait_for_selector("#admin-users tr[data-user=alice]")
        # The id's pattern is a valid expression (Chromium compiles it with the v flag).
        page.fill("#src-id", "Not Valid!")
        assert page.evaluate("document.getElementById('src-id').validity.patternMismatch")
        page.fill("#src-id", "wiki-hourly")
        assert page.evaluate("document.getElementById('src-id').checkValidity()")
        page.fill("#src-location", str(folder))
        page.fill("#src-schedule", "now and then")
        page.click("#source-form button[type=submit]")
        page.locator("#error").wait_for()
        assert "schedule" in page.locator("#error").inner_text()
        page.fill("#src-schedule", "every 1h")
        page.click("#source-form button[type=submit]")
        row = page.locator("#admin-sources tr[data-source=wiki-hourly]")
        row.wait_for()
        assert "every 1h" in row.inner_text()
        assert page.locator("#error").is_hidden()
        with client(team, "root") as root:
            assert root.get("/kb/sources/wiki-hourly").json()["schedule"] == "every 1h"
            assert root.delete("/kb/sources/wiki-hourly").status_code == 200
        assert not [c for c in tab.console if "pattern" in c.lower()], tab.console
        assert tab.console == [], tab.console
    finally:
        tab.close()


def test_edit_retitles_votes_name_their_run_and_exported_links_open_the_viewer(
    browser: Any,  # noqa: F811
    team: TeamServer,
) -> None:
    tab = Tab(browser, team, "alice")
    page = tab.page
    try:
        tab.ask(EN_QUESTION)
        current = page.locator("#thread-list li.current .open")
        assert current.inner_text().startswith(EN_QUESTION[:30])
        page.locator("article.turn.user button.edit").click()
        page.fill("#question", EN_FOLLOW_UP)
        page.press("#question", "Enter")
        page.wait_for_function(
            """q => [...document.querySelectorAll('article.turn.user .question')].pop()?.textContent === q
            && document.querySelector('article.turn.assistant:last-of-type .facts .meta')""",
            arg=EN_FOLLOW_UP,
        )
        assert page.locator("article.turn.user").count() == 1  # replaced, not added
        page.wait_for_function(
            "q => document.querySelector('#thread-list li.current .open')?.textContent.startsWith(q)",
            arg=EN_FOLLOW_UP[:30],
        )
        # Reopened: a vote names the run that wrote the answer.
        page.reload()
        page.locator("#thread-list li .open", has_text=EN_FOLLOW_UP[:30]).first.click()
        turn = page.locator("article.turn.assistant").last
        with page.expect_response(
            lambda r: r.url.endswith("/feedback") and r.request.method == "PUT"
        ) as sent:
            turn.locator(".feedback button.vote.up").click()
        assert sent.value.status == 200, sent.value.text()
        run_id = sent.value.request.post_data_json["run_id"]
        assert run_id, "a vote on a reopened thread without its run"
        with client(team, "alice") as alice:
            rows = alice.get("/feedback").json()["feedback"]
            mine = [r for r in rows if r["run_id"] == run_id]
            assert mine and mine[0]["vote"] == "up"
            thread = mine[0]["thread_id"]
            runs = alice.get(f"/threads/{thread}/runs").json()
            assert run_id in [r["run_id"] for r in runs]
        # The export links each original to the page's viewer, which signs in first.
        with page.expect_download() as got:
            page.click("#export-thread")
        text = Path(got.value.path()).read_text(encoding="utf-8")
        links = re.findall(r"https?://\S+/ui/#original=\S+", text)
        assert links and "/kb/documents/" not in text, text
        other = Page(browser, team, None)  # a new tab: not signed in
        try:
            other.page.goto(links[0])
            sign_in_with_token(other.page, team.tokens["alice"])
            viewer = other.page.locator("#original-viewer")
            viewer.wait_for(state="visible")
            assert "procurement" in viewer.inner_text().lower()  # the cited original
            heading = other.page.locator("#original-title").inner_text()
            assert heading and not heading.endswith(".md"), heading  # under its title
        finally:
            other.close()
        assert tab.console == [], tab.console
    finally:
        tab.close()


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_word_and_excel_originals_show_as_text_and_tables_under_their_titles(
    browser: Any,  # noqa: F811
    team: TeamServer,
    office: dict[str, str],
    shots: Path,
    locale: str,
) -> None:
    tab = Tab(browser, team, "alice", locale=locale, viewport=DESKTOP)
    page = tab.page
    try:
        page.click("#tab-docs")
        row = page.locator("#doc-rows tr", has_text="travel-v3.docx")
        row.wait_for()
        assert row.locator("a.doc-link").inner_text() == "Travel Policy"  # its heading
        row.locator("a.doc-link").click()
        viewer = page.locator("#original-viewer")
        viewer.locator(".viewer-html table").wait_for()
        assert viewer.locator("h2#original-title").inner_text() == "Travel Policy"
        shown = viewer.locator(".viewer-html").inner_text()
        assert "<script>window.__ran=1</script>" in shown and "onerror=" in shown  # as text
        assert viewer.locator(".viewer-html td", has_text="Shanghai").count() == 1
        assert viewer.locator("script, img, [onerror]").count() == 0
        page.wait_for_timeout(500)
        assert page.evaluate("window.__ran") is None
        tab.snap(f"trial-docx-desktop-{locale[:2]}.png", shots)
        page.keyboard.press("Escape")
        page.locator("#doc-rows tr", has_text="rates.xlsx").locator("a.doc-link").click()
        viewer.locator(".viewer-html td", has_text="Beijing").wait_for()
        assert tab.console == [], tab.console
    finally:
        tab.close()
