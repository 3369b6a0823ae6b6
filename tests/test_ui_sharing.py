"""Issue 55 items 4-7 in a real headless Chromium against the team's ``langgraph dev``
(tests/team_server.py: alice in group hr, bob, root an admin): a user's Keys view makes
a key shown once and revokes it; the Admin view lists groups with their members and edits
them, and lists everyone's keys; a document's owner shares it with a named colleague and
is never offered "Everyone"; a conversation shared with bob opens read-only for him, a
source he may not open shown as such."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.browser import unavailable
from tests.team_server import TeamServer
from tests.test_ui_browser import DOCS, Page, browser  # noqa: F401

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
FACT = "The winter retreat venue code is LARCH-7."
ASK = "What is the winter retreat venue code?"
DOC = "upload:retreat/venue.md"


def tab(browser: Any, team: TeamServer, user: str) -> Page:  # noqa: F811
    page = Page(browser, team, None)
    page.errors = []  # type: ignore[attr-defined]
    page.page.on("pageerror", lambda e: page.errors.append(str(e)))  # type: ignore[attr-defined]
    page.sign_in(user)
    return page


@pytest.fixture
def tabs(browser: Any, team: TeamServer) -> Iterator[Callable[[str], Page]]:  # noqa: F811
    """Opens a signed-in tab per user; each is checked for page errors and closed."""
    opened: list[Page] = []

    def open_tab(user: str) -> Page:
        opened.append(tab(browser, team, user))
        return opened[-1]

    yield open_tab
    for page in opened:
        assert not page.errors, page.errors  # type: ignore[attr-defined]
        page.close()


def test_a_user_makes_a_key_shown_once_and_revokes_it(tabs: Any, team: TeamServer) -> None:
    page = tabs("bob").page
    page.wait_for_selector("#tab-keys", state="visible")
    page.click("#tab-keys")
    page.fill("#key-name", "chat-client")
    page.select_option("#key-days", "30")
    page.click("#key-form button[type=submit]")
    page.wait_for_selector("#key-dialog[open] #new-key")
    key = page.input_value("#new-key")
    page.screenshot(  # the key shown once (revoked below, so the picture holds no live key)
        path=str(DOCS / "ui-keys-desktop-en.png")
    )
    page.click("#key-dialog button.primary")
    page.wait_for_selector("#my-keys td:text-is('chat-client')")
    assert key not in page.content()
    me = httpx.get(f"{team.url}/kb/me", headers={"x-api-key": key})
    assert me.json()["identity"] == "bob"
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Revoke: chat-client").click()
    page.wait_for_selector("#my-keys td:text-is('chat-client')", state="detached")
    assert httpx.get(f"{team.url}/kb/me", headers={"x-api-key": key}).status_code == 401


def test_the_admin_view_manages_groups_and_lists_everyones_keys(
    tabs: Any, team: TeamServer
) -> None:
    auth = {"Authorization": f"Bearer {team.tokens['alice']}"}
    httpx.post(f"{team.url}/auth/keys", json={"name": "alice-script"}, headers=auth)
    page = tabs("root").page
    page.click("#tab-admin")
    page.wait_for_selector("#admin-groups tr[data-group=hr] li[data-member=alice]")
    page.wait_for_selector("#admin-keys td:text-is('alice-script')")
    page.fill("#new-group", "legal")
    page.fill("#new-group-member", "bob")
    page.click("#group-form button[type=submit]")
    page.wait_for_selector("#admin-groups tr[data-group=legal] li[data-member=bob]")
    page.get_by_role("button", name="Delete: bob (legal)").click()
    page.wait_for_selector("#admin-groups tr[data-group=legal]", state="detached")


def upload(team: TeamServer, user: str) -> None:
    auth = {"Authorization": f"Bearer {team.tokens[user]}"}
    files = [("file", ("venue.md", f"# Winter retreat\n\n{FACT}\n".encode()))]
    job = httpx.post(
        f"{team.url}/kb/uploads", headers=auth, data={"folder": "retreat"}, files=files
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # bounded
        state = httpx.get(f"{team.url}/kb/jobs/{job.json()['job_id']}", headers=auth).json()[
            "state"
        ]
        if state in ("done", "failed"):
            assert state == "done"
            return
        time.sleep(0.5)
    raise AssertionError("upload not finished")


def test_a_conversation_and_then_its_document_are_shared_with_bob(
    tabs: Any, team: TeamServer
) -> None:
    upload(team, "alice")
    alice = tabs("alice")
    turn = alice.ask(ASK)
    assert turn.locator(".pill.internal").count() > 0
    page = alice.page
    page.click("#share-thread")
    page.fill("#share-with", "user:bob")
    page.click("#share-dialog button[type=submit]")
    page.wait_for_selector("#share-dialog", state="hidden")
    bob = tabs("bob").page
    bob.wait_for_selector("#shared-list li[data-thread] button")
    bob.click("#shared-list li[data-thread] button")
    bob.wait_for_selector("#shared-dialog[open] .question")
    assert bob.inner_text("#shared-dialog .question") == ASK
    assert "alice" in bob.inner_text("#shared-owner")
    withheld = bob.locator("#shared-dialog .pill.withheld")
    assert withheld.count() > 0 and "cannot open" in (withheld.first.get_attribute("title") or "")
    assert "venue.md" not in bob.inner_html("#shared-dialog")
    bob.screenshot(path=str(DOCS / "ui-shared-desktop-en.png"))
    bob.click("#shared-dialog button.primary")
    # alice shares the document itself: never offered "Everyone"
    page.click("#tab-docs")
    assert page.locator("#acl-public").is_hidden()
    page.get_by_role("button", name="Share: retreat/venue.md").click()
    page.fill("#share-principal", "user:bob")
    page.click("#doc-share-dialog button[type=submit]")
    page.wait_for_selector("#doc-share-dialog li[data-principal='user:bob']")
    bob.click("#shared-list li[data-thread] button")
    bob.wait_for_selector("#shared-dialog[open] .question")
    assert bob.locator("#shared-dialog .pill.withheld").count() == 0
    # deleting the conversation in the page stops sharing it
    thread = bob.get_attribute("#shared-list li[data-thread]", "data-thread")
    page.evaluate("async (id) => (await import('/ui/api.js')).deleteThread(id)", thread)
    auth = {"Authorization": f"Bearer {team.tokens['bob']}"}
    shared = httpx.get(f"{team.url}/kb/shared", headers=auth).json()["threads"]
    assert thread not in [t["thread_id"] for t in shared]
    assert httpx.get(f"{team.url}/kb/shared/{thread}", headers=auth).status_code == 404
