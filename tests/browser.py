"""Debian's chromium, headless, driven by Playwright for Python (no browser download):
shared by tests/test_ui_browser.py and bench/bench_ui.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str | None:
    """Debian's chromium, or None (then the browser tests skip, saying why)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if chromium_path() is None:
        return "Debian's chromium is not installed (apt-get install chromium; .ci/run does)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Playwright ``Browser``), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def sign_in_with_token(page: Any, token: str) -> None:
    """The sign-in form's "Use a token instead", then the token (exchanged for a session
    cookie by the page: web/app.js)."""
    page.wait_for_selector("#token:visible, #use-token:visible")
    if not page.locator("#token").is_visible():  # the form remembers the last choice
        page.click("#use-token")
    page.fill("#token", token)
    page.press("#token", "Enter")
