"""Issue 55 items 2 and 3 in a real headless Chromium against the team's ``langgraph dev``
(tests/team_server.py): an admin sets a password in the Admin view, the user signs in
with it on the page's form (a wrong one is said so), the session holds in every tab and
no script can read a credential; "use a token instead" exchanges a token for a session
and forgets it; signing out ends the session in every tab."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser import unavailable
from tests.team_server import TeamServer
from tests.test_ui_browser import Page, browser  # noqa: F401

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
PASSWORD = "bob's page password"
NO_CREDENTIAL = "sessionStorage.length + localStorage.length"


def test_a_password_set_by_an_admin_signs_in_on_the_page(
    browser: Any,  # noqa: F811
    team: TeamServer,
) -> None:
    root = Page(browser, team, None)
    root.sign_in("root")
    try:
        page = root.page
        assert page.evaluate(NO_CREDENTIAL) == 0  # the token was exchanged, not kept
        page.click("#tab-admin")
        page.locator("tr[data-user=bob] button.set-password").click()
        page.fill("#new-password", PASSWORD)
        page.press("#new-password", "Enter")
        page.wait_for_selector("#admin-state:has-text('Password set for bob')")
        assert PASSWORD not in page.content()
    finally:
        root.close()
    bob = Page(browser, team, None)
    try:
        page = bob.page
        page.wait_for_selector("#identity", state="visible")
        page.fill("#identity", "bob")
        page.fill("#password", "not bob's password")
        page.press("#password", "Enter")
        page.wait_for_selector("#signin-note:has-text('Wrong name or password')")
        assert page.input_value("#password") == ""  # not kept in the form either
        page.fill("#password", PASSWORD)
        page.press("#password", "Enter")
        page.wait_for_selector("#question", state="visible")
        assert page.evaluate(NO_CREDENTIAL) == 0
        assert "hybrid_rag_session" not in page.evaluate("document.cookie")  # HttpOnly
        other = bob.context.new_page()  # another tab of the same browser: signed in
        other.goto(f"{team.url}/ui/")
        other.wait_for_selector("#question", state="visible")
        page.click("#signout")
        page.wait_for_selector("#signin", state="visible")
        other.reload()
        other.wait_for_selector("#signin", state="visible")
    finally:
        bob.close()
